"""Reproducibility and resumption of `python -m helpers execute`.

- the same notebook run twice with the same seed (and separate, cold caches) records identical metrics;
- killing `python -m helpers execute` in the middle of a chapter and rerunning it reuses the finished
  sweep points and completes the chapter;
- a parameter that leaves out a task the prose discusses runs, and marks exactly that task's numbers "(not run)".
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from nbformat.v4 import new_code_cell, new_notebook
import nbformat

from helpers import paths

pytestmark = pytest.mark.slow


def execute(notebook: str, tmp, tag: str, *extra):
    env = {**os.environ, "BOOK_METRICS_DIR": str(tmp / tag / "metrics"), "HELPERS_CACHE_DIR": str(tmp / tag / "cache")}
    command = [sys.executable, "-m", "helpers", "execute", "--mode", "quick", notebook,
               "--book-dir", str(tmp / tag / "book"), *extra]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=paths.ROOT)


def test_same_seed_gives_identical_metrics(tmp_path):
    runs = [execute("01_attention_rank", tmp_path, tag, "-p", "SEED", "7", "-p", "N", "16") for tag in ("a", "b")]
    for run in runs:
        assert run.returncode == 0, run.stderr[-2000:]
    first, second = (json.loads((tmp_path / tag / "metrics" / "01_attention_rank.json").read_text()) for tag in "ab")
    assert first["seed"] == second["seed"] == 7
    assert first["values"] == second["values"]
    other = execute("01_attention_rank", tmp_path, "c", "-p", "SEED", "8", "-p", "N", "16")
    assert other.returncode == 0
    third = json.loads((tmp_path / "c" / "metrics" / "01_attention_rank.json").read_text())
    assert third["values"] != first["values"], "a different seed must change the numbers"



def test_leaving_out_a_task_marks_its_prose_numbers_not_run(tmp_path):
    run = execute("08_where_it_breaks", tmp_path, "a", "-p", "TASKS", '["reversal"]')
    assert run.returncode == 0, run.stderr[-2000:]
    metrics = json.loads((tmp_path / "a" / "metrics" / "08_where_it_breaks.json").read_text())
    assert metrics["params"]["TASKS"] == ["reversal"]
    assert metrics["not_run"] and all(name.startswith("ch8_copy_") for name in metrics["not_run"])
    executed = (tmp_path / "a" / "book" / "08_where_it_breaks.ipynb").read_text()
    assert all(f'"name": "{name}"' in executed for name in metrics["not_run"]), "each is glued for the build"


def test_chapter_05_runs_with_nothing_to_plot_in_three_figures(tmp_path):
    """Parameters the notebook allows that leave three figures empty, each of which must say why instead of failing:
    the README's `-p SSMAX_N_VALUES "[]"` (no scalable-softmax comparison), a task outside the bridge of the margin
    law (q-sparse averaging only), and one seed (no saturation width: a verdict needs 3)."""
    run = execute("05_trained_synthetic", tmp_path, "a", "-p", "SSMAX_N_VALUES", "[]", "-p", "TASKS", '["qsa"]',
                  "-p", "N_SEEDS", "1", "-p", "MAX_SEEDS", "1", "-p", "LONG_N_VALUES", "[]")
    assert run.returncode == 0, run.stderr[-2000:]
    metrics = json.loads((tmp_path / "a" / "metrics" / "05_trained_synthetic.json").read_text())
    assert metrics["params"]["SSMAX_N_VALUES"] == [] and metrics["params"]["TASKS"] == ["qsa"]
    for name in ("fig-ch5-ssmax", "fig-ch5-bridge", "fig-ch5-fits"):
        figure = tmp_path / "a" / "metrics" / "figures" / f"{name}.csv"
        assert figure.read_text().count("\n") == 1, f"{name}: the header only, nothing was plotted"


SWEEP_CHAPTER = '''
import time
from helpers import parameters, experiments
P = parameters.validate(MODE=(MODE, parameters.mode), SEED=(SEED, parameters.seed))

def point(i, seed):
    time.sleep(0.4)
    with open(LOG, "a") as log:
        log.write(f"{i}\\n")
    return {"value": i * 10 + seed}

table = experiments.run_sweep("resume_demo", point, experiments.grid(i=list(range(12))), seeds=[P.SEED])
assert sorted(table.value) == [i * 10 + P.SEED for i in range(12)]
'''


def test_killed_execute_resumes_with_finished_points_reused(tmp_path):
    log = tmp_path / "computed.log"
    notebook = tmp_path / "50_resume_demo.ipynb"
    cells = [new_code_cell(f"MODE = 'full'\nSEED = 1\nLOG = {str(log)!r}"), new_code_cell(SWEEP_CHAPTER)]
    cells[0].metadata["tags"] = ["parameters"]
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, notebook)
    env = {**os.environ, "BOOK_METRICS_DIR": str(tmp_path / "m"), "HELPERS_CACHE_DIR": str(tmp_path / "cache")}
    command = [sys.executable, "-m", "helpers", "execute", "--mode", "quick", str(notebook), "--book-dir", str(tmp_path / "book")]

    first = subprocess.Popen(command, env=env, cwd=paths.ROOT, start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and (not log.exists() or len(log.read_text().split()) < 4):
        time.sleep(0.2)
    os.killpg(first.pid, signal.SIGKILL)  # the whole group: papermill and its kernel
    first.wait()
    done_before = log.read_text().split()
    assert 4 <= len(done_before) < 12, f"the kill should land mid-sweep; computed {len(done_before)}"
    assert not (tmp_path / "book" / "50_resume_demo.ipynb").exists(), "no half-executed chapter is published"

    second = subprocess.run(command, env=env, cwd=paths.ROOT, capture_output=True, text=True)
    assert second.returncode == 0, second.stderr[-2000:]
    computed = log.read_text().split()
    recomputed = computed[len(done_before):]
    stored_before = set(done_before) - {done_before[-1]}  # the last one may have been killed before its store write
    assert not stored_before & set(recomputed), "finished points were computed again"
    assert sorted(set(computed), key=int) == [str(i) for i in range(12)]
    assert (tmp_path / "book" / "50_resume_demo.ipynb").exists()
