"""Tests of iclr25.lm.hooks: weight round trips, key statistics, calibration inputs, interventions."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from iclr25.lm import TinyLM, TinyLMConfig
from iclr25.lm.hooks import (add_to_block_output, add_to_mlp_output, attention_probs, capture_inputs,
                             get_mlp_weights, key_covariance, linear_inputs, mlp_keys, mlp_out,
                             set_mlp_weights, transformer_linears)
from iclr25.lm.world import build_world, world_batch

WORLD = build_world(0)


def _model(seed=0, layers=2):
    torch.manual_seed(seed)
    m = TinyLM(TinyLMConfig(vocab_size=len(WORLD.vocab), d_model=32, d_ff=64, n_layers=layers, max_len=32))
    with torch.no_grad():  # non-trivial LayerNorm and biases, so the manual checks below mean something
        for p in m.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return m.eval()


def _batch(n=8, seed=0):
    return world_batch(WORLD, np.random.default_rng(seed), n)


def test_mlp_weights_write_then_read_round_trip():
    m = _model()
    ids, _ = _batch()
    before = get_mlp_weights(m, 1)
    logits0 = m(ids).detach()
    new_out = torch.randn_like(before.W_out)
    set_mlp_weights(m, 1, W_out=new_out)
    after = get_mlp_weights(m, 1)
    assert torch.equal(after.W_out, new_out)
    assert torch.equal(after.W_in, before.W_in) and torch.equal(after.b_out, before.b_out)
    assert not torch.allclose(m(ids), logits0)
    set_mlp_weights(m, 1, before)  # restoring every tensor restores the function exactly
    assert torch.equal(m(ids), logits0)
    after.W_out.zero_()  # the copies are detached: mutating them leaves the model alone
    assert torch.equal(get_mlp_weights(m, 1).W_out, before.W_out)
    with pytest.raises(ValueError, match="shape"):
        set_mlp_weights(m, 0, W_out=torch.zeros(3, 3))
    with pytest.raises(ValueError, match="out of range"):
        get_mlp_weights(m, 2)


def test_mlp_keys_are_gelu_of_the_first_mlp_layer():
    m = _model(1)
    ids, _ = _batch()
    with torch.no_grad():
        _, hidden = m(ids, return_hidden=True)
        blk = m.blocks[1]
        x = hidden[1] + blk.attn(blk.ln1(hidden[1]))
        manual = F.gelu(blk.mlp[0](blk.ln2(x)))
        keys = mlp_keys(m, ids, 1)
        assert torch.allclose(keys, manual, atol=1e-6)
        # and W_out k + b_out is the MLP's contribution to the residual stream
        assert torch.allclose(hidden[2], x + keys @ blk.mlp[2].weight.T + blk.mlp[2].bias, atol=1e-5)


def test_key_covariance_is_keys_second_moment():
    m = _model(2)
    ids, w = _batch(12)
    mask = w.clone()
    C = key_covariance(m, ids, 0, mask, batch_size=5)
    K = mlp_keys(m, ids, 0).detach()[mask != 0].double()
    assert C.dtype == torch.float64
    # the keys are float32 and batched differently here (one batch, not batches of 5): entries near 0
    # agree to float32 round-off of the matrix's scale, not to float64's (kernel-dependent otherwise)
    assert torch.allclose(C, K.T @ K / K.shape[0], rtol=1e-5, atol=1e-6 * float(C.abs().max()))
    assert torch.allclose(C, C.T) and torch.linalg.eigvalsh(C).min() > -1e-10


def test_linear_inputs_are_the_calibration_rows():
    m = _model(3)
    ids, _ = _batch(10)
    names = transformer_linears(m)
    assert list(names) == [f"blocks.{l}.{n}" for l in range(2) for n in ("attn.qkv", "attn.proj", "mlp.0", "mlp.2")]
    X = linear_inputs(m, ids, "blocks.0.attn.qkv", batch_size=3)
    assert X.shape == (int((ids != 0).sum()), 32)
    with torch.no_grad():
        ln = m.blocks[0].ln1(m(ids, return_hidden=True)[1][0])
    assert torch.allclose(X, ln[ids != 0], atol=1e-6)
    # Wanda's per-feature input norm and SparseGPT's Hessian come straight from X
    Xk = linear_inputs(m, ids, mlp_out(m, 1))
    C = key_covariance(m, ids, 1)
    assert torch.allclose(Xk.double().T @ Xk.double() / len(Xk), C, rtol=1e-5, atol=1e-6 * float(C.abs().max()))
    with pytest.raises(ValueError, match="valid"):
        linear_inputs(m, ids, "tok")


def test_adding_to_the_mlp_output_equals_adding_to_the_residual_stream():
    m = _model(4)
    ids, _ = _batch(4)
    pos = torch.tensor([2, 5, 1, 3])
    delta = torch.randn(32)
    base = m(ids).detach()
    with add_to_mlp_output(m, 0, torch.zeros(32), pos):
        assert torch.allclose(m(ids), base)
    with add_to_mlp_output(m, 0, delta, pos):
        a = m(ids).detach()
    onehot = torch.zeros(4, ids.shape[1], 1)
    onehot[torch.arange(4), pos] = 1.0
    with add_to_block_output(m, 0, onehot * delta):
        b = m(ids).detach()
    assert torch.allclose(a, b, atol=1e-5)
    for i, p in enumerate(pos.tolist()):  # causality: positions before the edit do not move
        assert torch.allclose(a[i, :p], base[i, :p], atol=1e-6)
        assert not torch.allclose(a[i, p], base[i, p])
    assert torch.equal(m(ids), base)  # the hooks are gone


def test_gradients_flow_into_the_added_vector():
    m = _model(5)
    ids, _ = _batch(3)
    delta = torch.zeros(3, 32, requires_grad=True)
    with add_to_mlp_output(m, 1, delta, 2):
        m(ids)[:, 2].logsumexp(-1).sum().backward()
    assert delta.grad is not None and delta.grad.abs().sum() > 0
    got = capture_inputs(m, {"k": mlp_out(m, 0)}, ids)
    assert got["k"].shape == (3, ids.shape[1], 64)


def test_attention_probs_reproduce_the_attention_output():
    m = _model(6)
    ids, _ = _batch(4)
    P = attention_probs(m, ids, 1).detach()
    B, H, T, _ = P.shape
    assert torch.allclose(P.sum(-1), torch.ones(B, H, T), atol=1e-6)
    assert P.triu(1).abs().max() == 0
    attn = m.blocks[1].attn
    with torch.no_grad():
        x = capture_inputs(m, {"x": attn.qkv}, ids)["x"]
        v = attn.qkv(x).view(B, T, 3, H, -1)[:, :, 2].transpose(1, 2)
        manual = attn.proj((P @ v).transpose(1, 2).reshape(B, T, -1))
        assert torch.allclose(manual, attn(x), atol=1e-5)
