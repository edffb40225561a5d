"""glibc's thresholds fixed by `helpers.allocator.keep_freed_memory` (and `keep_large_freed_memory`) against its
defaults, per step (per point for chapter 10).

The chapters' own stacks, trained by `helpers.training.train` with their recipes (validation every `eval_every`
steps included), BENCH_STEPS steps from fresh weights, one thread:
  - chapter 05 (full mode: d_model 32, value width 16): copy at n = 32, 64, 128 and 256 and reversal at n = 16,
    widths 1, 4 and 8 repeated over seeds up to the chapter's `stack_size` (96, 48, 24, 12 and 3 models);
  - chapter 06 (full mode): Shakespeare at n = 128, widths 1, 2 and 3 by 3 seeds;
  - chapter 03c's code optimiser (`helpers.code_search.optimise_code`, which also sets them) at its largest n, 4096:
    a free (permutation) and a tied code of dimension 16 at L = 16, CODE_STEPS steps (the chapter's 400);
  - chapter 10's window point (`ch10_decoder_llm_points.window_point`, SmolLM2 on one Shakespeare window of 2,048
    tokens, the chapter's full-mode n and SVD layers, one thread like the rows above), with
    `keep_large_freed_memory`, which that point sets, against glibc's defaults; one whole point per side (about
    a minute).
The thresholds cannot be set back within a process, so each side runs in a child process of its own, the two
sides alternating (best of BENCH_ROUNDS, default 2, so that load changes hit both alike). Prints per stack (or
code, or point): milliseconds per model-step (or optimiser step, or point) and minor page faults per step of each
side, the ratio default / kept (above 1: keeping is faster), and whether the trained weights (or the code's masses,
or the point's rows) are bitwise the same.

Figures (dated, with the machine): the README's section "Benchmarks".
Usage: python benchmarks/bench_allocator.py       (BENCH_STEPS, default 100; BENCH_ROUNDS, default 2; BENCH_ONLY,
       a chapter such as ch10, for its rows alone)
"""

import dataclasses
import hashlib
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from _common import header, verdict

STEPS = int(os.environ.get("BENCH_STEPS", 100))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", 2))
STACKS = [("ch05", "reversal", 16), ("ch05", "copy", 32), ("ch05", "copy", 64), ("ch05", "copy", 128),
          ("ch05", "copy", 256), ("ch06", "shakespeare", 128), ("ch03c", "permutation", 4096),
          ("ch03c", "tied", 4096), ("ch10", "window", 2048)]
CODE_STEPS = 400
ONLY = os.environ.get("BENCH_ONLY")
if ONLY is not None and ONLY not in {chapter for chapter, _, _ in STACKS}:
    raise SystemExit(f"BENCH_ONLY must be one of {sorted({chapter for chapter, _, _ in STACKS})}, not {ONLY!r}")


def _ch05(task: str, n: int):
    """Chapter 05's stack of `stack_size(n)` models (widths 1, 4, 8 over seeds), its data and recipe."""
    from helpers.experiments import ch05_training

    spec = ch05_training.CellSpec(d_model=32, steps=2000)
    members = [((1, 4, 8)[i % 3], i // 3) for i in range(ch05_training.stack_size(n, spec))]
    data = ch05_training.task_data(task, n, 0, spec)
    configs = [ch05_training.model_config(task, data, d, spec) for d, _ in members]
    return configs, members, data, spec.recipe(task, n)


def _ch06(domain: str, n: int):
    """Chapter 06's stack of widths 1, 2 and 3 by 3 seeds (one bucket), its data and recipe."""
    from helpers.experiments import ch06_real_data_points as points

    spec = points.DomainSpec.for_mode("full")
    members = [(d, s) for d in (1, 2, 3) for s in range(3)]
    data = points.load_domain(domain, n, spec)
    return [points.model_config(data, d, spec) for d, _ in members], members, data, spec.recipe(domain, n)


def _code(pattern: str, n: int) -> dict:
    """Chapter 03c's optimiser: one code of dimension 16 at L = 16 for CODE_STEPS steps."""
    from helpers import code_search

    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    started = time.perf_counter()
    found = code_search.optimise_code(n, 16, 16.0, pattern, steps=CODE_STEPS, seed=0)
    seconds = time.perf_counter() - started
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    result = json.dumps([found.mean_mass, found.min_mass, found.loss]).encode()
    return {"ms": 1e3 * seconds / CODE_STEPS, "faults": faults / CODE_STEPS, "models": 1,
            "weights": hashlib.sha256(result).hexdigest()}


def _window_point(n: int) -> dict:
    """Chapter 10's window point, timed after the model is loaded (`decoder.load` keeps it for the point)."""
    from helpers import decoder
    from helpers.experiments import ch10_decoder_llm_points as points

    decoder.load("pretrained", None)
    sizes = [n >> k for k in range(5, -1, -1)]       # 64 .. 2,048 at n = 2,048, as in full mode
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    started = time.perf_counter()
    rows = points.window_point("shakespeare", "pretrained", None, sizes, 0, [0, 10, 20], [1e-3], 0)
    seconds = time.perf_counter() - started
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    return {"ms": 1e3 * seconds, "faults": faults, "models": 1,
            "weights": hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()}


def child(chapter: str, name: str, n: int, keep: bool) -> dict:
    """Train one stack for STEPS steps (or optimise one code of chapter 03c) in this process, with glibc's
    thresholds kept or left at their defaults."""
    from helpers import allocator, seeding, training

    if chapter == "ch10":
        if keep:
            assert allocator.keep_large_freed_memory(), "not glibc: nothing to measure"
        else:
            allocator._kept_large = False   # the point's own call then leaves glibc's defaults alone
        return _window_point(n)
    if keep:
        assert allocator.keep_freed_memory(), "not glibc: nothing to measure"
    else:
        allocator._kept = False   # the trainer's (and the optimiser's) call then leaves glibc's defaults alone
    if chapter == "ch03c":
        return _code(name, n)
    configs, members, data, recipe = (_ch05 if chapter == "ch05" else _ch06)(name, n)
    recipe = dataclasses.replace(recipe, steps=STEPS, patience=10**6, loss_floor=None, min_evals=0)  # no stop
    stack = training.ModelStack.build(configs, [seeding.derive_seed(s, "init") for _, s in members], "cpu")
    seeds = [seeding.derive_seed(s, "order") for _, s in members]
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    started = time.perf_counter()
    training.train(stack, data, recipe, seeds, threads=1)
    seconds = time.perf_counter() - started
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    weights = hashlib.sha256(b"".join(t.detach().contiguous().numpy().tobytes() for t in stack.params.values()))
    return {"ms": 1e3 * seconds / (STEPS * len(members)), "faults": faults / STEPS, "models": len(members),
            "weights": weights.hexdigest()}


def run_child(chapter: str, name: str, n: int, keep: bool) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", chapter, name, str(n), str(int(keep))],
                         capture_output=True, text=True, check=True, cwd=Path(__file__).parent)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    header("allocator: glibc's thresholds kept (helpers.allocator) against its defaults, per step")
    for chapter, name, n in STACKS:
        if ONLY is not None and chapter != ONLY:
            continue
        runs = {"default": [], "kept": []}
        for _ in range(ROUNDS):
            for side in runs:
                runs[side].append(run_child(chapter, name, n, side == "kept"))
        best = {side: min(r, key=lambda x: x["ms"]) for side, r in runs.items()}
        same = len({r["weights"] for side in runs for r in runs[side]}) == 1
        what, unit, result = (("one code", "optimiser step", "masses and loss") if chapter == "ch03c" else
                              ("one window", "point", "rows") if chapter == "ch10" else
                              (f"{best['kept']['models']} models", "model-step", "weights"))
        per = "point" if chapter == "ch10" else "step"
        print(f"{chapter} {name} n = {n:>3}, {what}: default {best['default']['ms']:.2f} ms "
              f"({best['default']['faults']:,.0f} faults a {per}), kept {best['kept']['ms']:.2f} ms "
              f"({best['kept']['faults']:,.0f} faults a {per}) per {unit}; {result} bitwise the same: {same}")
        print("  " + verdict(f"default / kept, {chapter} {name} at n = {n}",
                             best["default"]["ms"] / best["kept"]["ms"], 1.0))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        import torch

        torch.set_num_threads(1)
        print(json.dumps(child(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5] == "1")))
    else:
        main()
