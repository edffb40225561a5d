"""Seeds: every random draw in the book goes through an explicit generator."""

import numpy as np
import torch


def torch_generator(seed: int, device: str | torch.device = "cpu") -> torch.Generator:
    """A fresh torch generator seeded with `seed`; the global random state is left untouched."""
    gen = torch.Generator(device=device)
    gen.manual_seed(int(seed))
    return gen


def numpy_generator(seed: int) -> np.random.Generator:
    """A fresh numpy generator seeded with `seed`."""
    return np.random.default_rng(int(seed))


def derive_seed(seed: int, *keys) -> int:
    """A child seed for a sub-experiment, stable across runs and platforms."""
    seq = np.random.SeedSequence([int(seed)] + [abs(hash_text(str(k))) for k in keys])
    return int(seq.generate_state(1)[0])


def hash_text(text: str) -> int:
    """A stable 32-bit hash (Python's `hash` is salted per process)."""
    import zlib

    return zlib.crc32(text.encode())
