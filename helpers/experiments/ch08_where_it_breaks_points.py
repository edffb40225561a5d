"""Chapter 8's grid points: top-level functions `(**config, seed) -> list of plain-number row dicts`.

They live apart from `ch08_where_it_breaks` (the sweeps, `analyse(P)` and the verdict rules) because the result
store keys a point by the code of the module that defines it and what that imports: editing the analysis keeps the
cached sweeps and trained models.

    counterexample_point  every counterexample under every measure, next to its closed form
    temperature_point     rank of a head against T, and the softmax-hardmax / softmax-uniform gaps with their bounds
    depth_point           token states and attention ranks layer by layer for one architecture at initialization
    trained_point         one small model trained on a synthetic task: every head's rank at init and after training
"""

import math

import torch

from .. import attention, counterexamples as cx, rank, seeding
from ..capture import attention_ranks
from ..data import load
from ..models import build_model
from ..training import Recipe, train

RTOLS = (1e-2, 1e-3, 1e-5, 1e-8)
EXAMPLES = ("identity", "previous_token", "causal_random", "uniform_causal", "uniform", "random_softmax",
            "random_hardmax")
TEMPERATURE_HEADS = ("random", "identity", "previous_token", "causal_random")
ARCHS = ("attn", "attn+mlp", "attn+res", "attn+res+mlp")
POSITIONS = ("none", "sinusoidal", "learned", "rope")


ORDER = ("hardmax", "numerical", "effective", "stable")
MEASURES = rank.labels(ORDER, RTOLS)       # "hardmax", "numerical@1e-02", ..., "effective", "stable"


def measure_all(matrix: torch.Tensor) -> dict[str, torch.Tensor]:
    """Every measure of `(..., n, n)` probabilities at this chapter's tolerances: {label: `(...)` float64}."""
    return rank.measures(matrix, ORDER, RTOLS)


# ---------------------------------------------------------------- (a) counterexamples
def _closed_forms(example: str, n: int) -> dict[str, float | None]:
    """Closed-form rank per measure (None where there is no closed form)."""
    if example == "identity":
        return {m: float(n) for m in MEASURES}
    if example == "previous_token":
        form = cx.hardmax_closed_form(cx.previous_token_counts(n))
        return {"hardmax": form["hardmax"], **{rank.label("numerical", t): form["numerical"] for t in RTOLS},
                "effective": form["effective"], "stable": form["stable"]}
    if example == "uniform":
        return {m: 1.0 for m in MEASURES}
    if example == "uniform_causal":
        return {"hardmax": 1.0}
    return {}


def counterexample_point(n: int, d_head: int, seed: int) -> list[dict]:
    """Every counterexample (and a random head for comparison) under every measure.

    The identity and previous-token heads are evaluated at their certified temperature T* (below it the
    numerical rank provably equals the hardmax rank), the causal and random heads at T = sqrt(d_h) on random
    logits, the two uniform matrices exactly. Rows: example, temperature, measure, rank, closed_form, exact_rank
    (the rank in exact arithmetic when it is known in closed form).
    """
    gen = seeding.torch_generator(seed)
    t_default = math.sqrt(d_head)
    identity = cx.identity_head_logits(n, d_head, gen)
    previous = cx.previous_token_logits(n, d_head)
    random_logits = attention.random_logits(n, d_head, generator=gen)[0]
    t_id, t_prev = cx.certified_temperature(identity), cx.certified_temperature(previous)
    matrices = {
        "identity": (attention.softmax_attention(identity, t_id), t_id, n),
        "previous_token": (attention.softmax_attention(previous, t_prev), t_prev, None),
        "causal_random": (cx.causal_attention(random_logits, t_default), t_default, n),
        "uniform_causal": (cx.uniform_causal(n), math.inf, n),
        "uniform": (cx.uniform_attention(n), math.inf, 1),
        "random_softmax": (attention.softmax_attention(random_logits, t_default), t_default, None),
        "random_hardmax": (attention.hardmax_attention(random_logits), 0.0, None),
    }
    rows = []
    for example, (matrix, temperature, exact) in matrices.items():
        forms = _closed_forms(example, n)
        for measure, value in measure_all(matrix).items():
            rows.append({"example": example, "temperature": temperature, "measure": measure, "rank": float(value),
                         "closed_form": forms.get(measure), "exact_rank": exact})
    rows.append({"example": "causal_random", "temperature": 0.0, "measure": "hardmax_of_logits",
                 "rank": float(rank.hardmax_rank(random_logits.masked_fill(cx.causal_mask(n), float("-inf")))),
                 "closed_form": None, "exact_rank": None})
    return rows


# ---------------------------------------------------------------- (b) temperature
def head_logits(head: str, n: int, d_head: int, trials: int, gen: torch.Generator) -> torch.Tensor:
    """Logits `(trials, n, n)` of a named head ("random" heads are i.i.d. draws; the others are repeated)."""
    if head in ("random", "causal_random"):
        logits = attention.random_logits(n, d_head, batch=trials, generator=gen)
        if head == "causal_random":
            logits = logits.masked_fill(cx.causal_mask(n), float("-inf"))
        return logits
    if head == "identity":
        return torch.stack([cx.identity_head_logits(n, d_head, gen) for _ in range(trials)])
    if head == "previous_token":
        return cx.previous_token_logits(n, d_head)[None]
    raise ValueError(f"head must be one of {TEMPERATURE_HEADS}; got {head!r}")


def temperature_point(head: str, n: int, d_head: int, ratios: list[float], trials: int, seed: int) -> list[dict]:
    """For T = ratio * sqrt(d_h): mean rank per measure, and (unmasked heads) the gaps to the hardmax and
    uniform limits with their bounds. Rows: ratio, temperature, quantity, value (mean over trials)."""
    gen = seeding.torch_generator(seed)
    logits = head_logits(head, n, d_head, trials, gen)  # (trials, n, n)
    hard = attention.hardmax_attention(logits)
    hard_sigma = rank.singular_values(hard)
    uniform = cx.uniform_attention(n)
    rows = []
    for ratio in ratios:
        t = ratio * math.sqrt(d_head)
        probs = attention.softmax_attention(logits, t)  # masked entries are -inf -> 0
        values = {m: v.mean() for m, v in measure_all(probs).items()}
        if head != "causal_random":
            gap = probs - hard
            sigma_gap = (rank.singular_values(probs) - hard_sigma).abs()
            values.update({
                "gap_spectral": torch.linalg.matrix_norm(gap, 2).mean(),
                "gap_frobenius": gap.norm(dim=(-2, -1)).mean(),
                "gap_bound": cx.gap_bound(logits, t).mean(),
                "gap_bound_crude": cx.gap_bound(logits, t, crude=True).mean(),
                "weyl_max_sigma_diff": sigma_gap.max(-1).values.mean(),
                "mirsky_sigma_diff": sigma_gap.norm(dim=-1).mean(),
                "hot_gap": (probs - uniform).norm(dim=(-2, -1)).mean(),
                "hot_bound": cx.hot_bound(logits, t).mean(),
                "bound_holds": ((gap.norm(dim=(-2, -1)) <= cx.gap_bound(logits, t) * (1 + 1e-9) + 1e-12)
                                & ((probs - uniform).norm(dim=(-2, -1)) <= cx.hot_bound(logits, t) * (1 + 1e-9)
                                   + 1e-12)).double().mean(),
            })
        rows.extend({"ratio": ratio, "temperature": t, "quantity": q, "value": float(v)} for q, v in values.items())
    if head != "causal_random":
        certified = [cx.certified_temperature(logits[i]) for i in range(logits.shape[0])]
        rows.append({"ratio": None, "temperature": float(min(certified)), "quantity": "certified_temperature",
                     "value": float(min(certified))})
        rows.append({"ratio": None, "temperature": None, "quantity": "margin_min",
                     "value": float(cx.margins(logits).min())})
    return rows


# ---------------------------------------------------------------- (c) positions and depth
def arch_fields(arch: str) -> dict:
    """ModelConfig fields of an architecture label: attention-only or with MLP, with or without residuals."""
    if arch not in ARCHS:
        raise ValueError(f"arch must be one of {ARCHS}; got {arch!r}")
    return {"mlp": "mlp" in arch, "residual": "res" in arch}


def layer_states(model, x: torch.Tensor) -> torch.Tensor:
    """Token states entering block 0 and leaving every block: `(layers + 1, batch, n, d_model)`, no grad."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            return model.layer_states(x)
    finally:
        model.train(was_training)


def depth_point(pos: str, arch: str, norm: str, n: int, depth: int, d_model: int, n_heads: int, vocab: int,
                batch: int, seed: int) -> list[dict]:
    """One randomly initialised model: per layer, Dong et al.'s relative residual of the token states and the
    mean (over batch and heads) attention rank under each measure. Layer 0 is the input to the first block."""
    model = build_model(vocab_size=vocab, task="features", d_model=d_model, n_heads=n_heads, n_layers=depth,
                        pos=pos, norm=norm, max_len=max(n, 16), seed=seeding.derive_seed(seed, "model"),
                        device="cpu", **arch_fields(arch))
    tokens = torch.randint(0, vocab, (batch, n), generator=seeding.torch_generator(seeding.derive_seed(seed, "x")))
    states = layer_states(model, tokens)  # (depth + 1, batch, n, d_model)
    residual = cx.collapse_residual(states)  # (depth + 1, batch)
    ranks = attention_ranks(model, tokens, measures=("hardmax", "numerical", "effective"))  # (depth, batch, heads)
    distinct = float(torch.tensor([len(set(row.tolist())) for row in tokens], dtype=torch.float64).mean())
    rows = []
    for layer in range(depth + 1):
        row = {"layer": layer, "residual": float(residual[layer].mean()), "distinct_tokens": distinct,
               "state_norm": float(states[layer].norm(dim=-1).mean())}
        if layer >= 1:
            row.update({f"rank_{m}": float(v[layer - 1].mean()) for m, v in ranks.items()})
        rows.append(row)
    return rows


# ---------------------------------------------------------------- (d) trained heads
def trained_point(task: str, n: int, steps: int, d_model: int, n_heads: int, n_layers: int, examples: int,
                  seed: int) -> list[dict]:
    """Train one small model on a synthetic task; every head's mean rank over `examples` test inputs at init and
    after training. Rows: stage ("init"/"trained"), layer, head, rank_<measure>, test_accuracy, causal."""
    data = load(task, n=n, seed=seed)
    model = build_model(d_model=d_model, n_heads=n_heads, n_layers=n_layers, seed=seed, device="cpu",
                        **data.model_fields())
    probe = data.test_x[:examples]
    measures = ("hardmax", "numerical", "effective")
    stages = {"init": attention_ranks(model, probe, measures=measures)}
    result = train(model, data, Recipe(steps=steps, batch_size=64, lr=3e-3), [seed], device="cpu", threads=1)
    stages["trained"] = attention_ranks(model, probe, measures=measures)
    accuracy = float(result.status.test_accuracy[0])
    length = probe.shape[-1]
    rows = []
    for stage, ranks in stages.items():
        for layer in range(n_layers):
            for head in range(n_heads):
                rows.append({"stage": stage, "layer": layer, "head": head, "length": length,
                             "causal": bool(data.causal), "test_accuracy": accuracy,
                             **{f"rank_{m}": float(ranks[m][layer, :, head].mean()) for m in measures}})
    return rows
