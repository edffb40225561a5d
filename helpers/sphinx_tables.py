"""Sphinx extension: numbered tables from code cells ("Table 3.1"), referenced with {numref}.

MyST-NB wraps a code cell's output in a figure when the cell's metadata has `mystnb.figure` (a name and a
caption), so a table drawn by `plotting.table` would be numbered as a figure. Jupyter Book 1 has no table
counterpart (jupyter-book issues 1247 and 1585). This extension turns every such figure whose name starts with
`tbl-` into an `output_table` node that Sphinx numbers in the table sequence (`numfig_format["table"]`), with the
caption above the table, where readers look for it. Listed in `_config.yml` under `sphinx.config.extensions`.
"""

from docutils import nodes
from sphinx.transforms import SphinxTransform

PREFIX = "tbl-"


class output_table(nodes.figure):  # noqa: N801 (docutils names node classes in lower case)
    """A code cell's table output with a numbered caption; rendered like a figure."""


def is_table_figure(node: nodes.Node) -> bool:
    return isinstance(node, nodes.figure) and any(name.startswith(PREFIX) for name in node["names"])


class TableFigures(SphinxTransform):
    """Figures named `tbl-...` become `output_table` nodes, caption first (runs while the document is read, so
    the numbering and {numref} see tables)."""

    default_priority = 900

    def apply(self, **kwargs) -> None:
        for figure in list(self.document.findall(is_table_figure)):
            table = output_table(figure.rawsource, *figure.children, **figure.attributes)
            captions = [child for child in table.children if isinstance(child, nodes.caption)]
            # docutils closes <figcaption> only at the end of a figure (a caption comes last there), so close it here
            end = [nodes.raw("", "</figcaption>\n", format="html")] if captions else []
            table.children = captions + end + [child for child in table.children if child not in captions]
            table["classes"].append("output-table")
            figure.replace_self(table)
            for node_id in table["ids"]:  # the labels point at the node by id
                self.document.ids[node_id] = table


def _visit(self, node):
    node.setdefault("align", "default")
    # no side padding: a table as wide as the column must not overflow the figure's inner box
    self.body.append(self.starttag(node, "figure", CLASS=f"align-{node['align']}",
                                   style="padding-left: 0; padding-right: 0"))


def _depart(self, node):
    if any(isinstance(child, nodes.legend) for child in node):  # a legend opened a <figcaption> of its own
        self.body.append("</figcaption>\n")
    self.body.append("</figure>\n")


def setup(app):
    app.add_enumerable_node(output_table, "table", html=(_visit, _depart))
    app.add_transform(TableFigures)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
