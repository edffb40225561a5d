"""Stacks cut to `helpers.training.stack_limit` against one stack per bucket, per model-step.

Chapter 05's full-mode cells (`ch05_training.CellSpec`: d_model 32, value width 16, 8 sequences per step at n >= 128):
query/key widths 1, 4 and 8 (one bucket, padded to 8) x 3 seeds, copy and reversal, as one stack of 9 models and as
the stacks of `stack_size` (at n = 128 still one stack: 12 models fit 6 MiB of scores; at n = 256 three stacks of
3, one per seed). The whole trainer (`helpers.training.train`, BENCH_STEPS steps, no validation), one thread,
interleaved (best of 3). Prints, per task and n: milliseconds per model-step of each side, the ratio whole / cut
(above 1: cutting is faster; where nothing is cut, a control that shows the noise), and whether the trained weights are bitwise the same (they are: every piece keeps
the bucket's padded width, and a model's arithmetic does not depend on the other models of its stack).

Figures (dated, with the machine): the README's section "Benchmarks".
Usage: python benchmarks/bench_stack_size.py [n ...]   (default 128 256); BENCH_STEPS (default 30).
"""

import dataclasses
import os
import sys

import torch
from _common import header, interleaved, threads, verdict

from helpers import seeding, training
from helpers.experiments import ch05_training

SPEC = ch05_training.CellSpec(d_model=32, steps=2000)   # chapter 05's full mode
MEMBERS = [(d, s) for d in (1, 4, 8) for s in (0, 1, 2)]   # (query/key width, model seed), as a bucket orders them
STEPS = int(os.environ.get("BENCH_STEPS", 30))


def trainer(task: str, n: int, pieces: list[list[tuple[int, int]]]):
    """A function training `pieces` (stacks of (width, seed)) of chapter 05's cell for STEPS steps from fresh
    weights; returns {(width, seed): standalone model}."""
    data = ch05_training.task_data(task, n, 0, SPEC)
    recipe = dataclasses.replace(SPEC.recipe(task, n), steps=STEPS, eval_every=0, patience=None, loss_floor=None,
                                 min_evals=0)

    def run():
        trained = {}
        for piece in pieces:
            configs = [ch05_training.model_config(task, data, d, SPEC) for d, _ in piece]
            stack = training.ModelStack.build(configs, [seeding.derive_seed(s, "init") for _, s in piece], "cpu")
            training.train(stack, data, recipe, [seeding.derive_seed(s, "order") for _, s in piece], threads=1)
            trained.update(zip(piece, stack.models()))
        return trained
    return run


def same_weights(a: dict, b: dict) -> bool:
    return all(torch.equal(x, y) for key in a
               for x, y in zip(a[key].state_dict().values(), b[key].state_dict().values()))


def main(ns):
    header("stack size: stacks cut to helpers.training.stack_limit against one stack per bucket")
    with threads(1):
        for task in ("copy", "reversal"):
            for n in ns:
                pieces = training.cut_stack(MEMBERS, ch05_training.stack_size(n, SPEC))
                sides = {"whole": trainer(task, n, [MEMBERS]), "cut": trainer(task, n, pieces)}
                seconds = interleaved(sides)
                per = {k: 1e3 * v / (STEPS * len(MEMBERS)) for k, v in seconds.items()}
                print(f"{task} n = {n:>3}: one stack of {len(MEMBERS)} {per['whole']:.2f} ms, "
                      f"{len(pieces)} stack(s) of at most {max(map(len, pieces))} {per['cut']:.2f} ms per model-step; "
                      f"weights bitwise the same: {same_weights(sides['whole'](), sides['cut']())}")
                ratio = seconds["whole"] / seconds["cut"]
                if pieces == [MEMBERS]:   # nothing is cut: both sides run the same stack, the ratio is the noise
                    print(f"  control (the same stack on both sides): {ratio:.2f}x")
                else:
                    print("  " + verdict(f"whole / cut, {task} at n = {n}", ratio, 1.0))


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [128, 256])
