"""CITATION.cff is the one home of the book's citation: valid CFF fields, the same version and authors as
pyproject.toml, and the intro's "how to cite" page written from it."""

import tomllib

import yaml

from helpers import book, paths

REQUIRED = ("cff-version", "message", "title", "authors", "version", "date-released", "license")


def test_citation_file_has_the_cff_fields_and_agrees_with_pyproject():
    cff = yaml.safe_load((paths.ROOT / "CITATION.cff").read_text())
    assert all(key in cff for key in REQUIRED), [k for k in REQUIRED if k not in cff]
    project = tomllib.loads((paths.ROOT / "pyproject.toml").read_text())["project"]
    assert cff["version"] == project["version"]
    assert [a["name"] for a in cff["authors"]] == [a["name"] for a in project["authors"]]
    assert cff["license"] == project["license"]


def test_the_how_to_cite_page_is_written_from_the_citation_file(tmp_path):
    (tmp_path / "CITATION.cff").write_text((paths.ROOT / "CITATION.cff").read_text().replace(
        'version: "0.1.0"', 'version: "9.9.9"'))
    page = book.write_citation(tmp_path).read_text()
    assert "Version 9.9.9" in page and "version = {9.9.9}" in page       # read from the file, not typed in
    assert "On the Limitation and Redundancy of Transformers" in page and "@software{" in page
    assert "_generated/how_to_cite.md" in (paths.ROOT / "book" / "intro.md").read_text()


def test_the_intro_links_the_pdf_only_when_the_build_has_printed_it(tmp_path):
    page = book.write_pdf_link(tmp_path)
    assert "make pdf" in page.read_text() and "<a href" not in page.read_text()
    printed = tmp_path / "_build" / "pdf" / book.PDF_NAME
    printed.parent.mkdir(parents=True)
    printed.write_bytes(b"%PDF-1.4")
    assert f'<a href="../_static/{book.PDF_NAME}">' in book.write_pdf_link(tmp_path).read_text()
    assert "_generated/pdf_link.md" in (paths.ROOT / "book" / "intro.md").read_text()
