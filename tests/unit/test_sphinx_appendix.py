"""helpers.sphinx_appendix in a tiny Sphinx build: a figure of a page outside the numbered toctree is "Figure A.1" in
its caption and in a {numref} from a chapter, while the chapter's own figures keep "Figure 1.1"."""

import re

import pytest
from bs4 import BeautifulSoup

from helpers.sphinx_appendix import lettered

pytest.importorskip("myst_nb")
from sphinx_build import build_html  # noqa: E402


def figure(name: str, caption: str) -> str:
    return f"```{{figure}} pixel.png\n:name: {name}\n\n{caption}\n```\n"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    src = tmp_path_factory.mktemp("src")
    (src / "conf.py").write_text(
        'extensions = ["myst_nb", "helpers.sphinx_appendix"]\nnb_execution_mode = "off"\nnumfig = True\n'
        'numfig_format = {"figure": "Figure %s"}\nappendix_letters = {"appendix": "A"}\n')
    (src / "pixel.png").write_bytes(bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6300010000050001a5f645400000000049454e44ae426082"))
    (src / "index.md").write_text("# Book\n\n```{toctree}\n:numbered:\nchapter\n```\n\n"
                                  "```{toctree}\nappendix\n```\n")
    (src / "chapter.md").write_text("# Chapter\n\nSee {numref}`fig-late` and {numref}`fig-own`.\n\n"
                                    + figure("fig-own", "The chapter's figure."))
    (src / "appendix.md").write_text("# Appendix\n\n" + figure("fig-early", "First.") + "\n"
                                     + figure("fig-late", "Second."))
    out = tmp_path_factory.mktemp("html")
    build_html(src, out)
    return {name: BeautifulSoup((out / f"{name}.html").read_text(), "html.parser") for name in ("chapter", "appendix")}


def caption_number(page, name: str) -> str:
    return page.find(id=name).find(class_="caption-number").get_text(strip=True)


def test_the_appendix_figures_carry_its_letter_and_the_chapter_keeps_its_number(built):
    assert caption_number(built["appendix"], "fig-early") == "Figure A.1"
    assert caption_number(built["appendix"], "fig-late") == "Figure A.2"
    assert caption_number(built["chapter"], "fig-own") == "Figure 1.1"


def test_numref_from_a_chapter_uses_the_lettered_number(built):
    refs = {a["href"]: re.sub(r"\s+", " ", a.get_text()).strip() for a in built["chapter"].select("a.reference.internal")
            if "#" in a.get("href", "")}
    assert refs["appendix.html#fig-late"] == "Figure A.2" and refs["#fig-own"] == "Figure 1.1"


def test_lettered_counts_each_type_in_page_order_and_leaves_chapter_numbers_alone():
    numbers = {"figure": {"b": (2,), "a": (1,), "kept": (3, 1)}, "table": {"t": (7,)}}
    assert lettered(numbers, "B") == {"figure": {"b": ("B", 2), "a": ("B", 1), "kept": (3, 1)},
                                      "table": {"t": ("B", 1)}}
