"""Spectral risks, their permutahedron dual, and the Euclidean projection onto a permutahedron.

A spectrum is a vector ``sigma`` of shape ``(n,)`` with ``0 <= sigma_1 <= ... <= sigma_n`` and
``sum(sigma) == 1``. The spectral risk of a loss vector ``l`` is ``sum_i sigma_i l_(i)`` with the losses
sorted ascending, and equals ``max_{lam in Pi(sigma)} lam @ l`` where ``Pi(sigma)`` (the permutahedron)
is the convex hull of the permutations of ``sigma`` (Ge & Jiang, ICLR 2025, eq. (2); Mehta et al. 2023).
"""

from __future__ import annotations

from typing import Callable

import numpy as np
from scipy.optimize import isotonic_regression

SPECTRA = ("cvar", "extremile", "esrm", "erm")
"""Valid ``kind`` values of :func:`spectral_weights`."""


def _cumulative_spectrum(kind: str, **params: float) -> Callable[[np.ndarray], np.ndarray]:
    """``S(t) = int_0^t s(u) du`` for the spectrum function ``s`` of ``kind`` on ``[0, 1]``."""
    if kind == "cvar":
        q = float(params.pop("q", 0.5))  # tail fraction: the mean of the worst q*n losses
        if not 0 < q <= 1:
            raise ValueError(f"cvar needs 0 < q <= 1, got q={q}")
        cdf = lambda t: np.maximum(t - (1.0 - q), 0.0) / q  # noqa: E731  s(t) = 1[t >= 1-q] / q
    elif kind == "extremile":
        r = float(params.pop("r", 2.0))  # the law of the max of r draws
        if r < 1:
            raise ValueError(f"extremile needs r >= 1, got r={r}")
        cdf = lambda t: t**r  # noqa: E731
    elif kind == "esrm":
        rho = float(params.pop("rho", 1.0))  # risk aversion of s(t) ~ exp(rho t)
        if rho <= 0:
            raise ValueError(f"esrm needs rho > 0, got rho={rho}")
        cdf = lambda t: np.expm1(rho * t) / np.expm1(rho)  # noqa: E731
    elif kind == "erm":
        cdf = lambda t: t  # noqa: E731
    else:
        raise ValueError(f"unknown spectrum kind {kind!r}; valid kinds: {', '.join(SPECTRA)}")
    if params:
        raise ValueError(f"unexpected parameters for {kind!r}: {sorted(params)}")
    return cdf


def spectral_weights(n: int, kind: str, **params: float) -> np.ndarray:
    """The spectrum ``sigma_i = S(i/n) - S((i-1)/n)`` of a spectral risk on ``n`` losses.

    Parameters
    ----------
    n : number of losses.
    kind : ``"cvar"`` (param ``q``, tail fraction, default 0.5: the superquantile at level 1-q),
        ``"extremile"`` (param ``r``, default 2), ``"esrm"`` (param ``rho``, default 1: exponential
        spectral risk measure) or ``"erm"`` (uniform weights, the plain average).

    Returns
    -------
    sigma : ndarray, shape (n,), nonnegative, nondecreasing, summing to 1.
    """
    if int(n) != n or n < 1:
        raise ValueError(f"n must be a positive integer, got {n}")
    cdf = _cumulative_spectrum(kind, **params)
    grid = np.arange(n + 1) / n
    sigma = np.diff(cdf(grid))
    sigma = np.maximum(sigma, 0.0)
    return sigma / sigma.sum()


def spectral_risk(losses: np.ndarray, sigma: np.ndarray) -> float:
    """``R_sigma(l) = sum_i sigma_i l_(i)``: sorted losses (ascending) against the spectrum.

    losses, sigma : shape (n,). Returns a float.
    """
    losses = np.asarray(losses, dtype=float)
    if losses.shape != np.shape(sigma):
        raise ValueError(f"losses {losses.shape} and sigma {np.shape(sigma)} must have the same shape")
    return float(np.sort(losses) @ sigma)


def vertex_weights(losses: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """A maximiser of ``lam @ losses`` over the permutahedron: ``sigma`` rearranged by the loss ranks.

    The i-th largest loss gets the i-th largest weight (rearrangement inequality). Shape (n,).
    """
    ranks = np.argsort(np.argsort(losses, kind="stable"), kind="stable")
    return np.asarray(sigma)[ranks]


def project_permutahedron(v: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """Euclidean projection of ``v`` onto the permutahedron ``Pi(sigma)``.

    With ``pi`` sorting ``v`` ascending, the projection is ``v - z o pi^{-1}`` where ``z`` is the
    isotonic (nondecreasing) regression of ``v[pi] - sigma``, computed by pool-adjacent-violators
    (:func:`scipy.optimize.isotonic_regression`), O(n log n) in all.

    Parameters
    ----------
    v : shape (n,), any real vector.
    sigma : shape (n,), nondecreasing spectrum.

    Returns
    -------
    lam : shape (n,), the point of ``Pi(sigma)`` closest to ``v``.
    """
    v = np.asarray(v, dtype=float)
    order = np.argsort(v, kind="stable")
    z = isotonic_regression(v[order] - sigma).x
    lam = np.empty_like(v)
    lam[order] = v[order] - z
    return lam


def shift_penalty(lam: np.ndarray) -> float:
    """The chi^2-type shift cost ``Omega(lam) = (n/2) ||lam - 1/n||^2`` of Mehta et al. (2024)."""
    n = lam.shape[0]
    return 0.5 * n * float(np.sum((lam - 1.0 / n) ** 2))


def smoothed_weights(losses: np.ndarray, sigma: np.ndarray, nu: float) -> np.ndarray:
    """``argmax_{lam in Pi(sigma)} lam @ l - nu * Omega(lam)`` = ``Proj(1/n + l / (n nu))``. Shape (n,)."""
    n = losses.shape[0]
    if nu <= 0:
        return vertex_weights(losses, sigma)
    return project_permutahedron(1.0 / n + losses / (n * nu), sigma)


def smoothed_risk(losses: np.ndarray, sigma: np.ndarray, nu: float) -> float:
    """``R_{sigma,nu}(l) = max_{lam in Pi(sigma)} lam @ l - nu Omega(lam)``, with ``R - nu D <= R_nu <= R``."""
    lam = smoothed_weights(losses, sigma, nu)
    return float(lam @ losses) - nu * shift_penalty(lam)


def smoothing_bound(sigma: np.ndarray) -> float:
    """``D = max_{lam in Pi(sigma)} Omega(lam) = (n/2) ||sigma - 1/n||^2``: ``0 <= R - R_nu <= nu D``."""
    return shift_penalty(np.asarray(sigma, dtype=float))


def coarsen_spectrum(sigma: np.ndarray, b: int) -> np.ndarray:
    """The spectrum of the same risk on a minibatch of ``b`` losses.

    The cumulative spectrum ``S(i/n) = sigma_1 + ... + sigma_i`` is interpolated linearly at ``k/b``
    and differenced; exact whenever ``S`` is linear on each cell (ERM, CVaR with ``q n`` integer)
    and a consistent approximation otherwise. Shape (b,).
    """
    n = sigma.shape[0]
    if not 1 <= b <= n:
        raise ValueError(f"batch size must be in [1, {n}], got {b}")
    cum = np.concatenate([[0.0], np.cumsum(sigma)])
    coarse = np.diff(np.interp(np.arange(b + 1) / b, np.arange(n + 1) / n, cum))
    return coarse / coarse.sum()
