"""Algorithm tests by closed forms and identities: the grid, ridge, Sherman-Morrison, elimination."""

import numpy as np
import pytest
from sklearn.linear_model import Ridge

from iclr25.bandits import (TiledEnv, batch_schedule, batched_elimination, batched_linucb, eliminate,
                            elimination_beta, elimination_u, make_needle_env, ridge_from_stats,
                            exp_policy_design, exp_policy_mixture_act, exp_policy_online,
                            explore_then_commit, fit_loglog_slope, gamma, linucb,
                            batches_needed, geometric_schedule,
                            make_synthetic_env, ridge_fit, theory_regret, uniform_schedule, widths)
from iclr25.bandits.algorithms import Estimator


def test_gamma_closed_forms():
    assert gamma(1) == 1.0
    np.testing.assert_allclose([gamma(2), gamma(3), gamma(4)], [2 / 3, 4 / 7, 8 / 15])
    for M in range(1, 10):
        np.testing.assert_allclose(gamma(M), 0.5 + 1 / (2 * (2**M - 1)))
    with pytest.raises(ValueError):
        gamma(0)


@pytest.mark.parametrize("M", [1, 2, 3, 4, 6])
def test_batch_schedule_shape_and_balance(M):
    T, d, L = 10**7, 5, 3.0
    g = batch_schedule(T, M, d, L)
    assert len(g) == M and g[-1] == T and np.all(np.diff(g) > 0)
    u = d * L
    # first batch t_1 = u (T/u)^gamma, and every later batch costs t_m sqrt(u / t_{m-1}) = t_1
    np.testing.assert_allclose(g[0], T if M == 1 else u * (T / u) ** gamma(M), atol=1.0)  # floor
    for m in range(1, M):
        np.testing.assert_allclose(g[m] * np.sqrt(u / g[m - 1]), g[0], rtol=1e-3)


def test_batch_schedule_degenerate_cases():
    g = batch_schedule(5, 5, 10, 3.0)
    np.testing.assert_array_equal(g, [1, 2, 3, 4, 5])
    with pytest.raises(ValueError):
        batch_schedule(3, 4, 2, 1.0)
    np.testing.assert_array_equal(uniform_schedule(10, 4), [2, 5, 8, 10])


def test_theory_regret_two_forms():
    T, d, L = 2e4, 5, 3.0
    u = d * L
    for M in range(1, 7):
        alt = M * np.sqrt(u * T) * (T / u) ** (1 / (2 * (2**M - 1)))
        np.testing.assert_allclose(theory_regret(T, M, d, L), alt)


def test_widths_match_quadratic_form_and_scale():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((2, 3, 4, 5))
    A = rng.standard_normal((2, 5, 5))
    Linv = A @ A.transpose(0, 2, 1) + np.eye(5)
    w = widths(X, Linv)
    np.testing.assert_allclose(w[1, 2, 3], np.sqrt(X[1, 2, 3] @ Linv[1] @ X[1, 2, 3]))
    np.testing.assert_allclose(widths(X, 4 * Linv), 2 * w)


def test_ridge_fit_matches_sklearn():
    rng = np.random.default_rng(1)
    xs = rng.standard_normal((2, 50, 4))
    r = rng.standard_normal((2, 50))
    est = ridge_fit(xs, r, lam=0.7)
    for s in range(2):
        ref = Ridge(alpha=0.7, fit_intercept=False).fit(xs[s], r[s]).coef_
        np.testing.assert_allclose(est.theta[s], ref, atol=1e-10)
        np.testing.assert_allclose(est.Linv[s], np.linalg.inv(0.7 * np.eye(4) + xs[s].T @ xs[s]))


def test_exp_policy_online_is_sherman_morrison_and_max_width():
    env = make_synthetic_env(3, 4, 6, seed=2)
    X, _ = env.rounds(0, 40)
    mask = np.ones(X.shape[:3], bool)
    mask[:, :, 0] = False  # action 0 is eliminated everywhere
    Linv = np.broadcast_to(np.eye(4) / 2.0, (3, 4, 4)).copy()
    acts = exp_policy_online(X, mask, Linv)
    assert np.all(acts != 0)
    xs = X[np.arange(3)[:, None], np.arange(40)[None, :], acts]
    np.testing.assert_allclose(Linv, np.linalg.inv(2.0 * np.eye(4) + np.einsum("snd,sne->sde", xs, xs)),
                               atol=1e-10)
    # round 0 picks the surviving action of largest norm (design = lam I)
    norms = np.where(mask[:, 0], np.linalg.norm(X[:, 0], axis=-1), -1)
    np.testing.assert_array_equal(acts[:, 0], norms.argmax(axis=1))


def test_exp_policy_mixture_respects_mask():
    env = make_synthetic_env(2, 3, 5, seed=3)
    X, _ = env.rounds(0, 64)
    mask = np.ones(X.shape[:3], bool)
    Ls = exp_policy_design(X, mask, 1.0, 16)
    assert Ls.shape == (2, 16, 3, 3)
    np.testing.assert_allclose(Ls[:, 0], np.broadcast_to(np.eye(3), (2, 3, 3)))
    mask[:, :, 2:] = False
    acts = exp_policy_mixture_act(X, mask, Ls, np.random.default_rng(0))
    assert set(np.unique(acts)) <= {0, 1}


def test_eliminate_keeps_only_the_best_with_exact_estimates():
    env = make_synthetic_env(2, 3, 8, seed=4)
    X, _ = env.rounds(0, 30)
    exact = Estimator(env.theta.copy(), np.broadcast_to(1e-12 * np.eye(3), (2, 3, 3)).copy())
    mask = eliminate(X, [exact], beta=1.0)
    best = env.mean_rewards(X).argmax(-1)
    np.testing.assert_array_equal(mask.sum(-1), 1)
    assert mask[np.arange(2)[:, None], np.arange(30)[None, :], best].all()
    loose = Estimator(env.theta.copy(), np.broadcast_to(1e6 * np.eye(3), (2, 3, 3)).copy())
    assert eliminate(X, [loose], beta=1.0).all()


def test_batched_elimination_learns_with_little_noise():
    env = make_synthetic_env(3, 3, 5, seed=6, noise_sd=0.01)
    T = 3000
    res = batched_elimination(env, T, batch_schedule(T, 3, 3, 1.6))
    assert res.regret.min() >= 0
    assert res.info["opt_kept"].min() == 1.0
    assert res.info["survivors"][0] == 5
    assert res.regret[:, res.grid[1]:].mean() < 0.1 * res.regret[:, :res.grid[0]].mean()
    for bad in [dict(design="foo"), dict(final="foo")]:
        with pytest.raises(ValueError, match="valid"):
            batched_elimination(env, T, res.grid, **bad)


def test_linucb_and_rarely_switching():
    env = make_synthetic_env(4, 3, 5, seed=7)
    T = 1500
    full = linucb(env, T)
    rare = linucb(env, T, switch_ratio=2.0)
    # det doubling: at most log2(det Lambda_T / lam^d) <= d log2(1 + T / d) switches
    assert rare.info["switches"] <= 3 * np.log2(1 + T / 3) + 1
    rand = explore_then_commit(env, T, T - 1).regret[:, : T // 2].mean()
    assert full.regret.mean() < 0.5 * rand and rare.regret.mean() < 0.5 * rand


def test_batched_linucb_single_batch_plays_largest_norm():
    env = make_synthetic_env(2, 3, 6, seed=8)
    T = 200
    res = batched_linucb(env, T, np.array([T]))
    X, _ = env.rounds(0, T)
    mu = env.mean_rewards(X)
    # with no data, UCB = beta ||x|| / sqrt(lam): the played action has maximal norm
    # (clipping into the unit ball creates ties, so compare against every maximal-norm action)
    norms = np.linalg.norm(X, axis=-1)
    is_max = norms >= norms.max(-1, keepdims=True) - 1e-12
    gaps = mu.max(-1, keepdims=True) - mu
    ok = np.isclose(gaps, res.regret[..., None]) & is_max
    assert ok.any(-1).all()


def test_fit_loglog_slope_recovers_power():
    T = np.array([1e3, 2e3, 4e3, 8e3])
    np.testing.assert_allclose(fit_loglog_slope(T, 3 * T**0.6), 0.6)


def test_geometric_schedule_and_batches_needed():
    np.testing.assert_array_equal(geometric_schedule(10_000, 2), [100, 10_000])
    np.testing.assert_array_equal(geometric_schedule(1000, 3), [10, 100, 1000])
    g = geometric_schedule(5, 5)
    assert g[-1] == 5 and np.all(np.diff(g) > 0)
    # M* is the first M whose extra factor (T/u)^(1/(2(2^M - 1))) is at most `factor`
    for T, d, L in [(8_000, 8, np.log(8)), (32_000, 8, np.log(8)), (10**9, 5, 3.0), (20, 5, 3.0)]:
        M = batches_needed(T, d, L, factor=2.0)
        extra = lambda m: max(T / (d * L), 1.0) ** (1 / (2 * (2**m - 1)))
        assert extra(M) <= 2.0 + 1e-12 and (M == 1 or extra(M - 1) > 2.0)
    assert batches_needed(10**9, 5, 3.0) > batches_needed(10**4, 5, 3.0)


def test_linucb_beta_scale_one_is_the_theory_radius():
    env = make_synthetic_env(2, 3, 5, seed=9)
    T = 300
    np.testing.assert_array_equal(linucb(env, T).regret, linucb(env, T, beta_scale=1.0).regret)
    assert not np.array_equal(linucb(env, T, beta_scale=0.25).regret, linucb(env, T).regret)


def test_ridge_from_stats_equals_ridge_fit():
    rng = np.random.default_rng(3)
    xs, r = rng.standard_normal((2, 30, 4)), rng.standard_normal((2, 30))
    a = ridge_fit(xs, r, 0.3)
    b = ridge_from_stats(np.einsum("snd,sne->sde", xs, xs), np.einsum("snd,sn->sd", xs, r), 0.3)
    np.testing.assert_allclose(a.theta, b.theta, atol=1e-12)
    np.testing.assert_allclose(a.Linv, b.Linv, atol=1e-12)


def test_elimination_u_closed_form():
    beta = elimination_beta(0.1, 8, 1000, 3, 0.01, 0.01, 1.0)
    np.testing.assert_allclose(elimination_u(0.1, 8, 1000, 3, 0.01, 0.01, 1.0), 4 * 8 * beta**2)


def test_tiled_env_runs_variants_as_separate_calls():
    """Per-instance radius scales and pooled flags on a tiled env = one call per variant."""
    base = make_needle_env(np.array([0.2, 0.6]), 2, 4, seed=5, noise_sd=0.1)
    env = TiledEnv(base, 3)
    assert env.S == 3 * base.S and env.theta_norm == base.theta_norm
    X0, e0 = base.rounds(0, 700)
    X1, e1 = env.rounds(0, 700)
    np.testing.assert_array_equal(X1[base.S:2 * base.S], X0)
    np.testing.assert_array_equal(e1[2 * base.S:], e0)
    T, grid = 900, np.array([150, 500, 900])
    scales = np.repeat([1.0, 0.5, 1.0], base.S)
    pooled = np.repeat([False, False, True], base.S)
    both = batched_elimination(env, T, grid, lam=0.01, beta_scale=scales, pooled=pooled)
    for c, kw in enumerate([{}, {"beta_scale": 0.5}, {"pooled": True}]):
        one = batched_elimination(make_needle_env(np.array([0.2, 0.6]), 2, 4, seed=5, noise_sd=0.1),
                                  T, grid, lam=0.01, **kw)
        part = both.part(c, 3)
        np.testing.assert_allclose(part.regret, one.regret, atol=1e-12)
        np.testing.assert_allclose(part.info["opt_kept_runs"], one.info["opt_kept_runs"])


def test_pooled_equals_per_batch_with_one_estimator():
    """With two batches only the first batch's estimator is ever used: pooling changes nothing."""
    env = make_needle_env(np.array([0.3]), 3, 4, seed=1, noise_sd=0.1)
    a = batched_elimination(env, 600, np.array([200, 600]), lam=0.01)
    b = batched_elimination(env, 600, np.array([200, 600]), lam=0.01, pooled=True)
    np.testing.assert_array_equal(a.regret, b.regret)
    env = make_needle_env(np.array([0.08]), 3, 4, seed=1, noise_sd=0.1)
    c = batched_elimination(env, 3000, np.array([500, 1000, 3000]), lam=0.01, pooled=True)
    d_ = batched_elimination(env, 3000, np.array([500, 1000, 3000]), lam=0.01)
    # batch 2 alone (500 rounds) cannot eliminate at this gap, batches 1-2 pooled (1000 rounds) can
    assert c.total().sum() < 0.9 * d_.total().sum()


def test_batched_linucb_per_instance_beta_scale_matches_separate_runs():
    from iclr25.bandits import make_needle_env
    env = make_needle_env(np.array([0.05, 0.3]), 2, 4, seed=5, noise_sd=0.1, streams=2)
    grid = np.array([50, 200, 400])
    tiled = batched_linucb(TiledEnv(env, 2), 400, grid, lam=0.01, beta_scale=np.repeat([1.0, 0.1], env.S))
    np.testing.assert_allclose(tiled.part(0, 2).regret, batched_linucb(env, 400, grid, lam=0.01).regret)
    np.testing.assert_allclose(tiled.part(1, 2).regret,
                               batched_linucb(env, 400, grid, lam=0.01, beta_scale=0.1).regret)


# ----------------------------------------------------------------------------- the dense-ladder study
def test_ladder_study_cell_shapes_and_record():
    from iclr25.bandits import ladder_study as st

    env = st.env_of(np.array([0.1, 1.0]), streams=2, seed=3)
    tot, post, last = st.run_cell("elimination", 2, 200, env=env)
    assert tot.shape == post.shape == last.shape == (2, 2)
    assert np.all(post <= tot + 1e-9) and np.all(post >= 0)
    tot_f, post_f, last_f = st.run_cell("frozen LinUCB, geometric grid", 2, 200, env=env)
    assert st.grid_of("frozen LinUCB, geometric grid", 200, 2)[0] == 14  # round(200^(1/2))
    assert np.all(post_f <= tot_f + 1e-9)
    lin = st.run_linucb((100, 200), env=env)
    assert lin.shape == (2, 2, 2) and np.all(lin[0] <= lin[1] + 1e-9)
    record, arrays = st.load()                      # the committed record: sha256 checked on load
    H, G, R = len(st.HORIZONS), st.N_GAPS, st.STREAMS
    for method in st.BATCHED:
        for M in st.MS:
            for part in st.PARTS:
                assert arrays[st.key(method, M, part)].shape == (H, G, R)
    assert arrays[st.key("LinUCB", None, "total")].shape == (H, G, R)
    assert record["recipe"]["horizons"] == list(st.HORIZONS) and record["recipe"]["streams"] == R
