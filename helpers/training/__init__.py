"""Training: one recipe type, one loop, one stack of models (a single model is a stack of one).

    from helpers.training import ModelStack, Recipe, train
    stack = ModelStack.build(configs, seeds=[0, 1, 2])
    result = train(stack, data, Recipe(steps=3000, eval_every=50, patience=6), seeds=[0, 1, 2])

Modules: `recipe` (the knobs and the stopping rule), `stack` (stacked parameters), `optim` (AdamW and
clipping per model), `scoring` (loss and accuracy), `loop` (the training loop), `buckets` (grouping models into
stacks). The forward pass is `helpers.forward`, shared with `helpers.models.Transformer`.
"""

from .buckets import bucket_head_dims, cut_stack, qk_work_offset, stack_limit
from .loop import BatchOrder, Diverged, TrainResult, train
from .optim import StackedAdamW, clip_per_model
from .recipe import Recipe, lr_factor, should_stop
from .scoring import evaluate, evaluate_stack, stacked_loss
from .stack import ModelStack, stack_weights_path

__all__ = ["BatchOrder", "Diverged", "ModelStack", "Recipe", "StackedAdamW", "TrainResult", "bucket_head_dims",
           "clip_per_model", "cut_stack", "evaluate", "evaluate_stack", "lr_factor", "qk_work_offset", "should_stop",
           "stack_limit", "stack_weights_path", "stacked_loss", "train"]
