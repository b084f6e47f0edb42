"""A procedural driving-like voxel world seen by ego-mounted cameras.

Ego-centric grid of ``X x Y x Z`` voxels of 1 m (x forward, y left, z up). A road runs along x
with a layout drawn per sequence (see :func:`_layout`): its edges on either side of the ego's
lane, a slow lateral sway, the sidewalk widths, the setbacks of the buildings (random lengths,
heights and gaps) and trees; sparse cars (3 x 2 x 2 voxels) move with a velocity fixed by the row
they occupy (same direction, oncoming, parked), pedestrians (1 x 1 x 2) with a sidewalk-determined
velocity, the ego with a per-sequence speed in voxels per frame, so every frame is an integer shift
of a global map: the ego-centric occupancy is exact, and a ray of frame ``t + k`` seen from frame
``t`` is the same ray with its voxel indices shifted by the ego displacement.

Cameras ray-cast the occupancy exactly (voxel traversal): first-hit depth, class and a colour
image whose intensity falls with depth (the only monocular depth cue besides the ground plane).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

CLASSES = ["free", "road", "sidewalk", "building", "vegetation", "car", "pedestrian"]
FREE, ROAD, SIDEWALK, BUILDING, VEGETATION, CAR, PEDESTRIAN = range(7)
N_CLASSES = len(CLASSES)
GRID = (16, 16, 4)               # X, Y, Z voxels of 1 m
EGO_XY = (4.5, 6.0)              # ego (camera) position in the ego-centric grid
CAM_HEIGHT = 1.6
FRAMES = (-2, -1, 0, 1, 2, 3)    # frame offsets of a sequence: 2 past, the current (0), 3 future
CURRENT = FRAMES.index(0)
HORIZON = FRAMES[-1]             # number of future frames
PALETTE = np.array([[0.55, 0.70, 0.95],   # "free" = sky / nothing within range
                    [0.30, 0.30, 0.32], [0.75, 0.70, 0.60], [0.80, 0.35, 0.25],
                    [0.20, 0.60, 0.20], [0.20, 0.35, 0.85], [0.95, 0.80, 0.20]])
# the ego drives in road rows 5 and 6 (y voxels); everything else about the layout is drawn per
# sequence (see :func:`_layout`). Car velocities (voxels per frame, global) are fixed by the row a
# car occupies: rows up to SAME_LANE_MAX drive with the ego's direction, rows beyond are oncoming,
# rows right of the ego lane are parked.
EGO_ROWS = (5, 6)
SAME_LANE_MAX = 8
CAR_SPEED = {"same": 1, "oncoming": -1, "parked": 0}


@dataclass(frozen=True)
class Rig:
    """Ego-mounted pinhole cameras and the exact voxel traversal of every pixel's ray.

    Attributes
    ----------
    origin : torch.Tensor
        (3,) camera centre in grid coordinates (all cameras share it).
    dirs : torch.Tensor
        (R, 3) unit ray directions, R = cameras x height x width, camera-major, row-major.
    t0 : torch.Tensor
        (R, S) entry distance of each traversed segment (padding: the exit distance).
    delta : torch.Tensor
        (R, S) segment lengths (0 for padding).
    ijk : torch.Tensor
        (R, S, 3) integer voxel of each segment (padding: -1).
    t_exit : torch.Tensor
        (R,) distance at which the ray leaves the grid.
    shape : tuple
        (cameras, height, width).
    """

    origin: torch.Tensor
    dirs: torch.Tensor
    t0: torch.Tensor
    delta: torch.Tensor
    ijk: torch.Tensor
    t_exit: torch.Tensor
    shape: tuple


def camera_rays(n_cams: int = 4, height: int = 8, width: int = 16, fov_deg: float = 90.0,
                pitch_deg: float = -20.0) -> torch.Tensor:
    """Unit directions (n_cams * height * width, 3) of pinhole cameras with yaws ``360 k / n_cams``,
    horizontal field of view ``fov_deg``, square pixels, tilted by ``pitch_deg`` (negative: down)."""
    f = (width / 2) / math.tan(math.radians(fov_deg) / 2)
    r, c = torch.meshgrid(torch.arange(height, dtype=torch.float64) + 0.5,
                          torch.arange(width, dtype=torch.float64) + 0.5, indexing="ij")
    d = torch.stack([torch.ones_like(r) * f, -(c - width / 2), -(r - height / 2)], -1).reshape(-1, 3)
    p = math.radians(pitch_deg)
    pitch = torch.tensor([[math.cos(p), 0, -math.sin(p)], [0, 1, 0], [math.sin(p), 0, math.cos(p)]],
                         dtype=torch.float64)
    out = []
    for k in range(n_cams):
        y = 2 * math.pi * k / n_cams
        yaw = torch.tensor([[math.cos(y), -math.sin(y), 0], [math.sin(y), math.cos(y), 0], [0, 0, 1]],
                           dtype=torch.float64)
        out.append(d @ pitch.T @ yaw.T)
    d = torch.cat(out)
    return d / d.norm(dim=-1, keepdim=True)


def traverse(origin: torch.Tensor, dirs: torch.Tensor, grid: tuple = GRID):
    """Exact traversal of rays from ``origin`` (inside the grid box) through unit voxels.

    Returns ``t0`` (R, S), ``delta`` (R, S), ``ijk`` (R, S, 3) and ``t_exit`` (R,): every maximal
    segment of each ray inside one voxel, in order, padded to the longest ray (padding has
    ``delta = 0`` and ``ijk = -1``). Float64 throughout."""
    o = origin.to(torch.float64)
    d = dirs.to(torch.float64)
    size = torch.tensor(grid, dtype=torch.float64)
    with np.errstate(divide="ignore"):
        inv = 1.0 / d
    t_hi = torch.where(d > 0, (size - o) * inv, torch.where(d < 0, -o * inv, torch.full_like(d, math.inf)))
    t_exit = t_hi.min(dim=1).values                                   # (R,)
    cands = [torch.zeros(len(d), 1, dtype=torch.float64)]
    for a in range(3):
        planes = torch.arange(grid[a] + 1, dtype=torch.float64)
        t = (planes[None, :] - o[a]) * inv[:, a:a + 1]
        t = torch.where(torch.isfinite(t) & (t > 0), t, torch.full_like(t, math.inf))
        cands.append(t)
    t = torch.cat(cands, 1)
    t = torch.minimum(t, t_exit[:, None])
    t = torch.sort(t, dim=1).values
    t = torch.cat([t, t_exit[:, None]], 1)
    t0, t1 = t[:, :-1], t[:, 1:]
    delta = (t1 - t0).clamp_min(0)
    keep = delta > 1e-9
    mid = o + d[:, None, :] * ((t0 + t1) / 2)[..., None]
    ijk = torch.floor(mid).long()
    # compact the kept segments to the front of each row
    order = torch.argsort((~keep).to(torch.int8), dim=1, stable=True)
    t0, delta, ijk, keep = (t0.gather(1, order), delta.gather(1, order),
                            ijk.gather(1, order[..., None].expand(-1, -1, 3)), keep.gather(1, order))
    s = int(keep.sum(1).max())
    t0, delta, ijk, keep = t0[:, :s], delta[:, :s], ijk[:, :s], keep[:, :s]
    delta = torch.where(keep, delta, torch.zeros_like(delta))
    t0 = torch.where(keep, t0, t_exit[:, None].expand_as(t0))
    ijk = torch.where(keep[..., None], ijk, torch.full_like(ijk, -1))
    return t0, delta, ijk, t_exit


def make_rig(n_cams: int = 4, height: int = 8, width: int = 16) -> Rig:
    """The standard rig: ``n_cams`` cameras at the ego position, ``height x width`` pixels each."""
    origin = torch.tensor([EGO_XY[0], EGO_XY[1], CAM_HEIGHT], dtype=torch.float64)
    dirs = camera_rays(n_cams, height, width)
    t0, delta, ijk, t_exit = traverse(origin, dirs)
    return Rig(origin, dirs, t0, delta, ijk, t_exit, (n_cams, height, width))


def flat_index(ijk: torch.Tensor, shift_x: torch.Tensor | int = 0, grid: tuple = GRID) -> torch.Tensor:
    """Flat voxel index ``(i * Y + j) * Z + k`` of ``ijk`` (..., 3) after adding ``shift_x`` to i
    (broadcast against ``ijk[..., 0]``); voxels outside the grid (and padding) map to the dummy
    index ``X * Y * Z``, which callers fill with empty space."""
    X, Y, Z = grid
    i = ijk[..., 0] + shift_x
    j, k = ijk[..., 1], ijk[..., 2]
    ok = (ijk[..., 0] >= 0) & (i >= 0) & (i < X) & (j >= 0) & (j < Y) & (k >= 0) & (k < Z)
    return torch.where(ok, (i * Y + j) * Z + k, torch.full_like(i, X * Y * Z))


def shifted_index(rig: Rig, shift_x: torch.Tensor | None, n: int) -> torch.Tensor:
    """Flat voxel indices (n, R, S) of the rig's segments, each sample's rays shifted by its
    ``shift_x`` (n,) voxels along x (None: no shift). Computed once per distinct shift."""
    if shift_x is None:
        return flat_index(rig.ijk)[None].expand(n, -1, -1)
    out = torch.empty((n,) + rig.ijk.shape[:2], dtype=torch.long)
    for s in torch.unique(shift_x).tolist():
        sel = shift_x == s
        out[sel] = flat_index(rig.ijk, int(s))
    return out


def raycast(occ: torch.Tensor, rig: Rig, shift_x: torch.Tensor | None = None):
    """First hit of every ray of ``rig`` in occupancy grids ``occ`` (N, X, Y, Z) of class ids.

    ``shift_x`` (N,) shifts the rays' voxels along x (a ray of a later frame seen in this frame's
    grid). Returns ``depth`` (N, R) (NaN where the ray leaves the grid without a hit), ``cls`` (N, R)
    (``FREE`` there) and ``hit`` (N, R) the flat index of the hit voxel (dummy where none)."""
    n = occ.shape[0]
    occ = occ.cpu().to(torch.uint8)
    flat = torch.cat([occ.reshape(n, -1), torch.zeros(n, 1, dtype=occ.dtype)], 1)
    idx = shifted_index(rig, None if shift_x is None else shift_x.cpu().long(), n)      # (N, R, S)
    cls = flat.gather(1, idx.reshape(n, -1)).reshape(idx.shape)
    occupied = cls != FREE
    first = occupied.to(torch.int8).argmax(-1)                                           # (N, R)
    any_hit = occupied.any(-1)
    t0 = rig.t0.float()
    depth = torch.where(any_hit, torch.take_along_dim(t0[None], first[..., None], 2)[..., 0],
                        torch.full(first.shape, float("nan")))
    c = torch.where(any_hit, torch.take_along_dim(cls, first[..., None], 2)[..., 0], torch.zeros_like(first))
    hit = torch.take_along_dim(idx, first[..., None], 2)[..., 0]
    hit = torch.where(any_hit, hit, torch.full_like(hit, occ[0].numel()))
    return depth, c.long(), hit


def _layout(rng: np.random.Generator, length: int) -> dict:
    """Per-sequence road layout along a global strip of ``length`` x voxels.

    Road rows ``[right(x), left(x)]`` always contain the ego rows 5-6; the base edges, a slow
    lateral sway (the road's curvature, amplitude 0-1 voxel, random period and phase), the two
    sidewalk widths (1-3) and the two building setbacks (0-3 voxels of grass) are drawn per
    sequence. Returns ``right``, ``left`` (length,) road edges (inclusive) and the scalars."""
    right0, left0 = int(rng.integers(2, 6)), int(rng.integers(8, 13))
    amp = int(rng.integers(0, 2))
    period, phase = float(rng.uniform(12, 30)), float(rng.uniform(0, 2 * math.pi))
    sway = np.rint(amp * np.sin(2 * math.pi * np.arange(length) / period + phase)).astype(np.int64)
    right = np.clip(right0 + sway, 1, EGO_ROWS[0])
    left = np.clip(left0 + sway, EGO_ROWS[1] + 1, GRID[1] - 2)
    return dict(right=right, left=left, walk_r=int(rng.integers(1, 4)), walk_l=int(rng.integers(1, 4)),
                set_r=int(rng.integers(0, 4)), set_l=int(rng.integers(0, 4)))


def _static_map(rng: np.random.Generator, length: int, lay: dict) -> np.ndarray:
    """Global static map (length, Y, Z) of class ids for layout ``lay`` (see :func:`_layout`):
    road, sidewalks, grass, and beyond each setback runs of buildings (random length and height
    1-Z), trees (trunk to height Z-1) or open grass."""
    X, Y, Z = length, GRID[1], GRID[2]
    m = np.zeros((X, Y, Z), dtype=np.int64)
    m[:, :, 0] = VEGETATION
    ys = np.arange(Y)
    for x in range(X):
        r, l = lay["right"][x], lay["left"][x]
        m[x, (ys >= r) & (ys <= l), 0] = ROAD
        m[x, (ys >= r - lay["walk_r"]) & (ys < r), 0] = SIDEWALK
        m[x, (ys > l) & (ys <= l + lay["walk_l"]), 0] = SIDEWALK
    for side in ("r", "l"):
        x = 0
        while x < X:
            seg = int(rng.integers(3, 8))
            kind = rng.random()
            h = int(rng.integers(1, Z + 1))
            for xx in range(x, min(x + seg, X)):
                if side == "r":
                    y_in = lay["right"][xx] - lay["walk_r"] - lay["set_r"]          # first row beyond
                    zone = ys < y_in
                else:
                    y_in = lay["left"][xx] + lay["walk_l"] + lay["set_l"]
                    zone = ys > y_in
                if kind < 0.5:
                    m[xx, zone, :h] = BUILDING
                elif kind < 0.8 and (xx - x) % 3 == 1:
                    rows = np.nonzero(zone)[0]
                    if len(rows):
                        yt = rows[-1] if side == "r" else rows[0]
                        m[xx, yt, :Z - 1] = VEGETATION
            x += seg + int(rng.integers(0, 3))
    return m


def _movers(rng: np.random.Generator, lo: int, hi: int, lay: dict) -> list[tuple[int, int, int, int, int, int]]:
    """Sparse agents as (x0 global, y, length, width, cls, velocity): cars (3 x 2) in rows drawn
    within the road left of the ego lane (velocity by row: same direction up to ``SAME_LANE_MAX``,
    oncoming beyond), parked cars right of the ego lane where the road is wide enough, and
    pedestrians on the sidewalks (velocity +1 on the right one, -1 on the left one)."""
    agents = []
    left, right = int(lay["left"].min()), int(lay["right"].max())
    groups = [("moving", EGO_ROWS[1] + 1, left - 1)]
    if right <= EGO_ROWS[0] - 2:
        groups.append(("parked", int(lay["right"].min()), EGO_ROWS[0] - 2))
    for kind, y_lo, y_hi in groups:
        if y_hi < y_lo:
            continue
        x = lo + int(rng.integers(0, 16))
        while x < hi:
            y = int(rng.integers(y_lo, y_hi + 1))
            v = 0 if kind == "parked" else CAR_SPEED["same" if y <= SAME_LANE_MAX else "oncoming"]
            agents.append((x, y, 3, 2, CAR, v))
            x += 3 + int(rng.integers(4, 20))
    for side in ("r", "l"):
        x = lo + int(rng.integers(0, 12))
        while x < hi:
            xr = int(np.clip(x, 0, len(lay["right"]) - 1))
            y = (int(lay["right"][xr]) - 1 - int(rng.integers(0, lay["walk_r"])) if side == "r"
                 else int(lay["left"][xr]) + 1 + int(rng.integers(0, lay["walk_l"])))
            agents.append((x, y, 1, 1, PEDESTRIAN, 1 if side == "r" else -1))
            x += int(rng.integers(6, 20))
    return agents


def make_sequences(n: int, seed: int, speeds: tuple = (0, 1, 2), frames: tuple = FRAMES) -> dict:
    """``n`` sequences of ego-centric occupancy (n, T, X, Y, Z) over frame offsets ``frames``.

    Every sequence draws its own layout (road offset, width and sway, sidewalks, setbacks,
    buildings and trees) and sparse agents, so a voxel's class is not predictable from its position.
    Returns a dict with ``occ`` (long), ``speed`` (n,) ego voxels per frame (uniform over
    ``speeds``), ``state`` (n, 2) the ego state (its last two displacements, scaled by 1/2),
    ``traj`` (n, K, 2) future ego waypoints in the current frame (K future frames)."""
    rng = np.random.default_rng(seed)
    X, Y, Z = GRID
    T = len(frames)
    fmin, fmax = min(frames), max(frames)
    occ = np.zeros((n, T, X, Y, Z), dtype=np.int64)
    speed = rng.choice(np.array(speeds), size=n)
    span = X + max(speeds) * (fmax - fmin) + 8
    for s in range(n):
        v = int(speed[s])
        lay = _layout(rng, span)
        static = _static_map(rng, span, lay)
        agents = _movers(rng, -3 * (fmax - fmin) - 4, span + 3 * (fmax - fmin) + 4, lay)
        for ti, f in enumerate(frames):
            ex = 4 + v * (f - fmin)                       # global x of the grid's start at frame f
            g = static[ex:ex + X].copy()
            for (x0, y, ln, wd, cls, vel) in agents:
                x = x0 + vel * (f - fmin) - ex
                a, b = max(x, 0), min(x + ln, X)
                if a < b:
                    g[a:b, y:y + wd, 1:3] = cls
            occ[s, ti] = g
    K = fmax
    state = np.stack([speed, speed], 1) / 2.0
    traj = np.stack([np.outer(speed, np.arange(1, K + 1)), np.zeros((n, K))], -1)
    return dict(occ=torch.from_numpy(occ), speed=torch.from_numpy(speed).long(),
                state=torch.from_numpy(state).float(), traj=torch.from_numpy(traj).float())


def camera_images(occ: torch.Tensor, rig: Rig, seed: int, noise: float = 0.02, fade: float = 0.04,
                  cast: tuple | None = None) -> torch.Tensor:
    """Colour images (N, cams, 3, H, W) of grids ``occ`` (N, X, Y, Z): class colour times
    ``1 - fade * depth`` times a per-pixel tint in [0.95, 1.05], plus Gaussian noise.
    ``cast``: the result of ``raycast(occ, rig)`` if already computed."""
    g = torch.Generator().manual_seed(seed)
    depth, cls, _ = raycast(occ, rig) if cast is None else cast
    pal = torch.tensor(PALETTE, dtype=torch.float32)
    col = pal[cls] * (1 - fade * torch.nan_to_num(depth, nan=0.0))[..., None]
    col = col * (0.95 + 0.1 * torch.rand(col.shape[:-1] + (1,), generator=g))
    col = col + noise * torch.randn(col.shape, generator=g)
    c, h, w = rig.shape
    return col.reshape(len(occ), c, h, w, 3).permute(0, 1, 4, 2, 3).contiguous()


def lidar_labels(occ: torch.Tensor, rig: Rig, seed: int, keep: float = 0.25, max_depth: float = 20.0,
                 depth_noise: float = 0.1, cast: tuple | None = None) -> dict:
    """Sparse, noisy LiDAR-like 2D labels of grids ``occ`` (N, X, Y, Z) for the rays of ``rig``.

    A random fraction ``keep`` of the rays that hit something within ``max_depth`` get a label:
    ``depth`` (N, R) with Gaussian noise ``depth_noise`` (NaN elsewhere), ``sem`` (N, R) class of
    the hit (-1 elsewhere), ``rgb`` (N, R, 3) the noiseless shaded colour, ``mask`` (N, R).
    ``cast``: the result of ``raycast(occ, rig)`` if already computed."""
    g = torch.Generator().manual_seed(seed)
    depth, cls, _ = raycast(occ, rig) if cast is None else cast
    mask = (cls != FREE) & (depth <= max_depth) & (torch.rand(depth.shape, generator=g) < keep)
    noisy = depth + depth_noise * torch.randn(depth.shape, generator=g)
    pal = torch.tensor(PALETTE, dtype=torch.float32)
    rgb = pal[cls] * (1 - 0.04 * torch.nan_to_num(depth, nan=0.0))[..., None]
    return dict(depth=torch.where(mask, noisy.clamp_min(0.05), torch.full_like(depth, float("nan"))),
                sem=torch.where(mask, cls, torch.full_like(cls, -1)), rgb=rgb, mask=mask)


def visible_mask(occ: torch.Tensor, rig: Rig) -> torch.Tensor:
    """Camera-visibility mask (N, X, Y, Z): voxels a ray passes through up to and including its
    first hit (Occ3D's camera mask)."""
    n = occ.shape[0]
    X, Y, Z = GRID
    flat = torch.cat([occ.reshape(n, -1), torch.zeros(n, 1, dtype=occ.dtype)], 1)
    idx = shifted_index(rig, None, n)
    cls = flat.gather(1, idx.reshape(n, -1)).reshape(idx.shape)
    occd = (cls != FREE).to(torch.int8)
    before = (torch.cumsum(occd, -1) - occd) == 0          # no hit strictly before this segment
    vis = torch.zeros(n, X * Y * Z + 1, dtype=torch.bool)
    vis.scatter_(1, torch.where(before, idx, torch.full_like(idx, X * Y * Z)).reshape(n, -1), True)
    return vis[:, :-1].reshape(n, X, Y, Z)
