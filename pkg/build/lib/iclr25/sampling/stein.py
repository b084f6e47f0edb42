"""Stein kernels and the kernel Stein discrepancy (KSD) of a set of particles.

For particles ``x_1..x_N`` with scores ``s_i = grad log pi(x_i)`` and a base kernel ``k``,
the KSD of the empirical measure ``mu_N = (1/N) sum_i delta_{x_i}`` is the V-statistic

    KSD^2(mu_N | pi) = (1/N^2) sum_{i,j} k_pi(x_i, x_j)        (diagonal included),

the quantity that SVGD dissipates. The U-statistic (diagonal dropped, divided by N(N-1)) is the
unbiased estimator of KSD^2(mu | pi) for i.i.d. draws from mu.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from .kernels import Kernel

ScoreFn = Callable[[Tensor], Tensor]
KSD_KINDS = ("V", "U")


def check_particles(X: Tensor, S: Tensor | None = None) -> None:
    """Raise ``ValueError`` unless ``X`` is a floating tensor ``(..., N, d)`` (and ``S`` matches)."""
    if not isinstance(X, Tensor) or not X.is_floating_point() or X.ndim < 2:
        raise ValueError("particles must be a floating torch tensor of shape (..., N, d), got "
                         f"{type(X).__name__} {tuple(getattr(X, 'shape', ()))}")
    if S is not None and (not isinstance(S, Tensor) or S.shape != X.shape):
        raise ValueError(f"scores must have the particles' shape {tuple(X.shape)}, "
                         f"got {tuple(getattr(S, 'shape', ()))}")


def scores(score_fn: ScoreFn, X: Tensor) -> Tensor:
    """``score_fn(X)``, checked to have the shape of ``X``."""
    S = score_fn(X)
    check_particles(X, S)
    return S


def stein_kernel_matrix(X: Tensor, S: Tensor, kernel: Kernel) -> Tensor:
    """Stein kernel matrix ``K_pi[..., i, j] = k_pi(x_i, x_j)``.

    Parameters
    ----------
    X : (..., N, d) particles.
    S : (..., N, d) scores ``grad log pi`` at the particles.
    kernel : the base kernel ``k``.

    Returns
    -------
    (..., N, N) symmetric matrix.
    """
    check_particles(X, S)
    return kernel.stein(X, X, S, S)


def ksd_from_scores(X: Tensor, S: Tensor, kernel: Kernel, kind: str = "V") -> Tensor:
    """KSD^2 of the particles ``X (..., N, d)`` given their scores ``S``; returns shape ``(...)``."""
    if kind not in KSD_KINDS:
        raise ValueError(f"unknown KSD kind {kind!r}; valid kinds: {', '.join(KSD_KINDS)}")
    Kp = stein_kernel_matrix(X, S, kernel)
    n = X.shape[-2]
    if kind == "V":
        return Kp.sum((-1, -2)) / n**2
    if n < 2:
        raise ValueError("the U-statistic needs at least 2 particles")
    return (Kp.sum((-1, -2)) - Kp.diagonal(dim1=-2, dim2=-1).sum(-1)) / (n * (n - 1))


def ksd(X: Tensor, score_fn: ScoreFn, kernel: Kernel, kind: str = "V") -> Tensor:
    """Squared kernel Stein discrepancy of the empirical measure of ``X`` to ``pi``.

    Parameters
    ----------
    X : (..., N, d) particles; leading dimensions are independent batches (e.g. seeds).
    score_fn : maps (..., N, d) points to their scores ``grad log pi``, same shape.
    kernel : base kernel of the Stein kernel.
    kind : ``"V"`` (default) the V-statistic, diagonal included (what SVGD dissipates);
        ``"U"`` the unbiased U-statistic (can be negative).

    Returns
    -------
    (...) tensor of KSD^2 values (0-dim for a single particle set).
    """
    if kind not in KSD_KINDS:
        raise ValueError(f"unknown KSD kind {kind!r}; valid kinds: {', '.join(KSD_KINDS)}")
    check_particles(X)
    return ksd_from_scores(X, scores(score_fn, X), kernel, kind)
