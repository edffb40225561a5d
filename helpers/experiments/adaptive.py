"""Adaptive stacked sweeps: every setting trains only the widths and seeds its saturation answers depend on
(`helpers.design`), and every model is stored on its own, so that nothing stored is trained twice.

    frame = run_adaptive_sweep("ch6_real_data", stack_point, settings, Design(grid=(1, 2, 3, 4, 6, 8, 12, 16)),
                               scores=scores_of)   # scores_of(rows of one setting) -> {quantity: {(width, seed): score}}

`point(**setting, members=[{axis: width, "seed": seed}, ...], seed=0)` trains one stack and returns rows that
each carry the `axis` value and `seed` of their model, exactly as for `run_stacked_sweep`. The engine

- asks `design.plan` what each setting needs next and loads what the result store has (key: the setting with the
  width, and the seed: a model is found by any sweep of the same name, point code and recipe, whichever stack
  trained it);
- sends the missing models of a setting as one stack (or several: `buckets(setting, widths)` groups the widths, and
  `stack_size(setting)` caps the models of a stack, `helpers.training.cut_stack`) and, as soon as a setting's
  stacks are back, plans its next step, so that the workers never wait for a round of every setting to finish;
- runs in-process, on a process pool or on a Dask cluster (`helpers.executors`), and writes one progress line.

A killed sweep resumes: re-run, the plan replays on the stored models and only what is missing is trained.
`frame.attrs`: computed and loaded (models), and `design` (per setting and quantity: the answer, whether a seed left
out moves it, the seeds it rests on).
"""

from collections.abc import Callable

import pandas as pd

from .. import executors
from ..cache import ResultStore, point_module, to_jsonable
from ..design import Design
from ..errors import ArgumentError
from ..progress import SweepProgress
from ..training import cut_stack
from . import SweepError, _rows


def _check(name, point, settings, design, axis, buckets, stack_size):
    if not isinstance(name, str) or not name:
        raise ArgumentError("name", name, "a non-empty string (the result store's folder)")
    if not callable(point):
        raise ArgumentError("point", point, "a function point(**setting, members=[...], seed=0)")
    if buckets is not None and not callable(buckets):
        raise ArgumentError("buckets", buckets, "None or a function buckets(setting, widths) -> list of width lists")
    if stack_size is not None and not callable(stack_size):
        raise ArgumentError("stack_size", stack_size, "None or a function stack_size(setting) -> models per stack")
    if not isinstance(design, Design):
        raise ArgumentError("design", design, "a helpers.design.Design")
    settings = list(settings)
    if not settings or not all(isinstance(s, dict) for s in settings):
        raise ArgumentError("settings", settings, "a non-empty list of config dicts")
    for setting in settings:
        if axis in setting or "seed" in setting or "members" in setting:
            raise ArgumentError("settings", setting, f"configs without {axis!r}, 'seed' or 'members' (the design "
                                "chooses the widths and seeds)")
    return settings


def run_adaptive_sweep(name: str, point: Callable, settings: list[dict], design: Design,
                       scores: Callable[[pd.DataFrame], dict], keep_going: Callable[[pd.DataFrame], bool] | None = None,
                       axis: str = "d_head", buckets: Callable | None = None, stack_size: Callable | None = None,
                       store: ResultStore | None = None, executor=None, progress: bool = True,
                       recompute: bool = False) -> pd.DataFrame:
    """Train every setting by `design` (see the module docstring); one row per model (and whatever the point
    returns per model), with the setting's config, `axis` and `seed`.

    scores(rows) -> {quantity: {(width, seed): score}} reads the rows of one setting (higher is better);
    keep_going(rows) -> bool, asked once both ends are trained, can stop a setting (a quality bar missed);
    buckets(setting, widths) -> list of lists splits one request into several stacks, and stack_size(setting) -> int
    caps the models of each (None: no cap). recompute=True retrains every requested model and overwrites the store."""
    settings = _check(name, point, settings, design, axis, buckets, stack_size)
    store = store or ResultStore()
    runner = executors.resolve(executor)
    module = point_module(point)
    rows: list[list[dict]] = [[] for _ in settings]
    finished, failures = set(), []
    counts = {"done": 0, "loaded": 0}
    line = SweepProgress(name, runner.name, enabled=progress)

    def key(i, width):
        return {**settings[i], axis: width}

    def next_request(i) -> list[tuple]:
        """Load stored models of setting i until its plan asks for something missing (or it is finished)."""
        while True:
            frame = pd.DataFrame(rows[i])
            table = scores(frame) if len(frame) else {}
            going = True if not len(frame) or keep_going is None else bool(keep_going(frame))
            wanted = design.plan(table, going)
            missing = []
            for width, seed in wanted:
                stored = None if recompute else store.load(name, key(i, width), seed, module)
                if stored is None:
                    missing.append((width, seed))
                else:
                    rows[i].extend({**settings[i], **row} for row in stored)
                    counts["loaded"] += 1
            if missing or not wanted:
                return missing

    def stacks(i, request) -> list[dict]:
        widths = sorted({w for w, _ in request})
        groups = buckets(settings[i], widths) if buckets is not None else [widths]
        limit = stack_size(settings[i]) if stack_size is not None else None
        return [{**settings[i], "members": [{axis: w, "seed": s} for w, s in piece]}
                for group in groups for piece in cut_stack([(w, s) for w, s in request if w in group], limit)]

    def left_bound() -> int:
        """At most this many models are still to train: every untrained (width, seed) up to the seed cap."""
        return sum(len(design.grid) * design.max_seeds - len({(r[axis], r["seed"]) for r in part})
                   for i, part in enumerate(rows) if i not in finished)

    with runner.pool() as pool:
        flying: dict = {}                    # ticket -> (setting index, its members)

        def launch(i):
            request = next_request(i)
            if not request:
                finished.add(i)
                return
            for task in stacks(i, request):
                flying[pool.submit(point, task, 0)] = (i, task["members"])

        for i in range(len(settings)):
            launch(i)
        running = lambda: sum(len(m) for _, m in flying.values())  # noqa: E731
        line.update(**counts, running=running(), left=max(0, left_bound() - running()), bound=True)
        while flying:
            ticket, result, error = pool.wait()
            i, members = flying.pop(ticket)
            if error is not None:
                failures.append((settings[i], 0, error))
                finished.add(i)
            else:
                by_model: dict = {}
                for row in to_jsonable(_rows(result)):
                    by_model.setdefault((row.get(axis), row.get("seed")), []).append(row)
                for member in members:
                    model_rows = by_model.get((member[axis], member["seed"]))
                    if not model_rows:
                        raise ValueError(f"run_adaptive_sweep {name!r}: the point returned no row for {member} "
                                         f"(each row must carry {axis!r} and 'seed')")
                    store.save(name, key(i, member[axis]), member["seed"], model_rows, module)
                    rows[i].extend({**settings[i], **row} for row in model_rows)
                    counts["done"] += 1
                if i not in finished and not any(j == i for j, _ in flying.values()):
                    launch(i)
            line.update(**counts, running=running(), left=max(0, left_bound() - running()), bound=True)
    line.update(**counts, running=0, left=0)
    line.close()
    if failures:
        raise SweepError(name, failures)
    frame = pd.DataFrame([row for part in rows for row in part])
    first = list(dict.fromkeys([*settings[0], axis, "seed"]))   # then the point's columns, sorted: as stored
    frame = frame[first + sorted(c for c in frame.columns if c not in first)]
    frame.attrs.update(computed=counts["done"], loaded=counts["loaded"], design=[
        {**settings[i], "quantity": q, **status}
        for i in range(len(settings)) if rows[i]
        for q, status in design.status(scores(pd.DataFrame(rows[i]))).items()])
    return frame
