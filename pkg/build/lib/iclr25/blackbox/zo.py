"""Zeroth-order (derivative-free) gradient estimators from function values only.

The Gaussian two-point estimator with smoothing radius ``mu`` and ``q`` directions,

.. math::  \\hat g = \\frac1q \\sum_{r=1}^q \\frac{f(z+\\mu u_r) - f(z-\\mu u_r)}{2\\mu}\\, u_r,
           \\qquad u_r \\sim \\mathcal N(0, I_d),

is an unbiased estimate of the gradient of the Gaussian-smoothed function
:math:`f_\\mu(z) = \\mathbb E_u f(z + \\mu u)`. For a quadratic :math:`f_\\mu = f + \\text{const}`,
so it is unbiased for :math:`\\nabla f` itself, and its error has
:math:`\\mathbb E\\|\\hat g - \\nabla f\\|^2 = (d+1)\\|\\nabla f\\|^2 / q`
(:func:`zo_variance_gaussian`).
"""

from __future__ import annotations

from typing import Callable

import torch

ZO_DISTS = ("gaussian", "sphere")


def zo_directions(n_dirs: int, d: int, *, dist: str = "gaussian",
                  generator: torch.Generator | None = None, dtype: torch.dtype = torch.float32,
                  device: torch.device | str | None = None) -> torch.Tensor:
    """``n_dirs`` random directions in R^d, shape (n_dirs, d), on ``device``.

    ``"gaussian"``: u ~ N(0, I_d); ``"sphere"``: u uniform on the unit sphere.
    """
    if dist not in ZO_DISTS:
        raise ValueError(f"unknown direction distribution {dist!r}; valid: {', '.join(ZO_DISTS)}")
    if n_dirs < 1:
        raise ValueError(f"n_dirs must be >= 1, got {n_dirs}")
    # draw where the generator lives (a CPU generator cannot fill a CUDA tensor), then move
    u = torch.randn(n_dirs, d, generator=generator, dtype=dtype,
                    device=None if generator is None else generator.device)
    u = u.to(device) if device is not None else u
    return u if dist == "gaussian" else u / u.norm(dim=1, keepdim=True)


def zo_gradient(f: Callable[[torch.Tensor], torch.Tensor], z: torch.Tensor, mu: float, n_dirs: int,
                *, dist: str = "gaussian", two_point: bool = True,
                generator: torch.Generator | None = None) -> torch.Tensor:
    """Zeroth-order estimate of the gradient of ``f`` at ``z`` from ``n_dirs`` random directions.

    Parameters
    ----------
    f : callable
        Vectorised objective: points (m, d) -> values (m,). It is called **once**, on all the
        points the estimator needs (2·n_dirs for two-point, n_dirs + 1 for forward differences),
        so a black box can evaluate them in one batched request. ``f`` may treat the r-th point
        specially (e.g. evaluate it on the r-th example of a minibatch): point r and point
        n_dirs + r always share direction r.
    z : Tensor (d,)
    mu : float
        Smoothing radius (> 0).
    n_dirs : int
        Number of directions q averaged.
    dist : "gaussian" or "sphere"
        Gaussian u ~ N(0, I); or u uniform on the unit sphere, with the factor d that makes the
        estimator unbiased for the sphere-smoothed function.
    two_point : bool
        Central difference [f(z+μu) − f(z−μu)]/(2μ) (default) or forward difference
        [f(z+μu) − f(z)]/μ.

    Returns
    -------
    Tensor (d,): the estimate ĝ.
    """
    if mu <= 0:
        raise ValueError(f"mu must be > 0, got {mu}")
    if z.dim() != 1:
        raise ValueError(f"z must be a vector (d,), got shape {tuple(z.shape)}")
    d = z.shape[0]
    u = zo_directions(n_dirs, d, dist=dist, generator=generator, dtype=z.dtype, device=z.device)
    if two_point:
        vals = f(torch.cat([z + mu * u, z - mu * u]))
        delta = (vals[:n_dirs] - vals[n_dirs:]) / (2 * mu)
    else:
        vals = f(torch.cat([z + mu * u, z[None]]))
        delta = (vals[:n_dirs] - vals[n_dirs]) / mu
    if vals.shape[0] != (2 * n_dirs if two_point else n_dirs + 1):
        raise ValueError("f must return one value per point")
    g = (delta[:, None] * u).mean(0)
    return g * d if dist == "sphere" else g


def zo_variance_gaussian(grad_norm_sq: float, d: int, n_dirs: int = 1) -> float:
    """E‖ĝ − ∇f‖² of the Gaussian two-point estimator on a quadratic: (d + 1)‖∇f‖² / q.

    Derivation: for a quadratic the central difference is exact, ĝ = (uᵀg)u, and with
    u ~ N(0, I) Isserlis' theorem gives E[(uᵀg)²‖u‖²] = (d + 2)‖g‖², so the trace of the
    covariance is (d + 2)‖g‖² − ‖g‖²; averaging q independent directions divides it by q.
    """
    return (d + 1) * grad_norm_sq / n_dirs
