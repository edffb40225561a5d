"""Metrics JSON for tests and the appendix, and `glue` for numbers in the prose.

    rec = Recorder("01_attention_rank", P)
    rec.glue("barrier_fraction", 0.632, ".3f")   # {glue:text}`barrier_fraction` in the prose
    rec.save()                                   # book/_metrics/01_attention_rank.json

A chapter in the book's pattern makes one call instead, after its figures:

    record.publish("04_random_attention", P, result)   # result: helpers.results.ChapterResult of analyse(P)
"""

import json
import platform
import re
import time
from pathlib import Path

import numpy as np
import torch

from . import paths
from .cache import to_jsonable, write_json_atomic
from .results import ChapterResult


Formatted = str  # text to glue as it is (rec.glue(name, Formatted("a; b")))


def text_or_na(value, fmt: str) -> Formatted:
    """`value` formatted with `fmt`, or "n/a" when it is None or NaN (a fit with too few points)."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return Formatted("n/a")
    return Formatted(format(value, fmt))


def environment() -> dict:
    """Versions and device, for the metrics file and the appendix."""
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "device": "cuda" if torch.cuda.is_available() else "cpu",
        "torch_threads": torch.get_num_threads(),
        "platform": platform.platform(),
    }


NOT_RUN = Formatted("(not run)")
_GLUE_REFERENCE = re.compile(r"\{glue(?::\w+)?\}`(?![^`]*::)([^`:]+)")   # "other.ipynb::name" is another page's


def glue_references(notebook_source: Path) -> set[str]:
    """Names the prose of a notebook pastes with `{glue:text}` (or another glue role)."""
    return set(_GLUE_REFERENCE.findall(notebook_source.read_text())) if notebook_source.exists() else set()


def _paste(name: str, text: str) -> None:
    """Glue `text` under `name` for the book; outside a notebook build there is nothing to paste into."""
    try:
        from myst_nb import glue
    except ImportError:
        return
    glue(name, text, display=False)  # myst-nb literal-evals the repr, so the quotes go and "0.40" stays "0.40"


def metrics_path(notebook: str) -> Path:
    return paths.metrics_dir() / f"{notebook}.json"


def load_metrics(notebook: str) -> dict:
    """The metrics a notebook recorded in its last run."""
    return json.loads(metrics_path(notebook).read_text())


class Recorder:
    """Collects a notebook's key numbers, glues them into the prose and saves them as JSON."""

    def __init__(self, notebook: str, params: dict, source: Path | None = None):
        self.notebook, self.params = notebook, dict(params)
        self._given = params  # read again at save time for the defaults the mode filled in
        self.source = source or paths.NBS_DIR / f"{notebook}.ipynb"
        self.values: dict = {}
        self.glued: set[str] = set()
        self.started = time.perf_counter()

    def record(self, name: str, value) -> None:
        """Keep a value (any JSON-able structure) for the metrics file without gluing it.

        Returns None, so that a cell ending in `rec.record(...)` or `rec.glue(...)` prints nothing.
        """
        self.values[name] = to_jsonable(value)

    def glue(self, name: str, value, fmt: str = "") -> None:
        """Record a number and glue its formatted text under `name` for `{glue:text}`."""
        self.record(name, value)
        _paste(name, format(value.item() if hasattr(value, "item") else value, fmt))
        self.glued.add(name)

    def fill_not_run(self) -> list[str]:
        """Glue NOT_RUN for every name the prose pastes that this run did not glue, and return them.

        A parameter can leave out part of a chapter (a task, a domain); the prose then reads "(not run)"
        where its numbers would be, instead of the strict build failing on a missing glue key.
        """
        missing = sorted(glue_references(self.source) - self.glued)
        for name in missing:
            _paste(name, NOT_RUN)
        return missing

    def save(self) -> Path:
        """Write the metrics JSON (atomically), after filling in the glue names this run did not compute."""
        not_run = self.fill_not_run()
        data = {
            "notebook": self.notebook,
            "mode": self.params.get("MODE"),
            "seed": self.params.get("SEED"),
            "params": self.params,
            "resolved": dict(getattr(self._given, "resolved", {})),
            "wall_time_s": time.perf_counter() - self.started,
            "environment": environment(),
            "values": self.values,
            "not_run": not_run,
        }
        return write_json_atomic(metrics_path(self.notebook), to_jsonable(data))


def _tabular(value):
    """DataFrames as lists of row dicts; anything else as it is (made JSON-able on save)."""
    return value.to_dict(orient="records") if hasattr(value, "to_dict") and hasattr(value, "columns") else value


def publish(notebook: str, params: dict, result: ChapterResult, source: Path | None = None) -> Path:
    """Record every frame, quote and verdict of `result`, glue every quote and verdict sentence, and save.

    The metrics file gets `values[name]` for each frame (rows), each quote (its raw value) and each verdict
    ({outcome, sentence, rule, evidence}); `wall_time_s` is the time `analyse` took. Returns the metrics path.
    """
    rec = Recorder(notebook, params, source)
    for name, frame in result.frames.items():
        rec.record(name, _tabular(frame))
    for name, quote in result.quotes.items():
        rec.record(name, quote.value)
        _paste(name, quote.text())
        rec.glued.add(name)
    for name, verdict in result.verdicts.items():
        rec.record(name, {"outcome": verdict.outcome, "sentence": verdict.sentence, "rule": verdict.rule,
                          "evidence": verdict.evidence})
        _paste(name, verdict.sentence)
        rec.glued.add(name)
    rec.started = time.perf_counter() - result.seconds
    return rec.save()
