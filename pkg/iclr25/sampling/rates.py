"""Rates in the number of particles N, and the closed-form i.i.d. references they are judged against.

Exponents: a quantity ``q(N)`` (a mean over independent runs) falls like ``N^g``; ``g`` is read from
``log q`` against ``log N``, either by least squares over all N or as the **last local slope** (the two
largest N). ``power`` rescales the exponent: ``power = 0.5`` gives the exponent of ``sqrt(q)`` (the KSD
from the KSD^2), ``power = 1`` that of ``q`` itself (a squared W2).

References for the Gaussian target ``pi = N(0, I_d)`` and a Gaussian start ``rho_0 = N(m0, s0^2 I)``:
the Langevin diffusion ``dx = -x dt + sqrt(2) dW`` keeps the law Gaussian,
``rho_t = N(m0 e^-t, (s0^2 e^-2t + 1 - e^-2t) I)``, and the expected error of N independent draws from
``rho_t`` has a closed form both for the RBF kernel's KSD^2 and, in one dimension, for the exact W2^2
to ``N(0, 1)``.

The one verdict rule is :func:`verdict_below` (:func:`iclr25.common.stats.three_way` on the negated
interval): a statistic whose interval lies below a threshold holds, above it fails, else undecided.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats
from scipy.special import ndtr, ndtri

from iclr25.common.stats import three_way


def verdict_below(ci: Sequence[float], threshold: float) -> bool | None:
    """``True`` if the interval ``ci = (lo, hi)`` lies below ``threshold``, ``False`` if above it, else
    ``None`` (undecided)."""
    lo, hi = float(ci[0]), float(ci[1])
    return three_way(-hi, -lo, -threshold)


def lsq_slope(values: Sequence[float], ns: Sequence[int], power: float = 0.5) -> float:
    """Least-squares slope of ``power * log(values)`` on ``log N``."""
    return float(np.polyfit(np.log(ns), power * np.log(values), 1)[0])


def local_slopes(values: Sequence[float], ns: Sequence[int], power: float = 0.5) -> np.ndarray:
    """Slopes of ``power * log(values)`` on ``log N`` between successive N: ``(len(ns) - 1,)``."""
    return np.diff(power * np.log(np.asarray(values, dtype=float))) / np.diff(np.log(np.asarray(ns, dtype=float)))


def exponent(per_N: Sequence[np.ndarray], ns: Sequence[int], rng: np.random.Generator, n_boot: int = 1000,
             last: bool = False, power: float = 0.5, ref: float = 0.0) -> tuple[float, tuple[float, float]]:
    """Exponent in N of ``mean(per_N[i]) ** power`` minus ``ref``, with its 95% run-to-run bootstrap interval
    (runs resampled within each N). ``per_N``: one array of runs per N; ``last=True``: the last local slope
    (the two largest N) instead of the least-squares fit over all N; ``ref``: a reference exponent to
    subtract (0: the raw exponent)."""
    fit = (lambda v: local_slopes(v, ns, power)[-1]) if last else (lambda v: lsq_slope(v, ns, power))
    arrays = [np.asarray(v, dtype=float) for v in per_N]
    boot = [fit([v[rng.integers(0, len(v), len(v))].mean() for v in arrays]) - ref for _ in range(n_boot)]
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return fit([v.mean() for v in arrays]) - ref, (float(lo), float(hi))


def ratio_slope(a: Sequence[np.ndarray], b: Sequence[np.ndarray], ns: Sequence[int],
                paired: bool = True) -> tuple[float, tuple[float, float]]:
    """Least-squares slope in ``log N`` of ``log(mean a / mean b)`` (one array of runs per N) and its 95%
    Student-t interval: delta method per N, independent across N, ``df`` = fewest runs minus one. ``paired``:
    ``a`` and ``b`` come from the same runs (their covariance enters), else from independent samples. A
    ``b`` with zero variance (a constant reference) gives the exponent of ``a`` relative to it."""
    x = np.log(np.asarray(ns, dtype=float))
    x = x - x.mean()
    w = x / (x * x).sum()
    y, var = [], []
    for u, v in zip(a, b):
        u, v = np.asarray(u, dtype=float), np.asarray(v, dtype=float)
        mu, mv = u.mean(), v.mean()
        y.append(math.log(mu / mv))
        cov = 2 * np.cov(u, v)[0, 1] / (mu * mv * len(u)) if paired else 0.0
        var.append(u.var(ddof=1) / (mu**2 * len(u)) + v.var(ddof=1) / (mv**2 * len(v)) - cov)
    g, se = float(w @ np.array(y)), float(math.sqrt(max(float(w**2 @ np.array(var)), 0.0)))
    q = float(stats.t.ppf(0.975, min(min(len(u), len(v)) for u, v in zip(a, b)) - 1))
    return g, (g - q * se, g + q * se)


def gaussian_langevin_law(t: float, m0: np.ndarray, s0: float) -> tuple[np.ndarray, float]:
    """Mean ``(d,)`` and per-coordinate sd of the Langevin law ``rho_t`` for ``pi = N(0, I)`` from
    ``rho_0 = N(m0, s0^2 I)``: ``(m0 e^-t, sqrt(s0^2 e^-2t + 1 - e^-2t))``."""
    m0 = np.asarray(m0, dtype=float)
    return m0 * math.exp(-t), math.sqrt(s0**2 * math.exp(-2 * t) + 1 - math.exp(-2 * t))


def iid_expected_ksd2_rbf(mean: np.ndarray, sd: float, N: int, h: float) -> float:
    """Expected V-statistic KSD^2 (RBF kernel of width ``h``, target ``N(0, I_d)``) of ``N`` independent
    draws from ``N(mean, sd^2 I_d)``: ``(1 - 1/N) KSD^2(rho) + E k_pi(x, x) / N``.

    With ``x, x'`` independent from ``rho``, ``x - x' ~ N(0, 2 sd^2 I)`` is independent of ``x + x'``, and
    the Stein kernel of the RBF kernel is ``k(x, x') [s(x).s(x') + (d - r^2/h^2)/h^2 + (x - x').(s(x') - s(x))/h^2]``
    with ``s(x) = -x``; its expectation is a Gaussian integral of ``k`` against the law of ``x - x'`` times a
    quadratic, which gives the population term; on the diagonal ``k_pi(x, x) = |x|^2 + d/h^2``."""
    mean = np.asarray(mean, dtype=float).ravel()
    d, mu2, tau2 = len(mean), float(mean @ mean), 2 * sd**2
    a, b = (h**2 / (h**2 + tau2)) ** (d / 2), d * tau2 * h**2 / (h**2 + tau2)
    pop = a * ((mu2 + d * sd**2 / 2 + d / h**2) - b * (1 / 4 + 1 / h**2 + 1 / h**4))   # KSD^2(rho)
    return (1 - 1 / N) * pop + (mu2 + d * sd**2 + d / h**2) / N


def _bin_quantile_means(N: int) -> np.ndarray:
    """``I1_i = int_{(i-1)/N}^{i/N} Phi^-1(u) du = phi(z_{i-1}) - phi(z_i)``, ``z_i = Phi^-1(i/N)``: ``(N,)``."""
    z = ndtri(np.arange(N + 1) / N)
    phi = np.exp(-0.5 * np.where(np.isfinite(z), z, 0.0) ** 2) / math.sqrt(2 * math.pi)
    phi[[0, -1]] = 0.0
    return phi[:-1] - phi[1:]


def normal_order_means(N: int, n_grid: int = 4_001) -> np.ndarray:
    """Expected order statistics ``E z_(i)`` of N independent standard normals, ``(N,)``, by quadrature of
    ``x`` against the density of the i-th smallest, ``Beta(Phi(x); i, N - i + 1) phi(x)``."""
    x = np.linspace(-12.0, 12.0, n_grid)
    i = np.arange(1, N + 1)[:, None]
    logpdf = stats.beta.logpdf(ndtr(x)[None, :], i, N - i + 1) - 0.5 * x**2 - 0.5 * math.log(2 * math.pi)
    return np.trapezoid(x * np.exp(logpdf), x, axis=1)


def iid_expected_w2sq_std_normal_1d(N: int) -> float:
    """``e_N = E W2^2`` between the empirical measure of N independent draws from ``N(0, 1)`` and ``N(0, 1)``.

    The exact 1-D W2^2 of sorted points ``x_(i)`` is ``sum_i [x_(i)^2/N - 2 x_(i) I1_i + I2_i]``; taking the
    expectation, ``E sum x_(i)^2 / N = 1`` and ``sum I2_i = 1``, so ``e_N = 2 - 2 sum_i E z_(i) I1_i``
    (``e_1 = 2``)."""
    return float(2.0 - 2.0 * normal_order_means(N) @ _bin_quantile_means(N))


def iid_expected_w2sq_gaussian_1d(mean: float, sd: float, N: int, e_N: float | None = None) -> float:
    """``E W2^2`` between the empirical measure of N independent draws from ``N(mean, sd^2)`` and ``N(0, 1)``:
    ``mean^2 + (sd - 1)^2 + sd e_N``, with ``e_N`` of :func:`iid_expected_w2sq_std_normal_1d` (pass it to
    avoid recomputing). Draws are ``mean + sd z``; expanding the W2^2 of the sorted points leaves
    ``mean^2 + sd^2 + 1 - 2 sd sum_i E z_(i) I1_i``, and the last sum is ``1 - e_N / 2``."""
    e = iid_expected_w2sq_std_normal_1d(N) if e_N is None else e_N
    return float(mean**2 + (sd - 1.0) ** 2 + sd * e)
