"""Training throughput (tokens/s) of our transformer, fast and explicit paths, vs torch.nn.TransformerEncoder.

Same size, batch and sequence length; post-LN, ReLU MLP, no dropout on both sides (TransformerEncoderLayer's
defaults apart from dropout); float inputs of width d_model. Our model runs whole (`helpers.forward`: the book's one
forward pass, which has no per-block module to call), so the reference gets the same input projection
(`nn.Linear(d_model, d_model)`) in front of its layer stack.
"""

import torch
from _common import header, interleaved, thread_count, threads, verdict
from torch import nn

from helpers.models import build_model

D_MODEL, N_HEADS, N_LAYERS, D_MLP = 128, 4, 2, 512
CASES = {64: 32, 256: 8}  # n -> batch
STEPS = 5


def ours(path):
    model = build_model(input_dim=D_MODEL, task="features", d_model=D_MODEL, n_heads=N_HEADS, n_layers=N_LAYERS,
                        d_mlp=D_MLP, norm="post", activation="relu", pos="none", seed=0, device="cpu")
    model.set_attention_path(path)
    return model                     # input projection, then the layer stack (no final norm: post-LN)


def reference():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(D_MODEL, N_HEADS, D_MLP, dropout=0.0, activation="relu", batch_first=True)
    layers = nn.TransformerEncoder(layer, N_LAYERS, enable_nested_tensor=False)
    return nn.Sequential(nn.Linear(D_MODEL, D_MODEL), layers)


def trainer(stack, x):
    optimizer = torch.optim.AdamW(stack.parameters(), lr=1e-4)

    def run():
        for _ in range(STEPS):
            loss = stack(x).square().mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()

    return run


if __name__ == "__main__":
    with threads(thread_count()):
        header("training throughput")
        worst = float("inf")
        for n, batch in CASES.items():
            x = torch.randn(batch, n, D_MODEL, generator=torch.Generator().manual_seed(n))
            t = interleaved({"fast": trainer(ours("fast"), x), "explicit": trainer(ours("explicit"), x),
                             "TransformerEncoder": trainer(reference(), x)}, repeats=3)
            tokens = STEPS * batch * n
            speed = {name: tokens / seconds for name, seconds in t.items()}
            print(f"  n={n}, batch={batch}: " + ", ".join(f"{k} {v:,.0f} tok/s" for k, v in speed.items()))
            ratio = speed["fast"] / speed["TransformerEncoder"]
            print(f"    fast / TransformerEncoder = {ratio:.2f}x, "
                  f"explicit / TransformerEncoder = {speed['explicit'] / speed['TransformerEncoder']:.2f}x")
            worst = min(worst, ratio)
        print(verdict("fast path vs TransformerEncoder (worst n)", worst, 0.9))
