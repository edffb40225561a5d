"""Sweeps on a process pool and on a real Dask LocalCluster (2 worker processes) match the in-process run,
survive a killed worker, and report failing points with their grid point."""

import os
import signal
import threading
import time

import pandas as pd
import pytest

from helpers import executors
from helpers.cache import ResultStore
from helpers.experiments import SweepError, grid, run_sweep
from helpers.experiments.ch04_random_attention import rank_point

pytestmark = pytest.mark.slow

CONFIGS = grid(n=[32], d_head=[1, 2, 4, 8], d_model=[48], inputs=["gaussian"], trials=[6])
SEEDS = [0, 1]


@pytest.fixture(scope="module")
def cluster():
    from distributed import LocalCluster

    local = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    yield local
    local.close()


def sweep(store_dir, executor=None, configs=CONFIGS, name="executor_test"):
    return run_sweep(name, rank_point, configs, SEEDS, store=ResultStore(store_dir), progress=False, executor=executor)


def test_dask_results_identical_to_in_process(cluster, tmp_path):
    reference = sweep(tmp_path / "a")
    distributed = sweep(tmp_path / "b", executors.Dask(cluster.scheduler_address))
    pd.testing.assert_frame_equal(reference, distributed)
    assert distributed.attrs["computed"] == len(CONFIGS) * len(SEEDS)
    again = sweep(tmp_path / "b", executors.Dask(cluster.scheduler_address))
    assert again.attrs["computed"] == 0, "stored points are never sent to the cluster"


def test_process_pool_results_identical_to_in_process(tmp_path):
    configs = CONFIGS[:2]
    reference = sweep(tmp_path / "a", configs=configs)
    pooled = sweep(tmp_path / "b", executors.ProcessPool(2), configs=configs)
    pd.testing.assert_frame_equal(reference, pooled)


def test_failing_point_is_reported_and_the_others_are_stored(cluster, tmp_path):
    configs = CONFIGS[:2] + [dict(CONFIGS[0], inputs="no-such-inputs")]
    with pytest.raises(SweepError) as err:
        sweep(tmp_path, executors.Dask(cluster.scheduler_address), configs=configs)
    assert len(err.value.failures) == len(SEEDS)
    assert all(config["inputs"] == "no-such-inputs" for config, _, _ in err.value.failures)
    assert "no-such-inputs" in str(err.value) and "seed=0" in str(err.value)
    rerun = sweep(tmp_path, configs=CONFIGS[:2])
    assert rerun.attrs["computed"] == 0, "the good points were stored despite the failure"


def test_killed_worker_sweep_finishes_or_reports_and_rerun_fills_gaps(cluster, tmp_path):
    from distributed import Client

    configs = grid(n=[64], d_head=[1, 2, 3, 4, 5, 6, 8, 12], d_model=[96], inputs=["gaussian"], trials=[24])
    store_dir = tmp_path / "store"
    outcome = {}

    def run():
        try:
            outcome["frame"] = sweep(store_dir, executors.Dask(cluster.scheduler_address), configs=configs)
        except SweepError as err:
            outcome["error"] = err

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.time() + 180
    while time.time() < deadline and len(list(store_dir.rglob("*.json"))) < 3:
        time.sleep(0.1)
    stored_before_kill = len(list(store_dir.rglob("*.json")))
    with Client(cluster.scheduler_address) as client:
        pids = client.run(os.getpid)
    os.kill(next(iter(pids.values())), signal.SIGKILL)
    thread.join(timeout=600)
    assert not thread.is_alive()
    total = len(configs) * len(SEEDS)
    assert 3 <= stored_before_kill < total, "the kill should land mid-sweep"
    failed = len(outcome["error"].failures) if "error" in outcome else 0
    assert len(list(store_dir.rglob("*.json"))) == total - failed
    rerun = sweep(store_dir, configs=configs)
    assert rerun.attrs["computed"] == failed, "a re-run computes exactly the missing points"
    per_point = len(rank_point(**configs[0], seed=SEEDS[0]))
    assert len(rerun) == total * per_point, "the re-run returns every point, stored or computed"
    if "frame" in outcome:
        assert len(outcome["frame"]) == total * per_point


def test_resolve_names_and_addresses(monkeypatch):
    assert isinstance(executors.resolve(None), executors.InProcess)
    assert isinstance(executors.resolve("processes"), executors.ProcessPool)
    assert executors.resolve("tcp://127.0.0.1:8786").address == "tcp://127.0.0.1:8786"
    monkeypatch.setenv(executors.SCHEDULER_ENV, "tcp://10.1.2.3:8786")
    assert executors.resolve(None).address == "tcp://10.1.2.3:8786"
    with pytest.raises(ValueError, match="executor must be"):
        executors.resolve("bogus")


def test_a_worker_runs_each_point_with_one_torch_thread_and_restores_the_setting():
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        seen = executors._call(lambda seed, **config: (torch.get_num_threads(), seed, config), {"n": 3}, 7)
        assert seen == (1, 7, {"n": 3})
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
