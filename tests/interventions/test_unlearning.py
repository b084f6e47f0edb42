"""Unlearners: what they train, the direction of their losses, RMU's objective."""

import copy

import numpy as np
import torch

from iclr25.interventions import (block_output, gradient_ascent, gradient_difference, rmu,
                                  rmu_direction, text_batch)
from iclr25.lm import answer_nll, forget_texts, load_world_lm, retain_texts


def _data(world):
    return (text_batch(world.vocab, forget_texts(world)[:20]), text_batch(world.vocab, retain_texts(world)[:20]))


def test_text_batch_masks_every_token_after_bos():
    _, world = load_world_lm("tiny")
    b = text_batch(world.vocab, forget_texts(world)[:2])
    assert torch.equal(b.mask.sum(1).long(), b.lengths - 1)


def test_gradient_ascent_raises_the_forget_loss_and_freezes_the_lower_block():
    base, world = load_world_lm("tiny")
    F, _ = _data(world)
    base2, _ = load_world_lm("small")
    m = copy.deepcopy(base2)
    before = float(answer_nll(m, F))
    losses = gradient_ascent(m, F, steps=5, lr=1e-3)
    assert float(answer_nll(m, F)) > before and losses[-1] < losses[0]
    assert all(torch.equal(a, b) for a, b in zip(m.blocks[0].parameters(), base2.blocks[0].parameters()))
    assert torch.equal(m.tok.weight, base2.tok.weight)


def test_gradient_difference_with_zero_weight_is_gradient_ascent():
    base, world = load_world_lm("small")
    F, R = _data(world)
    a, b = copy.deepcopy(base), copy.deepcopy(base)
    gradient_ascent(a, F, steps=3, lr=1e-3)
    gradient_difference(b, F, R, steps=3, lr=1e-3, retain_weight=0.0)
    # exact: a zero weight skips the retain term, so both run the same kernels on the same inputs
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))


def test_rmu_moves_forget_activations_to_the_control_vector_and_only_W_out():
    base, world = load_world_lm("small")
    F, R = _data(world)
    m = copy.deepcopy(base)
    u = rmu_direction(base.cfg.d_model, 0)
    assert abs(float(u.norm()) - 1) < 1e-6 and (u >= 0).all()
    dist = lambda mm: float(((block_output(mm, F.ids, 0) - 5.0 * u) ** 2)[F.mask.bool()].mean())  # noqa: E731
    losses = rmu(m, F, R, layer=0, coeff=5.0, alpha=10.0, steps=10, lr=1e-2)
    assert losses[-1] < losses[0] and dist(m) < dist(base)
    changed = [n for (n, a), b in zip(m.named_parameters(), base.parameters()) if not torch.equal(a, b)]
    assert changed == ["blocks.0.mlp.2.weight"]


def test_project_update_shrinks_only_changes_beyond_the_cap():
    from iclr25.interventions.unlearning import project_update
    torch.manual_seed(0)
    p0 = [torch.randn(8, 4), torch.randn(3, 3)]
    big, small = p0[0] + 2 * torch.randn(8, 4), p0[1] + 1e-3 * torch.randn(3, 3)
    params = [torch.nn.Parameter(big.clone()), torch.nn.Parameter(small.clone())]
    project_update(params, p0, 0.5)
    d = params[0].detach() - p0[0]
    assert abs(float(d.norm() / p0[0].norm()) - 0.5) < 1e-5                  # onto the sphere ...
    assert torch.allclose(d / d.norm(), (big - p0[0]) / (big - p0[0]).norm(), atol=1e-6)   # ... along the change
    assert torch.equal(params[1].detach(), small)                             # inside the ball: untouched


def test_rmu_with_a_cap_changes_W_in_and_W_out_within_it():
    from iclr25.lm.hooks import mlp_in, mlp_out
    base, world = load_world_lm("small")
    F, R = _data(world)
    m = copy.deepcopy(base)
    rmu(m, F, R, layer=1, coeff=50.0, alpha=1.0, steps=20, lr=5e-2, max_rel=0.2, weights="mlp")
    for l in (0, 1):
        for get in (mlp_in, mlp_out):
            w0, w1 = get(base, l).weight, get(m, l).weight
            rel = float((w1 - w0).norm() / w0.norm())
            assert 0 < rel <= 0.2 + 1e-5
    changed = {n for (n, a), b in zip(base.named_parameters(), m.parameters()) if not torch.equal(a, b)}
    assert len(changed) == 4
