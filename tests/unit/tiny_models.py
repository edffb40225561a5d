"""Tiny decoder models built by the tests (nothing is downloaded)."""

import torch

from helpers import decoder

transformers = decoder._offline_transformers()


def tiny_llama(seed: int = 0, dtype=torch.float64, vocab: int = 50):
    """2 layers, 6 query heads sharing 2 key/value heads (GQA), d_h = 8, RoPE; weights N(0, 0.3) so that heads are sharp."""
    cfg = transformers.LlamaConfig(vocab_size=vocab, hidden_size=48, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=6, num_key_value_heads=2, head_dim=8,
                                   max_position_embeddings=128, attn_implementation="eager")
    torch.manual_seed(seed)
    model = transformers.LlamaForCausalLM(cfg).to(dtype).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim == 2:
                p.normal_(0, 0.3)
    return model
