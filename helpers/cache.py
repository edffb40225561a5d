"""The result store: JSON files under `.cache/`, keyed by experiment, config, seed, code and library versions.

Writes are atomic (a temporary file, then a rename), so a sweep killed at any moment leaves only
complete entries behind, and a re-run computes only what is missing. No pickle.
"""

import dataclasses
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


def write_json_atomic(path: Path, data) -> Path:
    """Write JSON through a temporary file and a rename, so readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(data, handle, indent=1, sort_keys=True, allow_nan=False)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


@lru_cache(maxsize=8)
def source_hash(package: Path | None = None) -> str:
    """A hash of every `helpers/**/*.py` file, so a code change invalidates cached results."""
    digest = hashlib.sha256()
    package = Path(package) if package is not None else Path(__file__).resolve().parent
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def identity(experiment: str, config: dict, seed: int) -> dict:
    """Everything a cached result depends on (JSON-able; dataclasses in the config become dicts)."""
    return {
        "experiment": experiment,
        "config": to_jsonable(config),
        "seed": to_jsonable(seed),
        "helpers_source": source_hash(),
        "torch": torch.__version__,
        "numpy": np.__version__,
    }


def cache_key(experiment: str, config: dict, seed: int) -> str:
    """The store key: experiment name, full config, seed, helpers source and library versions."""
    text = json.dumps(identity(experiment, config, seed), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class ResultStore:
    """Cached results of grid points, one JSON file each, under `root/<experiment>/`."""

    def __init__(self, root: Path | None = None):
        self.root = Path(root) if root is not None else paths.cache_dir()

    def path(self, experiment: str, config: dict, seed: int) -> Path:
        if not isinstance(experiment, str) or not _SAFE_NAME.match(experiment):
            raise ValueError(f"experiment name must be letters, digits, '_', '.' or '-' (a folder name); "
                             f"got {experiment!r}")
        return self.root / experiment / f"{cache_key(experiment, config, seed)}.json"

    def load(self, experiment: str, config: dict, seed: int):
        """The stored result, or None when this point has not been computed (or its file is unreadable)."""
        path = self.path(experiment, config, seed)
        try:
            return json.loads(path.read_text())["result"]
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError, OSError):
            return None  # a damaged entry is recomputed and overwritten

    def contains(self, experiment: str, config: dict, seed: int) -> bool:
        return self.load(experiment, config, seed) is not None

    def save(self, experiment: str, config: dict, seed: int, result) -> Path:
        record = {**identity(experiment, config, seed), "result": to_jsonable(result)}
        return write_json_atomic(self.path(experiment, config, seed), record)
