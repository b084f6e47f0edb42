"""Scenes, metrics, Semantix's energies and correspondences, guidance, attention routing, transfer."""

import pytest
import torch

from iclr25.diffusion.attention import (AttentionRecorder, CrossFrameAttention, IdentityRouting, KVInjection,
                                        attention_layers, reset_attention, set_attention_controller)
from iclr25.diffusion.guidance import energy_and_gradient, normalised, smoothed
from iclr25.diffusion.inversion import alpha_bar, ddpm_invert, noisy_versions
from iclr25.diffusion.scenes import (OBJECT, cast_pairs, class_colour_error, downsample_labels, psnr,
                                     structure_score, transfer_pairs)
from iclr25.diffusion.semantix import (colour_style_energy, global_style_energy, identity_match, match_accuracy, nearest_match,
                                       gather_tokens, oracle_match, position_codes, grid_positions, semantic_distance_energy,
                                       semantic_match, spatial_energy, style_energy, joint_features)
from iclr25.diffusion.transfer import (EnergyWeights, guided_transfer, kv_injection_transfer, reinhard_transfer,
                                       colour_energy, layer_tokens, token_colours, trajectory_colours,
                                       trajectory_features, transfer_energy, x0_scale)
from iclr25.diffusion.unet import inversion_schedule, make_tiny_unet

NAMES = ["up_blocks.0", "up_blocks.1"]


@pytest.fixture(scope="module")
def unet():
    return make_tiny_unet(8, channels=(8, 16), attention=(False, True), norm_groups=4, seed=0).eval().requires_grad_(False)


def test_exact_target_has_zero_colour_error_and_full_structure():
    p = transfer_pairs(4, 24, seed=3)
    assert class_colour_error(p.target, p.target, p.context_labels).nan_to_num().abs().max() == 0
    assert torch.allclose(structure_score(p.target, p.target), torch.ones(4))
    # the permuted context has the layout of the target but wrong colours on every class
    assert (class_colour_error(p.context, p.target, p.context_labels)[:, OBJECT] > 0.05).all()


def test_permuted_pairs_share_palettes_and_break_colour_matching():
    p = transfer_pairs(6, 24, seed=1)
    # the context wears the reference's palettes: global colour statistics are close, per-class ones are not
    assert (p.perm != torch.arange(3)).all()
    lc, lr = downsample_labels(p.context_labels, 12), downsample_labels(p.reference_labels, 12)
    col = lambda x: torch.nn.functional.adaptive_avg_pool2d(x, 12).flatten(2).transpose(1, 2)  # noqa: E731
    acc = match_accuracy(nearest_match(col(p.context), col(p.reference)), lc.flatten(1), lr.flatten(1))
    assert acc.nanmean() < 0.2
    assert match_accuracy(oracle_match(lc, lr), lc.flatten(1), lr.flatten(1)).nanmean() == 1


def test_cast_pairs_have_a_global_answer():
    p = cast_pairs(6, 24, seed=3)
    # the context is the target under one colour cast: wrong colours, the target's edges; undoing the cast
    # globally (channel statistics of the reference) removes most of the error
    err = class_colour_error(p.context, p.target, p.context_labels).nanmean(1)
    assert (err > 0.05).all() and (structure_score(p.context, p.target) > 0.95).all()
    fixed = class_colour_error(reinhard_transfer(p.context, p.reference), p.target, p.context_labels).nanmean(1)
    assert fixed.mean() < 0.5 * err.mean()
    assert torch.equal(p.reference, transfer_pairs(6, 24, seed=3, permute=False).reference)


def test_psnr_of_a_constant_offset():
    x = torch.zeros(2, 3, 4, 4)
    assert torch.allclose(psnr(x + 0.2, x), torch.full((2,), 10 * torch.log10(torch.tensor(4 / 0.04))))


def test_position_codes_inner_product_is_a_cosine_of_the_offset():
    p, pos = position_codes(5), grid_positions(5)
    d = pos.unsqueeze(1) - pos.unsqueeze(0)
    expected = (torch.cos(torch.pi * d[..., 0]) + torch.cos(torch.pi * d[..., 1])) / 2
    assert torch.allclose(p @ p.T, expected, atol=1e-6)


def test_self_match_is_identity_and_energies_vanish_at_the_fixed_point():
    g = torch.Generator().manual_seed(0)
    f = [torch.randn(2, 16, 5, generator=g), torch.randn(2, 16, 3, generator=g)]
    idx = semantic_match(joint_features(f), joint_features(f), pos_weight=0.1)
    assert torch.equal(idx, identity_match(2, 16))
    assert style_energy(f[0], f[0], idx).abs().max() < 1e-6
    assert spatial_energy(f[0], f[0]).abs().max() < 1e-6
    assert semantic_distance_energy(f[0], f[0], torch.randn(2, 7, 5, generator=g)).abs().max() < 1e-6
    assert global_style_energy(f[0], f[0]).abs().max() < 1e-12


def test_energies_are_invariant_to_what_they_should_ignore():
    g = torch.Generator().manual_seed(1)
    fo, fc, fr = (torch.randn(3, 10, 4, generator=g) for _ in range(3))
    # spatial energy ignores per-channel offsets and positive scales of the output (global colour)
    assert torch.allclose(spatial_energy(2 * fo + 3, fc), spatial_energy(fo, fc), atol=1e-5)
    # style energy is a cosine: invariant to a positive scale of output and reference
    idx = torch.randint(0, 10, (3, 10), generator=g)
    assert torch.allclose(style_energy(5 * fo, 5 * fr, idx), style_energy(fo, fr, idx), atol=1e-6)
    # ... centred on the reference's mean token: a shift shared by output and reference changes nothing
    v = 10 * torch.randn(3, 1, 4, generator=g)
    assert torch.allclose(style_energy(fo + v, fr + v, idx), style_energy(fo, fr, idx), atol=1e-5)
    # ... and its zero set is the ray from the reference's mean token through the partner (offset included,
    # distance along the ray not)
    p, mu = gather_tokens(fr, idx), fr.mean(1, keepdim=True)
    for k in (0.05, 1.0, 3.0):
        assert style_energy(mu + k * (p - mu), fr, idx).abs().max() < 1e-5
    assert (style_energy(p + v, fr, idx) > 1e-3).all()
    assert (style_energy(mu - (p - mu), fr, idx) > 1.9).all()       # the opposite direction: cosine -1
    # the raw cosine's zero set is the ray from the origin; the per-image centring ignores a shift of the output
    assert style_energy(0.05 * p, fr, idx, centre="none").abs().max() < 1e-5
    assert torch.allclose(style_energy(fo + v, fr, idx, centre="per-image"), style_energy(fo, fr, idx, centre="per-image"),
                          atol=1e-5)
    assert not torch.allclose(style_energy(fo + v, fr, idx, centre="none"), style_energy(fo, fr, idx, centre="none"),
                              atol=1e-3)
    # the global-style energy is invariant to permuting the output's locations
    perm = torch.randperm(10, generator=g)
    assert torch.allclose(global_style_energy(fo[:, perm], fr), global_style_energy(fo, fr), atol=1e-6)


def test_energy_gradient_matches_finite_differences(unet):
    x = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    u = make_tiny_unet(8, channels=(8, 16), attention=(False, True), norm_groups=4, seed=0).double().eval()
    u.requires_grad_(False)
    target = torch.randn(2, 64, 8, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    from iclr25.diffusion.features import to_tokens
    energy = lambda feats, x_: spatial_energy(to_tokens(feats["up_blocks.1"]), target)  # noqa: E731
    _, e, grad = energy_and_gradient(u, x, 500, energy, ["up_blocks.1"])
    d = torch.randn_like(x)
    h = 1e-6
    _, ep, _ = energy_and_gradient(u, x + h * d, 500, energy, ["up_blocks.1"])
    _, em, _ = energy_and_gradient(u, x - h * d, 500, energy, ["up_blocks.1"])
    fd = ((ep - em) / (2 * h)).sum()
    assert torch.allclose(fd, (grad * d).sum(), rtol=1e-5)


def test_normalised_has_unit_rms_above_the_floor():
    g = torch.randn(3, 2, 4, 4) * torch.tensor([1.0, 1e-2, 1e-6]).view(3, 1, 1, 1)
    n = normalised(g, 1e-3)
    rms = n.flatten(1).pow(2).mean(1).sqrt()
    assert torch.allclose(rms[:2], torch.ones(2), atol=1e-5) and rms[2] < 1e-2


def test_identity_routing_equals_diffusers_attention(unet):
    x = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(4))
    ref = unet(x, 100).sample
    assert attention_layers(unet)
    try:
        set_attention_controller(unet, IdentityRouting())
        assert torch.allclose(unet(x, 100).sample, ref, atol=1e-5)
        # cross-frame attention with one frame per clip: keys repeated, softmax unchanged
        set_attention_controller(unet, CrossFrameAttention(frames=1))
        assert torch.allclose(unet(x, 100).sample, ref, atol=1e-5)
        # K/V injection from the sample itself is the identity too
        rec = AttentionRecorder()
        set_attention_controller(unet, rec)
        unet(x, 100)
        kv = KVInjection(rec.states, rec.states, torch.ones(2), torch.ones(2), torch.ones(2, dtype=torch.bool))
        set_attention_controller(unet, kv)
        assert torch.allclose(unet(x, 100).sample, ref, atol=1e-5)
    finally:
        reset_attention(unet)
    assert torch.allclose(unet(x, 100).sample, ref, atol=1e-6)


def _transfer_inputs(unet, seed):
    """A tiny context/reference pair, its stored-noise inversion, trajectory features and colours, and a
    random correspondence (the inputs of ``guided_transfer``)."""
    sched = inversion_schedule(6)
    g = torch.Generator().manual_seed(seed)
    ctx, ref = (torch.rand(2, 3, 8, 8, generator=g) * 2 - 1 for _ in range(2))
    xs_c, zs_c = ddpm_invert(unet, sched, ctx, g)
    xs_r = noisy_versions(sched, ref, g)
    fc = trajectory_features(unet, sched, xs_c, NAMES, 4)
    fr = trajectory_features(unet, sched, xs_r, NAMES, 4)
    cr = trajectory_colours(unet, sched, xs_r, 4)
    idx = torch.randint(0, 16, (2, 16), generator=g)
    return sched, ctx, xs_c, zs_c, xs_r, fc, fr, cr, idx


def test_zero_guidance_and_empty_window_return_the_context(unet):
    sched, ctx, xs_c, zs_c, xs_r, fc, fr, cr, idx = _transfer_inputs(unet, 5)
    w = EnergyWeights.stack([dict(style=1.0, spatial=0.5, semantic=0.2, colour=5.0)] * 2)
    out, e = guided_transfer(unet, sched, xs_c, zs_c, fc, fr, idx, w, torch.zeros(2), 2, NAMES, 4, cr, smooth=3)
    assert (out - ctx).abs().max() < 1e-3 and e.shape == (4, 2)
    moved, _ = guided_transfer(unet, sched, xs_c, zs_c, fc, fr, idx, w, torch.full((2,), 0.2), 2, NAMES, 4, cr)
    assert (moved - ctx).abs().max() > 1e-2
    # a window that starts after the last step is no guidance at all
    none, e = guided_transfer(unet, sched, xs_c, zs_c, fc, fr, idx, w, torch.full((2,), 0.2), 6, NAMES, 4, cr)
    assert (none - ctx).abs().max() < 1e-3 and e.shape == (0, 2)
    # reference = context (its own trajectory's features and colours, identity match): along the context's
    # trajectory every term of the energy and its gradient vanish, so guidance leaves it where it is
    cc = trajectory_colours(unet, sched, xs_c, 4)
    same = identity_match(2, 16)
    for i, t in enumerate(int(t) for t in sched.timesteps):
        a = float(alpha_bar(sched, t))

        def energy(feats, x):
            x0 = (x - (1 - a) ** 0.5 * feats["conv_out"]) / a ** 0.5
            return (transfer_energy(layer_tokens(feats, NAMES, 4), fc[i], fc[i], same, w)
                    + colour_energy(token_colours(x0, 4), cc[i], same, w))
        _, e, grad = energy_and_gradient(unet, xs_c[i], t, energy, NAMES + ["conv_out"])
        assert e.abs().max() < 1e-6 and grad.abs().max() < 1e-7
    kv = kv_injection_transfer(unet, sched, xs_c, zs_c, xs_r, torch.ones(2), torch.ones(2), torch.zeros(2))
    assert (kv - ctx).abs().max() < 1e-3


def test_x0_scale_moves_the_clean_estimate_by_eta():
    sched = inversion_schedule(10)
    from iclr25.diffusion.inversion import alpha_bar
    for t in [int(t) for t in sched.timesteps]:
        a = float(alpha_bar(sched, t))
        assert abs((1 - a) ** 0.5 / a ** 0.5 * x0_scale(sched, t) - 1) < 1e-6


def test_reinhard_matches_channel_statistics():
    g = torch.Generator().manual_seed(6)
    c, s = torch.rand(2, 3, 8, 8, generator=g) * 0.5 - 0.25, torch.rand(2, 3, 8, 8, generator=g) * 0.5
    out = reinhard_transfer(c, s)
    assert torch.allclose(out.mean((2, 3)), s.mean((2, 3)), atol=1e-5)
    assert torch.allclose(out.std((2, 3)), s.std((2, 3)), atol=1e-4)


def test_colour_energy_is_the_squared_distance_to_the_partner_colour():
    g = torch.Generator().manual_seed(7)
    x = torch.rand(2, 3, 8, 8, generator=g)
    c = token_colours(x, 4)
    # 2 x 2 block means, row-major
    assert torch.allclose(c[:, 5], x[:, :, 2:4, 2:4].mean((2, 3)), atol=1e-6)
    idx = identity_match(2, 16)
    assert colour_style_energy(c, c, idx).abs().max() < 1e-12
    # a uniform offset d of every colour gives |d|^2, whatever the correspondence
    d = torch.tensor([0.1, -0.2, 0.3])
    perm = torch.randint(0, 16, (2, 16), generator=g)
    from iclr25.diffusion.semantix import gather_tokens
    assert torch.allclose(colour_style_energy(gather_tokens(c, perm) + d, c, perm), torch.full((2,), 0.14), atol=1e-6)


def test_smoothed_gradient_keeps_constants_and_averages_windows():
    const = torch.full((1, 3, 6, 6), 2.0)
    assert torch.allclose(smoothed(const, 5), const)
    g = torch.randn(2, 3, 6, 6, generator=torch.Generator().manual_seed(8))
    assert torch.equal(smoothed(g, 1), g)
    # a 3 x 3 window of an interior pixel is the mean of its neighbourhood
    assert torch.allclose(smoothed(g, 3)[:, :, 2, 3], g[:, :, 1:4, 2:5].mean((2, 3)), atol=1e-6)


def test_oracle_matches_part_to_part_among_pure_blocks():
    # query: an object block at rows 1-2, cols 1-2; key: the same object shifted to rows 3-4, cols 4-5
    lq = torch.zeros(1, 6, 6, dtype=torch.long)
    lk = torch.zeros(1, 6, 6, dtype=torch.long)
    lq[0, 1:3, 1:3] = OBJECT
    lk[0, 3:5, 4:6] = OBJECT
    idx = oracle_match(lq, lk)[0].view(6, 6)
    # each object token goes to the same corner of the key's object (nearest-location matching would send all
    # four to the key object's nearest corner)
    assert idx[1, 1] == 3 * 6 + 4 and idx[1, 2] == 3 * 6 + 5 and idx[2, 1] == 4 * 6 + 4 and idx[2, 2] == 4 * 6 + 5
    # identical layouts: the identity; impure key blocks are avoided when pure ones of the class exist
    same = oracle_match(lq, lq)[0]
    assert torch.equal(same, torch.arange(36))
    purity = torch.ones(1, 6, 6)
    purity[0, 1, 1] = 0.75
    partners = oracle_match(lq, lq, purity)[0].view(6, 6)[1:3, 1:3].flatten()
    assert (partners != 1 * 6 + 1).all() and (lq.flatten()[partners] == OBJECT).all()


def test_colour_energy_token_weights():
    g = torch.Generator().manual_seed(2)
    c_out, c_ref = torch.rand(2, 9, 3, generator=g), torch.rand(2, 9, 3, generator=g)
    idx = torch.randint(0, 9, (2, 9), generator=g)
    assert torch.allclose(colour_style_energy(c_out, c_ref, idx, torch.ones(2, 9)), colour_style_energy(c_out, c_ref, idx))
    w = torch.zeros(2, 9)
    w[:, 4] = 1.0
    only = colour_style_energy(c_out, c_ref, idx, w)
    assert torch.allclose(only, (c_out[:, 4] - c_ref.gather(1, idx[:, 4:5, None].expand(-1, -1, 3))[:, 0]).pow(2).sum(-1) / 9)


def test_per_sample_window_smoothing_and_gradient_steps(unet):
    """A batch with per-sample window, low-pass and gradient steps equals the runs one sample at a time; two
    gradient steps with zero step size are still the identity, and two steps of eta move further than one."""
    sched, ctx, xs_c, zs_c, xs_r, fc, fr, cr, idx = _transfer_inputs(unet, 7)
    w = EnergyWeights.stack([dict(style=1.0, spatial=0.5, colour=5.0)] * 2)
    eta = torch.full((2,), 0.2)
    batch, _ = guided_transfer(unet, sched, xs_c, zs_c, fc, fr, idx, w, eta, torch.tensor([2, 4]), NAMES, 4, cr,
                               smooth=torch.tensor([1, 3]), n_grad=torch.tensor([1, 2]))
    for b, (start, width, steps) in enumerate([(2, 1, 1), (4, 3, 2)]):
        one = lambda f: [[x[b:b + 1] for x in fs] for fs in f]  # noqa: E731
        wb = EnergyWeights.stack([dict(style=1.0, spatial=0.5, colour=5.0)])
        alone, _ = guided_transfer(unet, sched, xs_c[:, b:b + 1], zs_c[:, b:b + 1], one(fc), one(fr), idx[b:b + 1],
                                   wb, eta[:1], start, NAMES, 4, [c[b:b + 1] for c in cr], smooth=width, n_grad=steps)
        assert torch.allclose(batch[b:b + 1], alone, atol=2e-3)   # batched kernels: round-off, normalised
    still, _ = guided_transfer(unet, sched, xs_c, zs_c, fc, fr, idx, w, torch.zeros(2), 2, NAMES, 4, cr, n_grad=2)
    assert (still - ctx).abs().max() < 1e-3
    d1, _ = guided_transfer(unet, sched, xs_c, zs_c, fc, fr, idx, w, eta, 2, NAMES, 4, cr, n_grad=1)
    d2, _ = guided_transfer(unet, sched, xs_c, zs_c, fc, fr, idx, w, eta, 2, NAMES, 4, cr, n_grad=2)
    assert ((d2 - ctx).norm() > (d1 - ctx).norm()).item()


def test_attention_probs_are_diffusers_attention_weights(unet):
    """attention_probs equals diffusers' own Attention.get_attention_scores, and the weights times the
    values (output projection, residual) reproduce the layer's output under the default processor."""
    from iclr25.diffusion.attention import attention_probs

    x = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(9))
    name = attention_layers(unet)[0]
    attn = unet.get_submodule(name)
    seen = {}
    handle = attn.register_forward_hook(lambda m, args, out: seen.update(inp=args[0], out=out))
    try:
        unet(x, 100)
    finally:
        handle.remove()
    inp, out = seen["inp"], seen["out"]
    b, c, hh, ww = inp.shape
    h = attn.group_norm(inp.view(b, c, -1)).transpose(1, 2)
    p = attention_probs(attn, h, h)
    ref = attn.get_attention_scores(attn.head_to_batch_dim(attn.to_q(h)), attn.head_to_batch_dim(attn.to_k(h)))
    assert torch.allclose(p.reshape(ref.shape), ref, atol=1e-6)
    assert torch.allclose(p.sum(-1), torch.ones_like(p.sum(-1)), atol=1e-5)
    v = attn.to_v(h).view(b, -1, attn.heads, c // attn.heads).transpose(1, 2)
    o = (p @ v).transpose(1, 2).reshape(b, -1, c)
    o = attn.to_out[1](attn.to_out[0](o)).transpose(1, 2).reshape(b, c, hh, ww)
    if attn.residual_connection:
        o = o + inp
    assert torch.allclose(o / attn.rescale_output_factor, out, atol=1e-5)


def test_attention_match_is_the_argmax_of_the_layers_weights(unet):
    """attention_weights: each layer's cross-image weights, resampled to the token grid with rows summing to 1 (a
    coarse layer's row constant over its block); attention_match takes the argmax of their sum."""
    from iclr25.diffusion.attention import attention_probs
    from iclr25.diffusion.transfer import attention_match, attention_weights, noised

    g = torch.Generator().manual_seed(3)
    xq, xk = (torch.rand(2, 3, 8, 8, generator=g) * 2 - 1 for _ in range(2))
    size = 4                                           # the 8 x 8 test U-Net's attention levels: 4 x 4 and 2 x 2
    w = attention_weights(unet, xq, xk, 50, size, torch.Generator().manual_seed(1), torch.Generator().manual_seed(2))
    assert set(w) == set(attention_layers(unet))
    hq, hk = {}, {}
    for x, gs, rec in ((xq, 1, hq), (xk, 2, hk)):
        r = AttentionRecorder()
        set_attention_controller(unet, r)
        unet(noised(x, 50, torch.Generator().manual_seed(gs)), 50)
        rec.update(r.states)
    reset_attention(unet)
    for n, p in w.items():
        assert p.shape == (2, size * size, size * size)
        assert torch.allclose(p.sum(-1), torch.ones(2, size * size), atol=1e-5)
        direct = attention_probs(unet.get_submodule(n), hq[n], hk[n]).mean(1)
        if hq[n].shape[1] == size * size:
            assert torch.allclose(p, direct, atol=1e-6)
        else:                                          # 2 x 2 tokens: token (0, 0) covers fine tokens 0, 1, 4, 5
            assert torch.allclose(p[:, 0], p[:, 5], atol=1e-7)
            assert torch.allclose(p[:, 0, [0, 1, 4, 5]].sum(-1), direct[:, 0, 0], atol=1e-6)
    fine = [n for n in w if hq[n].shape[1] == size * size]
    assert torch.equal(attention_match(w, fine), sum(w[n] for n in fine).argmax(-1))
    assert all(type(unet.get_submodule(n).processor).__name__ == "AttnProcessor2_0" for n in attention_layers(unet))


def test_block_normalisation_moves_every_block_alike_and_never_amplifies_below_the_floor():
    g = torch.randn(2, 3, 4, 4, generator=torch.Generator().manual_seed(0))
    g[:, :, :2, :2] *= 100.0                                # one block far larger than the others
    n = normalised(g, 1e-3, block=2)
    rms = torch.nn.functional.avg_pool2d(n.pow(2).mean(1, keepdim=True), 2).sqrt()
    assert torch.allclose(rms, torch.ones_like(rms), atol=1e-5)
    tiny = torch.randn(2, 3, 4, 4, generator=torch.Generator().manual_seed(1)) * 1e-7
    assert torch.allclose(normalised(tiny, 1e-3, block=2), tiny / 1e-3)   # plain gradient with gain 1 / floor
    both = torch.cat([tiny[:1], tiny[1:] * 1e3])               # a per-sample floor: (1e-9, 1e-3)
    n = normalised(both, torch.tensor([1e-9, 1e-3]), block=2)
    rms = torch.nn.functional.avg_pool2d(n.pow(2).mean(1, keepdim=True), 2).sqrt()
    assert torch.allclose(rms[0], torch.ones_like(rms[0]), atol=1e-4)   # above its floor: unit RMS per block
    assert torch.allclose(n[1], both[1] / 1e-3)                       # below its floor: gain 1 / floor


def test_floor_tied_to_the_gradient_scale_caps_at_least_half_the_blocks(unet):
    sched, ctx, xs_c, zs_c, xs_r, fc, fr, cr, idx = _transfer_inputs(unet, 7)
    w = EnergyWeights.stack([dict(style=1.0)] * 2)
    calib, fixed, tied = {}, {}, {}
    still, _ = guided_transfer(unet, sched, xs_c, zs_c, fc, fr, idx, w, torch.zeros(2), 2, NAMES, 4, cr, smooth=3,
                               block=2, stats=calib)             # eta = 0: the gradient's scale along the context
    assert (still - ctx).abs().max() < 1e-3 and len(calib["median"]) == 4
    floors = torch.zeros(6, 2)
    floors[2:] = 0.5 * torch.stack(calib["median"])            # per step and pair: half the median block RMS
    eta = torch.full((2,), 0.2)
    guided_transfer(unet, sched, xs_c, zs_c, fc, fr, idx, w, eta, 2, NAMES, 4, cr, smooth=3, block=2, floor=1.0,
                    stats=fixed)
    out, _ = guided_transfer(unet, sched, xs_c, zs_c, fc, fr, idx, w, eta, 2, NAMES, 4, cr, smooth=3, block=2,
                             floor=floors, stats=tied)
    assert float(fixed["capped"][0].max()) == 0.0           # an absolute floor above every block caps none
    assert (tied["capped"][0] >= 0.5).all()   # first guided step: at least half the blocks reach half the median
    assert torch.isfinite(out).all() and (out - ctx).abs().max() > 1e-2


def test_attention_match_position_prior_breaks_ties_towards_the_same_place():
    from iclr25.diffusion.transfer import attention_match

    flat = {"a": torch.full((1, 16, 16), 1 / 16)}           # attention says nothing: the position decides
    assert torch.equal(attention_match(flat, ["a"], 0.5), torch.arange(16).view(1, 16))
    assert torch.equal(attention_match(flat, ["a"]), torch.zeros(1, 16, dtype=torch.long))


def test_kv_injection_late_window_only_acts_late(unet):
    sched, ctx, xs_c, zs_c, xs_r, *_ = _transfer_inputs(unet, 5)
    one = torch.ones(2)
    early = kv_injection_transfer(unet, sched, xs_c, zs_c, xs_r, one, one, torch.full((2,), 5.0),
                                  window_start=torch.full((2,), 5.0))          # empty window
    assert (early - ctx).abs().max() < 1e-3
    late = kv_injection_transfer(unet, sched, xs_c, zs_c, xs_r, torch.zeros(2), one, torch.full((2,), 5.0),
                                 window_start=torch.full((2,), 3.0))
    assert (late - ctx).abs().max() > 1e-3


def test_kv_injection_copies_and_per_sample_layer_masks_equal_separate_runs(unet):
    """k settings of the same pairs with the recording passes run once (copies) give the same outputs as
    k separate runs, and per-sample layer masks give what each sample's layer set gives on its own."""
    sched, ctx, xs_c, zs_c, xs_r, *_ = _transfer_inputs(unet, 6)
    names = sorted(attention_layers(unet))
    decoder = {n for n in names if n.startswith("up_blocks")}
    assert decoder and decoder != set(names)
    gamma, tau = torch.tensor([0.5, 0.5, 1.0, 1.0]), torch.tensor([1.0, 1.0, 1.5, 1.5])
    masks = {n: torch.tensor([True, True, n in decoder, n in decoder]) for n in names}   # all, then decoder only
    both = kv_injection_transfer(unet, sched, xs_c, zs_c, xs_r, gamma, tau, torch.full((4,), 6.0), masks, copies=2)
    every = kv_injection_transfer(unet, sched, xs_c, zs_c, xs_r, gamma[:2], tau[:2], torch.full((2,), 6.0))
    dec = kv_injection_transfer(unet, sched, xs_c, zs_c, xs_r, gamma[2:], tau[2:], torch.full((2,), 6.0), decoder)
    # equal up to float32 reduction order (batch sizes differ, and so do kernels across CPUs: 1e-4 relative)
    assert torch.allclose(both[:2], every, rtol=1e-4, atol=1e-4) and torch.allclose(both[2:], dec, rtol=1e-4, atol=1e-4)
    assert (every - dec).abs().max() > 1e-2 * every.abs().max()   # the layer set matters, far beyond that
