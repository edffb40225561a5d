"""Chapter 10's analysis run through MODEL_PATH on a tiny GQA Llama saved by the test, and its verdict rules on
constructed inputs (each outcome, and a window whose removal flips the growth verdict)."""

import math

import pandas as pd
import pytest
import torch

from helpers import decoder, parameters
from helpers.experiments import ch10_decoder_llm as chapter

from tiny_models import tiny_llama

VOCAB = 49152   # SmolLM2's tokenizer, saved beside the tiny model


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny_llama")
    model = tiny_llama(dtype=torch.float32, vocab=VOCAB)
    model.config.max_position_embeddings = 128
    model.save_pretrained(folder)
    decoder.load_tokenizer().save_pretrained(folder)
    return str(folder)


def _params(path, **over):
    P = parameters.validate(MODE=("quick", parameters.mode), SEED=(0, parameters.seed),
                            MODEL_PATH=(path, decoder.check_model_path))
    values = dict(CORPORA=["shakespeare"], N_VALUES=[16, 32, 64], WINDOWS=1, RANDOM_WINDOWS=1, SVD_EVERY=1,
                  RANKS=[2, 4], COMPRESSION_WINDOWS=2, COMPRESSION_N_MIN=32, CALIBRATION=1, TOLERANCES=None)
    values.update(over)
    for key, value in values.items():
        P[key] = value
    return P


def test_analysis_runs_on_a_readers_own_model(tiny_folder, tmp_path, monkeypatch):
    monkeypatch.setenv("HELPERS_CACHE_DIR", str(tmp_path / "cache"))
    P = chapter.resolve(_params(tiny_folder))
    result = chapter.analyse(P)
    facts = result.data["facts"]
    assert (facts["layers"], facts["heads"], facts["kv_heads"], facts["d_head"]) == (2, 6, 2, 8)
    heads = result.data["heads"]
    # every head of every layer at every n, for the pretrained weights and the random control
    assert len(heads) == 2 * 2 * 6 * 3
    assert (heads.hardmax >= 1).all() and (heads.hardmax <= heads.n).all()
    sampled = heads.dropna(subset=["energy"])
    assert len(sampled) == 2 * 2 * 2 * 3, "the first head of each key/value group, every layer (SVD_EVERY = 1)"
    # a random tiny model has not learned Shakespeare: the quality verdict says so
    assert result.verdicts["ch10_quality"].outcome == "not_learned"
    increase = result.data["perplexity_increase"]
    assert list(increase.columns) == [2, 4, 8] and list(increase.index) == [32, 64]
    assert (increase[8] == 0).all(), "r = d_h is the uncut model"
    assert set(result.verdicts) >= {"ch10_barrier", "ch10_growth_1pct", "ch10_growth_5pct"}


def test_bad_parameters_are_refused_before_any_work(tiny_folder):
    with pytest.raises(parameters.ParameterError, match="RANKS"):
        chapter.resolve(_params(tiny_folder, RANKS=[2, 8]))          # r = d_h = 8 is the uncut model
    with pytest.raises(parameters.ParameterError, match="N_VALUES"):
        chapter.resolve(_params(tiny_folder, N_VALUES=[64, 256]))    # the tiny model has 128 positions
    with pytest.raises(parameters.ParameterError, match="COMPRESSION_N_MIN"):
        chapter.resolve(_params(tiny_folder, COMPRESSION_N_MIN=128))


# ---------------------------------------------------------------------------------------------- verdict rules
def test_quality_and_barrier_verdicts():
    good = pd.DataFrame({"loss": [3.0, 2.9], "bigram": [5.0, 4.8], "unigram": [7.0, 7.0]})
    assert chapter.quality_verdict(good).outcome == "learned"
    bad = good.assign(loss=[3.0, 5.1])
    verdict = chapter.quality_verdict(bad)
    assert verdict.outcome == "not_learned" and "1 of 2" in verdict.sentence
    assert chapter.barrier_verdict(0, 10).outcome == "holds"
    assert chapter.barrier_verdict(3, 10).outcome == "fails"


def _compression(losses: dict, uncut: float = 3.0):
    """A constructed compression table: losses {(window, n): [loss at r = 2, 4]} and the uncut loss for all."""
    rows, base = [], []
    for (window, n), values in losses.items():
        rows += [{"key": window, "n": n, "r": r, "loss": loss} for r, loss in zip([2, 4], values)]
        base.append({"key": window, "n": n, "loss": uncut})
    return pd.DataFrame(rows), pd.DataFrame(base)


def test_smallest_rank_reads_the_ranks_tried():
    # within 1 %: loss <= 3 + ln 1.01 = 3.00995
    assert chapter.smallest_rank([2, 4, 8], [3.5, 3.005, 3.0], 3.0, 0.01) == 4
    assert chapter.smallest_rank([2, 4, 8], [3.001, 3.0, 3.0], 3.0, 0.01) == 2
    assert chapter.smallest_rank([2, 4, 8], [3.5, 3.2, 3.0], 3.0, 0.01) == 8


def test_growth_verdict_decided_and_flipped_by_one_window():
    grows = {("a", 32): [3.001, 3.0], ("a", 64): [3.5, 3.001],
             ("b", 32): [3.001, 3.0], ("b", 64): [3.5, 3.001],
             ("c", 32): [3.001, 3.0], ("c", 64): [3.5, 3.001]}
    comp, base = _compression(grows)
    verdict = chapter.growth_verdict(comp, base, 8, 0.01)
    assert verdict.outcome == "grows", verdict.sentence
    # window c alone makes n = 64 need r = 4 on the pooled mean; without it the mean at r = 2 passes
    fragile = {("a", 32): [3.001, 3.0], ("a", 64): [3.001, 3.0],
               ("b", 32): [3.001, 3.0], ("b", 64): [3.001, 3.0],
               ("c", 32): [3.001, 3.0], ("c", 64): [3.06, 3.0]}
    comp, base = _compression(fragile)
    assert chapter.needed_ranks(comp, base, 8, 0.01) == {32: 2, 64: 4}
    verdict = chapter.growth_verdict(comp, base, 8, 0.01)
    assert verdict.outcome == "untestable" and "c left out" in verdict.sentence
    flat = {(w, n): [3.001, 3.0] for w in "ab" for n in (32, 64)}
    comp, base = _compression(flat)
    assert chapter.growth_verdict(comp, base, 8, 0.01).outcome == "flat"
    assert math.isnan(chapter.smallest_rank([2, 4], [4.0, 4.0], 3.0, 0.01))


def test_needs_at_the_top_of_the_grid_are_untestable_for_growth_and_fail_redundancy():
    # no rank below d_h = 8 passes at any n: the grid cannot show growth, and ceil(log2 n) (3 and 4) is not enough
    top = {(w, n): [3.5, 3.2] for w in "abc" for n in (8, 16)}
    comp, base = _compression(top)
    growth = chapter.growth_verdict(comp, base, 8, 0.05)
    assert growth.outcome == "untestable" and "no rank below the head dimension dₕ = 8" in growth.sentence
    redundancy = chapter.redundancy_verdict(comp, base, 8, 0.05)
    assert redundancy.outcome == "fails" and "5 to 8 at every n from 8 to 16" in redundancy.sentence
    # the sentence names its subject, for the chapter's "in this model ..." and the ledger's row
    assert redundancy.sentence.startswith("the heads cannot be cut to about log n: ")
    assert chapter.needed_text({8: 8, 16: 4}, [2, 4, 8]) == "5 to 8 at n = 8, 3 to 4 at n = 16"


def test_redundancy_holds_when_log2_n_suffices_and_is_untestable_when_a_window_decides():
    enough = {(w, n): [3.0, 3.0] for w in "abc" for n in (8, 16)}       # r = 2 passes, ceil(log2 n) = 3 and 4
    comp, base = _compression(enough)
    holds = chapter.redundancy_verdict(comp, base, 8, 0.05)
    assert holds.outcome == "holds" and holds.sentence.startswith("the heads can be cut to about log n: ")
    # at n = 8 the pooled loss at r = 2 passes (3.047 <= 3 + ln 1.05 = 3.0488) only thanks to window a or b: leave
    # one out and r = 2 fails, so the answer becomes 3 to 4, which straddles ceil(log2 8) = 3
    fragile = {**enough, ("c", 8): [3.14, 3.0]}
    comp, base = _compression(fragile)
    verdict = chapter.redundancy_verdict(comp, base, 8, 0.05)
    assert verdict.outcome == "untestable" and "a left out" in verdict.sentence, verdict.sentence


def test_a_bracket_that_reaches_down_to_log2_n_is_not_a_failure():
    # n = 8: r = 2 fails and r = 4 passes, so the needed rank is "3 to 4" (3 was never tried) against ceil(log2 8) = 3
    straddle = {**{(w, 8): [3.14, 3.0] for w in "abc"}, **{(w, 16): [3.5, 3.2] for w in "abc"}}
    comp, base = _compression(straddle)
    verdict = chapter.redundancy_verdict(comp, base, 8, 0.05)
    assert verdict.outcome == "untestable" and "straddle" in verdict.sentence, verdict.sentence


def test_scale_growth_verdict_is_decided_only_when_every_window_agrees():
    import numpy as np

    n = np.array([64, 256, 1024, 4096])
    rows = [{"key": key, "n": int(m), "logit_scale": slope * np.log(m)} for key, slope in (("a", 2.0), ("b", 3.0))
            for m in n]
    heads = pd.DataFrame(rows)
    assert chapter.scale_slopes(heads) == pytest.approx([2.0, 3.0])
    assert chapter.scale_growth_verdict(heads).outcome == "faster"
    assert chapter.scale_growth_verdict(heads.assign(logit_scale=heads.logit_scale / 4)).outcome == "slower"
    mixed = heads.assign(logit_scale=heads.logit_scale * np.where(heads.key == "a", 0.25, 1.0))   # slopes 0.5 and 3
    assert chapter.scale_growth_verdict(mixed).outcome == "untestable"
