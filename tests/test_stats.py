"""The shared Student-t interval of a mean (iclr25.common.stats)."""

import math

import numpy as np
import pytest
from scipy import stats

from iclr25.common.stats import mean_interval, t_interval, three_way, three_way_se


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



def test_three_way_is_undecided_when_the_interval_straddles():
    assert three_way(0.1, 0.5) is True
    assert three_way(-0.5, -0.1) is False
    assert three_way(-0.1, 0.5) is None
    assert three_way(0.1, 0.5, threshold=0.2) is None
    assert three_way(0.05, 0.15, threshold=0.2) is False


def test_three_way_fail_bar_and_tolerance():
    # equivalence-style: fails only when the gain cannot reach 0.05
    assert three_way(-0.2, 0.04, fail_below=0.05) is False
    assert three_way(-0.2, 0.06, fail_below=0.05) is None
    assert three_way(0.2 + 1e-12, 0.3, threshold=0.2, tol=1e-9) is None
    assert three_way_se(1.0, 0.4) is True and three_way_se(1.0, 0.6) is None and three_way_se(-1.0, 0.4) is False
    with pytest.raises(ValueError):
        three_way(1.0, 0.0)
