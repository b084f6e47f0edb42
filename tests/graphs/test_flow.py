"""Lattice Boltzmann: equilibrium moments, conservation, rest state, interpolation, caching."""

import numpy as np
import pytest

from iclr25.graphs.flow import C, OPPOSITE, W, Channel, Lattice, equilibrium, grid_to_points, simulate_cylinder


def test_lattice_constants():
    assert abs(W.sum() - 1) < 1e-15
    assert np.allclose(W @ C, 0) and np.allclose((W[:, None, None] * C[:, :, None] * C[:, None, :]).sum(0), np.eye(2) / 3)
    assert (C[OPPOSITE] == -C).all()


def test_equilibrium_moments():
    rng = np.random.default_rng(0)
    rho = 1 + 0.1 * rng.random((6, 5))
    u = 0.1 * rng.standard_normal((2, 6, 5))
    f = equilibrium(rho, u)
    assert np.allclose(f.sum(0), rho)
    assert np.allclose(np.einsum("id,ixy->dxy", C, f), rho * u)


def test_periodic_box_with_obstacle_conserves_mass():
    rng = np.random.default_rng(1)
    nx, ny = 30, 20
    x, y = np.meshgrid(np.arange(nx), np.arange(ny), indexing="ij")
    solid = (x - 10) ** 2 + (y - 10) ** 2 <= 9
    u = 0.05 * rng.standard_normal((2, nx, ny)) * ~solid
    f = equilibrium(np.ones((nx, ny)), u).reshape(9, -1)
    lat = Lattice(solid, omega=1.7)
    m0 = f.sum()
    for _ in range(200):
        f = lat.step(f)
    assert abs(f.sum() - m0) / m0 < 1e-12
    assert np.isfinite(f).all()


def test_collision_conserves_momentum_without_solids():
    rng = np.random.default_rng(2)
    nx, ny = 16, 12
    u = 0.05 * rng.standard_normal((2, nx, ny))
    f = equilibrium(np.ones((nx, ny)), u).reshape(9, -1) + 1e-3 * rng.random((9, nx * ny))
    lat = Lattice(np.zeros((nx, ny), bool), omega=1.2)
    mom0 = C.T @ f.sum(1)
    f = lat.step(f)
    assert np.allclose(C.T @ f.sum(1), mom0, atol=1e-13)


def test_rest_is_a_fixed_point():
    solid = np.zeros((10, 8), bool)
    solid[:, 0] = solid[:, -1] = True
    f = equilibrium(np.ones((10, 8)), np.zeros((2, 10, 8))).reshape(9, -1)
    f0 = f.copy()
    f = Lattice(solid, 1.5).step(f)
    assert np.allclose(f, f0, atol=1e-15)


def test_bad_omega():
    with pytest.raises(ValueError, match="omega"):
        Lattice(np.zeros((4, 4), bool), 2.5)
    with pytest.raises(ValueError, match="unstable"):
        simulate_cylinder(Channel(reynolds=1e5), 1, 1, 1)


def test_short_channel_run_is_finite_and_respects_no_slip():
    ch = Channel(nx=60, ny=22, cx=12, cy=11.5, radius=3, u0=0.08, reynolds=60)
    vel, prs = simulate_cylinder(ch, spinup=150, frames=2, every=5)
    assert vel.shape == (2, 60, 22, 2) and np.isfinite(vel).all() and np.isfinite(prs).all()
    assert np.all(vel[:, :, 0] == 0) and np.all(vel[:, 12, 11] == 0)  # wall row, cylinder centre
    assert 0.5 < vel[-1, 1:, 1:-1, 0].mean() < 1.0  # mean of a parabola with peak u0: 2/3


def test_interpolation_is_exact_on_linear_fields():
    xs, ys = np.meshgrid(np.arange(7) * 0.1, np.arange(5) * 0.1, indexing="ij")
    field = np.stack([2 * xs - ys, xs + 3 * ys], -1)[None]
    pts = np.random.default_rng(3).random((20, 2)) * [0.6, 0.4]
    out = grid_to_points(field, pts, 0.1)
    assert np.allclose(out[0], np.stack([2 * pts[:, 0] - pts[:, 1], pts[:, 0] + 3 * pts[:, 1]], 1), atol=1e-6)
