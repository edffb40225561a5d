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


def hardmax_vs_svd_large(n=4096, d_head=64):
    """One head at n = 4096: the chapter-3b hardmax rank (float32 logits, certified argmax, float64 only for
    near-ties) against one SVD-based numerical rank of the softmax at T = sqrt(d_h) (float64), the logits included."""
    import math

    from helpers.hardmax_sampling import argmax_winners

    gen = torch.Generator().manual_seed(2)
    q, k = torch.randn(n, d_head, generator=gen), torch.randn(n, d_head, generator=gen)

    def hardmax():
        return torch.unique(argmax_winners(q, k)[0]).numel()

    def svd():
        probs = torch.softmax((q.double() @ k.double().T) / math.sqrt(d_head), -1)
        return int(svd_route(probs))

    assert hardmax() == int(hardmax_rank(q.double() @ k.double().T)), "certified float32 argmax disagrees"
    t = interleaved({"hardmax": hardmax, "svd": svd}, repeats=1, warmup=0)
    ratio = t["svd"] / t["hardmax"]
    print(f"  one head at n = {n}, d_h = {d_head}: hardmax rank {t['hardmax'] * 1e3:.0f} ms, "
          f"SVD numerical rank {t['svd']:.1f} s -> {ratio:.0f}x")
    return ratio


if __name__ == "__main__":
    header("rank measures")
    print(verdict("batched numerical_rank vs numpy matrix_rank loop", numerical_vs_numpy(), 3))
    with threads(thread_count()):
        print(verdict("hardmax_rank vs the SVD path at n = 256", hardmax_vs_svd(), 20))
        print(verdict("one hardmax rank vs one SVD numerical rank at n = 4096", hardmax_vs_svd_large(), 100))
