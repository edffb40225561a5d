"""torch.compile, a lever measured and not taken: chapter 05's training step, eager against a compiled forward pass
and loss (backward through AOTAutograd, inductor's C++ kernels on the CPU).

Chapter 05's stacks as its full mode trains them (`ch05_training.CellSpec`, d_model 32): 3 reversal models at
query/key width 8 (seeds 0 to 2), about 1,024 tokens per step (8 sequences at n = 256), one thread. Each side takes the
same whole optimiser steps (forward, loss, backward, per-model clipping, the stacked AdamW) from the same weights
on the same batches, interleaved (best of 3). Two compiled sides: `static` compiles for the exact shapes (again for
every other n, padded width, batch or number of models: the trainer's stacks shrink as models stop), `dynamic`
once for symbolic shapes. Prints, per n: milliseconds per model-step of each side, the ratios eager / compiled,
the seconds each first compiled call took, and the largest relative difference of the 3 losses after the timed
steps (compiled kernels sum in another order, so a compiled trainer would not reproduce the stored models bit for
bit). A side that does not compile (dynamic shapes, with torch 2.13; either side without a C++ compiler) is reported
with inductor's error and left out.

Why it is not used (2026-12-07, quiet Intel Xeon): see the README's section "Benchmarks".
Usage: python benchmarks/bench_compile.py [n ...]   (default 64 128 256); BENCH_STEPS (default 20) steps per side.
"""

import os
import sys
import time

import torch
from _common import header, interleaved, threads, verdict

from helpers import forward as forward_pass, seeding, training
from helpers.experiments import ch05_training
from helpers.training.optim import StackedAdamW, clip_per_model
from helpers.training.scoring import stacked_loss

SPEC = ch05_training.CellSpec(d_model=32, steps=2000)   # chapter 05's full mode
MEMBERS = [(8, 0), (8, 1), (8, 2)]
STEPS = int(os.environ.get("BENCH_STEPS", 20))


def setup(n: int):
    """Chapter 05's reversal stack at length n, fresh weights, and a list of STEPS batches `(M, batch, n)`."""
    data = ch05_training.task_data("reversal", n, 0, SPEC)
    configs = [ch05_training.model_config("reversal", data, d, SPEC) for d, _ in MEMBERS]
    stack = training.ModelStack.build(configs, [seeding.derive_seed(s, "init") for _, s in MEMBERS], device="cpu")
    size, m = SPEC.batch_size(n), len(MEMBERS)
    gen = torch.Generator().manual_seed(0)
    index = [torch.randint(len(data.train_x), (m, size), generator=gen) for _ in range(STEPS)]
    return stack, [(data.train_x[i], data.train_y[i]) for i in index]


def stepper(stack, recipe, compiled: str | None):
    """A function running optimiser steps of `stack` by `recipe` (its learning rate held, its clip and weight decay)
    from the weights it has now, restored at each call; returns the last step's losses `(M,)`."""
    start = {k: v.detach().clone() for k, v in stack.params.items()}
    layout = stack.layout

    def loss(params, x, y):
        return stacked_loss(forward_pass.forward(params, layout, x), y, with_hits=False)[0]

    loss_fn = loss if compiled is None else torch.compile(loss, dynamic=compiled == "dynamic")

    def run(batches):
        with torch.no_grad():
            for k, v in stack.params.items():
                v.copy_(start[k])
        optimizer = StackedAdamW(stack, recipe.weight_decay)
        active = torch.ones(len(stack), dtype=torch.bool)
        for x, y in batches:
            for p in stack.params.values():
                p.grad = None
            losses = loss_fn(stack.params, x, y)
            losses.sum().backward()
            clip_per_model(stack, recipe.clip)
            optimizer.step(recipe.lr, active)
        return losses.detach()
    return run


def main(ns):
    header("torch.compile: chapter 05's training step, eager against compiled forward and loss")
    with threads(1):
        for n in ns:
            stack, batches = setup(n)
            recipe = SPEC.recipe("reversal", n)
            sides = {"eager": stepper(stack, recipe, None)}
            compile_seconds = {}
            for name in ("static", "dynamic"):
                sides[name] = stepper(stack, recipe, name)
                started = time.perf_counter()
                try:
                    sides[name](batches[:1])
                except Exception as error:   # inductor's own failure, reported as measured
                    print(f"n = {n:>3}: {name} shapes do not compile: {type(error).__name__}: "
                          f"{str(error).splitlines()[0][:120]}")
                    del sides[name]
                    torch._dynamo.reset()
                    continue
                compile_seconds[name] = time.perf_counter() - started
            seconds = interleaved({name: (lambda run=run: run(batches)) for name, run in sides.items()})
            losses = {name: run(batches) for name, run in sides.items()}
            per = {k: 1e3 * v / (STEPS * len(MEMBERS)) for k, v in seconds.items()}
            for name in compile_seconds:
                drift = ((losses["eager"] - losses[name]).abs() / losses["eager"].abs()).max().item()
                print(f"n = {n:>3}: eager {per['eager']:.2f} ms, {name} shapes {per[name]:.2f} ms per model-step; "
                      f"first compiled call {compile_seconds[name]:.1f} s; largest relative loss difference after "
                      f"{STEPS} steps {drift:.1e}")
                print("  " + verdict(f"eager / {name} at n = {n}", seconds["eager"] / seconds[name], 1.0))
            torch._dynamo.reset()


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [64, 128, 256])
