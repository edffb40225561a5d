"""helpers.sphinx_tables in a tiny Sphinx build with MyST-NB: a code cell's table named `tbl-...` is numbered as a
table, caption above, and {numref} links to it as "Table N"; figures keep their own sequence."""

import re

import nbformat
import pytest
from bs4 import BeautifulSoup

pytest.importorskip("myst_nb")
from sphinx_build import build_html  # noqa: E402

TABLE_HTML = "<table class='dataframe'><tr><th>n</th><td>64</td></tr></table>"


def output_cell(name: str, caption: str, html: str):
    cell = nbformat.v4.new_code_cell("plotting.table(frame)")
    cell.metadata = {"mystnb": {"figure": {"name": name, "caption": caption}}}
    cell.outputs = [nbformat.v4.new_output("display_data", {"text/html": html})]
    return cell


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    src = tmp_path_factory.mktemp("src")
    (src / "conf.py").write_text(
        'extensions = ["myst_nb", "helpers.sphinx_tables"]\nnb_execution_mode = "off"\nnumfig = True\n'
        'numfig_format = {"figure": "Figure %s", "table": "Table %s"}\n')
    (src / "index.md").write_text("# Book\n\n```{toctree}\n:numbered:\nchapter\n```\n")
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                           "language": "python"}})
    nb.cells = [nbformat.v4.new_markdown_cell("# Chapter\n\nSee {numref}`tbl-second`, {numref}`tbl-first` and "
                                              "{numref}`fig-one`."),
                output_cell("tbl-first", "The first table.", TABLE_HTML),
                output_cell("fig-one", "A figure.", "<p>not a table</p>"),
                output_cell("tbl-second", "The second table.", TABLE_HTML)]
    nbformat.write(nb, src / "chapter.ipynb")
    out = tmp_path_factory.mktemp("html")
    build_html(src, out)
    return BeautifulSoup((out / "chapter.html").read_text(), "html.parser")


def test_tables_are_numbered_in_their_own_sequence_with_the_caption_first(page):
    first, second = page.find(id="tbl-first"), page.find(id="tbl-second")
    for element, number, text in [(first, "1.1", "The first table."), (second, "1.2", "The second table.")]:
        assert element.name == "figure" and "output-table" in element["class"]
        caption = element.find(class_="caption-number")
        assert caption.get_text(strip=True) == f"Table {number}"
        assert text in element.find("figcaption").get_text()
        html = str(element)
        assert html.index("<figcaption") < html.index("<table"), "the caption sits above the table"
        assert element.find("figcaption").find("table") is None, "the caption is closed before the table"
        assert html.count("<figcaption") == html.count("</figcaption>") == 1
    assert page.find(id="fig-one").find(class_="caption-number").get_text(strip=True) == "Figure 1.1"


def test_numref_renders_table_numbers_as_links(page):
    refs = {a["href"]: re.sub(r"\s+", " ", a.get_text()).strip() for a in page.select("a.reference.internal")
            if "#" in a.get("href", "")}
    assert refs["#tbl-second"] == "Table 1.2" and refs["#tbl-first"] == "Table 1.1"
    assert refs["#fig-one"] == "Figure 1.1"
