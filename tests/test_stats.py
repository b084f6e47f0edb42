"""The shared Student-t interval of a mean (iclr25.common.stats)."""

import math

import numpy as np
import pytest
from scipy import stats

from iclr25.common.stats import mean_interval, t_interval


def test_mean_interval_is_the_mean_and_the_textbook_t_interval() -> None:
    v = np.array([0.3, -0.1, 0.5, 0.2])
    m, lo, hi = mean_interval(v)
    half = stats.t.ppf(0.975, 3) * v.std(ddof=1) / 2
    assert m == pytest.approx(0.225)
    assert (lo, hi) == pytest.approx((0.225 - half, 0.225 + half))
    assert (lo, hi) == t_interval(v)


def test_fewer_than_two_values_give_an_unbounded_interval() -> None:
    assert mean_interval([2.0]) == (2.0, -math.inf, math.inf)
    assert t_interval([1.0, 1.0]) == (1.0, 1.0)
