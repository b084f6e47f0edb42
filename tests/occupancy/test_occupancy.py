"""Identities and closed forms of the occupancy world, renderer, metrics and forecaster."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from sklearn.metrics import jaccard_score

from iclr25.occupancy.metrics import (binary_iou_from_confusion, iou_per_class, miou_from_confusion,
                                      occ_confusion)
from iclr25.occupancy.model import StateForecaster
from iclr25.occupancy.render import gather_fields, render_weights, segment_mean, silog_loss, volume_render
from iclr25.occupancy.train import ego_copy
from iclr25.occupancy.world import (CAR, CURRENT, FRAMES, GRID, N_CLASSES, PEDESTRIAN, flat_index, make_rig,
                                    make_sequences, raycast, traverse)


@pytest.fixture(scope="module")
def rig():
    return make_rig()


@pytest.fixture(scope="module")
def seqs():
    return make_sequences(12, seed=5)


def test_weights_sum_to_one_minus_transmittance():
    g = torch.Generator().manual_seed(0)
    sigma = torch.rand(50, 30, generator=g, dtype=torch.float64) * 3
    delta = torch.rand(50, 30, generator=g, dtype=torch.float64)
    w, trans = render_weights(sigma, delta)
    assert torch.all(w >= 0)
    assert torch.allclose(w.sum(-1), 1 - trans, atol=1e-12, rtol=0)


@pytest.mark.parametrize("sigma", [1e-6, 0.3, 2.0, 40.0])
def test_slab_closed_form_and_splitting(sigma):
    """One slab of constant density on [a, b], nothing before: E[min(stop, b)] = a + (1 - e^{-s d}) / s,
    and splitting the slab into pieces of the same density changes nothing."""
    a, b = 2.0, 5.0
    exact = a + (-math.expm1(-sigma * (b - a))) / sigma
    for n in (1, 7):
        edges = torch.linspace(a, b, n + 1, dtype=torch.float64)
        t0, delta = edges[:-1][None], torch.diff(edges)[None]
        out = volume_render(torch.full_like(t0, sigma), t0, delta, torch.tensor([b], dtype=torch.float64))
        assert abs(float(out["depth"][0]) - exact) < 1e-9 * max(1.0, exact)


def test_segment_mean_limits():
    x = torch.tensor([0.0, 1e-4, 1e-3 * 0.999, 1e-3 * 1.001, 1.0, 50.0], dtype=torch.float64)
    g = segment_mean(x)
    assert abs(float(g[0]) - 0.5) < 1e-15
    assert torch.allclose(g[1:4], 0.5 - x[1:4] / 12, atol=1e-8)
    assert abs(float(g[4]) - (1 - 1 / math.expm1(1.0))) < 1e-12
    assert abs(float(g[5]) - 1 / 50) < 1e-12


def test_segment_mean_gradient_is_finite_for_opaque_segments():
    """exp(x) overflows float32 beyond x = 88: the value and its gradient must stay finite (1/x)."""
    x = torch.tensor([50.0, 100.0, 1e3, 1e6], requires_grad=True)
    g = segment_mean(x)
    g.sum().backward()
    assert torch.isfinite(x.grad).all()
    torch.testing.assert_close(g, 1 / x.detach(), rtol=1e-5, atol=0)
    w, t = render_weights(torch.tensor([[float("inf"), 1.0]]), torch.tensor([[0.5, 0.5]]))
    assert torch.isfinite(w).all() and float(w[0, 0]) == 1.0


def test_single_opaque_voxel_depth(rig):
    """A single very dense voxel: the expected depth is its entry distance along every ray hitting it."""
    occ = torch.zeros((1,) + GRID, dtype=torch.long)
    occ[0, 10, 6, 1] = CAR
    depth, cls, _ = raycast(occ, rig)
    hit = ~torch.isnan(depth[0])
    assert hit.any()
    idx = flat_index(rig.ijk)
    sig = torch.cat([1e4 * (occ != 0).double().reshape(-1), torch.zeros(1, dtype=torch.float64)])[idx]
    out = volume_render(sig, rig.t0, rig.delta, rig.t_exit)
    ok = hit & (rig.delta.gather(1, (idx == 10 * 16 * 4 + 6 * 4 + 1).long().argmax(1, keepdim=True))[:, 0] > 1e-2)
    assert torch.allclose(out["depth"][ok].float(), depth[0][ok], atol=2e-3)


def test_traversal_is_a_partition(rig):
    t0, delta, ijk, t_exit = rig.t0, rig.delta, rig.ijk, rig.t_exit
    assert torch.allclose(delta.sum(1), t_exit, atol=1e-9)
    valid = delta > 0
    mid = rig.origin + rig.dirs[:, None] * (t0 + delta / 2)[..., None]
    assert torch.equal(torch.floor(mid)[valid].long(), ijk[valid])
    nxt = (t0 + delta)[:, :-1]
    assert torch.allclose(nxt[valid[:, 1:]], t0[:, 1:][valid[:, 1:]], atol=1e-9)


def test_rendering_ground_truth_reproduces_labels(rig, seqs):
    occ = seqs["occ"][:, CURRENT]
    depth, cls, _ = raycast(occ, rig)
    onehot = torch.nn.functional.one_hot(occ, N_CLASSES).permute(0, 4, 1, 2, 3).double()
    attrs = torch.cat([50.0 * (occ != 0).double()[:, None], 10 * onehot[:, 1:]], 1)
    vals = gather_fields(attrs, flat_index(rig.ijk)[None].expand(len(occ), -1, -1))
    out = volume_render(vals[..., 0], rig.t0, rig.delta, rig.t_exit, dict(sem=vals[..., 1:]))
    hit = ~torch.isnan(depth)
    assert (out["depth"][hit].float() - depth[hit]).abs().median() < 0.05
    assert (out["sem"][hit].argmax(-1) + 1 == cls[hit]).float().mean() > 0.99


def test_shifted_rays_see_the_static_world(rig, seqs):
    """Rays of frame +k, shifted by the ego displacement, hit the same static surface in the current grid."""
    k = 2
    d_k, c_k, _ = raycast(seqs["occ"][:, CURRENT + k], rig)
    d_s, c_s, _ = raycast(seqs["occ"][:, CURRENT], rig, k * seqs["speed"])
    static = ~torch.isnan(d_k) & ~torch.isnan(d_s) & (c_k < CAR) & (c_s < CAR)
    assert static.sum() > 100
    assert ((d_k - d_s).abs()[static] < 1e-4).float().mean() > 0.99


def test_ground_moves_with_the_ego(seqs):
    occ, v = seqs["occ"], seqs["speed"]
    for s in range(len(v)):
        sv = int(v[s])
        a, b = occ[s, CURRENT, sv:, :, 0], occ[s, CURRENT + 1, :GRID[0] - sv, :, 0]
        assert torch.equal(a, b)


def test_movers_follow_their_lanes():
    d = make_sequences(4, seed=1, speeds=(0,))
    occ = d["occ"]
    cars = (occ[:, :, :, 7:9] == CAR)          # same-direction lane: +1 voxel per frame
    assert torch.equal(cars[:, CURRENT, :-1], cars[:, CURRENT + 1, 1:])
    peds = (occ == PEDESTRIAN).sum()
    assert peds > 0


def test_miou_matches_sklearn():
    g = torch.Generator().manual_seed(0)
    gt = torch.randint(0, N_CLASSES, (2000,), generator=g)
    pred = torch.where(torch.rand(2000, generator=g) < 0.6, gt, torch.randint(0, N_CLASSES, (2000,), generator=g))
    hist = occ_confusion(pred, gt, N_CLASSES)
    ref = jaccard_score(gt.numpy(), pred.numpy(), average=None, labels=list(range(N_CLASSES)))
    assert np.allclose(iou_per_class(hist).numpy(), ref)
    assert abs(miou_from_confusion(hist) - 100 * ref[1:].mean()) < 1e-9
    b = binary_iou_from_confusion(hist)
    ref_b = jaccard_score((gt > 0).numpy(), (pred > 0).numpy())
    assert abs(b - 100 * ref_b) < 1e-9
    assert miou_from_confusion(occ_confusion(gt, gt, N_CLASSES)) == 100.0
    assert binary_iou_from_confusion(occ_confusion(torch.zeros_like(gt), gt, N_CLASSES)) == 0.0


def test_ego_copy_without_motion_is_identity(seqs):
    pred = seqs["occ"][:, CURRENT]
    out = ego_copy(pred, torch.zeros(len(pred), dtype=torch.long))
    assert all(torch.equal(out[:, f], pred) for f in range(out.shape[1]))
    out = ego_copy(pred, seqs["speed"])
    for s in range(len(pred)):      # static ground shifted by the ego displacement
        v = int(seqs["speed"][s])
        assert torch.equal(out[s, 0, :GRID[0] - v, :, 0], seqs["occ"][s, CURRENT + 1, :GRID[0] - v, :, 0])


def test_ego_copy_fill_last_repeats_the_last_column(seqs):
    pred = seqs["occ"][:, CURRENT]
    speed = torch.full((len(pred),), 2, dtype=torch.long)
    out = ego_copy(pred, speed, fill="last")
    free = ego_copy(pred, speed)
    for f in range(out.shape[1]):
        s = 2 * (f + 1)
        assert torch.equal(out[:, f, :GRID[0] - s], free[:, f, :GRID[0] - s])
        assert torch.equal(out[:, f, GRID[0] - s:], pred[:, -1:].expand(-1, s, -1, -1))
    assert torch.equal(ego_copy(pred, torch.zeros_like(speed), fill="last"), ego_copy(pred, torch.zeros_like(speed)))


def test_forecaster_with_zero_fusion_copies():
    torch.manual_seed(0)
    f = StateForecaster(channels=8)
    torch.nn.init.zeros_(f.fuse[-1].conv.weight)
    torch.nn.init.zeros_(f.fuse[-1].conv.bias)
    feat = torch.randn(2, 8, *GRID)
    outs, wp = f(feat, torch.randn(2, 2), 3)
    assert all(torch.equal(o, feat) for o in outs)
    assert wp.shape == (2, 3, 2)


def test_forecaster_output_depends_on_the_state():
    torch.manual_seed(0)
    f = StateForecaster(channels=8)
    feat = torch.randn(2, 8, *GRID)
    a, wa = f(feat, torch.zeros(2, 2), 3)
    b, wb = f(feat, torch.ones(2, 2), 3)
    assert all(not torch.allclose(x, y) for x, y in zip(a[1:], b[1:]))
    assert not torch.allclose(wa, wb)


def test_renderer_gradcheck():
    g = torch.Generator().manual_seed(0)
    sigma = (torch.rand(3, 6, generator=g, dtype=torch.float64) * 2).requires_grad_()
    sem = torch.randn(3, 6, 2, generator=g, dtype=torch.float64, requires_grad=True)
    t0 = torch.cumsum(torch.rand(3, 6, generator=g, dtype=torch.float64), 1)
    delta = torch.rand(3, 6, generator=g, dtype=torch.float64) + 0.1

    def f(s, c):
        out = volume_render(s, t0, delta, t0[:, -1] + delta[:, -1], dict(sem=c))
        return out["depth"], out["sem"]

    assert torch.autograd.gradcheck(f, (sigma, sem))


def test_silog_scale_invariance_at_lambda_one():
    d = torch.rand(100, dtype=torch.float64) + 0.5
    assert float(silog_loss(3 * d, d, lam=1.0)) < 1e-3
    assert float(silog_loss(d, d)) < 1e-3


def test_lss_index_is_the_voxel_of_each_bin_point():
    from iclr25.occupancy.model import lss_index
    rig = make_rig()
    bins = torch.tensor([0.5, 3.0, 7.5, 200.0])
    idx = lss_index(rig, bins)
    X, Y, Z = GRID
    assert idx.shape == (rig.dirs.shape[0], len(bins))
    for r in (0, rig.dirs.shape[0] // 2, rig.dirs.shape[0] - 1):
        for b, d in enumerate(bins.tolist()):
            p = rig.origin.double() + rig.dirs[r].double() * d
            i, j, k = (int(math.floor(v)) for v in p.tolist())
            inside = 0 <= i < X and 0 <= j < Y and 0 <= k < Z
            assert int(idx[r, b]) == ((i * Y + j) * Z + k if inside else X * Y * Z)
    assert (idx[:, -1] == X * Y * Z).all()          # 200 m lies outside the grid on every ray


# --- the official fine-tuning loss (focal + sem_scal + geo_scal) -------------------------------------

def _uniform_case():
    g = torch.Generator().manual_seed(3)
    target = torch.randint(0, N_CLASSES, (2, *GRID), generator=g)
    target[0, 0, 0, 0] = 0                                      # free space present
    return torch.zeros(2, N_CLASSES, *GRID, dtype=torch.float64), target


def test_geo_scal_closed_form_on_uniform_logits():
    from iclr25.occupancy.train import geo_scal_loss
    logits, target = _uniform_case()
    c, n, n_occ = N_CLASSES, target.numel(), int((target != 0).sum())
    # uniform softmax: q = (C-1)/C everywhere, so precision = occupied fraction, recall = q, specificity = 1/C
    want = -math.log(n_occ / n) - math.log((c - 1) / c) - math.log(1 / c)
    assert abs(float(geo_scal_loss(logits, target)) - want) < 1e-12


def test_sem_scal_closed_form_on_uniform_logits():
    from iclr25.occupancy.train import sem_scal_loss
    logits, target = _uniform_case()
    c, n = N_CLASSES, target.numel()
    counts = torch.bincount(target.reshape(-1), minlength=c)
    # class k: precision = n_k / n, recall = 1/C, specificity = 1 - 1/C; averaged over present classes
    want = np.mean([-math.log(int(m) / n) - math.log(1 / c) - math.log(1 - 1 / c) for m in counts if m > 0])
    assert abs(float(sem_scal_loss(logits, target)) - want) < 1e-12


def test_scal_losses_vanish_on_confident_correct_logits():
    from iclr25.occupancy.train import geo_scal_loss, sem_scal_loss
    _, target = _uniform_case()
    logits = 60.0 * torch.nn.functional.one_hot(target, N_CLASSES).movedim(-1, 1).double()
    assert float(geo_scal_loss(logits, target)) < 1e-12 and float(sem_scal_loss(logits, target)) < 1e-12
    wrong = 60.0 * torch.nn.functional.one_hot((target + 1) % N_CLASSES, N_CLASSES).movedim(-1, 1).double()
    assert float(geo_scal_loss(wrong, target)) > 1 and float(sem_scal_loss(wrong, target)) > 1


def test_focal_loss_closed_form_and_free_channel_untrained():
    from iclr25.occupancy.train import focal_occ_loss, radial_weight
    logits, target = _uniform_case()
    logits.requires_grad_(True)
    w = torch.arange(N_CLASSES, dtype=torch.float64) / 10              # free space (class 0) weight 0
    radial = radial_weight().double()
    loss = focal_occ_loss(logits, target, w, radial)
    # logits 0: p = 1/2 per channel, BCE = log 2, focal factor (alpha or 1 - alpha) * (1/2)^2
    one = torch.nn.functional.one_hot(target, N_CLASSES).movedim(-1, 1).double()
    a = 0.25 * one + 0.75 * (1 - one)
    want = 100 * (a * 0.25 * math.log(2) * w.view(1, -1, 1, 1, 1) * radial[None, None, :, :, None]).sum(1).mean()
    assert abs(float(loss.detach()) - float(want)) < 1e-10
    loss.backward()
    assert float(logits.grad[:, 0].abs().max()) == 0.0 and float(logits.grad[:, 1:].abs().max()) > 0
    r = radial_weight()
    assert abs(float(r.min()) - 1) < 0.2 and float(r.max()) == 2.0


def test_paper_class_weights_zero_for_free_and_inverse_log_count():
    from iclr25.occupancy.train import paper_class_weights
    occ = torch.tensor([0, 0, 0, 1, 1, 2, 3, 4, 5, 6, 6, 6]).view(1, 1, -1)
    w = paper_class_weights({"occ": occ}, torch.tensor([0]))
    assert float(w[0]) == 0.0
    assert abs(float(w[6]) - 1 / math.log(3.001)) < 1e-6 and abs(float(w[1]) - 1 / math.log(2.001)) < 1e-6


def test_scal_losses_stay_finite_when_rounding_pushes_a_ratio_past_one():
    from iclr25.occupancy.train import geo_scal_loss, paper_occ_loss, radial_weight, sem_scal_loss
    g = torch.Generator().manual_seed(0)
    target = torch.randint(0, N_CLASSES, (64, *GRID), generator=g)
    logits = (40.0 * torch.nn.functional.one_hot(target, N_CLASSES).movedim(-1, 1)).float()
    logits = logits + 1e-3 * torch.randn(logits.shape, generator=g)        # float32, nearly certain: ratios ~ 1
    for f in (geo_scal_loss, sem_scal_loss):
        v = float(f(logits, target))
        assert math.isfinite(v) and 0 <= v < 1e-4
    occ = target[:, None].expand(-1, 6, -1, -1, -1).clone()
    bad = logits.clone()
    bad[0, 0, 0, 0, 0] = float("nan")
    assert math.isfinite(float(paper_occ_loss([bad], occ, torch.ones(N_CLASSES), radial_weight())))
