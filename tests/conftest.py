"""Shared fixtures. `quick_book` executes every notebook once per session in quick mode, in a staged
copy of the book (so the user's `book/` and `.cache/` are left alone), and later tests read its metrics."""

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from helpers import book


@dataclass
class QuickBook:
    root: Path
    failures: dict = field(default_factory=dict)

    @property
    def book_dir(self) -> Path:
        return self.root / "book"

    def metrics(self, notebook: str) -> dict:
        if notebook in self.failures:
            pytest.fail(f"{notebook} failed in quick mode: {self.failures[notebook]}")
        return json.loads((self.book_dir / "_metrics" / f"{notebook}.json").read_text())


@pytest.fixture(scope="session")
def quick_book(tmp_path_factory) -> QuickBook:
    root = tmp_path_factory.mktemp("quick_book")
    book.stage_sources(root)
    saved = {k: os.environ.get(k) for k in ("BOOK_METRICS_DIR", "HELPERS_CACHE_DIR")}
    os.environ["BOOK_METRICS_DIR"] = str(root / "book" / "_metrics")
    os.environ["HELPERS_CACHE_DIR"] = str(root / ".cache")
    try:
        failures = book.execute(None, "quick", {}, root / "book")
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return QuickBook(root, {f.notebook: str(f) for f in failures})


@pytest.fixture(scope="session")
def built_book(quick_book) -> Path:
    """The strict HTML build of the quick book; returns its html folder."""
    code = book.build(quick_book.root)
    assert code == 0, "jupyter-book build -W -n --keep-going failed (see the log above)"
    return quick_book.root / "_build" / "html"
