"""Kendall's tau and a paired bootstrap of differences in tau.

``kendall_tau`` is the tau-b of ``scipy.stats.kendalltau`` (the paper's metric), written for
batches: ``tau_b = sum_{i<j} sx_ij sy_ij / sqrt(sum sx_ij^2 * sum sy_ij^2)`` with
``sx_ij = sign(x_i - x_j)``; pairs tied in ``x`` drop out of ``sum sx^2``, and likewise for ``y``.
"""

from __future__ import annotations

import numpy as np


def kendall_tau(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Kendall's tau-b between ``x`` and ``y`` along the last axis (``(..., n)``, batch axes
    broadcast). Equals ``scipy.stats.kendalltau(x, y).statistic`` for 1-d inputs; nan when one
    side is constant."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    sx = np.sign(x[..., :, None] - x[..., None, :])
    sy = np.sign(y[..., :, None] - y[..., None, :])
    num = (sx * sy).sum((-1, -2))
    den = np.sqrt((sx * sx).sum((-1, -2)) * (sy * sy).sum((-1, -2)))
    with np.errstate(invalid="ignore", divide="ignore"):
        return num / den


def paired_bootstrap_tau(pred_a: np.ndarray, pred_b: np.ndarray, true: np.ndarray, *, n_boot: int = 2000,
                         level: float = 0.95, seed: int = 0) -> dict[str, float]:
    """Paired bootstrap over test points of ``tau(pred_a, true) - tau(pred_b, true)``: the same
    resampled indices for both methods. Returns ``diff`` (on the full test set), the percentile
    interval ``lo``, ``hi`` at ``level`` and the bootstrap standard error ``se`` (nan when tau is
    undefined on every resample, e.g. for a constant prediction)."""
    rng = np.random.default_rng(seed)
    n = len(true)
    idx = rng.integers(n, size=(n_boot, n))
    diffs = []
    for chunk in np.array_split(idx, max(1, n_boot // 250)):
        diffs.append(kendall_tau(pred_a[chunk], true[chunk]) - kendall_tau(pred_b[chunk], true[chunk]))
    d = np.concatenate(diffs)
    d = d[np.isfinite(d)]
    if d.size == 0:                      # tau undefined on every resample (a constant prediction)
        nan = float("nan")
        return {"diff": float(kendall_tau(pred_a, true) - kendall_tau(pred_b, true)), "lo": nan, "hi": nan, "se": nan}
    a = (1 - level) / 2
    return {"diff": float(kendall_tau(pred_a, true) - kendall_tau(pred_b, true)),
            "lo": float(np.quantile(d, a)), "hi": float(np.quantile(d, 1 - a)), "se": float(d.std())}


def tau_difference(pred_a: np.ndarray, pred_b: np.ndarray, true: np.ndarray, level: float = 0.95) -> dict[str, float]:
    """``tau(pred_a, true) - tau(pred_b, true)`` on the same points (Kendall's tau-b), its standard
    error and a normal interval at ``level``. The standard error is that of a U-statistic of order
    two (Hoeffding): with ``h_i = n (sum_j a_ij / den_a - sum_j b_ij / den_b)`` for the concordance
    terms ``a_ij = sign(pa_i - pa_j) sign(y_i - y_j)`` (likewise ``b``) and the tau-b denominators
    ``den``, the mean of ``h`` is the difference and ``se = 2 sd(h) / sqrt(n)``. It needs one
    ``n x n`` matrix per method, where a bootstrap needs one per resample. Also returns each
    method's tau (``tau1``, ``tau2``) and its standard error (``se1``, ``se2``, the same formula)."""
    from statistics import NormalDist

    x = np.stack([np.asarray(pred_a, np.float64), np.asarray(pred_b, np.float64)])
    y = np.asarray(true, np.float64)
    n = len(y)
    sy = np.sign(y[:, None] - y[None, :])
    sx = np.sign(x[:, :, None] - x[:, None, :])
    den = np.sqrt((sx * sx).sum((-1, -2)) * (sy * sy).sum())
    h = n * (sx * sy).sum(-1) / den[:, None]                  # (2, n): each point's share of tau
    z = NormalDist().inv_cdf(0.5 + level / 2)
    se = lambda v: float(2 * v.std(ddof=1) / np.sqrt(n))
    diff, se_d = float(h[0].mean() - h[1].mean()), se(h[0] - h[1])
    return {"diff": diff, "se": se_d, "lo": diff - z * se_d, "hi": diff + z * se_d,
            "tau1": float(h[0].mean()), "tau2": float(h[1].mean()), "se1": se(h[0]), "se2": se(h[1])}


def seed_pooled_difference(pred_a: np.ndarray, pred_b: np.ndarray, true: np.ndarray,
                           level: float = 0.95) -> dict[str, float]:
    """``tau(a) - tau(b)`` over training seeds: ``pred_a`` and ``pred_b`` ``(S, n)``, or one of them
    ``(1, n)`` (one seed, paired with every seed of the other). Per seed
    :func:`tau_difference` gives ``d_s`` and ``se_s``; the pooled difference is the mean of ``d_s``
    and its standard error ``sqrt(mean se_s^2 + var_s d_s)``: the test-run error of one seed plus the
    spread between seeds (``ddof=1``; 0 for one seed). Also ``per_seed`` (the ``d_s``) and
    ``agree``: ``1`` if every ``d_s`` interval is above 0, ``-1`` if every one is below, else ``0``."""
    from statistics import NormalDist

    a, b = np.atleast_2d(pred_a), np.atleast_2d(pred_b)
    if a.shape[0] != b.shape[0]:              # one side has a single seed: pair it with every seed of the other
        if 1 not in (a.shape[0], b.shape[0]):
            raise ValueError(f"seed counts {a.shape[0]} and {b.shape[0]}: equal, or one of them 1")
        a, b = np.broadcast_arrays(a, b)
    per = [tau_difference(x, z, true, level) for x, z in zip(a, b)]
    d = np.array([p["diff"] for p in per])
    var_seed = float(d.var(ddof=1)) if len(d) > 1 else 0.0
    se = float(np.sqrt(np.mean([p["se"] ** 2 for p in per]) + var_seed))
    z = NormalDist().inv_cdf(0.5 + level / 2)
    agree = 1 if all(p["lo"] > 0 for p in per) else -1 if all(p["hi"] < 0 for p in per) else 0
    diff = float(d.mean())
    return {"diff": diff, "se": se, "lo": diff - z * se, "hi": diff + z * se, "per_seed": d.tolist(),
            "seed_sd": float(np.sqrt(var_seed)), "agree": agree}


def tau_contrast(preds: np.ndarray, weights: np.ndarray, true: np.ndarray) -> dict[str, float]:
    """A linear combination ``sum_k w_k tau(preds[k], true)`` of Kendall tau-b values on the same points
    (``preds`` ``(m, n)``, ``weights`` ``(m,)``) and its U-statistic standard error, as in
    :func:`tau_difference` (which is the contrast ``(1, -1)``): ``se = 2 sd(sum_k w_k h_k) / sqrt(n)``."""
    x = np.asarray(preds, np.float64)
    y = np.asarray(true, np.float64)
    n = len(y)
    sy = np.sign(y[:, None] - y[None, :])
    h = np.zeros(n)
    for w, p in zip(np.asarray(weights, np.float64), x):
        sx = np.sign(p[:, None] - p[None, :])
        h += w * n * (sx * sy).sum(-1) / np.sqrt((sx * sx).sum() * (sy * sy).sum())
    return {"value": float(h.mean()), "se": float(2 * h.std(ddof=1) / np.sqrt(n))}


def seed_pooled_contrast(preds: np.ndarray, weights: np.ndarray, true: np.ndarray,
                         level: float = 0.95) -> dict[str, float]:
    """:func:`tau_contrast` over training seeds (``preds`` ``(m, S, n)``: every method with the same
    ``S`` seeds, paired by seed), pooled like :func:`seed_pooled_difference`: the mean of the per-seed
    values with ``se = sqrt(mean se_s^2 + var_s value_s)``, a normal interval at ``level`` and
    ``per_seed``."""
    from statistics import NormalDist

    p = np.asarray(preds, np.float64)
    per = [tau_contrast(p[:, s], weights, true) for s in range(p.shape[1])]
    v = np.array([q["value"] for q in per])
    se = float(np.sqrt(np.mean([q["se"] ** 2 for q in per]) + (v.var(ddof=1) if len(v) > 1 else 0.0)))
    z = NormalDist().inv_cdf(0.5 + level / 2)
    return {"diff": float(v.mean()), "se": se, "lo": float(v.mean()) - z * se, "hi": float(v.mean()) + z * se,
            "per_seed": v.tolist()}
