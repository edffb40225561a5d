"""Shared fixtures. `quick_book` executes every notebook once per session in quick mode, in a staged copy of the book
(so the user's `book/` and `.cache/` are left alone), and later tests read its metrics; `built_book` is its strict
HTML build.

The quick book is made in a background process that starts as soon as the tests are collected, and the tests that
read it run last, so the two cores work at once: the book on one, every other test on the other. Each process runs
one torch thread (two oversubscribed OpenMP pools run 10-30x slower; see helpers/threads.py).
"""

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from helpers import book

# the background process: execute every notebook in quick mode into ROOT/book, then (if asked) build the HTML, and
# write what happened to ROOT/status.json
MAKE_QUICK_BOOK = """
import json, sys
from pathlib import Path
from helpers import book
root, build = Path(sys.argv[1]), sys.argv[2] == "build"
failures = book.execute(None, "quick", {}, root / "book")
status = {"failures": {f.notebook: str(f) for f in failures}, "build": book.build(root) if build else None}
(root / "status.json").write_text(json.dumps(status))
"""


def needs(item, fixture: str) -> bool:
    return fixture in getattr(item, "fixturenames", ())


class Background:
    """The quick book being made by another process (`start`), and its outcome once finished (`wait`)."""

    def __init__(self):
        self.process, self.root, self.log = None, None, None

    def start(self, root: Path, build: bool) -> None:
        book.stage_sources(root)
        env = {**os.environ, "BOOK_METRICS_DIR": str(root / "book" / "_metrics"),
               "HELPERS_CACHE_DIR": str(root / ".cache")}
        self.root, self.log = root, root / "make_quick_book.log"
        with open(self.log, "w") as log:
            self.process = subprocess.Popen([sys.executable, "-c", MAKE_QUICK_BOOK, str(root), "build" if build else "-"],
                                            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def wait(self) -> dict:
        code = self.process.wait()
        status = self.root / "status.json"
        if code != 0 or not status.exists():
            pytest.fail(f"making the quick book failed (exit {code}):\n{self.log.read_text()[-4000:]}")
        return json.loads(status.read_text())


BACKGROUND = Background()


def pytest_collection_modifyitems(session, config, items):
    """Start the quick book in the background when a collected test reads it, and run those tests last."""
    readers = [item for item in items if needs(item, "quick_book")]
    if not readers or config.option.collectonly:
        return
    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = "1"   # this process and every child it starts
    import torch

    torch.set_num_threads(1)
    build = any(needs(item, "built_book") for item in readers) and not os.environ.get("BOOK_HTML_DIR")
    BACKGROUND.start(config._tmp_path_factory.mktemp("quick_book"), build)   # the session's own tmp folder
    items[:] = [item for item in items if not needs(item, "quick_book")] + readers     # stable: order kept within


@dataclass
class QuickBook:
    root: Path
    failures: dict = field(default_factory=dict)
    build: int | None = None     # the exit code of the strict build (None: not built)

    @property
    def book_dir(self) -> Path:
        return self.root / "book"

    def metrics(self, notebook: str) -> dict:
        if notebook in self.failures:
            pytest.fail(f"{notebook} failed in quick mode: {self.failures[notebook]}")
        return json.loads((self.book_dir / "_metrics" / f"{notebook}.json").read_text())


@pytest.fixture(scope="session")
def quick_book() -> QuickBook:
    status = BACKGROUND.wait()
    return QuickBook(BACKGROUND.root, status["failures"], status["build"])


@pytest.fixture(scope="session")
def built_book(quick_book) -> Path:
    """The strict HTML build of the quick book; returns its html folder."""
    assert quick_book.build == 0, f"jupyter-book build -W -n --keep-going failed:\n{BACKGROUND.log.read_text()[-6000:]}"
    return quick_book.root / "_build" / "html"


def pytest_sessionfinish(session):
    """Stop the background book if the session ends first (a failure with -x, or Ctrl-C)."""
    if BACKGROUND.process is not None and BACKGROUND.process.poll() is None:
        os.killpg(BACKGROUND.process.pid, signal.SIGTERM)     # with the notebook kernels it started
        BACKGROUND.process.wait()
