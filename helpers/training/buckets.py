"""Grouping a sweep's models into stacks: widths that waste little work on padding, and stacks small enough for the
CPU's caches.

`bucket_head_dims` groups the d_head values of a sweep into stacks so that padding wastes at most `max_waste`
(25 %) of the stack's work: the work of a model is counted, per token and layer, as the multiply-adds of its
query/key path (projections and scores, proportional to d_head) plus the fixed rest (value path, output
projection, MLP); dims are taken in increasing order and a new stack starts whenever padding the next dim's
stack to it would exceed the budget. Small dims are cheap next to the fixed rest: at d_model 64, 4 heads of
value width 16 and n = 128 (rest = 48 dims), 1..64 make [1, 2, 4, 8, 16], [24, 32], [64].

`stack_limit` caps the models of one stack so that one layer's attention scores, `(M, batch, heads, n, n)` in
float32, stay within SCORE_BUDGET_BYTES, and `cut_stack` cuts a group's (width, seed) members into stacks of that
size, seed by seed: a stack whose scores outgrow the caches runs slower per model, not faster
(`benchmarks/bench_stack_size.py`).
"""

from ..errors import ArgumentError
from ..models import ModelConfig, _optional_positive_int, _positive_int

# Measured on a 2-core Xeon (2 MiB of L2 per core), chapter 05's full-mode stacks, one thread per process: 9 models at
# n = 128 (4.5 MiB of scores) ran as fast per model as 3 (0.92 to 1.0 times); at n = 256, 9 models (18 MiB) ran 1.2
# times and 6 (12 MiB) 1.05 to 1.18 times slower than 3 (6 MiB); since the trainer keeps its freed memory
# (`helpers.allocator`), part of that gap (page faults) is gone, and 9 models ran 1.02 to 1.08 times slower. A fixed
# figure, not read from the machine, so that where the stacks are cut (and so the rounding of a padded model) is the
# same on every machine. Evaluation, which keeps nothing for a backward pass, cuts its forward passes by a figure of
# its own (`loop.ATTENTION_FLOATS`); both are timings, not one quantity.
SCORE_BUDGET_BYTES = 6 * 2**20


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


def stack_limit(cfg: ModelConfig, n: int, batch: int, budget: int = SCORE_BUDGET_BYTES) -> int:
    """The most models of config `cfg` (sequence length n, `batch` sequences per step) one stack may hold: one
    layer's attention scores of the stack, `(M, batch, n_heads, n, n)` in float32, within `budget` bytes; at least 1.
    """
    for name, value in (("n", n), ("batch", batch), ("budget", budget)):
        _positive_int(name, value)
    return max(1, budget // (batch * cfg.n_heads * n * n * 4))


def cut_stack(members: list, limit: int | None) -> list[list]:
    """`members` [(width, seed), ...] of one stack as stacks of at most `limit` (None: no limit), in their own order
    when they fit, else ordered by seed and then width and cut in turn, so that a piece holds whole seeds (every
    width of the group, hence the group's padded width) wherever the limit allows."""
    members = list(members)
    _optional_positive_int("limit", limit)
    if limit is None or len(members) <= limit:
        return [members] if members else []
    ordered = sorted(members, key=lambda member: (member[1], member[0]))
    return [ordered[i:i + limit] for i in range(0, len(ordered), limit)]
