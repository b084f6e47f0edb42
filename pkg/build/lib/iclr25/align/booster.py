"""Booster (Huang et al., ICLR 2025): safety alignment that attenuates the harmful perturbation.

With ``f`` the alignment loss and ``h`` the harmful loss (next-token NLL of harmful answers),
Booster minimises::

    F(w) = f(w) + lam * R(w),     R(w) = h(w) - h(w - alpha * g_h(w) / ||g_h(w)||),

``R`` being how much one normalised gradient-descent step of length ``alpha`` on harmful data
lowers the harmful loss (the *simulated harmful perturbation*). Like SAM it drops the Jacobian of
the step direction and descends::

    g(w) = grad f(w) + lam * [g_h(w) - g_h(w~)],    w~ = w - alpha * g_h(w) / ||g_h(w)||,

three forward/backward passes per step (:func:`booster_grad`). :func:`perturbation_gap_graph`
builds ``R`` as a differentiable function of the weights, with the direction kept (the exact
gradient) or detached (the first-order surrogate whose gradient *is* Booster's), for the checks
that the dropped term is O(alpha^2).

Loss functions are callables ``loss_fn(model) -> scalar tensor`` (e.g.
``lambda m: answer_nll(m, batch)``); gradients are lists of tensors in the order of
:func:`trainable`.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator, Sequence

import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

LossFn = Callable[[nn.Module], torch.Tensor]
Tensors = list[torch.Tensor]
#: added to the gradient norm before dividing, as in the official code (``_grad_norm + 1e-7``)
NORM_EPS = 1e-7


def trainable(model: nn.Module) -> list[nn.Parameter]:
    """The parameters that require gradients, in ``model.parameters()`` order (tied ones once)."""
    return [p for p in model.parameters() if p.requires_grad]


def global_norm(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """L2 norm of all tensors together: the norm of the per-tensor norms (a 0-d tensor)."""
    return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(t) for t in tensors]))


def loss_grad(model: nn.Module, loss_fn: LossFn) -> tuple[Tensors, float]:
    """``(grad of loss_fn(model) w.r.t. trainable(model), loss value)``; leaves ``.grad`` alone."""
    params = trainable(model)
    loss = loss_fn(model)
    grads = torch.autograd.grad(loss, params)
    return [g.detach() for g in grads], float(loss.detach())


def unit_direction(grads: Sequence[torch.Tensor], eps: float = NORM_EPS) -> Tensors:
    """``g / (||g|| + eps)`` with the global norm of :func:`global_norm`."""
    n = global_norm(grads) + eps
    return [g / n for g in grads]


def random_unit_direction(params: Sequence[torch.Tensor], generator: torch.Generator) -> Tensors:
    """A direction drawn uniformly on the unit sphere of the weight space (a standard Gaussian,
    normalised), shaped like ``params``. Drawn on the CPU from ``generator`` and moved to each
    parameter's device, so a seed gives the same direction on every device."""
    z = [torch.randn(p.shape, generator=generator, dtype=p.dtype).to(p.device) for p in params]
    n = global_norm(z)
    return [t / n for t in z]


@contextmanager
def displaced(params: Sequence[torch.Tensor], direction: Sequence[torch.Tensor],
              alpha: float) -> Iterator[None]:
    """While active the weights are ``w - alpha * direction``; afterwards they are restored
    *bit for bit* (copied back from a saved copy: ``(w - d) + d`` need not round back to ``w``)."""
    saved = [p.detach().clone() for p in params]
    with torch.no_grad():
        for p, d in zip(params, direction):
            p.sub_(alpha * d)
    try:
        yield
    finally:
        with torch.no_grad():
            for p, s in zip(params, saved):
                p.copy_(s)


@torch.no_grad()
def harmful_perturbation_gap(model: nn.Module, h_fn: LossFn, alpha: float,
                             direction: Sequence[torch.Tensor] | None = None) -> float:
    """``R(w) = h(w) - h(w - alpha * u)``: how much one normalised step lowers the harmful loss.

    ``u`` is ``g_h / (||g_h|| + eps)`` (the harmful gradient, computed here) unless ``direction``
    is given. Weights are unchanged on return."""
    params = trainable(model)
    if direction is None:
        with torch.enable_grad():
            g, _ = loss_grad(model, h_fn)
        direction = unit_direction(g)
    h0 = float(h_fn(model))
    with displaced(params, direction, alpha):
        h1 = float(h_fn(model))
    return h0 - h1


def booster_grad(model: nn.Module, f_fn: LossFn, h_fn: LossFn, lam: float, alpha: float, *,
                 direction: Sequence[torch.Tensor] | None = None) -> tuple[Tensors, dict[str, float]]:
    """Booster's first-order gradient ``grad f(w) + lam * [g_h(w) - g_h(w - alpha * u)]``.

    Three passes, as the official trainer: (1) ``g_h`` at ``w`` on the harmful batch;
    (2) ``g_h`` at ``w~ = w - alpha * u`` on the *same* batch, ``u = g_h / (||g_h|| + 1e-7)``
    (global norm); (3) ``grad f`` at ``w``. ``direction`` replaces ``u`` (the random-direction
    control). The weights are restored exactly; ``.grad`` is not touched.

    Returns
    -------
    grads : list of tensors shaped like :func:`trainable` (model)
    stats : ``f``, ``h`` (losses at ``w``), ``gap`` = ``h(w) - h(w~)`` (R on this batch) and
        ``grad_norm`` = ``||g_h(w)||``.
    """
    params = trainable(model)
    g1, h0 = loss_grad(model, h_fn)
    u = unit_direction(g1) if direction is None else list(direction)
    with displaced(params, u, alpha):
        g2, h1 = loss_grad(model, h_fn)
    gf, f0 = loss_grad(model, f_fn)
    grads = [a + lam * (b - c) for a, b, c in zip(gf, g1, g2)]
    return grads, {"f": f0, "h": h0, "gap": h0 - h1, "grad_norm": float(global_norm(g1))}


class _LossOf(nn.Module):
    """A module whose forward is ``loss_fn(model)``: lets ``torch.func.functional_call`` evaluate
    a loss at weights given as tensors."""

    def __init__(self, model: nn.Module, loss_fn: LossFn) -> None:
        super().__init__()
        self.model = model
        self.loss_fn = loss_fn

    def forward(self) -> torch.Tensor:
        return self.loss_fn(self.model)


def functional_loss(model: nn.Module, loss_fn: LossFn) -> Callable[[Sequence[torch.Tensor]], torch.Tensor]:
    """``loss_at(ws)``: ``loss_fn(model)`` evaluated with the trainable weights replaced by the
    tensors ``ws`` (shaped like :func:`trainable` (model)), differentiable in ``ws``, including
    twice (for Hessian-vector products)."""
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    wrapper = _LossOf(model, loss_fn)

    def loss_at(ws: Sequence[torch.Tensor]) -> torch.Tensor:
        return torch.func.functional_call(wrapper, {f"model.{n}": w for n, w in zip(names, ws)}, ())

    return loss_at


def perturbation_gap_graph(loss_at: Callable[[Sequence[torch.Tensor]], torch.Tensor],
                           ws: Sequence[torch.Tensor], alpha: float, *, first_order: bool,
                           eps: float = NORM_EPS) -> torch.Tensor:
    """``R(w) = h(w) - h(w - alpha * u(w))`` as a differentiable scalar of ``ws``.

    ``first_order=True`` detaches ``u``: the gradient of this surrogate is exactly Booster's
    ``g_h(w) - g_h(w~)``. ``first_order=False`` keeps ``u(w) = g_h / (||g_h|| + eps)`` in the
    graph (double backprop): its gradient is the exact ``grad R``, which adds
    ``alpha * J_u^T g_h(w~)``, a term of order ``alpha^2``.
    """
    with sdpa_kernel(SDPBackend.MATH):  # the fused attention kernels have no double backward
        h0 = loss_at(ws)
        g = torch.autograd.grad(h0, ws, create_graph=not first_order, retain_graph=True)
        u = unit_direction(g, eps)
        if first_order:
            u = [t.detach() for t in u]
        return h0 - loss_at([w - alpha * t for w, t in zip(ws, u)])


def hessian_quadratic_form(loss_at: Callable[[Sequence[torch.Tensor]], torch.Tensor],
                           ws: Sequence[torch.Tensor], v: Sequence[torch.Tensor]) -> float:
    """``v^T H v`` for the Hessian ``H`` of ``loss_at`` at ``ws`` (one Hessian-vector product by
    double backprop)."""
    ws = [w.detach().requires_grad_(True) for w in ws]
    with sdpa_kernel(SDPBackend.MATH):
        g = torch.autograd.grad(loss_at(ws), ws, create_graph=True)
        gv = sum((a * b).sum() for a, b in zip(g, v))
        hv = torch.autograd.grad(gv, ws)
    return float(sum((a * b).sum() for a, b in zip(hv, v)))
