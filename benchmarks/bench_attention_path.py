"""The fast attention path's choice of kernel: torch's unfused (math) kernel written out where torch has no fused
kernel for the shapes, against `scaled_dot_product_attention` everywhere (what the book ran before 2026-12-07).

On the CPU torch fuses attention only when the query/key width equals the value width; otherwise it runs its math
kernel, whose operations the fast path runs written out, to the same bits (tests/unit/test_models.py), without the
kernel's passes that look for rows with no visible key. Chapter 05's stacks (`ch05_training.CellSpec`, full mode:
d_model 32, value width 16) at query/key widths 1, 4, 8 and 32, one seed each (padded to 32, so both sides of every
stack take the math kernel), copy (causal) and reversal: the whole trainer (`helpers.training.train`, its recipe with
BENCH_STEPS steps and no validation), one thread, interleaved (best of 3). Prints, per task and n: milliseconds per
model-step of each side, the ratio SDPA / ours, and whether the trained weights are bitwise the same.

Figures (dated, with the machine): the README's section "Benchmarks".
Usage: python benchmarks/bench_attention_path.py [n ...]   (default 64 128 256); BENCH_STEPS (default 30).
"""

import dataclasses
import os
import sys
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from _common import header, interleaved, threads, verdict

from helpers import forward, seeding, training
from helpers.experiments import ch05_training

SPEC = ch05_training.CellSpec(d_model=32, steps=2000)   # chapter 05's full mode
MEMBERS = [(1, 0), (4, 0), (8, 0), (32, 0)]            # (query/key width, model seed)
STEPS = int(os.environ.get("BENCH_STEPS", 30))


@contextmanager
def sdpa_everywhere():
    """The fast path as it was: `scaled_dot_product_attention` for every shape."""
    ours = forward._fused_or_math
    forward._fused_or_math = lambda q, k, v, causal: F.scaled_dot_product_attention(
        q, k, v, is_causal=causal, scale=1.0)
    try:
        yield
    finally:
        forward._fused_or_math = ours


def trainer(task: str, n: int, steps: int = STEPS):
    """A function training chapter 05's stack of MEMBERS for `steps` steps from fresh weights; returns the stack."""
    data = ch05_training.task_data(task, n, 0, SPEC)
    configs = [ch05_training.model_config(task, data, d, SPEC) for d, _ in MEMBERS]
    recipe = dataclasses.replace(SPEC.recipe(task, n), steps=steps, eval_every=0, patience=None,
                                 loss_floor=None, min_evals=0)
    seeds = [s for _, s in MEMBERS]

    def run():
        stack = training.ModelStack.build(configs, [seeding.derive_seed(s, "init") for s in seeds], device="cpu")
        training.train(stack, data, recipe, seeds, threads=1)
        return stack
    return run


def sdpa_side(run):
    def wrapped():
        with sdpa_everywhere():
            return run()
    return wrapped


def main(ns):
    header("attention kernels: the math kernel written out where torch has no fused one, against SDPA everywhere")
    with threads(1):
        for task in ("copy", "reversal"):
            for n in ns:
                ours = trainer(task, n)
                sides = {"ours": ours, "sdpa": sdpa_side(ours)}
                seconds = interleaved(sides)
                same = all(torch.equal(a, b) for a, b in zip(ours().params.values(), sides["sdpa"]().params.values()))
                per = {k: 1e3 * v / (STEPS * len(MEMBERS)) for k, v in seconds.items()}
                print(f"{task} n = {n:>3}: ours {per['ours']:.2f} ms, SDPA everywhere {per['sdpa']:.2f} ms per "
                      f"model-step; weights bitwise the same: {same}")
                print("  " + verdict(f"SDPA / ours, {task} at n = {n}", seconds["sdpa"] / seconds["ours"], 1.0))


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [64, 128, 256])
