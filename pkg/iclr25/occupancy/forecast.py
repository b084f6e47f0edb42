"""The forecaster alone, fed the true current occupancy: a diagnosis of why the trained world models'
forecasts do no better than copying their own current prediction.

:class:`OracleForecaster` replaces the camera encoder by a learned per-voxel embedding of the true
current occupancy (one-hot classes and the voxel's coordinates, as the encoder's volume
carries them), then runs the chapter's :class:`~iclr25.occupancy.model.StateForecaster`
and :class:`~iclr25.occupancy.model.OccHead` unchanged. With a perfect input, whatever the forecast
loses against a non-learned copy is the forecaster's own failure, not the encoder's.

Arms (the chapter runs the first and the last):

* ``align=False, use_state=True``: the forecaster as in the world models (the state enters by
  concatenation, as in the paper's fusion);
* ``align=False, use_state=False``: the same with the state replaced by zeros;
* ``align=True``: before every step the volume is shifted along x by the known ego displacement
  (the voxels entering the view copy the last column, as the fill-last ego copy does), so the
  residual update only has to move what moves in the world (our variant, not the paper's).

>>> score = lambda m: future_miou(oracle_predict(m, test))          # any scorer of the forecasts
>>> model, curve = train_oracle(tr, align=True, steps=1000, seed=0, evals=(500, 1000), score=score)
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .model import OccHead, StateForecaster
from .render import enet_weights
from .world import CURRENT, GRID, HORIZON, N_CLASSES


def ego_align(feat: torch.Tensor, speed: torch.Tensor) -> torch.Tensor:
    """``feat`` (B, C, X, Y, Z) seen from one frame later: shifted by ``speed`` (B,) voxels along x,
    the entering voxels copying the last x column (the fill-last rule of
    :func:`~iclr25.occupancy.train.ego_copy`)."""
    x = torch.arange(GRID[0], device=feat.device)
    idx = (x[None, :] + speed.to(feat.device).long()[:, None]).clamp_max(GRID[0] - 1)       # (B, X)
    idx = idx[:, None, :, None, None].expand(-1, feat.shape[1], -1, feat.shape[3], feat.shape[4])
    return feat.gather(2, idx)


class OracleForecaster(nn.Module):
    """True current occupancy (B, X, Y, Z) + ego state -> occupancy logits of frames +1..+K."""

    def __init__(self, channels: int = 8, use_state: bool = True, align: bool = False):
        super().__init__()
        self.align = align
        self.emb = nn.Conv3d(N_CLASSES + 3, channels, 1)
        coords = torch.stack(torch.meshgrid(*[torch.linspace(-1, 1, g) for g in GRID], indexing="ij"))
        self.register_buffer("coords", coords, persistent=False)
        self.forecaster = StateForecaster(channels, use_state=use_state)
        self.occ = OccHead(channels)

    def forward(self, occ: torch.Tensor, state: torch.Tensor, speed: torch.Tensor, steps: int = HORIZON):
        """Occupancy logits [(B, N_CLASSES, X, Y, Z)] * steps and waypoints (B, steps, 2)."""
        x = F.one_hot(occ, N_CLASSES).permute(0, 4, 1, 2, 3).float()
        feat = self.emb(torch.cat([x, self.coords.expand(len(x), -1, -1, -1, -1)], 1))
        shift = (lambda f: ego_align(f, speed)) if self.align else None
        outs, wps = self.forecaster(feat, state, steps, shift=shift)      # the world models' loop, unchanged
        return [self.occ(f) for f in outs], wps


@torch.no_grad()
def oracle_predict(model: OracleForecaster, d: dict, device: torch.device | str = "cpu") -> torch.Tensor:
    """Forecast class ids (N, K, X, Y, Z) of frames +1..+K from the true current occupancy of ``d``."""
    model.eval()
    logits, _ = model(d["occ"][:, CURRENT].to(device), d["state"].to(device), d["speed"].to(device))
    model.train()
    return torch.stack([lg.argmax(1) for lg in logits], 1).cpu()


def train_oracle(d: dict, *, align: bool = False, use_state: bool = True, steps: int = 1000, seed: int = 0,
                 lr: float = 3e-3, batch: int = 8, evals: tuple = (), score=None, device: torch.device | str = "cpu",
                 log: list | None = None) -> tuple[OracleForecaster, dict]:
    """Train an :class:`OracleForecaster` (initial weights and batches from ``seed``) on every sequence
    of ``d``: the class-weighted (ENet) cross-entropy of the forecast frames against the true future
    occupancy plus the waypoint L2 loss (the fine-tuning losses of the world models, without the
    current frame), AdamW with a cosine decay of the learning rate to zero over ``steps``. ``score(model)`` is recorded at the steps ``evals``; returns the model
    and ``{step: score}``."""
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = OracleForecaster(use_state=use_state, align=align).to(device)
    w = enet_weights(torch.bincount(d["occ"].reshape(-1), minlength=N_CLASSES).clamp_min(1)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-2)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: 0.5 * (1 + math.cos(math.pi * k / steps)))
    curve = {}
    n = len(d["occ"])
    for step in range(1, steps + 1):
        bi = torch.randint(n, (batch,), generator=g)
        occ = d["occ"][bi].to(device)
        logits, wp = model(occ[:, CURRENT], d["state"][bi].to(device), d["speed"][bi].to(device))
        loss = torch.stack([F.cross_entropy(lg, occ[:, CURRENT + 1 + f], weight=w) for f, lg in enumerate(logits)]).mean()
        loss = loss + ((wp - d["traj"][bi].to(device)) ** 2).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if log is not None:
            log.append(float(loss.detach()))
        if score is not None and step in evals:
            curve[step] = score(model)
    return model, curve
