"""Tests of iclr25.nfn: the group action preserves the block's function, the Transformer-NFN
layers are equivariant/invariant under random group elements, and the baselines, metrics and
zoo behave as documented."""

import numpy as np
import pytest
import scipy.stats
import torch

from iclr25.nfn import (KEYS, BlockSpec, MLPRegressor, TransformerNFN, TransformerNFNEquivariant,
                        TransformerNFNInvariant, ZooConfig, apply_group_action, attention_block, fit_ensemble,
                        flatten_weights, head_products, identity_element, kendall_tau, masked_relu,
                        norm_features, paired_bootstrap_tau, product_stat_features, products_match,
                        random_group_element, random_weights, recover_gl, stat_features, train_zoo)

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
