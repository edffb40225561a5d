"""The stacked trainer against training the same models one after the other with `helpers.train.train`.

Grid: 8 query/key widths (1 to 64) x 3 seeds, d_model 64, 2 layers, 4 heads, value width 16, Shakespeare
characters at n = 128, 16 windows per step. Prints, in one process:
  1. tokens per second per model, stacked (stacks from `bucket_head_dims`) against one by one (goal >= 3x),
     at one thread for both and at every core for both, plus the ratio against one by one at its default
     (`train`'s threads="auto", which is one thread for models this small);
  2. the fraction of the peak float32 matmul rate (a large torch.mm, same run) that each reaches, counting each
     model's useful matmul FLOPs at its own query/key width;
  3. time until a Shakespeare model at n = 128 reaches 3.0 bits/char on held-out text: 3 seeds stacked against
     3 seeds one by one (wall time to the first evaluation at or below the target, evaluations included), with
     chapter 06's text recipe (peak lr 1e-2, 1,024 tokens per step, cosine schedule over the cap), every core for
     both, the two sides alternated twice.
BENCH_STEPS (default 12) sets the steps per model of part 1 (0 skips it); BENCH_TARGET_STEPS (default 1000; the
recipe reached 3.0 bits/char at steps 650 to 700) caps part 3 (0 skips it).

Measured on a quiet machine (load 0.6 to 2.0), 2026-12-03, part 1 at 20 steps: tokens/s per model, one by one
1,568 (1 thread) and 2,789 (2 threads), stacked 1,541 and 2,872: 0.98x and 1.03x at equal threads, 1.83x against
one by one's 1-thread default; 16 % of the float32 peak on 1 thread. Part 3: one by one 24 s, stacked 25 s (0.94x).
At equal threads stacking gains nothing in float32 on this CPU. Variants of one stacked step (15 models, d_qk 1 to 16, 2 threads; float32 `scaled_dot_product_attention`:
0.27 s): bfloat16 autocast 0.45 s (the bf16 flash-attention backward), bf16 with explicit attention 0.23 s,
bf16 activations throughout 0.24 s, `torch.compile` 0.28 s (fp32) and 0.27 s (bf16, explicit) after 13 to 20 s
of compiling. None approaches 3x.
"""

import math
import os
import time

import torch
from _common import header, peak_matmul_flops, threads, training_flops_per_token, verdict

from helpers import data as datasets
from helpers.models import ModelConfig, build_model
from helpers.stacked import ModelStack, bucket_head_dims, qk_work_offset, train_stack
from helpers.train import train

DIMS = [1, 2, 4, 8, 16, 24, 32, 64]
SEEDS = [0, 1, 2]
N, BATCH = 128, 16
STEPS = int(os.environ.get("BENCH_STEPS", 12))
TARGET_BITS = 3.0
TARGET_STEPS = int(os.environ.get("BENCH_TARGET_STEPS", 1000))
TARGET_LR, TARGET_BATCH = 1e-2, 8  # chapter 06's text recipe: 1,024 tokens per step


def config(data, d_head):
    return ModelConfig(d_model=64, n_heads=4, n_layers=2, d_head=d_head, d_value=16, **data.model_fields())


def one_by_one(data, steps, thread_setting):
    started = time.perf_counter()
    for d in DIMS:
        for seed in SEEDS:
            model = build_model(config(data, d), seed=seed, device="cpu")
            train(model, data, steps=steps, batch_size=BATCH, eval_every=0, seed=seed, progress=False,
                  threads=thread_setting)
    return time.perf_counter() - started


def stacked(data, steps, groups, thread_setting):
    started = time.perf_counter()
    for group in groups:
        members = [(d, s) for d in group for s in SEEDS]
        stack = ModelStack.build([config(data, d) for d, _ in members], [s for _, s in members], device="cpu")
        train_stack(stack, data, seeds=[s for _, s in members], steps=steps, batch_size=BATCH, eval_every=0,
                    progress=False, threads=thread_setting)
    return time.perf_counter() - started


def throughput(data, groups):
    tokens_per_model = STEPS * BATCH * N
    useful = sum(training_flops_per_token(config(data, d), N) for d in DIMS) * len(SEEDS) * BATCH * N * STEPS
    cores = os.cpu_count() or 1
    # one by one at its default: `train`'s threads="auto" is 1 thread for models this small
    runs = {"one by one, 1 thread": lambda: one_by_one(data, STEPS, 1),
            "stacked, 1 thread": lambda: stacked(data, STEPS, groups, 1),
            f"one by one, {cores} threads": lambda: one_by_one(data, STEPS, cores),
            f"stacked, {cores} threads": lambda: stacked(data, STEPS, groups, cores)}
    one_by_one(data, 2, 1), stacked(data, 2, groups, 1)  # warm-up
    seconds = {name: [] for name in runs}
    for _ in range(2):  # interleaved, best of two: load changes hit both sides alike
        for name, run in runs.items():
            seconds[name].append(run())
    best = {name: min(v) for name, v in seconds.items()}
    with threads(1):
        peak1 = peak_matmul_flops()
    with threads(cores):
        peak_all = peak_matmul_flops()
    print(f"  peak float32 matmul (torch.mm 2048^2): {peak1 / 1e9:.0f} GFLOP/s on 1 thread, "
          f"{peak_all / 1e9:.0f} GFLOP/s on {cores}")
    for name, t in best.items():
        peak = peak1 if "1 thread" in name else peak_all
        print(f"  {name}: {len(DIMS) * len(SEEDS) * tokens_per_model / t / len(DIMS) / len(SEEDS):,.0f} tokens/s "
              f"per model ({t:.1f} s for {len(DIMS) * len(SEEDS)} models x {STEPS} steps), "
              f"{useful / t / 1e9:.1f} GFLOP/s = {useful / t / peak:.1%} of peak")
    one = best["one by one, 1 thread"] / best["stacked, 1 thread"]
    every = best[f"one by one, {cores} threads"] / best[f"stacked, {cores} threads"]
    default = best["one by one, 1 thread"] / best[f"stacked, {cores} threads"]  # train's "auto" is 1 thread here
    print("  " + verdict("stacked vs one by one, tokens/s per model, both on 1 thread", one, 3))
    print("  " + verdict(f"stacked vs one by one, both on {cores} threads", every, 3))
    print("  " + verdict(f"stacked on {cores} threads vs one by one at its default (1 thread)", default, 3))


def time_to_target(data):
    cfg = config(data, 16)
    cores = os.cpu_count() or 1
    crossed = []  # the steps at which each model first reached the target
    recipe = dict(steps=TARGET_STEPS, batch_size=TARGET_BATCH, lr=TARGET_LR, eval_every=50, progress=False,
                  threads=cores)

    def first_crossing(history):
        loss = history[history.metric == "test_loss"]
        hit = loss[loss.value / math.log(2) <= TARGET_BITS]
        if hit.empty:
            return None
        step = hit.step.min()
        crossed.append(int(step))
        return float(history[(history.metric == "seconds") & (history.step == step)].value.max())

    def alone():
        times = []
        for seed in SEEDS:
            model = build_model(cfg, seed=seed, device="cpu")
            started = time.perf_counter()
            clock = [lambda step, m: [{"metric": "seconds", "value": time.perf_counter() - started}]]
            times.append(first_crossing(train(model, data, seed=seed, callbacks=clock, **recipe)))
        return None if None in times else sum(times)  # one after the other: the last seed is done at the sum

    def together():
        stack = ModelStack.build([cfg] * len(SEEDS), SEEDS, device="cpu")
        history = train_stack(stack, data, seeds=SEEDS, **recipe).history
        times = [first_crossing(history[history.model == i]) for i in range(len(SEEDS))]
        return None if None in times else max(times)  # the stack is done when its last seed is

    results = {"one by one": [], "stacked": []}
    for _ in range(2):  # alternated: load changes hit both sides alike
        results["one by one"].append(alone())
        results["stacked"].append(together())
    if None in results["one by one"] + results["stacked"]:
        print(f"  time to {TARGET_BITS} bits/char: not reached within {TARGET_STEPS} steps {results}")
        return
    a, b = min(results["one by one"]), min(results["stacked"])
    print(f"  time to {TARGET_BITS} bits/char (Shakespeare n = {N}, d_head 16, 3 seeds, lr {TARGET_LR}, "
          f"{TARGET_BATCH * N} tokens/step, {cores} threads, best of 2 alternated runs): one by one {a:.0f} s "
          f"(runs {[round(t) for t in results['one by one']]}), stacked {b:.0f} s "
          f"(runs {[round(t) for t in results['stacked']]}); ratio {a / b:.2f}x; reached at steps "
          f"{min(crossed)} to {max(crossed)}")


if __name__ == "__main__":
    header("stacked trainer vs one by one")
    print(f"  load averages {os.getloadavg()}")
    text = datasets.load("shakespeare", N, n_train=max(4096, TARGET_STEPS * TARGET_BATCH), n_test=128)
    off = qk_work_offset(config(text, 1), N)
    groups = bucket_head_dims(DIMS, off)
    print(f"  stacks (query/key widths, each x {len(SEEDS)} seeds): {groups} (fixed work = {off:.0f} dims)")
    if STEPS:
        throughput(text, groups)
    if TARGET_STEPS:
        time_to_target(text)
    print(f"  load averages {os.getloadavg()}")
