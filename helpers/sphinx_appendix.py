"""Sphinx extension: figures and tables of the appendix are numbered "A.1", "A.2", not "1", "2".

Sphinx numbers a figure by its chapter ("Figure 3.2"), but the pages in unnumbered parts (the appendix) have no
chapter number, so their figures get a bare running count ("Figure 1"), which reads like chapter 1's. This
extension gives every figure and table of such a page the page's letter: the pages named in the `appendix_letters`
setting (`_config.yml`: `sphinx.config.appendix_letters`, a mapping of docname to letter). Listed in `_config.yml`
under `sphinx.config.extensions`.
"""


def lettered(fignumbers: dict, letter: str) -> dict:
    """One page's numbers `{figtype: {figure_id: (k,)}}` as `{figtype: {figure_id: (letter, i)}}`, counted 1, 2, ...
    in the page's own order for each type. Numbers that carry a chapter (more than one part) are left alone."""
    renumbered = {}
    for figtype, numbers in fignumbers.items():
        plain = sorted((number, figure_id) for figure_id, number in numbers.items() if len(number) == 1)
        renumbered[figtype] = dict(numbers)
        for i, (_number, figure_id) in enumerate(plain, 1):
            renumbered[figtype][figure_id] = (letter, i)
    return renumbered


def letter_the_appendix(app, env) -> list[str]:
    """After Sphinx has numbered the figures (`env-get-updated`), give the appendix pages' figures their letter."""
    for docname, letter in app.config.appendix_letters.items():
        if docname in env.toc_fignumbers:
            env.toc_fignumbers[docname] = lettered(env.toc_fignumbers[docname], letter)
    return []


def setup(app):
    app.add_config_value("appendix_letters", {}, "env", types=[dict])
    app.connect("env-get-updated", letter_the_appendix, priority=900)   # after the toctree collector (500)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
