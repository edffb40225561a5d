"""AdamW and gradient clipping over stacked parameters, each model on its own.

AdamW is elementwise, so one AdamW over the stacked tensors is per-model state; the step count is per model,
and a model whose `active` entry is False is left exactly as it is (parameters, moments and step count).
Clipping uses each model's own gradient norm (torch's `clip_grad_norm_` rule, per model).
"""

import torch

from .stack import ModelStack


class StackedAdamW:
    """AdamW (torch's update rule) over `stack.params`; matrices decay, vectors (biases, norms) do not."""

    def __init__(self, stack: ModelStack, weight_decay: float, betas=(0.9, 0.999), eps: float = 1e-8):
        self.stack, self.weight_decay, self.betas, self.eps = stack, weight_decay, betas, eps
        self.exp_avg = {k: torch.zeros_like(v) for k, v in stack.params.items()}
        self.exp_avg_sq = {k: torch.zeros_like(v) for k, v in stack.params.items()}
        self.steps = torch.zeros(len(stack), dtype=torch.float64, device=stack.device)

    def take(self, sub: ModelStack, indices: list[int]) -> "StackedAdamW":
        """This optimizer's state for the members `indices`, on `sub = stack.take(indices)`."""
        out = StackedAdamW.__new__(StackedAdamW)
        out.stack, out.weight_decay, out.betas, out.eps = sub, self.weight_decay, self.betas, self.eps
        out.exp_avg = self.stack.regroup(sub, indices, self.exp_avg)
        out.exp_avg_sq = self.stack.regroup(sub, indices, self.exp_avg_sq)
        out.steps = self.steps[torch.tensor(indices, device=self.steps.device)]
        return out

    @torch.no_grad()
    def step(self, lr: float, active: torch.Tensor) -> None:
        """One update at learning rate `lr` of the models where `active` `(M,)` is True."""
        beta1, beta2 = self.betas
        self.steps += active.double()
        done = self.steps.clamp(min=1)
        step_size = lr / (1 - beta1 ** done)  # (M,) float64, cast to each parameter's precision
        root_bc2 = (1 - beta2 ** done).sqrt()
        everyone = bool(active.all())
        for name, p in self.stack.params.items():
            g = p.grad
            shape = (len(self.stack),) + (1,) * (p.ndim - 1)
            size, root = step_size.to(p.dtype).view(shape), root_bc2.to(p.dtype).view(shape)
            m, v = self.exp_avg[name], self.exp_avg_sq[name]
            new_m = m.lerp(g, 1 - beta1)
            new_v = v * beta2 + (1 - beta2) * g * g
            decay = self.weight_decay if self.stack.ndims[name] >= 2 else 0.0
            new_p = p * (1 - lr * decay) - size * new_m / (new_v.sqrt() / root + self.eps)
            if everyone:  # the usual case: where() would select new_* everywhere, so copy them as they are
                p.copy_(new_p), m.copy_(new_m), v.copy_(new_v)
            else:
                keep = active.view(shape)
                p.copy_(torch.where(keep, new_p, p))
                m.copy_(torch.where(keep, new_m, m))
                v.copy_(torch.where(keep, new_v, v))


def clip_per_model(stack: ModelStack, clip: float) -> torch.Tensor:
    """Scale each model's gradient so its norm is at most `clip`; returns the norms before clipping `(M,)`."""
    norms = torch.zeros(len(stack), dtype=next(iter(stack.params.values())).dtype, device=stack.device)
    for p in stack.params.values():
        norms += p.grad.pow(2).reshape(len(stack), -1).sum(1)
    norms = norms.sqrt()
    coef = (clip / (norms + 1e-6)).clamp(max=1.0)
    for p in stack.params.values():
        p.grad.mul_(coef.view((len(stack),) + (1,) * (p.ndim - 1)))
    return norms
