"""The per-batch information-theoretic lower bound: closed forms and its maximiser."""

import numpy as np
import pytest

from iclr25.bandits import batch_lower_bound, grid_lower_bound, info_gap, make_needle_env, needle_margin


def test_first_batch_is_no_information():
    """With t_0 = 0 the first batch loses margin Delta t_1 (1 - 1/K) at every gap."""
    grid, gaps = np.array([50, 400, 2000]), np.array([0.01, 0.3, 1.0])
    lb = batch_lower_bound(grid, gaps, 0.1, 8, margin=0.7)
    np.testing.assert_allclose(lb[:, 0], 0.7 * gaps * 50 * (1 - 1 / 8))


@pytest.mark.parametrize("K,sigma", [(4, 0.1), (8, 0.5), (32, 1.0)])
def test_maximiser_and_closed_form_value(K, sigma):
    """Batch m's bound is maximal at (1 - 1/K) sigma sqrt(K / t_{m-1}) with value
    c0 (t_m - t_{m-1}) sigma sqrt(K / t_{m-1}), c0 = margin (1 - 1/K)^2 / 2; it vanishes at twice that gap."""
    grid, margin = np.array([100, 3000, 90000]), 0.7
    g_star = info_gap(grid, sigma, K)
    assert g_star[0] == 1.0
    for m in (1, 2):
        fine = np.linspace(0, 2 * g_star[m], 20001)[1:]
        lb = batch_lower_bound(grid, fine, sigma, K, margin)[:, m]
        assert abs(fine[lb.argmax()] - g_star[m]) <= 2 * (fine[1] - fine[0])
        c0 = margin * (1 - 1 / K) ** 2 / 2
        closed = c0 * (grid[m] - grid[m - 1]) * sigma * np.sqrt(K / grid[m - 1])
        np.testing.assert_allclose(lb.max(), closed, rtol=1e-6)
        assert batch_lower_bound(grid, [2 * g_star[m] * 1.001], sigma, K, margin)[0, m] == 0.0


def test_grid_lower_bound_is_the_largest_batch_term():
    grid = np.array([30, 900, 24000])
    lb = grid_lower_bound(grid, 0.1, 8, 0.7)
    terms = [batch_lower_bound(grid, [g], 0.1, 8, 0.7)[0, m] for m, g in enumerate(info_gap(grid, 0.1, 8))]
    assert lb == max(terms) and lb > 0


def test_needle_margin_holds_on_the_family():
    """On jittered basis contexts every wrong action costs at least needle_margin(jitter) times the gap."""
    env = make_needle_env(np.array([1.0]), 64, 8, seed=3, noise_sd=0.1)
    X, _ = env.rounds(0, 200)
    mu = np.einsum("snkd,sd->snk", X, env.theta)
    best = mu.max(-1, keepdims=True)
    j = env.theta.argmax(1)
    wrong = np.ones(mu.shape, bool)
    wrong[np.arange(env.S), :, j] = False
    assert (best - mu)[wrong].min() >= needle_margin(0.1) - 1e-12
