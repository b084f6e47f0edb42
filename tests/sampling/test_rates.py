"""Rates in N, the verdict rule and the closed-form i.i.d. references (iclr25.sampling.rates)."""

import math

import numpy as np
import pytest
import torch

from iclr25.sampling import (RBF, Linear, Matern52, exponent, gaussian_langevin_law, iid_expected_ksd2_rbf,
                             iid_expected_w2sq_gaussian_1d, iid_expected_w2sq_std_normal_1d, ksd, local_slopes,
                             lsq_slope, normal_order_means, ratio_slope, standard_gaussian_score, svgd_direction,
                             svgd, svgd_step, verdict_below, wasserstein2_std_normal_1d)


def test_verdict_below_three_ways():
    assert verdict_below((-0.2, 0.01), 0.05) is True
    assert verdict_below((0.06, 0.3), 0.05) is False
    assert verdict_below((0.0, 0.1), 0.05) is None


def test_slopes_recover_an_exact_power_law():
    ns = [16, 32, 64, 128]
    v = 3.0 * np.array(ns, dtype=float) ** -1.0          # N^-1: sqrt falls like N^-1/2
    assert lsq_slope(v, ns) == pytest.approx(-0.5, abs=1e-12)
    assert lsq_slope(v, ns, power=1.0) == pytest.approx(-1.0, abs=1e-12)
    np.testing.assert_allclose(local_slopes(v, ns), -0.5, atol=1e-12)
    bent = v * np.array([1.0, 1.0, 1.0, 2.0])          # only the last step is off: +1/2 in log2 units
    np.testing.assert_allclose(local_slopes(bent, ns), [-0.5, -0.5, 0.0], atol=1e-12)


def test_exponent_bootstrap_brackets_the_truth_and_subtracts_the_reference():
    rng = np.random.default_rng(0)
    ns = [16, 32, 64, 128]
    per_N = [(1.0 / N) * rng.exponential(1.0, 400) for N in ns]     # noisy N^-1 with mean exactly 1/N
    g, (lo, hi) = exponent(per_N, ns, np.random.default_rng(1), n_boot=400)
    assert lo < -0.5 < hi and hi - lo < 0.1
    g2, ci2 = exponent(per_N, ns, np.random.default_rng(1), n_boot=400, last=True, ref=-0.5)
    assert ci2[0] < 0 < ci2[1]
    const = [np.full(5, 2.0) for _ in ns]                            # no noise: a zero-width interval
    g0, ci0 = exponent(const, ns, np.random.default_rng(2), n_boot=50)
    assert g0 == pytest.approx(0.0, abs=1e-12) and ci0[1] - ci0[0] == pytest.approx(0.0, abs=1e-12)


def test_ratio_slope_against_a_constant_reference_and_with_pairing():
    ns = [16, 32, 64]
    rng = np.random.default_rng(3)
    a = [N**-1.0 * (1 + 0.01 * rng.standard_normal(50)) for N in ns]
    ref = [np.full(50, N**-0.8) for N in ns]                        # zero-variance reference, exponent -0.8
    g, (lo, hi) = ratio_slope(a, ref, ns, paired=False)
    assert lo < -0.2 < hi and hi - lo < 0.02
    b = [u * 2.0 for u in a]                                         # the same runs doubled: ratio exactly 1/2
    g2, (lo2, hi2) = ratio_slope(a, b, ns, paired=True)
    assert g2 == pytest.approx(0.0, abs=1e-12) and hi2 - lo2 < 1e-6


def test_langevin_law_ends_at_the_target_and_starts_at_rho0():
    m, s = gaussian_langevin_law(0.0, np.array([2.0, 2.0]), 0.5)
    np.testing.assert_allclose(m, [2.0, 2.0])
    assert math.isclose(s, 0.5)
    m, s = gaussian_langevin_law(50.0, np.array([2.0, 2.0]), 0.5)
    assert np.abs(m).max() < 1e-12 and s == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("d, h", [(1, 1.0), (2, 1.0), (3, 0.7)])
def test_ksd2_reference_at_the_target_is_C_over_N(d, h):
    for N in (1, 8, 64):      # KSD^2(pi) = 0 and E k_pi(x, x) = d (1 + 1/h^2) = C: the i.i.d. identity
        assert iid_expected_ksd2_rbf(np.zeros(d), 1.0, N, h) == pytest.approx(d * (1 + 1 / h**2) / N, rel=1e-12)


@pytest.mark.parametrize("t, N", [(0.0, 8), (0.3, 8), (2.0, 64)])
def test_ksd2_reference_matches_monte_carlo(t, N):
    mean, sd = gaussian_langevin_law(t, np.array([2.0, 2.0]), 0.5)
    g = torch.Generator().manual_seed(11)
    X = torch.from_numpy(mean) + sd * torch.randn(3000, N, 2, generator=g, dtype=torch.float64)
    mc = ksd(X, standard_gaussian_score, RBF(1.0)).numpy()
    assert abs(mc.mean() - iid_expected_ksd2_rbf(mean, sd, N, 1.0)) < 4 * mc.std() / math.sqrt(len(mc))


def test_normal_order_means_are_symmetric_and_sum_to_zero():
    m = normal_order_means(2)          # E max of two standard normals is 1/sqrt(pi)
    np.testing.assert_allclose(m, [-1 / math.sqrt(math.pi), 1 / math.sqrt(math.pi)], atol=1e-8)
    m = normal_order_means(33)
    np.testing.assert_allclose(m + m[::-1], 0.0, atol=1e-8)
    assert abs(m.sum()) < 1e-7 and m[16] == pytest.approx(0.0, abs=1e-8)


def test_w2_reference_closed_forms_and_monte_carlo():
    assert iid_expected_w2sq_std_normal_1d(1) == pytest.approx(2.0, abs=1e-8)    # one draw: E x^2 + 1
    e = [iid_expected_w2sq_std_normal_1d(N) for N in (4, 16, 64)]
    assert e[0] > e[1] > e[2] > 0
    e16 = e[1]
    assert iid_expected_w2sq_gaussian_1d(0.0, 1.0, 16, e16) == pytest.approx(e16)
    g = torch.Generator().manual_seed(5)
    for mean, sd in [(0.0, 1.0), (1.3, 0.6)]:
        X = mean + sd * torch.randn(4000, 16, generator=g, dtype=torch.float64)
        mc = (wasserstein2_std_normal_1d(X) ** 2).numpy()
        ref = iid_expected_w2sq_gaussian_1d(mean, sd, 16)
        assert abs(mc.mean() - ref) < 4 * mc.std() / math.sqrt(len(mc)), (mean, sd, mc.mean(), ref)


@pytest.mark.parametrize("kernel", [RBF(1.0), Matern52(1.0) + Linear(1.0)])
def test_repulsion_scale_is_linear_in_the_repulsion(kernel):
    g = torch.Generator().manual_seed(7)
    X = torch.randn(3, 9, 2, generator=g, dtype=torch.float64)
    S = standard_gaussian_score(X)
    full, none = svgd_direction(X, S, kernel), svgd_direction(X, S, kernel, repulsion_scale=0.0)
    drift = kernel.matrix(X, X).transpose(-1, -2) @ S / X.shape[-2]
    torch.testing.assert_close(none, drift)
    torch.testing.assert_close(svgd_direction(X, S, kernel, repulsion_scale=0.8), none + 0.8 * (full - none))
    torch.testing.assert_close(svgd_step(X, standard_gaussian_score, kernel, 0.1, repulsion_scale=1.0),
                               X + 0.1 * full)


@pytest.mark.parametrize("record_every", [1, 3])
def test_svgd_run_with_a_repulsion_scale_is_the_scaled_steps_and_the_true_ksd(record_every):
    g = torch.Generator().manual_seed(11)
    X0, kernel, n = torch.randn(2, 7, 2, generator=g, dtype=torch.float64), RBF(1.0), 6
    X_end, trace = svgd(X0, standard_gaussian_score, kernel, 0.2, n, record_every, repulsion_scale=0.8)
    X, expect = X0.clone(), []
    for t in range(n + 1):
        if t % record_every == 0:
            expect.append(ksd(X, standard_gaussian_score, kernel))
        if t < n:
            X = svgd_step(X, standard_gaussian_score, kernel, 0.2, repulsion_scale=0.8)
    torch.testing.assert_close(X_end, X)
    torch.testing.assert_close(trace, torch.stack(expect))
    assert not torch.allclose(X_end, svgd(X0, standard_gaussian_score, kernel, 0.2, n)[0])   # the scale acts
