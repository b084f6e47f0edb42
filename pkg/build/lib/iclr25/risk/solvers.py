"""Deterministic reference solvers: the smoothed optimum ``w*_nu`` and a certified ``F*``.

``F* = min_w max_{lam in Pi(sigma)} lam @ l(w) + mu/2 ||w||^2``. Weak duality gives a certificate:
for every ``w`` and every ``lam in Pi(sigma)``, ``D(lam) <= F* <= F(w)`` with the dual function
``D(lam) = min_w lam @ l(w) + mu/2 ||w||^2`` (a strongly convex problem in d variables, solved
exactly: closed form for the squared loss, Newton's method for the logistic loss).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

from .problems import LinearProblem
from .spectral import project_permutahedron, shift_penalty, smoothed_weights


def dual_value(problem: LinearProblem, lam: np.ndarray, w0: np.ndarray | None = None,
               tol: float = 1e-13, max_iter: int = 100) -> tuple[float, np.ndarray]:
    """``D(lam) = min_w lam @ l(w) + mu/2 ||w||^2`` and its minimiser ``w(lam)`` (d,).

    A lower bound on ``F*`` whenever ``lam`` lies in the permutahedron ``Pi(sigma)``.
    """
    X, mu = problem.X, problem.mu
    eye = np.eye(problem.d)
    if problem.loss == "squared":
        Xl = X.T * lam
        w = np.linalg.solve(Xl @ X + mu * eye, Xl @ problem.y)
    else:
        w = np.zeros(problem.d) if w0 is None else np.array(w0, dtype=float)
        value = lambda v: float(lam @ problem.losses(v) + 0.5 * mu * v @ v)  # noqa: E731
        for _ in range(max_iter):
            z = X @ w
            g = X.T @ (lam * problem.dphi(z)) + mu * w
            if np.linalg.norm(g) < tol:
                break
            H = (X.T * (lam * problem.d2phi(z))) @ X + mu * eye
            step = np.linalg.solve(H, g)
            t, f0 = 1.0, value(w)
            while value(w - t * step) > f0 - 0.25 * t * (g @ step) and t > 1e-10:
                t *= 0.5
            w = w - t * step
    return float(lam @ problem.losses(w) + 0.5 * mu * w @ w), w


def smoothed_objective(problem: LinearProblem, w: np.ndarray, sigma: np.ndarray,
                       nu: float) -> tuple[float, np.ndarray]:
    """``F_nu(w) = max_{lam in Pi} lam @ l(w) - nu Omega(lam) + mu/2 ||w||^2`` and its gradient (d,).

    The gradient is ``sum_i lam*_i grad l_i(w) + mu w`` (Danskin) with ``lam*`` the smoothed weights.
    """
    z = problem.X @ w
    losses = problem.phi(z)
    lam = smoothed_weights(losses, sigma, nu)
    value = float(lam @ losses) - nu * shift_penalty(lam) + 0.5 * problem.mu * float(w @ w)
    return value, problem.X.T @ (lam * problem.dphi(z)) + problem.mu * w


def minimize_smoothed(problem: LinearProblem, sigma: np.ndarray, nu: float,
                      w0: np.ndarray | None = None, max_iter: int = 20000) -> np.ndarray:
    """``w*_nu = argmin F_nu`` by L-BFGS (scipy) to machine precision; shape (d,).

    This is the point the smoothing-based baselines (LSVRG, Prospect, SaddleSAGA) converge to.
    """
    w0 = np.zeros(problem.d) if w0 is None else w0
    res = minimize(lambda w: smoothed_objective(problem, w, sigma, nu), w0, jac=True, method="L-BFGS-B",
                   options={"maxiter": max_iter, "maxcor": 30, "ftol": 1e-16, "gtol": 1e-12})
    return res.x


def kkt_weights(problem: LinearProblem, w: np.ndarray, sigma: np.ndarray, tol: float,
                iters: int = 300) -> np.ndarray:
    """A dual point ``lam in Pi(sigma)`` that nearly satisfies the optimality conditions at ``w``.

    At the optimum, ``lam*`` maximises ``lam @ l(w*)`` over ``Pi(sigma)`` (so it is ``sigma`` in loss
    order, shared freely inside groups of tied losses) and ``sum_i lam*_i grad l_i(w*) + mu w* = 0``.
    Losses whose sorted gaps are below ``tol`` (relative) form tie groups; inside each group the
    weights range over the permutahedron of that group's slice of ``sigma`` (a face of ``Pi``), and
    accelerated projected gradient (FISTA) minimises the stationarity residual over that face.
    The result is feasible for every ``tol``, so ``D(lam)`` is always a valid lower bound on ``F*``.
    """
    losses = problem.losses(w)
    order = np.argsort(losses, kind="stable")
    sorted_losses = losses[order]
    cuts = np.flatnonzero(np.diff(sorted_losses) > tol * max(1.0, np.abs(sorted_losses).max())) + 1
    groups = [g for g in np.split(np.arange(problem.n), cuts) if g.size > 1]
    lam = np.empty(problem.n)
    lam[order] = sigma
    if not groups:
        return lam
    idx = np.concatenate([order[g] for g in groups])
    J = problem.X[idx] * problem.dphi(problem.X @ w)[idx, None]  # (m, d) per-sample gradients
    resid0 = problem.weighted_grad(w, lam)  # stationarity residual at the vertex
    x0 = lam[idx].copy()
    bounds = np.cumsum([0] + [g.size for g in groups])

    def project(v: np.ndarray) -> np.ndarray:
        out = np.empty_like(v)
        for k, g in enumerate(groups):
            out[bounds[k]:bounds[k + 1]] = project_permutahedron(v[bounds[k]:bounds[k + 1]], sigma[g])
        return out

    step = 1.0 / max(np.linalg.norm(J, 2) ** 2, 1e-300)
    x, y, t = x0.copy(), x0.copy(), 1.0
    for _ in range(iters):  # minimise ||J^T (x - x0) + resid0||^2 / 2 over the face
        x_new = project(y - step * (J @ (J.T @ (y - x0) + resid0)))
        t_new = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
        y = x_new + (t - 1.0) / t_new * (x_new - x)
        if np.max(np.abs(x_new - x)) < 1e-17:
            x = x_new
            break
        x, t = x_new, t_new
    lam[idx] = x
    return lam


@dataclass(frozen=True)
class Reference:
    """A certified optimum: ``lower = D(lam) <= F* <= upper = F(w)``, ``lam`` in ``Pi(sigma)``."""

    w: np.ndarray
    lam: np.ndarray
    upper: float
    lower: float

    @property
    def gap(self) -> float:
        """The duality gap ``F(w) - D(lam) >= F(w) - F*``."""
        return self.upper - self.lower


def reference_optimum(problem: LinearProblem, sigma: np.ndarray,
                      nus: tuple[float, ...] = tuple(10.0 ** -k for k in range(1, 11)),
                      tols: tuple[float, ...] = (1e-10, 1e-8, 1e-6), rtol: float = 1e-12) -> Reference:
    """``F*`` of the unsmoothed problem by smoothing continuation, certified by duality.

    Primal: for each ``nu`` (decreasing, warm-started) L-BFGS solves the smoothed problem; as
    ``F(w*_nu) - F* <= nu D``, the last iterate is the upper bound ``F(w) >= F*``. Dual: the
    tie-group KKT weights of :func:`kkt_weights` at that ``w`` (for each ``tol`` until the gap is
    below ``rtol * max(1, |F|)``) give ``D(lam) <= F*``. The gap ``upper - lower`` certifies ``F*``.
    """
    w = np.zeros(problem.d)
    for nu in nus:
        w = minimize_smoothed(problem, sigma, nu, w)
    upper = problem.objective(w, sigma)
    best_lam, lower = sigma, -np.inf
    for tol in tols:
        lam = kkt_weights(problem, w, sigma, tol)
        value = dual_value(problem, lam, w)[0]
        if value > lower:
            best_lam, lower = lam, value
        if upper - lower <= rtol * max(1.0, abs(upper)):
            break
    return Reference(w, best_lam, upper, lower)
