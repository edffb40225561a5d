"""Sphinx extension: a number and its "%" stay on one line ("63 %", never "63" at a line's end and "%" on the next),
and so do a symbol, "=" and its value in plain text ("n = 256"), and inline maths and the punctuation that touches
it ("n." never "n" at a line's end and "." on the next).

The book writes a percentage with a space, "63 %", and the prose pastes many numbers with `{glue:text}`, so the
number and the " %" after it are often separate text nodes. After every page is resolved (glue included), each
space between a number, or the end of a pasted value, and "%" becomes a no-break space (U+00A0), as do the spaces of
"n = 256" (`helpers.english.keep_together`, the rules tables follow too). Code, literal
text, maths and raw HTML are left alone. Listed in `_config.yml` under `sphinx.config.extensions`.

MathJax renders inline maths as an atomic box, and a browser may break a line between such a box and the "." or ")"
written right after it, so the punctuation touching an inline formula goes with it into one `no-wrap` span
(`_static/book.css`: `white-space: nowrap`).
"""

from docutils import nodes

from .english import NO_BREAK, keep_together

_LEAVE_ALONE = (nodes.literal, nodes.literal_block, nodes.math, nodes.math_block, nodes.raw, nodes.FixedTextElement)


def _kept(text: nodes.Text) -> bool:
    """Whether `text` sits inside code, literal text, maths or raw output."""
    parent = text.parent
    while parent is not None:
        if isinstance(parent, _LEAVE_ALONE):
            return True
        parent = parent.parent
    return False


def _previous_text(text: nodes.Text) -> str:
    """The text just before `text` in reading order: the end of whatever precedes it in its paragraph."""
    node = text
    while node.parent is not None:
        index = node.parent.index(node)
        if index:
            return node.parent[index - 1].astext()
        if isinstance(node.parent, nodes.TextElement) and not isinstance(node.parent, nodes.inline):
            return ""
        node = node.parent
    return ""


def bind_spaces(doctree: nodes.Node) -> int:
    """Replace the space before "%" after a number, and those around "=" in "n = 256", with no-break spaces in every
    text node of `doctree` (in place); returns how many spaces it replaced."""
    replaced = 0
    for text in list(doctree.findall(nodes.Text)):
        if _kept(text):
            continue
        tail = _previous_text(text)[-1:]   # a pasted number ends in the node before: "63" then " % of"
        value = keep_together(tail + str(text))[len(tail):]
        if value != str(text):
            replaced += value.count(NO_BREAK) - str(text).count(NO_BREAK)
            text.parent.replace(text, nodes.Text(value))
    return replaced


OPENING = "([{\u2018\u201c"        # punctuation that belongs to the formula after it
CLOSING = ".,;:!?)]}\u2019\u201d"   # punctuation that belongs to the formula before it
NO_WRAP = "no-wrap"                 # the class of a span whose content never breaks across lines


def _split(text: str, chars: str, at_end: bool) -> tuple[str, str]:
    """(the rest of `text`, the run of `chars` at its end with at_end=True, else at its start)."""
    if at_end:
        kept = text.rstrip(chars)
        return kept, text[len(kept):]
    kept = text.lstrip(chars)
    return kept, text[:len(text) - len(kept)]


def bind_math_punctuation(doctree: nodes.Node) -> int:
    """Put every inline formula of `doctree` and the punctuation touching it ("(" before, ")." after: `OPENING`,
    `CLOSING`) into one `nodes.inline` of class `NO_WRAP` (in place); returns how many formulas it bound."""
    bound = 0
    for math in list(doctree.findall(nodes.math)):
        parent = math.parent
        if NO_WRAP in parent.get("classes", []):   # bound already
            continue
        i = parent.children.index(math)   # an Element compares by identity (Text nodes compare as strings)
        before = parent[i - 1] if i and isinstance(parent[i - 1], nodes.Text) else None
        after = parent[i + 1] if i + 1 < len(parent) and isinstance(parent[i + 1], nodes.Text) else None
        rest_before, opening = _split(str(before), OPENING, at_end=True) if before is not None else ("", "")
        rest_after, closing = _split(str(after), CLOSING, at_end=False) if after is not None else ("", "")
        if not opening and not closing:
            continue
        group = nodes.inline("", "", classes=[NO_WRAP])
        if opening:
            group += nodes.Text(opening)
        group += math                     # the node itself moves into the span
        if closing:
            group += nodes.Text(closing)
        start, stop = (i - 1 if opening else i), (i + 2 if closing else i + 1)
        parent[start:stop] = ([nodes.Text(rest_before)] if opening and rest_before else []) + [group] + (
            [nodes.Text(rest_after)] if closing and rest_after else [])
        bound += 1
    return bound


def _on_doctree_resolved(app, doctree, docname) -> None:
    bind_spaces(doctree)
    bind_math_punctuation(doctree)


def setup(app):
    app.connect("doctree-resolved", _on_doctree_resolved)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
