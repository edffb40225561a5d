"""The chapter-5 tasks with a known attention need: the solving pattern reproduces every target, and its
hardmax rank matches a brute-force count (helpers.data.solving_pattern, pattern_hardmax_rank)."""

import pytest
import torch

from helpers import data
from helpers.errors import ArgumentError

OPTIONS = {"qsa": [{}, {"q": 1}, {"q": 3, "n_values": 3}, {"n_sets": 3}], "high_rank": [{}, {"rank": 4}]}


def cases():
    for task in data.PATTERN_TASKS:
        for options in OPTIONS.get(task, [{}]):
            for n in (7, 8, 13, 16):
                yield task, n, options


def readout(d, x):
    """What each position contributes when attended: the quantity whose pattern-weighted sum is the target."""
    n = x.shape[1]
    if d.name == "mq_recall":
        return x % d.info["n_values"]
    if d.name == "lookup":
        return torch.arange(n).expand_as(x)
    if d.name == "qsa":
        return x * d.info["q"]
    return x


def brute_force_hardmax_rank(pattern, targets):
    """Distinct argmax keys over the target rows, ties to the lowest key, by explicit loops."""
    chosen = set()
    for i in range(pattern.shape[0]):
        if targets[i]:
            row = pattern[i].tolist()
            chosen.add(row.index(max(row)))
    return len(chosen)


@pytest.mark.parametrize("task, n, options", list(cases()))
def test_the_solving_pattern_reproduces_every_target(task, n, options):
    d = data.load(task, n, seed=3, n_train=16, n_test=40, **options)
    pattern = data.solving_pattern(d)                                  # (N, n, n)
    values = readout(d, d.test_x).double()
    for example in range(len(d.test_x)):
        for i in range(n):
            target = int(d.test_y[example, i])
            weights = pattern[example, i]
            if target == data.IGNORE:
                assert weights.sum() == 0
                continue
            assert weights.sum() == pytest.approx(1.0)
            assert (weights >= 0).all()
            assert float(weights.double() @ values[example]) == pytest.approx(target), (task, example, i)


@pytest.mark.parametrize("task, n, options", list(cases()))
def test_the_closed_form_hardmax_rank_matches_brute_force(task, n, options):
    d = data.load(task, n, seed=1, n_train=8, n_test=6, **options)
    pattern = data.solving_pattern(d)
    closed = data.pattern_hardmax_rank(task, n, **options)
    for example in range(len(d.test_x)):
        assert brute_force_hardmax_rank(pattern[example], d.test_y[example] != data.IGNORE) == closed


def test_known_ranks():
    assert data.pattern_hardmax_rank("copy", 16) == 8
    assert data.pattern_hardmax_rank("mq_recall", 17) == 8
    assert data.pattern_hardmax_rank("reversal", 9) == 9
    # qsa's sets are drawn independently, so two sets may share their first position: only a bound in general
    assert 1 <= data.pattern_hardmax_rank("qsa", 64, q=2) <= 32
    assert data.pattern_hardmax_rank("qsa", 64, q=2, n_sets=1) == 1


def test_new_tasks_are_well_formed():
    rec = data.load("mq_recall", 12, n_train=50)
    m = 6
    for x, y in zip(rec.train_x, rec.train_y):
        keys = (x[:m] // rec.info["n_values"]).tolist()
        assert sorted(keys) == list(range(m))                       # every key once
        asked = (x[m:] - m * rec.info["n_values"]).tolist()
        assert len(set(asked)) == len(asked)                        # each asked once
        assert torch.all(y[:m] == data.IGNORE)
    qsa = data.load("qsa", 12, n_train=20, q=2)
    sets = qsa.info["sets"]
    assert sets.shape == (6, 2) and all(len(set(row.tolist())) == 2 for row in sets)
    assert torch.equal(sets, data.qsa_sets(12, 2)) and not torch.equal(sets, data.qsa_sets(12, 2, pattern_seed=1))
    assert qsa.train_y[qsa.train_y != data.IGNORE].max() <= 2 * (qsa.info["n_values"] - 1)
    assert qsa.train_x.max() < qsa.vocab_size and rec.train_x.max() < rec.vocab_size


def test_bad_options_are_refused():
    with pytest.raises(ArgumentError, match="q"):
        data.load("qsa", 8, q=5)
    with pytest.raises(ArgumentError, match="name"):
        data.pattern_hardmax_rank("sorting", 8)
    with pytest.raises(ArgumentError, match="data.name"):
        data.solving_pattern(data.load("sorting", 8, n_train=2, n_test=2))
