"""Attention-aware pruning: the attention matrix from its definition, the closed-form gradient against
autograd (float64), GD converging to the closed-form minimiser of the (quadratic) logit objective,
curvature estimates on known Hessians, the exhaustive binary-mask optimum on tiny cases, and the
factored multi-head form against the merged one and against torch's attention."""

import math

import pytest
import torch

from iclr25.compress import mask_from_scores
from iclr25.compress.attention import (attention_loss, attention_loss_grad, attention_matrix,
                                       binarize_mask, causal_mask, curvature, exhaustive_best_mask,
                                       factored_attention_probs, factored_logits, factored_objective,
                                       gd_prune_factored, gd_prune_merged, logit_loss_grad,
                                       mask_adam, mask_gradient_descent, mean_curvature,
                                       merged_objective, pruned_weight, relative_attention_error,
                                       row_masks, update_kept_factored, update_kept_merged)

pytestmark = pytest.mark.usefixtures("float64_default", "one_thread")
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture
def one_thread():
    """Tiny matrices: a second OpenMP thread only adds synchronisation (10-20x slower when busy)."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def problem(seed, B=3, N=7, d=5, beta=2.0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(B, N, d, generator=g)
    W = beta * torch.randn(d, d, generator=g) / d
    M = torch.rand(d, d, generator=g)
    return X.to(device), W.to(device), M.to(device)


@pytest.mark.parametrize("causal", [False, True])
def test_attention_matrix_is_the_normalised_masked_exponential(causal):
    X, W, _ = problem(0)
    A = attention_matrix(X, W, causal)
    E = torch.exp(X @ W @ X.transpose(-1, -2))
    if causal:
        E = E * causal_mask(X.shape[1])
    torch.testing.assert_close(A, E / E.sum(-1, keepdim=True))
    torch.testing.assert_close(A.sum(-1), torch.ones(A.shape[:-1]))
    if causal:
        assert bool((A.triu(1) == 0).all())


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize("lam", [0.0, 0.3])
def test_closed_form_gradient_equals_autograd(causal, batched, lam):
    X, W, M = problem(1)
    X = X if batched else X[0]
    M = M.requires_grad_(True)
    auto = torch.autograd.grad(attention_loss(M, X, W, lam, causal), M)[0]
    loss, grad = attention_loss_grad(M.detach(), X, W, lam, causal)
    assert float((grad - auto).abs().max()) < 1e-12
    torch.testing.assert_close(loss, attention_loss(M.detach(), X, W, lam, causal))


@pytest.mark.parametrize("causal", [False, True])
def test_logit_gradient_equals_autograd(causal):
    X, W, M = problem(2)
    M = M.requires_grad_(True)
    E = X @ (M * W) @ X.transpose(-1, -2) - X @ W @ X.transpose(-1, -2)
    if causal:
        E = E * causal_mask(X.shape[1])
    auto = torch.autograd.grad(0.5 * E.pow(2).sum() + 0.5 * 0.2 * M.pow(2).sum(), M)[0]
    _, grad = logit_loss_grad(M.detach(), X, W, 0.2, causal)
    assert float((grad - auto).abs().max()) < 1e-10


@pytest.mark.parametrize("kind", ["softmax", "logits"])
def test_all_ones_mask_is_a_zero_loss_fixed_point_without_penalty(kind):
    X, W, _ = problem(3)
    loss, grad = merged_objective(X, W, 0.0, True, kind)(torch.ones_like(W))
    assert float(loss) < 1e-28 and float(grad.abs().max()) < 1e-14
    M, hist = mask_gradient_descent(merged_objective(X, W, 0.0, True, kind), torch.ones_like(W), 0.1, 20)
    assert torch.equal(M, torch.ones_like(W))


def _logit_jacobian(X, W, causal):
    """J (B N N, d d): d vec(C o X (M o W) X^T) / d vec(M)."""
    B, N, d = X.shape
    J = torch.einsum("bia,bjc->bijac", X, X) * W  # d S_ij / d M_ac = x_ia x_jc W_ac
    if causal:
        J = J * causal_mask(N)[None, :, :, None, None]
    return J.reshape(B * N * N, d * d)


@pytest.mark.parametrize("causal", [False, True])
def test_gd_converges_to_the_closed_form_minimiser_of_the_logit_objective(causal):
    X, W, _ = problem(4, d=4)
    J = _logit_jacobian(X, W, causal)
    A = J.T @ J  # L(m) = 1/2 (m - 1)^T A (m - 1) + lam/2 |m|^2
    lam = 0.05 * float(torch.linalg.eigvalsh(A)[-1])  # condition number <= 21
    m_star = torch.linalg.solve(A + lam * torch.eye(16), A @ torch.ones(16))
    f = merged_objective(X, W, lam, causal, "logits")
    L = curvature(f, torch.ones_like(W), iters=50)
    assert abs(L - float(torch.linalg.eigvalsh(A)[-1] + lam)) < 1e-6 * L
    M, hist = mask_gradient_descent(f, torch.ones_like(W), 1.0 / L, 600, lo=None, hi=None)
    torch.testing.assert_close(M.reshape(-1), m_star, atol=1e-6, rtol=0)
    assert all(b <= a + 1e-12 for a, b in zip(hist, hist[1:]))  # monotone for eta = 1/L


def test_projected_gd_on_the_softmax_loss_is_monotone_and_reaches_a_stationary_point():
    X, W, _ = problem(5, d=4, beta=3.0)
    f = merged_objective(X, W, 0.05, True, "softmax")
    L = curvature(f, torch.ones_like(W))
    M, hist = mask_gradient_descent(f, torch.ones_like(W), 1.0 / L, 4000)
    assert all(b <= a + 1e-12 for a, b in zip(hist, hist[1:]))
    assert hist[-1] < hist[0]
    assert float(M.min()) >= 0 and float(M.max()) <= 1
    _, grad = f(M)
    # projected-gradient optimality: interior entries have zero gradient, bound entries point outwards
    inner = (M > 1e-9) & (M < 1 - 1e-9)
    assert float(grad[inner].abs().max()) < 1e-5
    assert bool((grad[M <= 1e-9] >= -1e-8).all()) and bool((grad[M >= 1 - 1e-9] <= 1e-8).all())


def test_curvature_and_mean_curvature_on_a_known_quadratic():
    g = torch.Generator().manual_seed(6)
    Q = torch.linalg.qr(torch.randn(12, 12, generator=g))[0]
    eig = torch.linspace(0.1, 7.0, 12)
    A = Q @ torch.diag(eig) @ Q.T
    f = lambda m: (0.5 * m.reshape(-1) @ A @ m.reshape(-1), (A @ m.reshape(-1)).reshape(3, 4))
    M = torch.ones(3, 4)
    assert abs(curvature(f, M, iters=200) - 7.0) < 1e-3
    D = torch.diag(eig)  # Rademacher Hutchinson is exact for a diagonal Hessian
    fd = lambda m: (0.5 * m.reshape(-1) @ D @ m.reshape(-1), (D @ m.reshape(-1)).reshape(3, 4))
    assert abs(mean_curvature(fd, M, probes=1) - float(eig.mean())) < 1e-10
    assert abs(mean_curvature(f, M, probes=400) - float(eig.mean())) < 0.15 * float(eig.mean())


def test_tuple_masks_give_the_same_estimates_as_one_flat_mask():
    g = torch.Generator().manual_seed(7)
    D = torch.rand(10, generator=g) + 0.5
    flat = lambda m: (0.5 * (D * m.reshape(-1) ** 2).sum(), (D * m.reshape(-1)).reshape(m.shape))

    def split(ms):
        a, b = ms
        m = torch.cat([a.reshape(-1), b.reshape(-1)])
        gr = D * m
        return 0.5 * (D * m**2).sum(), (gr[:4].reshape(2, 2), gr[4:].reshape(2, 3))

    ones = (torch.ones(2, 2), torch.ones(2, 3))
    assert abs(mean_curvature(split, ones, probes=1) - float(D.mean())) < 1e-10
    assert abs(curvature(split, ones, iters=300) - float(D.max())) < 1e-3 * float(D.max())
    Ms, _ = mask_gradient_descent(split, ones, 0.5, 3)
    Mf, _ = mask_gradient_descent(flat, torch.ones(10), 0.5, 3)
    torch.testing.assert_close(torch.cat([m.reshape(-1) for m in Ms]), Mf)


@pytest.mark.parametrize("opt", ["gd", "adam"])
def test_projection_and_support_are_respected(opt):
    X, W, _ = problem(8)
    f = merged_objective(X, W, 1.0, False, "softmax")
    keep = torch.rand(W.shape, generator=torch.Generator().manual_seed(0)) > 0.5
    run = (lambda **kw: mask_gradient_descent(f, torch.ones_like(W), 2.0, 30, **kw)) if opt == "gd" \
        else (lambda **kw: mask_adam(f, torch.ones_like(W), 0.1, 30, **kw))
    M, hist = run()
    assert 0 <= float(M.min()) and float(M.max()) <= 1 and len(hist) == 31
    M, _ = run(lo=None, hi=None, support=keep)
    assert bool((M[~keep] == 0).all())


def test_adam_decreases_the_softmax_loss():
    X, W, _ = problem(9, beta=3.0)
    f = merged_objective(X, W, 0.0, False, "softmax")
    keep = binarize_mask(torch.ones_like(W), W, 0.4)
    M, hist = mask_adam(f, keep.double(), 0.02, 200, lo=None, hi=None, support=keep)
    assert hist[-1] < 0.5 * hist[0]


def test_binarize_keeps_the_largest_scores_of_each_row():
    X, W, M = problem(10, d=8)
    for score, s in [("mw", 0.5), ("m", 0.75)]:
        keep = binarize_mask(M, W, s, score)
        assert ((~keep).sum(1) == math.floor(s * 8)).all()
        ref = (M * W).abs() if score == "mw" else M
        assert torch.equal(keep, mask_from_scores(ref, s))
    torch.testing.assert_close(pruned_weight(W, keep, M), W * M * keep)
    with pytest.raises(ValueError):
        binarize_mask(M, W, 0.5, "nope")


def test_binarize_breaks_ties_at_zero_by_the_weight_not_the_column():
    # row 0: five entries clamped to exactly 0 but only two are pruned -> the three zeros with the
    # largest absolute value of W are kept; column order must not matter (the largest sits first)
    W = torch.tensor([[5.0, -1.0, 0.5, 4.0, -3.0, 2.0, 0.1, 1.0],
                      [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]], dtype=torch.float64)
    M = torch.tensor([[0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0],
                      [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]], dtype=torch.float64)
    keep = binarize_mask(M, W, 0.25)
    assert keep[0].tolist() == [True, False, False, True, True, True, True, True]
    assert keep[1].tolist() == [False, False, True, True, True, True, True, True]
    # with score "m" the same tie-break applies among the equal ones of row 1
    assert binarize_mask(M, W, 0.25, "m")[1].tolist() == [False, False, True, True, True, True, True, True]
    flip = torch.flip(torch.arange(8), [0])
    assert torch.equal(binarize_mask(M[:, flip], W[:, flip], 0.25), keep[:, flip])


def test_row_masks_enumerate_every_pattern_once():
    R = row_masks(5, 2)
    assert R.shape == (10, 5) and (R.sum(1) == 2).all()
    assert len({tuple(r.tolist()) for r in R}) == 10


@pytest.mark.parametrize("causal", [False, True])
def test_exhaustive_optimum_is_the_minimum_and_recovers_an_exactly_sparse_w(causal):
    X, W, _ = problem(11, d=4, beta=3.0)
    best, errs = exhaustive_best_mask(X, W, 0.5, causal)
    assert errs.shape == (6**4,) and ((~best).sum(1) == 2).all()
    A = attention_matrix(X, W * best, causal)
    assert abs(float(0.5 * (A - attention_matrix(X, W, causal)).pow(2).sum()) - float(errs.min())) < 1e-12
    # a W that already has 2 zeros per row: the optimum is its support, with zero error
    support = torch.tensor([[1, 1, 0, 0], [0, 1, 0, 1], [1, 0, 1, 0], [0, 0, 1, 1]], dtype=torch.bool)
    Ws = W * support
    best, errs = exhaustive_best_mask(X, Ws, 0.5, causal)
    assert float(errs.min()) < 1e-25 and torch.equal(best, support)
    out, _ = gd_prune_merged(X, Ws, [0.5], c=0.3, causal=causal, steps=50, refit_steps=5)
    assert torch.equal(out[0.5]["keep"], support)


@pytest.mark.parametrize("device", DEVICES)
def test_factored_one_head_equals_the_merged_form(device):
    g = torch.Generator().manual_seed(12)
    X = torch.randn(2, 6, 5, generator=g).to(device)
    Wq, Wk = torch.randn(4, 5, generator=g).to(device), torch.randn(4, 5, generator=g).to(device)
    P = factored_attention_probs(X, Wq, Wk, 1, causal=True)
    torch.testing.assert_close(P[:, 0], attention_matrix(X, Wq.T @ Wk / 2.0, causal=True))
    S = factored_logits(X, Wq, Wk, 1)
    torch.testing.assert_close(S[:, 0], X @ (Wq.T @ Wk / 2.0) @ X.transpose(-1, -2))
    assert P.device.type == torch.device(device).type


def test_factored_matches_torch_attention_with_biases_grouped_keys_and_padding():
    g = torch.Generator().manual_seed(13)
    B, N, d, H, Hkv, dh = 2, 5, 8, 4, 2, 3
    X = torch.randn(B, N, d, generator=g)
    Wq, Wk = torch.randn(H * dh, d, generator=g), torch.randn(Hkv * dh, d, generator=g)
    bq, bk = torch.randn(H * dh, generator=g), torch.randn(Hkv * dh, generator=g)
    pad = torch.tensor([[True] * 5, [True, True, True, False, False]])
    P = factored_attention_probs(X, Wq, Wk, H, bq, bk, n_kv_heads=Hkv, key_padding=pad)
    # the same with the key heads written out H / Hkv times
    Wk_full = Wk.view(Hkv, dh, d).repeat_interleave(H // Hkv, 0).reshape(H * dh, d)
    bk_full = bk.view(Hkv, dh).repeat_interleave(H // Hkv, 0).reshape(-1)
    q = (X @ Wq.T + bq).view(B, N, H, dh).transpose(1, 2)
    k = (X @ Wk_full.T + bk_full).view(B, N, H, dh).transpose(1, 2)
    S = q @ k.transpose(-1, -2) / math.sqrt(dh) + torch.where(pad, 0.0, -math.inf)[:, None, None, :]
    torch.testing.assert_close(P, torch.softmax(S, -1))
    assert bool((P[1, :, :, 3:] == 0).all())


def test_factored_objective_gradient_matches_finite_differences_and_rope_is_applied():
    g = torch.Generator().manual_seed(14)
    X = torch.randn(2, 5, 6, generator=g)
    Wq, Wk = torch.randn(4, 6, generator=g), torch.randn(4, 6, generator=g)
    rot = lambda q, k: (q.flip(-1), k * 2.0)  # any map of (q, k): it must be used
    f = factored_objective(X, Wq, Wk, 2, lam=0.1, causal=True, rope=rot)
    M = (torch.rand(4, 6, generator=g), torch.rand(4, 6, generator=g))
    loss, (gq, gk) = f(M)
    E = torch.zeros(4, 6)
    E[1, 2] = 1e-6
    fd = (f((M[0] + E, M[1]))[0] - f((M[0] - E, M[1]))[0]) / 2e-6
    assert abs(float(fd) - float(gq[1, 2])) < 1e-6
    P = factored_attention_probs(X, M[0] * Wq, M[1] * Wk, 2, causal=True, rope=rot)
    P0 = factored_attention_probs(X, Wq, Wk, 2, causal=True, rope=rot)
    expect = 0.5 * (P - P0).pow(2).sum() + 0.05 * (M[0].pow(2).sum() + M[1].pow(2).sum())
    torch.testing.assert_close(loss, expect)


@pytest.mark.parametrize("device", DEVICES)
def test_gd_pipelines_keep_counts_and_the_update_lowers_the_calibration_error(device):
    X, W, _ = problem(15, B=4, N=10, d=8, beta=3.0, device=device)
    out, info = gd_prune_merged(X, W, [0.5, 0.75], c=0.3, causal=True, steps=100, refit_steps=100)
    for s, r in out.items():
        assert ((r["mask"] == 0).sum(1) >= math.floor(s * 8)).all()
        assert torch.equal(r["update"] != 0, r["keep"] & (W != 0))
        A = attention_matrix(X, W, True)
        err = lambda Wp: relative_attention_error(attention_matrix(X, Wp, True), A)
        assert err(r["update"]) < err(r["mask"])
        torch.testing.assert_close(r["scaled"], W * info["M"] * r["keep"])
    assert info["M"].device.type == torch.device(device).type
    keep = torch.rand(W.shape, generator=torch.Generator().manual_seed(3)).to(device) > 0.5
    W_upd, hist = update_kept_merged(X, W, keep, "softmax", True, 50)
    assert bool((W_upd[~keep] == 0).all()) and hist[-1] < hist[0]
    assert all(b <= a + 1e-12 for a, b in zip(hist, hist[1:]))
    g = torch.Generator().manual_seed(16)
    Xf = torch.randn(2, 6, 8, generator=g).to(device)
    Wq, Wk = torch.randn(8, 8, generator=g).to(device), torch.randn(8, 8, generator=g).to(device)
    outf, infof = gd_prune_factored(Xf, Wq, Wk, 2, [0.5], c=0.3, steps=20, refit_steps=20)
    kq, kk = outf[0.5]["keep"]
    (Mq, Mk), (sq, sk) = infof["M"], outf[0.5]["scaled"]
    torch.testing.assert_close(sq, Wq * Mq * kq)
    torch.testing.assert_close(sk, Wk * Mk * kk)
    assert ((~kq).sum(1) == 4).all() and ((~kk).sum(1) == 4).all()
    P = lambda q, k: factored_attention_probs(Xf, q, k, 2)
    P0 = P(Wq, Wk)
    assert (relative_attention_error(P(*outf[0.5]["update"]), P0)
            < relative_attention_error(P(*outf[0.5]["mask"]), P0))


@pytest.mark.parametrize("device", DEVICES)
def test_adam_snapshots_equal_shorter_runs_and_the_factored_update_keeps_its_support(device):
    """A snapshot after t steps of one run is the result of a run of t steps (the early-stopping grid
    relies on it); update_kept_factored lowers its loss and leaves pruned weights at zero."""
    g = torch.Generator().manual_seed(21)
    X = torch.randn(3, 6, 8, generator=g).to(device)
    Wq, Wk = torch.randn(8, 8, generator=g).to(device), torch.randn(8, 8, generator=g).to(device)
    ones = (torch.ones_like(Wq), torch.ones_like(Wk))
    obj = factored_objective(X, Wq, Wk, 2, 0.05)
    snaps = {}
    final, _ = mask_adam(obj, ones, 0.05, 12, callback=lambda t, M: snaps.__setitem__(t, [m.clone() for m in M]))
    assert sorted(snaps) == list(range(1, 13))
    for t in (1, 5, 12):
        short, _ = mask_adam(obj, ones, 0.05, t)
        for a, b in zip(short, snaps[t]):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
    keep = tuple(torch.rand(8, 8, generator=g).to(device) > 0.5 for _ in range(2))
    att0 = factored_objective(X, Wq, Wk, 2, 0.0)
    seen = []
    (q, k), hist = update_kept_factored(att0, Wq, Wk, keep, 20, 0.02, callback=lambda t, W: seen.append(W))
    assert hist[-1] < hist[0] and len(seen) == 20
    assert bool((q[~keep[0]] == 0).all()) and bool((k[~keep[1]] == 0).all())
    torch.testing.assert_close(seen[-1][0], q)
