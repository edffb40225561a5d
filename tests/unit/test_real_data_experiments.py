"""Chapter 06's experiment code: saturation points, the weight store, and one tiny trained point."""

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from helpers.parameters import ParameterError
from helpers.experiments import ch06_real_data as rd

TINY = replace(rd.TrainSpec.for_mode("quick"), steps=6, tokens_per_step=128, test_tokens=256, probe_tokens=64,
               d_model=16)


def test_saturation_point_of_known_curves():
    d = [1, 2, 4, 8, 16]
    assert rd.saturation_point(d, [0, 10, 10, 10, 10]) == pytest.approx(2 ** 0.95)
    assert rd.saturation_point(d, [0, 1, 2, 3, 4]) == pytest.approx(2 ** (3 + 0.8))
    assert math.isnan(rd.saturation_point(d, [5, 4, 3, 2, 1]))  # no rise
    assert math.isnan(rd.saturation_point(d, [1, 1, 1, 1, 1]))
    assert rd.saturation_point([16, 1, 4], [3, 0, 3]) == pytest.approx(4 ** 0.95)  # unsorted input


def test_image_n_and_text_n_are_checked():
    rd.check_n("mnist", 49)
    with pytest.raises(ParameterError, match="16, 49 or 196"):
        rd.check_n("digits", 50)
    with pytest.raises(ParameterError, match="from 8 to 1024"):
        rd.check_n("shakespeare", 4)
    with pytest.raises(ParameterError, match="domain"):
        rd.domain_kind("cifar")


def test_every_n_sees_the_same_tokens_per_step():
    spec = rd.TrainSpec()
    assert rd.batch_size("shakespeare", 64, spec) * 64 == spec.tokens_per_step
    assert rd.batch_size("shakespeare", 512, spec) * 512 == spec.tokens_per_step
    assert rd.batch_size("mnist", 196, spec) == spec.min_batch


def test_weights_round_trip_through_npz(tmp_path):
    from helpers.models import build_model

    model = build_model(d_model=8, n_heads=2, d_head=3, vocab_size=5, max_len=16, seed=1, device="cpu")
    path = rd.save_weights(model, tmp_path / "w.npz")
    other = rd.load_weights(build_model(model.cfg, seed=2, device="cpu"), path)
    x = torch.randint(0, 5, (2, 7))
    assert torch.equal(model(x), other(x))
    assert not list(tmp_path.glob("*.tmp"))
    with np.load(path, allow_pickle=False) as arrays:  # plain arrays, no pickle
        assert set(arrays.files) == set(model.state_dict())


def test_train_point_rows_and_reuse_of_weights(tmp_path, monkeypatch):
    monkeypatch.setenv("HELPERS_CACHE_DIR", str(tmp_path))
    spec = TINY.as_config()
    rows = rd.train_point("shakespeare", 16, 2, spec, seed=0)
    assert {(r["stage"], r["layer"]) for r in rows} == {(s, l) for s in ("init", "trained") for l in range(2)}
    for row in rows:
        assert 1 <= row["hardmax"] <= 16 and 1 <= row["effective"] <= 16 and row["numerical"] <= 16
        assert row["causal"] and row["bits_per_token"] == pytest.approx(row["test_loss"] / math.log(2))
    assert rd.weights_path("shakespeare", 16, 2, spec, 0).exists()
    model, data = rd.trained_model("shakespeare", 16, 2, spec, 0)  # loaded from the .npz, not retrained
    assert rd.performance(model, data)["test_loss"] == pytest.approx(rows[0]["test_loss"], abs=1e-6)


def test_summary_places_saturation_per_domain_and_n():
    import pandas as pd

    rows = []
    for d, rank_value, loss in [(1, 2.0, 3.0), (2, 6.0, 2.5), (4, 8.0, 2.4), (8, 8.0, 2.4)]:
        for seed in (0, 1):
            rows.append({"domain": "shakespeare", "n": 64, "d_head": d, "seed": seed, "stage": "trained", "layer": 0,
                         "hardmax": rank_value, "numerical": rank_value, "effective": rank_value,
                         "test_loss": loss, "test_accuracy": 1 / loss, "bits_per_token": loss, "params": 10 * d})
    df = pd.DataFrame(rows)
    for m in rd.MEASURES:
        df[f"{m}_over_n"] = df[m] / df.n
    (row,) = rd.summary(df)
    assert row["saturation_effective"] == pytest.approx(rd.saturation_point([1, 2, 4, 8], [2, 6, 8, 8]))
    assert row["effective_over_n_at_max"] == pytest.approx(8 / 64)
    assert row["loss_gain"] == pytest.approx(0.6)
    assert "moves" not in rd.saturation_trend([row], "saturation_loss")  # one n only
