"""The trainer's evaluation chunk on the CPU (`helpers.training.loop.eval_chunk`: one layer's attention weights of
the stack within 2^20 floats) against the fixed 256 examples per pass shared among the models (256 // M per model)
it used before 2026-12-06.

Chapter 05's stacks (copy, d_model 32, one head, value width 16, query/key widths 3, 4 and 6 x 3 seeds) scoring
chapter 05's 256 validation examples at n = 64, 128 and 256, and chapter 06's Shakespeare stacks (d_model 64, 4 heads,
2 layers, widths 1, 2 and 4 x 3 seeds) scoring their validation windows (16,384 tokens) at n = 64 and 128; untrained
weights, one thread, the two sides interleaved (best of 3). Prints seconds per evaluation, the ratio old / new (goal
>= 1: no slower) and the largest relative difference of the 9 losses (rounding only: the same sums in other chunks).
Chapter 05 at n = 64 keeps its old chunk (28 per model), so its two sides are one computation and its ratio shows
the timing noise (0.91x to 1.01x on 2026-12-06).
Usage: python benchmarks/bench_eval_chunk.py [chapter:n ...]   (e.g. 05:256 06:128)
"""

import sys

from _common import header, interleaved, threads, verdict

from helpers import seeding, training
from helpers.experiments import ch05_training, ch06_real_data_points
from helpers.training.loop import eval_chunk
from helpers.training.scoring import evaluate_stack

SPEC = ch05_training.CellSpec(d_model=32, d_value=16)
TEXT = ch06_real_data_points.DomainSpec()
MEMBERS = {"05": [(d, s) for d in (3, 4, 6) for s in (0, 1, 2)], "06": [(d, s) for d in (1, 2, 4) for s in (0, 1, 2)]}


def stack_at(chapter: str, n: int):
    """A 9-model stack of `chapter`'s design at length n and the validation inputs and targets it is scored on."""
    if chapter == "05":
        data = ch05_training.task_data("copy", n, 0, SPEC)
        configs = [ch05_training.model_config("copy", data, d, SPEC) for d, _ in MEMBERS[chapter]]
        x, y = data.train_x[-256:], data.train_y[-256:]
    else:
        data = ch06_real_data_points.load_domain("shakespeare", n, TEXT)
        configs = [ch06_real_data_points.model_config(data, d, TEXT) for d, _ in MEMBERS[chapter]]
        windows = ch06_real_data_points.val_examples("shakespeare", n, TEXT)
        x, y = data.train_x[-windows:], data.train_y[-windows:]
    seeds = [seeding.derive_seed(s, "init") for _, s in MEMBERS[chapter]]
    return training.ModelStack.build(configs, seeds, device="cpu"), x, y


def main(cases):
    header("evaluation chunk: 256 // M examples per model (old) against eval_chunk (new)")
    with threads(1):
        for case in cases:
            chapter, n = case.split(":")
            stack, x, y = stack_at(chapter, int(n))
            per_model = eval_chunk(stack, x)
            sides = {"old": lambda: evaluate_stack(stack, x, y, batch_size=256),
                     "new": lambda: evaluate_stack(stack, x, y, batch_size=len(stack) * per_model)}
            seconds = interleaved(sides)
            old, new = (sides[k]()["loss"] for k in ("old", "new"))
            drift = ((old - new).abs() / old).max().item()
            print(f"chapter {chapter}, n = {n:>3}, {len(x)} examples: old {256 // len(stack)} per model "
                  f"{seconds['old']:.3f} s, new {per_model} per model {seconds['new']:.3f} s; largest relative loss "
                  f"difference {drift:.1e}")
            print("  " + verdict(f"old / new, chapter {chapter} at n = {n}", seconds["old"] / seconds["new"], 1.0))


if __name__ == "__main__":
    main(sys.argv[1:] or ["05:64", "05:128", "05:256", "06:64", "06:128"])
