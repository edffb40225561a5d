"""Speed-up of a CPU-bound sweep on a 2-worker Dask LocalCluster over the in-process run.

    .venv/bin/python benchmarks/bench_dask.py      (also run by `make bench`)

Both runs compute the same 8 grid points of the chapter-4 sweep (random heads: SVDs of batches of
attention matrices) into empty result stores. The in-process run is timed with torch's default thread count
(the target's baseline) and with one thread; each Dask worker uses one torch thread. Cluster start-up is
excluded and printed separately.
"""

import tempfile
import time
from pathlib import Path

from _common import header, verdict

from helpers import executors
from helpers.cache import ResultStore
from helpers.experiments import grid, run_sweep
from helpers.experiments.ch04_random_attention import rank_point

CONFIGS = grid(n=[256], d_head=[1, 2, 4, 8, 16, 32, 64, 128], d_model=[256], inputs=["gaussian"], trials=[48])
TARGET = 1.6


def timed_sweep(executor) -> float:
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        run_sweep("bench_dask", rank_point, CONFIGS, [0], store=ResultStore(Path(folder)), progress=False,
                  executor=executor)
        return time.perf_counter() - start


def main() -> None:
    import torch

    header(f"sweep of {len(CONFIGS)} points: in-process vs Dask LocalCluster (2 workers x 1 thread)")
    default_threads = torch.get_num_threads()
    in_process = timed_sweep(None)
    print(f"in-process ({default_threads} torch threads, torch's default): {in_process:.1f} s")
    torch.set_num_threads(1)
    in_process_one = timed_sweep(None)
    torch.set_num_threads(default_threads)
    print(f"in-process (1 torch thread): {in_process_one:.1f} s")
    start = time.perf_counter()
    dask = executors.Dask(workers=2)
    dask.client().close()
    print(f"LocalCluster start-up: {time.perf_counter() - start:.1f} s (not counted)")
    timed_sweep(dask)  # warm the workers' imports
    distributed = timed_sweep(dask)
    dask.close()
    print(f"Dask LocalCluster, 2 workers x 1 torch thread: {distributed:.1f} s")
    print(f"speed-up of Dask over in-process with 1 torch thread: {in_process_one / distributed:.2f}x")
    print(verdict(f"speed-up of Dask over in-process with {default_threads} torch threads", in_process / distributed, TARGET))


if __name__ == "__main__":
    main()
