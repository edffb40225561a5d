"""The trainer's evaluation chunk on the CPU (`helpers.training.loop.eval_chunk`: one layer's attention weights of
the stack within 2^20 floats) against the fixed 256 examples per pass shared among the models (256 // M per model)
it used before 2026-12-06.

Chapter 05's stacks (copy, d_model 32, value width 16, query/key widths 3, 4 and 6 x 3 seeds, untrained weights)
scoring chapter 05's 256 validation examples, at n = 64, 128 and 256, one thread, the two sides interleaved (best of
3). Prints seconds per evaluation, the ratio old / new (goal >= 1: no slower) and the largest relative difference of
the 9 losses (rounding only: the same sums in other chunks).
Usage: python benchmarks/bench_eval_chunk.py [n ...]
"""

import sys

import torch
from _common import header, interleaved, threads, verdict

from helpers import seeding, training
from helpers.experiments import ch05_training
from helpers.training.loop import eval_chunk
from helpers.training.scoring import evaluate_stack

SPEC = ch05_training.CellSpec(d_model=32, d_value=16)
MEMBERS = [(d, s) for d in (3, 4, 6) for s in (0, 1, 2)]


def stack_at(n: int):
    data = ch05_training.task_data("copy", n, 0, SPEC)
    configs = [ch05_training.model_config("copy", data, d, SPEC) for d, _ in MEMBERS]
    stack = training.ModelStack.build(configs, [seeding.derive_seed(s, "init") for _, s in MEMBERS], device="cpu")
    return stack, data.train_x[-256:], data.train_y[-256:]


def main(lengths):
    header("evaluation chunk: 256 // M examples per model (old) against eval_chunk (new)")
    with threads(1):
        for n in lengths:
            stack, x, y = stack_at(n)
            per_model = eval_chunk(stack, x)
            sides = {"old": lambda: evaluate_stack(stack, x, y, batch_size=256),
                     "new": lambda: evaluate_stack(stack, x, y, batch_size=len(stack) * per_model)}
            seconds = interleaved(sides)
            old, new = (sides[k]()["loss"] for k in ("old", "new"))
            drift = ((old - new).abs() / old).max().item()
            print(f"n = {n:4d}: old {256 // len(stack)} per model {seconds['old']:.3f} s, new {per_model} per model "
                  f"{seconds['new']:.3f} s; largest relative loss difference {drift:.1e}")
            print("  " + verdict(f"old / new at n = {n}", seconds["old"] / seconds["new"], 1.0))


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [64, 128, 256])
