"""helpers.training: one trainer for a stack of models; each model trains as if alone (checked against an
independent plain-torch loop), with per-model clipping and stopping, and stopped models leave the stack."""

import copy
import math
from dataclasses import replace

import pytest
import torch

from helpers import data
from helpers.errors import ArgumentError
from helpers.experiments import run_stacked_sweep, stack_configs
from helpers.models import ModelConfig, build_model, uniform_attention
from helpers.training import (BatchOrder, Diverged, ModelStack, Recipe, StackedAdamW, bucket_head_dims,
                              clip_per_model, cut_stack, stack_limit, evaluate, lr_factor, qk_work_offset, should_stop, stack_weights_path,
                              train)

pytestmark = pytest.mark.usefixtures("one_thread")

MEMBERS = [(d, s) for d in (1, 3, 8, 16) for s in (0, 1)]
# Float64 comparisons of two computations of the same training that differ only in rounding (padding, summation
# order): a difference starts at a few units of 2^-53 = 1.1e-16 per operation and grows through the steps. In
# float32 (2^-24 = 6e-8) the same comparison after 20 steps measured up to 1.1e-5 relative, an amplification of
# about 200; in float64 that amplification gives about 2e-14. The bound leaves five orders of magnitude on any CPU.
FLOAT64_BOUND = 1e-9


def fit(models, data, seeds, compact=True, **knobs):
    """`train` with a recipe of these knobs (progress hidden)."""
    return train(models, data, Recipe(**knobs), seeds, compact=compact)


@pytest.fixture(scope="module")
def copy_data():
    return data.load("copy", 12, n_train=256, n_test=32)


def configs(d, dims, **options):
    fields = dict(d_model=32, n_heads=2, n_layers=2, d_value=8, **d.model_fields())
    return [ModelConfig(d_head=dh, **{**fields, **options}) for dh in dims]


def key_rows(model):
    h, d = model.cfg.n_heads, model.cfg.head_dim
    return slice(h * d, 2 * h * d)


def relative_errors(model, state):
    """Relative error (norm) of every parameter tensor of `model` against `state`, key biases apart.

    The key biases are compared through the outputs only: softmax ignores a shift shared by all keys, so their
    gradient is zero in exact arithmetic and Adam turns its rounding noise into +-lr steps; they change nothing
    the model computes.
    """
    out = {}
    for name, value in model.state_dict().items():
        other = state[name].to(value.dtype)
        if name.endswith("qkv.bias"):
            keep = torch.ones(len(value), dtype=torch.bool)
            keep[key_rows(model)] = False
            value, other = value[keep], other[keep]
        out[name] = ((other - value).norm() / value.norm()).item()
    return out


def reference_training(model, d, recipe: Recipe, seed: int):
    """An independent plain-torch loop for one model: torch's AdamW (decay on matrices), clip_grad_norm_, the
    warm-up and cosine factor by hand, batches from `BatchOrder(seed)`; no stopping rule, no evaluation."""
    decay = [p for p in model.parameters() if p.ndim >= 2]
    rest = [p for p in model.parameters() if p.ndim < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": recipe.weight_decay},
                                   {"params": rest, "weight_decay": 0.0}], lr=recipe.lr)
    order = BatchOrder(len(d.train_x), seed)
    model.train()
    for step in range(recipe.steps):
        warm = recipe.warmup_steps
        if step < warm:
            factor = (step + 1) / warm
        else:
            factor = 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warm) / max(1, recipe.steps - warm))))
        for group in optimizer.param_groups:
            group["lr"] = recipe.lr * factor
        index = order.next(recipe.batch_size)
        logits = model(d.train_x[index])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), d.train_y[index].reshape(-1),
                                                 ignore_index=data.IGNORE)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), recipe.clip)
        optimizer.step()
    return model


def test_a_model_trains_as_an_independent_plain_torch_loop_would(copy_data):
    """One model, float64: the trainer (a stack of one) against `reference_training`, 20 steps."""
    recipe = Recipe(steps=20, batch_size=16, lr=3e-3, eval_every=0)
    ours = build_model(configs(copy_data, [3])[0], seed=4).double()
    theirs = copy.deepcopy(ours)
    train(ours, copy_data, recipe, [9])
    reference_training(theirs, copy_data, recipe, 9)
    errors = relative_errors(ours, theirs.state_dict())
    assert max(errors.values()) < FLOAT64_BOUND, max(errors.items(), key=lambda kv: kv[1])
    moved = relative_errors(ours, build_model(configs(copy_data, [3])[0], seed=4).double().state_dict())
    assert min(moved.values()) > 1e-4  # every tensor trained


def test_a_padded_stack_trains_each_model_as_if_alone(copy_data):
    """Query/key widths 1, 3, 8, 16 (padded to 16) and two seeds, float64: each model's parameters after 20 steps
    equal those it gets trained alone (a stack of one, no padding)."""
    cfgs = configs(copy_data, [d for d, _ in MEMBERS])
    seeds = [s for _, s in MEMBERS]
    models = [build_model(c, seed=s).double() for c, s in zip(cfgs, seeds)]
    stack = ModelStack(models)
    knobs = dict(steps=20, batch_size=16, lr=3e-3, eval_every=0)
    fit(stack, copy_data, seeds, **knobs)
    x = copy_data.test_x[:8]
    for i, (model, seed) in enumerate(zip(models, seeds)):
        fit(model, copy_data, [seed], **knobs)
        errors = relative_errors(model, stack.state_dict(i))
        assert max(errors.values()) < FLOAT64_BOUND, (MEMBERS[i], max(errors.items(), key=lambda kv: kv[1]))
        alone = model.eval()(x)
        split = stack.models()[i](x)
        assert ((split - alone).norm() / alone.norm()).item() < FLOAT64_BOUND
    padded = stack.params["blocks.0.attn.qkv.weight"]
    assert padded.shape[1] == 2 * (2 * 16 + 8)  # heads x (2 x largest d_head + d_value)
    assert (padded[0][stack.masks["blocks.0.attn.qkv.weight"][0] == 0] == 0).all()  # padding stayed zero
    assert (stack.masks["blocks.0.attn.qkv.weight"][0] == 0).sum() == 2 * 2 * (16 - 1) * 32


def test_rotary_stack_with_mixed_widths_trains_like_its_models(copy_data):
    cfgs = configs(copy_data, [2, 6], pos="rope")
    models = [build_model(c, seed=s).double() for c, s in zip(cfgs, (0, 1))]
    stack = ModelStack(models)
    options = dict(steps=10, batch_size=16, eval_every=0)
    fit(stack, copy_data, [0, 1], **options)
    for i, model in enumerate(models):
        fit(model, copy_data, [i], **options)
        assert max(relative_errors(model, stack.state_dict(i)).values()) < FLOAT64_BOUND


VARIANTS = [dict(), dict(norm="post", pos="learned", activation="relu"), dict(mlp=False, norm="none", bias=False),
            dict(scale=0.7, causal=False), dict(task="features")]


@pytest.mark.parametrize("options", VARIANTS, ids=str)
def test_stacked_forward_is_each_model(copy_data, options):
    models = [build_model(c, seed=i) for i, c in enumerate(configs(copy_data, [2, 5], **options))]
    x = copy_data.test_x[:3]
    for path in ("fast", "explicit"):
        out = ModelStack(models, attention=path)(torch.stack([x, x.flip(0)]))
        assert torch.allclose(out[0], models[0](x), atol=1e-5)
        assert torch.allclose(out[1], models[1](x.flip(0)), atol=1e-5)


def test_models_with_their_own_logit_scales_stack_and_train_as_if_alone(copy_data):
    # the scalable softmax of chapter 05 gives every width its own scale, s ln n / sqrt(d_head)
    cfgs = [replace(c, scale=s) for c, s in zip(configs(copy_data, [2, 6]), (0.4, 2.5))]
    models = [build_model(c, seed=s).double() for c, s in zip(cfgs, (0, 1))]
    stack = ModelStack(models)
    x = copy_data.test_x[:3]
    out = stack(torch.stack([x, x]))
    for i, model in enumerate(models):
        assert torch.allclose(out[i], model(x), rtol=FLOAT64_BOUND, atol=FLOAT64_BOUND)
    options = dict(steps=10, batch_size=16, eval_every=0)
    fit(stack, copy_data, [0, 1], **options)
    for i, model in enumerate(models):
        fit(model, copy_data, [i], **options)
        assert max(relative_errors(model, stack.state_dict(i)).values()) < FLOAT64_BOUND


def test_image_and_rope_stacks_and_split():
    d = data.load("digits", 16, n_train=32, n_test=16)
    fields = dict(d_model=16, n_heads=2, n_layers=1, d_value=4, **d.model_fields())
    models = [build_model(ModelConfig(d_head=dh, pos=pos, **fields), seed=1) for dh, pos in ((2, "none"), (6, "none"))]
    out = ModelStack(models)(d.test_x[:4].expand(2, *d.test_x[:4].shape))
    assert torch.allclose(out[1], models[1](d.test_x[:4]), atol=1e-5)
    rope = [build_model(ModelConfig(d_head=dh, pos="rope", **fields), seed=s) for dh, s in ((2, 0), (6, 1), (4, 2))]
    out = ModelStack(rope)(d.test_x[:4].expand(3, *d.test_x[:4].shape))
    for i in range(3):  # rotary positions with mixed d_head: each model keeps its own frequencies
        assert torch.allclose(out[i], rope[i](d.test_x[:4]), atol=1e-5)
    split = ModelStack(models).models()
    assert [m.cfg for m in split] == [m.cfg for m in models]
    for a, b in zip(split, models):
        assert all(torch.equal(a.state_dict()[k], v) for k, v in b.state_dict().items())


def test_clipping_is_per_model():
    d = data.load("reversal", 6, n_train=16, n_test=4)
    stack = ModelStack.build(configs(d, [4, 4]), seeds=[0, 1])
    reference = build_model(configs(d, [4])[0], seed=0)
    gen = torch.Generator().manual_seed(0)
    for name, p in stack.params.items():
        p.grad = torch.randn(p.shape, generator=gen)
        p.grad[1] *= 1e-4  # model 1's gradient norm is far below the threshold, model 0's far above
        reference.get_parameter(name).grad = p.grad[0].clone()
    before = {k: p.grad.clone() for k, p in stack.params.items()}
    norms = clip_per_model(stack, 1.0)
    expected = torch.nn.utils.clip_grad_norm_(reference.parameters(), 1.0)
    assert expected > 10 and norms[0].item() == pytest.approx(expected.item(), rel=1e-5)
    for name, p in stack.params.items():
        assert torch.allclose(p.grad[0], reference.get_parameter(name).grad, rtol=1e-5, atol=1e-8)
        assert torch.equal(p.grad[1], before[name][1])  # untouched


def test_adamw_matches_torch_and_leaves_inactive_models_alone():
    d = data.load("reversal", 6, n_train=16, n_test=4)
    stack = ModelStack.build(configs(d, [4, 4]), seeds=[0, 1])
    reference = build_model(configs(d, [4])[0], seed=0)
    decay = [p for p in reference.parameters() if p.ndim >= 2]
    rest = [p for p in reference.parameters() if p.ndim < 2]
    torch_adamw = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                                    lr=1e-2)
    ours = StackedAdamW(stack, weight_decay=0.1)
    frozen = {k: p.detach()[1].clone() for k, p in stack.params.items()}
    gen = torch.Generator().manual_seed(0)
    for _ in range(3):
        for name, p in reference.named_parameters():
            g = torch.randn(p.shape, generator=gen)
            p.grad = g
            stack.params[name].grad = torch.stack([g, 100 * g])
        torch_adamw.step()
        ours.step(1e-2, torch.tensor([True, False]))
    for name, p in reference.named_parameters():
        assert torch.allclose(stack.params[name][0], p, rtol=1e-6, atol=1e-7), name
        assert torch.equal(stack.params[name][1], frozen[name])  # an inactive model does not move at all
        assert (ours.exp_avg[name][1] == 0).all()
    assert ours.steps.tolist() == [3, 0]


def test_early_stopping_acts_on_one_model_only():
    """Model 1 starts trained, so it stops early; model 0 trains on, exactly as it would alone."""
    d = data.load("sorting", 12, n_train=256, n_test=32)
    cfg = configs(d, [4])[0]
    fresh, done = build_model(cfg, seed=0).double(), build_model(cfg, seed=1).double()
    fit(done, d, [5], steps=300, batch_size=32, lr=3e-3, eval_every=0)
    options = dict(steps=60, batch_size=16, lr=3e-3, eval_every=5, patience=2, min_improvement=0.01)
    both = ModelStack([copy.deepcopy(fresh), copy.deepcopy(done)])
    status = fit(both, d, [0, 1], **options).status
    assert status.converged.tolist() == [False, True], status
    stop = int(status.stop_step[1])
    assert stop < 60 and status.stop_step[0] == 60
    for i, model in enumerate((fresh, done)):  # each alone: the same trajectory and stopping step
        alone = ModelStack([copy.deepcopy(model)])
        alone_status = fit(alone, d, [i], **options).status
        assert int(alone_status.stop_step[0]) == int(status.stop_step[i])
        errors = relative_errors(alone.models()[0], both.state_dict(i))
        assert max(errors.values()) < FLOAT64_BOUND


def test_a_stack_that_drops_its_stopped_models_trains_each_as_if_alone():
    """Widths 2, 8, 4, trained beforehand for 0, 300 and 100 steps, so they stop at different steps: the stack
    shrinks (and pads to a smaller width) as they stop, and every model ends with the weights, stopping step and
    history it gets alone and in a stack that keeps computing every model."""
    d = data.load("sorting", 12, n_train=256, n_test=32)
    cfgs = configs(d, [2, 8, 4])
    start = [build_model(c, seed=s).double() for c, s in zip(cfgs, (0, 1, 2))]
    for model, steps in zip(start[1:], (300, 100)):
        fit(model, d, [5], steps=steps, batch_size=32, lr=3e-3, eval_every=0)
    # the floor stops width 8 at step 5, the relative rule width 4 at step 10 and width 2 at step 70
    options = dict(steps=80, batch_size=16, lr=3e-3, eval_every=5, patience=2, min_improvement=0.01, loss_floor=0.5)
    runs = {}
    for compact in (True, False):
        stack = ModelStack([copy.deepcopy(m) for m in start])
        runs[compact] = stack, fit(stack, d, [0, 1, 2], compact=compact, **options)
    (shrunk, result), (full, reference) = runs[True], runs[False]
    stops = result.status.stop_step.tolist()
    assert len(set(stops)) == 3 and result.status.converged[1] and result.status.converged[2], result.status
    assert [(c["models"], c["d_head"]) for c in result.compactions] == [(2, 4), (1, 2)], result.compactions
    assert reference.compactions == [] and reference.status.stop_step.tolist() == stops
    for column in ("test_loss", "test_accuracy", "val_loss"):
        assert result.status[column].tolist() == pytest.approx(reference.status[column].tolist(), rel=FLOAT64_BOUND)
    keys = ["model", "step", "metric"]
    a, b = (r.history[r.history.metric != "seconds"].sort_values(keys) for r in (result, reference))
    assert a[keys].values.tolist() == b[keys].values.tolist()  # the same rows: nothing logged for a dropped model
    assert a.value.tolist() == pytest.approx(b.value.tolist(), rel=FLOAT64_BOUND)
    for i, model in enumerate(start):
        assert max(relative_errors(full.models()[i], shrunk.state_dict(i)).values()) < FLOAT64_BOUND, i
        alone = ModelStack([copy.deepcopy(model)])
        status = fit(alone, d, [i], **options).status
        assert int(status.stop_step[0]) == stops[i]
        assert max(relative_errors(alone.models()[0], shrunk.state_dict(i)).values()) < FLOAT64_BOUND, i


def test_stopping_rule():
    assert not should_stop([3.0, 2.0, 1.0], patience=2, min_improvement=0.005)
    assert should_stop([3.0, 2.0, 1.999, 1.998], patience=2, min_improvement=0.005)  # 0.1 % better: stop
    assert not should_stop([3.0, 2.0, 2.5, 1.98], patience=2, min_improvement=0.005)  # 1 % better: go on
    assert not should_stop([1.0], patience=1, min_improvement=0.0)


def test_stopping_rule_with_a_loss_floor_and_a_minimum_wait():
    assert should_stop([0.5, 0.009], patience=5, min_improvement=0.005, loss_floor=0.01)       # under the floor
    assert not should_stop([0.5, 0.01], patience=5, min_improvement=0.005, loss_floor=0.01)     # at it: go on
    assert not should_stop([0.009, 0.5], patience=5, min_improvement=0.005, loss_floor=0.01)    # only the latest counts
    flat_start = [2.7] * 8                                  # a hard task's initial plateau
    assert should_stop(flat_start, patience=6, min_improvement=0.005)
    assert not should_stop(flat_start, patience=6, min_improvement=0.005, min_evals=9)
    assert should_stop(flat_start, patience=6, min_improvement=0.005, min_evals=8)
    assert should_stop(flat_start + [0.009], patience=6, min_improvement=0.005, loss_floor=0.01, min_evals=20)


def _fresh_and_done(steps_done=300):
    """A sorting task, an untrained model and one trained beforehand (low validation loss from the start)."""
    d = data.load("sorting", 12, n_train=256, n_test=32)
    cfg = configs(d, [4])[0]
    fresh, done = build_model(cfg, seed=0).double(), build_model(cfg, seed=1).double()
    fit(done, d, [5], steps=steps_done, batch_size=32, lr=3e-3, eval_every=0)
    return d, fresh, done


def test_a_model_under_the_loss_floor_stops_and_the_other_is_untouched():
    d, fresh, done = _fresh_and_done()
    options = dict(steps=40, batch_size=16, lr=3e-3, eval_every=5, patience=50)
    plain = ModelStack([copy.deepcopy(fresh), copy.deepcopy(done)])
    plain_result = fit(plain, d, [0, 1], **options)
    val = plain_result.history.query("metric == 'val_loss' and step == 5").set_index("model").value
    assert val[1] < val[0], "the pretrained model validates better"
    floor = math.sqrt(val[0] * val[1])                     # between the two at the first check
    floored = ModelStack([copy.deepcopy(fresh), copy.deepcopy(done)])
    status = fit(floored, d, [0, 1], loss_floor=floor, **options).status
    assert status.converged.tolist() == [False, True] and status.stop_step.tolist() == [40, 5], status
    assert plain_result.status.converged.tolist() == [False, False]     # patience 50: the relative rule never fires
    errors = relative_errors(plain.models()[0], floored.state_dict(0))
    assert max(errors.values()) < FLOAT64_BOUND, "the model above the floor trains exactly as without one"


def test_min_evals_delays_the_relative_rule_only():
    d, fresh, done = _fresh_and_done()
    options = dict(steps=60, batch_size=16, lr=3e-3, eval_every=5, patience=2, min_improvement=0.01)
    early = fit(ModelStack([copy.deepcopy(done)]), d, [1], **options).status
    waited = fit(ModelStack([copy.deepcopy(done)]), d, [1], min_evals=8, **options).status
    first = int(early.stop_step[0])
    assert early.converged[0] and first < 35, early
    # 8 validation losses (steps 0, 5, ..., 35): the rule may fire from step 35 on, and does at once on a flat curve
    assert waited.converged[0] and int(waited.stop_step[0]) == max(first, 35), waited


def test_nan_in_one_model_stops_it_and_keeps_the_others(copy_data):
    cfgs = configs(copy_data, [2, 4])
    good, bad = build_model(cfgs[0], seed=0).double(), build_model(cfgs[1], seed=1).double()
    with torch.no_grad():
        bad.head.bias[3] = float("nan")
    stack = ModelStack([copy.deepcopy(good), bad])
    options = dict(steps=10, batch_size=16, eval_every=0)
    with pytest.raises(Diverged, match=r"model 1 \(d_head=4, seed=7\): the training loss became nan at step 1") \
            as caught:
        fit(stack, copy_data, [3, 7], **options)
    status = caught.value.result.status
    assert status.diverged.tolist() == [False, True] and status.stop_step.tolist() == [10, 0]
    fit(good, copy_data, [3], **options)
    assert max(relative_errors(good, stack.state_dict(0)).values()) < FLOAT64_BOUND


def test_bad_input_fails_before_training(copy_data):
    stack = ModelStack.build(configs(copy_data, [2, 4]), seeds=[0, 1])
    before = {k: v.detach().clone() for k, v in stack.params.items()}
    for lr in (0, -1e-3, float("nan"), float("inf"), "3e-3", True, None):
        with pytest.raises(ArgumentError, match=r"Argument lr: got .*allowed: a finite number > 0"):
            fit(stack, copy_data, [0, 1], steps=5, lr=lr)
    with pytest.raises(ArgumentError, match="seeds"):
        fit(stack, copy_data, [0], steps=5)
    with pytest.raises(ArgumentError, match="loss_floor"):
        fit(stack, copy_data, [0, 1], steps=5, loss_floor=0.1)  # needs patience
    with pytest.raises(ArgumentError, match="min_evals"):
        fit(stack, copy_data, [0, 1], steps=5, patience=2, min_evals=-1)
    assert all(torch.equal(before[k], v) for k, v in stack.params.items())
    with pytest.raises(ArgumentError, match=r"Argument models: got \[\]"):
        ModelStack([])
    with pytest.raises(ArgumentError, match="configs"):
        ModelStack.build([], seeds=[])
    mixed = [build_model(configs(copy_data, [4])[0]), build_model(configs(copy_data, [4], d_model=16)[0])]
    with pytest.raises(ArgumentError, match=r"models\[1\]\.cfg\.d_model: got 16 .*32 as in models\[0\]"):
        ModelStack(mixed)
    values = [build_model(configs(copy_data, [4])[0]), build_model(configs(copy_data, [4], d_value=4)[0])]
    with pytest.raises(ArgumentError, match=r"models\[1\]\.cfg\.d_value"):
        ModelStack(values)


def test_buckets_bound_the_padding_waste():
    cfg = ModelConfig(vocab_size=65, d_model=64, n_heads=4, d_value=16, n_layers=2)
    offset = qk_work_offset(cfg, 128)
    assert offset == pytest.approx((4 * 16 * (128 + 128) + 2 * 64 * 256) / (4 * (128 + 128)))
    dims = [1, 2, 4, 8, 16, 24, 32, 64]
    groups = bucket_head_dims(dims, offset)
    assert sorted(d for g in groups for d in g) == dims
    for group in groups:
        assert len(group) * (offset + max(group)) <= 1.25 * sum(offset + d for d in group) + 1e-9
    for a, b in zip(groups, groups[1:]):  # greedy: the next dim would have broken the budget
        merged = a + [b[0]]
        assert len(merged) * (offset + b[0]) > 1.25 * sum(offset + d for d in merged)
    assert groups[0] == [1, 2, 4, 8, 16]
    assert bucket_head_dims([8, 1], offset=0.0, max_waste=0.0) == [[1], [8]]


def test_a_stack_holds_as_many_models_as_keep_one_layers_scores_within_the_budget():
    cfg = ModelConfig(vocab_size=10, d_model=32, n_heads=1, d_value=16)
    one_model = torch.zeros(8, cfg.n_heads, 256, 256).nbytes          # the scores of one model: 8 sequences at n 256
    assert one_model == 2 * 2**20
    assert stack_limit(cfg, 256, 8) == 3 == (6 * 2**20) // one_model    # chapter 05 at n = 256 (full mode)
    assert stack_limit(cfg, 128, 8) == 12 and stack_limit(cfg, 16, 64) == 96
    four = ModelConfig(vocab_size=10, d_model=64, n_heads=4, d_value=16)
    assert stack_limit(four, 128, 8) == 3                               # 4 heads: 2 MiB a model at n = 128
    assert stack_limit(cfg, 4096, 8) == 1, "never fewer than one model"
    assert stack_limit(cfg, 256, 8, budget=2 * 2**20 - 1) == 1 and stack_limit(cfg, 256, 8, budget=4 * 2**20) == 2
    for name, bad in (("n", 0), ("batch", 2.5), ("budget", True)):
        with pytest.raises(ArgumentError) as err:
            stack_limit(cfg, **{"n": 256, "batch": 8, name: bad})
        assert err.value.name == name


def test_cut_stack_keeps_whole_seeds_together_and_every_member_once():
    members = [(w, s) for w in (1, 4, 8) for s in (0, 1, 2)]             # width-major, as a bucket makes them
    assert cut_stack(members, None) == [members] and cut_stack(members, 9) == [members], "a stack that fits stays"
    assert cut_stack(members, 3) == [[(1, s), (4, s), (8, s)] for s in (0, 1, 2)]
    pieces = cut_stack([(w, s) for w in (4, 6) for s in (0, 1, 2)], 3)
    assert pieces == [[(4, 0), (6, 0), (4, 1)], [(6, 1), (4, 2), (6, 2)]]
    assert all(max(w for w, _ in piece) == 6 for piece in pieces), "each piece keeps the group's padded width"
    for limit in (1, 2, 4, 5, 8):
        pieces = cut_stack(members, limit)
        assert sorted(m for p in pieces for m in p) == sorted(members) and all(len(p) <= limit for p in pieces)
        assert len(pieces) == -(-len(members) // limit)
    assert cut_stack([], 3) == []
    for bad in (0, 1.5, True):
        with pytest.raises(ArgumentError, match="limit"):
            cut_stack(members, bad)


def point(task, members, seed):
    """A stack task for the sweep test: trains its members and reports each model's test loss."""
    d = data.load(task, 6, n_train=64, n_test=8)
    cfgs = configs(d, [m["d_head"] for m in members])
    stack = ModelStack.build(cfgs, seeds=[m["seed"] for m in members])
    result = fit(stack, d, [m["seed"] for m in members], steps=3, batch_size=8)
    stack.save(stack_weights_path("stack_test", {"task": task, "members": members}, __name__))
    return [{"d_head": m["d_head"], "seed": m["seed"], "test_loss": loss, "calls": 1}
            for m, loss in zip(members, result.status.test_loss)]


def test_a_stack_is_one_sweep_task_stored_once(tmp_path, monkeypatch):
    monkeypatch.setenv("HELPERS_CACHE_DIR", str(tmp_path))
    grid = [{"task": "reversal", "d_head": d} for d in (1, 2, 8)]
    tasks = stack_configs(grid, [0, 1], buckets=lambda dims: [dims[:2], dims[2:]])
    assert [len(t["members"]) for t in tasks] == [4, 2]
    first = run_stacked_sweep("stack_test", point, grid, seeds=[0, 1],
                              buckets=lambda dims: [dims[:2], dims[2:]])
    assert first.attrs["computed"] == 2 and len(first) == 6
    assert sorted(zip(first.d_head, first.seed)) == [(d, s) for d in (1, 2, 8) for s in (0, 1)]
    again = run_stacked_sweep("stack_test", point, grid, seeds=[0, 1],
                              buckets=lambda dims: [dims[:2], dims[2:]])
    assert again.attrs["computed"] == 0 and again.test_loss.tolist() == first.test_loss.tolist()
    members = tasks[1]["members"]  # the stored weights give back the standalone models
    path = stack_weights_path("stack_test", {"task": "reversal", "members": members}, __name__)
    assert path.parent.parent == tmp_path
    models = ModelStack.load(path).models()
    d = data.load("reversal", 6, n_train=64, n_test=8)
    losses = [evaluate(m, d.test_x, d.test_y)["loss"] for m in models]
    assert [m.cfg.head_dim for m in models] == [8, 8]
    assert losses == pytest.approx(first[first.d_head == 8].sort_values("seed").test_loss.tolist(), rel=1e-5)


def test_tiny_task_is_learned_and_attention_is_load_bearing():
    """Quality bar in small: reversal at n = 8 is solved by a stack, and uniform attention ruins it."""
    d = data.load("reversal", 8, n_train=2048, n_test=128)
    cfgs = configs(d, [4, 8])
    stack = ModelStack.build(cfgs, seeds=[0, 1])
    status = fit(stack, d, [0, 1], steps=400, batch_size=32, lr=3e-3, eval_every=50, patience=3).status
    assert status.test_accuracy.min() > 0.95, status
    for model in stack.models():
        trained = evaluate(model, d.test_x, d.test_y)["loss"]
        with uniform_attention(model):
            uniform = evaluate(model, d.test_x, d.test_y)["loss"]
        assert uniform - trained > 1.0
        assert math.isclose(evaluate(model, d.test_x, d.test_y)["loss"], trained)  # restored


def tiny(d, **options):
    return build_model(d_model=32, n_heads=2, n_layers=2, pos="learned", seed=0, **{**d.model_fields(), **options})


@pytest.mark.parametrize("name", ["sorting", "copy"])
def test_loss_falls_within_a_small_budget(name):
    d = data.load(name, 12, n_train=512, n_test=64)
    model = tiny(d)
    result = fit(model, d, [0], steps=120, batch_size=32, lr=3e-3, eval_every=0)
    losses = result.history[result.history.metric == "test_loss"].value.tolist()
    assert len(losses) == 2  # the start and the end
    assert losses[1] < 0.8 * losses[0], losses
    assert result.status.test_accuracy[0] > 0.2
    assert evaluate(model, d.test_x, d.test_y)["loss"] == pytest.approx(losses[1], rel=1e-5)  # trained in place


def test_image_classification_runs():
    d = data.load("digits", 16, n_train=64, n_test=32)
    model = build_model(d_model=16, n_heads=2, n_layers=1, seed=0, **d.model_fields())
    result = fit(model, d, [0], steps=5, batch_size=16)
    assert set(result.history.metric) >= {"train_loss", "lr", "test_loss", "test_accuracy", "seconds"}


def test_a_huge_learning_rate_diverges_with_a_clear_message():
    d = data.load("reversal", 8, n_train=64, n_test=8)
    with pytest.raises(Diverged, match=r"loss became (nan|inf).*lower lr"):
        fit(tiny(d), d, [0], steps=50, batch_size=16, lr=1e30, warmup=0, clip=None)


def test_history_is_tidy_deterministic_and_leaves_the_global_rng_alone():
    d = data.load("reversal", 8, n_train=64, n_test=8)
    torch.manual_seed(0)
    state = torch.get_rng_state()
    runs = [fit(tiny(d), d, [3], steps=10, batch_size=16, eval_every=5, log_every=5, curve=True) for _ in range(2)]
    assert torch.equal(torch.get_rng_state(), state)
    a, b = (r.history[r.history.metric != "seconds"].reset_index(drop=True) for r in runs)
    assert list(a.columns) == ["model", "step", "metric", "value"]
    assert a.equals(b)
    assert a[a.metric == "test_loss"].step.tolist() == [0, 5, 10]
    assert a[a.metric == "lr"].value.tolist() == pytest.approx([3e-3 * lr_factor(s, 10, 1) for s in (4, 9)])


def test_schedule_warms_up_then_decays():
    factors = [lr_factor(s, 100, 10) for s in range(100)]
    assert factors[0] == pytest.approx(0.1) and factors[9] == pytest.approx(1.0)
    assert all(x >= y for x, y in zip(factors[10:], factors[11:]))
    assert factors[-1] < 0.01
    assert lr_factor(100, 100, 10, final=0.1) == pytest.approx(0.1)
    assert math.isclose(lr_factor(55, 100, 10), 0.5, abs_tol=1e-9)
    assert Recipe(steps=100, lr=2.0, warmup=10).lr_at(55) == pytest.approx(1.0)


@pytest.mark.parametrize("knobs,name", [
    (dict(steps=0), "steps"), (dict(lr=-1.0), "lr"), (dict(batch_size=2.0), "batch_size"), (dict(clip=0), "clip"),
    (dict(patience=0), "patience"), (dict(min_improvement=1.0), "min_improvement"),
    (dict(patience=2, eval_every=0), "eval_every"), (dict(final_lr_ratio=2), "final_lr_ratio"),
    (dict(weight_decay=-0.1), "weight_decay"),
])
def test_a_bad_recipe_names_its_field(knobs, name):
    with pytest.raises(ArgumentError, match=f"Argument {name}:"):
        Recipe(**knobs)


def test_bad_training_arguments_fail_before_any_step():
    d = data.load("reversal", 8, n_train=8, n_test=8)
    model = tiny(d)
    before = copy.deepcopy(model.state_dict())
    for call, name in ((lambda: train(model, d, Recipe(), [0], threads=0), "threads"),
                       (lambda: train(model, d, Recipe(patience=2, val_examples=8), [0]), "val_examples"),
                       (lambda: train(model, d, {"steps": 5}, [0]), "recipe"),
                       (lambda: train(model, d, Recipe(), [0, 1]), "seeds"),
                       (lambda: train("model", d, Recipe(), [0]), "models")):
        with pytest.raises(ArgumentError, match=f"Argument {name}:"):
            call()
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_the_test_curve_is_optional_and_changes_no_weight_and_no_stop(copy_data):
    """`curve=False` (the default) scores the test set only at the start and the end; the weights, the stopping
    steps and the final scores are bitwise those of a run that scores it at every evaluation (scoring has no side
    effect on training)."""
    knobs = dict(steps=60, batch_size=16, eval_every=10, patience=2, min_improvement=0.5, val_examples=32)
    runs = {}
    for curve in (False, True):
        stack = ModelStack.build(configs(copy_data, [1, 4, 8]), [0, 1, 2])
        runs[curve] = (stack, fit(stack, copy_data, [0, 1, 2], curve=curve, **knobs))
    (plain, quiet), (curved, loud) = runs[False], runs[True]
    assert quiet.status.equals(loud.status)
    assert quiet.status.converged.any(), "the rule must stop some model, or the stopping steps test nothing"
    for name, value in plain.params.items():
        assert torch.equal(value, curved.params[name]), name
    steps = lambda result: sorted(set(result.history[result.history.metric == "test_loss"].step))
    assert len(steps(quiet)) == 2 and steps(quiet)[0] == 0   # the start and the end
    assert len(steps(loud)) > 2
    with pytest.raises(ArgumentError, match="curve"):
        Recipe(curve="yes")


def test_evaluation_chunks_keep_the_stacks_attention_weights_within_the_cache_budget():
    """`eval_chunk`, recomputed by hand: 2^20 // (M x heads x n^2) examples per model, at least 1, at most the
    256 examples per pass shared by the M models; images count their patches (digits at patch 4: 16)."""
    from helpers.training.loop import eval_chunk
    tokens = lambda n: torch.zeros(5, n, dtype=torch.long)
    for n, heads, m, want in ((16, 1, 3, 85), (64, 1, 9, 28), (128, 1, 9, 7), (256, 1, 9, 1), (128, 2, 2, 16),
                              (1024, 2, 3, 1)):
        d = data.load("copy", n, n_train=8, n_test=4)
        stack = ModelStack.build([ModelConfig(d_model=16, n_heads=heads, n_layers=1, d_head=2, d_value=4,
                                              **d.model_fields())] * m, seeds=list(range(m)))
        assert eval_chunk(stack, tokens(n)) == want == max(1, min(256 // m, 2 ** 20 // (m * heads * n * n)))
    d = data.load("digits", 16, n_train=8, n_test=4)
    images = ModelStack.build([ModelConfig(d_model=16, n_heads=2, n_layers=1, d_head=2, d_value=4,
                                           **d.model_fields())] * 2, seeds=[0, 1])
    assert images.template.n_patches == 16 and eval_chunk(images, d.test_x) == 128   # min(128, 2^20 // 1024)


def test_scores_in_small_chunks_are_the_one_pass_scores(copy_data, monkeypatch):
    """With 3 examples per model in each pass (the budget shrunk to 3 models x 2 heads x 12^2 x 3 floats), the
    trainer's final test scores of every model equal its own scores in one forward pass of the whole test set (32
    examples: 10 full chunks and a partial one). Tolerance: the same float32 logits up to the matmul's blocking
    (relative 2^-24 per term over d = 32 terms, about 2e-6 of a logit of order 1, moving the cross-entropy by as
    much), then means of 384 terms (float32 pairwise sums: log2(384) x 2^-24, about 5e-7): 1e-5 relative leaves a
    factor 4 on any CPU."""
    import helpers.training.loop as loop
    monkeypatch.setattr(loop, "ATTENTION_FLOATS", 3 * 2 * 12 ** 2 * 3)   # models x heads x n^2 x 3
    stack = ModelStack.build(configs(copy_data, [1, 4, 8]), [0, 1, 2])
    assert loop.eval_chunk(stack, copy_data.test_x) == 3
    status = fit(stack, copy_data, [0, 1, 2], steps=30, batch_size=16, eval_every=0).status
    for model, loss, accuracy in zip(stack.models(), status.test_loss, status.test_accuracy):
        whole = evaluate(model, copy_data.test_x, copy_data.test_y, batch_size=len(copy_data.test_x))
        assert whole["loss"] == pytest.approx(loss, rel=1e-5) and whole["accuracy"] == accuracy
