"""Sphinx extension: a number and its "%" stay on one line ("63 %", never "63" at a line's end and "%" on the next),
and so do a symbol, "=" and its value in plain text ("n = 256").

The book writes a percentage with a space, "63 %", and the prose pastes many numbers with `{glue:text}`, so the
number and the " %" after it are often separate text nodes. After every page is resolved (glue included), each
space between a number, or the end of a pasted value, and "%" becomes a no-break space (U+00A0), as do the spaces of
"n = 256" (`helpers.english.keep_together`, the rules tables follow too). Code, literal
text, maths and raw HTML are left alone. Listed in `_config.yml` under `sphinx.config.extensions`.
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


def _on_doctree_resolved(app, doctree, docname) -> None:
    bind_spaces(doctree)


def setup(app):
    app.connect("doctree-resolved", _on_doctree_resolved)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
