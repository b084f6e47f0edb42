"""Tests of iclr25.nfn: the group action preserves the block's function, the Transformer-NFN
layers are equivariant/invariant under random group elements, and the baselines, metrics and
zoo behave as documented."""

import numpy as np
import pytest
import scipy.stats
import torch

from iclr25.nfn import (KEYS, BlockSpec, FlatWeightsMLP, MLPRegressor, TransformerNFN, TransformerNFNEquivariant,
                        TransformerNFNInvariant, ZooConfig, apply_group_action, attention_block, fit_ensemble,
                        flatten_weights, head_products, identity_element, kendall_tau, masked_relu,
                        norm_features, paired_bootstrap_tau, product_stat_features, products_match,
                        random_group_element, random_weights, recover_gl, stat_features, train_zoo,
                        group_augment, exchange_head_columns, permute_stream, tau_difference,
                        zoo_forward)

SPEC = BlockSpec(h=3, D=6, Dk=4, Dv=5, Da=7)


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def act_on_features(U, g):
    """g acting on every channel of a weight-space feature {key: (batch, channels, *shape)}."""
    c = U["WQ"].shape[1]
    flat = {k: v.transpose(0, 1) for k, v in U.items()}          # (channels, batch, ...)
    out = apply_group_action(flat, g)
    return {k: v.expand(c, *v.shape[1:]).transpose(0, 1) if v.shape[0] != c else v.transpose(0, 1)
            for k, v in out.items()}


def test_group_action_preserves_block_function():
    w = random_weights(SPEC, generator=gen(1))
    x = torch.randn(4, 5, SPEC.D, generator=gen(2), dtype=torch.float64)
    for s in range(3):
        g = random_group_element(SPEC, generator=gen(10 + s))
        err = (attention_block(x, apply_group_action(w, g)) - attention_block(x, w)).abs().max()
        assert err < 1e-10
    # identity element is the identity
    e = identity_element(SPEC)
    assert all(torch.allclose(apply_group_action(w, e)[k], w[k]) for k in KEYS)


def test_residual_breaks_output_permutation_only():
    w = random_weights(SPEC, generator=gen(1))
    x = torch.randn(4, 5, SPEC.D, generator=gen(2), dtype=torch.float64)
    full = random_group_element(SPEC, generator=gen(3))
    sub = random_group_element(SPEC, permute_output=False, generator=gen(3))
    ref = attention_block(x, w, residual=True)
    assert (attention_block(x, apply_group_action(w, sub), residual=True) - ref).abs().max() < 1e-10
    assert (attention_block(x, apply_group_action(w, full), residual=True) - ref).abs().max() > 1e-3


def test_products_theorem_and_recovery():
    w = random_weights(SPEC, generator=gen(4))
    g = random_group_element(SPEC, permute_output=False, generator=gen(5))
    gw = apply_group_action(w, g)
    ok, tau = products_match(gw, w)
    assert ok
    # the matching permutation is g's: QK(gw)_i = QK(w)_tau(i)
    assert torch.equal(tau, g["tau"])
    M, N, res = recover_gl(w, gw, tau)
    assert res < 1e-10
    assert torch.allclose(M, g["M"][g["tau"]], atol=1e-8)
    # a perturbation of one product is detected and changes the function
    bad = dict(w, WQ=w["WQ"].clone())
    bad["WQ"][0] = bad["WQ"][0] @ torch.diag(torch.linspace(0.5, 2, SPEC.Dk, dtype=torch.float64))
    assert not products_match(bad, w)[0]
    x = torch.randn(4, 5, SPEC.D, generator=gen(2), dtype=torch.float64)
    assert (attention_block(x, bad) - attention_block(x, w)).abs().max() > 1e-4


def test_batched_group_action_matches_loop():
    w = random_weights(SPEC, 3, generator=gen(6))
    g = random_group_element(SPEC, 3, generator=gen(7))
    gw = apply_group_action(w, g)
    for b in range(3):
        one = apply_group_action({k: v[b] for k, v in w.items()}, {k: v[b] for k, v in g.items()})
        assert all(torch.allclose(one[k], gw[k][b]) for k in KEYS)


@pytest.mark.parametrize("d,e", [(1, 3), (2, 2)])
def test_equivariant_layer_commutes_with_group(d, e):
    torch.manual_seed(0)
    layer = TransformerNFNEquivariant(SPEC, d, e).double()
    U = {k: v.transpose(0, 1) for k, v in random_weights(SPEC, d, 4, generator=gen(8)).items()}  # (4, d, ...)
    g = random_group_element(SPEC, 4, generator=gen(9))
    gU = {k: v.transpose(0, 1) for k, v in apply_group_action({k: v.transpose(0, 1) for k, v in U.items()},
                                                               g).items()}
    out, gout = layer(U), layer(gU)
    want = {k: v.transpose(0, 1) for k, v in apply_group_action({k: v.transpose(0, 1) for k, v in out.items()},
                                                                 g).items()}
    for k in KEYS:
        rel = (gout[k] - want[k]).norm() / out[k].norm()
        assert rel < 1e-10, k
    # masked ReLU commutes with the action too
    mr = masked_relu(out)
    want_r = {k: v.transpose(0, 1) for k, v in apply_group_action({k: v.transpose(0, 1) for k, v in mr.items()},
                                                                   g).items()}
    assert all(((masked_relu(gout)[k] - want_r[k]).norm() / (mr[k].norm() + 1e-30)) < 1e-10 for k in KEYS)
    # an elementwise ReLU on WQ would not commute (why it is masked)
    bad = torch.relu(gout["WQ"]) - apply_group_action({k: v.transpose(0, 1) for k, v in
                                                       dict(out, WQ=torch.relu(out["WQ"])).items()}, g)["WQ"].transpose(0, 1)
    assert bad.norm() > 1e-3


def test_invariant_layer_and_full_model_invariant_and_nontrivial():
    torch.manual_seed(1)
    W = random_weights(SPEC, 5, 2, generator=gen(10))             # (5 models, 2 blocks, ...)
    g = random_group_element(SPEC, 5, 2, generator=gen(11))
    gW = apply_group_action(W, g)
    inv = TransformerNFNInvariant(SPEC, 1, 4).double()
    U = {k: v[:, 0, None] for k, v in W.items()}
    gU = {k: v[:, 0, None] for k, v in gW.items()}
    assert (inv(U) - inv(gU)).abs().max() < 1e-10
    model = TransformerNFN(SPEC, 2, channels=(3, 3)).double()
    model.set_scales(W)
    y, gy = model(W), model(gW)
    assert (y - gy).abs().max() < 1e-10
    assert y.std() > 1e-4                                          # varies across models
    # a perturbation outside the group (WQ scaled without WK) changes the output
    bad = dict(W, WQ=W["WQ"] * 1.5)
    assert (model(bad) - y).abs().max() > 1e-6


def test_baseline_invariances():
    W = random_weights(SPEC, 6, 2, generator=gen(12))
    g = random_group_element(SPEC, 6, 2, generator=gen(13))
    gW = apply_group_action(W, g)
    assert torch.allclose(product_stat_features(W), product_stat_features(gW), atol=1e-10)
    assert torch.allclose(norm_features(W)[:, :3], norm_features(gW)[:, :3], atol=1e-10)
    assert not torch.allclose(stat_features(W), stat_features(gW), atol=1e-3)
    assert not torch.allclose(flatten_weights(W), flatten_weights(gW), atol=1e-3)
    qk, vo = head_products(W)
    assert qk.shape == (6, 2, SPEC.h, SPEC.D, SPEC.D) and vo.shape == qk.shape


def test_group_augment_moves_weights_within_orbits():
    """Augmentation: every model gets its own element (flat weights change), the invariant NFN's
    output does not, and the flat-weight MLP equals the MLP on flattened weights."""
    torch.manual_seed(2)
    W = {k: v.reshape(2, 3, *v.shape[1:]) for k, v in random_weights(SPEC, 6, 2, generator=gen(14)).items()}
    aug = group_augment(SPEC)(W, gen(15))                           # (S=2, batch=3, blocks=2, ...)
    assert all(aug[k].shape == W[k].shape for k in KEYS)
    flat = lambda A: flatten_weights({k: v.reshape(6, *v.shape[2:]) for k, v in A.items()})
    moved = (flat(aug) - flat(W)).norm(dim=-1)
    assert (moved > 1e-2).all()                                     # every model moved
    model = TransformerNFN(SPEC, 2, channels=(3,)).double()
    model.set_scales({k: v.reshape(6, *v.shape[2:]) for k, v in W.items()})
    y = model({k: v.reshape(6, *v.shape[2:]) for k, v in W.items()})
    gy = model({k: v.reshape(6, *v.shape[2:]) for k, v in aug.items()})
    assert (y - gy).abs().max() < 1e-10
    mlp = FlatWeightsMLP(2 * SPEC.n_params(), 8).double()
    Wf = {k: v.reshape(6, *v.shape[2:]) for k, v in W.items()}
    assert torch.equal(mlp(Wf), mlp.mlp(flatten_weights(Wf)))


def test_kendall_tau_matches_scipy_and_bootstrap():
    rng = np.random.default_rng(0)
    x = rng.normal(size=40)
    y = x + rng.normal(size=40)
    y[:5] = y[0]                                                     # ties
    assert abs(kendall_tau(x, y) - scipy.stats.kendalltau(x, y).statistic) < 1e-12
    b = paired_bootstrap_tau(y, x, y, n_boot=400)                    # perfect vs noisy: CI above 0
    assert b["lo"] > 0 and b["diff"] > 0
    b0 = paired_bootstrap_tau(x, x, y, n_boot=200)
    assert b0["diff"] == 0 and b0["se"] == 0
    const = paired_bootstrap_tau(np.zeros(40), np.zeros(40), y, n_boot=50)    # tau undefined: nan, no crash
    assert np.isnan(const["lo"]) and np.isnan(const["hi"])


def test_fit_ensemble_learns_a_monotone_signal():
    torch.manual_seed(0)
    S, n = 2, (40, 20, 20)
    xs = {s: torch.randn(S, m, 3, generator=gen(i)) for i, (s, m) in enumerate(zip(("train", "val", "test"), n))}
    ys = {s: torch.sigmoid(2 * x[..., 0]) for s, x in xs.items()}
    sel = fit_ensemble(lambda s, k: MLPRegressor(3, 8), xs, ys, [dict(lr=1e-2, wd=0.0), dict(lr=3e-3, wd=0.0)],
                       epochs=30, batch=10)
    assert sel.pred.shape == (S, 20) and sel.val_tau.shape == (S, 2)
    assert (kendall_tau(sel.pred, ys["test"].numpy()) > 0.6).all()


def test_tiny_zoo_trains_and_is_reproducible():
    cfg = ZooConfig(n_runs=6, steps=30, batch=16, block=BlockSpec(h=2, D=8, Dk=4, Dv=4, Da=8))
    a, b = train_zoo(cfg), train_zoo(cfg)
    assert torch.equal(a["accuracy"], b["accuracy"])
    assert a["encoder"]["WQ"].shape == (1, 6, 2, 2, 8, 4)
    assert a["accuracy"].max() > 0.15                                # above chance (0.1) for some run


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_device_cuda():
    w = random_weights(SPEC, generator=gen(1), device="cuda")
    g = random_group_element(SPEC, generator=gen(2), device="cuda")
    x = torch.randn(2, 5, SPEC.D, dtype=torch.float64, device="cuda")
    assert (attention_block(x, apply_group_action(w, g)) - attention_block(x, w)).abs().max() < 1e-10
    model = TransformerNFN(SPEC, 1).double().cuda()
    W = {k: v[None, None] for k, v in w.items()}
    assert model(W).device.type == "cuda"


def test_zoo_subset_retrains_exactly_and_fit_fixed_epochs():
    cfg = ZooConfig(n_runs=5, steps=12, batch=8, block=BlockSpec(h=2, D=8, Dk=4, Dv=4, Da=8))
    full, part = train_zoo(cfg, keep_all=True), train_zoo(cfg, runs=[3, 1], keep_all=True)
    for k, v in part["params"].items():                       # run r is trained alone exactly as in the zoo
        assert torch.equal(v, full["params"][k][[3, 1]]), k
    assert torch.equal(part["accuracy"], full["accuracy"][:, [3, 1]])
    assert np.array_equal(part["recipes"]["lr"], full["recipes"]["lr"][[3, 1]])
    S, n = 2, (30, 10, 10)
    xs = {s: torch.randn(S, m, 3, generator=gen(i)) for i, (s, m) in enumerate(zip(("train", "val", "test"), n))}
    ys = {s: torch.sigmoid(2 * x[..., 0]) for s, x in xs.items()}
    sel = fit_ensemble(lambda s, k: MLPRegressor(3, 8), xs, ys, [dict(lr=1e-2, wd=0.0)], epochs=6, batch=10,
                       eval_every=2, select_epoch=False)
    assert sel.val_curve.shape == (S, 1, 3) and (sel.epoch == 6).all()
    assert np.allclose(sel.val_tau[:, 0], sel.val_curve[:, 0, -1])


def test_head_sum_construction_and_batch_head_invariance():
    spec = BlockSpec(h=2, D=6, Dk=3, Dv=3, Da=5)
    w = random_weights(spec, generator=gen(3), dtype=torch.float64)
    w2 = exchange_head_columns(w)
    (qk, vo), (qk2, vo2) = head_products(w), head_products(w2)
    assert (qk.sum(0) - qk2.sum(0)).abs().max() < 1e-12 and (vo.sum(0) - vo2.sum(0)).abs().max() < 1e-12
    assert (qk - qk2).abs().max() > 1e-2                                    # the heads themselves differ
    x = torch.randn(3, 4, spec.D, generator=gen(4), dtype=torch.float64)
    assert (attention_block(x, w) - attention_block(x, w2)).abs().max() > 1e-2
    one = lambda ww: {k: v[None, None] for k, v in ww.items()}
    torch.manual_seed(0)
    model = TransformerNFN(spec, 1, channels=(3, 3)).double()
    assert (model(one(w)) - model(one(w2))).abs().max() < 1e-12           # the NFN sees head sums only
    assert (product_stat_features(one(w)) - product_stat_features(one(w2))).abs().max() > 1e-3
    W = random_weights(spec, 4, 1, generator=gen(6), dtype=torch.float64)
    gW = apply_group_action(W, random_group_element(spec, 4, 1, generator=gen(7)))
    variant = TransformerNFN(spec, 1, channels=(3,), head="batch").double()
    assert (variant(W) - variant(gW)).abs().max() < 1e-10
    assert variant(W).std() > 1e-6
    with pytest.raises(ValueError):
        TransformerNFN(spec, 1, head="none")


def test_batch_head_keeps_feature_scale():
    """With the head's LayerNorm, scaling every invariant feature of one model by c does not change
    that model's normalised features; with the batch standardisation it does (the scale is judged
    against the other models of the batch)."""
    spec = BlockSpec(h=2, D=6, Dk=3, Dv=3, Da=5)
    torch.manual_seed(0)
    with_ln, batch = (TransformerNFN(spec, 1, channels=(3,), head=h).double() for h in ("layernorm", "batch"))
    assert isinstance(with_ln.head[0], torch.nn.LayerNorm) and isinstance(batch.head[0], torch.nn.BatchNorm1d)
    z = 10 * torch.randn(6, 3, dtype=torch.float64)                 # LayerNorm's eps is negligible at this scale
    z3 = torch.cat([3 * z[:1], z[1:]])                              # model 0's features scaled by 3
    assert torch.allclose(with_ln.head[0](z)[0], with_ln.head[0](z3)[0], atol=1e-5)
    assert not torch.allclose(batch.head[0](z)[0], batch.head[0](z3)[0], atol=1e-3)


def test_slot_scales_are_robust_to_one_outlier_run():
    """The slot scale is the median of the per-run rms: one run scaled by 300 moves it by < 10 %,
    while a pooled rms would move by far more."""
    spec = BlockSpec(h=2, D=6, Dk=3, Dv=3, Da=5)
    W = random_weights(spec, 40, 2, generator=gen(20))
    model = TransformerNFN(spec, 2, channels=(3,)).double()
    model.set_scales(W)
    base = model.scales.clone()
    bad = {k: v.clone() for k, v in W.items()}
    for k in KEYS:
        bad[k][7] *= 300.0
    model.set_scales(bad)
    assert ((model.scales / base - 1).abs() < 0.1).all()
    pooled = lambda x: x.pow(2).mean().sqrt()
    assert pooled(bad["WA"][:, 0]) / pooled(W["WA"][:, 0]) > 10   # what a pooled rms would do


def test_seed_pooled_difference():
    from iclr25.nfn.metrics import seed_pooled_difference
    rng = np.random.default_rng(0)
    y = rng.random(80)
    good = np.stack([y + 0.3 * rng.standard_normal(80) for _ in range(3)])
    bad = np.stack([y + 2.0 * rng.standard_normal(80) for _ in range(3)])
    c = seed_pooled_difference(good, bad, y)
    per = [tau_difference(a, b, y) for a, b in zip(good, bad)]
    assert c["diff"] == pytest.approx(np.mean([p["diff"] for p in per]))
    assert c["se"] >= max(np.sqrt(np.mean([p["se"] ** 2 for p in per])), c["seed_sd"]) - 1e-12
    assert c["lo"] > 0 and c["agree"] == 1
    one = seed_pooled_difference(good, bad[:1], y)                  # one baseline seed, broadcast
    assert len(one["per_seed"]) == 3
    assert len(seed_pooled_difference(bad[:1], good, y)["per_seed"]) == 3
    with pytest.raises(ValueError):
        seed_pooled_difference(good[:2], bad, y)
    assert seed_pooled_difference(bad, good, y)["agree"] == -1
    # a large spread between seeds widens the interval
    mixed = np.stack([good[0], bad[1], good[2]])
    assert seed_pooled_difference(mixed, good[:1], y)["se"] > seed_pooled_difference(good, good[:1], y)["se"]


def test_study_runs_and_folds():
    from iclr25.nfn.study import fold_indices, study_runs, zero_share
    W = random_weights(SPEC, 23, 2, generator=gen(21))
    W["WQ"][3].zero_()
    W["WA"][5, 0, 0, 0] = 0.0                                       # one entry: below the share
    share = zero_share(W)
    assert share[3] > 0.05 and 0 < share[5] < 1e-2 and share[0] == 0
    runs = study_runs(W, 1e-2, 5)
    assert len(runs) == 20 and 3 not in runs and 5 in runs
    idx = fold_indices(20, 5, 0)
    assert sorted(idx["test"].reshape(-1)) == list(range(20))
    for f in range(5):
        parts = [set(idx[s][f]) for s in ("train", "val", "test")]
        assert not (parts[0] & parts[1]) and not (parts[0] & parts[2]) and not (parts[1] & parts[2])
        assert len(parts[0]) == 12


def test_select_mean_and_interior():
    from iclr25.nfn import Selection, interior, select_mean
    val = np.array([[0.1, 0.5, 0.2], [0.4, 0.3, 0.1]])          # per split best: 1 and 0; mean best: 1
    pred = np.arange(2 * 3 * 4, dtype=float).reshape(2, 3, 4)
    k, mean, sel = select_mean(Selection(val, np.ones((2, 3)), pred, np.zeros(2, int), pred[:, 0]))
    assert k == 1 and np.allclose(mean, [0.25, 0.4, 0.15])
    assert (sel.chosen == 1).all() and np.array_equal(sel.pred, pred[:, 1])
    assert interior(1, 3) and not interior(0, 3) and not interior(2, 3) and not interior(0, 1)


def test_lr_share_after_cosine_tail():
    from iclr25.nfn import lr_share_after
    assert lr_share_after(0, 700) == pytest.approx(1.0) and lr_share_after(700, 700) == 0.0
    shares = [lr_share_after(t, 700) for t in range(0, 701, 50)]
    assert all(a >= b for a, b in zip(shares, shares[1:]))
    assert lr_share_after(525, 700) < 0.05            # the last quarter of a cosine decay: a few percent


def test_product_stat_features_by_slot():
    from iclr25.nfn import PRODUCT_SLOTS
    W = random_weights(SPEC, 3, 2, generator=gen(8), dtype=torch.float64)
    full = product_stat_features(W)
    parts = {s: product_stat_features(W, (s,)) for s in PRODUCT_SLOTS}
    assert all(p.shape == (3, 2 * 7) for p in parts.values())
    per_block = lambda l: torch.cat([parts[s][:, 7 * l:7 * (l + 1)] for s in PRODUCT_SLOTS], -1)
    assert torch.equal(full, torch.cat([per_block(0), per_block(1)], -1))
    gW = apply_group_action(W, random_group_element(SPEC, 3, 2, generator=gen(9)))
    att = product_stat_features(W, ("QK", "VO"))
    assert torch.allclose(att, product_stat_features(gW, ("QK", "VO")), atol=1e-10)


def test_zoo_counts_nonfinite_entries_of_diverged_runs():
    from iclr25.nfn import ZooGrid
    block = BlockSpec(h=2, D=8, Dk=4, Dv=4, Da=8)
    calm = ZooConfig(n_runs=2, steps=10, batch=8, block=block, grid=ZooGrid(optimizer=("sgd",), lr_sgd=(1e-2,)))
    wild = ZooConfig(n_runs=2, steps=10, batch=8, block=block,
                     grid=ZooGrid(optimizer=("sgd",), lr_sgd=(1e30,), init_std=(0.5,)))
    assert (train_zoo(calm)["nonfinite"] == 0).all()
    z = train_zoo(wild)
    assert (z["nonfinite"] > 0).all()
    assert any((v == 0).any() for k, v in z["encoder"].items() if k == "WQ")


def test_fit_ensemble_with_augment_keeps_labels_and_shapes():
    spec = BlockSpec(h=2, D=4, Dk=2, Dv=2, Da=3)
    S, n = 2, {"train": 12, "val": 6, "test": 6}
    W = {s: {k: v.reshape(S, m, *v.shape[1:]) for k, v in random_weights(spec, S * m, 1, generator=gen(i), dtype=torch.float32).items()}
         for i, (s, m) in enumerate(n.items())}
    ys = {s: torch.rand(S, m, generator=gen(10 + i)) for i, (s, m) in enumerate(n.items())}
    ys_before = {s: v.clone() for s, v in ys.items()}
    seen = []
    aug = group_augment(spec)

    def augment(batch, g):
        out = aug(batch, g)
        seen.append(all(out[k].shape == batch[k].shape for k in batch) and
                    any((out[k] - batch[k]).abs().max() > 1e-6 for k in batch))
        return out

    sel = fit_ensemble(lambda s, k: FlatWeightsMLP(spec.n_params(), 4), W, ys, [dict(lr=1e-3, wd=0.0)],
                       epochs=2, batch=6, augment=augment)
    assert seen and all(seen) and sel.pred.shape == (S, 6)
    assert all(torch.equal(ys[s], ys_before[s]) for s in ys)


def test_stream_permutation_is_a_symmetry_of_the_zoo_model():
    from iclr25.nfn.zoo import sinusoidal_positions, zoo_shapes

    cfg = ZooConfig(n_runs=1, block=BlockSpec(h=2, D=8, Dk=4, Dv=4, Da=8))
    p = {k: 0.4 * torch.randn(2, *s, generator=gen(8), dtype=torch.float64) for k, s in zoo_shapes(cfg, 8, 10).items()}
    x = torch.randn(3, 8, 8, generator=gen(9), dtype=torch.float64)
    pos = sinusoidal_positions(8, 8).double()
    for sign in (1.0, -1.0):
        q = permute_stream(p, 0, torch.randperm(8, generator=gen(10)), sign)
        assert (zoo_forward(q, x, 2, pos) - zoo_forward(p, x, 2, pos)).abs().max() < 1e-10
    assert (q["enc1.WV"] - p["enc1.WV"]).abs().max() > 1e-2


def test_tau_difference_matches_bootstrap():
    r = np.random.default_rng(0)
    y = r.random(120)
    a, b = y + 0.5 * r.standard_normal(120), y + r.standard_normal(120)
    d = tau_difference(a, b, y)
    assert abs(d["diff"] - (kendall_tau(a, y) - kendall_tau(b, y))) < 1e-12
    assert abs(d["tau1"] - kendall_tau(a, y)) < 1e-12
    bt = paired_bootstrap_tau(a, b, y, n_boot=2000)
    assert abs(d["se"] / bt["se"] - 1) < 0.15 and d["lo"] < d["diff"] < d["hi"]


def test_committed_zoo_matches_its_record():
    from iclr25.nfn.make_zoo import ZOO, ZOO_FILE, load_zoo, zoo_config

    assert ZOO_FILE.stat().st_size < 6_000_000                              # this chapter's share of the book
    z = load_zoo()                                                          # raises on a sha256 mismatch
    cfg = zoo_config(z["meta"])
    assert cfg == ZOO and z["params"]["enc0.WQ"].dtype == torch.float16
    assert z["accuracy"].shape == (2, cfg.n_runs) and len(z["meta"]["accuracy"][str(cfg.steps)]) == cfg.n_runs
    assert np.allclose(z["meta"]["accuracy"][str(cfg.steps)], z["accuracy"][-1].numpy(), atol=1e-4)


def test_study_neural_averages_tuning_seeds():
    from iclr25.nfn.study import fold_indices, make_mlp, study_neural
    torch.manual_seed(0)
    X = torch.randn(20, 3)
    acc = (torch.sigmoid(X[:, 0]) + 0.1 * torch.randn(20)).clamp(0, 1).numpy().astype(np.float64)
    idx = fold_indices(20, 5, 0)
    out = study_neural(make_mlp(X, 4), X, acc, idx, [1e-3, 1e-1], 3, [7], [0, 4, 5])
    curves = np.array(out["lr_curves"])
    assert curves.shape == (3, 2) and out["tune_seeds"] == [0, 4, 5]
    assert np.allclose(out["lr_curve"], curves.mean(0), atol=2e-4)          # rounded to 4 decimals
    assert out["k"] == int(np.argmax(curves.mean(0))) and out["lr"] == [1e-3, 1e-1][out["k"]]
    assert not np.allclose(curves[0], curves[1])                             # the seeds differ
    assert np.array(out["pred"]).shape == (1, 20) and "gain_double" in out


def test_study_decay_reuses_the_lr_step_and_extends_its_grid():
    from iclr25.nfn.study import fold_indices, make_mlp, study_decay, study_neural
    torch.manual_seed(0)
    X = torch.randn(20, 3)
    acc = (torch.sigmoid(X[:, 0]) + 0.1 * torch.randn(20)).clamp(0, 1).numpy().astype(np.float64)
    idx = fold_indices(20, 5, 0)
    step = study_neural(make_mlp(X, 4), X, acc, idx, [1e-3, 1e-1], 3, [7], [0, 4], plateau_check=False)
    out = study_decay(make_mlp(X, 4), X, acc, idx, step, [0.0, 1e-3], extend=2, plateau_check=False)
    curves = np.array(out["wd_curves"])
    assert curves.shape == (2, len(out["decay_grid"])) and 2 <= len(out["decay_grid"]) <= 4
    assert not np.allclose(curves[:, 0], np.array(step["lr_curves"])[:, step["k"]])  # decay 0 retrained, fresh
    assert out["decay_grid"][2:] == [1e-2, 1e-1][: len(out["decay_grid"]) - 2]       # each extension a decade up
    j = out["wd_k"]
    assert j == int(np.argmax(curves.mean(0))) and np.isclose(out["wd"], out["decay_grid"][j] / step["lr"])
    # the grid grows only while the top decay is chosen, and at most `extend` times
    assert j < len(out["decay_grid"]) - 1 or len(out["decay_grid"]) == 4
    if j > 0:
        assert out["pred_no_decay"] == step["pred"] and out["pred"] != step["pred"]
    else:
        assert out["pred"] == step["pred"]


def test_subsample_train_is_nested_and_keeps_test_folds():
    from iclr25.nfn.study import fold_indices, subsample_train
    idx = fold_indices(40, 5, 0)
    q, h = subsample_train(idx, 0.25), subsample_train(idx, 0.5)
    assert q["train"].shape == (5, 6) and h["train"].shape == (5, 12)
    assert (h["train"][:, :6] == q["train"]).all() and (q["test"] == idx["test"]).all()
    for f in range(5):
        assert not set(h["train"][f]) & (set(idx["test"][f]) | set(idx["val"][f]))


def test_tau_contrast_matches_tau_difference_and_pools_seeds():
    from iclr25.nfn.metrics import seed_pooled_contrast, seed_pooled_difference, tau_contrast, tau_difference
    rng = np.random.default_rng(0)
    y = rng.random(60)
    a, b = y + rng.normal(0, 0.3, (2, 3, 60))
    c = tau_contrast(np.stack([a[0], b[0]]), np.array([1.0, -1.0]), y)
    d = tau_difference(a[0], b[0], y)
    assert np.isclose(c["value"], d["diff"]) and np.isclose(c["se"], d["se"])
    p, q = seed_pooled_contrast(np.stack([a, b]), np.array([1.0, -1.0]), y), seed_pooled_difference(a, b, y)
    assert np.isclose(p["diff"], q["diff"]) and np.isclose(p["se"], q["se"])
    # a contrast of a method with itself is exactly 0 with no error
    z = tau_contrast(np.stack([a[0], a[0]]), np.array([0.5, -0.5]), y)
    assert z["value"] == 0.0 and z["se"] == 0.0


def test_regime_gate_and_detectable():
    from iclr25.nfn.study import detectable, regime_gate
    gap = {"diff": -0.3}
    assert regime_gate(gap, {"diff": 0.1, "lo": 0.05, "hi": 0.15}, 5) is not None   # -0.3 + 5 * 0.1 > 0
    assert regime_gate(gap, {"diff": 0.05, "lo": 0.01, "hi": 0.09}, 5) is None      # too slow to reverse
    assert regime_gate(gap, {"diff": 0.1, "lo": -0.01, "hi": 0.21}, 5) is None      # not resolved
    assert regime_gate({"diff": 0.2}, {"diff": -0.1, "lo": -0.15, "hi": -0.05}, 5) is not None
    assert abs(detectable(1.0) - 2.8016) < 1e-3


def test_train_standardised_head_is_not_transductive():
    from iclr25.nfn.study import SPEC, Standardize, make_nfn_train_standardised
    torch.manual_seed(0)
    W = random_weights(SPEC, 12, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float32)
    m = make_nfn_train_standardised(W, [3], 8)(np.arange(8))
    assert isinstance(m.head[0], Standardize)
    with torch.no_grad():
        alone = m({k: v[8:9] for k, v in W.items()})
        batch = m({k: v[8:] for k, v in W.items()})[:1]
        feats = []
        m.head[1].register_forward_hook(lambda mod, i, o: feats.append(i[0]))
        m({k: v[:8] for k, v in W.items()})
    assert torch.allclose(alone, batch, atol=1e-6)              # a model's prediction ignores the others
    assert torch.allclose(feats[0].mean(0), torch.zeros(6), atol=1e-5)   # training runs standardised at init


def test_gates_and_paper_rows_on_a_synthetic_record():
    from iclr25.nfn.study import PAPER_BASELINES, gates, paper_rows
    rng = np.random.default_rng(0)
    n = 100
    y = rng.random(n)
    good = lambda s: (y + rng.normal(0, s, (3, n))).round(5).tolist()
    base = {"grid": [1, 2, 3], "k": 1, "gain_double": 0.0, "eval_seeds": [1, 2, 3]}
    methods = {"Transformer-NFN": dict(base, pred=good(0.1)),
               "MLP (flat weights)": dict(base, k=2, pred=good(0.1)),                    # lr at an edge
               "STATNN": dict(base, decay_grid=[0, 1e-4, 1e-3], wd_k=2, pred=good(0.4)),  # decay at the top
               "GBM (flat weights)": {"rounds": 10, "max_iter": 300, "pred": good(3.0)}}  # tau lower bound <= 0.1
    record = {"methods": methods, "protocol": {"plateau": 0.02, "margin": 0.1, "n_folds": 5, "horizon_doublings": 5},
              "runs": list(range(n)), "learning_curve": {}}
    assert gates("Transformer-NFN", record, y) == []
    assert gates("MLP (flat weights)", record, y) == ["MLP (flat weights): lr at a grid edge"]
    assert gates("STATNN", record, y) == ["STATNN: weight decay at the top of its grid"]
    assert gates("GBM (flat weights)", record, y) == ["GBM (flat weights): tau lower bound <= 0.1"]
    rows = paper_rows(record, y)
    assert set(rows) == set(PAPER_BASELINES) and all(r["holds"] is None for r in rows.values())
    methods["STATNN"]["wd_k"] = 1                                                        # interior: decided
    rows = paper_rows(record, y)
    assert rows["STATNN"]["holds"] is True and rows["STATNN"]["c"]["lo"] > 0 and rows["STATNN"]["trend"] is None


def test_paired_run_starts_from_the_tuning_members_weights():
    """The budget run of the paired plateau check reproduces member k of a K-point tuning build, and a
    run from another member's weights does not."""
    from iclr25.nfn.plateau import paired_run
    from iclr25.nfn.study import fold_indices, make_mlp, train_predictor
    torch.manual_seed(0)
    X = torch.randn(20, 3)
    acc = (torch.sigmoid(X[:, 0]) + 0.1 * torch.randn(20)).clamp(0, 1).numpy().astype(np.float64)
    idx = fold_indices(20, 5, 0)
    lrs = [1e-2, 1e-2, 1e-2]                        # one rate: the members differ by their initial weights only
    build = np.mean(train_predictor(make_mlp(X, 4), X, acc, idx, lrs, 4, 3).val_tau, 0)
    assert not np.allclose(build[1], build[2])
    member = {"K": 3, "k": 2, "lr": 1e-2, "wd": 0.0}
    assert paired_run(make_mlp(X, 4), X, acc, idx, member, 4, 3) == pytest.approx(build[2], abs=1e-6)
    assert paired_run(make_mlp(X, 4), X, acc, idx, {**member, "k": 1}, 4, 3) == pytest.approx(build[1], abs=1e-6)


def test_chosen_member_and_summarise():
    from iclr25.nfn.plateau import chosen_member, summarise
    lr_only = {"grid": [1, 2, 3, 4, 5], "k": 3, "lr": 4, "wd_k": 0, "wd": 0.0}
    assert chosen_member(lr_only, 4) == {"K": 5, "k": 3, "lr": 4, "wd": 0.0, "curves": "lr_curves", "col": 3}
    decayed = {**lr_only, "wd_k": 2, "wd": 0.5}
    assert chosen_member(decayed, 4) == {"K": 4, "k": 2, "lr": 4, "wd": 0.5, "curves": "wd_curves", "col": 2}
    assert chosen_member({**decayed, "wd_k": 4}, 4)["K"] == 1 and chosen_member({**decayed, "wd_k": 4}, 4)["k"] == 0
    s = summarise([0.2, 0.3, 0.4], [0.25, 0.31, 0.43], 0.02)
    assert s["gains"] == [0.05, 0.01, 0.03] and s["gain"] == 0.03 and not s["passes"] and s["sd"] == 0.02
    assert summarise([0.2, 0.3], [0.2, 0.31], 0.02)["passes"]


def test_gates_read_the_paired_plateau_and_diverged_estimate():
    from iclr25.nfn.study import diverged_estimate, gates
    y = np.linspace(0, 1, 50)
    m = {"grid": [1, 2, 3], "k": 1, "gain_double": 0.0, "pred": [list(y)] * 3}
    record = {"methods": {"A": m}, "protocol": {"plateau": 0.02, "margin": 0.1}}
    assert gates("A", record, y) == []
    assert gates("A", record, y, {"methods": {"A": {"gain": 0.05}}}) == [
        "A: twice the epochs gain +0.050 (paired, mean of the tuning seeds)"]
    assert gates("A", record, y, {"methods": {"B": {"gain": 0.05}}}) == []
    curves = [[0.2, 0.2, -2.0], [0.5, 0.5, (4 * 0.5 - 2) / 5], [0.3, 0.3, 0.29]]
    assert diverged_estimate(curves, 5).tolist() == [0, 0, 6]
