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


@pytest.mark.parametrize("M", [2, 3])
def test_best_grid_bound_is_below_every_grid(M):
    """LB*_M(T) is at most the bound of any M-batch grid ending at T (the minimax, geometric and uniform
    grids and random ones), and attained by the grid it returns."""
    from iclr25.bandits import batch_schedule, best_grid_bound, geometric_schedule, uniform_schedule

    T, sigma, K, margin = 6000, 0.1, 8, 0.7
    value, grid = best_grid_bound(T, M, sigma, K, margin)
    assert len(grid) == M and grid[-1] == T
    np.testing.assert_allclose(grid_lower_bound(grid, sigma, K, margin), value, rtol=1e-9)
    rng = np.random.default_rng(0)
    others = [batch_schedule(T, M, 1, 50.0), geometric_schedule(T, M), uniform_schedule(T, M)]
    others += [np.append(np.sort(rng.choice(np.arange(1, T), M - 1, replace=False)), T) for _ in range(200)]
    assert all(grid_lower_bound(g, sigma, K, margin) >= value * (1 - 1e-9) for g in others)


def test_best_grid_bound_two_batches_balances_its_terms():
    """At M = 2 the optimum balances the first batch, margin (1 - 1/K) t_1, against the second,
    c0 (T - t_1) sigma sqrt(K / t_1), to within the search's resolution."""
    from iclr25.bandits import best_grid_bound

    T, sigma, K, margin = 24000, 0.1, 8, 0.7
    value, grid = best_grid_bound(T, 2, sigma, K, margin, n=4000)
    t1 = grid[0]
    first = margin * (1 - 1 / K) * t1
    second = margin * (1 - 1 / K) ** 2 / 2 * (T - t1) * sigma * np.sqrt(K / t1)
    assert abs(first - second) / value < 0.02


@pytest.mark.parametrize("sigma,K", [(0.1, 8), (1.0, 32)])
def test_best_grid_bound_is_the_integer_minimum_and_valid_at_large_noise(sigma, K):
    """At M = 2 the search returns the exact minimum over every integer t_1 (no upward bias), and where
    (1 - 1/K) sigma sqrt(K / t) > 1 it caps the gap at 1: its value equals grid_lower_bound of its grid and
    no random 3-batch grid lies below LB*_3."""
    from iclr25.bandits import best_grid_bound

    T, margin = 3000, 0.7
    value, grid = best_grid_bound(T, 2, sigma, K, margin)
    exact = min(grid_lower_bound([t1, T], sigma, K, margin) for t1 in range(1, T))
    np.testing.assert_allclose(value, exact, rtol=1e-9)
    np.testing.assert_allclose(grid_lower_bound(grid, sigma, K, margin), value, rtol=1e-9)
    v3, g3 = best_grid_bound(T, 3, sigma, K, margin)
    np.testing.assert_allclose(grid_lower_bound(g3, sigma, K, margin), v3, rtol=1e-9)
    rng = np.random.default_rng(1)
    others = [np.append(np.sort(rng.choice(np.arange(1, T), 2, replace=False)), T) for _ in range(300)]
    assert all(grid_lower_bound(g, sigma, K, margin) >= v3 * (1 - 1e-9) for g in others)


class _ShiftedNoise:
    """The environment ``env`` with the noise of rounds ``[a, b)`` multiplied by ``1 + shift`` (contexts
    unchanged): the rewards of those rounds change, nothing else does."""

    def __init__(self, env, a, b, shift):
        self.env, self.a, self.b, self.shift = env, a, b, shift

    def __getattr__(self, name):
        return getattr(self.env, name)

    def rounds(self, t0, t1):
        X, eps = self.env.rounds(t0, t1)
        t = np.arange(t0, t1)
        return X, eps * (1 + self.shift * ((t >= self.a) & (t < self.b)))

    def chunks(self, t0, t1):
        for c0, X, eps in self.env.chunks(t0, t1):
            t = np.arange(c0, c0 + X.shape[1])
            yield c0, X, eps * (1 + self.shift * ((t >= self.a) & (t < self.b)))


def test_batched_elimination_does_not_use_its_own_batch_rewards():
    """No reward leakage: changing the rewards of batch m leaves batch m's play (hence its regret)
    unchanged, and does change a later batch's; a sequential learner (LinUCB), which uses the rewards of
    the rounds it is in, changes at once and falls below the first batch's bound margin t_1 (1 - 1/K),
    which the batched algorithm respects."""
    from iclr25.bandits import batched_elimination, linucb

    gaps, R = np.array([0.02, 0.05, 0.1, 1.0]), 16
    env = make_needle_env(gaps, R, 8, seed=5, noise_sd=0.1, streams=R)
    grid = np.array([120, 600, 1500])
    base = batched_elimination(env, 1500, grid, lam=0.01)
    for a, b in zip([0, 120], [120, 600]):
        moved = batched_elimination(_ShiftedNoise(env, a, b, -6.0), 1500, grid, lam=0.01)
        np.testing.assert_array_equal(moved.regret[:, :b], base.regret[:, :b])
        assert not np.array_equal(moved.regret[:, b:], base.regret[:, b:])
    first = slice(len(gaps) * R - R, None)               # the instances at gap 1
    bound = batch_lower_bound(grid, [1.0], 0.1, 8, needle_margin(0.1))[0, 0]
    assert base.regret[first, :120].sum(1).mean() >= bound
    seq = linucb(env, 120, lam=0.01)
    seq_moved = linucb(_ShiftedNoise(env, 0, 120, -6.0), 120, lam=0.01)
    assert not np.array_equal(seq.regret, seq_moved.regret)
    assert seq.regret[first].sum(1).mean() < bound
