"""Batched rank measures against loops: numerical_rank vs numpy.linalg.matrix_rank, hardmax_rank vs SVD.

Prints ratios measured in this process (same thread limits for both sides). `numerical_rank` reads the
count from Gram-matrix eigenvalues (SVD only for matrices too close to the threshold); the batched SVD
route it replaced is timed too, so the gain of each step is visible.
"""

import numpy as np
import torch
from _common import header, interleaved, thread_count, threads, verdict

from helpers.attention import random_attention
from helpers.rank import DEFAULT_RTOL, hardmax_rank, numerical_rank, numerical_rank_from_sigma, singular_values


def numerical_vs_numpy(batch=1024, n=128):
    """Ours with `thread_count()` torch threads vs the numpy loop with its BLAS pool at 1 thread (its fastest
    setting for a loop of small SVDs; more BLAS threads only add synchronisation on 128x128 matrices)."""
    probs = random_attention(n, 8, batch=batch, generator=torch.Generator().manual_seed(0))  # float64
    array = probs.numpy()

    def loop():
        with threads(1):
            return np.array([np.linalg.matrix_rank(a, rtol=DEFAULT_RTOL) for a in array])

    count = thread_count()
    with threads(count):
        assert np.array_equal(numerical_rank(probs).numpy(), loop()), "the two ranks disagree"
        t = interleaved({"batched": lambda: numerical_rank(probs), "svd": lambda: svd_route(probs), "loop": loop},
                        repeats=2, warmup=0)
    ratio = t["loop"] / t["batched"]
    print(f"  numerical_rank on {batch}x{n}x{n} ({count} torch threads): {t['batched']:.2f} s batched, "
          f"{t['svd']:.2f} s batched SVD route, {t['loop']:.2f} s numpy loop (1 thread) -> {ratio:.2f}x "
          f"(SVD route {t['loop'] / t['svd']:.2f}x)")
    return ratio


def svd_route(matrices):
    return numerical_rank_from_sigma(singular_values(matrices))


def hardmax_vs_svd(batch=64, n=256):
    logits = torch.randn(batch, n, n, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    t = interleaved({
        "hardmax": lambda: hardmax_rank(logits),
        "svd": lambda: svd_route(torch.softmax(logits, -1)),
        "numerical": lambda: numerical_rank(torch.softmax(logits, -1)),
    }, repeats=3)
    ratio = t["svd"] / t["hardmax"]
    print(f"  hardmax_rank on {batch}x{n}x{n}: {t['hardmax'] * 1e3:.1f} ms, SVD route {t['svd'] * 1e3:.1f} ms, "
          f"numerical_rank {t['numerical'] * 1e3:.1f} ms ({t['numerical'] / t['hardmax']:.1f}x hardmax)")
    return ratio


if __name__ == "__main__":
    header("rank measures")
    print(verdict("batched numerical_rank vs numpy matrix_rank loop", numerical_vs_numpy(), 3))
    with threads(thread_count()):
        print(verdict("hardmax_rank vs the SVD path at n = 256", hardmax_vs_svd(), 20))
