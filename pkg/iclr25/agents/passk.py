"""pass^k and pass@k: reliability and coverage of an agent over repeated trials of the same tasks.

Run every task ``n`` times and count its successes ``c_t``. If the trials of task ``t`` succeed
independently with probability ``p_t``, then (Yao et al., 2025, tau-bench)

* ``pass^k = mean_t C(c_t, k) / C(n, k)`` estimates ``E_t[p_t^k]``, the chance that **all** of
  ``k`` fresh trials succeed (it falls with ``k``), and
* ``pass@k = mean_t 1 - C(n - c_t, k) / C(n, k)`` (Chen et al., 2021) estimates
  ``E_t[1 - (1 - p_t)^k]``, the chance that **at least one** succeeds (it rises with ``k``).

Both are unbiased for every ``k <= n``; the module also holds what the chapter builds on them: the
inverse binomial transform (a per-task success histogram from published pass^1..n), a homogeneity
test, the range of pass^m that pass^1..n leave open (a moment problem, exactly or up to sampling
noise), a Beta-binomial fit, and bootstraps over tasks.
"""

from __future__ import annotations

import math
from fractions import Fraction
from itertools import product
from typing import Iterable, Sequence

import numpy as np

#: A trial counts as a success when ``|reward - 1| <= SUCCESS_TOL`` (as tau-bench's run script).
SUCCESS_TOL = 1e-6


def is_success(reward: float) -> bool:
    """``True`` when a reward counts as a success: within :data:`SUCCESS_TOL` of 1."""
    return abs(float(reward) - 1.0) <= SUCCESS_TOL


def success_counts(rewards: np.ndarray) -> np.ndarray:
    """Per-task success counts ``c`` (shape ``(T,)``) from a reward table of shape ``(T, n)``.

    Every task must have the same ``n`` trials; a crashed trial is a reward of 0, not a gap.
    """
    rewards = np.asarray(rewards, dtype=float)
    if rewards.ndim != 2:
        raise ValueError(f"rewards must be (tasks, trials), got shape {rewards.shape}")
    if np.isnan(rewards).any():
        raise ValueError("missing trials: count them as reward 0, do not drop them")
    return (np.abs(rewards - 1.0) <= SUCCESS_TOL).sum(axis=1)


def _check(c: np.ndarray, n: int, k: int) -> np.ndarray:
    c = np.asarray(c)
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got k={k}, n={n}")
    if c.size and (c.min() < 0 or c.max() > n):
        raise ValueError(f"success counts must lie in 0..{n}")
    return c.astype(int)


def pass_hat_k(successes: Sequence[int] | np.ndarray, n: int, k: int) -> float:
    """pass^k = mean over tasks of ``C(c, k) / C(n, k)``: the unbiased estimate of ``E_t[p_t^k]``.

    ``successes``: per-task success counts ``c`` (shape ``(T,)``), each out of ``n`` trials.
    ``C(c, k) / C(n, k)`` is the chance that ``k`` trials drawn without replacement from the ``n``
    are all successes.
    """
    c = _check(successes, n, k)
    return float(np.mean([math.comb(int(ci), k) for ci in c]) / math.comb(n, k))


def pass_at_k(successes: Sequence[int] | np.ndarray, n: int, k: int) -> float:
    """pass@k = mean over tasks of ``1 - C(n - c, k) / C(n, k)``: unbiased for ``E_t[1-(1-p_t)^k]``.

    ``successes``: per-task success counts ``c`` (shape ``(T,)``), each out of ``n`` trials.
    """
    c = _check(successes, n, k)
    return float(1.0 - np.mean([math.comb(n - int(ci), k) for ci in c]) / math.comb(n, k))


def pass_curve(successes: Sequence[int] | np.ndarray, n: int, *, at: bool = False) -> np.ndarray:
    """``[pass^1, ..., pass^n]`` (or pass@1..n with ``at=True``), shape ``(n,)``."""
    f = pass_at_k if at else pass_hat_k
    return np.array([f(successes, n, k) for k in range(1, n + 1)])


def first_k_estimate(rewards: np.ndarray, k: int) -> float:
    """The naive estimate of ``E_t[p_t^k]``: the share of tasks whose first ``k`` trials all succeed.

    ``rewards``: shape ``(T, n)``. Unbiased too, but it throws away the other ``n - k`` trials.
    """
    ok = np.abs(np.asarray(rewards, dtype=float) - 1.0) <= SUCCESS_TOL
    return float(ok[:, :k].all(axis=1).mean())


def all_subsets_fraction(outcomes: Sequence[bool], k: int) -> float:
    """Share of the ``k``-subsets of ``outcomes`` (one task's ``n`` trials) that are all successes,
    by enumeration: the definition that ``C(c, k) / C(n, k)`` computes in closed form."""
    from itertools import combinations

    subsets = list(combinations(range(len(outcomes)), k))
    return sum(all(outcomes[i] for i in s) for s in subsets) / len(subsets)


# ---- per-task success histograms and the inverse binomial transform --------------------------


def histogram(successes: Sequence[int] | np.ndarray, n: int) -> np.ndarray:
    """``h[j]`` = number of tasks with ``j`` successes out of ``n``, shape ``(n + 1,)``."""
    return np.bincount(np.asarray(successes, dtype=int), minlength=n + 1)[: n + 1]


def pass_hat_from_histogram(hist: Sequence[float], k: int) -> float:
    """pass^k from a success histogram ``h`` (shape ``(n + 1,)``):
    ``sum_j h_j C(j, k) / (C(n, k) sum_j h_j)``."""
    h = np.asarray(hist, dtype=float)
    n = len(h) - 1
    return float(sum(h[j] * math.comb(j, k) for j in range(n + 1)) / (math.comb(n, k) * h.sum()))


def binomial_transform_matrix(n: int) -> np.ndarray:
    """``B[k-1, j] = C(j, k) / C(n, k)`` for ``k = 1..n`` and ``j = 0..n``, shape ``(n, n + 1)``:
    pass^1..n of a histogram ``h`` with ``T`` tasks is ``B @ h / T``."""
    return np.array([[math.comb(j, k) / math.comb(n, k) for j in range(n + 1)]
                     for k in range(1, n + 1)])


def histogram_from_pass_hat(pass_hat: Sequence[float], n_tasks: int) -> np.ndarray:
    """The inverse binomial transform: the real histogram ``h`` (shape ``(n + 1,)``, summing to
    ``n_tasks``) whose pass^1..n are ``pass_hat``. With ``n`` trials, pass^1..n determine ``h``
    uniquely: the system is triangular (``h_n`` from pass^n, then ``h_{n-1}``, ...)."""
    v = np.asarray(pass_hat, dtype=float)
    n = len(v)
    A = np.vstack([np.ones(n + 1), binomial_transform_matrix(n)])
    return np.linalg.solve(A, np.concatenate([[n_tasks], n_tasks * v]))


def integer_histograms(pass_hat: Sequence[float], n_tasks: int, decimals: int = 3) -> list[np.ndarray]:
    """Every integer histogram over ``n_tasks`` tasks whose pass^1..n, rounded to ``decimals``,
    equal the published ``pass_hat`` (each within half a unit of the last digit, ends included).

    Exact rational arithmetic; enumerates ``h_n``, then ``h_{n-1}``, ... each in the interval its
    own pass^k allows given the higher counts. Returns a list of arrays of shape ``(n + 1,)``.
    """
    n = len(pass_hat)
    half = Fraction(1, 2 * 10**decimals)
    targets = [Fraction(str(round(v, decimals))) for v in pass_hat]
    out: list[np.ndarray] = []

    def level(k: int, higher: dict[int, int]) -> None:
        if k == 0:
            h0 = n_tasks - sum(higher.values())
            if h0 >= 0:
                out.append(np.array([h0] + [higher[j] for j in range(1, n + 1)]))
            return
        scale = Fraction(n_tasks * math.comb(n, k))
        known = sum(higher[j] * math.comb(j, k) for j in higher)  # C(k, k) = 1 for h_k itself
        lo = math.ceil((targets[k - 1] - half) * scale - known)
        hi = math.floor((targets[k - 1] + half) * scale - known)
        room = n_tasks - sum(higher.values())
        for hk in range(max(lo, 0), min(hi, room) + 1):
            level(k - 1, {**higher, k: hk})

    level(n, {})
    return out


# ---- heterogeneity, identification, and uncertainty -------------------------------------------


def homogeneity_chi2(successes: Sequence[int] | np.ndarray, n: int) -> tuple[float, int]:
    """Pearson's chi-square of the success histogram against ``Binomial(n, p_hat)``, the law of
    ``c_t`` if every task had the same success probability; ``p_hat`` = pass^1.

    Returns ``(statistic, degrees of freedom)`` with ``df = (n + 1) - 1 - 1`` (one fitted
    parameter). Expected counts can be small; :func:`homogeneity_pvalue` calibrates by simulation.
    """
    from scipy.stats import binom

    c = np.asarray(successes, dtype=int)
    T, p = len(c), c.mean() / n
    expected = T * binom.pmf(np.arange(n + 1), n, p)
    observed = histogram(c, n)
    # p_hat in {0, 1}: every task at 0 (or n), exactly what the binomial expects; the bins it
    # expects empty are empty, and contribute 0 rather than 0 / 0
    keep = expected > 0
    return float(((observed[keep] - expected[keep]) ** 2 / expected[keep]).sum()), n - 1


def homogeneity_pvalue(successes: Sequence[int] | np.ndarray, n: int, *, n_sim: int = 20_000,
                       seed: int = 0) -> tuple[float, float]:
    """Parametric-bootstrap p-value of :func:`homogeneity_chi2`: simulate ``T`` tasks with the
    common ``p_hat``, refit ``p_hat``, recompute the statistic. Returns ``(chi2, p)``, with
    ``p >= 1 / (n_sim + 1)``."""
    from scipy.stats import binom

    c = np.asarray(successes, dtype=int)
    T, p = len(c), c.mean() / n
    stat, _ = homogeneity_chi2(c, n)
    rng = np.random.default_rng(seed)
    sims = rng.binomial(n, p, size=(n_sim, T))
    p_sim = sims.mean(axis=1, keepdims=True) / n
    expected = T * binom.pmf(np.arange(n + 1)[None, :], n, p_sim)
    counts = np.stack([(sims == j).sum(axis=1) for j in range(n + 1)], axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(expected > 0, (counts - expected) ** 2 / expected, 0.0)
    sim_stats = terms.sum(axis=1)
    return stat, float((1 + (sim_stats >= stat).sum()) / (n_sim + 1))


def overdispersion(successes: Sequence[int] | np.ndarray, n: int) -> float:
    """The share of the variance of the success counts that lies between tasks:
    ``rho = (Var_t(c_t) / (n p (1 - p)) - 1) / (n - 1)`` with ``p`` = pass^1 and the variance over
    tasks taken with ``ddof=0``, so that ``rho`` lies in ``[-1 / (n - 1), 1]`` and equals 1 exactly
    when every task succeeds in all trials or in none.

    ``rho`` is about 0 when every task has the same success probability, 1 when every task succeeds
    in all trials or in none, and ``1 / (a + b + 1)`` when the probabilities follow ``Beta(a, b)``
    (the intra-class correlation of the Beta-binomial). Unlike Pearson's chi-square it stays finite
    when the binomial expects almost no task at 0 or ``n``.
    """
    c = np.asarray(successes, dtype=float)
    p = c.mean() / n
    if p in (0.0, 1.0) or n < 2:
        return 0.0
    return float((c.var(ddof=0) / (n * p * (1 - p)) - 1) / (n - 1))


def moment_range(pass_hat: Sequence[float], m: int, *, grid: int = 2001) -> tuple[float, float]:
    """The smallest and largest ``E[p^m]`` over all task-success laws on ``[0, 1]`` whose first
    moments ``E[p^k]`` equal ``pass_hat[k-1]`` for ``k = 1..n``: what pass^m can be when only
    pass^1..n are known (a linear programme over a grid of ``grid`` points in ``[0, 1]``)."""
    from scipy.optimize import linprog

    v = np.asarray(pass_hat, dtype=float)
    x = np.linspace(0.0, 1.0, grid)
    A_eq = np.vstack([np.ones_like(x)] + [x**k for k in range(1, len(v) + 1)])
    b_eq = np.concatenate([[1.0], v])
    bounds = []
    for sign in (1.0, -1.0):
        res = linprog(sign * x**m, A_eq=A_eq, b_eq=b_eq, bounds=(0, None), method="highs")
        if not res.success:
            raise ValueError(f"no law on [0, 1] has these moments: {res.message}")
        bounds.append(sign * res.fun)
    return bounds[0], bounds[1]


def pass_k_bounds(successes: Sequence[int] | np.ndarray, n: int, m: int, *, level: float = 0.95,
                  grid: int = 1001) -> tuple[float, float]:
    """The range of ``E[p^m]`` over task-success laws that fit ``n``-trial data up to sampling
    noise: a conservative confidence interval for pass^m, also for ``m > n``.

    ``successes``: per-task counts ``c`` (shape ``(T,)``) out of ``n`` trials. A law ``G`` of the
    task-success probability predicts the share of tasks with ``j`` successes,
    ``q_j(G) = int C(n, j) p^j (1 - p)^(n - j) dG(p)``, which is linear in ``G``. The feasible laws
    are those whose ``q_j`` all lie in simultaneous Clopper-Pearson intervals of the observed shares
    ``h_j / T`` (level ``1 - (1 - level) / (n + 1)`` each, Bonferroni); a linear programme over
    laws on a grid of ``grid`` points in ``[0, 1]`` gives the smallest and largest ``E[p^m]``.
    Unlike :func:`moment_range`, which takes the estimates as exact moments, the width reflects
    how many tasks there are.
    """
    from scipy.optimize import linprog
    from scipy.stats import beta, binom

    h = histogram(successes, n)
    T = int(h.sum())
    a = (1.0 - level) / (n + 1)
    lo = np.where(h > 0, beta.ppf(a / 2, h, T - h + 1), 0.0)
    hi = np.where(h < T, beta.ppf(1 - a / 2, h + 1, T - h), 1.0)
    x = np.linspace(0.0, 1.0, grid)
    A = binom.pmf(np.arange(n + 1)[:, None], n, x[None, :])  # (n + 1, grid): q = A @ w
    bounds = []
    for sign in (1.0, -1.0):
        res = linprog(sign * x**m, A_ub=np.vstack([A, -A]), b_ub=np.concatenate([hi, -lo]),
                      A_eq=np.ones((1, grid)), b_eq=[1.0], bounds=(0, None), method="highs")
        if not res.success:
            raise ValueError(f"no law fits the histogram {h.tolist()}: {res.message}")
        bounds.append(float(np.clip(sign * res.fun, 0.0, 1.0)))
    return bounds[0], bounds[1]


def paired_bootstrap_diff(table_a: np.ndarray, table_b: np.ndarray, *, n_boot: int = 2000,
                          seed: int = 0) -> np.ndarray:
    """Bootstrap over tasks of ``mean(table_a) - mean(table_b)`` for two per-task tables of the
    same tasks (shape ``(T,)`` or ``(T, K)``, e.g. ``C(c_t, k) / C(n, k)`` of two agents that met
    the same users). The same resampled tasks enter both means. Returns shape ``(n_boot,)`` or
    ``(n_boot, K)``."""
    d = np.asarray(table_a, dtype=float) - np.asarray(table_b, dtype=float)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(d), size=(n_boot, len(d)))
    return d[idx].mean(axis=1)


def fit_beta_binomial(successes: Sequence[int] | np.ndarray, n: int) -> tuple[float, float]:
    """Maximum-likelihood ``(a, b)`` of ``c_t ~ BetaBinomial(n, a, b)``: tasks draw their success
    probability from ``Beta(a, b)``."""
    from scipy.optimize import minimize
    from scipy.stats import betabinom

    h = histogram(successes, n)  # the likelihood depends on the counts only through h
    j = np.arange(n + 1)
    nll = lambda z: -(h * betabinom.logpmf(j, n, np.exp(z[0]), np.exp(z[1]))).sum()  # noqa: E731
    res = minimize(nll, x0=np.zeros(2), method="Nelder-Mead",
                   options=dict(xatol=1e-10, fatol=1e-12, maxiter=20_000))
    return float(np.exp(res.x[0])), float(np.exp(res.x[1]))


def beta_moment(a: float, b: float, k: int) -> float:
    """``E[p^k]`` for ``p ~ Beta(a, b)``: ``prod_{i<k} (a + i) / (a + b + i)``."""
    return float(np.prod([(a + i) / (a + b + i) for i in range(k)]))


def bootstrap_curve(successes: Sequence[int] | np.ndarray, n: int, *, n_boot: int = 2000,
                    seed: int = 0, at: bool = False) -> np.ndarray:
    """pass^1..n (or pass@1..n) of ``n_boot`` resamples of the tasks, shape ``(n_boot, n)``.

    Tasks are resampled with replacement; the trials of a task stay together.
    """
    c = np.asarray(successes, dtype=int)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(c), size=(n_boot, len(c)))
    k = np.arange(1, n + 1)
    if at:
        table = np.array([[1 - math.comb(n - j, kk) / math.comb(n, kk) for kk in k]
                          for j in range(n + 1)])
    else:
        table = np.array([[math.comb(j, kk) / math.comb(n, kk) for kk in k] for j in range(n + 1)])
    return table[c[idx]].mean(axis=1)


def log_convex(values: Iterable[float], tol: float = 0.0) -> bool:
    """Whether a positive sequence is log-convex: ``log v_{k+1} - log v_k`` never decreases
    (beyond ``tol``). Moments ``E[p^k]`` of any law on ``[0, 1]`` are (Lyapunov's inequality)."""
    lv = np.log(np.asarray(list(values), dtype=float))
    d = np.diff(lv)
    return bool(np.all(np.diff(d) >= -tol))


def all_outcome_tables(n: int) -> Iterable[tuple[bool, ...]]:
    """Every one of the ``2^n`` outcome vectors of ``n`` trials (for brute-force checks)."""
    return product((False, True), repeat=n)


# ---- does a model of task heterogeneity reproduce a pass^k curve? -------------------------------


def model_moments(m1: np.ndarray | float, m2: np.ndarray | float, n: int, model: str) -> np.ndarray:
    """``E[p^k]`` for ``k = 1..n`` of a task-success law fitted by its first moments.

    ``model="binomial"``: every task has ``p = m1`` (``m2`` unused), so ``E[p^k] = m1^k``.
    ``model="beta"``: ``p ~ Beta(a, b)`` with ``E[p] = m1`` and ``E[p^2] = m2``, i.e.
    ``a + b = s = (m1 - m2) / (m2 - m1^2)``, ``a = m1 s``, and ``E[p^k] = prod_{i<k} (a + i) / (s + i)``.
    Data with no spread between tasks (``m2 <= m1^2``) give the binomial limit ``s = inf``; data
    where every task succeeds always or never (``m2 >= m1``) give ``s = 0``, ``E[p^k] = m1``.
    Inputs may be arrays of the same shape ``S``; the output has shape ``S + (n,)``.
    """
    m1 = np.asarray(m1, dtype=float)
    if model == "binomial":
        return m1[..., None] ** np.arange(1, n + 1)
    if model != "beta":
        raise ValueError(f"model must be 'binomial' or 'beta', got {model!r}")
    m2 = np.asarray(m2, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.where(m2 - m1**2 > 1e-12, (m1 - m2) / (m2 - m1**2), np.inf)
    s = np.clip(np.nan_to_num(s, nan=0.0, posinf=1e12), 0.0, 1e12)
    out = [m1]
    for i in range(1, n):
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(s > 0, (m1 * s + i) / (s + i), 1.0)
        out.append(out[-1] * ratio)
    return np.stack(out, axis=-1)


def heterogeneity_fit_test(successes: Sequence[int] | np.ndarray, n: int, model: str, *,
                           n_sim: int = 20_000, seed: int = 0, level: float = 0.95) -> dict:
    """Does ``model`` of task-success probabilities reproduce the pass^k curve of ``n``-trial data?

    The model is fitted by its moments to the first pass^k values (``binomial``: pass^1, one common
    ``p``; ``beta``: pass^1 and pass^2, ``p_t ~ Beta(a, b)``, see :func:`model_moments`) and
    predicts the others. The statistic is ``D = max |pass^k - predicted pass^k|`` over the
    predicted ``k``; its null distribution comes from a parametric bootstrap: ``T`` tasks drawn from
    the fitted law, ``n`` trials each, refitted the same way. Returns a dict with ``D``, the
    p-value ``p`` (``>= 1 / (n_sim + 1)``), the fitted curve ``pred`` (shape ``(n,)``), the
    ``level`` band of the measured curve under the fitted law ``band`` (shape ``(2, n)``), the
    first predicted ``k`` (``k0``) and the fitted ``(a, b)`` (``None`` for the binomial).
    """
    c = np.asarray(successes, dtype=int)
    T = len(c)
    k0 = {"binomial": 2, "beta": 3}[model]
    if n < k0:
        raise ValueError(f"{model} needs n >= {k0} trials to predict anything")
    ratio = binomial_transform_matrix(n).T  # (n + 1, n): row c gives C(c, k) / C(n, k)
    obs = ratio[c].mean(0)
    pred = model_moments(obs[0], obs[1], n, model)
    stat = float(np.abs(obs - pred)[k0 - 1:].max())
    rng = np.random.default_rng(seed)
    m1, m2 = obs[0], obs[1]
    ab = None
    if model == "binomial":
        p = np.full((n_sim, T), m1)
    else:
        s = (m1 - m2) / (m2 - m1**2) if m2 - m1**2 > 1e-12 else np.inf  # a + b, as in model_moments
        if np.isinf(s):
            p = np.full((n_sim, T), m1)
        elif s <= 0:
            p = (rng.random((n_sim, T)) < m1).astype(float)
        else:
            ab = (m1 * s, (1 - m1) * s)
            p = rng.beta(ab[0], ab[1], size=(n_sim, T))
    sims = rng.binomial(n, p)
    curves = ratio[sims].mean(1)  # (n_sim, n)
    pred_sim = model_moments(curves[:, 0], curves[:, 1], n, model)
    d_sim = np.abs(curves - pred_sim)[:, k0 - 1:].max(1)
    alpha = (1 - level) / 2
    return {"D": stat, "p": float((1 + (d_sim >= stat - 1e-12).sum()) / (n_sim + 1)), "pred": pred,
            "obs": obs, "band": np.quantile(curves, [alpha, 1 - alpha], axis=0), "k0": k0, "ab": ab}
