"""Stein variational gradient descent (Liu and Wang, 2016) and a Langevin baseline.

SVGD moves every particle along the kernelised Stein direction

    phi(x_i) = (1/N) sum_j [ k(x_j, x_i) s(x_j) + grad_{x_j} k(x_j, x_i) ],   j = i included,

with explicit Euler steps ``x_i <- x_i + eta * phi(x_i)``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .kernels import Kernel
from .stein import ScoreFn, check_particles, ksd_from_scores, scores


def svgd_direction(X: Tensor, S: Tensor, kernel: Kernel, repulsion_scale: float = 1.0) -> Tensor:
    """The SVGD velocity ``phi (..., N, d)`` at particles ``X`` with scores ``S`` (both ``(..., N, d)``).

    ``repulsion_scale`` multiplies the repulsion term (1: SVGD; below 1: a degraded sampler whose drift is
    intact but whose particles repel too weakly, a control that breaks only the mechanism)."""
    check_particles(X, S)
    K, rep = kernel.gram_and_repulsion(X)  # K[j, i] = k(x_j, x_i); the summed repulsions
    drift = K.transpose(-1, -2) @ S  # sum_j k(x_j, x_i) s(x_j)
    return (drift + (rep if repulsion_scale == 1.0 else repulsion_scale * rep)) / X.shape[-2]


def svgd_step(X: Tensor, score_fn: ScoreFn, kernel: Kernel, eta: float, repulsion_scale: float = 1.0) -> Tensor:
    """One explicit Euler step of SVGD: ``X + eta * phi(X)``; ``X`` is ``(..., N, d)`` (``repulsion_scale``:
    see :func:`svgd_direction`)."""
    check_particles(X)
    return X + eta * svgd_direction(X, scores(score_fn, X), kernel, repulsion_scale)


def svgd_jacobian_rbf_std_normal(X: Tensor, h: float) -> Tensor:
    """Jacobian ``(B, N d, N d)`` of the stacked SVGD velocities ``Phi(X)`` for ``pi = N(0, I)`` (score
    ``-x``) and the RBF kernel of width ``h``, at particle sets ``X (B, N, d)``, in closed form.

    With ``delta = x_j - x_i``, ``k = k(x_j, x_i)`` and ``g = -x_j - delta / h^2`` (particle j's term in
    ``N phi_i``), the block ``d phi_i / d x_m`` is ``(1/N) [k_mi (-g delta^T / h^2 - (1 + 1/h^2) I)]`` for the
    j = m term, plus ``(1/N) sum_j k_ji (g delta^T / h^2 + I / h^2)`` on the diagonal block (m = i)."""
    if X.dim() != 3:
        raise ValueError(f"expected particle sets (B, N, d), got shape {tuple(X.shape)}")
    B, N, d = X.shape
    D = X.unsqueeze(-3) - X.unsqueeze(-2)                       # D[b, i, j] = x_j - x_i
    K = torch.exp(-(D * D).sum(-1) / (2.0 * h**2))              # k(x_j, x_i)
    G = -X.unsqueeze(-3) - D / h**2                             # -x_j - (x_j - x_i) / h^2
    outer = G.unsqueeze(-1) * D.unsqueeze(-2) / h**2            # g delta^T / h^2
    eye = torch.eye(d, dtype=X.dtype, device=X.device)
    J = -K[..., None, None] * (outer + (1.0 + 1.0 / h**2) * eye)  # d/dx_j of particle j's term on i
    idx = torch.arange(N, device=X.device)
    J[:, idx, idx] += (K[..., None, None] * (outer + eye / h**2)).sum(-3)   # d/dx_i of every term on i
    return (J / N).permute(0, 1, 3, 2, 4).reshape(B, N * d, N * d)


def _check_run(eta: float, n_steps: int, record_every: int) -> None:
    if not (eta > 0 and math.isfinite(eta)):
        raise ValueError(f"step size eta must be a positive finite number, got {eta}")
    if n_steps < 0 or record_every < 1:
        raise ValueError(f"need n_steps >= 0 and record_every >= 1, got {n_steps}, {record_every}")


def svgd(X0: Tensor, score_fn: ScoreFn, kernel: Kernel, eta: float, n_steps: int,
         record_every: int = 1, repulsion_scale: float = 1.0) -> tuple[Tensor, Tensor]:
    """Run ``n_steps`` SVGD steps from ``X0 (..., N, d)``, recording the V-statistic KSD^2.

    The KSD uses the Stein kernel of the same ``kernel`` and shares the score evaluations.
    ``repulsion_scale`` (see :func:`svgd_direction`) runs the degraded sampler; its KSD^2 is the true one.

    Returns
    -------
    X : (..., N, d) final particles.
    trace : (n_steps // record_every + 1, ...) KSD^2 after 0, r, 2r, ... steps (r = record_every).
    """
    check_particles(X0)
    _check_run(eta, n_steps, record_every)
    X, trace, n = X0.clone(), [], X0.shape[-2]
    for t in range(n_steps + 1):
        S = scores(score_fn, X)
        record = t % record_every == 0
        if record and t < n_steps and repulsion_scale == 1.0:  # KSD and step share one Gram pass
            drive, stein_sum = kernel.svgd_terms(X, S)
            trace.append(stein_sum / n**2)
            X = X + (eta / n) * drive
        elif record:  # at t = n_steps, or the degraded sampler: the true KSD, then the scaled step
            trace.append(ksd_from_scores(X, S, kernel))
            if t < n_steps:
                X = X + eta * svgd_direction(X, S, kernel, repulsion_scale)
        elif t < n_steps:  # at t = n_steps only the KSD may be recorded: no step beyond n_steps
            X = X + eta * svgd_direction(X, S, kernel, repulsion_scale)
    return X, torch.stack(trace)


def ula(X0: Tensor, score_fn: ScoreFn, eta: float, n_steps: int,
        generator: torch.Generator | None = None) -> Tensor:
    """Unadjusted Langevin: ``x <- x + eta s(x) + sqrt(2 eta) xi`` for independent chains ``X0 (..., N, d)``.

    The baseline with the same number of score evaluations as SVGD but no interaction. The result
    lives on ``X0``'s device; ``generator`` may live on another device (e.g. a CPU generator).
    """
    check_particles(X0)
    _check_run(eta, n_steps, 1)
    X = X0.clone()
    # draw the noise where the generator lives (a CPU generator cannot fill a CUDA tensor), then
    # move it: the chains stay on X0's device and a seeded CPU generator gives the same noise anywhere
    noise_device = generator.device if generator is not None else X.device
    for _ in range(n_steps):
        noise = torch.randn(X.shape, dtype=X.dtype, device=noise_device, generator=generator)
        X = X + eta * scores(score_fn, X) + math.sqrt(2.0 * eta) * noise.to(X.device)
    return X
