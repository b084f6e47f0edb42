"""Masks: exact counts per row and per group, the kept weights dominate the pruned ones, Wanda's
score from its definition, Wanda = magnitude under equal input norms, device and meta tensors."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from iclr25.compress import (c4n_mask, input_norms, magnitude_mask, mask_from_scores, n_pruned,
                             nm_mask, parse_pattern, pattern_sparsity, sparsity_of,
                             unstructured_mask, wanda_mask, wanda_scores)

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _rand(*shape, seed=0, dtype=torch.float32, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=dtype).to(device)


def _check_dominance(scores, mask):
    """In every slice of the last dim: every kept score >= every pruned score."""
    kept = torch.where(mask, scores, torch.full_like(scores, math.inf)).amin(-1)
    pruned = torch.where(~mask, scores, torch.full_like(scores, -math.inf)).amax(-1)
    assert bool((kept >= pruned).all())


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(1, 9), cols=st.integers(1, 70), s=st.floats(0, 1), seed=st.integers(0, 99))
def test_unstructured_exact_count_per_row_and_dominance(rows, cols, s, seed):
    scores = _rand(rows, cols, seed=seed).abs()
    mask = unstructured_mask(scores, s)
    assert mask.dtype == torch.bool and mask.shape == scores.shape
    k = math.floor(s * cols + 1e-9)
    assert ((~mask).sum(-1) == k).all()
    _check_dominance(scores, mask)


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(1, 7), groups=st.integers(1, 12), m=st.integers(1, 8), data=st.data())
def test_nm_exact_count_per_group_and_dominance(rows, groups, m, data):
    n = data.draw(st.integers(0, m))
    scores = _rand(rows, groups * m, seed=data.draw(st.integers(0, 99)))
    mask = nm_mask(scores, n, m)
    g_scores, g_mask = scores.reshape(rows, groups, m), mask.reshape(rows, groups, m)
    assert ((~g_mask).sum(-1) == n).all()
    _check_dominance(g_scores, g_mask)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4])
def test_c4n_is_n_of_4_and_its_sparsity(n):
    scores = _rand(16, 64, seed=n)
    mask = c4n_mask(scores, n)
    assert torch.equal(mask, nm_mask(scores, n, 4))
    assert ((~mask).reshape(16, 16, 4).sum(-1) == n).all()
    assert float(1 - mask.double().mean()) == n / 4
    # the patterns that name it
    W = scores
    assert torch.equal(magnitude_mask(W, None, ("c4n", n)), c4n_mask(W.abs(), n))
    assert torch.equal(magnitude_mask(W, n / 4, f"{n}:4"), c4n_mask(W.abs(), n))
    if n == 2:
        assert torch.equal(magnitude_mask(W, 0.5, "2:4"), c4n_mask(W.abs(), 2))


def test_c4n_groups_are_contiguous_inputs_of_each_row():
    # scores increasing along the row: in each group {4g..4g+3} the first n inputs go
    scores = torch.arange(12.0).repeat(3, 1)
    mask = c4n_mask(scores, 3)
    assert torch.equal(mask[0], torch.tensor([False, False, False, True] * 3))
    # a permutation inside one group moves the pruned positions with it
    scores[1, :4] = torch.tensor([3.0, 0.0, 2.0, 1.0])
    assert torch.equal(c4n_mask(scores, 1)[1, :4], torch.tensor([True, False, True, True]))


def test_ties_are_broken_by_position():
    scores = torch.ones(2, 8)
    assert torch.equal(unstructured_mask(scores, 0.5)[0], torch.tensor([False] * 4 + [True] * 4))
    assert torch.equal(c4n_mask(scores, 1)[1], torch.tensor([False, True, True, True] * 2))


def test_floor_is_robust_to_binary_round_off():
    assert n_pruned(100, 0.29) == 29  # 0.29 * 100 = 28.999999999999996 in binary
    assert n_pruned(10, 0.7) == 7 and n_pruned(7, 0.5) == 3 and n_pruned(5, 1.0) == 5
    assert ((~unstructured_mask(_rand(3, 100), 0.29)).sum(-1) == 29).all()


def test_pattern_parsing_and_validation():
    assert parse_pattern(None) is None and parse_pattern("unstructured") is None
    assert parse_pattern("2:4") == (2, 4) and parse_pattern(("c4n", 3)) == (3, 4)
    assert parse_pattern("4:8") == (4, 8)
    assert pattern_sparsity(("c4n", 1)) == 0.25 and pattern_sparsity(None, 0.3) == 0.3
    for bad in ["2-4", ("nm", 2), "5:4", ("c4n", 5)]:
        with pytest.raises(ValueError):
            parse_pattern(bad)
    with pytest.raises(ValueError, match="sparsity"):
        mask_from_scores(_rand(2, 8), 0.3, "2:4")  # the pattern fixes 0.5
    with pytest.raises(ValueError):
        mask_from_scores(_rand(2, 8), None)  # unstructured needs a sparsity
    with pytest.raises(ValueError):
        unstructured_mask(_rand(2, 8), 1.5)
    with pytest.raises(ValueError, match="divisible"):
        c4n_mask(_rand(2, 10), 2)


def test_magnitude_whole_matrix_variant():
    W = _rand(8, 16, seed=3)
    mask = magnitude_mask(W, 0.3, per_row=False)
    assert int((~mask).sum()) == math.floor(0.3 * W.numel())
    _check_dominance(W.abs().reshape(-1), mask.reshape(-1))
    with pytest.raises(ValueError):
        magnitude_mask(W, 0.5, "2:4", per_row=False)


def test_wanda_scores_match_definition():
    W, X = _rand(5, 6, seed=1), _rand(40, 6, seed=2)
    want = torch.stack([torch.stack([W[i, j].abs().double() * torch.linalg.norm(X[:, j].double())
                                     for j in range(6)]) for i in range(5)])
    torch.testing.assert_close(wanda_scores(W, X), want)
    # batched inputs (batch, seq, in) are all tokens
    torch.testing.assert_close(input_norms(X.reshape(4, 10, 6)), input_norms(X))


@pytest.mark.parametrize("pattern,s", [(None, 0.5), (None, 0.7), ("2:4", 0.5), (("c4n", 3), None)])
def test_wanda_equals_magnitude_when_input_norms_are_equal(pattern, s):
    W = _rand(32, 64, seed=4, dtype=torch.float64)
    X = _rand(200, 64, seed=5, dtype=torch.float64)
    X = 3.0 * X / X.norm(dim=0)  # every input feature has norm 3
    assert torch.equal(wanda_mask(W, X, s, pattern), magnitude_mask(W, s, pattern))


def test_wanda_differs_from_magnitude_when_norms_differ_and_follows_them():
    W, X = _rand(32, 64, seed=6), _rand(200, 64, seed=7)
    X[:, :8] *= 100.0  # loud inputs: their weights survive
    mask = wanda_mask(W, X, 0.5)
    assert not torch.equal(mask, magnitude_mask(W, 0.5))
    assert mask[:, :8].float().mean() > 0.95


def test_wanda_invariances():
    """The mask ignores the token order, a positive scale of X and the sign of its columns."""
    W, X = _rand(16, 32, seed=8), _rand(100, 32, seed=9)
    mask = wanda_mask(W, X, 0.6)
    perm = torch.randperm(100, generator=torch.Generator().manual_seed(0))
    signs = torch.where(_rand(32, seed=10) > 0, 1.0, -1.0)
    assert torch.equal(wanda_mask(W, X[perm], 0.6), mask)
    assert torch.equal(wanda_mask(W, 4.0 * X, 0.6), mask)  # 4 = 2^2: exact in floating point
    assert torch.equal(wanda_mask(W, X * signs, 0.6), mask)
    assert torch.equal(wanda_mask(-W, X, 0.6), mask)


@pytest.mark.parametrize("device", DEVICES)
def test_masks_live_on_the_weights_device(device):
    W, X = _rand(8, 16, device=device), _rand(30, 16, device=device)
    for mask in [magnitude_mask(W, 0.5), wanda_mask(W, X, None, "2:4"), c4n_mask(W, 1)]:
        assert mask.device == W.device and mask.dtype == torch.bool
    assert float(sparsity_of(W * magnitude_mask(W, 0.5))) == 0.5


def test_meta_tensors_give_shapes():
    W = torch.empty(64, 128, device="meta")
    for mask in [magnitude_mask(W, 0.5), magnitude_mask(W, None, ("c4n", 1)), unstructured_mask(W, 0.3)]:
        assert mask.device.type == "meta" and mask.shape == W.shape and mask.dtype == torch.bool


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_low_and_high_precision_weights(dtype):
    W = _rand(8, 16, seed=11).to(dtype)
    want = magnitude_mask(W.float(), 0.5, "2:4")
    assert torch.equal(magnitude_mask(W, 0.5, "2:4"), want)
