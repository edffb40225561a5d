"""Shared bits of the benchmarks: timing, thread limits and a note on how busy the machine was."""

import os
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402


def best_time(fn, repeats: int = 3, warmup: int = 1) -> float:
    """Best wall time of `repeats` calls after `warmup` calls (less sensitive to a busy machine)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def interleaved(fns: dict, repeats: int = 3, warmup: int = 1) -> dict:
    """Best time of each function, alternating them so that load changes hit all alike."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: min(values) for name, values in times.items()}


@contextmanager
def threads(n: int):
    """Limit torch and the BLAS/OpenMP pools (numpy) to `n` threads."""
    from threadpoolctl import threadpool_limits

    saved = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        with threadpool_limits(limits=n):
            yield
    finally:
        torch.set_num_threads(saved)


def thread_count() -> int:
    """Threads for both sides of every comparison: `BENCH_THREADS`, else torch's default."""
    return int(os.environ.get("BENCH_THREADS", torch.get_num_threads()))


def header(title: str) -> None:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"== {title} | torch {torch.__version__}, {os.cpu_count()} CPUs, torch threads {torch.get_num_threads()}, "
          f"load average {load:.1f}" + (" (busy machine: ratios are noisier)" if load > (os.cpu_count() or 1) else ""))


def verdict(name: str, ratio: float, target: float) -> str:
    return f"{name}: {ratio:.2f}x (target >= {target}x) {'PASS' if ratio >= target else 'MISS'}"


def median(values):
    return statistics.median(values)


def peak_matmul_flops(size: int = 2048, repeats: int = 3) -> float:
    """The machine's float32 matmul rate (FLOP/s) at the current thread count: best of a large torch.mm."""
    a = torch.randn(size, size, generator=torch.Generator().manual_seed(0))
    b = torch.randn(size, size, generator=torch.Generator().manual_seed(1))
    return 2 * size**3 / best_time(lambda: torch.mm(a, b), repeats=repeats)


def training_flops_per_token(cfg, n: int) -> float:
    """Matmul FLOPs of one training step per token of a `helpers.models` transformer (forward x 3 for the
    backward pass), counting each model at its own query/key width: the useful work, not the padding."""
    heads, d_qk, d_v, d = cfg.n_heads, cfg.head_dim, cfg.value_dim, cfg.d_model
    keys = (n + 1) / 2 if cfg.causal else n  # keys per query on average
    per_layer = d * heads * (2 * d_qk + d_v) + heads * d_v * d + keys * heads * (d_qk + d_v)
    if cfg.mlp:
        per_layer += 2 * d * (cfg.d_mlp or 4 * d)
    head = d * (cfg.vocab_size or cfg.n_classes or 0)
    return 3 * 2 * (cfg.n_layers * per_layer + head)
