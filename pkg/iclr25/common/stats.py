"""Student-t intervals of a mean: the one interval every chapter reports for paired differences.

A chapter that compares two arms on the same seeds (or cases) takes the per-seed differences ``d``
and reports their mean with a two-sided 95 % t-interval, ``mean ± t_{0.975, k-1} · sd(d) / √k``::

    from iclr25.common.stats import mean_interval
    gap, lo, hi = mean_interval(acc_a - acc_b)      # held when lo > 0
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
