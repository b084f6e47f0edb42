"""pass^k and pass@k: closed forms against brute-force enumeration, unbiasedness, the inverse
binomial transform, the moment range and the homogeneity test."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iclr25.agents import (all_outcome_tables, all_subsets_fraction, beta_moment,
                           binomial_transform_matrix, bootstrap_curve, first_k_estimate,
                           fit_beta_binomial, histogram, histogram_from_pass_hat, homogeneity_chi2,
                           homogeneity_pvalue, integer_histograms, is_success, log_convex,
                           moment_range, overdispersion, paired_bootstrap_diff, pass_at_k, pass_k_bounds, pass_curve, pass_hat_from_histogram, pass_hat_k,
                           success_counts)


@pytest.mark.parametrize("n", [1, 2, 4, 7])
def test_hypergeometric_identity_by_enumeration(n):
    # C(c, k) / C(n, k) is the share of k-subsets of the n trials that are all successes
    for outcome in all_outcome_tables(n):
        c = sum(outcome)
        for k in range(1, n + 1):
            assert all_subsets_fraction(outcome, k) == pytest.approx(math.comb(c, k) / math.comb(n, k))
            assert pass_hat_k([c], n, k) == pytest.approx(math.comb(c, k) / math.comb(n, k))


@pytest.mark.parametrize("n,k", [(3, 1), (4, 2), (5, 3), (6, 6)])
def test_unbiased_exactly_by_summing_over_all_outcomes(n, k):
    # E[C(c,k)/C(n,k)] = p^k and E[1 - C(n-c,k)/C(n,k)] = 1 - (1-p)^k, summed over all 2^n outcomes
    for p in (0.0, 0.13, 0.5, 0.91, 1.0):
        e_hat = e_at = 0.0
        for outcome in all_outcome_tables(n):
            c = sum(outcome)
            w = p**c * (1 - p) ** (n - c)
            e_hat += w * pass_hat_k([c], n, k)
            e_at += w * pass_at_k([c], n, k)
        assert e_hat == pytest.approx(p**k, abs=1e-12)
        assert e_at == pytest.approx(1 - (1 - p) ** k, abs=1e-12)


def test_unbiased_by_monte_carlo_and_naive_has_larger_variance():
    rng = np.random.default_rng(0)
    T, n, reps = 100, 8, 3000
    p = rng.beta(2.0, 1.0, size=T)
    k = 4
    hat, naive = [], []
    for _ in range(reps):
        R = (rng.random((T, n)) < p[:, None]).astype(float)
        hat.append(pass_hat_k(success_counts(R), n, k))
        naive.append(first_k_estimate(R, k))
    truth = np.mean(p**k)
    for est in (hat, naive):
        z = (np.mean(est) - truth) / (np.std(est) / np.sqrt(reps))
        assert abs(z) < 4
    assert np.var(naive) > 1.5 * np.var(hat)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 6), min_size=1, max_size=30))
def test_pass_hat_below_pass_at_and_monotone(counts):
    n = 6
    hat, at = pass_curve(counts, n), pass_curve(counts, n, at=True)
    assert np.all(hat <= at + 1e-12)
    assert np.all(np.diff(hat) <= 1e-12) and np.all(np.diff(at) >= -1e-12)
    assert hat[0] == pytest.approx(at[0]) == pytest.approx(np.mean(counts) / n)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=1, max_size=40))
def test_inverse_binomial_transform_round_trip(counts):
    n, T = 5, len(counts)
    h = histogram(counts, n)
    v = pass_curve(counts, n)
    assert np.allclose(histogram_from_pass_hat(v, T), h, atol=1e-8)
    assert np.allclose(binomial_transform_matrix(n) @ h / T, v)
    for k in range(1, n + 1):
        assert pass_hat_from_histogram(h, k) == pytest.approx(v[k - 1])
    sols = integer_histograms(np.round(v, 3), T, decimals=3)
    assert any(np.array_equal(s, h) for s in sols)


def test_published_leaderboards_have_one_histogram_each():
    (air,) = integer_histograms([0.420, 0.273, 0.220, 0.200], 50)
    (ret,) = integer_histograms([0.604, 0.491, 0.430, 0.383], 115)
    assert air.tolist() == [14, 12, 10, 4, 10]
    assert ret.tolist() == [22, 18, 9, 22, 44]


def test_success_threshold_and_missing_trials():
    assert is_success(1.0) and is_success(1 - 1e-7) and not is_success(0.999)
    with pytest.raises(ValueError):
        success_counts(np.array([[1.0, np.nan]]))
    with pytest.raises(ValueError):
        pass_hat_k([5], 4, 2)
    with pytest.raises(ValueError):
        pass_hat_k([1], 4, 5)


def test_moment_range_contains_truth_and_collapses_for_two_point_laws():
    # a law on {0, 1}: E p^k = q for all k, so E p^8 is pinned to q
    lo, hi = moment_range([0.3, 0.3, 0.3, 0.3], 8)
    assert lo == pytest.approx(0.3, abs=1e-6) and hi == pytest.approx(0.3, abs=1e-6)
    # a Beta law: its own 8th moment lies inside the range its first four moments allow
    a, b = 1.5, 0.8
    lo, hi = moment_range([beta_moment(a, b, k) for k in range(1, 5)], 8)
    assert lo - 1e-6 <= beta_moment(a, b, 8) <= hi + 1e-6
    assert hi - lo > 1e-4


def test_beta_binomial_fit_recovers_parameters():
    from scipy.stats import betabinom

    c = betabinom.rvs(4, 0.7, 0.4, size=20000, random_state=1)
    a, b = fit_beta_binomial(c, 4)
    assert beta_moment(a, b, 1) == pytest.approx(0.7 / 1.1, abs=0.01)
    assert a / b == pytest.approx(0.7 / 0.4, rel=0.15)


def test_homogeneity_chi2_closed_form_and_calibration():
    # tasks that all share p: the bootstrap p-value is not small; a 0/n mixture is detected
    rng = np.random.default_rng(3)
    same = rng.binomial(4, 0.4, size=200)
    assert homogeneity_pvalue(same, 4, n_sim=2000)[1] > 0.01
    mixed = np.r_[np.zeros(100, int), np.full(100, 4)]
    stat, df = homogeneity_chi2(mixed, 4)
    assert df == 3 and stat > 100
    assert homogeneity_pvalue(mixed, 4, n_sim=2000)[1] < 1e-3


def test_bootstrap_resamples_tasks():
    c = np.array([0, 4, 4, 2])
    B = bootstrap_curve(c, 4, n_boot=500, seed=1)
    assert B.shape == (500, 4)
    assert abs(B[:, 0].mean() - pass_hat_k(c, 4, 1)) < 0.05
    assert np.all(B[:, :-1] >= B[:, 1:] - 1e-12)


def test_log_convexity_of_moments_and_of_published_curves():
    rng = np.random.default_rng(0)
    p = rng.random(50)
    assert log_convex([np.mean(p**k) for k in range(1, 10)])
    assert log_convex([0.420, 0.273, 0.220, 0.200]) and log_convex([0.604, 0.491, 0.430, 0.383])
    assert not log_convex([0.5, 0.4, 0.1])


def test_pass_hat_k_equals_display_metrics_formula_on_a_hand_made_results_list():
    # the formula of tau-bench's run script, on (task, trial, reward) triples
    results = [(0, 0, 1.0), (0, 1, 1.0), (0, 2, 0.0), (1, 0, 0.0), (1, 1, 1.0), (1, 2, 1.0),
               (2, 0, 1.0), (2, 1, 1.0), (2, 2, 1.0)]
    c = {}
    for t, _, r in results:
        c[t] = c.get(t, 0) + is_success(r)
    for k in (1, 2, 3):
        expected = sum(math.comb(ci, k) / math.comb(3, k) for ci in c.values()) / len(c)
        assert pass_hat_k(list(c.values()), 3, k) == pytest.approx(expected)
    assert pass_hat_k(list(c.values()), 3, 3) == pytest.approx(1 / 3)


def test_overdispersion_limits_and_beta_binomial():
    from scipy.stats import betabinom

    n = 8
    assert overdispersion(np.r_[np.zeros(50), np.full(50, n)], n) == pytest.approx(1.0, abs=0.02)
    rng = np.random.default_rng(0)
    assert abs(overdispersion(rng.binomial(n, 0.4, size=20000), n)) < 0.01
    a, b = 0.7, 0.5
    c = betabinom.rvs(n, a, b, size=40000, random_state=2)
    assert overdispersion(c, n) == pytest.approx(1 / (a + b + 1), abs=0.02)
    assert overdispersion(np.full(10, n), n) == 0.0


def test_pass_k_bounds_cover_the_truth_and_shrink_with_more_tasks():
    # tasks with p_t ~ Beta(1.5, 0.8), 4 trials each: the bounds on pass^8 = mean_t p_t^8 cover it
    rng = np.random.default_rng(5)
    covered, widths = 0, []
    for _ in range(20):
        p = rng.beta(1.5, 0.8, size=200)
        lo, hi = pass_k_bounds(rng.binomial(4, p), 4, 8)
        covered += lo <= np.mean(p**8) <= hi
        widths.append(hi - lo)
    assert covered >= 19
    # more tasks, narrower bounds; a lower level, nested inside a higher one
    p = rng.beta(1.5, 0.8, size=3200)
    c = rng.binomial(4, p)
    lo_big, hi_big = pass_k_bounds(c, 4, 8)
    assert hi_big - lo_big < 0.6 * np.mean(widths)
    lo50, hi50 = pass_k_bounds(c[:200], 4, 8, level=0.5)
    lo95, hi95 = pass_k_bounds(c[:200], 4, 8, level=0.95)
    assert lo95 <= lo50 + 1e-9 and hi50 <= hi95 + 1e-9
    # every task always solved: pass^m close to 1 whatever m
    assert pass_k_bounds(np.full(2000, 4), 4, 8)[0] > 0.9


def test_paired_bootstrap_diff_of_equal_and_shifted_tables():
    a = np.random.default_rng(0).random((50, 3))
    assert np.all(paired_bootstrap_diff(a, a, n_boot=200) == 0)
    d = paired_bootstrap_diff(a + 0.25, a, n_boot=200)
    assert d.shape == (200, 3) and np.allclose(d, 0.25)
    # the resampling is over tasks: the spread shrinks like 1 / sqrt(T)
    x = np.random.default_rng(1).random(400)
    s_small = paired_bootstrap_diff(x[:100], np.zeros(100), n_boot=4000).std()
    s_big = paired_bootstrap_diff(x, np.zeros(400), n_boot=4000).std()
    assert s_big == pytest.approx(s_small / 2, rel=0.15)


def test_homogeneity_chi2_when_every_task_fails_or_every_task_succeeds():
    """p_hat in {0, 1}: no division by zero, the statistic is 0 and the p-value 1."""
    import warnings

    for c in (np.zeros(20, dtype=int), np.full(20, 4)):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            stat, _ = homogeneity_chi2(c, 4)
            assert stat == 0.0
            assert homogeneity_pvalue(c, 4, n_sim=200)[1] == 1.0


def test_model_moments_limits_and_beta_closed_form():
    from iclr25.agents import beta_moment, model_moments

    a, b = 0.7, 1.3
    m1, m2 = beta_moment(a, b, 1), beta_moment(a, b, 2)
    assert np.allclose(model_moments(m1, m2, 6, "beta"), [beta_moment(a, b, k) for k in range(1, 7)])
    assert np.allclose(model_moments(0.4, 0.16, 4, "beta"), 0.4 ** np.arange(1, 5))   # no spread: binomial
    assert np.allclose(model_moments(0.4, 0.4, 4, "beta"), 0.4)                         # all-or-nothing
    assert np.allclose(model_moments(0.4, None, 3, "binomial"), [0.4, 0.16, 0.064])
    assert model_moments(np.array([0.4, 0.5]), np.array([0.2, 0.3]), 3, "beta").shape == (2, 3)


def test_heterogeneity_fit_test_accepts_the_true_model_and_rejects_the_wrong_one():
    from iclr25.agents import heterogeneity_fit_test

    rng = np.random.default_rng(0)
    c_beta = rng.binomial(4, rng.beta(0.5, 0.5, size=300))
    c_bin = rng.binomial(4, 0.5, size=300)
    assert heterogeneity_fit_test(c_beta, 4, "binomial", n_sim=2000)["p"] < 1e-3
    assert heterogeneity_fit_test(c_beta, 4, "beta", n_sim=2000)["p"] > 0.01
    assert heterogeneity_fit_test(c_bin, 4, "binomial", n_sim=2000)["p"] > 0.01
    # calibration: under the fitted Beta law the p-value is roughly uniform
    ps = [heterogeneity_fit_test(rng.binomial(4, rng.beta(1.0, 2.0, size=100)), 4, "beta", n_sim=500,
                                 seed=i)["p"] for i in range(40)]
    assert 0.02 <= np.mean(np.array(ps) < 0.1) <= 0.3
