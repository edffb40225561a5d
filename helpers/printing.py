"""The whole book as one PDF: the single-page HTML build printed by the system Chromium after MathJax ran, with a
contents page, numbered pages and bookmarks.

Chromium cannot number a contents page itself (no CSS `target-counter`), so the book is printed twice: first with
the contents laid out but invisible (so every page falls where it will fall), to find the page of each heading;
then with those numbers filled in. Bookmarks point at the same pages.
"""

import logging
import shutil
from pathlib import Path

from . import paths

PDF_NAME = "attention-rank-book.pdf"
PAGE_FOOTER = ('<div style="width: 100%; font-size: 8px; text-align: center; color: #555;">'
               '<span class="pageNumber"></span> / <span class="totalPages"></span></div>')
# The PDF is for reading: code cells (visible or collapsed) and the navigation are left out; outputs stay. Each of
# the book's pages (chapters, ledger, appendix) starts a new sheet, and no heading is split or left alone at the
# foot of a sheet. Tables
# are set small and may run over pages (a row never splits), so a wide table such as the claims ledger keeps its
# columns readable instead of becoming one row per page.
PRINT_CSS = """
.cell_input, details.hide.above-input, .bd-header, .bd-sidebar-primary, .bd-sidebar-secondary, .bd-footer,
.prev-next-area, .header-article, .headerlink { display: none !important; }
figure, .cell_output img { break-inside: avoid; }
span[id^="document-"] + section { break-before: page; }   /* every page of the book starts a new sheet */
h1, h2, h3, h4 { break-inside: avoid; break-after: avoid; }
table { font-size: 7.5pt !important; line-height: 1.3 !important; width: 100% !important; }
table th, table td { padding: 2px 5px !important; }
tr { break-inside: avoid; }
.print-contents { break-before: page; break-after: page; }
.print-contents h2 { margin-top: 0; }
.print-contents ol { list-style: none; padding-left: 0; }
.print-contents li { display: flex; gap: 0.5em; margin: 0.25em 0; }
.print-contents li .leader { flex: 1; border-bottom: 1px dotted #999; margin-bottom: 0.3em; }
.print-contents li .page { min-width: 2.5em; text-align: right; font-variant-numeric: tabular-nums; }
"""

# The headings of the printed page, in order, as (level, text, the words before its first formula). In the
# single-page build the book's title is the h1, the intro's sections and the chapters are h2, and their sections h3.
HEADINGS_JS = """() => Array.from(document.querySelectorAll('main h1, main h2, main h3')).map(h => {
    const copy = h.cloneNode(true);
    copy.querySelectorAll('.headerlink').forEach(e => e.remove());   // maths keeps its MathML text
    const text = copy.textContent.replace(/\\s+/g, ' ').trim();
    const maths = copy.querySelector('mjx-container');                 // the words before the first formula
    let before = text;
    if (maths) { const r = document.createRange(); r.setStart(copy, 0); r.setEndBefore(maths);
                 before = r.toString().replace(/\\s+/g, ' ').trim(); }
    return [Number(h.tagName[1]), text, before];
})"""

# The contents page, after the book's title: one line per chapter-level heading, its page number a placeholder of
# the same width until `FILL_CONTENTS_JS`; invisible until then, so the first printing lays it out without printing
# its titles (which would otherwise be found as the chapters' pages).
CONTENTS_JS = """(titles) => {
    const nav = document.createElement('nav');
    nav.className = 'print-contents';
    nav.style.visibility = 'hidden';
    const heading = document.createElement('p');
    heading.innerHTML = '<strong>Contents</strong>';
    nav.appendChild(heading);
    const list = document.createElement('ol');
    for (const title of titles) {
        const item = document.createElement('li');
        item.innerHTML = '<span class="title"></span><span class="leader"></span><span class="page">000</span>';
        item.querySelector('.title').textContent = title;
        list.appendChild(item);
    }
    nav.appendChild(list);
    document.querySelector('main h1').after(nav);
}"""
FILL_CONTENTS_JS = """(pages) => {
    const nav = document.querySelector('nav.print-contents');
    nav.querySelectorAll('.page').forEach((span, i) => { span.textContent = pages[i]; });
    nav.style.visibility = 'visible';
}"""
CONTENTS_LEVEL = 2   # chapters (and the introduction's sections) in the single-page build
PREFIX = 40          # characters (spaces left out) of a title that identify it on a page


def print_book(root: Path | None = None) -> Path:
    """Build the HTML and single-page books under `root` and print the whole book to `_build/pdf/`; also copied into
    the HTML build (`_build/html/_static/`), where the introduction links it. Works offline: MathJax and every
    figure are files of the build."""
    from . import book

    root = Path(root or paths.ROOT)
    if book.build(root, "html") != 0 or book.build(root, "singlehtml") != 0:
        raise RuntimeError("the single-page build failed (see the log above)")
    # The root document holds the whole book; its links are relative to the build's top folder, so print it from there.
    single = root / "_build" / "singlehtml"
    page = single / "whole-book.html"
    shutil.copy2(single / "book" / "intro.html", page)
    out = root / "_build" / "pdf" / PDF_NAME
    out.parent.mkdir(parents=True, exist_ok=True)
    draft = out.with_name(f".{PDF_NAME}.draft")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise RuntimeError("make pdf needs Chromium: apt-get install chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
        tab = browser.new_page()
        tab.goto(page.as_uri(), wait_until="load")
        tab.wait_for_function("() => !window.MathJax || (MathJax.startup && MathJax.startup.promise)", timeout=60000)
        tab.evaluate("() => window.MathJax ? MathJax.startup.promise : null")
        tab.wait_for_function("() => Array.from(document.images).every(i => i.complete)", timeout=60000)
        tab.add_style_tag(content=PRINT_CSS)
        tab.emulate_media(media="print")
        headings = [(int(level), title, before) for level, title, before in tab.evaluate(HEADINGS_JS)]
        chapters = [title for level, title, _ in headings if level == CONTENTS_LEVEL]
        tab.evaluate(CONTENTS_JS, chapters)
        _print(tab, draft)
        located = heading_pages(draft, headings)
        pages = {title: page for level, title, page in located if level == CONTENTS_LEVEL}
        tab.evaluate(FILL_CONTENTS_JS, [str(pages[t] + 1) if t in pages else "–" for t in chapters])
        _print(tab, out)
        browser.close()
    draft.unlink()
    add_bookmarks(out, located)
    if book.build(root, "html") != 0:   # again, now that the intro can link the PDF
        raise RuntimeError("the HTML build after printing failed (see the log above)")
    html_static = root / "_build" / "html" / "_static"
    if html_static.exists():
        shutil.copy2(out, html_static / PDF_NAME)
    print(f"Wrote {out}")
    return out


def _print(tab, path: Path) -> None:
    tab.pdf(path=str(path), format="A4", print_background=True, display_header_footer=True,   # numbered pages
            header_template="<span></span>", footer_template=PAGE_FOOTER,
            margin={"top": "18mm", "bottom": "18mm", "left": "16mm", "right": "16mm"})


def _squeezed(text: str) -> str:
    """Text without whitespace, lower case, ligatures undone ("ﬁ" -> "fi"): a heading matches the page text however
    its lines wrapped."""
    import unicodedata

    return "".join(unicodedata.normalize("NFKC", text).split()).lower()


def heading_pages(path: Path, headings: list[tuple[int, str, str]]) -> list[tuple[int, str, int]]:
    """The page (0-based) of each heading (level, text, its words before the first formula): the first page from
    the previous heading's page on whose text it appears. A heading found on no page is left out; a title printed
    twice in a row (the page's and its section's) counts once."""
    from pypdf import PdfReader

    logging.getLogger("pypdf").setLevel(logging.ERROR)   # Chromium's trailer size is off by a few objects: harmless
    pages = [_squeezed(page.extract_text() or "") for page in PdfReader(path).pages]
    located, start, previous = [], 0, None
    for level, title, before in headings:
        key = _squeezed(title)
        if (level, key) == previous:
            continue
        previous = (level, key)
        # a formula prints in other characters than its MathML text: then the words before it must match; and where
        # the extracted text interleaves a long title with its page's formulas, its first PREFIX characters
        probes = [key] + ([_squeezed(before)] if len(_squeezed(before)) >= 6 and before != title else [])
        probes += [key[:PREFIX]] if len(key) > PREFIX else []
        page = next((i for probe in probes for i in range(start, len(pages)) if probe in pages[i]), None)
        if page is not None:
            located.append((level, title, page))
            start = page
    return located


def add_bookmarks(path: Path, located: list[tuple[int, str, int]]) -> int:
    """Add a bookmark (PDF outline entry) for each (level, title, page), nested by level. Rewrites `path`
    atomically; returns how many bookmarks were added. (Chromium's own outline runs the words of a wrapped heading
    together, so the outline is built here from the headings' text.)"""
    from pypdf import PdfReader, PdfWriter

    from .cache import write_atomic

    logging.getLogger("pypdf").setLevel(logging.ERROR)
    writer = PdfWriter(clone_from=PdfReader(path))
    parents = {}
    for level, title, page in located:
        parents[level] = writer.add_outline_item(title, page, parent=parents.get(level - 1))
    write_atomic(path, writer.write, mode="wb")
    return len(located)
