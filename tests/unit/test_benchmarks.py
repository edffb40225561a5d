"""The benchmark scripts keep working as `helpers` changes: `make bench` runs them all and stops at the first that
fails, so one broken script hides the figures of the others. Each is imported (which catches a renamed or removed
name) and the two that build their own models run one step at a tiny size; the timings themselves are not tested
(speed is measured by `make bench`, not asserted)."""

import importlib
import sys
from pathlib import Path

import pytest
import torch

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
SCRIPTS = sorted(p.stem for p in BENCHMARKS.glob("bench_*.py"))


@pytest.fixture(scope="module", autouse=True)
def benchmarks_on_path():
    sys.path.insert(0, str(BENCHMARKS))   # the scripts import their shared `_common` as a top-level module
    yield
    sys.path.remove(str(BENCHMARKS))


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_benchmark_imports(script):
    assert importlib.import_module(script).__doc__, f"{script} says what it measures"


def test_bench_models_compares_models_of_one_size_and_both_train():
    bench = importlib.import_module("bench_models")
    x = torch.randn(2, 8, bench.D_MODEL, generator=torch.Generator().manual_seed(0))
    reference = bench.reference()
    count = lambda model: sum(p.numel() for p in model.parameters())  # noqa: E731
    sides = {"fast": bench.ours("fast"), "explicit": bench.ours("explicit"), "reference": reference}
    for name, model in sides.items():
        # the same layers on both sides: the same number of weights, and outputs of one shape
        assert count(model) == count(reference), name
        assert model(x).shape == x.shape, name
        before = [p.detach().clone() for p in model.parameters()]
        bench.trainer(model, x)()   # STEPS optimiser steps
        assert any(not torch.equal(a, p) for a, p in zip(before, model.parameters())), f"{name} did not train"


def test_bench_convergence_runs_a_task_end_to_end():
    out = importlib.import_module("bench_convergence").run("copy256", seeds=1, steps=2, threads=1)
    assert out["stop_step"] == [2] and len(out["accuracy"]) == 1 and 0.0 <= out["accuracy"][0] <= 1.0
