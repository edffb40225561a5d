"""Sweeps: a grid of configs x seeds -> a tidy DataFrame, each point cached in the result store.

The experiments of each chapter live in their own submodule (`helpers.experiments.barrier`, ...),
so chapters never edit one shared file; this module holds the runner they all use.

    def point(n, d_head, seed):           # a top-level function returning a dict or a list of dicts
        ...
    df = run_sweep("random_rank", point, grid(n=[64, 128], d_head=[1, 2, 4]), seeds=[0, 1])

Every row of the result carries its config and seed. Points already in the store are loaded,
not recomputed, so a killed sweep resumes where it stopped.
"""

import itertools
import sys
from collections.abc import Callable

import pandas as pd
from tqdm import tqdm

from ..cache import ResultStore


def grid(**axes) -> list[dict]:
    """The Cartesian product of named axes, as a list of config dicts (last axis fastest)."""
    names = list(axes)
    return [dict(zip(names, values)) for values in itertools.product(*(axes[name] for name in names))]


def _rows(result) -> list[dict]:
    if isinstance(result, dict):
        return [result]
    if isinstance(result, list) and all(isinstance(r, dict) for r in result):
        return result
    raise TypeError(f"a sweep point must return a dict or a list of dicts; got {type(result).__name__}")


def run_sweep(
    name: str,
    point: Callable[..., dict | list[dict]],
    configs: list[dict],
    seeds: list[int],
    store: ResultStore | None = None,
    progress: bool = True,
) -> pd.DataFrame:
    """Run `point(**config, seed=seed)` for every config and seed, through the result store."""
    if not configs or not seeds:
        raise ValueError("run_sweep needs at least one config and one seed")
    store = store or ResultStore()
    tasks = [(config, seed) for config in configs for seed in seeds]
    rows = []
    bar = tqdm(tasks, desc=name, file=sys.stderr, disable=not progress, mininterval=2.0, leave=False)
    for config, seed in bar:
        result = store.load(name, config, seed)
        if result is None:
            result = _rows(point(**config, seed=seed))
            store.save(name, config, seed, result)
        rows.extend({**config, "seed": seed, **row} for row in result)
    return pd.DataFrame(rows)
