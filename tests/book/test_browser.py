"""The rendered quick book in headless Chromium (Debian's system browser, driven by Playwright).

For every `_toc.yml` page: maths rendered by MathJax with no raw TeX left, every image loaded, no console
errors, no request leaving the machine, no empty glue. One screenshot per page (1400 px wide) goes to
`_build/screenshots/`. The house-style checks (legibility, alt text, references, tables) are in test_house_style.py.
"""

from urllib.parse import urlparse

import pytest

from helpers import paths
from helpers.book import toc_entries
from helpers.sphinx_typography import CLOSING, OPENING

pytestmark = pytest.mark.book


PAGE_STATE = """() => {
  const skip = el => el.closest('pre, code, .cell_input, script, style, mjx-container, .MathJax');
  const walker = document.createTreeWalker(document.querySelector('main') || document.body, NodeFilter.SHOW_TEXT);
  let text = '';
  while (walker.nextNode()) { if (!skip(walker.currentNode.parentElement)) text += walker.currentNode.nodeValue + ' '; }
  return {
    mathSource: document.querySelectorAll('.math, span.math, div.math').length,
    mathRendered: document.querySelectorAll('mjx-container').length,
    rawTex: ['$$', '\\\\(', '\\\\[', '\\\\frac', '\\\\begin{'].filter(t => text.includes(t)),
    images: Array.from(document.images).map(i => ({src: i.src.split('/').pop(), width: i.naturalWidth})),
    emptyGlue: Array.from(document.querySelectorAll('.pasted-text, .pasted-inline')).filter(e => !e.textContent.trim()).length,
    glue: document.querySelectorAll('.pasted-text, .pasted-inline').length,
  };
}"""


@pytest.mark.parametrize("entry", toc_entries())
def test_page_renders_offline(open_page, entry):
    errors, outside = [], []

    def listen(page):
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("request", request)
        page.on("response", lambda resp: errors.append(f"HTTP {resp.status} for {resp.url}") if resp.status >= 400 else None)

    def request(req):
        url = urlparse(req.url)
        if url.scheme in ("http", "https", "ws", "wss") and url.hostname not in ("127.0.0.1", "localhost"):
            outside.append(req.url)

    page = open_page(entry, listen)
    state = page.evaluate(PAGE_STATE)
    shots = paths.BUILD_DIR / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shots / f"{entry.replace('/', '_')}.png"), full_page=True)
    page.close()

    assert state["mathSource"] == 0 or state["mathRendered"] > 0, "maths present but MathJax rendered nothing"
    assert not state["rawTex"], f"raw TeX left in the page: {state['rawTex']}"
    assert all(img["width"] > 0 for img in state["images"]), f"broken images: {state['images']}"
    assert state["emptyGlue"] == 0, "empty glue in the page"
    assert not errors, f"console errors: {errors}"
    assert not outside, f"requests left the machine: {outside}"


# Inline formulas whose touching punctuation ("n." or "(n") a line break separates: the first character after the
# formula starts left of its right edge (a new line), or the last one before it ends right of its left edge. The
# punctuation is the extension's own (`sphinx_typography.OPENING`, `CLOSING`), passed in as strings.
PARTED_FORMULAS = r"""([opening, closing]) => {
  const parted = [];
  for (const host of document.querySelectorAll('main span.math')) {
    const box = host.querySelector('mjx-container');
    if (!box) continue;
    const a = box.getBoundingClientRect();
    if (!a.width) continue;                       // hidden (a collapsed cell)
    const next = host.nextSibling, prev = host.previousSibling, r = document.createRange();
    if (next && next.nodeType === 3 && closing.includes(next.nodeValue[0])) {
      r.setStart(next, 0); r.setEnd(next, 1);
      const p = r.getBoundingClientRect();
      if (p.left < a.right - 2 || p.top > a.bottom) parted.push(host.parentElement.innerText.slice(0, 60));
    }
    if (prev && prev.nodeType === 3 && prev.nodeValue && opening.includes(prev.nodeValue.slice(-1))) {
      r.setStart(prev, prev.nodeValue.length - 1); r.setEnd(prev, prev.nodeValue.length);
      const p = r.getBoundingClientRect();
      if (p.right > a.left + 2 || a.top > p.bottom) parted.push(host.parentElement.innerText.slice(0, 60));
    }
  }
  return parted;
}"""
WIDTHS = (1400, 1250, 1100, 950, 800, 650)   # the line breaks move with the width: on the old pages 37 were parted


@pytest.mark.parametrize("entry", toc_entries())
def test_no_line_break_parts_a_formula_from_its_punctuation(open_page, entry):
    """helpers.sphinx_typography binds them; checked as laid out, at several widths."""
    page = open_page(entry)
    parted = []
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        parted += [(width, text) for text in page.evaluate(PARTED_FORMULAS, [OPENING, CLOSING])]
    page.close()
    assert not parted, f"formulas parted from their punctuation (width, paragraph): {parted[:5]}"


def test_introduction_states_each_finding_as_the_ledger_decided_it(open_page, built_book):
    """Each finding on the introduction is the ledger's status for its row, with its condition and a number."""
    import json

    from helpers import ledger

    recorded = json.loads((built_book.parent.parent / "book" / "_metrics" / "98_claims_ledger.json").read_text()
                          if (built_book.parent.parent / "book" / "_metrics").exists() else "{}")
    page = open_page("book/intro")
    items = page.evaluate("""() => Array.from(document.querySelectorAll('main li'))
        .filter(li => li.querySelector('.pasted-text, .pasted-inline')).map(li => li.innerText)""")
    findings = [r.finding for r in ledger.RULES if r.finding is not None]
    assert len(items) == len(findings) >= 5
    by_key = {f["key"]: f for f in recorded.get("values", {}).get("findings", [])}
    if recorded:
        assert set(by_key) == {f.key for f in findings}, "the ledger records every finding the introduction shows"
    for finding in findings:
        shown = [t for t in items if t.startswith(finding.lead)]
        assert len(shown) == 1, f"the introduction states the finding {finding.key!r} once"
        text = shown[0]
        assert finding.condition in text, finding.key
        assert any(ch.isdigit() for ch in text.split(finding.condition, 1)[1]), f"{finding.key} states no number"
        status = text[len(finding.lead):].strip()
        assert any(status.startswith(v) for v in ledger.STATUS_VERBS.values()), (finding.key, status[:60])
        if finding.key in by_key:   # the metrics of the build that made this page
            assert status.startswith(ledger.STATUS_VERBS[by_key[finding.key]["status"]]), finding.key


def test_explorer_moves_offline_and_shows_the_recorded_values(open_page, built_book):
    """Chapter 3c's explorer with every request outside the machine blocked: moving the n slider with the keyboard
    redraws the curve, and every readout at that grid point equals the chapter's recorded value to 3 digits."""
    import json
    import re

    blocked = []

    def listen(page):
        def route(r):
            url = urlparse(r.request.url)
            if url.scheme in ("http", "https", "ws", "wss") and url.hostname not in ("127.0.0.1", "localhost"):
                blocked.append(r.request.url)
                return r.abort()
            return r.continue_()
        page.route("**/*", route)

    metrics = json.loads((built_book.parent.parent / "book" / "_metrics" / "03c_margin_theory.json").read_text())
    predictions, codes = metrics["values"]["explorer_predictions"], metrics["values"]["explorer_codes"]
    page = open_page("book/03c_margin_theory", listen)
    curve = page.locator("#rank-explorer-curve")
    slider = page.locator("#rank-explorer-n")
    before = curve.get_attribute("d")
    n_before = int(page.locator("#rank-explorer-n-value").inner_text())
    slider.focus()
    page.keyboard.press("ArrowRight" if int(slider.get_attribute("value")) < int(slider.get_attribute("max"))
                        else "ArrowLeft")
    n = int(page.locator("#rank-explorer-n-value").inner_text())
    d = int(page.locator("#rank-explorer-d-value").inner_text())
    L = float(page.locator("#rank-explorer-L-value").inner_text())
    assert n != n_before and curve.get_attribute("d") != before, "moving n did not redraw the curve"

    def numbers(selector):
        return [float(x) for x in re.findall(r"\d+(?:\.\d+)?", page.locator(selector).inner_text())]

    def three_digits(x):
        return float(f"{x:.3g}")

    row = next(r for r in predictions if r["n"] == n and r["d_head"] == d)
    shown = numbers("#rank-explorer-rank")          # n, d_h, rank / n, rank, n, plateau
    assert shown[2] == three_digits(row["fraction"]) and shown[3] == three_digits(row["fraction"] * n)
    assert shown[5] == three_digits(1 - (1 - 1 / n) ** n)
    width = re.search(r"at dₕ = (\d+)", page.locator("#rank-explorer-width").inner_text())
    assert width and int(width.group(1)) == row["critical"]
    code = next(r for r in codes if r["n"] == n and r["L"] == L)
    text = page.locator("#rank-explorer-code").inner_text()
    if code["d_rand"] is None:
        assert "no dimension" in text
    else:
        assert numbers("#rank-explorer-code")[-1] == three_digits(code["d_rand"])
    page.close()
    assert not blocked, f"the explorer page asked the network for: {blocked}"
