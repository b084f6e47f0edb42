"""Stochastic optimisers for ``min_w R_sigma(l(w)) + mu/2 ||w||^2`` on a :class:`LinearProblem`.

* :func:`sorel` - SOREL (Ge & Jiang, ICLR 2025): accelerated proximal primal-dual method whose dual
  step is an exact projection onto the permutahedron and whose primal proximal subproblem is solved
  by one SVRG epoch. Minimises the *original* spectral risk.
* :func:`lsvrg`, :func:`prospect`, :func:`saddle_saga` - the smoothing-based baselines (Mehta et al.
  2023, 2024; Palaniappan & Bach 2016). They minimise the smoothed objective
  ``F_nu(w) = max_{lam in Pi} lam @ l(w) - nu Omega(lam) + mu/2 ||w||^2`` and stall at ``F(w*_nu)``.
* :func:`spectral_sgd` - minibatch SGD with the spectrum applied to the sorted minibatch losses.

Every optimiser counts per-sample gradient evaluations (a loss comes free with a gradient at the
same point: for a linear model both cost one inner product), and records the *unsmoothed*
objective ``F(w)`` about once per pass over the data (the monitoring itself is not counted).
All linear-model gradients are ``phi'(x_i @ w) x_i``, so tables store the scalars ``phi'``.
The per-sample loops of SOREL and LSVRG (SVRG epochs) and of Prospect are compiled with numba
(plain IEEE arithmetic, no fastmath); SaddleSAGA and SGD run in numpy.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from scipy.optimize import isotonic_regression

from .problems import LinearProblem
from .spectral import coarsen_spectrum, project_permutahedron, smoothed_weights, vertex_weights

try:  # numba compiles the scalar inner loops; without it they run as (slow) plain Python
    import numba
except ImportError:  # pragma: no cover - numba is a dependency of the package
    numba = None

METHODS = ("sorel", "lsvrg", "prospect", "saddle_saga", "sgd")


@dataclass
class Trace:
    """What an optimiser did: ``evals[k]`` gradient evaluations, ``values[k] = F(w)`` there,
    ``iterates[k]`` that ``w`` (d,), ``seconds[k]`` optimiser wall time (monitoring excluded);
    final iterate ``w`` and dual ``lam``."""

    evals: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    iterates: list[np.ndarray] = field(default_factory=list)
    w: np.ndarray | None = None
    lam: np.ndarray | None = None

    def record(self, evals: int, problem: LinearProblem, w: np.ndarray, sigma: np.ndarray,
               seconds: float) -> None:
        value = problem.objective(w, sigma)
        self.iterates.append(np.array(w, dtype=float))
        self.evals.append(int(evals))
        self.values.append(value if np.isfinite(value) else np.inf)
        self.seconds.append(seconds)

    @property
    def diverged(self) -> bool:
        """True once ``F`` is not finite or exceeds 1e3 times its starting value (runs stop)."""
        return not np.isfinite(self.values[-1]) or self.values[-1] > 1e3 * abs(self.values[0]) + 1.0

    def at(self, evals: float) -> float:
        """``F`` at the last record with at most ``evals`` gradient evaluations."""
        k = np.searchsorted(np.asarray(self.evals), evals, side="right") - 1
        return self.values[max(k, 0)]


def _scalar_fns(problem: LinearProblem) -> tuple[Callable[[float, int], float],
                                                  Callable[[float, int], float]]:
    """``(phi(z, i), phi'(z, i))`` for one sample on Python floats (the inner loops are scalar)."""
    y = problem.y.tolist()
    if problem.loss == "squared":
        return (lambda z, i: 0.5 * (z - y[i]) * (z - y[i])), (lambda z, i: z - y[i])

    def loss(z: float, i: int) -> float:
        m = y[i] * z  # log(1 + exp(-m)), overflow-safe
        return math.log1p(math.exp(-m)) if m > 0 else -m + math.log1p(math.exp(m))

    def dloss(z: float, i: int) -> float:
        m = y[i] * z  # -y / (1 + exp(m)), overflow-safe
        if m > 0:
            e = math.exp(-m)
            return -y[i] * e / (1.0 + e)
        return -y[i] / (1.0 + math.exp(m))

    return loss, dloss


class _Clock:
    """Optimiser wall time, paused while the objective is monitored."""

    def __init__(self) -> None:
        self.total, self.t0 = 0.0, time.perf_counter()

    def pause(self) -> float:
        self.total += time.perf_counter() - self.t0
        return self.total

    def resume(self) -> None:
        self.t0 = time.perf_counter()


def _project_warm(v: np.ndarray, order: np.ndarray,
                  sigma: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`project_permutahedron` of ``v`` (n,) given the sorting permutation ``order`` of a
    nearby vector: sorting ``v[order]`` (nearly sorted) is O(n) for the stable (tim)sort.
    Returns the projection and the sorting permutation of ``v``."""
    vals = v[order]
    resort = np.argsort(vals, kind="stable")
    order, vals = order[resort], vals[resort]
    lam = np.empty_like(v)
    lam[order] = vals - isotonic_regression(vals - sigma).x
    return lam, order


def _njit(fn: Callable) -> Callable:
    """Compile ``fn`` with numba (no fastmath: IEEE arithmetic in program order; cached on disk),
    or leave it as plain Python if numba is missing."""
    if numba is None:  # pragma: no cover
        return fn
    return numba.njit(cache=True, nogil=True)(fn)


@_njit
def _dphi_nb(z, yi, logistic):  # pragma: no cover - compiled
    """``phi'(z)`` of one sample: ``z - y`` (squared) or ``-y / (1 + exp(y z))`` (logistic)."""
    if not logistic:
        return z - yi
    m = yi * z
    if m > 0:
        e = math.exp(-m)
        return -yi * e / (1.0 + e)
    return -yi / (1.0 + math.exp(m))


@_njit
def _phi_nb(z, yi, logistic):  # pragma: no cover - compiled
    """``phi(z)`` of one sample: ``(z - y)^2 / 2`` or ``log(1 + exp(-y z))`` (overflow-safe)."""
    if not logistic:
        return 0.5 * (z - yi) * (z - yi)
    m = yi * z
    if m > 0:
        return math.log1p(math.exp(-m))
    return -m + math.log1p(math.exp(m))


@_njit
def _svrg_kernel(X, y, logistic, w, lam_n, d_snap, lr, shrink, shift, idx):  # pragma: no cover
    """In place: ``w <- shrink w - lr n lam_i (phi'_i(w) - phi'_i(w~)) x_i - shift`` for i in idx."""
    d = X.shape[1]
    for t in range(idx.shape[0]):
        i = idx[t]
        z = 0.0
        for a in range(d):
            z += X[i, a] * w[a]
        c = lr * lam_n[i] * (_dphi_nb(z, y[i], logistic) - d_snap[i])
        for a in range(d):
            w[a] = shrink * w[a] - c * X[i, a] - shift[a]


@_njit
def _pav_project(vals, sigma, lam_sorted, blk_sum, blk_cnt):  # pragma: no cover - compiled
    """``lam_sorted = vals - z``, z the isotonic (nondecreasing) regression of ``vals - sigma``
    (``vals`` ascending), by pool-adjacent-violators on blocks (sums and counts; O(n))."""
    n = vals.shape[0]
    top = -1
    for k in range(n):
        top += 1
        blk_sum[top] = vals[k] - sigma[k]
        blk_cnt[top] = 1
        while top > 0 and blk_sum[top - 1] * blk_cnt[top] > blk_sum[top] * blk_cnt[top - 1]:
            blk_sum[top - 1] += blk_sum[top]
            blk_cnt[top - 1] += blk_cnt[top]
            top -= 1
    k = 0
    for b in range(top + 1):
        m = blk_sum[b] / blk_cnt[b]
        for _ in range(blk_cnt[b]):
            lam_sorted[k] = vals[k] - m
            k += 1


@_njit
def _prospect_kernel(X, y, logistic, sigma, nu, lr, mu, idx, w, losses, gtab, lam, lam_tab, gbar,
                     order, pos):  # pragma: no cover - compiled
    """Prospect steps for the indices ``idx``, in place on its state (see :func:`prospect`).

    ``order`` sorts ``losses`` ascending and ``pos`` is its inverse; after a loss changes, its entry
    moves to its new rank by adjacent swaps (the reference code's bubble update), and
    ``lam = Proj_Pi(1/n + losses / (n nu))`` is recomputed by one PAV pass in that order."""
    n, d = X.shape
    scale = 1.0 / (1.0 + lr * mu)
    inv_n, nn = 1.0 / n, n * nu
    vals = np.empty(n)
    lam_sorted = np.empty(n)
    blk_sum = np.empty(n)
    blk_cnt = np.empty(n, dtype=np.int64)
    for t in range(idx.shape[0]):
        i = idx[t]
        zi = 0.0
        for a in range(d):
            zi += X[i, a] * w[a]
        gi = _dphi_nb(zi, y[i], logistic)
        cur = lam[i]
        delta = cur * gi - lam_tab[i] * gtab[i]
        c = n * delta
        for a in range(d):
            w[a] = scale * (w[a] - lr * (c * X[i, a] + gbar[a]))
        losses[i] = _phi_nb(zi, y[i], logistic)
        p = pos[i]                                   # move i to its new rank in the sorted order
        while p > 0 and losses[order[p - 1]] > losses[i]:
            order[p] = order[p - 1]
            pos[order[p]] = p
            p -= 1
        while p < n - 1 and losses[order[p + 1]] < losses[i]:
            order[p] = order[p + 1]
            pos[order[p]] = p
            p += 1
        order[p] = i
        pos[i] = p
        for k in range(n):
            vals[k] = inv_n + losses[order[k]] / nn
        _pav_project(vals, sigma, lam_sorted, blk_sum, blk_cnt)
        for k in range(n):
            lam[order[k]] = lam_sorted[k]
        for a in range(d):
            gbar[a] += delta * X[i, a]
        lam_tab[i] = cur
        gtab[i] = gi


def _svrg_epoch(problem: LinearProblem, w: np.ndarray, lam_n: np.ndarray, d_snap: np.ndarray,
                lr: float, shrink: float, shift: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """SVRG inner steps ``w <- shrink * w - lr * n lam_i (phi'_i(w) - phi'_i(w~)) x_i - shift``.

    ``shift = lr * (snapshot gradient + any constant prox term)``; ``lam_n = n * lam``. Returns the
    new ``w`` (compiled loop: :func:`_svrg_kernel`)."""
    w = np.array(w, dtype=float)
    _svrg_kernel(problem.X, problem.y.astype(float), problem.loss == "logistic", w,
                 np.ascontiguousarray(lam_n, dtype=float), np.ascontiguousarray(d_snap, dtype=float),
                 float(lr), float(shrink), np.ascontiguousarray(shift, dtype=float),
                 np.ascontiguousarray(idx, dtype=np.int64))
    return w


def sorel(problem: LinearProblem, sigma: np.ndarray, *, lr: float, passes: float, seed: int = 0,
          c_dual: float = 0.1, c_prox: float = 20.0, prox: bool = True, extrapolate: bool = True,
          growing_dual: bool = True) -> Trace:
    """SOREL (Ge & Jiang 2025, Alg. 1 with the schedule of its code), one SVRG epoch per outer step.

    Outer step k (w_k current, w_{k-1} previous):
      ``v = l(w_k) + theta_k (l(w_k) - l(w_{k-1}))``, ``lam_{k+1} = Proj_Pi(lam_k + tau_k v)``;
      ``w_{k+1} ~ argmin_w lam_{k+1} @ l(w) + mu/2 ||w||^2 + ||w - w_k||^2 / (2 eta_k)`` by n SVRG steps
      of size ``lr`` from ``w_k`` (snapshot ``w_k``);
      ``theta = k/(k+1)``, ``tau = c_dual (k+1)/n``, ``eta = c_prox n/(k+1)`` (k counts outer steps;
      as in the official code the step k uses the eta updated to ``eta_{k+1}`` before the primal solve).

    Cost: n evaluations (losses and snapshot gradients at w_k) + 2n (inner steps) per outer step. The
    losses at w_0 that give lam_0 serve the first outer step (w is still w_0), so the count starts at 0
    as for LSVRG.

    Ablations (controls; the defaults are SOREL): ``prox=False`` drops the proximal term (1/eta = 0),
    ``extrapolate=False`` sets theta = 0, ``growing_dual=False`` keeps tau = c_dual / n constant.

    Parameters
    ----------
    problem, sigma : the problem and its spectrum (n,). lr : SVRG step size. passes : budget in
    gradient evaluations / n. seed : sampling seed. c_dual, c_prox : the dual and prox constants.
    """
    X, n, mu = problem.X, problem.n, problem.mu
    rng = np.random.default_rng(seed)
    trace, clock = Trace(), _Clock()
    w = np.zeros(problem.d)
    z = X @ w
    losses_prev = problem.phi(z)
    lam = vertex_weights(losses_prev, sigma)  # lam_0: sigma in the loss order at w_0
    evals, budget = 0, passes * n             # those losses are the first outer step's (counted there)
    theta, tau, eta, k = 0.0, c_dual / n, c_prox * n, 0
    trace.record(evals, problem, w, sigma, clock.pause())
    while evals + 3 * n <= budget:
        clock.resume()
        if k > 0:
            z = X @ w
            losses = problem.phi(z)
        else:
            losses = losses_prev
        lam = project_permutahedron(lam + tau * (losses + theta * (losses - losses_prev)), sigma)
        losses_prev = losses
        k += 1
        theta = k / (k + 1) if extrapolate else 0.0
        tau = c_dual * (k + 1) / n if growing_dual else c_dual / n
        inv_eta = (k + 1) / (c_prox * n) if prox else 0.0
        d_snap = problem.dphi(z)
        shift = lr * (X.T @ (lam * d_snap) - w * inv_eta)  # snapshot gradient and the prox centre w_k
        w = _svrg_epoch(problem, w, n * lam, d_snap, lr, 1.0 - lr * (mu + inv_eta), shift,
                        rng.integers(n, size=n))
        evals += 3 * n
        trace.record(evals, problem, w, sigma, clock.pause())
        if trace.diverged:
            break
    trace.w, trace.lam = w, lam
    return trace


def lsvrg(problem: LinearProblem, sigma: np.ndarray, *, lr: float, passes: float, nu: float,
          seed: int = 0) -> Trace:
    """LSVRG (Mehta et al. 2023): SVRG on the smoothed risk with weights frozen per epoch.

    Each epoch: ``lam = argmax_{Pi} lam @ l(w~) - nu Omega(lam)`` at the snapshot ``w~``, then n steps
    ``w <- w - lr (n lam_i (grad l_i(w) - grad l_i(w~)) + sum_j lam_j grad l_j(w~) + mu w)``. 3n evals.
    """
    X, n, mu = problem.X, problem.n, problem.mu
    rng = np.random.default_rng(seed)
    trace, clock = Trace(), _Clock()
    w, lam = np.zeros(problem.d), None
    evals, budget = 0, passes * n
    trace.record(evals, problem, w, sigma, clock.pause())
    while evals + 3 * n <= budget:
        clock.resume()
        z = X @ w
        lam = smoothed_weights(problem.phi(z), sigma, nu)
        d_snap = problem.dphi(z)
        shift = lr * (X.T @ (lam * d_snap))
        w = _svrg_epoch(problem, w, n * lam, d_snap, lr, 1.0 - lr * mu, shift, rng.integers(n, size=n))
        evals += 3 * n
        trace.record(evals, problem, w, sigma, clock.pause())
        if trace.diverged:
            break
    trace.w, trace.lam = w, lam
    return trace


def _saga_tables(problem: LinearProblem, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    z = problem.X @ w
    return problem.phi(z), problem.dphi(z)


def prospect(problem: LinearProblem, sigma: np.ndarray, *, lr: float, passes: float, nu: float,
             seed: int = 0) -> Trace:
    """Prospect (Mehta, Roulet, Pillutla & Harchaoui, ICLR 2024), with one index per step.

    Tables: losses ``l``, gradient scalars ``g``, weights ``lam_tab``; ``lam = lam*_nu(l)`` from the
    loss table (needs ``nu > 0``). Step: draw i, ``v = n lam_i grad l_i(w) - n lam_tab_i g_i x_i +
    sum_j lam_tab_j g_j x_j``, ``w <- (w - lr v) / (1 + lr mu)`` (prox of the l2 term); then refresh
    ``l_i`` with its loss at the pre-step iterate, recompute ``lam`` (a PAV projection in the
    maintained loss order), and replace table entry i by (``grad l_i(w_old)``, old ``lam_i``).
    The reference code draws a second, independent index j for the loss refresh, evaluated at the
    new iterate; here one index serves both (one evaluation per step). Compiled steps:
    :func:`_prospect_kernel`.
    """
    if nu <= 0:
        raise ValueError(f"Prospect needs a positive shift cost nu, got {nu}")
    X, n = problem.X, problem.n
    rng = np.random.default_rng(seed)
    trace, clock = Trace(), _Clock()
    w = np.zeros(problem.d)
    losses, gtab = _saga_tables(problem, w)
    lam = smoothed_weights(losses, sigma, nu)
    lam_tab = lam.copy()
    gbar = X.T @ (lam_tab * gtab)
    evals, budget = n, passes * n
    trace.record(evals, problem, w, sigma, clock.pause())
    order = np.argsort(losses, kind="stable").astype(np.int64)
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    y, logistic, sig = problem.y.astype(float), problem.loss == "logistic", np.asarray(sigma, dtype=float)
    idx = rng.integers(n, size=int(budget - evals)).astype(np.int64)
    for start in range(0, len(idx), n):            # one pass between records
        clock.resume()
        chunk = idx[start:start + n]
        _prospect_kernel(X, y, logistic, sig, float(nu), float(lr), float(problem.mu), chunk, w, losses,
                         gtab, lam, lam_tab, gbar, order, pos)
        evals += len(chunk)
        trace.record(evals, problem, w, sigma, clock.pause())
        if trace.diverged:
            break
    trace.w, trace.lam = w, lam
    return trace


def saddle_saga(problem: LinearProblem, sigma: np.ndarray, *, lr: float, passes: float, nu: float,
                seed: int = 0, lr_dual: float | None = None) -> Trace:
    """SaddleSAGA (Palaniappan & Bach 2016) on the smoothed saddle problem, as in the SOREL code.

    Primal: the SAGA step of :func:`prospect`. Dual: a proximal ascent step on
    ``lam @ l - nu Omega(lam)`` with the SAGA loss estimate ``e = l_table + n (l_i(w) - l_table_i) e_i``:
    ``lam <- Proj_Pi(1/n + (lam + tau e - 1/n) / (1 + tau n nu))``, ``tau = lr_dual / n``.
    """
    X, n, mu = problem.X, problem.n, problem.mu
    phi, dphi = _scalar_fns(problem)
    rng = np.random.default_rng(seed)
    trace, clock = Trace(), _Clock()
    tau = (lr if lr_dual is None else lr_dual) / n
    w = np.zeros(problem.d)
    losses, gtab = _saga_tables(problem, w)
    lam = vertex_weights(losses, sigma)
    lam_tab = lam.copy()
    gbar = X.T @ (lam_tab * gtab)
    evals, budget = n, passes * n
    trace.record(evals, problem, w, sigma, clock.pause())
    scale, inv_n, denom = 1.0 / (1.0 + lr * mu), 1.0 / n, 1.0 + tau * n * nu
    order = np.argsort(lam, kind="stable")
    for t, i in enumerate(rng.integers(n, size=int(budget - evals)).tolist()):
        if t and t % n == 0:
            trace.record(evals, problem, w, sigma, clock.pause())
            if trace.diverged:
                break
            clock.resume()
        xi = X[i]
        zi = float(xi @ w)
        gi = dphi(zi, i)
        li = phi(zi, i)
        cur = lam[i]
        w = scale * (w - lr * (n * (cur * gi - lam_tab[i] * gtab[i]) * xi + gbar))
        est = losses.copy()
        est[i] += n * (li - losses[i])
        lam, order = _project_warm(inv_n + (lam + tau * est - inv_n) / denom, order, sigma)
        losses[i] = li
        gbar += (cur * gi - lam_tab[i] * gtab[i]) * xi
        lam_tab[i], gtab[i] = cur, gi
        evals += 1
    trace.record(evals, problem, w, sigma, clock.pause())
    trace.w, trace.lam = w, lam
    return trace


def spectral_sgd(problem: LinearProblem, sigma: np.ndarray, *, lr: float, passes: float,
                 batch: int = 32, seed: int = 0, decay: bool = False) -> Trace:
    """Minibatch SGD: the spectrum of a batch of b losses (:func:`coarsen_spectrum`) applied to the
    sorted minibatch losses, ``w <- w - lr_t (sum_j sigma^b_(j) grad l_j(w) + mu w)`` (a biased
    estimate of a subgradient of ``F``). Batches without replacement, reshuffled every epoch.
    ``lr_t = lr`` (constant, as in the reference code) or, with ``decay``, ``lr / sqrt(1 + e)``
    with ``e`` the passes over the data done so far (gradient evaluations / n)."""
    X, n, mu = problem.X, problem.n, problem.mu
    rng = np.random.default_rng(seed)
    trace, clock = Trace(), _Clock()
    sigma_b = coarsen_spectrum(sigma, batch)
    w = np.zeros(problem.d)
    evals, budget, next_record = 0, passes * n, n
    trace.record(evals, problem, w, sigma, clock.pause())
    clock.resume()
    while evals + batch <= budget and not trace.diverged:
        perm = rng.permutation(n)
        for start in range(0, n - batch + 1, batch):
            if evals + batch > budget:
                break
            B = perm[start:start + batch]
            z = X[B] @ w
            weights = vertex_weights(problem.phi(z, B), sigma_b)
            step = lr / math.sqrt(1.0 + evals / n) if decay else lr
            w = w - step * (X[B].T @ (weights * problem.dphi(z, B)) + mu * w)
            evals += batch
            if evals >= next_record:
                trace.record(evals, problem, w, sigma, clock.pause())
                if trace.diverged:
                    break
                clock.resume()
                next_record += n
    trace.record(evals, problem, w, sigma, clock.pause())
    trace.w = w
    return trace


def optimize(method: str, problem: LinearProblem, sigma: np.ndarray, **kwargs: float) -> Trace:
    """Run ``method`` (one of :data:`METHODS`) with its keyword arguments (``lr``, ``passes``, ...)."""
    runners = {"sorel": sorel, "lsvrg": lsvrg, "prospect": prospect, "saddle_saga": saddle_saga,
               "sgd": spectral_sgd}
    if method not in runners:
        raise ValueError(f"unknown method {method!r}; valid methods: {', '.join(METHODS)}")
    return runners[method](problem, sigma, **kwargs)
