"""A small 2-D lattice-Boltzmann (D2Q9, BGK) solver for flow past a cylinder, and a
"CylinderFlow-mini" dataset: its velocity and pressure interpolated onto a graded triangular mesh.

Lattice units: grid spacing 1, time step 1, sound speed ``c_s = 1/sqrt(3)``, kinematic viscosity
``nu = (tau - 1/2) / 3``, pressure ``p = c_s^2 rho``. The channel has no-slip walls at the top and
bottom (bounce-back), a parabolic velocity inlet on the left (Zou-He), a zero-gradient outlet on
the right and a bounce-back cylinder. Above ``Re ~ 50`` the wake sheds a von Karman vortex street.

The dataset is cached with ``iclr25.common.cached`` under a key made of its parameters and of the
source of this module and of :mod:`iclr25.graphs.mesh`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

import numpy as np
from scipy.interpolate import RegularGridInterpolator

#: D2Q9 lattice velocities ``c_i`` (shape [9, 2]), weights ``w_i`` and opposite directions.
C = np.array([[0, 0], [1, 0], [0, 1], [-1, 0], [0, -1], [1, 1], [-1, 1], [-1, -1], [1, -1]])
W = np.array([4 / 9] + [1 / 9] * 4 + [1 / 36] * 4)
OPPOSITE = np.array([0, 3, 4, 1, 2, 7, 8, 5, 6])
_RIGHT = np.nonzero(C[:, 0] == 1)[0]
_LEFT = np.nonzero(C[:, 0] == -1)[0]
_MIDDLE = np.nonzero(C[:, 0] == 0)[0]
_CX, _CY, _W = (C[:, 0, None].astype(float), C[:, 1, None].astype(float), W[:, None])


def equilibrium(rho: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Second-order BGK equilibrium.

    Parameters
    ----------
    rho : array, shape [nx, ny]
    u : array, shape [2, nx, ny]

    Returns
    -------
    array, shape [9, nx, ny]
        ``f_i = w_i rho (1 + 3 c_i.u + 9/2 (c_i.u)^2 - 3/2 |u|^2)``; its zeroth moment is ``rho``
        and its first moment ``rho u``.
    """
    shape = rho.shape
    rho, ux, uy = rho.reshape(-1), u[0].reshape(-1), u[1].reshape(-1)  # flat: fast broadcasting
    cu = _CX * ux + _CY * uy
    base = 1.0 - 1.5 * (ux**2 + uy**2)
    return ((_W * rho) * (base + cu * (3.0 + 4.5 * cu))).reshape(9, *shape)


class Lattice:
    """A D2Q9 BGK lattice with bounce-back solids, optionally a channel inlet and outlet.

    Populations are stored flat, ``f`` of shape [9, nx * ny] (node ``(x, y)`` at ``x * ny + y``).
    Every step works in preallocated buffers: no large temporary arrays are created.

    Parameters
    ----------
    solid : bool array, shape [nx, ny]
        Bounce-back nodes (walls, obstacle).
    omega : float
        Relaxation rate ``1 / tau``, in ``(0, 2)``.
    inflow : array, shape [ny], optional
        Inlet x-velocity profile at ``x = 0`` (Zou-He) together with a zero-gradient outlet at
        ``x = nx - 1``. ``None``: a fully periodic box, where total mass is conserved exactly.
    """

    def __init__(self, solid: np.ndarray, omega: float, inflow: np.ndarray | None = None) -> None:
        if not 0.0 < omega < 2.0:
            raise ValueError(f"omega must lie in (0, 2), got {omega}")
        self.nx, self.ny = solid.shape
        self.n = self.nx * self.ny
        self.omega, self.inflow = omega, inflow
        self.solid = np.flatnonzero(solid)
        x, y = np.divmod(np.arange(self.n), self.ny)
        # streaming as one gather: f_new[i, (x, y)] = post[i, (x - c_ix, y - c_iy) mod (nx, ny)]
        src = ((x[None] - C[:, :1]) % self.nx) * self.ny + (y[None] - C[:, 1:]) % self.ny
        self.stream = src + self.n * np.arange(9)[:, None]
        self.rho, self.u = np.empty(self.n), np.empty((2, self.n))
        self.feq, self.tmp = np.empty((9, self.n)), np.empty((9, self.n))
        self.usq = np.empty(self.n)
        self.cf = C.astype(float)

    def moments(self, f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Density [n] and velocity [2, n] of flat populations ``f`` [9, n] (buffers, reused)."""
        np.sum(f, axis=0, out=self.rho)
        np.matmul(self.cf.T, f, out=self.u)
        self.u /= self.rho
        return self.rho, self.u

    def equilibrium(self) -> np.ndarray:
        """BGK equilibrium of the current ``rho, u`` buffers, written into ``feq`` [9, n]."""
        rho, u, feq, cu = self.rho, self.u, self.feq, self.tmp
        np.matmul(self.cf, u, out=cu)  # c_i . u
        np.multiply(u[0], u[0], out=self.usq)
        self.usq += u[1] ** 2
        np.multiply(cu, 4.5, out=feq)
        feq += 3.0
        feq *= cu
        feq += 1.0
        feq -= 1.5 * self.usq
        feq *= rho
        feq *= W[:, None]
        return feq

    def step(self, f: np.ndarray) -> np.ndarray:
        """One collide-and-stream step; updates and returns ``f`` [9, n]."""
        grid = f.reshape(9, self.nx, self.ny)
        if self.inflow is not None:
            grid[_LEFT, -1, :] = grid[_LEFT, -2, :]  # outlet: copy the populations re-entering
        rho, u = self.moments(f)
        if self.inflow is not None:  # Zou-He velocity inlet: density from the known populations
            ny = self.ny
            u[0, :ny], u[1, :ny] = self.inflow, 0.0
            rho[:ny] = (grid[_MIDDLE, 0, :].sum(0) + 2 * grid[_LEFT, 0, :].sum(0)) / (1 - self.inflow)
        feq = self.equilibrium()
        if self.inflow is not None:
            eq = feq.reshape(9, self.nx, self.ny)
            grid[_RIGHT, 0, :] = eq[_RIGHT, 0, :] + grid[OPPOSITE[_RIGHT], 0, :] - eq[OPPOSITE[_RIGHT], 0, :]
        post = feq  # BGK collision f + omega (feq - f), in place
        post -= f
        post *= self.omega
        post += f
        post[:, self.solid] = f[:, self.solid][OPPOSITE]  # full-way bounce-back: reverse populations
        np.take(post, self.stream, out=f)
        return f


@dataclass(frozen=True)
class Channel:
    """A cylinder in a channel, in lattice units.

    ``nx, ny``: grid nodes (rows ``y = 0`` and ``y = ny - 1`` are walls); ``cx, cy, radius``: the
    cylinder; ``u0``: peak inlet velocity; ``reynolds``: ``Re = u0 * 2 radius / nu``.
    """

    nx: int = 160
    ny: int = 42
    cx: float = 25.0
    cy: float = 20.5
    radius: float = 5.0
    u0: float = 0.1
    reynolds: float = 100.0

    @property
    def omega(self) -> float:
        nu = self.u0 * 2 * self.radius / self.reynolds
        return 1.0 / (3 * nu + 0.5)


def simulate_cylinder(ch: Channel, spinup: int, frames: int, every: int) -> tuple[np.ndarray, np.ndarray]:
    """Run the LBM and record ``frames`` snapshots every ``every`` steps after ``spinup`` steps.

    Returns
    -------
    velocity : array, shape [frames, nx, ny, 2], in units of ``u0`` (zero inside solids)
    pressure : array, shape [frames, nx, ny], ``(rho - 1) / 3`` in units of ``u0^2``
    """
    if not 0.51 <= 1 / ch.omega < 2.0 or ch.u0 > 0.2:  # BGK needs tau - 1/2 not too small
        raise ValueError(f"unstable LBM parameters: tau={1 / ch.omega:.3f}, u0={ch.u0}")
    x, y = np.meshgrid(np.arange(ch.nx), np.arange(ch.ny), indexing="ij")
    solid = ((x - ch.cx) ** 2 + (y - ch.cy) ** 2 <= ch.radius**2) | (y == 0) | (y == ch.ny - 1)
    yy = np.arange(ch.ny) - 0.5  # walls half-way between the wall rows and the first fluid rows
    h = ch.ny - 2
    inflow = 4 * ch.u0 * yy * (h - yy) / h**2
    inflow[[0, -1]] = 0.0
    u = np.zeros((2, ch.nx, ch.ny))
    u[0] = inflow[None, :] * ~solid
    u[1] = 1e-3 * ch.u0 * np.sin(2 * np.pi * y / (ch.ny - 1))  # break the symmetry
    lat = Lattice(solid, ch.omega, inflow)
    f = equilibrium(np.ones((ch.nx, ch.ny)), u).reshape(9, -1)
    vel = np.empty((frames, ch.nx, ch.ny, 2), dtype=np.float32)
    prs = np.empty((frames, ch.nx, ch.ny), dtype=np.float32)
    for t in range(spinup + frames * every):
        f = lat.step(f)
        k, r = divmod(t - spinup + 1, every)
        if t >= spinup and r == 0 and 1 <= k <= frames:
            rho, u = lat.moments(f)
            rho, u = rho.reshape(ch.nx, ch.ny), u.reshape(2, ch.nx, ch.ny)
            if not np.isfinite(rho).all():
                raise FloatingPointError("LBM diverged (NaN); lower u0 or raise the resolution")
            vel[k - 1] = np.where(solid[..., None], 0.0, np.moveaxis(u, 0, -1) / ch.u0)
            prs[k - 1] = np.where(solid, 0.0, (rho - rho[~solid].mean()) / 3 / ch.u0**2)
    return vel, prs


def grid_to_points(field: np.ndarray, points: np.ndarray, spacing: float) -> np.ndarray:
    """Bilinear interpolation of grid frames onto points.

    Parameters
    ----------
    field : array, shape [T, nx, ny, ...]
        Values at grid node ``(i, j)``, located at ``(i * spacing, j * spacing)``.
    points : array, shape [N, 2]
    spacing : float

    Returns
    -------
    array, shape [T, N, ...]
    """
    nx, ny = field.shape[1:3]
    grid = (np.arange(nx) * spacing, np.arange(ny) * spacing)
    moved = np.moveaxis(field, 0, 2)  # [nx, ny, T, ...]
    interp = RegularGridInterpolator(grid, moved, bounds_error=False, fill_value=None)
    return np.moveaxis(interp(points), 1, 0).astype(np.float32)


def cylinder_flow_dataset(num_trajectories: int, frames: int, every: int = 20, spinup: int = 3000,
                          nx: int = 160, ny: int = 42, h_min: float = 0.012, h_max: float = 0.04,
                          seed: int = 0, use_cache: bool = True) -> list[dict[str, np.ndarray]]:
    """CylinderFlow-mini: LBM trajectories on graded meshes, cached by parameters.

    Trajectory ``k`` varies the cylinder centre, radius, inlet speed and Reynolds number (drawn
    from ``seed``); its mesh is graded from ``h_min`` at the cylinder to ``h_max`` far away, in a
    physical channel of ``(nx - 1) * dx`` by ``(ny - 1) * dx`` with ``dx = 0.01``.

    Returns
    -------
    list of dicts with ``pos`` [N, 2], ``cells`` [F, 3], ``node_type`` [N], ``velocity``
    [T, N, 2], ``pressure`` [T, N] and ``params`` (the channel, as a JSON string).
    """
    import sys

    from iclr25.common import cached
    from iclr25.graphs import mesh

    params = dict(num_trajectories=num_trajectories, frames=frames, every=every, spinup=spinup,
                  nx=nx, ny=ny, h_min=h_min, h_max=h_max, seed=seed)

    def save(out: list[dict[str, np.ndarray]], path) -> None:
        with open(path, "wb") as f:
            np.savez_compressed(f, **{f"{i}/{k}": v for i, d in enumerate(out) for k, v in d.items()})

    def load(path) -> list[dict[str, np.ndarray]]:
        with np.load(path) as z:
            out = [{k.split("/", 1)[1]: z[k] for k in z.files if k.startswith(f"{i}/")}
                   for i in range(num_trajectories)]
        if any(not d for d in out):
            raise ValueError(f"{path} holds fewer than {num_trajectories} trajectories")
        return out

    return cached("piorf", "cylinder_flow", lambda: _simulate_dataset(**params), key=params,
                  code=[sys.modules[__name__], mesh], save=save, load=load, suffix=".npz",
                  use_cache=use_cache)


def _simulate_dataset(num_trajectories: int, frames: int, every: int, spinup: int, nx: int, ny: int,
                      h_min: float, h_max: float, seed: int) -> list[dict[str, np.ndarray]]:
    """The trajectories of :func:`cylinder_flow_dataset`, simulated (no cache)."""
    from iclr25.graphs.mesh import NodeType, graded_cylinder_mesh

    dx = 0.01
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(num_trajectories):
        radius = rng.uniform(4.0, 5.5)
        offset = rng.choice([-1.0, 1.0]) * rng.uniform(1.0, 2.0)  # off-centre: sheds sooner
        ch = Channel(nx=nx, ny=ny, cx=rng.uniform(0.15, 0.25) * (nx - 1), cy=(ny - 1) / 2 + offset,
                     radius=radius, u0=rng.uniform(0.08, 0.1), reynolds=rng.uniform(120, 160))
        vel, prs = simulate_cylinder(ch, spinup=spinup, frames=frames, every=every)
        pos, cells, node_type = graded_cylinder_mesh(
            length=(nx - 1) * dx, height=(ny - 1) * dx, center=(ch.cx * dx, ch.cy * dx),
            radius=ch.radius * dx, h_min=h_min, h_max=h_max, seed=int(rng.integers(2**31)))
        v = grid_to_points(vel, pos, dx)
        v[:, (node_type == NodeType.WALL_BOUNDARY) | (node_type == NodeType.OBSTACLE)] = 0.0
        out.append(dict(pos=pos.astype(np.float32), cells=cells.astype(np.int64), node_type=node_type,
                        velocity=v, pressure=grid_to_points(prs, pos, dx),
                        params=np.array(json.dumps(asdict(ch)))))
    return out
