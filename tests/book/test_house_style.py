"""The house style (README, "House style") on every page of the quick book.

In Chromium at 1400 px: every figure image is shown at 70 % or more of its natural width (our figures all carry
text, sized for the column: a shrunk image has shrunk text), has an alt text that says something (not a hashed file
name), every "Figure N.M" reference links to a figure that exists, no table reaches past the content column or
scrolls (a full-width table slides under the page's contents panel; nor at 1366 px), and no display equation is cut
off (nor at 1280 and 1000 px). Without a browser: the prose has no "(s)" plurals, raw backticks, ASCII maths or e-notation
numbers, and every "Table N.M" in it is a table with that number (a link leads to it; a typed number is on the same page).
"""

import re

import pytest
from bs4 import BeautifulSoup

from helpers.book import toc_entries

pytestmark = pytest.mark.book

MIN_SHOWN_FRACTION = 0.7
# Besides 1,400 px, what must also fit narrower windows: tables at 1,366 px (a common laptop width; at 1,280 px four
# full-mode tables scroll), display maths at 1,280 px (both sidebars stay: the narrowest column) and 1,000 px.
NARROWER = {1366: "wideTables", 1280: "wideMaths", 1000: "wideMaths"}


def pages():
    """Every page of the table of contents: all of them follow the house style."""
    return toc_entries()


STYLE_STATE = """() => {
  const main = document.querySelector('main');
  const images = Array.from(main.querySelectorAll('img')).filter(i => i.naturalWidth > 32);
  const refs = Array.from(main.querySelectorAll('a')).filter(a => /^Figure \\d+\\.\\d+$/.test(a.textContent.trim()));
  return {
    shrunk: images.filter(i => i.getBoundingClientRect().width < %(fraction)s * i.naturalWidth)
                  .map(i => `${i.src.split('/').pop()}: ${Math.round(i.getBoundingClientRect().width)} of ${i.naturalWidth} px`),
    badAlt: images.map(i => i.getAttribute('alt') || '')
                  .filter(a => a.trim().split(/\\s+/).length < 4 || /[0-9a-f]{16}|\\.(png|svg|jpe?g)$/i.test(a)),
    figureRefs: refs.map(a => a.getAttribute('href')),
    unnumbered: Array.from(main.querySelectorAll('figure')).filter(f => !f.querySelector('.caption-number')).length,
    brokenRefs: Array.from(main.querySelectorAll('a')).filter(a => /^(Figure|Equation|Table) ?\\?+|^\\?\\?/.test(a.textContent.trim())).length
                + (main.textContent.match(/Figure \\?|\\?\\?\\?/g) || []).length,
    // a table must fit the content column itself: one that reaches into the margin slides under the page's contents
    // panel, and one in a scrolling box hides its last columns
    wideTables: Array.from(main.querySelectorAll('table')).filter(t => {
        const column = (t.closest('article') || main).getBoundingClientRect();
        let box = t.parentElement, scrolls = false;
        for (; box && box !== main; box = box.parentElement) {
          scrolls = scrolls || (box.scrollWidth > box.clientWidth + 1 && getComputedStyle(box).overflowX !== 'visible');
        }
        return scrolls || t.scrollWidth > t.parentElement.clientWidth + 1 || t.getBoundingClientRect().right > column.right + 1;
      }).map(t => (t.querySelector('th, td') || t).textContent.trim().slice(0, 40)),
    wideMaths: Array.from(main.querySelectorAll('mjx-container[display="true"]'))
                  .filter(m => m.scrollWidth > m.clientWidth + 1 || m.getBoundingClientRect().right > main.getBoundingClientRect().right + 1)
                  .map(m => m.textContent.slice(0, 40)),
  };
}""" % {"fraction": MIN_SHOWN_FRACTION}


@pytest.mark.parametrize("entry", pages())
def test_figures_legible_referenced_and_tables_fit(open_page, server, entry):
    page = open_page(entry)
    state = page.evaluate(STYLE_STATE)
    for width, key in NARROWER.items():
        page.set_viewport_size({"width": width, "height": 900})
        state[key] += [f"{text} (at {width} px)" for text in page.evaluate(STYLE_STATE)[key]]
    page.set_viewport_size({"width": 1400, "height": 900})
    targets = []
    for href in state["figureRefs"]:
        url, _, anchor = (href or "").partition("#")
        if url:
            page.goto(f"{server}/{entry.rsplit('/', 1)[0]}/{url}" if not url.startswith("/") else f"{server}{url}")
        targets.append((href, bool(anchor) and page.evaluate(
            "a => { const el = document.getElementById(a); return !!el && !!el.closest('figure'); }", anchor)))
    page.close()
    assert not state["shrunk"], f"figures shown below {MIN_SHOWN_FRACTION:.0%} of their width: {state['shrunk']}"
    assert not state["badAlt"], f"figures without a descriptive alt text: {state['badAlt']}"
    assert state["unnumbered"] == 0, "figures without a number (give them mystnb.figure.name and a caption)"
    assert state["brokenRefs"] == 0, "unresolved references (??) in the page"
    assert all(ok for _, ok in targets), f"Figure references that lead to no figure: {[h for h, ok in targets if not ok]}"
    assert not state["wideTables"], f"tables wider than the column: {state['wideTables']}"
    assert not state["wideMaths"], f"display maths cut off: {state['wideMaths']}"


# What the prose must not contain; the text of code, maths, code cells and plain-text outputs is left out.
PROSE_PATTERNS = {
    "(s) plural": re.compile(r"\w\(s\)"),
    "raw backtick": re.compile(r"`"),
    "ASCII maths": re.compile(r"\^|\(log n\)|\bsqrt\(|\bn\*\*"),   # "(log n)", not a ")" closing words
    "e-notation": re.compile(r"(?<![\w.])\d+(\.\d+)?e[-+]?\d+\b", re.I),
}
NOT_PROSE = "pre, code, script, style, .math, .cell_input, .output.text_plain, .output.stream, .highlight, mjx-container"


def prose_text(html: str) -> str:
    soup = BeautifulSoup(html, "html.parser")
    main = soup.find("main") or soup
    for element in main.select(NOT_PROSE):
        element.decompose()
    return main.get_text(" ")


@pytest.mark.parametrize("entry", pages())
def test_prose_has_no_templates_or_ascii_maths(built_book, entry):
    text = prose_text((built_book / f"{entry}.html").read_text())
    found = {name: sorted(set(m.group(0) for m in pattern.finditer(text)))[:5]
             for name, pattern in PROSE_PATTERNS.items() if pattern.search(text)}
    assert not found, f"{entry}: {found}"


def test_prose_check_finds_what_it_looks_for():
    page = ("<main><p>Each seed(s) gives 3.7e-07 and `rank` with a + b (log n)^2.</p>"
            "<pre>1e-05 ^ `x`</pre><span class='math'>n^2</span></main>")
    text = prose_text(page)
    assert "1e-05" not in text and "n^2" not in text
    assert {name for name, p in PROSE_PATTERNS.items() if p.search(text)} == set(PROSE_PATTERNS)
    ascii_maths = PROSE_PATTERNS["ASCII maths"]
    assert ascii_maths.search("a width of O(log n) dimensions") and ascii_maths.search("c sqrt(n)")
    assert not ascii_maths.search("(they point to growth faster than log n), and ln n in words")


# "Table N.M" in the prose: a {numref} link leads to the table with that number, and a number typed by hand is one
# that a table of the same page carries (README, "Tables").
TABLE_NUMBER = re.compile(r"\bTable (\d+(?:\.\d+)*)\b")


def table_numbers(soup) -> dict[str, str | None]:
    """{"3.1": "tbl-ch3-hull", ...}: the number of every numbered table of a page, with the id of the table."""
    found = {}
    for span in soup.select(".caption-number"):
        match = TABLE_NUMBER.search(span.get_text())
        if match:
            holder = span.find_parent(["figure", "table"])
            found[match.group(1)] = holder.get("id") if holder else None
    return found


def table_reference_problems(html: str, linked_page, typed: bool = True) -> list[str]:
    """Every "Table N.M" of a page that leads nowhere. `linked_page(url)` returns the soup of another page."""
    main = BeautifulSoup(html, "html.parser")
    main = main.find("main") or main
    problems = []
    for link in main.find_all("a"):
        match = TABLE_NUMBER.fullmatch(link.get_text(" ", strip=True))
        if match:
            url, _, anchor = (link.get("href") or "").partition("#")
            target = linked_page(url) if url else main
            if not anchor or table_numbers(target).get(match.group(1)) != anchor:
                problems.append(f"link {match.group(0)!r} -> {link.get('href')} is not that table")
    here = table_numbers(main)
    for element in main.select(f"a, .caption-number, {NOT_PROSE}"):
        element.decompose()
    if typed:
        problems += [f"typed {m.group(0)!r}, but no table of this page has that number"
                     for m in TABLE_NUMBER.finditer(main.get_text(" ")) if m.group(1) not in here]
    return problems


@pytest.mark.parametrize("entry", pages())
def test_table_numbers_in_the_prose_are_tables(built_book, entry):
    page = built_book / f"{entry}.html"

    def linked_page(url):
        return BeautifulSoup((page.parent / url).read_text(), "html.parser")

    problems = table_reference_problems(page.read_text(), linked_page)
    assert not problems, f"{entry}: {problems}"


def test_table_check_finds_what_it_looks_for():
    table = ('<figure class="output-table" id="{id}"><figcaption><p><span class="caption-number">Table {n} </span>'
             '<span class="caption-text">A table.</span></p></figcaption><table></table></figure>')
    page = ("<main>" + table.format(id="tbl-a", n="3.1") +
            '<p>See <a href="#tbl-a">Table 3.1</a>, <a href="#tbl-a">Table 3.2</a>, '
            '<a href="other.html#tbl-b">Table 4.1</a>, <a href="other.html#tbl-c">Table 4.2</a>, Table 3.1 and '
            'Table 3.4.</p><pre>Table 9.9</pre></main>')
    other = BeautifulSoup("<main>" + table.format(id="tbl-b", n="4.1") + "</main>", "html.parser")
    problems = table_reference_problems(page, lambda url: other)
    assert problems == ["link 'Table 3.2' -> #tbl-a is not that table",
                        "link 'Table 4.2' -> other.html#tbl-c is not that table",
                        "typed 'Table 3.4', but no table of this page has that number"]
    assert len(table_reference_problems(page, lambda url: other, typed=False)) == 2


REPEAT_WORDS = 12   # a run of this many words said twice on one page is the same statement twice


def main_prose(html: str) -> list[str]:
    """The words of a page's main text: captions, tables, code and maths left out."""
    soup = BeautifulSoup(html, "html.parser")
    main = soup.find("main") or soup
    for tag in main.find_all(["figcaption", "table", "pre", "code", "script", "style", "mjx-container", "nav",
                              "button"]):
        tag.decompose()
    for tag in main.select(".cell_input, .math, .caption, .admonition-title.collapsed, .toggle-hidden"):
        tag.decompose()
    words = re.findall(r"[^\s]+", main.get_text(" ").lower())
    return [w.strip(".,;:()[]\"'") for w in words if w.strip(".,;:()[]\"'")]


def repeated_runs(words: list[str], k: int = REPEAT_WORDS) -> list[str]:
    """Runs of k words that occur twice without overlapping."""
    first, found = {}, []
    for i in range(len(words) - k + 1):
        key = tuple(words[i:i + k])
        if key in first and i - first[key] >= k:
            found.append(" ".join(key))
        first.setdefault(key, i)
    return found


def test_repeated_runs_finds_a_statement_said_twice():
    said = "the rank of a random head stays below the barrier at every n we tried".split()
    assert repeated_runs(said + ["and"] + said)
    assert not repeated_runs(said + ["and"] + said[:11])


@pytest.mark.parametrize("entry", pages())
def test_no_statement_is_made_twice_on_a_page(built_book, entry):
    runs = repeated_runs(main_prose((built_book / f"{entry}.html").read_text()))
    assert not runs, f"{entry}: {len(runs)} runs of {REPEAT_WORDS} words appear twice, e.g. {runs[0]!r}"


def citation_mismatches(pages: dict[str, str]) -> list[str]:
    """Citations whose text differs from the label of the reference they link to: {page: html} of the build."""
    soups = {name: BeautifulSoup(html, "html.parser") for name, html in pages.items()}
    problems = []
    for name, soup in soups.items():
        for link in soup.select("span.bibtex-citation a[href]"):
            target_page, _, anchor = link["href"].partition("#")
            target = soups.get(target_page.removesuffix(".html") or name)
            entry = target.find(id=anchor) if target else None
            label = entry.select_one("span.label") if entry else None
            cited = " ".join(link.get_text(" ").split()).replace(" ,", ",")
            label_text = " ".join(label.get_text(" ").split()).strip("[] ") if label else None
            textual = re.fullmatch(r"\d{4}[a-z]?", cited)   # {cite:t}: "Dong et al. [2021]" links the year
            if label_text is None or not (label_text == cited or textual and label_text.endswith(f", {cited}")):
                problems.append(f"{name}: {cited!r} -> {label.get_text() if label else 'no reference'!r}")
    return problems


def test_each_citation_reads_as_the_label_of_its_reference(built_book):
    """[Vaswani et al., 2017] in the text is [Vaswani et al., 2017] in the references, not [VSP+17]."""
    pages = {entry.split("/")[-1]: (built_book / f"{entry}.html").read_text() for entry in toc_entries()}
    problems = citation_mismatches(pages)
    assert not problems, problems[:5]
    assert sum(p.count('class="bibtex-citation"') for p in pages.values()) >= 10, "fewer citations than expected"


def test_citation_check_finds_a_mismatch():
    page = ('<main><span class="bibtex-citation">[<a href="#id1">Vaswani <em>et al.</em>, 2017</a>]</span>'
            '<div class="citation" id="id1"><span class="label">[VSP+17]</span></div></main>')
    assert citation_mismatches({"intro": page}) == ["intro: 'Vaswani et al., 2017' -> '[VSP+17]'"]
    good = page.replace("VSP+17", "Vaswani et al., 2017")
    assert citation_mismatches({"intro": good}) == []
