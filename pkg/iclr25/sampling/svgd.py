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


def svgd_direction(X: Tensor, S: Tensor, kernel: Kernel) -> Tensor:
    """The SVGD velocity ``phi (..., N, d)`` at particles ``X`` with scores ``S`` (both ``(..., N, d)``)."""
    check_particles(X, S)
    K = kernel.matrix(X, X)  # K[j, i] = k(x_j, x_i)
    drift = K.transpose(-1, -2) @ S  # sum_j k(x_j, x_i) s(x_j)
    return (drift + kernel.repulsion(X, X)) / X.shape[-2]


def svgd_step(X: Tensor, score_fn: ScoreFn, kernel: Kernel, eta: float) -> Tensor:
    """One explicit Euler step of SVGD: ``X + eta * phi(X)``; ``X`` is ``(..., N, d)``."""
    check_particles(X)
    return X + eta * svgd_direction(X, scores(score_fn, X), kernel)


def _check_run(eta: float, n_steps: int, record_every: int) -> None:
    if not (eta > 0 and math.isfinite(eta)):
        raise ValueError(f"step size eta must be a positive finite number, got {eta}")
    if n_steps < 0 or record_every < 1:
        raise ValueError(f"need n_steps >= 0 and record_every >= 1, got {n_steps}, {record_every}")


def svgd(X0: Tensor, score_fn: ScoreFn, kernel: Kernel, eta: float, n_steps: int,
         record_every: int = 1) -> tuple[Tensor, Tensor]:
    """Run ``n_steps`` SVGD steps from ``X0 (..., N, d)``, recording the V-statistic KSD^2.

    The KSD uses the Stein kernel of the same ``kernel`` and shares the score evaluations.

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
        if record and t < n_steps:  # the KSD and the step share one pass over the Gram quantities
            drive, stein_sum = kernel.svgd_terms(X, S)
            trace.append(stein_sum / n**2)
            X = X + (eta / n) * drive
        elif record:
            trace.append(ksd_from_scores(X, S, kernel))
        elif t < n_steps:  # at t = n_steps only the KSD may be recorded: no step beyond n_steps
            X = X + eta * svgd_direction(X, S, kernel)
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
