"""helpers.sphinx_typography: the space between a number and "%" cannot break, in the prose and after a pasted
(glued) value, while code, literal text and maths keep their spaces; checked on docutils trees and in a tiny
Sphinx build."""

import pytest
from bs4 import BeautifulSoup
from docutils import nodes

from helpers.sphinx_typography import NO_BREAK, NO_WRAP, bind_math_punctuation, bind_spaces


def paragraph(*children) -> nodes.paragraph:
    return nodes.paragraph("", "", *children)


def test_a_space_between_a_number_and_percent_cannot_break():
    tree = paragraph(nodes.Text("95 % of seeds, and 12.5 % of rows"))
    assert bind_spaces(tree) == 2
    assert tree.astext() == f"95{NO_BREAK}% of seeds, and 12.5{NO_BREAK}% of rows"


def test_a_pasted_number_followed_by_its_percent_sign_is_bound():
    # what {glue:text}`ch5_agree_bound` % becomes: the value in an inline node, then " % of all seeds"
    tree = paragraph(nodes.Text("up to "), nodes.inline("", "63"), nodes.Text(" % of all seeds"))
    assert bind_spaces(tree) == 1
    assert tree.astext() == f"up to 63{NO_BREAK}% of all seeds"


def test_a_symbol_set_to_a_number_stays_on_one_line():
    tree = paragraph(nodes.Text("copy at n = 256 and "), nodes.math("", "d"), nodes.Text(" = 32"))
    assert bind_spaces(tree) == 4   # two in the text, two after the maths symbol
    assert tree.astext() == f"copy at n{NO_BREAK}={NO_BREAK}256 and d{NO_BREAK}={NO_BREAK}32"


def test_words_code_and_maths_keep_their_spaces():
    tree = paragraph(nodes.Text("the rest % is text; "), nodes.literal("", "print(5 % 3)"),
                     nodes.math("", r"50 \% "), nodes.inline("", "n"), nodes.Text(" % 2"))
    block = nodes.literal_block("", "x = 7 % 2")
    section = nodes.section("", tree, block)
    before = section.astext()
    assert bind_spaces(section) == 0
    assert section.astext() == before


def groups(tree) -> list[str]:
    return [g.astext() for g in tree.findall(nodes.inline) if NO_WRAP in g["classes"]]


def test_a_formula_and_the_punctuation_touching_it_share_one_unbreakable_span():
    tree = paragraph(nodes.Text("grow with "), nodes.math("", "n"), nodes.Text(". With "), nodes.math("", "L"),
                     nodes.Text(" fixed ("), nodes.math("", "L = 9"), nodes.Text("), and "), nodes.math("", "d"),
                     nodes.Text(":"))
    before = tree.astext()
    assert bind_math_punctuation(tree) == 3          # L has spaces on both sides: it may break there
    assert groups(tree) == ["n.", "(L = 9),", "d:"]   # the run ")," goes with the formula, the space stays outside
    assert tree.astext() == before                    # not a character added, lost or moved
    assert [type(c).__name__ for c in tree.children] == ["Text", "inline", "Text", "math", "Text", "inline",
                                                         "Text", "inline"]
    assert bind_math_punctuation(tree) == 0          # once bound, a formula is left as it is


def test_repeated_text_around_formulas_is_split_where_it_touches_them():
    # Text nodes compare as strings: the two ". " nodes must each be split in their own place
    tree = paragraph(nodes.math("", "a"), nodes.Text(". "), nodes.math("", "b"), nodes.Text(". "),
                     nodes.Text("("), nodes.math("", "c"))
    assert bind_math_punctuation(tree) == 3
    assert groups(tree) == ["a.", "b.", "(c"]
    assert tree.astext() == "a. b. (c"


pytest.importorskip("myst_nb")
from sphinx_build import build_html  # noqa: E402


def test_the_built_page_binds_percent_signs_and_the_punctuation_of_formulas(tmp_path):
    src, out = tmp_path / "src", tmp_path / "html"
    src.mkdir()
    (src / "conf.py").write_text('extensions = ["myst_nb", "helpers.sphinx_typography"]\nnb_execution_mode = "off"\n'
                                   'myst_enable_extensions = ["dollarmath"]\n')
    (src / "index.md").write_text("# Page\n\nAbout 63 % of seeds, and $n$.\n\n```python\nx = 7 % 2\n```\n")
    build_html(src, out)
    page = BeautifulSoup((out / "index.html").read_text(), "html.parser")
    assert f"About 63{NO_BREAK}% of seeds, and" in page.find("p").get_text()
    assert page.find(class_="highlight").get_text().strip() == "x = 7 % 2"
    bound = page.find("span", class_=NO_WRAP)
    assert bound is not None and bound.get_text() == r"\(n\)." and bound.find("span", class_="math") is not None
