"""Spectra, spectral risks and the permutahedron projection: closed forms and identities."""

from itertools import permutations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize

from iclr25.risk import (SPECTRA, coarsen_spectrum, project_permutahedron, smoothed_risk,
                         smoothed_weights, smoothing_bound, spectral_risk, spectral_weights,
                         vertex_weights)


@pytest.mark.parametrize("kind", SPECTRA)
@pytest.mark.parametrize("n", [1, 7, 100])
def test_weights_are_a_nondecreasing_distribution(kind, n):
    s = spectral_weights(n, kind)
    assert s.shape == (n,)
    assert np.isclose(s.sum(), 1.0) and (s >= 0).all()
    assert (np.diff(s) >= -1e-15).all()


def test_closed_forms():
    np.testing.assert_allclose(spectral_weights(4, "cvar", q=0.5), [0, 0, 0.5, 0.5])
    np.testing.assert_allclose(spectral_weights(4, "cvar", q=0.25), [0, 0, 0, 1])
    # fractional cell: q n = 1.5 -> the cell [1/3, 2/3] is half in the tail
    np.testing.assert_allclose(spectral_weights(3, "cvar", q=0.5), [0, 1 / 3, 2 / 3])
    n = 5
    i = np.arange(1, n + 1)
    np.testing.assert_allclose(spectral_weights(n, "extremile", r=2), (2 * i - 1) / n**2)
    rho = 1.3
    esrm = np.exp(-rho) * (np.exp(rho * i / n) - np.exp(rho * (i - 1) / n)) / (1 - np.exp(-rho))
    np.testing.assert_allclose(spectral_weights(n, "esrm", rho=rho), esrm)
    np.testing.assert_allclose(spectral_weights(n, "erm"), np.full(n, 1 / n))


def test_bad_input_names_the_options():
    with pytest.raises(ValueError, match="cvar, extremile, esrm"):
        spectral_weights(5, "median")
    with pytest.raises(ValueError, match="unexpected parameters"):
        spectral_weights(5, "cvar", r=2)
    with pytest.raises(ValueError):
        spectral_weights(5, "cvar", q=0)


def test_limits_erm_and_max():
    rng = np.random.default_rng(0)
    losses = rng.exponential(size=10)
    assert np.isclose(spectral_risk(losses, spectral_weights(10, "erm")), losses.mean())
    assert np.isclose(spectral_risk(losses, spectral_weights(10, "cvar", q=0.1)), losses.max())
    # CVaR_q with q n = k integer is the mean of the k largest losses
    assert np.isclose(spectral_risk(losses, spectral_weights(10, "cvar", q=0.3)),
                      np.sort(losses)[-3:].mean())


@pytest.mark.parametrize("kind", ["cvar", "extremile", "esrm"])
def test_spectral_risk_is_the_max_over_the_permutahedron(kind):
    """Rearrangement: R_sigma(l) = max over all n! vertices of Pi(sigma) of lam @ l."""
    rng = np.random.default_rng(1)
    n = 6
    s = spectral_weights(n, kind)
    for _ in range(5):
        losses = rng.normal(size=n)
        brute = max(np.asarray(p) @ losses for p in permutations(s))
        assert np.isclose(spectral_risk(losses, s), brute)
        assert np.isclose(vertex_weights(losses, s) @ losses, brute)


def _vertices(s):
    return np.array(sorted(set(permutations(s))))


def test_projection_satisfies_the_variational_inequality():
    """p = Proj(v) iff <v - p, q - p> <= 0 for every q in Pi, i.e. for every vertex q."""
    rng = np.random.default_rng(2)
    s = spectral_weights(5, "extremile", r=3)
    V = _vertices(s)
    for scale in (1e-3, 0.1, 10.0):
        v = rng.normal(scale=scale, size=5)
        p = project_permutahedron(v, s)
        assert np.isclose(p.sum(), 1.0)
        assert ((V - p) @ (v - p)).max() <= 1e-12


def test_projection_matches_a_generic_qp():
    """Against SLSQP over the convex weights of the 24 vertices (n = 4)."""
    rng = np.random.default_rng(3)
    s = spectral_weights(4, "esrm", rho=2.0)
    V = _vertices(s)
    v = rng.normal(size=4)
    res = minimize(lambda a: np.sum((a @ V - v) ** 2), np.full(len(V), 1 / len(V)),
                   jac=lambda a: 2 * V @ (a @ V - v), method="SLSQP", bounds=[(0, 1)] * len(V),
                   constraints=[{"type": "eq", "fun": lambda a: a.sum() - 1}],
                   options={"ftol": 1e-14, "maxiter": 500})
    np.testing.assert_allclose(project_permutahedron(v, s), res.x @ V, atol=1e-6)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-10, 10), min_size=2, max_size=12), st.integers(0, 10**6))
def test_projection_is_idempotent_and_equivariant(values, seed):
    v = np.array(values)
    n = v.size
    s = spectral_weights(n, "extremile")
    p = project_permutahedron(v, s)
    np.testing.assert_allclose(project_permutahedron(p, s), p, atol=1e-10)
    perm = np.random.default_rng(seed).permutation(n)
    np.testing.assert_allclose(project_permutahedron(v[perm], s), p[perm], atol=1e-10)
    # majorisation: p is in Pi(s) (sorted partial sums from the top are dominated)
    top = np.cumsum(np.sort(p)[::-1]) - np.cumsum(np.sort(s)[::-1])
    assert top.max() <= 1e-10 and abs(p.sum() - 1) < 1e-10


def test_smoothing_sandwich_and_limits():
    rng = np.random.default_rng(4)
    n = 30
    s = spectral_weights(n, "cvar", q=0.3)
    losses = rng.exponential(size=n)
    D = smoothing_bound(s)
    assert np.isclose(D, 0.5 * n * np.sum((s - 1 / n) ** 2))
    for nu in (1e-3, 0.1, 10.0):
        r = smoothed_risk(losses, s, nu)
        assert spectral_risk(losses, s) - nu * D - 1e-12 <= r <= spectral_risk(losses, s) + 1e-12
    # nu = 1e-9 projects points of size l / (n nu) ~ 1e8: round-off of that size, not of the weights,
    # is what the limit can be checked to (it used 60 % of the default rtol=1e-7 on AVX-512)
    atol = 100 * np.finfo(float).eps * losses.max() / (n * 1e-9)
    np.testing.assert_allclose(smoothed_weights(losses, s, 1e-9), vertex_weights(losses, s), rtol=0, atol=atol)
    np.testing.assert_allclose(smoothed_weights(losses, s, 1e9), np.full(n, 1 / n), atol=1e-8)


def test_coarsen_spectrum():
    s = spectral_weights(100, "cvar", q=0.5)
    np.testing.assert_allclose(coarsen_spectrum(s, 10), spectral_weights(10, "cvar", q=0.5))
    s = spectral_weights(64, "erm")
    np.testing.assert_allclose(coarsen_spectrum(s, 8), np.full(8, 1 / 8))
    e = coarsen_spectrum(spectral_weights(1000, "extremile"), 4)
    np.testing.assert_allclose(e, spectral_weights(4, "extremile"), atol=1e-3)
    with pytest.raises(ValueError):
        coarsen_spectrum(s, 0)
