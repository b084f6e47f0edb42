"""A toy PreWorld: cameras -> voxel features (LSS lift-splat + 3-D CNN), the attribute projection
head (density, semantic logits, colour per voxel), the occupancy head, and the state-conditioned
forecaster that rolls the voxel features forward and predicts ego waypoints."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .world import GRID, N_CLASSES, Rig, flat_index


def lss_index(rig: Rig, bins: torch.Tensor) -> torch.Tensor:
    """Flat voxel index (R, D) of the point at distance ``bins`` (D,) along every rig ray (the
    dummy index X*Y*Z outside the grid): where a pixel's depth bin splats its features."""
    pts = rig.origin + rig.dirs[:, None, :] * bins.double()[None, :, None]
    return flat_index(torch.floor(pts).long())


class BEVConv(nn.Module):
    """A 3x3 convolution over the ground plane with the height folded into the channels
    (FlashOcc's channel-to-height trick): (B, C_in, X, Y, Z) -> (B, C_out, X, Y, Z), every output
    height sees every input height. Much cheaper on a CPU than a 3x3x3 Conv3d on a flat grid."""

    def __init__(self, c_in: int, c_out: int, z: int = GRID[2]):
        super().__init__()
        self.z, self.c_out = z, c_out
        self.conv = nn.Conv2d(c_in * z, c_out * z, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, nx, ny, nz = x.shape
        y = self.conv(x.permute(0, 1, 4, 2, 3).reshape(b, c * nz, nx, ny))
        return y.reshape(b, self.c_out, nz, nx, ny).permute(0, 1, 3, 4, 2)


class Encoder(nn.Module):
    """Images (B, cams, 3, H, W) -> voxel features (B, C, X, Y, Z).

    A shared 2-D CNN predicts, per pixel, a softmax over ``n_bins`` depth bins and ``ctx`` context
    channels; their outer product is splatted into the voxels of the bins' points (mean over the
    points a voxel receives); a residual CNN of :class:`BEVConv` layers with coordinate channels mixes the volume."""

    def __init__(self, rig: Rig, channels: int = 8, n_bins: int = 16, ctx: int = 8, hidden: int = 16):
        super().__init__()
        self.shape = rig.shape
        bins = torch.arange(n_bins, dtype=torch.float64) + 0.5
        idx = lss_index(rig, bins)
        n_vox = GRID[0] * GRID[1] * GRID[2]
        counts = torch.bincount(idx.reshape(-1), minlength=n_vox + 1).clamp_min(1).float()
        self.register_buffer("idx", idx.reshape(-1), persistent=False)
        self.register_buffer("counts", counts, persistent=False)
        self.n_bins, self.ctx = n_bins, ctx
        self.img = nn.Sequential(nn.Conv2d(4, hidden, 3, padding=1), nn.ReLU(),
                                 nn.Conv2d(hidden, hidden, 3, padding=1), nn.ReLU(),
                                 nn.Conv2d(hidden, n_bins + ctx, 1))
        coords = torch.stack(torch.meshgrid(*[torch.linspace(-1, 1, g) for g in GRID], indexing="ij"))
        self.register_buffer("coords", coords, persistent=False)
        self.inp = BEVConv(ctx + 3, channels)
        self.mix = nn.Sequential(nn.Softplus(), BEVConv(channels, channels), nn.Softplus(),
                                 BEVConv(channels, channels))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        b, c, _, h, w = images.shape
        rows = torch.linspace(-1, 1, h, device=images.device)[:, None].expand(h, w)
        x = torch.cat([images.reshape(b * c, 3, h, w), rows.expand(b * c, 1, h, w)], 1)
        y = self.img(x).reshape(b, c, self.n_bins + self.ctx, h, w).permute(0, 1, 3, 4, 2)
        y = y.reshape(b, c * h * w, -1)
        depth = y[..., :self.n_bins].softmax(-1)
        feats = (depth[..., None] * y[..., None, self.n_bins:]).reshape(b, -1, self.ctx)
        vol = feats.new_zeros(b, self.counts.numel(), self.ctx).index_add_(1, self.idx, feats)
        vol = (vol / self.counts[None, :, None])[:, :-1].transpose(1, 2).reshape(b, self.ctx, *GRID)
        z = self.inp(torch.cat([vol, self.coords.expand(b, -1, -1, -1, -1)], 1))
        return z + self.mix(z)


class AttributeHead(nn.Module):
    """Per-voxel MLP (1x1x1 convs) -> density (softplus), semantic logits (classes 1..C-1),
    colour (sigmoid): (B, 1 + (C-1) + 3, X, Y, Z) in that channel order."""

    def __init__(self, channels: int = 16, hidden: int = 32, density_bias: float = -2.0):
        super().__init__()
        self.net = nn.Sequential(nn.Conv3d(channels, hidden, 1), nn.Softplus(),
                                 nn.Conv3d(hidden, 1 + (N_CLASSES - 1) + 3, 1))
        self.bias = density_bias

    def forward(self, feat: torch.Tensor) -> torch.Tensor:
        y = self.net(feat)
        return torch.cat([F.softplus(y[:, :1] + self.bias), y[:, 1:N_CLASSES], torch.sigmoid(y[:, N_CLASSES:])], 1)


class OccHead(nn.Module):
    """Conv head (a :class:`BEVConv`, then per voxel) -> occupancy logits (B, N_CLASSES, X, Y, Z)."""

    def __init__(self, channels: int = 16):
        super().__init__()
        self.net = nn.Sequential(BEVConv(channels, channels), nn.Softplus(),
                                 nn.Conv3d(channels, N_CLASSES, 1))

    def forward(self, feat: torch.Tensor) -> torch.Tensor:
        return self.net(feat)


class StateForecaster(nn.Module):
    """State-conditioned forecaster: ego state s -> embedding e (plan MLP); per step
    ``F <- F + fuse([F, e])`` (residual), ``e <- e + ego([e, pool(F)])``, waypoint step = traj(e).

    ``fuse`` is a 1x1x1 conv followed by two :class:`BEVConv` layers: unlike the paper's per-voxel fusion MLP
    (whose deep encoder has a receptive field of tens of metres), our shallow encoder cannot carry
    a voxel's neighbours into its own features, so the update itself must reach 2 voxels (the
    fastest motion per frame). ``use_state=False`` replaces s by zeros (the ablation)."""

    def __init__(self, channels: int = 16, state_dim: int = 2, emb: int = 16, use_state: bool = True):
        super().__init__()
        self.use_state = use_state
        self.plan = nn.Sequential(nn.Linear(state_dim, 32), nn.Softplus(), nn.Linear(32, emb))
        self.fuse = nn.Sequential(nn.Conv3d(channels + emb, channels, 1), nn.Softplus(),
                                  BEVConv(channels, channels), nn.Softplus(),
                                  BEVConv(channels, channels))
        self.ego = nn.Sequential(nn.Linear(emb + channels, 32), nn.Softplus(), nn.Linear(32, emb))
        self.traj = nn.Linear(emb, 2)

    def forward(self, feat: torch.Tensor, state: torch.Tensor, steps: int, shift=None):
        """Features ``feat`` (B, C, X, Y, Z), state (B, state_dim) -> list of ``steps`` future
        feature volumes and waypoints (B, steps, 2) (cumulative displacement of the ego).
        ``shift``, if given, maps the volume before every step (the ego alignment of
        :mod:`~iclr25.occupancy.forecast`, our variant; the world models pass none)."""
        e = self.plan(state if self.use_state else torch.zeros_like(state))
        outs, wps = [], []
        for _ in range(steps):
            if shift is not None:
                feat = shift(feat)
            eb = e[:, :, None, None, None].expand(-1, -1, *feat.shape[2:])
            feat = feat + self.fuse(torch.cat([feat, eb], 1))
            e = e + self.ego(torch.cat([e, feat.mean((2, 3, 4))], 1))
            outs.append(feat)
            wps.append(self.traj(e))
        return outs, torch.cumsum(torch.stack(wps, 1), 1)


class WorldModel(nn.Module):
    """Encoder + attribute head P + occupancy head H + state-conditioned forecaster."""

    def __init__(self, rig: Rig, channels: int = 8, use_state: bool = True):
        super().__init__()
        self.encoder = Encoder(rig, channels)
        self.attr = AttributeHead(channels)
        self.occ = OccHead(channels)
        self.forecaster = StateForecaster(channels, use_state=use_state)

    def forward(self, images: torch.Tensor, state: torch.Tensor, steps: int):
        """Feature volumes [F_0, F_1, ..., F_steps] and waypoints (B, steps, 2)."""
        f0 = self.encoder(images)
        fut, wp = self.forecaster(f0, state, steps)
        return [f0] + fut, wp
