"""Metrics JSON for tests and the appendix, and `glue` for numbers in the prose.

    rec = Recorder("01_attention_rank", P)
    rec.glue("barrier_fraction", 0.632, ".3f")   # {glue:text}`barrier_fraction` in the prose
    rec.save()                                   # book/_metrics/01_attention_rank.json
"""

import json
import platform
import time
from pathlib import Path

import numpy as np
import torch

from . import paths
from .cache import to_jsonable, write_json_atomic


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


def metrics_path(notebook: str) -> Path:
    return paths.metrics_dir() / f"{notebook}.json"


def load_metrics(notebook: str) -> dict:
    """The metrics a notebook recorded in its last run."""
    return json.loads(metrics_path(notebook).read_text())


class Recorder:
    """Collects a notebook's key numbers, glues them into the prose and saves them as JSON."""

    def __init__(self, notebook: str, params: dict):
        self.notebook, self.params = notebook, dict(params)
        self._given = params  # read again at save time for the defaults the mode filled in
        self.values: dict = {}
        self.started = time.perf_counter()

    def record(self, name: str, value) -> None:
        """Keep a value (any JSON-able structure) for the metrics file without gluing it.

        Returns None, so that a cell ending in `rec.record(...)` or `rec.glue(...)` prints nothing.
        """
        self.values[name] = to_jsonable(value)

    def glue(self, name: str, value, fmt: str = "") -> None:
        """Record a number and glue its formatted text under `name` for `{glue:text}`."""
        self.record(name, value)
        text = format(value.item() if hasattr(value, "item") else value, fmt)
        try:
            from myst_nb import glue
        except ImportError:  # outside a notebook build the number is still recorded
            return
        glue(name, text, display=False)  # myst-nb literal-evals the repr, so the quotes go and "0.40" stays "0.40"

    def save(self) -> Path:
        data = {
            "notebook": self.notebook,
            "mode": self.params.get("MODE"),
            "seed": self.params.get("SEED"),
            "params": self.params,
            "resolved": dict(getattr(self._given, "resolved", {})),
            "wall_time_s": time.perf_counter() - self.started,
            "environment": environment(),
            "values": self.values,
        }
        return write_json_atomic(metrics_path(self.notebook), to_jsonable(data))
