"""Identities of the editors: ROME's constrained minimum, MEMIT's normal equations, the editors on
the world model."""

import copy

import numpy as np
import pytest
import torch

from iclr25.interventions import (edit_prompts, ft_edit, memit_delta, memit_edit, rank_one_edit,
                                  rome_edit, subject_keys, target_deltas)
from iclr25.interventions.metrics import edit_metrics
from iclr25.lm import edit_split, key_covariance, load_world_lm, mlp_out, world_batch


def _spd(m, g):
    A = torch.randn(m, 3 * m, generator=g, dtype=torch.float64)
    return A @ A.T / (3 * m)


def test_rank_one_edit_constraint_rank_and_identity_default():
    g = torch.Generator().manual_seed(0)
    W = torch.randn(6, 9, generator=g, dtype=torch.float64)
    k, v = torch.randn(9, generator=g, dtype=torch.float64), torch.randn(6, generator=g, dtype=torch.float64)
    for C in (None, _spd(9, g)):
        W2 = rank_one_edit(W, k, v, C)
        assert torch.allclose(W2 @ k, v, atol=1e-12)
        assert torch.linalg.matrix_rank(W2 - W, atol=1e-10) == 1
    # C = None is the minimum-Frobenius-norm change: (v - W k) k^T / |k|^2
    assert torch.allclose(rank_one_edit(W, k, v), W + torch.outer(v - W @ k, k) / (k @ k), atol=1e-12)


def test_rank_one_edit_is_the_C_weighted_minimum_and_spares_C_orthogonal_keys():
    g = torch.Generator().manual_seed(1)
    W = torch.randn(5, 8, generator=g, dtype=torch.float64)
    k, v = torch.randn(8, generator=g, dtype=torch.float64), torch.randn(5, generator=g, dtype=torch.float64)
    C = _spd(8, g)
    D = rank_one_edit(W, k, v, C) - W
    cost = lambda X: torch.trace(X @ C @ X.T)  # noqa: E731
    # KKT: the minimiser of tr(D C D^T) s.t. D k = r is D = r (C^-1 k)^T / (k^T C^-1 k)
    for _ in range(50):
        E = torch.randn(5, 8, generator=g, dtype=torch.float64)
        E = E - torch.outer(E @ k, k) / (k @ k)          # E k = 0: D + E is feasible
        assert cost(D + 0.1 * E) > cost(D)
    u = torch.linalg.solve(C, k)
    q = torch.randn(8, generator=g, dtype=torch.float64)
    q = q - (u @ q) / (u @ k) * k                        # (C^-1 k)^T q = 0
    assert torch.allclose(D @ q, torch.zeros(5, dtype=torch.float64), atol=1e-12)


def test_rank_one_edit_keeps_dtype_and_is_identity_when_already_stored():
    g = torch.Generator().manual_seed(2)
    W = torch.randn(4, 7, generator=g)
    k = torch.randn(7, generator=g)
    assert rank_one_edit(W, k, W @ k).dtype == torch.float32
    assert torch.allclose(rank_one_edit(W, k, W @ k), W, atol=1e-6)


def test_memit_delta_solves_the_regularised_least_squares():
    g = torch.Generator().manual_seed(3)
    m, d, n, lam = 10, 4, 6, 2.5
    K = torch.randn(m, n, generator=g, dtype=torch.float64)
    R = torch.randn(d, n, generator=g, dtype=torch.float64)
    C = _spd(m, g)
    D = memit_delta(K, R, C, lam)
    L = torch.linalg.cholesky(C)
    A = torch.cat([K.T, np.sqrt(lam) * L.T])
    B = torch.cat([R.T, torch.zeros(m, d, dtype=torch.float64)])
    assert torch.allclose(D, torch.linalg.lstsq(A, B).solution.T, atol=1e-10)
    # gradient of the objective vanishes: (D K - R) K^T + lam D C = 0
    assert torch.allclose((D @ K - R) @ K.T + lam * D @ C, torch.zeros(d, m, dtype=torch.float64), atol=1e-10)
    # lam -> 0 with n <= m and full rank: the residuals are matched exactly
    assert torch.allclose(memit_delta(K, R, C, 1e-9) @ K, R, atol=1e-5)


def test_edit_prompts_positions():
    _, world = load_world_lm("tiny")
    split = edit_split(world, 2, 0)
    prompts, objects, pos, idx = edit_prompts(split.edits, (0, 3), position="subject")
    assert idx == [0, 0, 1, 1] and objects[0] == (split.edits[0].new,)
    for p, i in zip(prompts, pos):
        assert ("<bos>",) + tuple(p)  # noqa: B015
        assert (("<bos>",) + tuple(p))[i] in {e.subject for e in split.edits}
    _, _, last, _ = edit_prompts(split.edits, (0,), position="last")
    assert last == [len(prompts[0]), len(prompts[2])]
    with pytest.raises(ValueError):
        edit_prompts(split.edits, position="middle")


@pytest.fixture(scope="module")
def world_model():
    return load_world_lm("base")


def test_rome_and_memit_store_the_edits_and_change_only_W_out(world_model):
    base, world = world_model
    split = edit_split(world, 5, 123)
    ids, mask = world_batch(world, np.random.default_rng(0), 32)
    for fn in (lambda m: rome_edit(m, world.vocab, split.edits, 1, ids, mask),
               lambda m: memit_edit(m, world.vocab, split.edits, 1, ids, mask, lam=50.0)):
        m = copy.deepcopy(base)
        fn(m)
        assert edit_metrics(m, base, world, split)["success"] >= 0.8
        changed = [n for (n, a), b in zip(m.named_parameters(), base.parameters()) if not torch.equal(a, b)]
        assert changed == ["blocks.1.mlp.2.weight"]


def test_rome_single_edit_hits_its_value_exactly(world_model):
    base, world = world_model
    split = edit_split(world, 1, 7)
    ids, mask = world_batch(world, np.random.default_rng(1), 32)
    m = copy.deepcopy(base)
    rome_edit(m, world.vocab, split.edits, 1, ids, mask)
    k = subject_keys(base, world.vocab, split.edits, 1)[0]
    d = target_deltas(base, world.vocab, split.edits, 1)[0]
    W0, W1 = mlp_out(base, 1).weight.double(), mlp_out(m, 1).weight.double()
    assert torch.allclose(W1 @ k, W0 @ k + d.double(), atol=1e-4)
    # rank relative to the edit's size, in float64: the second singular value is the float32 rounding
    # of the stored weights (~1e-8 of the first); a float32 SVD's own round-off (~5e-7 of the first)
    # crossed the old absolute bar of 1e-5 under other kernels
    assert torch.linalg.matrix_rank((W1 - W0).detach(), rtol=1e-6) == 1


def test_ft_edit_respects_the_box(world_model):
    base, world = world_model
    split = edit_split(world, 3, 5)
    m = copy.deepcopy(base)
    ft_edit(m, world.vocab, split.edits, 0, steps=10, lr=1e-2, max_change=0.01)
    diff = (mlp_out(m, 0).weight - mlp_out(base, 0).weight).abs()
    # the box holds up to the float32 rounding of the stored weights (half an ulp of the largest)
    ulp = torch.finfo(torch.float32).eps * float(mlp_out(base, 0).weight.abs().max())
    assert diff.max() <= 0.01 + ulp and diff.max() > 0
    assert all(p.requires_grad for p in m.parameters())


def test_ft_edit_keep_zeros_updates_only_the_surviving_weights(world_model):
    base, world = world_model
    split = edit_split(world, 3, 5)
    m = copy.deepcopy(base)
    with torch.no_grad():
        W = mlp_out(m, 0).weight
        W[:, ::2] = 0.0                                  # half the weights pruned
    W0 = mlp_out(m, 0).weight.detach().clone()
    plain = copy.deepcopy(m)
    ft_edit(m, world.vocab, split.edits, 0, steps=10, lr=1e-2, max_change=0.01, keep_zeros=True)
    ft_edit(plain, world.vocab, split.edits, 0, steps=10, lr=1e-2, max_change=0.01)
    W1, Wp = mlp_out(m, 0).weight.detach(), mlp_out(plain, 0).weight.detach()
    assert torch.equal(W1[W0 == 0], W0[W0 == 0]) and (W1 != W0).any()   # zeros stay zero, the rest moves
    assert (Wp[W0 == 0] != 0).any()                                   # the plain FT writes on pruned weights


def test_memit_ridge_caps_the_edit_norm(world_model):
    """eps = 0 is plain MEMIT; eps > 0 (C + eps mean(diag C) I) shrinks ||Delta||_F and equals the
    closed form on the ridged statistics."""
    from iclr25.lm import key_covariance
    base, world = world_model
    split = edit_split(world, 5, 11)
    ids, mask = world_batch(world, np.random.default_rng(2), 32)
    W0 = mlp_out(base, 1).weight.detach()
    norms = []
    for eps in (0.0, 0.1):
        m = copy.deepcopy(base)
        memit_edit(m, world.vocab, split.edits, 1, ids, mask, lam=50.0, eps=eps)
        norms.append(float((mlp_out(m, 1).weight.detach() - W0).norm()))
    C = key_covariance(base, ids, 1, mask)
    C = C + 0.1 * C.diagonal().mean() * torch.eye(C.shape[0], dtype=C.dtype)
    K = subject_keys(base, world.vocab, split.edits, 1)
    D = memit_delta(K.T, target_deltas(base, world.vocab, split.edits, 1).T, C, 50.0)
    assert norms[1] < 0.5 * norms[0]
    assert abs(float(D.norm()) - norms[1]) < 1e-3 * norms[1]
