"""Grouping a sweep's query/key widths into stacks that waste little work on padding.

`bucket_head_dims` groups the d_head values of a sweep into stacks so that padding wastes at most `max_waste`
(25 %) of the stack's work: the work of a model is counted, per token and layer, as the multiply-adds of its
query/key path (projections and scores, proportional to d_head) plus the fixed rest (value path, output
projection, MLP); dims are taken in increasing order and a new stack starts whenever padding the next dim's
stack to it would exceed the budget. Small dims are cheap next to the fixed rest: at d_model 64, 4 heads of
value width 16 and n = 128 (rest = 48 dims), 1..64 make [1, 2, 4, 8, 16], [24, 32], [64].
"""

from ..errors import ArgumentError
from ..models import ModelConfig


def qk_work_offset(cfg: ModelConfig, n: int) -> float:
    """The work of a model outside its query/key path, in units of one query/key dimension (see the module doc)."""
    per_dim = cfg.n_heads * (2 * cfg.d_model + n)  # q and k projections plus scores, per unit of d_head
    fixed = cfg.n_heads * cfg.value_dim * (2 * cfg.d_model + n)  # v, output projection, probabilities x values
    if cfg.mlp:
        fixed += 2 * cfg.d_model * (cfg.d_mlp or 4 * cfg.d_model)
    return fixed / per_dim


def bucket_head_dims(dims, offset: float, max_waste: float = 0.25) -> list[list[int]]:
    """Group query/key widths into stacks, each padded to its largest, wasting at most `max_waste` of its work.

    The work of a model with width d is `offset + d` (see `qk_work_offset`). Returns the groups, ascending.
    """
    dims = sorted(set(dims))
    if not dims or not all(isinstance(d, int) and d >= 1 for d in dims):
        raise ArgumentError("dims", dims, "a non-empty list of positive integers")
    groups: list[list[int]] = []
    for d in dims:
        if groups:
            group = groups[-1] + [d]
            waste = len(group) * (offset + d) / sum(offset + x for x in group) - 1
            if waste <= max_waste:
                groups[-1] = group
                continue
        groups.append([d])
    return groups
