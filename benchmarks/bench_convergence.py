"""Quality bars: do the models learn? Stacks of 3 seeds at the largest query/key width, trained to convergence.

    python benchmarks/bench_convergence.py                  # every task (tens of minutes on 2 cores)
    python benchmarks/bench_convergence.py shakespeare copy256 --seeds 3 --json out.json

Bars (seed mean, held-out data): Shakespeare characters at n = 128 <= 2.8 bits/char; MNIST 7x7 patches (n = 16)
and 4x4 patches (n = 49) >= 0.95 accuracy; synthetic copy at n = 256 >= 0.99 accuracy; for every real-data
domain, uniform attention in place of the trained attention raises the test loss by >= 0.05 nats.
Model: d_model 64, 2 layers, 4 heads, query/key width 16 (the largest of the chapter sweeps at this width),
value width 16, AdamW 3e-3 with warm-up and cosine decay, early stopping (see `helpers.training`); copy uses
chapter 05's recipe (rotary positions, lr 1e-2).
"""

import argparse
import json
import math
import time

import torch
from _common import header

from helpers import data as datasets
from helpers.models import ModelConfig, uniform_attention
from helpers.training import ModelStack, Recipe, evaluate, train

D_HEAD = 16
MODEL = dict(d_model=64, n_heads=4, n_layers=2, d_head=D_HEAD, d_value=16)
UNIFORM_GAP = 0.05  # nats


def _text(name):
    return lambda steps, batch: datasets.load(name, 128, n_train=min(65536, steps * batch), n_test=512)


def _mnist(n):
    return lambda steps, batch: datasets.load("mnist", n, n_train=20000, n_test=2000)


def _copy(steps, batch):
    return datasets.load("copy", 256, n_train=min(32768, steps * batch), n_test=256)


# name -> (data(steps, batch), batch, max steps, bar metric, comparison, bar value, real data?)
TASKS = {
    "shakespeare": (_text("shakespeare"), 16, 3000, "bits", "<=", 2.8, True),
    "mnist16": (_mnist(16), 64, 3000, "accuracy", ">=", 0.95, True),
    "mnist49": (_mnist(49), 64, 3000, "accuracy", ">=", 0.95, True),
    "copy256": (_copy, 8, 3000, "accuracy", ">=", 0.99, False),
    "proteins": (_text("proteins"), 16, 1500, None, None, None, True),
    "bbc": (_text("bbc"), 16, 2000, None, None, None, True),
}


# chapter 05's recipe for copy: rotary positions (relative offsets) and lr 1e-2
OVERRIDES = {"copy256": ({"pos": "rope"}, {"lr": 1e-2})}


def run(task: str, seeds: int, steps: int | None, threads: int | None) -> dict:
    make, batch, max_steps, metric, op, bar, real = TASKS[task]
    steps = steps or max_steps
    data = make(steps, batch)
    model_options, train_options = OVERRIDES.get(task, ({}, {}))
    cfg = ModelConfig(**{**MODEL, **data.model_fields(), **model_options})
    seed_list = list(range(seeds))
    stack = ModelStack.build([cfg] * seeds, seed_list, device="cpu")
    started = time.perf_counter()
    recipe = Recipe(steps=steps, batch_size=batch, eval_every=100, curve=True, patience=20 if task.startswith("copy") else 8,
                    **{"lr": 3e-3, **train_options})
    result = train(stack, data, recipe, seed_list, threads=threads, progress=True)
    seconds = time.perf_counter() - started
    models = stack.models()
    out = {"task": task, "seeds": seeds, "steps": steps, "batch": batch, "train_seconds": seconds,
           "stop_step": result.status.stop_step.tolist(), "converged": result.status.converged.tolist()}
    losses, gaps = [], []
    for model in models:
        trained = evaluate(model, data.test_x, data.test_y)
        with uniform_attention(model):
            uniform = evaluate(model, data.test_x, data.test_y)
        losses.append(trained)
        gaps.append(uniform["loss"] - trained["loss"])
    out["test_loss"] = [s["loss"] for s in losses]
    out["accuracy"] = [s["accuracy"] for s in losses]
    out["bits"] = [s["loss"] / math.log(2) for s in losses]
    out["uniform_gap"] = gaps
    history = result.history
    bits = history[history.metric == "test_loss"].groupby("step").value.mean() / math.log(2)
    secs = history[history.metric == "seconds"].groupby("step").value.max()
    below = bits[bits <= 3.0]
    out["seconds_to_3_bits"] = float(secs[below.index[0]]) if len(below) else None
    curve = history[history.metric == ("test_accuracy" if metric == "accuracy" else "test_loss")]
    out["curve"] = {int(k): float(v) for k, v in curve.groupby("step").value.mean().items()}  # seed mean
    verdicts = []
    if metric is not None:
        mean = sum(out[metric]) / seeds
        ok = mean <= bar if op == "<=" else mean >= bar
        verdicts.append(f"{metric} {mean:.4f} (bar {op} {bar}) {'PASS' if ok else 'MISS'}")
        out[f"{metric}_mean"] = mean
        out["bar_met"] = ok
    if real:
        gap = sum(gaps) / seeds
        ok = gap >= UNIFORM_GAP
        verdicts.append(f"uniform-attention gap {gap:.3f} nats (bar >= {UNIFORM_GAP}) {'PASS' if ok else 'MISS'}")
        out["uniform_gap_mean"] = gap
        out["gap_met"] = ok
    print(f"  {task}: " + "; ".join(verdicts) + f"; trained {seconds:.0f} s, stopped at {out['stop_step']} "
          f"(converged {out['converged']}), per seed {[round(v, 4) for v in out[metric or 'test_loss']]}",
          flush=True)
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("tasks", nargs="*", default=list(TASKS))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=None, help="max steps (default per task)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    header("convergence and quality bars (stacked trainer)")
    results = [run(task, args.seeds, args.steps, args.threads) for task in args.tasks]
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=1)
