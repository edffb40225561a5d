"""helpers.allocator: with glibc's thresholds kept, a training step reuses the pages the step before freed (minor page
faults counted by the kernel, in child processes with and without the setting); the trainer and chapter 3c's code
optimiser set them."""

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import allocator, code_search, data
from helpers.models import ModelConfig
from helpers.training import ModelStack, Recipe, train

ROOT = Path(__file__).resolve().parents[2]
GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"
MODELS, N, BATCH = 16, 32, 32
SCORE_PAGES = MODELS * BATCH * N * N * 4 // 4096   # pages of one layer's attention scores of the stack (float32)

STEPS = """
import json, resource, sys, torch
from helpers import allocator, data
from helpers.models import ModelConfig
from helpers.training import ModelStack, Recipe, train
torch.set_num_threads(1)
if sys.argv[1] == "1":
    assert allocator.keep_freed_memory()
else:
    allocator._kept = False   # the trainer's call then leaves glibc's defaults alone
d = data.load("copy", {n}, n_train=256, n_test=8)
cfg = ModelConfig(d_model=32, n_heads=1, n_layers=1, d_head=8, d_value=16, **d.model_fields())
def run(steps):
    stack = ModelStack.build([cfg] * {models}, list(range({models})), "cpu")
    train(stack, d, Recipe(steps=steps, batch_size={batch}, eval_every=0), list(range({models})))
run(5)   # warm-up: glibc's moving threshold settles during the first steps
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
run(20)
print(json.dumps((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 20))
""".format(n=N, models=MODELS, batch=BATCH)


def faults_per_step(keep: bool) -> float:
    """Minor page faults per training step of a 16-model stack, in a child process (the thresholds cannot be
    set back within one)."""
    out = subprocess.run([sys.executable, "-c", STEPS, str(int(keep))], capture_output=True, text=True, check=True,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not GLIBC, reason="the thresholds are glibc's")
def test_kept_thresholds_stop_the_page_faults_of_training_steps():
    """Without the setting each step faults in fresh pages, more than one layer's scores fill (measured: about
    2,900 a step against 512 pages of scores); with it the freed pages are reused (measured: about 100)."""
    default = faults_per_step(False)
    if default < SCORE_PAGES:   # e.g. transparent huge pages for every mapping: one fault per 2 MiB
        pytest.skip(f"this machine faults {default:.0f} pages a step even with glibc's defaults: nothing to compare")
    kept = faults_per_step(True)
    assert kept < default / 10, (kept, default)


@pytest.mark.skipif(not GLIBC, reason="the thresholds are glibc's")
def test_keep_freed_memory_sets_them_once(monkeypatch):
    calls = []
    monkeypatch.setattr(allocator, "_kept", None)
    monkeypatch.setattr(allocator, "_set_thresholds", lambda: calls.append(1) or True)
    assert allocator.keep_freed_memory() and allocator.keep_freed_memory()
    assert calls == [1]


def test_keep_freed_memory_does_nothing_without_glibc(monkeypatch):
    monkeypatch.setattr(allocator, "_kept", None)
    monkeypatch.setattr(platform, "libc_ver", lambda *a, **k: ("", ""))
    assert allocator.keep_freed_memory() is False


def test_the_trainer_keeps_freed_memory(monkeypatch):
    calls = []
    monkeypatch.setattr("helpers.training.loop.keep_freed_memory", lambda: calls.append(1))
    d = data.load("copy", 8, n_train=32, n_test=8)
    cfg = ModelConfig(d_model=16, n_heads=1, n_layers=1, d_head=2, d_value=4, **d.model_fields())
    train(ModelStack.build([cfg], [0], "cpu"), d, Recipe(steps=2, batch_size=4, eval_every=0), [0])
    assert calls == [1]


def test_the_code_optimiser_keeps_freed_memory(monkeypatch):
    calls = []
    monkeypatch.setattr("helpers.code_search.keep_freed_memory", lambda: calls.append(1))
    code_search.optimise_code(8, 2, 4.0, steps=2)
    assert calls == [1]


LARGE = """
import json, resource, sys, torch
from helpers import allocator
if sys.argv[1] == "1":
    assert allocator.keep_large_freed_memory()
torch.set_num_threads(1)
q, k = torch.randn(4, 2048, 16), torch.randn(4, 2048, 16)
def layer():   # as a decoder layer does: logits and probabilities of 64 MiB each, freed before the next layer
    return float(torch.softmax(q @ k.transpose(-1, -2), -1).sum())
layer()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(30):
    layer()
print(json.dumps((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 30))
"""
LARGE_PAGES = 2 * 4 * 2048 * 2048 * 4 // 4096   # pages of one layer's two blocks


def faults_per_layer(keep: bool) -> float:
    out = subprocess.run([sys.executable, "-c", LARGE, str(int(keep))], capture_output=True, text=True, check=True,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not GLIBC, reason="the setting is glibc's")
def test_large_blocks_kept_are_reused_instead_of_faulted_in_afresh():
    """Blocks of 64 MiB, above the 32 MiB glibc's mmap threshold can reach, allocated and freed as a decoder layer
    does: with glibc's defaults each is mapped anew and every page faults in (measured: 32,770 faults a layer against
    32,768 pages); kept on the heap, the pages are mostly reused (measured: about 1,100 a layer over 30 layers, as
    the heap settles)."""
    default = faults_per_layer(False)
    if default < LARGE_PAGES / 2:   # e.g. transparent huge pages for every mapping: one fault per 2 MiB
        pytest.skip(f"this machine faults {default:.0f} pages a layer with glibc's defaults: nothing to compare")
    assert faults_per_layer(True) < default / 4


@pytest.mark.skipif(not GLIBC, reason="the setting is glibc's")
def test_keep_large_freed_memory_sets_it_once(monkeypatch):
    calls = []
    monkeypatch.setattr(allocator, "_kept_large", None)
    monkeypatch.setattr(allocator, "_mallopt", lambda option, value: calls.append((option, value)) or True)
    assert allocator.keep_large_freed_memory() and allocator.keep_large_freed_memory()
    assert calls == [(allocator.M_MMAP_MAX, 0), (allocator.M_TRIM_THRESHOLD, allocator.LARGE_TRIM_THRESHOLD)]


def test_keep_large_freed_memory_does_nothing_without_glibc(monkeypatch):
    monkeypatch.setattr(allocator, "_kept_large", None)
    monkeypatch.setattr(platform, "libc_ver", lambda *a, **k: ("", ""))
    assert allocator.keep_large_freed_memory() is False


def test_every_decoder_point_keeps_large_freed_memory_before_it_loads_the_model(monkeypatch):
    from helpers.experiments import ch10_decoder_llm_points as points

    calls = []

    class Loaded(Exception):
        pass

    def load(*args, **kwargs):
        calls.append("load")
        raise Loaded

    monkeypatch.setattr(points, "keep_large_freed_memory", lambda: calls.append("keep"))
    monkeypatch.setattr(points.decoder, "load", load)
    for point, args in ((points.window_point, ("shakespeare", "pretrained", None, [8], 0, [], [1e-3], 0)),
                        (points.compression_point, ("shakespeare", None, [8], 0, [1], 1, 0)),
                        (points.layer_cut_point, ("shakespeare", None, 8, 8, 0, 1, 1, 0))):
        calls.clear()
        with pytest.raises(Loaded):
            point(*args)
        assert calls == ["keep", "load"], point.__name__
