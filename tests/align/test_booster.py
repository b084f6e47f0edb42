"""Booster's step and its theory: exact undo, lambda = 0 is SFT, the first-order gradient equals the
gradient of the detached surrogate, the dropped Jacobian term is O(alpha^2), R / alpha -> ||g_h||."""

import numpy as np
import pytest
import torch

from iclr25.align.booster import (booster_grad, displaced, functional_loss, global_norm,
                                  harmful_perturbation_gap, hessian_quadratic_form,
                                  perturbation_gap_graph, random_unit_direction, trainable,
                                  unit_direction)
from iclr25.lm import TinyLM, TinyLMConfig, answer_nll, encode_examples
from iclr25.lm.data import Example


def _setup(dtype=torch.float64):
    torch.manual_seed(0)
    from iclr25.lm import world_vocab
    vocab = world_vocab()
    model = TinyLM(TinyLMConfig(vocab_size=len(vocab), d_model=16, n_layers=1, n_heads=2, d_ff=32, max_len=32)).to(dtype)
    words = [w for w in vocab.words if w.isalpha()][5:40]
    ex_f = [Example(("user", ":", words[i], "?"), ("sorry", ".")) for i in range(6)]
    ex_h = [Example(("user", ":", words[i], "?"), (words[i + 10], words[i + 20])) for i in range(6)]
    fb, hb = encode_examples(vocab, ex_f), encode_examples(vocab, ex_h)
    return model, (lambda m: answer_nll(m, fb)), (lambda m: answer_nll(m, hb))


def test_global_norm_and_unit_direction():
    ts = [torch.tensor([3.0, 0.0]), torch.tensor([[4.0]])]
    assert float(global_norm(ts)) == pytest.approx(5.0)
    u = unit_direction(ts)
    assert float(global_norm(u)) == pytest.approx(1.0, abs=1e-6)
    g = torch.Generator().manual_seed(0)
    z = random_unit_direction([torch.zeros(3, 4), torch.zeros(5)], g)
    assert float(global_norm(z)) == pytest.approx(1.0, abs=1e-6)


def test_displaced_restores_bit_for_bit_and_moves_by_alpha():
    model, _, h = _setup(torch.float32)
    params = trainable(model)
    before = [p.detach().clone() for p in params]
    d = random_unit_direction(params, torch.Generator().manual_seed(1))
    with displaced(params, d, 0.37):
        moved = float(global_norm([b - p.detach() for b, p in zip(before, params)]))
    assert moved == pytest.approx(0.37, rel=1e-4)
    assert all(torch.equal(b, p) for b, p in zip(before, params))
    booster_grad(model, h, h, 5.0, 0.1)
    assert all(torch.equal(b, p) for b, p in zip(before, params))


def test_lambda_zero_is_sft_gradient():
    model, f, h = _setup()
    g, _ = booster_grad(model, f, h, 0.0, 0.1)
    ref = torch.autograd.grad(f(model), trainable(model))
    # exact: grad f runs the same kernels on the bit-for-bit restored weights, and adds 0 * (b - c)
    assert all(torch.equal(a, b) for a, b in zip(g, ref))


def test_booster_grad_is_gradient_of_detached_surrogate():
    model, f, h = _setup()
    lam, alpha = 3.0, 0.05
    g, stats = booster_grad(model, f, h, lam, alpha)
    ws = [p.detach().clone().requires_grad_(True) for p in trainable(model)]
    F = functional_loss(model, f)(ws) + lam * perturbation_gap_graph(functional_loss(model, h), ws, alpha,
                                                                     first_order=True)
    ref = torch.autograd.grad(F, ws)
    err = float(global_norm([a - b for a, b in zip(g, ref)])) / float(global_norm(ref))
    assert err < 1e-10
    assert stats["gap"] == pytest.approx(harmful_perturbation_gap(model, h, alpha), rel=1e-10)


def test_dropped_term_is_second_order_and_gap_expansion():
    model, _, h = _setup()
    loss_at = functional_loss(model, h)
    w0 = [p.detach().clone() for p in trainable(model)]
    alphas = np.array([1e-2, 1e-3, 1e-4])
    drop, full, ratio = [], [], []
    for a in alphas:
        ws = [w.clone().requires_grad_(True) for w in w0]
        g_first = torch.autograd.grad(perturbation_gap_graph(loss_at, ws, a, first_order=True), ws)
        ws = [w.clone().requires_grad_(True) for w in w0]
        g_exact = torch.autograd.grad(perturbation_gap_graph(loss_at, ws, a, first_order=False), ws)
        drop.append(float(global_norm([x - y for x, y in zip(g_first, g_exact)])))
        full.append(float(global_norm(g_exact)))
        ratio.append(harmful_perturbation_gap(model, h, a) / a)
    s_drop = np.polyfit(np.log(alphas), np.log(drop), 1)[0]
    s_full = np.polyfit(np.log(alphas), np.log(full), 1)[0]
    assert abs(s_drop - 2) < 0.1 and abs(s_full - 1) < 0.1, (s_drop, s_full)
    ws = [w.clone().requires_grad_(True) for w in w0]
    g = torch.autograd.grad(loss_at(ws), ws)
    gn = float(global_norm(g))
    u = [t / gn for t in g]
    curv = hessian_quadratic_form(loss_at, w0, u)
    # R / alpha = ||g|| - alpha u^T H u / 2 + O(alpha^2): intercept and slope at alpha = 1e-4
    a, r = alphas[-1], ratio[-1]
    assert abs(r / gn - 1) < 1e-3
    assert abs(2 * (gn - r) / a - curv) < 0.1 * abs(curv)
