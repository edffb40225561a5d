"""Fixtures of the browser checks: the quick book served on localhost, and Debian's Chromium driven by Playwright."""

import functools
import http.server
import os
import shutil
import threading
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
BROWSER_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync"]
VIEWPORT = {"width": 1400, "height": 900}  # the width the house style is measured at


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="session")
def server(built_book):
    handler = functools.partial(_QuietHandler, directory=str(built_book))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture(scope="session")
def chromium():
    """Debian's Chromium; skips without it, except in CI, where it fails."""
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed (apt-get install chromium); CI must run the browser tests")
        pytest.skip("chromium is not installed: apt-get install chromium (Debian) to run the browser tests")
    return CHROMIUM


@pytest.fixture(scope="session")
def browser(chromium):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        instance = p.chromium.launch(executable_path=chromium, args=BROWSER_ARGS)
        yield instance
        instance.close()


@pytest.fixture(scope="session")
def open_page(browser, server):
    """A function that opens a `_toc.yml` entry at 1400 px and waits for MathJax (where the page has maths) and
    every image; `listen(page)` is called before the page loads, to attach event handlers."""

    def opener(entry: str, listen=None):
        page = browser.new_page(viewport=VIEWPORT)
        if listen:
            listen(page)
        page.goto(f"{server}/{entry}.html", wait_until="load")
        if page.evaluate("() => !!document.querySelector('script[src*=\"mathjax\"]')"):  # only pages with maths
            page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=30000)
            page.evaluate("() => MathJax.startup.promise")
        page.wait_for_function("() => Array.from(document.images).every(i => i.complete)", timeout=30000)
        return page

    return opener


if os.environ.get("BOOK_HTML_DIR"):  # check an HTML build you already have (while writing a chapter), not a new quick book
    @pytest.fixture(scope="session")
    def built_book():
        return Path(os.environ["BOOK_HTML_DIR"]).resolve()
