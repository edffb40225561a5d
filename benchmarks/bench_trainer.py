"""The trainer (`helpers.training.train`) against the frozen copy of the trainer it replaced, per model-step.

Chapter 06's text stacks in small: 8 query/key widths (1 to 64) x 3 seeds, d_model 64, 2 layers, 4 heads, value
width 16, Shakespeare characters at n = 128, 16 windows per step, in the stacks `bucket_head_dims` makes. Prints, in
one process, interleaved (best of 3 for each side, so load changes hit both alike):
  1. new against frozen (`benchmarks/frozen/stacked.py`, commit a6d68c4): seconds per model-step on the same
     stacks, the same steps and one thread; the ratio frozen / new (goal >= 1: no slower), and whether both
     give bitwise the same weights;
  2. stacked against one by one, both with the new trainer (a model alone is a stack of one), on 1 thread, with
     the fraction of the float32 matmul peak each reaches (useful FLOPs at each model's own width).
BENCH_STEPS (default 12) sets the steps per model.

Figures (dated, with the machine): the README's section "Benchmarks".
"""

import os
import sys
import time

import torch
from _common import header, peak_matmul_flops, threads, training_flops_per_token, verdict

from frozen.stacked import ModelStack as FrozenStack, train_stack as frozen_train
from helpers import data as datasets
from helpers.models import ModelConfig
from helpers.training import ModelStack, Recipe, bucket_head_dims, qk_work_offset, train

DIMS = [1, 2, 4, 8, 16, 24, 32, 64]
SEEDS = [0, 1, 2]
N, BATCH = 128, 16
STEPS = int(os.environ.get("BENCH_STEPS", 12))


def config(data, d_head):
    return ModelConfig(d_model=64, n_heads=4, n_layers=2, d_head=d_head, d_value=16, **data.model_fields())


def members(group):
    return [(d, s) for d in group for s in SEEDS]


def run_new(data, groups, steps):
    stacks = []
    for group in groups:
        stack = ModelStack.build([config(data, d) for d, _ in members(group)], [s for _, s in members(group)], "cpu")
        train(stack, data, Recipe(steps=steps, batch_size=BATCH, eval_every=0), [s for _, s in members(group)],
              threads=1)
        stacks.append(stack)
    return stacks


def run_frozen(data, groups, steps):
    stacks = []
    for group in groups:
        stack = FrozenStack.build([config(data, d) for d, _ in members(group)], [s for _, s in members(group)], "cpu")
        frozen_train(stack, data, seeds=[s for _, s in members(group)], steps=steps, batch_size=BATCH, eval_every=0,
                     progress=False, threads=1)
        stacks.append(stack)
    return stacks


def timed(fn):
    started = time.perf_counter()
    out = fn()
    return time.perf_counter() - started, out


def main():
    header("trainer: helpers.training.train against the frozen trainer it replaced")
    data = datasets.load("shakespeare", N, n_train=4096, n_test=64)
    groups = bucket_head_dims(DIMS, qk_work_offset(config(data, 1), N))
    model_steps = len(DIMS) * len(SEEDS) * STEPS
    print(f"  stacks {groups}, {len(DIMS) * len(SEEDS)} models x {STEPS} steps")
    run_new(data, groups, 2), run_frozen(data, groups, 2)  # warm-up
    times = {"new": [], "frozen": []}
    for _ in range(3):
        for name, fn in (("new", run_new), ("frozen", run_frozen)):
            seconds, stacks = timed(lambda: fn(data, groups, STEPS))
            times[name].append(seconds)
            if name == "new":
                new_stacks = stacks
            else:
                frozen_stacks = stacks
    same = all(torch.equal(a.params[k], b.params[k]) for a, b in zip(new_stacks, frozen_stacks) for k in a.params)
    best = {name: min(v) for name, v in times.items()}
    for name, t in best.items():
        print(f"  {name}: {t / model_steps * 1e3:.2f} ms per model-step (best of 3: {t:.2f} s)")
    print("  " + verdict("frozen / new, time per model-step, 1 thread", best["frozen"] / best["new"], 1))
    print(f"  bitwise the same weights after {STEPS} steps: {same}")

    one = [[d] for d in DIMS]  # one by one: every model alone (each group here holds one width x 3 seeds)
    alone_times, stacked_times = [], []
    for _ in range(2):
        started = time.perf_counter()
        for d in DIMS:
            for s in SEEDS:
                stack = ModelStack.build([config(data, d)], [s], "cpu")
                train(stack, data, Recipe(steps=STEPS, batch_size=BATCH, eval_every=0), [s], threads=1)
        alone_times.append(time.perf_counter() - started)
        stacked_times.append(timed(lambda: run_new(data, groups, STEPS))[0])
    del one
    useful = sum(training_flops_per_token(config(data, d), N) for d in DIMS) * len(SEEDS) * BATCH * N * STEPS
    with threads(1):
        peak = peak_matmul_flops()
    for name, t in (("one by one", min(alone_times)), ("stacked", min(stacked_times))):
        print(f"  {name}, 1 thread: {t:.2f} s, {useful / t / 1e9:.1f} GFLOP/s = {useful / t / peak:.1%} of the "
              f"float32 peak ({peak / 1e9:.0f} GFLOP/s)")
    print(f"  stacked vs one by one: {min(alone_times) / min(stacked_times):.2f}x")


if __name__ == "__main__":
    sys.exit(main())
