"""The information-theoretic lower bound of a batch grid on the needle family (re-derived).

The family: ``K`` actions with features of norm at most 1, ``theta_j = Delta e_j`` for a uniformly
drawn ``j``, Gaussian noise of standard deviation ``sigma``; whenever an action other than ``j`` is
played the round costs at least ``margin * Delta`` (for the jittered basis contexts
``x_a = (1 - jitter) e_a + jitter u`` with a unit ``u``, ``margin = 1 - 3 jitter``).

The argument (Le Cam / Pinsker against the reference ``theta = 0``): the policy of batch ``m`` is a
function of the first ``t_{m-1}`` rounds (and of contexts, which do not depend on ``theta``), so the
fraction ``f_j`` of batch ``m`` spent on action ``j`` satisfies
``E_j f_j <= E_0 f_j + sqrt(KL_j / 2)`` with ``KL_j = Delta^2 E_0 sum_{t <= t_{m-1}} x_{t,j}^2 / (2 sigma^2)``.
Because ``sum_j x_{t,j}^2 <= 1``, the ``KL_j`` sum to at most ``Delta^2 t_{m-1} / (2 sigma^2)`` and
Cauchy-Schwarz gives ``mean_j E_j f_j <= 1/K + (Delta / (2 sigma)) sqrt(t_{m-1} / K)``. Hence the
regret of batch ``m``, averaged over ``j``, is at least

    margin * Delta * (t_m - t_{m-1}) * (1 - 1/K - (Delta / (2 sigma)) sqrt(t_{m-1} / K)),

maximal at ``Delta_m = (1 - 1/K) sigma sqrt(K / t_{m-1})`` (``Delta = 1`` for the first batch), where
it equals ``c0 (t_m - t_{m-1}) sigma sqrt(K / t_{m-1})`` with ``c0 = margin (1 - 1/K)^2 / 2``.
"""

from __future__ import annotations

import numpy as np


def needle_margin(jitter: float) -> float:
    """The least per-round regret, in units of the gap, of a wrong action on jittered basis contexts:
    ``(1 - jitter) - jitter`` for the best action's own coordinate minus ``jitter`` for any other's."""
    return 1.0 - 3.0 * jitter


def batch_lower_bound(grid, gaps, noise_sd: float, K: int, margin: float = 1.0) -> np.ndarray:
    """The lower bound on the regret of every batch of ``grid`` at every gap, shape ``(G, M)``.

    ``grid``: the batch ends ``t_1 < ... < t_M`` (``t_0 = 0``); ``gaps``: ``(G,)`` gaps ``Delta``.
    Entry ``(g, m)`` is ``margin Delta_g (t_m - t_{m-1}) max(0, 1 - 1/K - Delta_g sqrt(t_{m-1}/K) / (2 sigma))``,
    the bound on batch ``m``'s regret averaged over the position of the better action (module docstring).
    """
    grid = np.asarray(grid, dtype=float)
    prev = np.concatenate([[0.0], grid[:-1]])
    gaps = np.asarray(gaps, dtype=float)[:, None]
    share = np.clip(1.0 - 1.0 / K - gaps * np.sqrt(prev / K) / (2.0 * noise_sd), 0.0, None)
    return margin * gaps * (grid - prev) * share


def info_gap(grid, noise_sd: float, K: int) -> np.ndarray:
    """The gap that maximises each batch's bound, ``(M,)``: ``(1 - 1/K) sigma sqrt(K / t_{m-1})``,
    capped at 1 (the first batch, ``t_0 = 0``, has no information: ``Delta = 1``)."""
    grid = np.asarray(grid, dtype=float)
    prev = np.concatenate([[0.0], grid[:-1]])
    with np.errstate(divide="ignore"):
        gap = (1.0 - 1.0 / K) * noise_sd * np.sqrt(K / prev)
    return np.minimum(gap, 1.0)


def grid_lower_bound(grid, noise_sd: float, K: int, margin: float = 1.0) -> float:
    """``max_m`` of each batch's bound at its own maximising gap: the worst case over the needle family
    of any algorithm on ``grid`` is at least this."""
    gaps = info_gap(grid, noise_sd, K)
    return float(max(batch_lower_bound(grid, [g], noise_sd, K, margin)[0, m] for m, g in enumerate(gaps)))


def best_grid_bound(T: int, M: int, noise_sd: float, K: int, margin: float = 1.0, n: int = 400) -> tuple[float, np.ndarray]:
    """``LB*_M(T)``: the least :func:`grid_lower_bound` over ``M``-batch grids ending at ``T``, the
    bound that holds for every ``M``-batch algorithm whatever its grid; returns ``(value, grid)``.

    The batch ends ``t_1 < ... < t_{M-1}`` are searched on ``n`` log-spaced integers in ``[1, T)``
    (every combination, vectorised; ``M <= 3``), then on every integer between the neighbours of the
    best point; each batch's gap is capped at 1 as in :func:`info_gap`. The value is the minimum over
    that search (exact over integer grids unless the coarse search missed the basin)."""
    if M == 1:
        return float(margin * T * (1.0 - 1.0 / K)), np.array([T], float)
    if M > 3:
        raise ValueError("best_grid_bound searches M <= 3")
    ts = np.unique(np.round(np.geomspace(1.0, T - 1.0, n)))
    first = lambda t1: margin * (1.0 - 1.0 / K) * t1                              # batch 1 at the gap 1

    def later(prev, end):
        """Batch (prev, end] at its own maximising gap, capped at 1 (the bound of batch_lower_bound)."""
        gap = np.minimum((1.0 - 1.0 / K) * noise_sd * np.sqrt(K / prev), 1.0)
        share = np.clip(1.0 - 1.0 / K - gap * np.sqrt(prev / K) / (2.0 * noise_sd), 0.0, None)
        return margin * gap * (end - prev) * share

    def around(i):
        """Every integer between the coarse neighbours of point i."""
        return np.arange(ts[max(i - 1, 0)], ts[min(i + 1, len(ts) - 1)] + 1.0)

    def search2(c1):
        vals = np.maximum(first(c1), later(c1, T))
        i = int(vals.argmin())
        return float(vals[i]), i

    def search3(c1, c2):
        t1, t2 = np.meshgrid(c1, c2, indexing="ij")
        vals = np.maximum(np.maximum(first(t1), later(t1, t2)), later(t2, T))
        vals = np.where(t2 > t1, vals, np.inf)
        i, j = np.unravel_index(int(vals.argmin()), vals.shape)
        return float(vals[i, j]), i, j

    if M == 2:
        _, i = search2(ts)
        fine = around(i)
        v, k = search2(fine)
        return v, np.array([fine[k], T], float)
    _, i, j = search3(ts, ts)
    f1, f2 = around(i), around(j)
    v, k, m = search3(f1, f2)
    return v, np.array([f1[k], f2[m], T], float)
