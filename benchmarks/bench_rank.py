"""Batched rank measures against loops: numerical_rank vs numpy.linalg.matrix_rank, hardmax_rank vs SVD.

Prints ratios measured in this process (same thread limits for both sides).
"""

import numpy as np
import torch
from _common import header, interleaved, thread_count, threads, verdict

from helpers.attention import random_attention
from helpers.rank import DEFAULT_RTOL, hardmax_rank, numerical_rank


def numerical_vs_numpy(batch=1024, n=128, thread_counts=None):
    probs = random_attention(n, 8, batch=batch, generator=torch.Generator().manual_seed(0))  # float64
    array = probs.numpy()
    ours = numerical_rank(probs)
    loop = np.array([np.linalg.matrix_rank(a, rtol=DEFAULT_RTOL) for a in array])
    assert np.array_equal(ours.numpy(), loop), "the two ranks disagree"
    ratios = {}
    for count in thread_counts or (thread_count(),):
        with threads(count):
            t = interleaved({
                "batched": lambda: numerical_rank(probs),
                "loop": lambda: [np.linalg.matrix_rank(a, rtol=DEFAULT_RTOL) for a in array],
            }, repeats=2, warmup=0)
        ratios[count] = t["loop"] / t["batched"]
        print(f"  {count} thread(s): numerical_rank on {batch}x{n}x{n}: {t['batched']:.2f} s batched, "
              f"{t['loop']:.2f} s numpy loop -> {ratios[count]:.2f}x")
    return max(ratios.values())


def hardmax_vs_svd(batch=64, n=256):
    logits = torch.randn(batch, n, n, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    t = interleaved({
        "hardmax": lambda: hardmax_rank(logits),
        "svd": lambda: numerical_rank(torch.softmax(logits, -1)),
    }, repeats=3)
    ratio = t["svd"] / t["hardmax"]
    print(f"  hardmax_rank on {batch}x{n}x{n}: {t['hardmax'] * 1e3:.1f} ms, SVD numerical_rank {t['svd'] * 1e3:.1f} ms")
    return ratio


if __name__ == "__main__":
    header("rank measures")
    print(verdict("batched numerical_rank vs numpy matrix_rank loop", numerical_vs_numpy(), 3))
    with threads(thread_count()):
        print(verdict("hardmax_rank vs the SVD path at n = 256", hardmax_vs_svd(), 20))
