"""Chapter 07's grid points: compress trained heads by truncating W_q W_k^T, with and without fine-tuning.

    rows = compression_point("shakespeare", 64, spec, seeds=[0, 1, 2], d_max=16, ranks=[1, 2, 4], finetune_ranks=[1, 4],
                             finetune_steps=200, finetune_lr=1e-3)
    rows = minilm_point(["bbc"], sentences=32, tokens=32, ranks=[1, 8, 32], seed=0)

**Truncation.** With the bias folded in (x~ = [x, 1]), a head's logits are `scale * x~_i^T M x~_j` with
`M = Wq~^T Wk~` ((d_model+1) x (d_model+1), rank <= d_qk). Its best rank-r approximation (Eckart-Young, by
SVD) is written back as factors of width r: `reduce_model` returns a standalone model with query/key width r
(value width unchanged) whose logits are exactly the truncated ones (the change of the `1/sqrt(d_qk)` scale is
folded into the query factor), so the truncated model is the same architecture as a model trained from scratch
at d_qk = r, and fine-tuning it keeps its rank at most r.

The chapter-06 models are read from their stored weights (`ch06_real_data_points.trained_model`, keyed by their
recipe), not retrained.
"""

import copy
import math
from dataclasses import replace

import numpy as np
import torch

from .. import minilm, rank, seeding
from ..models import Transformer, build_model
from ..threads import torch_threads
from ..training import Diverged, ModelStack, Recipe, evaluate, train
from .ch06_real_data_points import DomainSpec, batch_size, trained_model

ENERGY = 0.9          # the share of the squared singular values a rank must hold ("energy rank")
RTOL = 1e-3


# ---- the bilinear form of a head and its truncation ----

def head_factors(weight: torch.Tensor, bias, rows_q: slice, rows_k: slice) -> tuple[torch.Tensor, torch.Tensor]:
    """Query and key maps of one head with the bias folded in: `(d_qk, d_in + 1)` each, float64."""
    weight = weight.detach().double()
    bias = torch.zeros(weight.shape[0], dtype=torch.float64) if bias is None else bias.detach().double()
    q = torch.cat([weight[rows_q], bias[rows_q, None]], dim=1)
    k = torch.cat([weight[rows_k], bias[rows_k, None]], dim=1)
    return q, k


def head_rows(attn, head: int) -> tuple[slice, slice]:
    """Rows of head `head`'s query and key maps in a `helpers.models` attention's `qkv` layer."""
    h, d = attn.n_heads, attn.d_head
    return slice(head * d, (head + 1) * d), slice(h * d + head * d, h * d + (head + 1) * d)


def bilinear(attn, head: int) -> torch.Tensor:
    """`M = Q~^T K~`, `(d_model + 1, d_model + 1)` float64: the head's logits are `scale * x~_i^T M x~_j`."""
    q, k = head_factors(attn.qkv.weight, attn.qkv.bias, *head_rows(attn, head))
    return q.T @ k


def truncated_factors(matrix: torch.Tensor, r: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Factors `(r, m)` each whose product `Q^T K` is the best rank-r approximation of `matrix` `(m, m)`."""
    u, s, vh = torch.linalg.svd(matrix)
    root = s[:r].sqrt()
    return (u[:, :r] * root).T, (vh[:r].T * root).T


def energy_rank(sigma: torch.Tensor, share: float = ENERGY) -> torch.Tensor:
    """`rank.energy_rank_from_sigma` at this chapter's share `ENERGY`: `(..., k)` -> `(...)`."""
    return rank.energy_rank_from_sigma(sigma, share)


@torch.no_grad()
def reduce_model(model: Transformer, r: int) -> Transformer:
    """A standalone copy of `model` with every head's W_q W_k^T (bias folded in) cut to its best rank-r
    approximation, stored at query/key width r; at r >= d_qk a plain copy."""
    cfg = model.cfg
    if not isinstance(r, int) or r < 1:
        raise ValueError(f"r must be a positive integer; got {r!r}")
    if cfg.pos == "rope":
        raise ValueError("reduce_model needs position-free logits (not pos='rope')")
    if r >= cfg.head_dim:
        return copy.deepcopy(model)
    small = build_model(replace(cfg, d_head=r, d_value=cfg.value_dim), seed=0, device="cpu")
    factor = cfg.attn_scale / small.cfg.attn_scale  # keeps every logit: scale_old q.k = scale_new (factor q).k
    state = {k: v.clone() for k, v in model.state_dict().items()}
    for i, (big, little) in enumerate(zip(model.attentions, small.attentions)):
        h, d, dv = big.n_heads, big.d_head, big.d_value
        weight = torch.zeros_like(little.qkv.weight)
        bias = None if big.qkv.bias is None else torch.zeros_like(little.qkv.bias)
        for head in range(h):
            q, k = truncated_factors(bilinear(big, head), r)
            new_q, new_k = head_rows(little, head)
            weight[new_q], weight[new_k] = (factor * q[:, :-1]).float(), k[:, :-1].float()
            if bias is not None:
                bias[new_q], bias[new_k] = (factor * q[:, -1]).float(), k[:, -1].float()
        weight[2 * h * r:] = big.qkv.weight[2 * h * d:]  # the value rows, untouched
        state[f"blocks.{i}.attn.qkv.weight"] = weight
        if bias is not None:
            bias[2 * h * r:] = big.qkv.bias[2 * h * d:]
            state[f"blocks.{i}.attn.qkv.bias"] = bias
    small.load_state_dict(state)
    return small.eval()


def qk_parameters(model: Transformer) -> int:
    """Parameters of all query and key maps (weights and biases)."""
    return sum(attn.n_heads * 2 * attn.d_head * (attn.qkv.in_features + (attn.qkv.bias is not None))
               for attn in model.attentions)


# ---- chapter-06 models: truncation, then a short fine-tuning ----

def compression_point(domain: str, n: int, spec: dict, seeds: list[int], d_max: int, ranks: list,
                      finetune_ranks: list, finetune_steps: int, finetune_lr: float, seed: int = 0) -> list[dict]:
    """Per seed in `seeds` of the d_qk = `d_max` models of one chapter-06 setting (read by their recipe, trained only
    if missing), and per r in `ranks`: the test loss and
    accuracy with every head cut to rank r and no fine-tuning; for r in `finetune_ranks` also after
    `finetune_steps` steps of AdamW at `finetune_lr` (every model of the stack fine-tuned together, each with its
    own data order; r = d_max is the uncompressed control fine-tuned the same way)."""
    spec_obj = DomainSpec(**spec)
    with torch_threads(1):
        if not seeds:
            raise ValueError(f"no chapter-06 model with d_head = {d_max} in {domain}, n = {n}")
        loaded = [trained_model(domain, n, spec, d_max, s) for s in seeds]
        wide, data = [(s, model) for s, (model, _) in zip(seeds, loaded)], loaded[0][1]
        rows = []
        for s, model in wide:
            base = evaluate(model, data.test_x, data.test_y)
            for r in sorted(set(int(r) for r in ranks)):
                small = reduce_model(model, r)
                scores = evaluate(small, data.test_x, data.test_y)
                rows.append({"seed": s, "r": r, "stage": "truncated", "test_loss": scores["loss"],
                             "test_accuracy": scores["accuracy"], "base_loss": base["loss"],
                             "base_accuracy": base["accuracy"], "qk_params": qk_parameters(small),
                             "qk_params_full": qk_parameters(model), "steps": 0})
        tuned = [(s, r, reduce_model(model, r)) for s, model in wide for r in sorted(set(finetune_ranks) | {d_max})]
        stack = ModelStack([m for _, _, m in tuned])
        order_seeds = [seeding.derive_seed(s, "finetune", r) for s, r, _ in tuned]
        recipe = Recipe(steps=finetune_steps, batch_size=batch_size(domain, n, spec_obj), lr=finetune_lr,
                        warmup=max(1, finetune_steps // 10), eval_every=finetune_steps)
        try:
            status = train(stack, data, recipe, order_seeds, device="cpu", progress=False, threads=1).status
        except Diverged as error:
            status = error.result.status
        for (s, r, _), (_, st) in zip(tuned, status.iterrows()):
            base = next(row for row in rows if row["seed"] == s and row["stage"] == "truncated")
            rows.append({"seed": s, "r": r, "stage": "finetuned", "test_loss": float(st.test_loss),
                         "test_accuracy": float(st.test_accuracy), "base_loss": base["base_loss"],
                         "base_accuracy": base["base_accuracy"], "diverged": bool(st.diverged),
                         "steps": finetune_steps})
    return rows


# ---- all-MiniLM-L6-v2 ----

def _bert_heads(model):
    """(layer index, self-attention module) of the encoder; each has query/key Linear layers and head counts."""
    return [(i, layer.attention.self) for i, layer in enumerate(model.encoder.layer)]


def _bert_rows(attn, head: int) -> slice:
    d = attn.attention_head_size
    return slice(head * d, (head + 1) * d)


def _bert_form(attn, head: int) -> torch.Tensor:
    rows = _bert_rows(attn, head)
    q = torch.cat([attn.query.weight[rows].double(), attn.query.bias[rows, None].double()], dim=1)
    k = torch.cat([attn.key.weight[rows].double(), attn.key.bias[rows, None].double()], dim=1)
    return q.T @ k  # (d_model + 1, d_model + 1): logits are x~_i^T M x~_j / sqrt(d_h)


@torch.no_grad()
def embeddings(model, ids: torch.Tensor) -> torch.Tensor:
    """Sentence embeddings as all-MiniLM-L6-v2 makes them: the mean of the last hidden states, `(batch, d_model)`."""
    out = model(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state
    return out.mean(1)


@torch.no_grad()
def _truncate_bert(model, forms, r: int) -> None:
    """In place: every head's query/key rows replaced by the rank-r factors of its form (`forms[layer][head]`),
    zero-padded to the head width."""
    for (_, a), layer_forms in zip(_bert_heads(model), forms):
        for h, form in enumerate(layer_forms):
            q, k = truncated_factors(form, min(r, a.attention_head_size))
            rows_h = _bert_rows(a, h)
            width, start = q.shape[0], rows_h.start
            for linear, factor in ((a.query, q), (a.key, k)):
                linear.weight[rows_h] = 0
                linear.bias[rows_h] = 0
                linear.weight[start:start + width] = factor[:, :-1].to(linear.weight.dtype)
                linear.bias[start:start + width] = factor[:, -1].to(linear.bias.dtype)


def _rank_masks(model, r: int) -> dict:
    """Per query/key parameter, 1 on the rows of the first r dimensions of every head, 0 elsewhere."""
    masks = {}
    for _, a in _bert_heads(model):
        d = a.attention_head_size
        keep = (torch.arange(a.query.weight.shape[0]) % d < r).to(a.query.weight.dtype)
        for linear in (a.query, a.key):
            masks[linear.weight] = keep[:, None].expand_as(linear.weight).clone()
            masks[linear.bias] = keep.clone()
    return masks


def minilm_finetune(model, forms, r: int, train_ids, test_ids, steps: int, lr: float, seed: int = 0) -> dict:
    """A float32 copy of MiniLM truncated to rank r, distilled for `steps` full-batch Adam steps towards the
    uncompressed embeddings of `train_ids` (loss: 1 - mean cosine), with the query/key rows beyond r held at zero
    so the rank stays at most r; returns the cosine similarities on `test_ids` before and after. MiniLM's dropout is
    active while it trains, so its masks come from torch's global generator seeded with `seed` here (restored after):
    the result does not depend on what ran before in the process."""
    student = copy.deepcopy(model).float()
    _truncate_bert(student, forms, r)
    with torch.no_grad():
        target = embeddings(model, train_ids).float()
        reference = embeddings(model, test_ids).float()
        before = torch.nn.functional.cosine_similarity(embeddings(student, test_ids), reference, dim=-1)
    masks = _rank_masks(student, r)
    optimizer = torch.optim.Adam(student.parameters(), lr=lr)
    student.train()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for _ in range(steps):
            optimizer.zero_grad()
            out = student(input_ids=train_ids, attention_mask=torch.ones_like(train_ids)).last_hidden_state.mean(1)
            loss = 1 - torch.nn.functional.cosine_similarity(out, target, dim=-1).mean()
            loss.backward()
            for p, mask in masks.items():
                p.grad.mul_(mask)
            optimizer.step()
    student.eval()
    with torch.no_grad():
        after = torch.nn.functional.cosine_similarity(embeddings(student, test_ids), reference, dim=-1)
    return {"cosine_before": float(before.mean()), "cosine_after": float(after.mean()),
            "cosine_after_min": float(after.min())}


def minilm_point(corpora: list, sentences: int, tokens: int, ranks: list, finetune_ranks: list,
                 finetune_steps: int, finetune_sentences: int, finetune_lr: float, seed: int) -> list[dict]:
    """MiniLM with every head's W_q W_k^T cut to rank r: cosine similarity of the sentence embeddings of
    `sentences` snippets of `tokens` tokens per corpus to the uncompressed model's, with no fine-tuning (kind
    "compression") and, for r in `finetune_ranks`, after `minilm_finetune` on `finetune_sentences` other snippets
    per corpus (kind "finetuned"); and per head the energy ranks (`ENERGY`) of W_q W_k^T and of the logits Q K^T on
    the snippets, beside the hardmax and numerical ranks of its attention (kind "head")."""
    model = minilm.load_model("pretrained")

    def snippets(count, role):
        return torch.cat([minilm.token_windows(c, tokens, count, seeding.derive_seed(seed, "ch7", role, c))[0]
                          for c in corpora])  # (corpora * count, tokens)

    ids, train_ids = snippets(sentences, "test"), snippets(finetune_sentences, "train")
    rows = []
    with torch_threads(1), torch.no_grad():
        base = embeddings(model, ids)
        heads = _bert_heads(model)
        saved = [(a.query.weight.clone(), a.query.bias.clone(), a.key.weight.clone(), a.key.bias.clone())
                 for _, a in heads]
        forms = [[_bert_form(a, h) for h in range(a.num_attention_heads)] for _, a in heads]
        try:
            for r in sorted(set(int(r) for r in ranks)):
                _truncate_bert(model, forms, r)
                cos = torch.nn.functional.cosine_similarity(embeddings(model, ids), base, dim=-1)  # (sentences,)
                rows.append({"kind": "compression", "r": r, "cosine_mean": float(cos.mean()),
                             "cosine_min": float(cos.min()), "cosine_sd": float(cos.std()), "sentences": len(ids)})
        finally:
            for (_, a), (qw, qb, kw, kb) in zip(heads, saved):
                a.query.weight.copy_(qw), a.query.bias.copy_(qb), a.key.weight.copy_(kw), a.key.bias.copy_(kb)
        rows += _minilm_head_rows(model, ids, forms)
    with torch_threads(1), torch.enable_grad():
        for r in sorted(set(int(r) for r in finetune_ranks)):
            rows.append({"kind": "finetuned", "r": r, "steps": finetune_steps, "train_sentences": len(train_ids),
                         **minilm_finetune(model, forms, r, train_ids, ids, finetune_steps, finetune_lr,
                                          seeding.derive_seed(seed, "ch7", "dropout", r))})
    return rows


def _minilm_head_rows(model, ids: torch.Tensor, forms) -> list[dict]:
    captured = {}
    hooks = []
    for i, a in _bert_heads(model):
        hooks.append(a.query.register_forward_hook(lambda mod, inp, out, i=i: captured.__setitem__(("q", i), out)))
        hooks.append(a.key.register_forward_hook(lambda mod, inp, out, i=i: captured.__setitem__(("k", i), out)))
    try:
        out = model(input_ids=ids, attention_mask=torch.ones_like(ids), output_attentions=True)
    finally:
        for hook in hooks:
            hook.remove()
    rows = []
    for i, a in _bert_heads(model):
        probs = out.attentions[i].double()  # (batch, head, n, n)
        measures = rank.measures(probs, ("hardmax", "numerical"), (RTOL,))  # label -> (batch, head)
        for h in range(a.num_attention_heads):
            rows_h = _bert_rows(a, h)
            q = captured[("q", i)][..., rows_h].double()  # (batch, n, d_h), bias included
            k = captured[("k", i)][..., rows_h].double()
            logits = q @ k.transpose(-1, -2)              # (batch, n, n): Q K^T (the 1/sqrt(d_h) does not change ranks)
            form_sigma = torch.linalg.svdvals(forms[i][h])
            rows.append({"kind": "head", "layer": i + 1, "head": h + 1,
                         "energy_rank_logits": float(energy_rank(torch.linalg.svdvals(logits)).double().mean()),
                         "energy_rank_weights": int(energy_rank(form_sigma)),
                         "weights_rank": int(rank.numerical_rank_from_sigma(form_sigma, rtol=RTOL)),
                         "hardmax": float(measures["hardmax"][:, h].mean()),
                         "numerical@1e-03": float(measures[rank.label("numerical", RTOL)][:, h].mean()),
                         "n": int(ids.shape[1]), "d_head": a.attention_head_size})
    return rows
