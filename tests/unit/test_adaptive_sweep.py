"""The adaptive sweep engine (`helpers.experiments.adaptive`): the plan it follows is `helpers.design`'s, every model
is stored on its own and never trained twice, it gives the same models on every scheduler (in-process, a process
pool, a real Dask LocalCluster), and a sweep killed with SIGKILL resumes with only the missing models trained."""

import io
import json
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

from helpers import executors
from helpers.cache import ResultStore
from helpers.design import Design
from helpers.errors import ArgumentError
from helpers.experiments import SweepError
from helpers.experiments.adaptive import run_adaptive_sweep
from helpers.progress import SweepProgress
from kill_resume import environment, kill_when_stored

GRID = (1, 2, 3, 4, 6, 8, 12, 16)
SETTINGS = [{"knee": 0.7, "wobble": 0.004}, {"knee": 3.0, "wobble": 0.004}, {"knee": 9.0, "wobble": 0.004},
            {"knee": 0.7, "wobble": 0.02}]   # the last one is noisy enough to need extra seeds


def toy_loss(knee, wobble, w, s):
    return float(np.exp(-w / knee) + wobble * ((s * 31 + w * 17) % 5 - 2))


def toy_point(knee: float, wobble: float, members: list, seed: int = 0) -> list[dict]:
    """A stand-in for a stack of trained models: per member, a 'loss' falling with the width (knee: how slowly)
    and a seed-dependent wobble; two rows per model, as a model with two layers gives."""
    if knee < 0:
        raise ValueError("a negative knee")
    rows = []
    for m in members:
        w, s = m["d_head"], m["seed"]
        loss = toy_loss(knee, wobble, w, s)
        rows += [{"d_head": w, "seed": s, "layer": layer, "loss": float(loss)} for layer in (0, 1)]
    return rows


def toy_scores(rows: pd.DataFrame) -> dict:
    per_model = rows.groupby(["d_head", "seed"]).loss.first()
    return {"loss": {(int(w), int(s)): -v for (w, s), v in per_model.items()}}


def sweep(store_dir, executor=None, settings=SETTINGS, design=Design(GRID), **kw):
    return run_adaptive_sweep("adaptive_test", toy_point, settings, design, toy_scores, store=ResultStore(store_dir),
                              executor=executor, progress=False, **kw)


def drive(design, knee, wobble):
    """The plan driven directly on the toy scores: the models the engine must train for one setting."""
    table, trained = {}, set()
    while more := design.plan({"loss": table}):
        for w, s in more:
            trained.add((w, s))
            table[(w, s)] = -toy_loss(knee, wobble, w, s)
    return trained


def models(frame):
    return sorted({(r.knee, r.wobble, int(r.d_head), int(r.seed)) for r in frame.itertuples()})


def test_in_process_trains_exactly_what_the_design_asks_and_a_rerun_loads_it(tmp_path):
    frame = sweep(tmp_path)
    expected = sorted((s["knee"], s["wobble"], w, seed) for s in SETTINGS
                      for w, seed in drive(Design(GRID), s["knee"], s["wobble"]))
    assert models(frame) == expected
    assert frame.attrs["computed"] == len(expected) and frame.attrs["loaded"] == 0
    assert len(frame) == 2 * len(expected), "every row of every model comes back"
    assert len({w for k, b, w, s in expected if (k, b) == (0.7, 0.004)}) < len(GRID), "far widths are not trained"
    assert {s for k, b, w, s in expected if b == 0.02} > {0, 1, 2}, "the noisy setting got extra seeds"
    assert {s for k, b, w, s in expected if b == 0.004} == {0, 1, 2}, "the others did not"
    again = sweep(tmp_path)
    assert again.attrs["computed"] == 0 and again.attrs["loaded"] == len(expected)
    pd.testing.assert_frame_equal(again.sort_values(list(again.columns)).reset_index(drop=True),
                                  frame.sort_values(list(frame.columns)).reset_index(drop=True))
    status = pd.DataFrame(frame.attrs["design"])
    assert list(status.columns[:3]) == ["knee", "wobble", "quantity"] and len(status) == len(SETTINGS)


def test_a_model_is_stored_alone_and_found_by_a_sweep_that_needs_it(tmp_path):
    first = sweep(tmp_path, settings=SETTINGS[:1], design=Design((1, 16)))   # ends only, 3 seeds
    assert first.attrs["computed"] == 6
    finer = sweep(tmp_path, settings=SETTINGS[:1])                          # the same models, then more widths
    assert finer.attrs["loaded"] == 6 and finer.attrs["computed"] == len(drive(Design(GRID), 0.7, 0.004)) - 6


def test_buckets_split_a_request_into_stacks_without_changing_the_models(tmp_path):
    calls = []

    def buckets(setting, widths):
        calls.append(list(widths))
        return [[w] for w in widths]

    split = sweep(tmp_path / "a", buckets=buckets)
    whole = sweep(tmp_path / "b")
    assert models(split) == models(whole) and any(len(c) > 1 for c in calls)


def test_stack_size_caps_every_stack_and_keeps_the_models(tmp_path):
    sizes = []

    def point(knee, wobble, members, seed=0):
        sizes.append(len(members))
        return toy_point(knee, wobble, members, seed)

    capped = run_adaptive_sweep("adaptive_test", point, SETTINGS, Design(GRID), toy_scores,
                                store=ResultStore(tmp_path / "a"), progress=False, stack_size=lambda setting: 2)
    assert models(capped) == models(sweep(tmp_path / "b"))
    assert max(sizes) == 2 and sum(sizes) == capped.attrs["computed"]
    with pytest.raises(ArgumentError) as err:
        sweep(tmp_path / "c", stack_size=2)
    assert err.value.name == "stack_size" and not (tmp_path / "c" / "adaptive_test").exists()


@pytest.fixture(scope="module")
def cluster():
    import cloudpickle
    from distributed import LocalCluster

    cloudpickle.register_pickle_by_value(sys.modules[__name__])   # workers cannot import this test module
    local = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    yield local
    local.close()
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def same(a, b):
    key = ["knee", "wobble", "d_head", "seed", "layer"]
    pd.testing.assert_frame_equal(a.sort_values(key).reset_index(drop=True), b.sort_values(key).reset_index(drop=True))


@pytest.mark.slow
def test_local_cluster_and_process_pool_train_the_same_models_as_in_process(cluster, tmp_path):
    reference = sweep(tmp_path / "a")
    same(reference, sweep(tmp_path / "b", executors.Dask(cluster.scheduler_address)))
    same(reference, sweep(tmp_path / "c", executors.ProcessPool(2)))
    capped = lambda setting: 2   # noqa: E731 (stacks cut to two models: the same models on every scheduler)
    same(reference, sweep(tmp_path / "d", executors.Dask(cluster.scheduler_address), stack_size=capped))
    same(reference, sweep(tmp_path / "e", executors.ProcessPool(2), stack_size=capped))
    again = sweep(tmp_path / "b", executors.Dask(cluster.scheduler_address))
    assert again.attrs["computed"] == 0, "stored models are never sent to the cluster"


def test_a_failing_setting_is_reported_after_the_others_are_stored(tmp_path):
    with pytest.raises(SweepError) as err:
        sweep(tmp_path, executors.ProcessPool(2), settings=SETTINGS[:1] + [{"knee": -1.0, "wobble": 0.0}])
    assert "a negative knee" in str(err.value) and "-1.0" in str(err.value)
    rerun = sweep(tmp_path, settings=SETTINGS[:1])
    assert rerun.attrs["computed"] == 0, "the good setting was stored despite the failure"


@pytest.mark.parametrize("change, name", [
    (dict(settings=[]), "settings"), (dict(settings=[{"knee": 1.0, "wobble": 0.0, "d_head": 2}]), "settings"),
    (dict(design=(1, 2)), "design")])
def test_bad_input_is_refused_before_any_work(tmp_path, change, name):
    with pytest.raises(ArgumentError) as err:
        sweep(tmp_path, **change)
    assert err.value.name == name
    assert not (tmp_path / "adaptive_test").exists()


def test_one_progress_line_per_update_with_models_done_left_and_time():
    stream = io.StringIO()
    line = SweepProgress("ch6", "process pool (2 workers)", every=0.0, stream=stream)
    line.update(done=3, loaded=6, running=2, left=12, bound=True)
    line.update(running=0, left=0)
    line.close()
    text = stream.getvalue()
    assert "\r" not in text and len(text.splitlines()) == 3
    first = text.splitlines()[0]
    assert first.startswith("ch6 [process pool (2 workers)]: 3 models trained, 6 loaded, 2 training, at most 12 more")
    assert "left" in first and "done in" in text.splitlines()[-1]


SCRIPT = textwrap.dedent('''
    import sys, time
    from pathlib import Path
    import numpy as np
    from helpers.design import Design
    from helpers.experiments.adaptive import run_adaptive_sweep

    LOG = Path(sys.argv[1])

    def point(knee, wobble, members, seed=0):
        with LOG.open("a") as log:
            log.writelines(f"{knee},{wobble},{m['d_head']},{m['seed']}\\n" for m in members)
        time.sleep(float(sys.argv[2]))
        return [{"d_head": m["d_head"], "seed": m["seed"], "loss": float(np.exp(-m["d_head"] / knee)
                 + wobble * ((m["seed"] * 31 + m["d_head"] * 17) % 5 - 2))} for m in members]

    def scores(rows):
        return {"loss": {(int(r.d_head), int(r.seed)): -r.loss for r in rows.itertuples()}}

    if __name__ == "__main__":
        settings = [{"knee": 0.7, "wobble": 0.004}, {"knee": 3.0, "wobble": 0.004}, {"knee": 9.0, "wobble": 0.004},
                    {"knee": 0.7, "wobble": 0.02}]
        buckets = lambda setting, widths: [[w] for w in widths]    # one stack per width: many small stores
        df = run_adaptive_sweep("resume_adaptive", point, settings, Design((1, 2, 3, 4, 6, 8, 12, 16)), scores,
                                buckets=buckets, progress=False)
        print(len(df), df.attrs["computed"], df.attrs["loaded"])
''')


def stored(cache_dir):
    folder = cache_dir / "resume_adaptive"
    out = set()
    for path in folder.glob("*.json") if folder.exists() else []:
        record = json.loads(path.read_text())
        out.add((record["config"]["knee"], record["config"]["wobble"], record["config"]["d_head"], record["seed"]))
    return out


def test_sigkill_halfway_then_resume_trains_only_what_is_missing(tmp_path):
    script = tmp_path / "adaptive.py"
    script.write_text(SCRIPT)
    cache_dir, log1, log2 = tmp_path / "cache", tmp_path / "first.log", tmp_path / "second.log"
    env = environment(cache_dir)
    total = sum(len(drive(Design(GRID), s["knee"], s["wobble"])) for s in SETTINGS)
    kill_when_stored(script, [str(log1), "0.2"], env, lambda: stored(cache_dir), total // 2)
    done = stored(cache_dir)
    assert total // 2 <= len(done) < total

    rerun = subprocess.run([sys.executable, str(script), str(log2), "0"], env=env, capture_output=True, text=True,
                           timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    rows, computed, loaded = map(int, rerun.stdout.split())
    retrained = {(float(k), float(b), int(w), int(s))
                 for k, b, w, s in (line.split(",") for line in log2.read_text().splitlines())}
    everything = {(s["knee"], s["wobble"], w, seed) for s in SETTINGS for w, seed in drive(Design(GRID), s["knee"], s["wobble"])}
    assert retrained == everything - done, "nothing stored is trained again, and nothing else is left out"
    assert (rows, computed, loaded) == (total, total - len(done), len(done))
