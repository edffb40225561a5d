"""Where sweep points run: in this process (default), in a local process pool, or on a Dask cluster.

    run_sweep(..., executor="processes")            # a local pool, one torch thread per worker
    run_sweep(..., executor="local")                # a Dask LocalCluster started on demand
    run_sweep(..., executor="tcp://10.0.0.5:8786")  # an existing Dask scheduler
    HELPERS_DASK_SCHEDULER=tcp://... python -m helpers execute ...   # the same, for every sweep

Workers only compute and return results; the client writes the result store, so the store needs no
shared file system. Each executor yields `(index, result, error)` as points finish, in any order.

An adaptive sweep decides its next points from the results so far, so it submits as it goes:

    with executor.pool() as pool:
        ticket = pool.submit(point, config, seed)     # returns at once (in-process: runs on `wait`)
        ticket, result, error = pool.wait()           # blocks until one submitted point has finished
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


def _run_all(executor, point, tasks) -> Iterator[tuple[int, object, BaseException | None]]:
    """`run` for every executor: submit every task, yield each as it finishes."""
    with executor.pool() as pool:
        tickets = {pool.submit(point, config, seed): i for i, (config, seed) in enumerate(tasks)}
        for _ in tasks:
            ticket, result, error = pool.wait()
            yield tickets[ticket], result, error


class _Pool:
    """Submitted points and their tickets (0, 1, ...); subclasses start and collect the work."""

    def __init__(self):
        self.running: dict = {}   # handle -> ticket
        self.tickets = 0

    def submit(self, point: Callable, config: dict, seed: int) -> int:
        self.running[self._start(point, config, seed)] = ticket = self.tickets
        self.tickets += 1
        return ticket

    def __len__(self) -> int:
        """Points submitted and not yet collected by `wait`."""
        return len(self.running)

    def wait(self) -> tuple[int, object, BaseException | None]:
        if not self.running:
            raise RuntimeError("wait() with no point submitted")
        handle, result, error = self._collect()
        return self.running.pop(handle), result, error

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        pass


class _Serial(_Pool):
    """Points run in submission order, in this process, when `wait` asks for one."""

    def __init__(self):
        super().__init__()
        self.queued: dict = {}   # ticket -> (point, config, seed)

    def _start(self, point, config, seed):
        self.queued[self.tickets] = (point, config, seed)
        return self.tickets

    def _collect(self):
        ticket = next(iter(self.running))
        point, config, seed = self.queued.pop(ticket)
        return ticket, point(**config, seed=seed), None  # errors propagate at once, as they always have


class InProcess:
    """Run points one after another in this process (the default)."""

    name = "in-process"
    workers = 1

    def pool(self) -> _Pool:
        return _Serial()

    def run(self, point: Callable, tasks: list[tuple[dict, int]]) -> Iterator[tuple[int, object, BaseException | None]]:
        return _run_all(self, point, tasks)


class _Futures(_Pool):
    """Points on a `concurrent.futures` process pool."""

    def __init__(self, workers: int):
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        super().__init__()
        self.executor = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))

    def _start(self, point, config, seed):
        return self.executor.submit(_call, point, config, seed)

    def _collect(self):
        from concurrent.futures import FIRST_COMPLETED, wait

        done, _ = wait(list(self.running), return_when=FIRST_COMPLETED)
        future = min(done, key=self.running.get)   # the earliest submitted of those done: a stable order
        error = future.exception()
        return future, None if error else future.result(), error

    def close(self) -> None:
        self.executor.shutdown(cancel_futures=True)


class ProcessPool:
    """A local pool of worker processes (spawned, one torch thread each)."""

    def __init__(self, workers: int | None = None):
        self.workers = workers or os.cpu_count() or 1
        self.name = f"process pool ({self.workers} workers)"

    def pool(self) -> _Pool:
        return _Futures(self.workers)

    def run(self, point, tasks):
        return _run_all(self, point, tasks)


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

    def pool(self) -> _Pool:
        return _DaskPool(self.client())

    def run(self, point, tasks):
        return _run_all(self, point, tasks)

    def close(self) -> None:
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None


class _DaskPool(_Pool):
    """Points on a Dask cluster, through one client (closed with the pool)."""

    def __init__(self, client):
        from distributed import as_completed

        super().__init__()
        self.client, self.finished = client, as_completed()

    def _start(self, point, config, seed):
        future = self.client.submit(_call, point, config, seed, pure=False)
        self.finished.add(future)
        return future

    def _collect(self):
        future = next(self.finished)
        if future.status == "finished":
            return future, future.result(), None
        return future, None, future.exception()

    def close(self) -> None:
        self.client.close()


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
