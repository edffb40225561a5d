"""How the C allocator keeps the memory a training step frees, so that the next step reuses it.

    keep_freed_memory()   # once per process; `helpers.training.train` and `code_search.optimise_code` call it

On Linux with glibc, a block above malloc's mmap threshold (128 KiB at first; glibc raises it, up to 32 MiB, as
large blocks are freed) is mapped fresh from the kernel and unmapped when it is freed, and a free top of the heap
above the trim threshold (twice the mmap threshold) goes back to the kernel. A training step allocates and frees
the same activations every step, so every step touched fresh pages that the kernel had to fault in and zero:
about 2,700 to 11,000 minor page faults per step in chapter 05's and chapter 06's stacks. `keep_freed_memory`
fixes both thresholds, so that those blocks come from the heap and stay there: about 100 to 1,100 faults per step
(the first steps included), and the steps 1.00 to 1.17 times faster (`benchmarks/bench_allocator.py`, which also
checks that the trained weights are bitwise the same). Chapter 3c's code optimiser frees and allocates its logits
every step the same way: at n = 4096, 1,755 and 754 faults a step fell to about 200, and its steps ran 1.29 and 1.06
times faster (a free and a tied code, on an AMD EPYC), with the same masses bit for bit.

The price: a process keeps up to TRIM_THRESHOLD of freed memory for reuse instead of handing it back.
Elsewhere (macOS, Windows, musl) malloc differs and this does nothing.

    keep_large_freed_memory()   # once per process; chapter 10's decoder points call it

glibc will not raise the mmap threshold above 32 MiB, so larger blocks are always mapped and unmapped. Chapter 10's
decoder allocates and frees such blocks in every layer (one layer's attention logits at n = 2,048 are 9 heads x 2,048
x 2,048 floats, 151 MB), and the kernel zeroed about 30 GB of fresh pages per text window: 14 of its 62 CPU seconds.
`keep_large_freed_memory` maps no block on its own (M_MMAP_MAX 0), so every block comes from the heap, and keeps up
to LARGE_TRIM_THRESHOLD of it freed: 7.4 million minor page faults per window fell to 0.3 million, and the point ran
1.30 times faster on one thread (`benchmarks/bench_allocator.py`) and 1.25 times on two, with the same rows bit for
bit and the point's peak memory unchanged (2.25 GB), on a 2-core AMD EPYC (2026-12-08). The whole chapter, whose
process keeps what its points freed, peaked at 3.8 to 3.9 GB instead of 3.3 GB, and ran 1.15 to 1.3 times faster.
"""

import ctypes
import platform

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_MMAP_MAX = -1, -3, -4   # glibc's <malloc.h>
MMAP_THRESHOLD = 32 << 20    # glibc's own ceiling for its moving threshold: one layer's scores of a stack are 6 MiB
TRIM_THRESHOLD = 256 << 20   # 64 MiB still let chapter 05's 96-model stacks at n = 16 fault 3,700 times a step

LARGE_TRIM_THRESHOLD = 1 << 30   # above one decoder layer's blocks at n = 2,048, so a layer reuses the last's

_kept: bool | None = None         # the outcome in this process, once tried
_kept_large: bool | None = None   # the same for keep_large_freed_memory


def keep_freed_memory() -> bool:
    """Fix glibc's mmap and trim thresholds in this process (once; later calls return the first outcome).
    True where they are set, False where the C library is not glibc."""
    global _kept
    if _kept is None:
        _kept = _set_thresholds()
    return _kept


def _set_thresholds() -> bool:
    return _glibc() and _mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) and _mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)


def keep_large_freed_memory() -> bool:
    """Serve every block from glibc's heap, none mapped on its own, and keep up to LARGE_TRIM_THRESHOLD of it freed
    (once per process; later calls return the first outcome). True where set, False where the C library is not
    glibc. A process that trains calls `keep_freed_memory` instead; this one is for blocks above 32 MiB."""
    global _kept_large
    if _kept_large is None:
        _kept_large = _glibc() and _mallopt(M_MMAP_MAX, 0) and _mallopt(M_TRIM_THRESHOLD, LARGE_TRIM_THRESHOLD)
    return _kept_large


def _glibc() -> bool:
    return platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


def _mallopt(option: int, value: int) -> bool:
    return bool(ctypes.CDLL(None).mallopt(option, value))   # glibc's: returns 1 on success, 0 on failure
