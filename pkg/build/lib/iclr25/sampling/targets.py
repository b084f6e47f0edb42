"""Target distributions given by their score ``s(x) = grad log pi(x)`` on points ``(..., N, d)``."""

from __future__ import annotations

import torch
from torch import Tensor

from .stein import ScoreFn


def gaussian_score(mean: Tensor, cov: Tensor) -> ScoreFn:
    """Score of ``N(mean, cov)``: ``s(x) = -cov^{-1} (x - mean)``; ``mean (d,)``, ``cov (d, d)``.

    The score lives on the device of ``mean`` and ``cov`` (points must be there too).
    """
    if mean.ndim != 1 or cov.shape != (mean.shape[0], mean.shape[0]):
        raise ValueError(f"need mean (d,) and cov (d, d), got {tuple(mean.shape)}, {tuple(cov.shape)}")
    prec = torch.linalg.inv(cov)  # symmetric, so (x - m) @ prec is the row form of prec (x - m)
    return lambda X: -(X - mean) @ prec


def standard_gaussian_score(X: Tensor) -> Tensor:
    """Score of ``N(0, I_d)``: ``s(x) = -x``."""
    return -X


def gaussian_mixture_score(means: Tensor, std: float, weights: Tensor | None = None) -> ScoreFn:
    """Score of ``sum_k w_k N(m_k, std^2 I)``; ``means (K, d)``, ``weights (K,)`` (uniform if None).

    ``s(x) = sum_k r_k(x) (m_k - x) / std^2`` with responsibilities ``r_k(x)`` (a softmax).
    """
    K = means.shape[0]
    w = torch.full((K,), 1.0 / K, dtype=means.dtype, device=means.device) if weights is None else weights
    if w.shape != (K,) or not std > 0:
        raise ValueError("need weights of shape (K,) and std > 0")
    logw = torch.log(w / w.sum()).to(means.device)

    def score(X: Tensor) -> Tensor:
        diff = means - X.unsqueeze(-2)  # (..., N, K, d)
        logits = logw - (diff * diff).sum(-1) / (2 * std**2)
        r = torch.softmax(logits, dim=-1).unsqueeze(-1)
        return (r * diff).sum(-2) / std**2

    return score


def logistic_posterior_score(A: Tensor, y: Tensor, prior_std: float = 1.0) -> ScoreFn:
    """Score of the Bayesian logistic-regression posterior over weights ``w (p,)``.

    ``log pi(w) = sum_i [y_i a_i.w - log(1 + exp(a_i.w))] - |w|^2 / (2 prior_std^2) + const``
    for a design ``A (n, p)`` (add a column of ones for an intercept) and labels ``y (n,)`` in {0, 1};
    ``s(w) = A^T (y - sigmoid(A w)) - w / prior_std^2``.
    """
    if A.ndim != 2 or y.shape != (A.shape[0],) or not prior_std > 0:
        raise ValueError("need A (n, p), y (n,) and prior_std > 0")
    y = y.to(A)  # A's dtype and device
    return lambda W: (y - torch.sigmoid(W @ A.T)) @ A - W / prior_std**2
