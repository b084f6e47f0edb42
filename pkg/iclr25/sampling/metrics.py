"""Distances used to judge a sampler: Gaussian KL in closed form, W2 by exact optimal transport."""

from __future__ import annotations

import math

import numpy as np
import ot
import torch
from torch import Tensor


def gaussian_kl(m0: Tensor, S0: Tensor, m1: Tensor, S1: Tensor) -> float:
    """``KL(N(m0, S0) || N(m1, S1))`` in closed form; ``m (d,)``, ``S (d, d)``.

    ``= (tr(S1^-1 S0) + (m1 - m0)^T S1^-1 (m1 - m0) - d + log det S1 - log det S0) / 2``.
    """
    d = m0.shape[0]
    if m1.shape != (d,) or S0.shape != (d, d) or S1.shape != (d, d):
        raise ValueError("need m0, m1 of shape (d,) and S0, S1 of shape (d, d)")
    dm = (m1 - m0).unsqueeze(-1)
    quad = (dm.T @ torch.linalg.solve(S1, dm)).squeeze()
    tr = torch.trace(torch.linalg.solve(S1, S0))
    logdet = torch.linalg.slogdet(S1)[1] - torch.linalg.slogdet(S0)[1]
    return float(0.5 * (tr + quad - d + logdet))


def wasserstein2(X: Tensor, Y: Tensor) -> float:
    """``W2`` between the uniform empirical measures on ``X (N, d)`` and ``Y (M, d)``.

    Exact optimal transport (POT's network simplex, ``ot.emd2``) with squared Euclidean cost.
    """
    if X.ndim != 2 or Y.ndim != 2 or X.shape[1] != Y.shape[1]:
        raise ValueError(f"need X (N, d), Y (M, d), got {tuple(X.shape)}, {tuple(Y.shape)}")
    x = X.detach().cpu().double().numpy()
    y = Y.detach().cpu().double().numpy()
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("W2 of non-finite points (did the sampler diverge?)")
    a, b = np.full(len(x), 1.0 / len(x)), np.full(len(y), 1.0 / len(y))
    cost = ot.dist(x, y, metric="sqeuclidean")
    return math.sqrt(max(float(ot.emd2(a, b, cost, numItermax=10_000_000)), 0.0))


def wasserstein2_std_normal_1d(X: Tensor) -> Tensor:
    """Exact ``W2`` between the uniform empirical measure on each row of ``X (..., N)`` and ``N(0, 1)``.

    In one dimension the optimal coupling is monotone: the i-th smallest point takes the quantiles
    ``u`` in ``[(i-1)/N, i/N]``, so ``W2^2 = sum_i [x_(i)^2 / N - 2 x_(i) I1_i + I2_i]`` with
    ``I1_i = int Phi^-1(u) du = phi(z_{i-1}) - phi(z_i)`` and
    ``I2_i = int Phi^-1(u)^2 du = 1/N - (z_i phi(z_i) - z_{i-1} phi(z_{i-1}))``, ``z_i = Phi^-1(i/N)``.
    """
    from scipy.special import ndtri

    x = np.sort(X.detach().cpu().double().numpy(), axis=-1)
    n = x.shape[-1]
    z = ndtri(np.arange(n + 1) / n)  # -inf .. inf
    phi = np.exp(-0.5 * np.where(np.isfinite(z), z, 0.0) ** 2) / math.sqrt(2 * math.pi)
    phi[[0, -1]] = 0.0
    zphi = np.where(np.isfinite(z), z, 0.0) * phi
    i1, i2 = phi[:-1] - phi[1:], 1.0 / n - (zphi[1:] - zphi[:-1])
    w2sq = (x * x / n - 2 * x * i1 + i2).sum(-1)
    return torch.from_numpy(np.sqrt(np.maximum(w2sq, 0.0)))


def sliced_wasserstein2_std_normal(X: Tensor, directions: Tensor) -> Tensor:
    """Sliced ``W2`` of the uniform empirical measure on each ``X (..., N, d)`` to ``N(0, I_d)``.

    ``SW2^2 = (1/L) sum_l W2^2(theta_l # mu_N, N(0, 1))`` over the unit ``directions (L, d)``: every
    projection of ``N(0, I_d)`` is ``N(0, 1)``, so each term is the exact one-dimensional ``W2``
    (:func:`wasserstein2_std_normal_1d`) and no reference sample (with its own bias) is needed; the
    average over a fixed set of directions is a Monte-Carlo estimate of the integral over the sphere.
    Returns ``(...)``.
    """
    if directions.ndim != 2 or directions.shape[1] != X.shape[-1]:
        raise ValueError(f"need directions (L, d) with d = {X.shape[-1]}, got {tuple(directions.shape)}")
    norms = directions.norm(dim=1)
    if not torch.allclose(norms, torch.ones_like(norms)):
        raise ValueError("directions must have unit length")
    proj = (X.detach().double().cpu() @ directions.double().cpu().T).movedim(-1, -2)  # (..., L, N)
    return (wasserstein2_std_normal_1d(proj) ** 2).mean(-1).sqrt()
