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


def trials_for(n: int, trials: int, reference_n: int = 64, minimum: int = 4) -> int:
    """Random draws for a Monte-Carlo point at size n: `trials` at n = reference_n, scaled like 1/n, at least `minimum`.

    Scaling like 1/n keeps the rows drawn per point constant, and the error of a mean of rank / n shrinks like
    1/sqrt(rows). Chapter 02's "`trials` for n >= 256, proportionally more below" is
    `trials_for(n, trials, reference_n=256, minimum=trials)`.
    """
    return max(int(minimum), int(round(trials * reference_n / n)))
