"""Where things live: the project root, the notebooks, the book, metrics and the result store."""

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NBS_DIR = ROOT / "nbs"
BOOK_DIR = ROOT / "book"
BUILD_DIR = ROOT / "_build"


def metrics_dir() -> Path:
    """Folder for metrics JSON files; `BOOK_METRICS_DIR` overrides `book/_metrics`."""
    return Path(os.environ.get("BOOK_METRICS_DIR", BOOK_DIR / "_metrics"))


def cache_dir() -> Path:
    """Folder for the result store; `HELPERS_CACHE_DIR` overrides `.cache`."""
    return Path(os.environ.get("HELPERS_CACHE_DIR", ROOT / ".cache"))
