"""Executing notebooks with papermill and building the book with Jupyter Book 1.x.

Papermill is the only thing that executes notebooks; Jupyter Book only renders.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat

from . import figure_data, paths
from .cache import source_hash
from .parameters import MODES
from .printing import PDF_NAME

BOOK_SOURCES = ("_config.yml", "_toc.yml", "_static/*.css", "book/*.md", "book/*.bib", "book/*.svg", "CITATION.cff")
CITATION_PAGE = Path("book") / "_generated" / "how_to_cite.md"   # included by the intro, written by `build`
PDF_LINK_PAGE = Path("book") / "_generated" / "pdf_link.md"      # the intro's PDF sentence, written by `build`


@dataclass
class NotebookFailure(Exception):
    """A notebook raised; says which one and which cell."""

    notebook: str
    cell: str
    error: str

    def __str__(self) -> str:
        return f"notebook {self.notebook} failed in {self.cell}: {self.error}"


def reads_metrics(notebook: Path) -> bool:
    """True for a page built from the other chapters' metrics (the claims ledger, the appendix)."""
    return bool(nbformat.read(notebook, as_version=4).metadata.get(FINGERPRINT_KEY, {}).get("reads_metrics"))


def source_notebooks(names: list[str] | None = None) -> list[Path]:
    """The source notebooks in execution order, or those named (by stem, file name or path).

    Chapters run in number order (03b after 03), then the pages that read their metrics (`reads_metrics`),
    whatever their number.
    """
    available = sorted(paths.NBS_DIR.glob("[0-9][0-9]*_*.ipynb"), key=lambda p: (reads_metrics(p), p.name))
    if not names:
        return available
    by_stem = {p.stem: p for p in available}
    chosen = []
    for name in names:
        path = Path(name)
        if path.suffix == ".ipynb" and path.exists():
            chosen.append(path.resolve())
        elif path.stem in by_stem:
            chosen.append(by_stem[path.stem])
        else:
            raise ValueError(f"unknown notebook {name!r}; available: {', '.join(by_stem)}")
    return chosen


def _failure_from(notebook: Path, executed: Path, err: Exception) -> NotebookFailure:
    """Name the failing cell by its index in the SOURCE notebook (papermill's index counts its injected cell)."""
    cell = "an unknown cell"
    index = getattr(err, "cell_index", None)
    if index is not None:
        try:
            cells = nbformat.read(executed, as_version=4).cells
            injected = [i for i, c in enumerate(cells) if "injected-parameters" in c.metadata.get("tags", [])]
            source_index = index - sum(1 for i in injected if i < index)
            first_line = cells[index].source.strip().splitlines()[0] if cells[index].source.strip() else ""
            cell = f"cell {source_index} ({first_line[:60]!r})"
        except Exception:  # the executed copy may be unreadable; fall back to papermill's index
            cell = f"cell {index} of the executed notebook"
    error = f"{getattr(err, 'ename', type(err).__name__)}: {getattr(err, 'evalue', err)}"
    return NotebookFailure(notebook.stem, cell, error)


FINGERPRINT_KEY = "attention_rank_book"


def fingerprint(notebook: Path, mode: str, params: dict) -> str:
    """What an executed copy depends on: the source notebook, its parameters and the helpers source.

    A notebook whose metadata sets `attention_rank_book.reads_metrics` (the appendix) also depends on
    every other chapter's metrics file.
    """
    digest = hashlib.sha256(notebook.read_bytes())
    digest.update(json.dumps({"mode": mode, **params}, sort_keys=True, default=str).encode())
    digest.update(source_hash().encode())
    if reads_metrics(notebook):  # the chapters' metrics, not those of the other reading pages (they change every run)
        readers = {p.stem for p in paths.NBS_DIR.glob("[0-9][0-9]_*.ipynb") if reads_metrics(p)}
        for path in sorted(paths.metrics_dir().glob("*.json")):
            if path.stem not in readers:
                digest.update(path.read_bytes())
    return digest.hexdigest()


def is_up_to_date(notebook: Path, mode: str, params: dict, book_dir: Path) -> bool:
    """True when the executed copy and its metrics were produced from exactly these inputs."""
    target = book_dir / notebook.name
    metrics = paths.metrics_dir() / f"{notebook.stem}.json"
    if not (target.exists() and metrics.exists()):
        return False
    executed = nbformat.read(target, as_version=4).metadata.get(FINGERPRINT_KEY, {})
    return executed.get("fingerprint") == fingerprint(notebook, mode, params)


def execute_one(notebook: Path, mode: str, params: dict, book_dir: Path) -> Path:
    """Run one notebook with papermill into `book_dir/<name>.ipynb`; raise NotebookFailure."""
    import papermill

    book_dir.mkdir(parents=True, exist_ok=True)
    target = book_dir / notebook.name
    partial = book_dir / f".{notebook.stem}.partial.ipynb"
    try:
        papermill.execute_notebook(
            str(notebook),
            str(partial),
            parameters={"MODE": mode, **params},
            cwd=str(notebook.parent),
            kernel_name="python3",
            progress_bar=False,
        )
    except Exception as err:  # papermill re-raises the kernel's error as PapermillExecutionError
        if partial.exists():
            os.replace(partial, target)  # keep the failed notebook so its traceback can be read
        raise _failure_from(notebook, target, err) from err
    executed = nbformat.read(partial, as_version=4)
    for cell in executed.cells:  # papermill's copy of the parameters: bookkeeping, not for the page
        if "injected-parameters" in cell.metadata.get("tags", []):
            cell.metadata["tags"] = sorted(set(cell.metadata["tags"]) | {"remove-cell"})
    executed.metadata[FINGERPRINT_KEY] = {"fingerprint": fingerprint(notebook, mode, params)}
    nbformat.write(executed, partial)
    os.replace(partial, target)
    return target


def declared(notebook: Path) -> list[str]:
    """The names a notebook's `parameters` cell declares."""
    return [p.name for p in notebook_parameters(notebook)]


def check_declared(params: dict, notebooks: list[Path]) -> None:
    """A ValueError naming any parameter that none of `notebooks` declares (a typo would be ignored otherwise)."""
    names = {name for nb in notebooks for name in declared(nb)}
    for name in params:
        if name not in names:
            which = notebooks[0].stem if len(notebooks) == 1 else f"any of the {len(notebooks)} notebooks"
            raise ValueError(f"parameter {name!r} is not a parameter of {which}; allowed: "
                             f"{', '.join(sorted(names))}")


def declared_only(notebook: Path, params: dict, scheduler: str | None = None) -> dict:
    """The parameters `notebook` declares, with SCHEDULER = `scheduler` where it declares one and none is given:
    the pages that follow a chapter (ledger, appendix) and the other notebooks of a run get only their own."""
    own = declared(notebook)
    chosen = {name: value for name, value in params.items() if name in own}
    if scheduler is not None and "SCHEDULER" in own:
        chosen.setdefault("SCHEDULER", scheduler)
    return chosen


def execute(names=None, mode: str = "full", params: dict | None = None, book_dir: Path | None = None,
            force: bool = False, scheduler: str | None = None) -> list[NotebookFailure]:
    """Execute notebooks in order; return the failures (empty when all succeeded).

    Each notebook gets the parameters of `params` it declares; a parameter that none of the named notebooks
    declares is a ValueError before anything runs. `scheduler` is passed as SCHEDULER to every notebook that
    declares one. A notebook whose executed copy is up to date (same source, parameters and helpers code) is
    skipped unless `force`; expensive results inside a notebook are reused through the result store anyway.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {list(MODES)}; got {mode!r}")
    book_dir = Path(book_dir or paths.BOOK_DIR).resolve()
    for key in ("BOOK_METRICS_DIR", "HELPERS_CACHE_DIR"):  # kernels run in nbs/: relative paths would move
        if os.environ.get(key):
            os.environ[key] = str(Path(os.environ[key]).resolve())
    os.environ.setdefault("BOOK_METRICS_DIR", str(book_dir / "_metrics"))
    notebooks = source_notebooks(names)
    check_declared(params or {}, notebooks)
    if names and any(nb.parent == paths.NBS_DIR for nb in notebooks):  # a chapter of this book was named: the
        # pages that read the chapters' metrics follow it (each re-run only if stale)
        notebooks += [nb for nb in source_notebooks() if reads_metrics(nb) and nb not in notebooks]
    failures = []
    for i, notebook in enumerate(notebooks, 1):
        own = declared_only(notebook, params or {}, scheduler)
        if not force and is_up_to_date(notebook, mode, own, book_dir):
            print(f"[{i}/{len(notebooks)}] {notebook.stem} is up to date (use --force to re-run)", flush=True)
            continue
        print(f"[{i}/{len(notebooks)}] {notebook.stem} (mode={mode}) ...", flush=True)
        start = time.perf_counter()
        try:
            execute_one(notebook, mode, own, book_dir)
            print(f"[{i}/{len(notebooks)}] {notebook.stem} done in {time.perf_counter() - start:.1f} s", flush=True)
        except NotebookFailure as failure:
            print(f"[{i}/{len(notebooks)}] FAILED: {failure}", file=sys.stderr, flush=True)
            failures.append(failure)
    return failures


def figure_names(notebook: Path) -> set[str]:
    """The figure names a notebook declares in its cell metadata (`mystnb.figure.name`), for {numref} links."""
    cells = nbformat.read(notebook, as_version=4).cells
    return {c.metadata.get("mystnb", {}).get("figure", {}).get("name") for c in cells} - {None}


def parameter_text(value) -> str:
    """A parameter value for the appendix: numbers without e-notation, long lists summarised by their range."""
    from .english import number

    if isinstance(value, bool) or value is None or isinstance(value, str):
        return repr(value) if isinstance(value, str) else str(value)
    if isinstance(value, (int, float)):
        return format(value, "g") if value == 0 or 1e-3 <= abs(value) < 1e6 else number(value, 2, power=True)
    if isinstance(value, (list, tuple)):
        items = [parameter_text(v) for v in value]
        if len(items) > 6:
            return f"{len(items)} values from {items[0]} to {items[-1]}"
        return "[" + ", ".join(items) + "]"
    return str(value)


def metrics_link(notebook: str) -> str:
    """A MyST {download} link to a chapter's metrics JSON, published with the HTML build."""
    return f"{{download}}`JSON <_metrics/{notebook}.json>`"


def jupyter_book_command() -> list[str]:
    exe = Path(sys.executable).parent / "jupyter-book"
    return [str(exe)] if exe.exists() else ["jupyter-book"]


PUBLISHED_METRICS = "book/_metrics"  # pages link each chapter's metrics JSON with {download}`...<_metrics/NN.json>`


def publish_metrics(root: Path) -> Path:
    """Put the chapters' metrics JSON and figure CSVs where the pages' {download} links find them (`book/_metrics`
    under `root`); Sphinx then copies every linked file into the HTML build."""
    target = Path(root) / PUBLISHED_METRICS
    source = paths.metrics_dir().resolve()
    if source != target.resolve():
        figures = target / figure_data.data_dir().name
        figures.mkdir(parents=True, exist_ok=True)
        for path in source.glob("[0-9][0-9]*_*.json"):
            shutil.copy2(path, target / path.name)
        for path in figure_data.data_dir().glob("fig-*.csv"):   # each figure's plotted data, linked from its caption
            shutil.copy2(path, figures / path.name)
    return target


def _names(authors: list) -> str:
    """CFF authors as one string: entity names, or "Given Family"."""
    return " and ".join(a.get("name") or f"{a.get('given-names', '')} {a.get('family-names', '')}".strip()
                        for a in authors)


def citation_text(cff: dict) -> str:
    """The intro's "how to cite" from the fields of CITATION.cff (its one home): a sentence and a BibTeX entry for
    the book, and the paper it tests."""
    year = str(cff["date-released"])[:4]
    paper = next((r for r in cff.get("references", []) if r.get("type") == "article"), None)
    lines = [cff["message"], "",
             f"> {_names(cff['authors'])} ({year}). *{cff['title']}*. Version {cff['version']}, released "
             f"{cff['date-released']}. {cff['license']} licence.", "",
             "```bibtex",
             "@software{attention_rank_book,",
             f"  title   = {{{cff['title']}}},",
             f"  author  = {{{{{_names(cff['authors'])}}}}},",
             f"  version = {{{cff['version']}}},",
             f"  year    = {{{year}}},",
             "}", "```"]
    if paper:
        lines += ["", f"The paper it tests: {_names(paper['authors'])} ({paper['year']}). *{paper['title']}*. "
                      f"{paper.get('notes', '')}."]
    return "\n".join(lines) + "\n"


def write_citation(root: Path) -> Path:
    """Write the intro's "how to cite" page from `root`/CITATION.cff (atomically)."""
    import yaml

    from .cache import write_atomic

    cff = yaml.safe_load((Path(root) / "CITATION.cff").read_text())
    return write_atomic(Path(root) / CITATION_PAGE, lambda f: f.write(citation_text(cff)))


def pdf_link_text(has_pdf: bool) -> str:
    """The intro's sentence on the PDF: a link when this build has printed it, else how to print it."""
    if has_pdf:
        return (f'The whole book is also one PDF, with bookmarks and numbered pages: '
                f'<a href="../_static/{PDF_NAME}">{PDF_NAME}</a>.\n')
    return "The whole book can also be printed as one PDF, with bookmarks and numbered pages: run `make pdf`.\n"


def write_pdf_link(root: Path) -> Path:
    """Write the intro's PDF sentence for `root`'s build: the link only when `_build/pdf` holds the PDF."""
    from .cache import write_atomic

    has_pdf = (Path(root) / "_build" / "pdf" / PDF_NAME).exists()
    return write_atomic(Path(root) / PDF_LINK_PAGE, lambda f: f.write(pdf_link_text(has_pdf)))


def build(root: Path | None = None, builder: str = "html") -> int:
    """Strict build (`html`, or `singlehtml` for the PDF): warnings, broken references and notebook errors fail it."""
    root = Path(root or paths.ROOT)
    publish_metrics(root)
    write_citation(root)
    write_pdf_link(root)
    command = jupyter_book_command() + ["build", str(root), "-W", "-n", "--keep-going", "--builder", builder]
    print("$", " ".join(command), flush=True)
    code = subprocess.call(command)
    if code == 0 and builder == "html":
        print(f"Open {root / '_build' / 'html' / 'book' / 'intro.html'} in a browser.")
    return code


def stage_sources(destination: Path) -> Path:
    """Copy the book's prose and configuration into `destination`, for isolated test builds."""
    destination = Path(destination)
    for pattern in BOOK_SOURCES:
        for source in paths.ROOT.glob(pattern):
            target = destination / source.relative_to(paths.ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            if source.is_dir():
                shutil.copytree(source, target, dirs_exist_ok=True)
            else:
                shutil.copy2(source, target)
    return destination


@dataclass
class Parameter:
    """One line of a notebook's `parameters` cell."""

    name: str
    default: object
    comment: str


def notebook_parameters(notebook: Path) -> list[Parameter]:
    """The literals of a source notebook's `parameters` cell, with their comments (legal values)."""
    import ast

    nb = nbformat.read(notebook, as_version=4)
    cell = next((c for c in nb.cells if c.cell_type == "code" and "parameters" in c.metadata.get("tags", [])), None)
    if cell is None:
        return []
    lines = cell.source.splitlines()
    found = []
    for node in ast.parse(cell.source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            line = lines[node.lineno - 1]
            comment = line.split("#", 1)[1].strip() if "#" in line else ""
            found.append(Parameter(node.targets[0].id, ast.literal_eval(node.value), comment))
    return found


def toc_entries(root: Path | None = None) -> list[str]:
    """Every page of `_toc.yml` in reading order, as paths without suffix (e.g. "book/intro")."""
    import yaml

    toc = yaml.safe_load((Path(root or paths.ROOT) / "_toc.yml").read_text())
    entries = [toc["root"]]
    for part in toc.get("parts", []):
        for chapter in part.get("chapters", []):
            entries.append(chapter["file"])
            entries.extend(section["file"] for section in chapter.get("sections", []))
    return entries
