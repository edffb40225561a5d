"""Where sweep points run: in this process (default), in a local process pool, or on a Dask cluster.

    run_sweep(..., executor="processes")            # a local pool, one torch thread per worker
    run_sweep(..., executor="local")                # a Dask LocalCluster started on demand
    run_sweep(..., executor="tcp://10.0.0.5:8786")  # an existing Dask scheduler
    HELPERS_DASK_SCHEDULER=tcp://... python -m helpers execute ...   # the same, for every sweep

Workers only compute and return results; the client writes the result store, so the store needs no
shared file system. Each executor yields `(index, result, error)` as points finish, in any order.
"""

import atexit
import os
from collections.abc import Callable, Iterator

SCHEDULER_ENV = "HELPERS_DASK_SCHEDULER"
NAMED = ("inprocess", "processes", "local")
_LOCAL = None  # the on-demand LocalCluster, shared by every sweep of this process


def _call(point, config, seed):
    """One point in a worker, with one torch thread (see `helpers.threads`), so workers do not fight over cores."""
    from .threads import torch_threads

    with torch_threads(1):
        return point(**config, seed=seed)


class InProcess:
    """Run points one after another in this process (the default)."""

    name = "in-process"

    def run(self, point: Callable, tasks: list[tuple[dict, int]]) -> Iterator[tuple[int, object, BaseException | None]]:
        for index, (config, seed) in enumerate(tasks):
            yield index, point(**config, seed=seed), None  # errors propagate at once, as they always have


class ProcessPool:
    """A local pool of worker processes (spawned, one torch thread each)."""

    def __init__(self, workers: int | None = None):
        self.workers = workers or os.cpu_count() or 1
        self.name = f"process pool ({self.workers} workers)"

    def run(self, point, tasks):
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(self.workers, mp_context=context) as pool:
            futures = {pool.submit(_call, point, config, seed): i for i, (config, seed) in enumerate(tasks)}
            for future in as_completed(futures):
                error = future.exception()
                yield futures[future], None if error else future.result(), error


class Dask:
    """A Dask distributed cluster: an existing scheduler address, or a LocalCluster started on demand."""

    def __init__(self, address: str | None = None, workers: int = 2):
        self.address, self.workers = address, workers
        self.name = f"Dask scheduler {address}" if address else f"Dask LocalCluster ({workers} workers)"
        self._cluster = None

    def client(self):
        try:
            from distributed import Client, LocalCluster
        except ImportError as err:
            raise ImportError("the Dask executor needs dask[distributed]: pip install 'dask[distributed]'") from err
        if self.address:
            return Client(self.address)
        if self._cluster is None:
            self._cluster = LocalCluster(n_workers=self.workers, threads_per_worker=1, processes=True,
                                         dashboard_address=None)
        return Client(self._cluster)

    def run(self, point, tasks):
        from distributed import as_completed

        client = self.client()
        try:
            futures = {client.submit(_call, point, config, seed, pure=False): i for i, (config, seed) in enumerate(tasks)}
            for future in as_completed(futures):
                if future.status == "finished":
                    yield futures[future], future.result(), None
                else:
                    yield futures[future], None, future.exception()
        finally:
            client.close()

    def close(self) -> None:
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None


_DEFAULT = None  # set by a notebook's SCHEDULER parameter through set_default


def set_default(executor) -> None:
    """Make `executor` the default of every later sweep in this process (None: back to in-process/env)."""
    global _DEFAULT
    _DEFAULT = None if executor is None else resolve(executor)


def resolve(executor=None):
    """An executor object from None, a name ("inprocess", "processes", "local") or a scheduler address.

    None means: the default set by `set_default`, else $HELPERS_DASK_SCHEDULER, else in-process.
    """
    if executor is None and _DEFAULT is not None:
        return _DEFAULT
    if executor is None:
        executor = os.environ.get(SCHEDULER_ENV) or "inprocess"
    if not isinstance(executor, str):
        if not hasattr(executor, "run"):
            raise TypeError(f"executor must be None, one of {NAMED}, a scheduler address, or have .run(); got {executor!r}")
        return executor
    if executor == "inprocess":
        return InProcess()
    if executor == "processes":
        return ProcessPool()
    if executor == "local":
        global _LOCAL
        if _LOCAL is None:
            _LOCAL = Dask()
            atexit.register(_LOCAL.close)
        return _LOCAL
    if "://" in executor or ":" in executor:
        return Dask(address=executor)
    raise ValueError(f"executor must be None, one of {NAMED} or a scheduler address like tcp://host:8786; got {executor!r}")
