"""Chapter 3c's code optimiser: the target loss with its hand-written gradient (`code_search.target_loss`) against
the optimiser as it was before 2026-12-07 (`benchmarks/frozen/code_search.py`, autograd's graph of the same loss).

Cases: codes the chapter's search trains at its largest n (the free permutation code at n = 4096 and 1024, dimensions
on both sides of 16, where BLAS's speed changes), the tied code at n = 4096 and a 4-sparse pattern at n = 256; L = 16,
BENCH_STEPS optimiser steps from the same seed, one thread, the two sides alternating (best of 3). Prints per case
the milliseconds per optimiser step of each side, the ratio old / new (above 1: the new one is faster) and how far
the two final mean target masses are apart (the gradients round differently, so they are close, not bitwise equal).

Figures (dated, with the machine): the README's section "Benchmarks".
Usage: python benchmarks/bench_code_search.py      (BENCH_STEPS, default 100)
"""

import os

from _common import header, interleaved, threads, verdict
from frozen import code_search as frozen

from helpers import code_search

STEPS = int(os.environ.get("BENCH_STEPS", 100))
CASES = [("permutation", 1, 4096, 4), ("permutation", 1, 4096, 10), ("permutation", 1, 4096, 16),
         ("permutation", 1, 1024, 8), ("tied", 1, 4096, 16), ("sparse", 4, 256, 8)]   # (pattern, k, n, d)
L = 16.0


def main():
    header(f"code optimiser: hand-written target-loss gradient against autograd's graph, {STEPS} steps, one thread")
    with threads(1):
        for pattern, k, n, d in CASES:
            found = {}

            def side(module, name):
                def run():
                    found[name] = module.optimise_code(n, d, L, pattern, k, STEPS, seed=0)
                return run
            best = interleaved({"old": side(frozen, "old"), "new": side(code_search, "new")})
            gap = abs(found["old"].mean_mass - found["new"].mean_mass)
            print(f"{pattern} k = {k}, n = {n:>4}, d = {d:>2}: old {1e3 * best['old'] / STEPS:.2f} ms, new "
                  f"{1e3 * best['new'] / STEPS:.2f} ms per step; mean target masses {found['old'].mean_mass:.6f} "
                  f"and {found['new'].mean_mass:.6f} ({gap:.1e} apart)")
            print("  " + verdict(f"old / new, {pattern} at n = {n}, d = {d}", best["old"] / best["new"], 1.0))


if __name__ == "__main__":
    main()
