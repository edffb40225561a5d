"""`make pdf` on the quick book: enough pages, every numbered figure of the HTML build captioned and embedded,
and no raw TeX (MathJax typeset every formula before Chromium printed). Read with poppler-utils."""

import os
import re
import shutil
import subprocess
import sys

import pytest
from bs4 import BeautifulSoup

from helpers import book

pytestmark = pytest.mark.book
POPPLER = all(shutil.which(tool) for tool in ("pdfinfo", "pdftotext", "pdftocairo"))
RAW_TEX = ("$$", "\\frac", "\\begin{", "\\operatorname", "\\mathbb", "\\sqrt")


@pytest.fixture(scope="module")
def pdf(built_book, chromium):
    if not POPPLER:
        if os.environ.get("CI"):
            pytest.fail("poppler-utils is not installed (apt-get install poppler-utils); CI must check the PDF")
        pytest.skip("poppler-utils is not installed: apt-get install poppler-utils to check the PDF")
    root = built_book.parent.parent  # the book whose HTML build the other checks read
    # In its own process: Playwright's sync API cannot start while the browser fixture's session is running.
    subprocess.run([sys.executable, "-c", f"from helpers import printing; printing.print_book({str(root)!r})"],
                   check=True)
    return root / "_build" / "pdf" / book.PDF_NAME


def pages_text(path):
    """The text of every page, in order (pdftotext separates pages with a form feed)."""
    return subprocess.run(["pdftotext", "-layout", str(path), "-"], check=True, capture_output=True,
                          text=True).stdout.split("\f")


def has_figure(path, page: int, tmp_path) -> bool:
    """True when a page holds a figure: a raster image at least 200 px wide, at least 200 vector paths drawn
    outside the font definitions (a busy SVG figure, its text included, is a few hundred paths; a page of text ~50),
    or a light plot: at least 20 stroked paths (axes, ticks, lines; printed text has none) inside clip regions
    (matplotlib clips every axes; a text page has none). A 3-line marker plot measured 93 paths, 35 stroked, 14 clips."""
    svg_file = tmp_path / f"page{page}.svg"
    subprocess.run(["pdftocairo", "-svg", "-f", str(page), "-l", str(page), str(path), str(svg_file)], check=True)
    svg = svg_file.read_text()
    images = [int(w) for w in re.findall(r'<image[^>]*?width="(\d+)"', svg)]
    body = re.sub(r"<defs>.*?</defs>", "", svg, flags=re.S)
    paths = body.count("<path")
    stroked = len(re.findall(r"<path[^>]*stroke-width", body))
    return any(w >= 200 for w in images) or paths >= 200 or (stroked >= 20 and svg.count("<clipPath") >= 1)


def test_pdf_has_the_whole_book(pdf, built_book):
    info = subprocess.run(["pdfinfo", str(pdf)], check=True, capture_output=True, text=True).stdout
    n_pages = int(re.search(r"Pages:\s+(\d+)", info).group(1))
    assert n_pages >= 3 * len(book.toc_entries()), f"only {n_pages} pages"
    text = " ".join(" ".join(pages_text(pdf)).split())
    for entry in book.toc_entries():  # every page's title is in the PDF
        heading = BeautifulSoup((built_book / f"{entry}.html").read_text(), "html.parser").select_one("main h1")
        title = " ".join(heading.get_text(" ").replace("#", "").split())
        assert title in text, f"title {title!r} of {entry} not in the PDF"


def test_every_figure_is_captioned_and_embedded(pdf, built_book, tmp_path):
    html = "".join((built_book / f"{e}.html").read_text() for e in book.toc_entries())
    numbers = set(re.findall(r'<span class="caption-number">Figure (\d+\.\d+)', html))
    texts = pages_text(pdf)
    for number in sorted(numbers):
        pages = [i + 1 for i, t in enumerate(texts) if re.search(rf"(?m)^\s*Figure {re.escape(number)}\b", t)]
        assert pages, f"caption of Figure {number} not in the PDF"
        assert any(has_figure(pdf, q, tmp_path) for p in pages for q in (p, p - 1) if q >= 1), \
            f"Figure {number}: nothing drawn on its caption's page or the one before"


def test_no_raw_tex_in_the_pdf(pdf):
    text = "".join(pages_text(pdf))
    assert not [t for t in RAW_TEX if t in text], "raw TeX in the PDF"


def _squeezed(text: str) -> str:
    import unicodedata

    return "".join(unicodedata.normalize("NFKC", text).split()).lower()


def test_pdf_has_a_bookmark_per_chapter_and_numbered_pages(pdf, built_book):
    from pypdf import PdfReader

    reader = PdfReader(pdf)
    marks = {}

    def walk(items):
        for item in items:
            if isinstance(item, list):
                walk(item)
            else:
                marks.setdefault(" ".join(item.title.split()), reader.get_destination_page_number(item))
    walk(reader.outline)
    texts = pages_text(pdf)
    for entry in book.toc_entries():   # every chapter is a bookmark, pointing at a page that shows its title
        heading = BeautifulSoup((built_book / f"{entry}.html").read_text(), "html.parser").select_one("main h1")
        title = " ".join(heading.get_text(" ").replace("#", "").split())
        mark = next((m for m in marks if re.fullmatch(r"(\d+(\.\d+)*\. )?" + re.escape(title), m)), None)  # "3.6. "
        assert mark, f"no bookmark for {title!r} of {entry}"
        assert _squeezed(title) in _squeezed(texts[marks[mark]]), f"bookmark {mark!r} points at the wrong page"
    assert len(marks) > 3 * len(book.toc_entries()), "sections are bookmarked too"
    n = len(reader.pages)
    for i in sorted({0, n // 2, n - 1}):
        assert re.search(rf"(?m)^\s*{i + 1} / {n}\s*$", texts[i]), f"page {i + 1} has no page number"


def test_contents_page_lists_every_chapter_at_the_page_it_starts_on(pdf, built_book):
    """The printed contents (page 2) names every chapter of `_toc.yml` with a page number, and that page starts
    with the chapter's title."""
    import yaml

    texts = pages_text(pdf)
    assert texts[1].strip().startswith("Contents"), "page 2 is not the contents"
    listed = {}
    for line in texts[1].splitlines():
        match = re.fullmatch(r"\s*(.+?)\s{2,}(\d+)\s*", line)
        if match:
            listed[match.group(1)] = int(match.group(2))
    toc = yaml.safe_load((built_book.parent.parent / "_toc.yml").read_text())
    chapters = [c["file"] for part in toc["parts"] for c in part["chapters"]]
    for entry in chapters:
        heading = BeautifulSoup((built_book / f"{entry}.html").read_text(), "html.parser").select_one("main h1")
        title = " ".join(heading.get_text(" ").replace("#", "").split())
        line = next((t for t in listed if re.fullmatch(r"(\d+\. )?" + re.escape(title), t)), None)
        assert line, f"{title!r} is not in the contents"
        page = listed[line]
        assert _squeezed(texts[page - 1]).startswith(_squeezed(line)), f"{title!r}: page {page} does not start with it"
