"""The rendered quick book in headless Chromium (Debian's system browser, driven by Playwright).

For every `_toc.yml` page: maths rendered by MathJax with no raw TeX left, every image loaded, no console
errors, no request leaving the machine, no empty glue. One screenshot per page goes to `_build/screenshots/`.
"""

import functools
import http.server
import os
import shutil
import threading
from urllib.parse import urlparse

import pytest

from helpers import paths
from helpers.book import toc_entries

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
BROWSER_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync"]

pytestmark = pytest.mark.book


@pytest.fixture(scope="module")
def server(built_book):
    handler = functools.partial(_QuietHandler, directory=str(built_book))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed (apt-get install chromium); CI must run the browser tests")
        pytest.skip("chromium is not installed: apt-get install chromium (Debian) to run the browser tests")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        instance = p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        yield instance
        instance.close()


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
def test_page_renders_offline(browser, server, entry):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors, outside = [], []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))

    def request(req):
        url = urlparse(req.url)
        if url.scheme in ("http", "https", "ws", "wss") and url.hostname not in ("127.0.0.1", "localhost"):
            outside.append(req.url)

    page.on("request", request)
    page.on("response", lambda resp: errors.append(f"HTTP {resp.status} for {resp.url}") if resp.status >= 400 else None)
    page.goto(f"{server}/{entry}.html", wait_until="load")
    if page.evaluate("() => !!document.querySelector('script[src*=\"mathjax\"]')"):  # Sphinx adds it only where there is maths
        page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=30000)
        page.evaluate("() => MathJax.startup.promise")
    page.wait_for_function("() => Array.from(document.images).every(i => i.complete)", timeout=30000)
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
