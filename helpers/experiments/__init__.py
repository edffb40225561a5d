"""Sweeps: a grid of configs x seeds -> a tidy DataFrame, each point cached in the result store.

The experiments of each chapter live in their own submodule (`helpers.experiments.ch02_low_rank_barrier`, ...),
so chapters never edit one shared file; this module holds the runner they all use.

    def point(n, d_head, seed):           # a top-level function returning a dict or a list of dicts
        ...
    df = run_sweep("random_rank", point, grid(n=[64, 128], d_head=[1, 2, 4]), seeds=[0, 1])

Models that differ only in one axis (the query/key width) and their seed can be trained together, as one
stacked computation (`helpers.training`), with `run_stacked_sweep`: each stack is one task of the runner.
`helpers.experiments.adaptive.run_adaptive_sweep` trains only the widths and seeds a saturation answer depends
on, and stores each model on its own. It is not imported here: this file is part of the code every stored point is
keyed by, and an edit of the search must not invalidate the trained models.

Every row of the result carries its config and seed. Points already in the store are loaded,
not recomputed, so a killed sweep resumes where it stopped (each point is written atomically as soon as
it is done). `df.attrs["computed"]` and `df.attrs["loaded"]` count the points of each kind.
"""

import itertools
import json
import sys
from collections.abc import Callable

import pandas as pd

from .. import executors
from ..cache import ResultStore, point_module, to_jsonable
from ..progress import SweepProgress


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


def _check(name, point, configs, seeds):
    if not isinstance(name, str) or not name:
        raise ValueError(f"run_sweep: name must be a non-empty string; got {name!r}")
    if not callable(point):
        raise TypeError(f"run_sweep: point must be a function point(**config, seed=...); got {point!r}")
    configs, seeds = list(configs), list(seeds)
    if not configs or not seeds:
        raise ValueError("run_sweep needs at least one config and one seed")
    for config in configs:
        if not isinstance(config, dict):
            raise TypeError(f"run_sweep: each config must be a dict; got {config!r}")
        if "seed" in config:
            raise ValueError(f"run_sweep: configs must not contain 'seed' (pass seeds=...); got {config!r}")
    for seed in seeds:
        if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
            raise ValueError(f"run_sweep: seeds must be non-negative integers; got {seed!r}")
    return configs, seeds


class SweepError(RuntimeError):
    """Some grid points failed; all the others were computed and stored."""

    def __init__(self, name: str, failures: list[tuple[dict, int, BaseException]]):
        self.failures = failures
        lines = [f"  {config} seed={seed}: {type(err).__name__}: {err}" for config, seed, err in failures]
        super().__init__(f"sweep {name!r}: {len(failures)} point(s) failed (the others are stored; "
                         f"a re-run computes only the missing ones):\n" + "\n".join(lines))


def run_sweep(
    name: str,
    point: Callable[..., dict | list[dict]],
    configs: list[dict],
    seeds: list[int],
    store: ResultStore | None = None,
    progress: bool = True,
    recompute: bool = False,
    executor=None,
) -> pd.DataFrame:
    """Run `point(**config, seed=seed)` for every config and seed, through the result store.

    recompute=True ignores (and overwrites) stored points. Results go through JSON, so a point should
    return plain numbers, strings, lists or arrays; NaN comes back as None/NaN.

    executor: None (in-process, or the scheduler in $HELPERS_DASK_SCHEDULER), "processes", "local" (a
    Dask LocalCluster), a Dask scheduler address, or an object from `helpers.executors`. Only points
    missing from the store are sent out; results are stored here, as they arrive. A point that fails
    on a worker is reported in a SweepError after every other point has been stored.
    """
    configs, seeds = _check(name, point, configs, seeds)
    store = store or ResultStore()
    runner = executors.resolve(executor)
    tasks = [(config, seed) for config in configs for seed in seeds]
    module = point_module(point)  # the cache key hashes the code this point depends on
    results = {}
    if not recompute:
        for i, (config, seed) in enumerate(tasks):
            stored = store.load(name, config, seed, module)
            if stored is not None:
                results[i] = stored
    missing = [i for i in range(len(tasks)) if i not in results]
    failures = []
    line = SweepProgress(name, runner.name, unit="point", enabled=progress)
    loaded = len(results)
    for j, result, error in runner.run(point, [tasks[i] for i in missing]):
        config, seed = tasks[missing[j]]
        if error is not None:
            failures.append((config, seed, error))
        else:
            result = to_jsonable(_rows(result))  # as a re-run will load it
            store.save(name, config, seed, result, module)
            results[missing[j]] = result
        line.update(done=len(results) - loaded, loaded=loaded, left=len(tasks) - len(results) - len(failures))
    line.update(left=0)
    if missing:
        line.close()
    if failures:
        raise SweepError(name, failures)
    rows = [{**config, "seed": seed, **row} for i, (config, seed) in enumerate(tasks) for row in results[i]]
    frame = pd.DataFrame(rows)
    frame.attrs.update(computed=len(missing), loaded=len(tasks) - len(missing))
    return frame


def stack_configs(configs: list[dict], seeds: list[int], axis: str = "d_head", buckets=None) -> list[dict]:
    """Group a grid into stack tasks: configs equal but for `axis` share a stack, with every seed.

    `buckets(values) -> list of lists` splits a group's `axis` values into stacks (for example
    `helpers.training.bucket_head_dims`); None keeps each group whole. Each task is the shared config plus
    `members`: `[{axis: value, "seed": seed}, ...]`, value-major.
    """
    configs, seeds = _check("stacked sweep", lambda: None, configs, seeds)
    groups: dict[str, tuple[dict, list]] = {}
    for config in configs:
        if axis not in config:
            raise ValueError(f"run_stacked_sweep: every config needs the stacked axis {axis!r}; got {config!r}")
        shared = {k: v for k, v in config.items() if k != axis}
        key = json.dumps(shared, sort_keys=True, default=str)
        groups.setdefault(key, (shared, []))[1].append(config[axis])
    tasks = []
    for shared, values in groups.values():
        for bucket in (buckets(values) if buckets is not None else [values]):
            tasks.append({**shared, "members": [{axis: v, "seed": s} for v in bucket for s in seeds]})
    return tasks


def run_stacked_sweep(name: str, point: Callable[..., list[dict]], configs: list[dict], seeds: list[int],
                      axis: str = "d_head", buckets=None, **options) -> pd.DataFrame:
    """`run_sweep` with one task per stack of models (see `stack_configs`), rows as if run one by one.

    `point(**shared_config, members=[{axis: value, "seed": seed}, ...], seed=0)` trains the stack and returns
    rows that each carry the `axis` value and `seed` of their model. A finished stack is stored and loaded,
    never retrained; `executor` sends whole stacks to workers. Options go to `run_sweep`.
    """
    tasks = stack_configs(configs, seeds, axis, buckets)
    frame = run_sweep(name, point, tasks, seeds=[0], **options)
    for task in tasks:  # every model of every stack reported back
        for member in task["members"]:
            rows = frame[(frame[axis] == member[axis]) & (frame["seed"] == member["seed"])] \
                if axis in frame and "seed" in frame else frame.iloc[:0]
            if rows.empty:
                raise ValueError(f"run_stacked_sweep {name!r}: the point returned no row for {member} "
                                 f"(each row must carry {axis!r} and 'seed')")
    return frame.drop(columns="members")
