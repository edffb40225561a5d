"""The strict build of the quick book has an HTML page for every `_toc.yml` entry, with maths left to MathJax."""

import re

import pytest

from helpers.book import toc_entries


@pytest.mark.book
@pytest.mark.parametrize("entry", toc_entries())
def test_page_built_without_raw_tex(built_book, entry):
    page = built_book / f"{entry}.html"
    assert page.exists(), f"no HTML for toc entry {entry}"
    html = page.read_text()
    body = re.sub(r"<(script|style)\b.*?</\1>", "", html, flags=re.S)
    assert "$$" not in body, f"raw $$ left in {entry}"
    assert "mathjax" in html.lower()
    assert "cdn.jsdelivr" not in html and "cdnjs" not in html, "MathJax must be served locally"


@pytest.mark.book
def test_mathjax_is_local(built_book):
    assert any((built_book / "_static").rglob("tex-chtml*.js")), "local MathJax bundle missing from _static"
