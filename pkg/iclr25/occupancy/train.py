"""Data sets, the two training stages (2D-rendering pre-training, 3D fine-tuning), the 3D-only
baseline, and evaluation (current / future mIoU and IoU, waypoint error) of the toy PreWorld."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from .metrics import binary_iou_from_confusion, miou_from_confusion, occ_confusion
from .model import WorldModel
from .render import enet_weights, gather_fields, render_losses, volume_render
from .world import (CAR, CURRENT, EGO_XY, FRAMES, FREE, GRID, HORIZON, N_CLASSES, PEDESTRIAN, Rig, camera_images,
                    flat_index, lidar_labels, make_sequences, raycast, visible_mask)

AUX = (-2, -1, 0, 1, 2)       # frames whose rays supervise the current features in pre-training
MAX_SHIFT = 2 * max(abs(f) for f in FRAMES)


def build_data(n: int, seed: int, rig: Rig) -> dict:
    """``n`` sequences with the current frame's images, their 3D labels (occupancy of every frame),
    sparse LiDAR-like 2D labels of every frame (own grid) and of the aux frames seen in the current
    grid (``aux_*``, shifted rays; rays whose hit lies outside the current grid are unlabelled)."""
    d = make_sequences(n, seed)
    occ = d["occ"]
    casts = [raycast(occ[:, t], rig) for t in range(len(FRAMES))]
    d["images"] = camera_images(occ[:, CURRENT], rig, seed + 1, cast=casts[CURRENT])
    d["visible"] = visible_mask(occ[:, CURRENT], rig)
    labs = [lidar_labels(occ[:, t], rig, seed + 10 + t, cast=casts[t]) for t in range(len(FRAMES))]
    for key in ("depth", "sem", "rgb", "mask"):
        d[key] = torch.stack([lab[key] for lab in labs], 1)            # (n, T, R, ...)
    shift = d["speed"][:, None] * torch.tensor(FRAMES)[None]           # (n, T): frame t's voxel i is i + shift
    d["shift"] = shift
    X, Y, Z = GRID
    aux_ok = torch.zeros_like(d["mask"])
    for t in range(len(FRAMES)):
        hit = casts[t][2]                                               # flat index in frame t's grid
        i = torch.div(hit, Y * Z, rounding_mode="floor") + shift[:, t:t + 1]
        aux_ok[:, t] = d["mask"][:, t] & (hit < X * Y * Z) & (i >= 0) & (i < X)
    d["aux_mask"] = aux_ok
    # the same without the aux rays whose 2D label is a mover (car, pedestrian): a LiDAR-label mask,
    # which knows only the hit's class; the current frame's own rays are all kept
    mover = (d["sem"] == CAR) | (d["sem"] == PEDESTRIAN)
    mover[:, CURRENT] = False
    d["aux_static"] = aux_ok & ~mover
    return d


@dataclass
class Recipe:
    """Hyper-parameters of one training run."""

    lr: float = 1e-3
    steps: int = 300
    batch: int = 4
    weight_decay: float = 1e-2
    aux: bool = True            # pre-training: rays of the aux frames too (temporal supervision)
    mask_movers: bool = False   # pre-training: drop the aux frames' rays whose 2D label is a car or pedestrian
    rays: int = 40              # pre-training: labelled rays rendered per sample and frame
    evals: tuple = ()           # steps at which to validate (the best state is kept)
    horizon: int = HORIZON
    occ_loss: str = "enet"      # stage 2: "enet" (class-weighted cross-entropy) or "paper" (:func:`paper_occ_loss`)
    extra: dict = field(default_factory=dict)


class Renderer:
    """Renders a model's attribute fields along chosen rays of the rig, for any integer x-shift."""

    def __init__(self, rig: Rig, device: torch.device):
        self.t0 = rig.t0.float().to(device)
        self.delta = rig.delta.float().to(device)
        self.t_exit = rig.t_exit.float().to(device)
        self.table = torch.stack([flat_index(rig.ijk, s) for s in range(-MAX_SHIFT, MAX_SHIFT + 1)]).to(device)

    def __call__(self, attrs: torch.Tensor, shift: torch.Tensor, rays: torch.Tensor) -> dict:
        """``attrs`` (B, 1 + 6 + 3, X, Y, Z), ``shift`` (B,), ray ids ``rays`` (B, n) -> rendered
        depth (B, n), sem (B, n, 6), rgb (B, n, 3)."""
        idx = self.table[shift + MAX_SHIFT]                            # (B, R, S)
        idx = idx.gather(1, rays[..., None].expand(-1, -1, idx.shape[-1]))
        vals = gather_fields(attrs, idx)
        return volume_render(vals[..., 0], self.t0[rays], self.delta[rays], self.t_exit[rays],
                             dict(sem=vals[..., 1:N_CLASSES], rgb=vals[..., N_CLASSES:]))


def sample_rays(mask: torch.Tensor, n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` ray ids per row of ``mask`` (B, R), drawn uniformly from its labelled rays (with
    replacement), and whether each is labelled (False only for rows without any label)."""
    w = mask.float().cpu() + 1e-12
    ids = torch.multinomial(w, n, replacement=True, generator=g).to(mask.device)
    return ids, mask.gather(1, ids)


def _batch(d: dict, idx: torch.Tensor, device: torch.device, keys: tuple) -> dict:
    return {k: d[k][idx].to(device) for k in keys}


def class_weights_3d(d: dict, idx: torch.Tensor) -> torch.Tensor:
    """ENet class weights of the 3D labels of sequences ``idx``."""
    return enet_weights(torch.bincount(d["occ"][idx].reshape(-1), minlength=N_CLASSES).clamp_min(1))


def class_weights_2d(d: dict, idx: torch.Tensor) -> torch.Tensor:
    """ENet class weights of the 2D semantic labels (classes 1..6) of sequences ``idx``."""
    s = d["sem"][idx]
    return enet_weights(torch.bincount(s[s > 0] - 1, minlength=N_CLASSES - 1).clamp_min(1))


def pretrain(model: WorldModel, d: dict, idx: torch.Tensor, rec: Recipe, rig: Rig, seed: int,
             device: torch.device, log: list | None = None, callback: tuple | None = None) -> WorldModel:
    """Stage 1: rendering losses only (depth, semantics, colour) on the current features (rays of
    the aux frames too when ``rec.aux``, subsampled to as many rays as the current frame alone
    has) and on each forecast frame (its own rays), plus the waypoint L2 loss. The occupancy head
    is not trained (as in the paper's code, where its loss is multiplied by 0). A step whose loss is
    not finite is skipped (and logged as NaN); the committed variants have none. ``callback = (fn,
    every)`` calls ``fn(step, model)`` after every ``every`` steps (it draws no random numbers from
    the run's generator, so the run is the same with or without it)."""
    g = torch.Generator().manual_seed(seed)
    render = Renderer(rig, device)
    wsem = class_weights_2d(d, idx).to(device)
    params = [p for n, p in model.named_parameters() if not n.startswith("occ.")]
    opt = torch.optim.AdamW(params, lr=rec.lr, weight_decay=rec.weight_decay)
    model.train()
    for step in range(rec.steps):
        bi = idx[torch.randint(len(idx), (rec.batch,), generator=g)]
        loss = stage1_loss(model, d, bi, rec, render, wsem, g, device)
        if log is not None:
            log.append(float(loss.detach()))
        if torch.isfinite(loss):            # a rare overflow: skip the step (logged as NaN)
            opt.zero_grad()
            loss.backward()
            opt.step()
        if callback is not None and (step + 1) % callback[1] == 0:
            callback[0](step + 1, model)
    return model


def stage1_loss(model: WorldModel, d: dict, bi: torch.Tensor, rec: Recipe, render: Renderer, wsem: torch.Tensor,
                g: torch.Generator, device: torch.device) -> torch.Tensor:
    """The stage-1 loss of the sequences ``bi`` of ``d`` (rays drawn with ``g``): rendering losses of
    the current features against the aux frames' (or the current frame's) rays, of each forecast
    volume against its own frame's rays, and the waypoint L2 loss."""
    aux_key = "aux_static" if rec.mask_movers else "aux_mask"
    keys = ("images", "state", "traj", "depth", "sem", "rgb", "mask", aux_key, "shift")
    aux_t = [FRAMES.index(a) for a in AUX] if rec.aux else [CURRENT]
    b = _batch(d, bi, device, keys)
    vols, wp = model(b["images"], b["state"], rec.horizon)
    losses = []

    def frame_loss(attrs, t, shift, mask, n):
        rays, ok = sample_rays(mask, n, g)
        out = render(attrs, shift, rays)
        pick = lambda x: x.gather(1, rays) if x.dim() == 2 else x.gather(1, rays[..., None].expand(-1, -1, x.shape[-1]))
        return sum(render_losses(out, pick(b["depth"][:, t]), pick(b["sem"][:, t]), pick(b["rgb"][:, t]),
                                 ok, wsem).values())

    # the current features: rec.rays rays per sample, spread over the aux frames (same total)
    attrs0 = model.attr(vols[0])
    per = max(1, rec.rays // len(aux_t))
    losses.append(torch.stack([frame_loss(attrs0, t, b["shift"][:, t], b[aux_key][:, t], per)
                               for t in aux_t]).mean())
    for f in range(1, rec.horizon + 1):
        t = CURRENT + f
        losses.append(frame_loss(model.attr(vols[f]), t, torch.zeros_like(b["shift"][:, t]), b["mask"][:, t], rec.rays))
    return torch.stack(losses).mean() + ((wp - b["traj"]) ** 2).sum(-1).mean()


def stage1_val_loss(model: WorldModel, d: dict, rec: Recipe, rig: Rig, device: torch.device, seed: int = 0,
                    batch: int = 8) -> float:
    """Mean stage-1 loss on every sequence of ``d`` (validation: rays drawn with a fixed seed, class
    weights of ``d``'s own 2D labels), without gradients; leaves the model in train mode."""
    g = torch.Generator().manual_seed(seed)
    render, idx = Renderer(rig, device), torch.arange(len(d["occ"]))
    wsem = class_weights_2d(d, idx).to(device)
    with torch.no_grad():
        vals = [float(stage1_loss(model, d, idx[i:i + batch], rec, render, wsem, g, device)) * len(idx[i:i + batch])
                for i in range(0, len(idx), batch)]
    return sum(vals) / len(idx)


def occ_loss(logits: list, occ: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Class-weighted cross-entropy of occupancy logits [(B, C, X, Y, Z)] * (K+1) against the
    current and future frames of ``occ`` (B, T, X, Y, Z)."""
    return torch.stack([F.cross_entropy(lg, occ[:, CURRENT + f], weight=weight) for f, lg in enumerate(logits)]).mean()


def paper_class_weights(d: dict, idx: torch.Tensor) -> torch.Tensor:
    """The official code's occupancy class weights, ``1 / log(n_k + 0.001)`` for the occupied classes
    (``n_k`` their voxel count in the 3D labels of sequences ``idx``, every frame), and 0 for free space."""
    n = torch.bincount(d["occ"][idx].reshape(-1), minlength=N_CLASSES).clamp_min(2).double()
    w = 1 / torch.log(n + 0.001)
    w[FREE] = 0.0
    return w.float()


def radial_weight(grid: tuple = GRID) -> torch.Tensor:
    """The official focal loss's per-column weight (X, Y): 1 + the column's distance from the ego
    over the largest such distance (1 at the ego, 2 in the farthest column)."""
    x = torch.arange(grid[0], dtype=torch.float64)[:, None] + 0.5 - EGO_XY[0]
    y = torch.arange(grid[1], dtype=torch.float64)[None, :] + 0.5 - EGO_XY[1]
    r = torch.sqrt(x ** 2 + y ** 2)
    return (1 + r / r.max()).float()


def focal_occ_loss(logits: torch.Tensor, target: torch.Tensor, weight: torch.Tensor, radial: torch.Tensor,
                   gamma: float = 2.0, alpha: float = 0.25, scale: float = 100.0) -> torch.Tensor:
    """The official code's voxel "cross-entropy": a sigmoid focal loss per class channel of the logits
    (B, C, X, Y, Z) against the one-hot ``target`` (B, X, Y, Z), each channel weighted by its class
    weight ``weight`` (C,) (free space's is 0, so only the occupied classes' channels are trained:
    pushed up where they are the label, down everywhere else, free voxels included) and each voxel by
    ``radial`` (X, Y); summed over channels, averaged over voxels, times ``scale``."""
    one = F.one_hot(target, logits.shape[1]).movedim(-1, 1).to(logits.dtype)
    p = torch.sigmoid(logits)
    pt = (1 - p) * one + p * (1 - one)                                   # probability of the wrong answer
    focal = (alpha * one + (1 - alpha) * (1 - one)) * pt.pow(gamma)
    bce = F.binary_cross_entropy_with_logits(logits, one, reduction="none")
    w = weight.view(1, -1, 1, 1, 1) * radial[None, None, :, :, None]
    return scale * (bce * focal * w).sum(1).mean()


def geo_scal_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """MonoScene's geometry scene-class affinity loss, as in the official code: with ``q`` the softmax
    probability of "occupied" (1 - p(free)) per voxel of the batch, the cross-entropy (against 1) of
    the soft precision, recall and specificity of occupied-vs-free: -log(sum q y / sum q)
    - log(sum q y / sum y) - log(sum (1 - q)(1 - y) / sum (1 - y)), ``y`` = the voxel is occupied."""
    empty = F.softmax(logits, 1)[:, FREE].reshape(-1)
    y = (target != FREE).reshape(-1).to(empty.dtype)
    occ = 1 - empty
    inter = (y * occ).sum()
    return (_bce1(inter / occ.sum()) + _bce1(inter / y.sum()) + _bce1(((1 - y) * empty).sum() / (1 - y).sum()))


def _bce1(ratio: torch.Tensor) -> torch.Tensor:
    """Binary cross-entropy of a soft ratio against 1, -log(ratio) (clamped at 100 as torch's is); the ratio
    is clipped to [0, 1] first, where float rounding of its two sums can push it past 1."""
    return F.binary_cross_entropy(ratio.clamp(0, 1), torch.ones_like(ratio))


def sem_scal_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """MonoScene's semantic scene-class affinity loss, as in the official code: for every class present
    in ``target`` (free space included), the cross-entropy (against 1) of the soft precision, recall
    and specificity of that class's softmax probability over the batch's voxels, averaged over those
    classes."""
    p = F.softmax(logits, 1).movedim(1, -1).reshape(-1, logits.shape[1])
    t = target.reshape(-1)
    terms = []
    for k in range(logits.shape[1]):
        y = (t == k).to(p.dtype)
        if y.sum() == 0:
            continue
        pk, inter = p[:, k], (p[:, k] * y).sum()
        loss = _bce1(inter / y.sum())
        if pk.sum() > 0:                                   # as the official code: no precision of an unused class
            loss = loss + _bce1(inter / pk.sum())
        if (1 - y).sum() > 0:
            loss = loss + _bce1(((1 - pk) * (1 - y)).sum() / (1 - y).sum())
        terms.append(loss)
    return torch.stack(terms).mean()


def paper_occ_loss(logits: list, occ: torch.Tensor, weight: torch.Tensor, radial: torch.Tensor) -> torch.Tensor:
    """The official fine-tuning loss of the occupancy logits [(B, C, X, Y, Z)] * (K+1) against the
    current and future frames of ``occ`` (B, T, X, Y, Z): per frame the class-weighted focal loss
    (free space weight 0) plus sem_scal plus geo_scal, weight 1 each (the official code's
    Lovász-softmax term, which ignores free voxels, is left out), averaged over the frames. Non-finite
    logits are read as 0, as the official code does."""
    logits = [torch.nan_to_num(lg, nan=0.0, posinf=0.0, neginf=0.0) for lg in logits]
    return torch.stack([focal_occ_loss(lg, occ[:, CURRENT + f], weight, radial) + sem_scal_loss(lg, occ[:, CURRENT + f])
                        + geo_scal_loss(lg, occ[:, CURRENT + f]) for f, lg in enumerate(logits)]).mean()


def finetune(model: WorldModel, d: dict, idx: torch.Tensor, rec: Recipe, seed: int, device: torch.device,
             val: dict | None = None, log: list | None = None, callback: tuple | None = None
             ) -> tuple[WorldModel, dict]:
    """Stage 2 (or the 3D-only baseline from scratch): 3D occupancy loss on the current and future
    frames of the labelled sequences ``idx`` (``rec.occ_loss``: ``"paper"``, the official code's
    focal + sem_scal + geo_scal of :func:`paper_occ_loss`, or ``"enet"``, the ENet-weighted
    cross-entropy of :func:`occ_loss`) plus the waypoint L2 loss; rendering off. Validates
    at ``rec.evals`` on ``val`` and returns the best state and ``{step: score}``. ``callback =
    (fn, steps)`` calls ``fn(step, model)`` after each of those steps (it may raise to stop)."""
    g = torch.Generator().manual_seed(seed)
    assert rec.occ_loss in ("enet", "paper"), rec.occ_loss
    if rec.occ_loss == "paper":
        w, radial = paper_class_weights(d, idx).to(device), radial_weight().to(device)
        loss_3d = lambda lg, occ: paper_occ_loss(lg, occ, w, radial)
    else:
        w = class_weights_3d(d, idx).to(device)
        loss_3d = lambda lg, occ: occ_loss(lg, occ, w)
    opt = torch.optim.AdamW(model.parameters(), lr=rec.lr, weight_decay=rec.weight_decay)
    keys = ("images", "state", "traj", "occ")
    scores, best, best_score = {}, None, -1.0
    for step in range(1, rec.steps + 1):
        model.train()
        bi = idx[torch.randint(len(idx), (rec.batch,), generator=g)]
        b = _batch(d, bi, device, keys)
        vols, wp = model(b["images"], b["state"], rec.horizon)
        loss = loss_3d([model.occ(v) for v in vols], b["occ"]) + ((wp - b["traj"]) ** 2).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if log is not None:
            log.append(float(loss.detach()))
        if callback is not None and step in callback[1]:
            callback[0](step, model)
        if val is not None and step in rec.evals:
            r = evaluate(model, val, device)
            scores[step] = selection_score(r)
            if scores[step] > best_score:
                best_score, best = scores[step], copy.deepcopy(model.state_dict())
    if best is not None:
        model.load_state_dict(best)
    return model, scores


def selection_score(r: dict) -> float:
    """What tuning maximises: the mean of the current mIoU and the average future mIoU."""
    return 0.5 * (r["miou_now"] + r["miou_future"])


@torch.no_grad()
def predict(model: WorldModel, d: dict, device: torch.device, chunk: int = 64, mode: str = "occ"):
    """Predicted class ids (N, K+1, X, Y, Z) for the current and future frames, waypoints (N, K, 2).
    ``mode="fields"`` reads occupancy from the attribute fields instead of the occupancy head
    (density above log 2, i.e. opacity above 1/2 across one voxel; class = argmax of the semantic
    logits): the 2D-only (RenderOcc-style) model."""
    model.eval()
    preds, wps = [], []
    for s in range(0, len(d["images"]), chunk):
        vols, wp = model(d["images"][s:s + chunk].to(device), d["state"][s:s + chunk].to(device), HORIZON)
        if mode == "occ":
            p = [model.occ(v).argmax(1) for v in vols]
        else:
            p = []
            for v in vols:
                a = model.attr(v)
                cls = a[:, 1:N_CLASSES].argmax(1) + 1
                p.append(torch.where(a[:, 0] > torch.log(torch.tensor(2.0)), cls, torch.zeros_like(cls)))
        preds.append(torch.stack(p, 1).cpu())
        wps.append(wp.cpu())
    return torch.cat(preds), torch.cat(wps)


def ego_copy(pred_now: torch.Tensor, speed: torch.Tensor, steps: int = HORIZON, fill: str = "free") -> torch.Tensor:
    """The ego-compensated copy: the current prediction (N, X, Y, Z) shifted by the known ego
    displacement ``speed * f`` voxels (x) for f = 1..steps; the voxels entering the view are free
    (``fill="free"``) or copies of the last predicted x column (``fill="last"``: road, sidewalks and
    grass run along x, so this is the stronger non-learned forecast)."""
    assert fill in ("free", "last"), fill
    out = []
    for f in range(1, steps + 1):
        frame = torch.zeros_like(pred_now)
        for v in torch.unique(speed).tolist():
            sel = speed == v
            s = int(v) * f
            frame[sel, :GRID[0] - s] = pred_now[sel, s:]
            if fill == "last" and s > 0:
                frame[sel, GRID[0] - s:] = pred_now[sel, -1:]
        out.append(frame)
    return torch.stack(out, 1)


def scores_of(pred: torch.Tensor, d: dict, wp: torch.Tensor | None = None) -> dict:
    """mIoU / IoU (percent) of predictions (N, K+1, X, Y, Z): current (all voxels and camera-visible
    voxels), each future frame and their average; waypoint L2 per horizon; per-class IoU too."""
    from .metrics import iou_per_class
    occ = d["occ"][:, CURRENT:]
    hists = [occ_confusion(pred[:, f], occ[:, f], N_CLASSES) for f in range(pred.shape[1])]
    vis = occ_confusion(pred[:, 0], occ[:, 0], N_CLASSES, d["visible"])
    inv = occ_confusion(pred[:, 0], occ[:, 0], N_CLASSES, ~d["visible"])
    fut = [miou_from_confusion(h) for h in hists[1:]]
    r = dict(miou_now=miou_from_confusion(hists[0]), iou_now=binary_iou_from_confusion(hists[0]),
             miou_visible=miou_from_confusion(vis), miou_invisible=miou_from_confusion(inv),
             miou_steps=fut, iou_steps=[binary_iou_from_confusion(h) for h in hists[1:]],
             miou_future=sum(fut) / len(fut), class_iou_future=[iou_per_class(h) for h in hists[1:]],
             class_iou_now=iou_per_class(hists[0]))
    r["iou_future"] = sum(r["iou_steps"]) / len(fut)
    if wp is not None:
        r["l2_steps"] = (wp - d["traj"]).norm(dim=-1).mean(0).tolist()
    return r


def evaluate(model: WorldModel, d: dict, device: torch.device, mode: str = "occ") -> dict:
    """Scores of ``model`` on data ``d`` (see :func:`scores_of`)."""
    pred, wp = predict(model, d, device, mode=mode)
    return scores_of(pred, d, wp)
