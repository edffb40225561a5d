"""A strict in-process Sphinx build for the tests of the book's Sphinx extensions."""

from pathlib import Path


def build_html(src: Path, out: Path) -> None:
    """Build the project in `src` to HTML in `out`; a warning fails it. Run inside `docutils_namespace`, because
    docutils registers nodes globally and a second build in the same process would warn about them."""
    from sphinx.application import Sphinx
    from sphinx.util.docutils import docutils_namespace

    with docutils_namespace():
        Sphinx(str(src), str(src), str(out), str(out / ".doctrees"), "html", status=None, warning=None,
               warningiserror=True, freshenv=True).build()
