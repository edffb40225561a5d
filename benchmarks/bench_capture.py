"""Overhead of helpers.capture during an eval forward pass, storing probabilities or measuring ranks on the fly."""

import torch
from _common import header, interleaved, thread_count, threads

from helpers.capture import capture
from helpers.models import build_model

if __name__ == "__main__":
    with threads(thread_count()):
        header("capture overhead")
        for n, batch in ((64, 32), (256, 8)):
            model = build_model(vocab_size=64, d_model=128, n_heads=4, n_layers=2, seed=0, device="cpu").eval()
            x = torch.randint(0, 64, (batch, n), generator=torch.Generator().manual_seed(0))

            def plain():
                with torch.no_grad():
                    model(x)

            def stored():
                with torch.no_grad(), capture(model):
                    model(x)

            def hardmax():
                with torch.no_grad(), capture(model, measures=("hardmax",)):
                    model(x)

            def explicit():
                model.set_attention_path("explicit")
                try:
                    with torch.no_grad():
                        model(x)
                finally:
                    model.set_attention_path("fast")

            t = interleaved({"plain": plain, "explicit": explicit, "capture": stored, "hardmax": hardmax}, repeats=5)
            print(f"  n={n}, batch={batch}: forward {t['plain'] * 1e3:.1f} ms; explicit path "
                  f"{t['explicit'] / t['plain']:.2f}x; capture (store) {t['capture'] / t['plain']:.2f}x; "
                  f"capture (hardmax rank on the fly) {t['hardmax'] / t['plain']:.2f}x")
