"""Differentiable volume rendering of voxel attribute fields along exactly traversed rays.

The field is piecewise constant (one value per voxel), so a ray is a list of segments
``[t0_i, t0_i + delta_i]`` of constant density ``sigma_i``: the opacity of a segment is
``alpha_i = 1 - exp(-sigma_i delta_i)``, the transmittance before it ``T_i = prod_{j<i}(1 - alpha_j)``,
its weight ``w_i = T_i alpha_i`` (so ``sum_i w_i = 1 - T_N`` exactly), and the expected stopping
distance *given* a stop inside the segment has the closed form ``t0_i + delta_i g(sigma_i delta_i)``
with ``g(x) = 1/x - 1/(e^x - 1)`` (``g -> 1/2`` as ``x -> 0``, ``~ 1/x`` for large ``x``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


SIGMA_MAX = 1e4


def segment_mean(x: torch.Tensor) -> torch.Tensor:
    """``g(x) = 1/x - 1/expm1(x)``: the mean stopping point of an exponential clock of rate x
    truncated to [0, 1] (x >= 0, any shape), with its series ``1/2 - x/12`` near 0."""
    xs = x.clamp_min(1e-3)
    # 1/expm1(x) written as exp(-x) / (1 - exp(-x)): the same value, and a finite gradient at large x
    # (the direct form's gradient is inf/inf = NaN once exp(x) overflows)
    return torch.where(x < 1e-3, 0.5 - x / 12, 1 / xs - torch.exp(-xs) / -torch.expm1(-xs))


def render_weights(sigma: torch.Tensor, delta: torch.Tensor):
    """Weights ``w`` (..., S) and final transmittance ``T_N`` (...) of densities ``sigma`` (..., S)
    over segment lengths ``delta`` (..., S). Densities are capped at ``SIGMA_MAX`` (opaque within
    1e-4 voxel): an infinite density would make ``T_i`` NaN (infinity minus infinity)."""
    tau = sigma.clamp_max(SIGMA_MAX) * delta
    alpha = -torch.expm1(-tau)
    trans = torch.exp(-(torch.cumsum(tau, -1) - tau))
    return trans * alpha, torch.exp(-tau.sum(-1))


def volume_render(sigma: torch.Tensor, t0: torch.Tensor, delta: torch.Tensor, t_exit: torch.Tensor,
                  fields: dict[str, torch.Tensor] | None = None) -> dict[str, torch.Tensor]:
    """Render densities ``sigma`` (..., S) on segments ``t0, delta`` (..., S) and per-segment
    ``fields`` (name -> (..., S, C)).

    Returns ``weights`` (..., S), ``acc`` = sum of weights (...), ``trans`` = T_N (...),
    ``depth`` (...) = expected stopping distance with the remaining mass at ``t_exit`` (...)
    (a background at the grid's boundary), and each field composed as ``sum_i w_i f_i`` (..., C)
    (semantic *logits* are composed as in the paper's code)."""
    w, trans = render_weights(sigma, delta)
    t_bar = t0 + delta * segment_mean(sigma * delta)
    out = dict(weights=w, acc=w.sum(-1), trans=trans, depth=(w * t_bar).sum(-1) + trans * t_exit)
    for name, f in (fields or {}).items():
        out[name] = (w[..., None] * f).sum(-2)
    return out


def gather_fields(volume: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Values of per-voxel features ``volume`` (B, C, X, Y, Z) at flat voxel indices ``index``
    (B, R, S) (the dummy index X*Y*Z reads zeros): (B, R, S, C)."""
    b, c = volume.shape[:2]
    flat = torch.cat([volume.reshape(b, c, -1), volume.new_zeros(b, c, 1)], 2).transpose(1, 2)
    return flat.gather(1, index.reshape(b, -1, 1).expand(-1, -1, c)).reshape(index.shape + (c,))


def silog_loss(pred: torch.Tensor, gt: torch.Tensor, lam: float = 0.85) -> torch.Tensor:
    """Scale-invariant log depth loss ``sqrt(mean(g^2) - lam mean(g)^2)``, ``g = log pred - log gt``
    over matching 1-D tensors."""
    g = torch.log(pred.clamp_min(1e-3)) - torch.log(gt)
    return torch.sqrt((g ** 2).mean() - lam * g.mean() ** 2 + 1e-8)


def enet_weights(counts: torch.Tensor, c: float = 1.02) -> torch.Tensor:
    """Class weights ``1 / log(c + p_k)`` from class counts (ENet's rule, a smoothed 1/log freq)."""
    p = counts.double() / counts.sum()
    return (1 / torch.log(c + p)).float()


def render_losses(out: dict, depth: torch.Tensor, sem: torch.Tensor, rgb: torch.Tensor, mask: torch.Tensor,
                  sem_weight: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """The 2D losses on labelled rays (``mask``, any shape): SILog depth, class-weighted
    cross-entropy on the rendered semantic logits (labels 1..C, logit k-1 for class k), L1 colour."""
    d = out["depth"][mask]
    logits = out["sem"][mask]
    return dict(depth=silog_loss(d, depth[mask]),
                sem=F.cross_entropy(logits, sem[mask] - 1, weight=sem_weight),
                rgb=(out["rgb"][mask] - rgb[mask]).abs().mean(0).sum())
