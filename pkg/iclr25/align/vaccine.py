"""Vaccine (Huang et al., NeurIPS 2024): perturbation-aware alignment, Booster's main baseline.

Vaccine makes the aligned model's hidden states robust to the drift that harmful fine-tuning
causes: it minimises the alignment loss under the worst small perturbation of every layer's
output::

    min_w  max_{||e|| <= rho}  f(w; H_l + e_l for every layer l),

solved like SAM with one ascent step. Pass 1 computes ``dH_l = d f / d H_l`` for the output
``H_l`` of every hooked module; the perturbation is ``e_l = rho * dH_l / ||dH||`` with the
global norm over all layers (and all tokens of the batch); pass 2 adds ``e_l`` to those
outputs (forward hooks) and returns the gradient of ``f`` w.r.t. the weights there.

Where the hooks sit (:data:`HOOK`): the official code registers them on the attention modules of
every layer (the attention output, before it is added to the residual stream), which is the
default ``"attn"``; ``"block"`` perturbs the output of each whole transformer block (the residual
stream after attention and MLP, the hidden states of Vaccine's paper figures).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator, Sequence

import torch
from torch import nn

from iclr25.align.booster import NORM_EPS, LossFn, Tensors, global_norm, trainable


#: the modules whose outputs Vaccine perturbs: "attn" (every block's attention, the official hook) or "block"
HOOK = "attn"


def block_modules(model: nn.Module, hook: str | None = None) -> list[nn.Module]:
    """The modules whose outputs Vaccine perturbs: every block's attention module (``hook="attn"``,
    the default :data:`HOOK`) or every transformer block (``"block"``)."""
    hook = HOOK if hook is None else hook
    if hook == "attn":
        return [b.attn for b in model.blocks]
    if hook == "block":
        return list(model.blocks)
    raise ValueError(f"unknown hook {hook!r}")


@contextmanager
def capture_outputs(modules: Sequence[nn.Module]) -> Iterator[list[torch.Tensor]]:
    """While active, the outputs of ``modules`` of the latest forward pass are in the yielded
    list (in ``modules`` order), still attached to the graph."""
    outs: list[torch.Tensor] = [torch.empty(0)] * len(modules)

    def make(i: int) -> Callable:
        def hook(_m: nn.Module, _a: tuple, out: torch.Tensor) -> None:
            outs[i] = out
        return hook

    handles = [m.register_forward_hook(make(i)) for i, m in enumerate(modules)]
    try:
        yield outs
    finally:
        for h in handles:
            h.remove()


@contextmanager
def add_to_outputs(modules: Sequence[nn.Module], deltas: Sequence[torch.Tensor]) -> Iterator[None]:
    """While active, ``deltas[i]`` (the shape of that module's output) is added to the output
    of ``modules[i]``."""
    handles = [m.register_forward_hook(lambda _m, _a, out, d=d: out + d) for m, d in zip(modules, deltas)]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def vaccine_perturbation(model: nn.Module, f_fn: LossFn, rho: float,
                         eps: float = NORM_EPS) -> tuple[Tensors, float]:
    """Pass 1: ``e_l = rho * dH_l / (||dH|| + eps)`` for every block output ``H_l`` (each
    (B, T, d), global norm over all of them) and the loss ``f`` at ``w``. ``f_fn`` must be
    deterministic (pass 2 reuses the perturbation on the same batch)."""
    blocks = block_modules(model)
    with capture_outputs(blocks) as outs:
        loss = f_fn(model)
        dH = torch.autograd.grad(loss, outs)
    n = global_norm(dH) + eps
    return [rho * g.detach() / n for g in dH], float(loss.detach())


def vaccine_grad(model: nn.Module, f_fn: LossFn, rho: float) -> tuple[Tensors, dict[str, float]]:
    """Vaccine's gradient: ``grad_w f`` with every block output shifted by the ascent
    perturbation of :func:`vaccine_perturbation`. Two passes; ``.grad`` untouched.

    Returns ``(grads shaped like trainable(model), {"f": loss at w, "f_perturbed": loss with the
    perturbation})``."""
    e, f0 = vaccine_perturbation(model, f_fn, rho)
    with add_to_outputs(block_modules(model), e):
        loss = f_fn(model)
        grads = torch.autograd.grad(loss, trainable(model))
    return [g.detach() for g in grads], {"f": f0, "f_perturbed": float(loss.detach())}
