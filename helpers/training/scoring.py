"""Cross-entropy and accuracy: per model of a stack, and for one standalone model.

Targets of -100 (`helpers.data.IGNORE`) are not counted. Logits `(M, B, n, V)` go with targets `(M, B, n)`
(language models), `(M, B, C)` with `(M, B)` (classifiers).
"""

import torch
import torch.nn.functional as F

from ..data import IGNORE
from ..models import Transformer


def stacked_loss(logits: torch.Tensor, targets: torch.Tensor,
                 with_hits: bool = True) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """Per-model mean cross-entropy over counted targets, hits and counts: each `(M,)`.

    with_hits=False returns None for the hits (training needs no argmax).
    """
    m = logits.shape[0]
    flat = logits.reshape(-1, logits.shape[-1])
    targets = targets.reshape(-1)
    ce = F.cross_entropy(flat, targets, ignore_index=IGNORE, reduction="none").view(m, -1)
    counted = (targets != IGNORE).view(m, -1)
    count = counted.sum(1)
    if not with_hits:
        return ce.sum(1) / count.clamp(min=1), None, count
    hits = ((flat.argmax(-1) == targets).view(m, -1) & counted).sum(1)
    return ce.sum(1) / count.clamp(min=1), hits, count


@torch.no_grad()
def _score(run, m: int, x: torch.Tensor, y: torch.Tensor, chunk: int, device) -> dict:
    total = torch.zeros(m, dtype=torch.float64, device=device)
    hits = torch.zeros(m, dtype=torch.float64, device=device)
    counted = torch.zeros(m, dtype=torch.float64, device=device)
    for start in range(0, len(x), chunk):
        xb, yb = x[start:start + chunk].to(device), y[start:start + chunk].to(device)
        loss, h, c = stacked_loss(run(xb.unsqueeze(0).expand(m, *xb.shape)), yb.unsqueeze(0).expand(m, *yb.shape))
        total += loss.double() * c
        hits += h
        counted += c
    return {"loss": total / counted.clamp(min=1), "accuracy": hits / counted.clamp(min=1)}


def evaluate_stack(stack, x: torch.Tensor, y: torch.Tensor, batch_size: int = 256) -> dict:
    """{"loss", "accuracy"}: `(M,)` float64 tensors, every model of `stack` scored on the same (x, y).

    Each forward pass takes batch_size // M examples per model: the activations of one standalone batch
    (larger stacked tensors fall out of cache)."""
    return _score(stack, len(stack), x, y, max(1, batch_size // len(stack)), stack.device)


def evaluate(model: Transformer, x: torch.Tensor, y: torch.Tensor, batch_size: int = 256) -> dict:
    """{"loss", "accuracy"} (floats) of one model on (x, y), in eval mode, as it is now (its attention paths
    and scales included, so `helpers.models.uniform_attention` applies)."""
    was_training = model.training
    model.eval()
    try:
        scores = _score(lambda xb: model(xb[0]).unsqueeze(0), 1, x, y, batch_size,
                        next(model.parameters()).device)
    finally:
        model.train(was_training)
    return {name: float(value[0]) for name, value in scores.items()}
