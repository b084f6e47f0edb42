"""Optimisers: SOREL reaches the unsmoothed optimum; the smoothed baselines reach w*_nu."""

import numpy as np
import pytest

from iclr25.risk import (LinearProblem, lsvrg, minimize_smoothed, optimize, prospect,
                         reference_optimum, saddle_saga, sorel, spectral_sgd, spectral_weights)


@pytest.fixture(scope="module")
def setup():
    rng = np.random.default_rng(0)
    n, d = 80, 4
    X = rng.normal(size=(n, d))
    X /= np.sqrt((X**2).sum(1)).max()
    y = X @ rng.normal(size=d) + 0.3 * rng.standard_t(2, size=n)
    p = LinearProblem(X, y, "squared", mu=1.0 / n)
    s = spectral_weights(n, "extremile")
    ref = reference_optimum(p, s)
    return p, s, ref


def test_sorel_converges_to_the_unsmoothed_optimum(setup):
    p, s, ref = setup
    tr = sorel(p, s, lr=0.25, passes=90, c_dual=3.0, seed=0)
    assert tr.values[-1] - ref.upper < 1e-6 * (tr.values[0] - ref.upper)
    assert np.isclose(tr.lam.sum(), 1.0)
    # cost accounting: 3n per outer step from 0 (the losses at w_0 serve lam_0 and the first step)
    assert tr.evals[0] == 0 and all(np.diff(tr.evals) == 3 * p.n)
    # the recorded iterates are the points whose objective was recorded, from w_0 = 0 to the last
    assert len(tr.iterates) == len(tr.values) and not tr.iterates[0].any()
    np.testing.assert_array_equal(tr.iterates[-1], tr.w)
    assert np.isclose(p.objective(tr.iterates[3], s), tr.values[3])
    # the paper's criterion: the squared distance to w* shrinks (here by orders of magnitude)
    d2 = [np.sum((w - ref.w) ** 2) for w in tr.iterates]
    assert d2[-1] < 1e-6 * d2[0]


@pytest.mark.parametrize("ablation", [dict(prox=False), dict(extrapolate=False), dict(growing_dual=False)])
def test_sorel_ablations_run_and_differ(setup, ablation):
    p, s, _ = setup
    full, ab = (sorel(p, s, lr=0.25, passes=15, c_dual=3.0, seed=0, **kw) for kw in ({}, ablation))
    assert ab.evals == full.evals and np.all(np.isfinite(ab.values))
    assert not np.allclose(ab.values[2:], full.values[2:])


@pytest.mark.parametrize("method", [lsvrg, prospect, saddle_saga])
def test_smoothed_baselines_converge_to_the_smoothed_minimiser(setup, method):
    p, s, _ = setup
    nu = 1.0
    w_nu = minimize_smoothed(p, s, nu)
    tr = method(p, s, lr=0.25, passes=60, nu=nu, seed=0)
    assert np.linalg.norm(tr.w - w_nu) < 1e-4 * max(1.0, np.linalg.norm(w_nu))


def test_sgd_decreases_but_stays_biased(setup):
    p, s, ref = setup
    tr = spectral_sgd(p, s, lr=0.5, passes=30, batch=8, seed=0)
    rel = (tr.values[-1] - ref.upper) / (tr.values[0] - ref.upper)
    assert 1e-5 < rel < 1e-2  # progress, but a constant step on a biased estimate stalls


def test_determinism_and_dispatch(setup):
    p, s, _ = setup
    a = optimize("sorel", p, s, lr=0.25, passes=12, seed=3)
    b = optimize("sorel", p, s, lr=0.25, passes=12, seed=3)
    assert a.values == b.values
    with pytest.raises(ValueError, match="sorel, lsvrg, prospect, saddle_saga, sgd"):
        optimize("adam", p, s, lr=0.1, passes=1)


def test_pav_kernel_is_the_permutahedron_projection():
    from iclr25.risk.optimizers import _pav_project
    from iclr25.risk import project_permutahedron
    rng = np.random.default_rng(1)
    n = 50
    s = spectral_weights(n, "cvar", q=0.3)
    for _ in range(5):
        v = np.sort(rng.normal(size=n) * rng.choice([1e-3, 1.0, 30.0]))
        v[10:14] = v[10]                                  # ties
        out = np.empty(n)
        _pav_project(v, s, out, np.empty(n), np.empty(n, dtype=np.int64))
        np.testing.assert_allclose(out, project_permutahedron(v, s), atol=1e-12)


def test_prospect_keeps_its_weights_and_order_consistent_with_the_loss_table(setup):
    from iclr25.risk.optimizers import _prospect_kernel
    from iclr25.risk import smoothed_weights
    p, s, _ = setup
    n, nu, lr = p.n, 0.05, 0.25
    w = np.zeros(p.d)
    z = p.X @ w
    losses, gtab = p.phi(z), p.dphi(z)
    lam = smoothed_weights(losses, s, nu)
    lam_tab = lam.copy()
    gbar = p.X.T @ (lam_tab * gtab)
    order = np.argsort(losses, kind="stable").astype(np.int64)
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    idx = np.random.default_rng(0).integers(n, size=3 * n).astype(np.int64)
    _prospect_kernel(p.X, p.y.astype(float), False, s, nu, lr, p.mu, idx, w, losses, gtab, lam, lam_tab,
                     gbar, order, pos)
    assert np.all(np.diff(losses[order]) >= 0) and np.array_equal(pos[order], np.arange(n))
    np.testing.assert_allclose(lam, smoothed_weights(losses, s, nu), atol=1e-12)
    np.testing.assert_allclose(gbar, p.X.T @ (lam_tab * gtab), atol=1e-10)   # the SAGA average is the table's
    with pytest.raises(ValueError, match="positive shift cost"):
        prospect(p, s, lr=0.1, passes=2, nu=0.0)


def test_lsvrg_at_nu_zero_and_sgd_with_a_decaying_step(setup):
    p, s, ref = setup
    tr = lsvrg(p, s, lr=0.25, passes=60, nu=0.0, seed=0)       # unsmoothed weights frozen per epoch
    assert tr.values[-1] - ref.upper < 1e-6 * (tr.values[0] - ref.upper)   # smooth spectrum: no bias
    const = spectral_sgd(p, s, lr=0.5, passes=30, batch=8, seed=0)
    decay = spectral_sgd(p, s, lr=0.5, passes=30, batch=8, seed=0, decay=True)
    assert const.values[-1] != decay.values[-1]
    rel = (decay.values[-1] - ref.upper) / (decay.values[0] - ref.upper)
    assert rel < 1e-2
