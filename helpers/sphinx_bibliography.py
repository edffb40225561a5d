"""Sphinx extension: the bibliography labels each entry the way the text cites it ("Vaswani et al., 2017"), not with
pybtex's alphabetic key ("VSP+17"), so a reader finds [Vaswani et al., 2017] of the text under the same label in the
references, which are sorted by author and year. Listed in `_config.yml` under `sphinx.config.extensions`, with
`bibtex_default_style: author_year`.
"""

from collections import Counter

from pybtex.plugin import register_plugin
from pybtex.style.formatting.unsrt import Style as UnsrtStyle
from pybtex.style.labels import BaseLabelStyle

STYLE = "author_year"


def _last_name(person) -> str:
    """A person's surname as printed ("Ben Allal", "Kaiser"): von part and last names, LaTeX accents decoded."""
    from pybtex.richtext import Text

    return Text.from_latex(" ".join(person.prelast_names + person.last_names)).render_as("text")


def author_year_label(entry) -> str:
    """"Min and Li, 2024" for two authors, "Vaswani et al., 2017" for three or more (or "and others"), as the
    text's author-year citations read."""
    persons = entry.persons.get("author") or entry.persons.get("editor") or []
    names = [_last_name(p) for p in persons if str(p) != "others"]
    others = any(str(p) == "others" for p in persons)
    if len(names) >= 3 or (names and others):
        who = f"{names[0]} et al."
    else:
        who = " and ".join(names) or entry.fields.get("title", "Anonymous")
    return f"{who}, {entry.fields.get('year', 'n.d.')}"


class AuthorYearLabels(BaseLabelStyle):
    """Author-year labels; two entries with the same label get "a", "b" after the year."""

    def format_labels(self, sorted_entries):
        labels = [author_year_label(entry) for entry in sorted_entries]
        count, seen = Counter(labels), Counter()
        for label in labels:
            if count[label] == 1:
                yield label
            else:
                yield label + chr(ord("a") + seen[label])
                seen[label] += 1


class AuthorYearStyle(UnsrtStyle):
    """The unsrt entry format with author-year labels, sorted by author, year and title."""

    default_label_style = AuthorYearLabels
    default_sorting_style = "author_year_title"


def setup(app):
    register_plugin("pybtex.style.formatting", STYLE, AuthorYearStyle)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
