"""How many CPU threads torch uses: one way to set it for a block, for the whole book.

Batched float64 SVDs of small matrices gain little from a second thread, and on a shared 2-core machine an
oversubscribed OpenMP pool was measured 10-30x slower than one thread (chapter 04's sweeps; 158 s against 5.7 s
for the 72 MiniLM heads of one n = 512 window), so sweeps and capture run with `torch_threads(1)`.
"""

import contextlib

import torch

from .errors import ArgumentError


@contextlib.contextmanager
def torch_threads(threads: int | None = 1):
    """Run a block with `threads` torch threads (None: leave the setting as it is), restoring it afterwards."""
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ArgumentError("threads", threads, "None or a positive integer")
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
