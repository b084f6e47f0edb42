"""Student-t intervals of a mean: the one interval every chapter reports for paired differences.

A chapter that compares two arms on the same seeds (or cases) takes the per-seed differences ``d``
and reports their mean with a two-sided 95 % t-interval, ``mean ± t_{0.975, k-1} · sd(d) / √k``::

    from iclr25.common.stats import mean_interval, three_way
    gap, lo, hi = mean_interval(acc_a - acc_b)
    holds = three_way(lo, hi)                       # True, False, or None (undecided)

:func:`three_way` is the one rule that turns an interval into a verdict: a claim "the quantity exceeds
a threshold" holds when the whole interval lies above it, fails when the whole interval lies below
(or below a separate failure bar), and is *undecided* otherwise -- never NO for want of seeds.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats

LEVEL = 0.95
"""Two-sided confidence level of the intervals."""


def t_interval(values: Sequence[float], level: float = LEVEL) -> tuple[float, float]:
    """Two-sided ``level`` Student-t interval of the mean of ``values`` (``(-inf, inf)`` for fewer
    than two values, and the mean twice when all values are equal)."""
    v = np.asarray(values, dtype=float).ravel()
    k = len(v)
    if k < 2:
        return -np.inf, np.inf
    half = float(stats.t.ppf(0.5 + level / 2, df=k - 1)) * v.std(ddof=1) / np.sqrt(k)
    return float(v.mean() - half), float(v.mean() + half)


def mean_interval(values: Sequence[float], level: float = LEVEL) -> tuple[float, float, float]:
    """``(mean, lo, hi)``: the mean of ``values`` and its two-sided ``level`` t-interval (see
    :func:`t_interval`; the bounds are infinite for fewer than two values)."""
    v = np.asarray(values, dtype=float).ravel()
    lo, hi = t_interval(v, level)
    return float(v.mean()) if len(v) else float("nan"), lo, hi


def three_way(lo: float, hi: float, threshold: float = 0.0, *, fail_below: float | None = None,
              tol: float = 0.0) -> bool | None:
    """Verdict of the claim "the quantity exceeds ``threshold``" from its interval ``[lo, hi]``.

    ``True`` when ``lo > threshold + tol``; ``False`` when ``hi < fail_below - tol`` (``fail_below``
    defaults to ``threshold``: the whole interval lies below the bar); ``None`` -- undecided -- when the
    interval reaches both sides, so that too few seeds never read as a refutation. ``fail_below`` above
    ``threshold`` gives an equivalence-style rule ("fails unless the gain can reach ``fail_below``");
    ``tol`` keeps a verdict from flipping on another CPU's last-bit round-off at the bar.
    """
    if lo > hi:
        raise ValueError(f"three_way: empty interval [{lo}, {hi}]")
    bar = threshold if fail_below is None else fail_below
    if lo > threshold + tol:
        return True
    if hi < bar - tol:
        return False
    return None


def three_way_se(mean: float, se: float, threshold: float = 0.0, *, k: float = 2.0, fail_below: float | None = None,
                 tol: float = 0.0) -> bool | None:
    """:func:`three_way` on the interval ``mean ± k·se`` (the chapters' "beyond two standard errors" rule)."""
    return three_way(mean - k * se, mean + k * se, threshold, fail_below=fail_below, tol=tol)
