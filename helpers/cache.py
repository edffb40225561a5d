"""The result store: JSON files under `.cache/`, keyed by experiment, config, seed, code and library versions.

Writes are atomic (a temporary file, then a rename), so a sweep killed at any moment leaves only
complete entries behind, and a re-run computes only what is missing. No pickle.
"""

import ast
import dataclasses
import functools
import hashlib
import json
import math
import os
import re
import tempfile
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from . import paths


def to_jsonable(value):
    """Numbers, arrays, tensors and nested containers as plain JSON types (NaN becomes null)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        return [to_jsonable(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def write_atomic(path: Path, write, mode: str = "w") -> Path:
    """Call `write(handle)` on a temporary file next to `path`, then rename it over `path`.

    Readers never see half a file, and a failure leaves the old file (or none) in place. `mode`: "w" or "wb".
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, mode) as handle:
            write(handle)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_json_atomic(path: Path, data) -> Path:
    """Write JSON atomically (see `write_atomic`); NaN is refused, so encode it as None first (`to_jsonable`)."""
    return write_atomic(path, lambda handle: json.dump(data, handle, indent=1, sort_keys=True, allow_nan=False))


PACKAGE = Path(__file__).resolve().parent


@lru_cache(maxsize=8)
def source_hash(package: Path | None = None) -> str:
    """A hash of every `helpers/**/*.py` file, so a code change invalidates cached results."""
    package = Path(package) if package is not None else PACKAGE
    return _hash_files(package, sorted(package.rglob("*.py")))


def _hash_files(package: Path, files) -> str:
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(package)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _module_file(module: str, package: Path) -> Path | None:
    """`helpers.a.b` -> `package/a/b.py` or `package/a/b/__init__.py` (None if it is not a helpers module)."""
    parts = module.split(".")
    if parts[0] != package.name:
        return None
    base = package.joinpath(*parts[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imports(path: Path, module: str) -> set[str]:
    """Modules a file imports, anywhere in it (also inside functions), as absolute names."""
    is_package = path.name == "__init__.py"
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            anchor = module.split(".")
            anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)] if node.level else []
            base = ".".join(anchor + ([node.module] if node.module else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)  # `from . import rank` imports a module
    return names


@lru_cache(maxsize=64)
def dependency_files(module: str, package: Path = PACKAGE) -> tuple[Path, ...] | None:
    """The helpers files that `module` runs when imported: its static import closure inside the package,
    with the parent packages' `__init__.py`. None when `module` is not part of the package."""
    if _module_file(module, package) is None:
        return None
    seen, todo, files = set(), [module], set()
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for depth in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__, a/b/__init__ and a/b/c
            prefix = ".".join(parts[:depth])
            path = _module_file(prefix, package)
            if prefix in seen or path is None:
                continue
            seen.add(prefix)
            files.add(path)
            todo.extend(_imports(path, prefix))
    return tuple(sorted(files))


@lru_cache(maxsize=64)
def code_hash(module: str | None = None, package: Path = PACKAGE) -> str:
    """A hash of the code a result computed by `module` depends on.

    For a helpers module, its import closure (so editing plotting or the book tools leaves the sweeps
    of the chapters warm); otherwise, or for None, every file of the package (`source_hash`).
    """
    files = dependency_files(module, package) if module else None
    return source_hash(package) if files is None else _hash_files(package, files)


def point_module(point) -> str | None:
    """The module a sweep's point function is defined in (through functools.partial)."""
    while isinstance(point, functools.partial):
        point = point.func
    return getattr(point, "__module__", None)


def identity(experiment: str, config: dict, seed: int, module: str | None = None) -> dict:
    """Everything a cached result depends on (JSON-able; dataclasses in the config become dicts).

    `module`: where the code that computes the result lives (see `code_hash`); None hashes all of helpers.
    """
    return {
        "experiment": experiment,
        "config": to_jsonable(config),
        "seed": to_jsonable(seed),
        "helpers_source": code_hash(module),
        "torch": torch.__version__,
        "numpy": np.__version__,
    }


def cache_key(experiment: str, config: dict, seed: int, module: str | None = None) -> str:
    """The store key: experiment name, full config, seed, the code it depends on and library versions."""
    text = json.dumps(identity(experiment, config, seed, module), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class ResultStore:
    """Cached results of grid points, one JSON file each, under `root/<experiment>/`."""

    def __init__(self, root: Path | None = None):
        self.root = Path(root) if root is not None else paths.cache_dir()

    def path(self, experiment: str, config: dict, seed: int, module: str | None = None) -> Path:
        if not isinstance(experiment, str) or not _SAFE_NAME.match(experiment):
            raise ValueError(f"experiment name must be letters, digits, '_', '.' or '-' (a folder name); "
                             f"got {experiment!r}")
        return self.root / experiment / f"{cache_key(experiment, config, seed, module)}.json"

    def load(self, experiment: str, config: dict, seed: int, module: str | None = None):
        """The stored result, or None when this point has not been computed (or its file is unreadable)."""
        path = self.path(experiment, config, seed, module)
        try:
            return json.loads(path.read_text())["result"]
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError, OSError):
            return None  # a damaged entry is recomputed and overwritten

    def contains(self, experiment: str, config: dict, seed: int, module: str | None = None) -> bool:
        return self.load(experiment, config, seed, module) is not None

    def save(self, experiment: str, config: dict, seed: int, result, module: str | None = None) -> Path:
        record = {**identity(experiment, config, seed, module), "result": to_jsonable(result)}
        return write_json_atomic(self.path(experiment, config, seed, module), record)
