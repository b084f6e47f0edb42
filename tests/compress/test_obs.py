"""SparseGPT, GPTQ and optimal compensation against their definitions: an explicit OBS sweep with
the inverse Hessian of the remaining columns recomputed at every step, least-squares oracles on the
calibration inputs, the classical OBS formula, identities (H diagonal -> magnitude / Wanda / RTN,
scale invariance), and the reconstruction-error ordering on random correlated problems."""

import itertools
import math

import numpy as np
import pytest
import torch

from iclr25.compress import (compensate, gptq_quantize, input_hessian, magnitude_mask, obs_saliency,
                             output_error, quantize_codes, rtn_grid, rtn_quantize,
                             sparsegpt_prune, wanda_mask)

pytestmark = pytest.mark.usefixtures("float64_default")
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def problem(seed, rows=16, d=32, n=200, correlated=True):
    """Random layer ``W (rows, d)`` and inputs ``X (n, d)``: mixed features of different scales."""
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g)
    if correlated:
        X = X @ (torch.randn(d, d, generator=g) / math.sqrt(d)) + 0.05 * torch.randn(n, d, generator=g)
        X = X * torch.exp(torch.randn(d, generator=g))
    return torch.randn(rows, d, generator=g), X


def damped(H, percdamp):
    return H + percdamp * H.diagonal().mean() * torch.eye(H.shape[0])


# --------------------------------------------------------------------------- explicit references
def sparsegpt_reference(W, H, sparsity=None, nm=None, blocksize=128, percdamp=0.01):
    """SparseGPT written from the OBS formula: column by column, prune, and re-fit the *later* columns
    with the explicit inverse of the damped Hessian restricted to them (no Cholesky trick, no lazy
    blocks). Mask: per row, lowest w^2 / [H_F^-1]_jj at the start of each block (or N:M group)."""
    W, (rows, d) = W.clone(), W.shape
    Hd = damped(H, percdamp)
    hinv = [torch.linalg.inv(Hd[j:, j:]) for j in range(d)]  # H_F^-1 for F = {j, ..., d-1}
    keep = torch.ones(rows, d, dtype=torch.bool)
    for j in range(d):
        group = None
        if nm is None and j % blocksize == 0:
            i2 = min(j + blocksize, d)
            group, k = range(j, i2), math.floor(sparsity * i2 + 1e-9) - math.floor(sparsity * j + 1e-9)
        elif nm is not None and j % nm[1] == 0:
            group, k = range(j, j + nm[1]), nm[0]
        if group is not None:
            sal = torch.stack([W[:, c] ** 2 / hinv[c][0, 0] for c in group], 1)
            for r in range(rows):
                keep[r, [group[i] for i in torch.argsort(sal[r], stable=True)[:k]]] = False
        for r in range(rows):
            if not keep[r, j]:  # OBS: delta_F = -w_j / [H_F^-1]_jj  H_F^-1[j, F]
                W[r, j:] -= W[r, j] / hinv[j][0, 0] * hinv[j][0]
    return W * keep, keep


def gptq_reference(W, H, bits, group_size=None, symmetric=False, percdamp=0.01):
    """GPTQ from the OBS formula: round column j, push (w_j - q_j) onto the later columns."""
    W, (rows, d) = W.clone(), W.shape
    Hd = damped(H, percdamp)
    g = d if group_size is None else group_size
    grid = rtn_grid(W, bits, None, symmetric)
    for j in range(d):
        if j % g == 0 and group_size is not None:
            grid = rtn_grid(W[:, j:j + g], bits, None, symmetric)
        s, z = grid.scale[:, 0], grid.zero[:, 0]
        q = (torch.clamp(torch.round(W[:, j] / s) + z, grid.qmin, grid.qmax) - z) * s
        hinv = torch.linalg.inv(Hd[j:, j:])
        W[:, j:] -= ((W[:, j] - q) / hinv[0, 0]).unsqueeze(1) * hinv[0].unsqueeze(0)
        W[:, j] = q
    return W


def lstsq_on_support(W, X, mask, group_size=None):
    """Best weights on a fixed support by NumPy least squares on the inputs themselves."""
    Wn, Xn, m = W.numpy(), X.numpy(), mask.numpy()
    d = Wn.shape[1]
    g = d if group_size is None else group_size
    out = np.zeros_like(Wn)
    for r in range(Wn.shape[0]):
        for g0 in range(0, d, g):
            cols = np.arange(g0, g0 + g)
            kept = cols[m[r, cols]]
            if len(kept):
                target = Xn[:, cols] @ Wn[r, cols]
                out[r, kept] = np.linalg.lstsq(Xn[:, kept], target, rcond=None)[0]
    return torch.from_numpy(out)


# --------------------------------------------------------------------------- SparseGPT
@pytest.mark.parametrize("sparsity,pattern,nm,blocksize", [
    (0.5, None, None, 8), (0.3, None, None, 5), (0.7, None, None, 32),
    (None, ("c4n", 1), (1, 4), 8), (None, ("c4n", 3), (3, 4), 4), (0.5, "2:4", (2, 4), 12)])
def test_sparsegpt_equals_explicit_obs_sweep(sparsity, pattern, nm, blocksize):
    W, X = problem(0, rows=5, d=12, n=50)
    H = input_hessian(X)
    got, mask = sparsegpt_prune(W, H, sparsity, pattern, blocksize=blocksize)
    want, want_mask = sparsegpt_reference(W, H, sparsity, nm, blocksize)
    assert torch.equal(mask, want_mask)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-10)


@pytest.mark.parametrize("sparsity,pattern", [(0.5, None), (0.7, None), (0.5, "2:4"), (None, ("c4n", 1)),
                                              (None, ("c4n", 3))])
def test_sparsegpt_exact_sparsity_per_row_and_group(sparsity, pattern):
    W, X = problem(1, rows=16, d=48)
    W_new, mask = sparsegpt_prune(W, input_hessian(X), sparsity, pattern, blocksize=16)
    assert torch.equal(W_new == 0, ~mask)
    if pattern is None:
        assert ((~mask).sum(1) == math.floor(sparsity * 48)).all()
    else:
        n = 2 if pattern == "2:4" else pattern[1]
        assert ((~mask).reshape(16, 12, 4).sum(-1) == n).all()


def test_single_removal_is_the_classical_obs_formula():
    """Pruning w_0 alone: delta = -(w_0 / [H^-1]_00) H^-1[:, 0] (Hassibi & Stork), all rows."""
    W, X = problem(2, rows=4, d=6, n=40)
    H = input_hessian(X)
    mask = torch.ones_like(W, dtype=torch.bool)
    mask[:, 0] = False
    got, _ = sparsegpt_prune(W, H, None, mask=mask, percdamp=0.0)
    Hinv = torch.linalg.inv(H)
    want = W - (W[:, :1] / Hinv[0, 0]) * Hinv[:, 0]
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
    assert bool((got[:, 0] == 0).all())
    # pruning w_q later in the row re-fits only the columns after q: OBS on {q, ..., d-1}
    q = 3
    mask = torch.ones_like(mask)
    mask[:, q] = False
    got, _ = sparsegpt_prune(W, H, None, mask=mask, percdamp=0.0)
    HinvF = torch.linalg.inv(H[q:, q:])
    want = W.clone()
    want[:, q:] -= (W[:, q:q + 1] / HinvF[0, 0]) * HinvF[0]
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("blocksize", [3, 128])
def test_prefix_mask_gives_the_least_squares_solution(blocksize):
    """When every pruned weight of a row precedes its kept ones, the sequential OBS updates are exact:
    SparseGPT returns argmin ||X w - X w_hat|| over the kept support (NumPy lstsq on X)."""
    W, X = problem(3, rows=6, d=10, n=80)
    cut = torch.tensor([0, 2, 3, 5, 7, 10])  # row r prunes columns < cut[r]
    mask = torch.arange(10).unsqueeze(0) >= cut.unsqueeze(1)
    got, _ = sparsegpt_prune(W, input_hessian(X), None, mask=mask, blocksize=blocksize, percdamp=0.0)
    torch.testing.assert_close(got, lstsq_on_support(W, X, mask), rtol=0, atol=1e-9)


def test_identity_hessian_is_magnitude_pruning():
    W, _ = problem(4, rows=8, d=64)
    for sparsity, pattern in [(0.5, None), (0.75, None), (0.5, "2:4"), (None, ("c4n", 3))]:
        got, mask = sparsegpt_prune(W, 3.0 * torch.eye(64), sparsity, pattern)
        assert torch.equal(mask, magnitude_mask(W, sparsity, pattern))
        assert torch.equal(got, W * mask)  # no correlations: nothing to compensate


def test_diagonal_hessian_without_damping_is_wanda():
    W, _ = problem(5, rows=8, d=32)
    c = torch.exp(torch.randn(32, generator=torch.Generator().manual_seed(0)))
    X = torch.diag(c)  # X^T X = diag(c^2) exactly, ||X_:,j|| = c_j exactly
    for sparsity, pattern in [(0.5, None), (0.5, "2:4"), (None, ("c4n", 1))]:
        got, mask = sparsegpt_prune(W, input_hessian(X), sparsity, pattern, percdamp=0.0)
        assert torch.equal(mask, wanda_mask(W, X, sparsity, pattern))
        assert torch.equal(got, W * mask)


def test_invariant_to_the_scale_of_h():
    """H = X^T X and the paper's 2 X^T X / n give the same pruned weights."""
    W, X = problem(6)
    H = input_hessian(X)
    a, ma = sparsegpt_prune(W, H, 0.6)
    b, mb = sparsegpt_prune(W, 2.0 * H / X.shape[0], 0.6)
    assert torch.equal(ma, mb)
    torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


SEEDS = range(8)
ORDERING_CASES = [(0.5, None), (0.5, "2:4"), (None, ("c4n", 1)), (None, ("c4n", 3))]


@pytest.mark.parametrize("sparsity,pattern", ORDERING_CASES)
@pytest.mark.parametrize("correlated", [True, False])
def test_sparsegpt_reconstructs_better_than_magnitude_and_wanda(sparsity, pattern, correlated):
    """||W X^T - W_hat X^T||^2 on random layers (8 seeds): SparseGPT below Wanda and magnitude,
    and above the optimum on its own support (compensate, a lower bound by construction).
    Not a theorem: the greedy left-to-right sweep can lose at extreme sparsity (90 %)."""
    for seed in SEEDS:
        W, X = problem(seed, correlated=correlated)
        H = input_hessian(X)
        W_sgpt, mask = sparsegpt_prune(W, H, sparsity, pattern)
        e_sgpt = output_error(W, W_sgpt, H)
        e_mag = output_error(W, W * magnitude_mask(W, sparsity, pattern), H)
        e_wanda = output_error(W, W * wanda_mask(W, X, sparsity, pattern), H)
        assert e_sgpt < e_wanda and e_sgpt < e_mag, (seed, float(e_sgpt), float(e_wanda), float(e_mag))
        Hd = damped(H, 0.01)  # compensate's optimality is for the damped objective SparseGPT uses
        assert output_error(W, compensate(W, H, mask), Hd) <= output_error(W, W_sgpt, Hd) * (1 + 1e-12)


def test_exhaustive_tiny_case():
    """d = 4, 2:4: over all 6 masks of a row, the best (mask, least-squares weights) is a lower bound
    for SparseGPT, and SparseGPT's own support with compensation reaches at most its error."""
    for seed in range(5):
        W, X = problem(seed, rows=3, d=4, n=30)
        H = input_hessian(X)
        W_sgpt, mask = sparsegpt_prune(W, H, 0.5, "2:4", percdamp=0.0)
        for r in range(3):
            best = min(float(output_error(W[r:r + 1], lstsq_on_support(W[r:r + 1], X, m), H))
                       for kept in itertools.combinations(range(4), 2)
                       for m in [torch.isin(torch.arange(4), torch.tensor(kept)).unsqueeze(0)])
            e = float(output_error(W[r:r + 1], W_sgpt[r:r + 1], H))
            assert best <= e * (1 + 1e-12)


def test_dead_inputs_are_zeroed_and_finite():
    W, X = problem(7, rows=4, d=16)
    X[:, 5] = 0.0  # an input that is never active
    W_new, mask = sparsegpt_prune(W, input_hessian(X), 0.5)
    assert torch.isfinite(W_new).all() and bool((W_new[:, 5] == 0).all())
    assert ((~mask).sum(1) == 8).all()


def test_rank_deficient_hessian_needs_damping():
    W, X = problem(8, rows=4, d=16, n=6)  # 6 tokens, 16 inputs
    with pytest.raises(ValueError, match="percdamp"):
        sparsegpt_prune(W, input_hessian(X), 0.5, percdamp=0.0)
    W_new, _ = sparsegpt_prune(W, input_hessian(X), 0.5)  # 1 % damping makes it positive definite
    assert torch.isfinite(W_new).all()


def test_argument_checks():
    W, X = problem(9, rows=4, d=10)
    H = input_hessian(X)
    with pytest.raises(ValueError):
        sparsegpt_prune(W, H, 0.5, "2:4")  # 10 inputs: not a multiple of 4
    with pytest.raises(ValueError):
        sparsegpt_prune(W, H[:5, :5], 0.5)
    with pytest.raises(ValueError):
        sparsegpt_prune(W, H, 0.5, mask=torch.ones(3, 10, dtype=torch.bool))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_dtype_kept_and_float32_agrees_with_float64(dtype):
    W, X = problem(10)
    H = input_hessian(X)
    want, want_mask = sparsegpt_prune(W, H, 0.5, "2:4")
    got, mask = sparsegpt_prune(W.to(dtype), H.float(), 0.5, "2:4")
    assert got.dtype == dtype and mask.dtype == torch.bool
    if dtype == torch.float32:
        assert (mask != want_mask).float().mean() < 0.02  # near-ties may flip in float32
        rel = output_error(W, got, H) / output_error(W, want, H)
        assert abs(float(rel) - 1) < 1e-3


@pytest.mark.parametrize("device", DEVICES)
def test_device_is_kept(device):
    W, X = problem(11)
    W_dev, H_dev = W.float().to(device), input_hessian(X).to(device)
    W_new, mask = sparsegpt_prune(W_dev, H_dev, 0.5)
    Wq, grid = gptq_quantize(W_dev, H_dev, 4, 8)
    C = compensate(W_dev, H_dev, mask)
    for t in (W_new, mask, Wq, grid.scale, C):
        assert t.device == W_dev.device


# --------------------------------------------------------------------------- compensation
@pytest.mark.parametrize("group_size,ragged", [(None, False), (None, True), (4, False), (8, True)])
def test_compensate_is_least_squares_on_the_support(group_size, ragged):
    W, X = problem(12, rows=6, d=16, n=60)
    mask = wanda_mask(W, X, 0.5, "2:4") if group_size else wanda_mask(W, X, 0.6)
    if ragged:  # rows keep different numbers of weights: one keeps all, one none
        mask = torch.rand(6, 16, generator=torch.Generator().manual_seed(0)) > 0.4
        mask[0], mask[1] = True, False
    got = compensate(W, input_hessian(X), mask, group_size=group_size, percdamp=0.0)
    torch.testing.assert_close(got, lstsq_on_support(W, X, mask, group_size), rtol=0, atol=1e-9)
    assert bool((got[~mask] == 0).all())


def test_obs_saliency_is_the_error_of_removing_one_weight():
    """S_ij = w_ij^2 / [H^-1]_jj equals the error after pruning w_ij alone with the best re-fit."""
    W, X = problem(17, rows=3, d=8, n=40)
    H = input_hessian(X)
    S = obs_saliency(W, H, percdamp=0.0)
    for i, j in [(0, 0), (1, 5), (2, 7)]:
        mask = torch.ones_like(W, dtype=torch.bool)
        mask[i, j] = False
        err = output_error(W, compensate(W, H, mask, percdamp=0.0), H)
        torch.testing.assert_close(S[i, j], err)


def test_compensate_satisfies_its_normal_equations_and_beats_no_update():
    W, X = problem(13)
    H = input_hessian(X)
    mask = magnitude_mask(W, 0.5)
    W_hat = compensate(W, H, mask)
    grad = (W_hat - W) @ damped(H, 0.01)  # gradient of the damped objective, zero on the support
    assert grad[mask].abs().max() < 1e-8 * grad.abs().max().clamp(min=1)
    assert output_error(W, W_hat, H) < output_error(W, W * mask, H)
    # group-wise compensation sits in between (a restriction of the full re-fit)
    W_grp = compensate(W, H, magnitude_mask(W, 0.5, "2:4"), group_size=4)
    assert output_error(W, W_grp, H) < output_error(W, W * magnitude_mask(W, 0.5, "2:4"), H)


# --------------------------------------------------------------------------- GPTQ
@pytest.mark.parametrize("group_size", [None, 4, 8])
@pytest.mark.parametrize("symmetric", [False, True])
def test_gptq_equals_explicit_sweep(group_size, symmetric):
    W, X = problem(14, rows=5, d=16, n=60)
    H = input_hessian(X)
    got, grid = gptq_quantize(W, H, 3, group_size, symmetric, blocksize=8)
    want = gptq_reference(W, H, 3, group_size, symmetric)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-9)
    # the result lies on the returned grid
    codes = quantize_codes(got, grid)
    torch.testing.assert_close(((codes.double().reshape(5, -1, grid.group_size) - grid.zero.unsqueeze(-1))
                                * grid.scale.unsqueeze(-1)).reshape(5, 16), got, rtol=0, atol=1e-12)


@pytest.mark.parametrize("group_size", [None, 8])
def test_gptq_with_identity_hessian_is_rtn(group_size):
    W, _ = problem(15, rows=6, d=32)
    got, _ = gptq_quantize(W, torch.eye(32), 3, group_size)
    assert torch.equal(got, rtn_quantize(W, 3, group_size))


@pytest.mark.parametrize("bits,group_size", [(2, None), (3, 8), (4, 16)])
def test_gptq_reconstructs_better_than_rtn(bits, group_size):
    for seed in SEEDS:
        W, X = problem(seed)
        H = input_hessian(X)
        W_gptq, _ = gptq_quantize(W, H, bits, group_size)
        assert output_error(W, W_gptq, H) < output_error(W, rtn_quantize(W, bits, group_size), H), seed


def test_output_error_is_the_squared_output_difference():
    W, X = problem(16)
    W_hat = W * magnitude_mask(W, 0.5)
    want = ((X @ W.T - X @ W_hat.T) ** 2).sum()
    torch.testing.assert_close(output_error(W, W_hat, input_hessian(X)), want)
