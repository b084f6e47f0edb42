"""The verdict rule of the C4n chapter: per-model pairing, Student-t intervals, held / not held / undecided."""

import math

import numpy as np
import pytest
from scipy import stats

from iclr25.compress.verdicts import acting_models, decide, gated, paired_gap, per_model, status, t_interval


def test_per_model_averages_calibration_draws_within_a_model() -> None:
    gaps = {(0, 0): 1.0, (0, 1): 3.0, (1, 0): 5.0}
    assert per_model(gaps) == {0: 2.0, 1: 5.0}


def test_t_interval_matches_the_textbook_quantiles() -> None:
    v = [0.1, 0.3, 0.2, 0.4, 0.0]
    lo, hi = t_interval(v)
    half = 2.776445105 * np.std(v, ddof=1) / math.sqrt(5)        # t_{0.975}(4)
    assert lo == pytest.approx(0.2 - half, abs=1e-9) and hi == pytest.approx(0.2 + half, abs=1e-9)
    lo2, hi2 = t_interval([1.0, 2.0])
    assert hi2 - lo2 == pytest.approx(2 * 12.7062047 * math.sqrt(0.5) / math.sqrt(2), rel=1e-7)
    assert t_interval([1.0]) == (-math.inf, math.inf)


def test_paired_gap_uses_models_not_pairs_as_replicates() -> None:
    # 2 models x 3 calibration draws: the interval has 1 degree of freedom, not 5
    worse = {(m, s): 1.0 + 0.1 * m for m in range(2) for s in range(3)}
    better = {(m, s): 0.5 + 0.01 * s for m in range(2) for s in range(3)}
    g = paired_gap(worse, better)
    assert g["k"] == 2
    per = [0.5 - 0.01, 0.6 - 0.01]
    assert g["per_model"] == pytest.approx({0: per[0], 1: per[1]})
    half = stats.t.ppf(0.975, 1) * np.std(per, ddof=1) / math.sqrt(2)
    assert g["lo"] == pytest.approx(np.mean(per) - half) and g["hi"] == pytest.approx(np.mean(per) + half)


def test_paired_gap_restricted_to_units() -> None:
    worse = {(0, 0): 2.0, (1, 0): 2.0, (2, 0): 9.0}
    better = {(0, 0): 1.0, (1, 0): 1.5, (2, 0): 0.0}
    g = paired_gap(worse, better, units=[(0, 0), (1, 0)])
    assert g["k"] == 2 and g["mean"] == pytest.approx(0.75)


@pytest.mark.parametrize("gaps, verdict", [
    ([0.30, 0.31, 0.29, 0.32, 0.30], True),           # clearly positive on every model
    ([-0.30, -0.31, -0.29, -0.32, -0.30], False),      # clearly negative
    ([0.001, -0.002, 0.0, 0.002, -0.001], False),      # equivalence: the benefit is bounded below delta
    ([0.2, -0.2, 0.3, -0.25, 0.1], None),              # noise wider than delta: undecided
    ([0.006, 0.007, 0.005, 0.006, 0.006], False),      # decisively above 0 but below delta: no benefit of size
    ([0.004, 0.016, 0.010, 0.006, 0.014], None),       # above 0, straddling delta: undecided, not held
])
def test_decide(gaps, verdict) -> None:
    worse = {(m, 0): 1.0 + g for m, g in enumerate(gaps)}
    better = {(m, 0): 1.0 for m in range(len(gaps))}
    h, why = decide(paired_gap(worse, better), delta=0.01)
    assert h is verdict
    assert (why is None) == (verdict is not None)


def test_two_models_are_undecided_unless_the_gap_is_far_above_its_spread() -> None:
    # min > 0 and mean > 2 sd (the old rule) is not enough with 1 degree of freedom
    g = paired_gap({(0, 0): 1.30, (1, 0): 1.22}, {(0, 0): 1.0, (1, 0): 1.0})
    assert g["min"] > 0 and g["mean"] > 2 * g["sd"]
    assert decide(g, 0.01)[0] is None and status(g, 0.01) == "not decisive"
    assert decide(paired_gap({(0, 0): 1.3}, {(0, 0): 1.0}), 0.01)[0] is None     # one model: no interval
    g = paired_gap({(0, 0): 1.300, (1, 0): 1.301}, {(0, 0): 1.0, (1, 0): 1.0})
    assert decide(g, 0.01) == (True, None)


def test_all_held_needs_every_comparison() -> None:
    from iclr25.compress.verdicts import all_held
    assert all_held([(True, None), (True, None)]) == (True, None)
    assert all_held([(True, None), (False, None), (None, "x")]) == (False, None)
    assert all_held([(True, None), (None, "x")]) == (None, "x")


def test_moved_share_counts_weights_not_layers() -> None:
    from iclr25.compress.verdicts import moved_share
    sizes = {"a": 90, "b": 10}
    assert moved_share({"a": 2, "b": 1}, 2, sizes) == pytest.approx(0.1)
    assert moved_share({"a": 1, "b": 3}, 2, sizes) == pytest.approx(1.0)
    assert moved_share({"a": 2, "b": 2}, 2, sizes) == 0.0


def test_gated_judges_only_where_the_mechanism_acts() -> None:
    from iclr25.compress.verdicts import gated
    dec = {1: (False, None), 2: (True, None)}
    assert gated(dec, {1: 0.5, 2: 0.05}, 0.2) == (False, None, [1])
    assert gated(dec, {1: 0.05, 2: 0.5}, 0.2) == (True, None, [2])
    h, why, lv = gated(dec, {1: 0.5, 2: 0.5}, 0.2)
    assert h is None and lv == [1, 2] and why
    h, why, lv = gated(dec, {1: 0.1, 2: 0.1}, 0.2)
    assert h is None and lv == [] and "20%" in why



def test_the_margin_is_symmetric() -> None:
    # the same interval shifted across delta: below it is a no, above it a yes, straddling it undecided
    base = np.array([-0.002, 0.0, 0.002, 0.001, -0.001])
    for shift, verdict in ((0.005, False), (0.010, None), (0.016, True)):
        g = paired_gap({(m, 0): 1.0 + x + shift for m, x in enumerate(base)},
                       {(m, 0): 1.0 for m in range(len(base))})
        assert decide(g, 0.01)[0] is verdict, (shift, g)


def test_changed_share_and_decision_level() -> None:
    from iclr25.compress.verdicts import changed_share, decision_level
    sizes = {"a": 90, "b": 10}
    assert changed_share({"a": 1, "b": 3}, {"a": 1, "b": 2}, sizes) == pytest.approx(0.1)
    assert changed_share({"a": 1, "b": 3}, {"a": 1, "b": 3}, sizes) == 0.0
    assert decision_level({1: 0.95, 2: 0.85, 3: 0.4}) == (2, True)
    assert decision_level({1: 0.95, 2: 0.79}) == (1, True)
    assert decision_level({1: 0.7, 2: 0.5}) == (1, False)


def test_acting_models_needs_three_models_that_act() -> None:
    shares = {"a": 0.5, "b": 0.3, "c": 0.1, "d": 0.25}
    keep, mean = acting_models(shares, 0.2)
    assert keep == ["a", "b", "d"] and abs(mean - (0.5 + 0.3 + 0.25) / 3) < 1e-12
    assert acting_models(shares, 0.3) == ([], 0.0)              # two models act: the level does not count
    assert acting_models(shares, 0.3, min_models=2)[0] == ["a", "b"]
    _, mean = acting_models({"a": 0.1, "b": 0.15, "c": 0.19}, 0.2)
    decisions = {1: (True, None), 2: (False, None)}
    assert gated(decisions, {1: mean, 2: acting_models(shares, 0.2)[1]}, 0.2)[2] == [2]
