"""Attention-aware pruning: choose a pruning mask by gradient descent on the softmax attention error.

Liang et al. (ICLR 2025, "Beyond linear approximations: a novel pruning approach for attention
matrix") prune the query-key weights of an attention layer so that the *attention matrix* stays
close, instead of the linear output ``X W^T`` that SparseGPT and Wanda reconstruct. With
``X (N, d)`` the inputs of one sequence and ``W (d, d)`` the merged query-key bilinear form, the
attention matrix is

    f(W) = D^-1 (exp(X W X^T) o C),   D = diag((exp(X W X^T) o C) 1),                      (1)

with ``C`` the causal mask (``C_ij = 1`` iff ``j <= i``; all ones for an encoder). A relaxed mask
``M (d, d)`` is found by (projected) gradient descent from ``M_0 = 1`` on

    L(M) = 1/2 sum_b ||f_b(M o W) - f_b(W)||_F^2 + lam/2 ||M||_F^2,                          (2)

whose gradient has the closed form (``A = f(M o W)``, ``E = A - f(W)``, row-softmax Jacobian)

    G = A o (E - rowsum(A o E) 1^T),     grad L = W o sum_b X_b^T G_b X_b + lam M.            (3)

``W`` is the weight of the linear map ``x -> W x`` (the keys seen in query space:
``s_ij = x_i^T (W x_j)``), so its rows are output rows in the ``nn.Linear`` layout of
:mod:`iclr25.compress`, and masks are binarised per row like Wanda's and SparseGPT's.

What is the paper's and what is ours: (1)-(3) and GD from ``M_0 = 1`` are the paper's; the
projection onto ``[0, 1]``, the step size ``1/L`` from a power iteration, the relative ``lam``,
the binarisation (keep the largest ``|M o W|`` of each row) and the "scaled" variant
``W' = M_bin o M o W`` are our reconstruction (the paper's choices were not recoverable). The
*logit* objective (:func:`logit_loss_grad`) is our control: the same problem without the softmax.
The factored form (:func:`factored_attention_probs`, masks on ``W_Q`` and ``W_K`` of a real model,
heads, biases, rotary embeddings, grouped keys) is our adaptation of (2) to stored weights.

Every function is device-agnostic (results on the inputs' device) and works in the inputs' dtype.
"""

from __future__ import annotations

import itertools
import math
from typing import Callable, Sequence

import torch
from torch import Tensor

from iclr25.compress.masks import mask_from_scores, n_pruned

LossGrad = Callable[[Tensor], tuple[Tensor, Tensor]]
"""``M -> (loss, grad)``: a scalar loss and its gradient, shaped like ``M``."""


# --------------------------------------------------------------------------- merged form (1)-(3)
def causal_mask(n: int, device: torch.device | str | None = None) -> Tensor:
    """``C (n, n)`` bool, ``True`` where query ``i`` may attend to key ``j`` (``j <= i``)."""
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()


def attention_logits(X: Tensor, W: Tensor) -> Tensor:
    """``S = X W X^T``: ``X (..., N, d)``, ``W (d, d)`` -> ``(..., N, N)``."""
    return X @ W @ X.transpose(-1, -2)


def masked_softmax(S: Tensor, causal: bool) -> Tensor:
    """Row softmax of ``S (..., N, N)``; with ``causal`` the entries ``j > i`` are exactly 0
    (masked *before* the normalisation, eq. 1)."""
    if causal:
        S = S.masked_fill(~causal_mask(S.shape[-1], S.device), float("-inf"))
    return torch.softmax(S, dim=-1)


def attention_matrix(X: Tensor, W: Tensor, causal: bool = False) -> Tensor:
    """``f(W)`` of eq. (1): ``X (..., N, d)``, ``W (d, d)`` -> row-stochastic ``(..., N, N)``."""
    return masked_softmax(attention_logits(X, W), causal)


def attention_loss(M: Tensor, X: Tensor, W: Tensor, lam: float = 0.0, causal: bool = False,
                   target: Tensor | None = None) -> Tensor:
    """``L(M)`` of eq. (2), summed over the sequences of ``X (B, N, d)`` (or one ``(N, d)``).

    ``target`` is ``f(W)`` (computed when omitted). Differentiable (for the autograd check).
    """
    A_star = attention_matrix(X, W, causal) if target is None else target
    E = attention_matrix(X, M * W, causal) - A_star
    return 0.5 * E.pow(2).sum() + 0.5 * lam * M.pow(2).sum()


def softmax_vjp(A: Tensor, E: Tensor) -> Tensor:
    """Row-softmax Jacobian applied to ``E``: ``G_i = (diag(a_i) - a_i a_i^T) e_i``, i.e.
    ``G = A o (E - rowsum(A o E) 1^T)``. ``A, E (..., N, N)`` -> ``(..., N, N)``. Masked entries
    (``A_ij = 0``) get ``G_ij = 0``."""
    return A * (E - (A * E).sum(-1, keepdim=True))


def attention_loss_grad(M: Tensor, X: Tensor, W: Tensor, lam: float = 0.0, causal: bool = False,
                        target: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """``(L(M), grad L(M))`` of eqs. (2)-(3) in closed form.

    ``M, W (d, d)``, ``X (B, N, d)`` or ``(N, d)``; ``target = f(W)`` (computed when omitted).
    Returns a scalar and a ``(d, d)`` tensor.
    """
    A_star = attention_matrix(X, W, causal) if target is None else target
    A = attention_matrix(X, M * W, causal)
    E = A - A_star
    G = softmax_vjp(A, E)
    XtGX = X.transpose(-1, -2) @ G @ X  # (..., d, d) = dL/d(M o W) per sequence
    if XtGX.ndim > 2:
        XtGX = XtGX.sum(0)
    loss = 0.5 * E.pow(2).sum() + 0.5 * lam * M.pow(2).sum()
    return loss, W * XtGX + lam * M


def logit_loss_grad(M: Tensor, X: Tensor, W: Tensor, lam: float = 0.0, causal: bool = False,
                    target: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """The control without the softmax: ``1/2 sum_b ||C o (X (M o W) X^T - X W X^T)||^2 + lam/2 ||M||^2``
    and its gradient ``W o sum_b X^T (C o E) X + lam M``. Same shapes as :func:`attention_loss_grad`;
    ``target`` is ``X W X^T``. A convex quadratic in ``M``."""
    S_star = attention_logits(X, W) if target is None else target
    E = attention_logits(X, M * W) - S_star
    if causal:
        E = E * causal_mask(E.shape[-1], E.device)
    XtEX = X.transpose(-1, -2) @ E @ X
    if XtEX.ndim > 2:
        XtEX = XtEX.sum(0)
    return 0.5 * E.pow(2).sum() + 0.5 * lam * M.pow(2).sum(), W * XtEX + lam * M


def merged_objective(X: Tensor, W: Tensor, lam: float = 0.0, causal: bool = False,
                     kind: str = "softmax") -> LossGrad:
    """``M -> (loss, grad)`` of the softmax objective (2) or the logit control, with the dense
    target precomputed once. ``kind`` is ``"softmax"`` or ``"logits"``."""
    if kind == "softmax":
        target = attention_matrix(X, W, causal)
        return lambda M: attention_loss_grad(M, X, W, lam, causal, target)
    if kind == "logits":
        target = attention_logits(X, W)
        return lambda M: logit_loss_grad(M, X, W, lam, causal, target)
    raise ValueError(f"unknown objective {kind!r}; use 'softmax' or 'logits'")


# --------------------------------------------------------------------------- gradient descent
def _as_list(M: Tensor | Sequence[Tensor]) -> list[Tensor]:
    return [M] if isinstance(M, Tensor) else list(M)


def _unlist(Ms: list[Tensor], like: Tensor | Sequence[Tensor]):
    return Ms[0] if isinstance(like, Tensor) else tuple(Ms)


def curvature(loss_grad: Callable, M: Tensor | Sequence[Tensor], iters: int = 12,
              rel_eps: float = 1e-2, seed: int = 0) -> float:
    """Largest Hessian eigenvalue of the loss at ``M`` (one tensor or a tuple), by power iteration
    on finite differences of the gradient: ``H v ~ (grad(M + eps v) - grad(M)) / eps``.

    ``eps = rel_eps * sqrt(numel)`` (a per-entry step of about ``rel_eps``). The starting vector is
    a seeded Gaussian (drawn on the CPU, then moved), so the estimate is the same on every device.
    Used to pick the step size ``1/L`` of :func:`mask_gradient_descent`.
    """
    Ms = _as_list(M)
    g = torch.Generator().manual_seed(seed)
    v = [torch.randn(m.shape, generator=g, dtype=torch.float64).to(m) for m in Ms]
    numel = sum(m.numel() for m in Ms)
    eps = rel_eps * math.sqrt(numel)
    g0 = _as_list(loss_grad(_unlist(Ms, M))[1])
    est = 0.0
    for _ in range(iters):
        norm = math.sqrt(sum(float(x.pow(2).sum()) for x in v))
        v = [x / norm for x in v]
        g1 = _as_list(loss_grad(_unlist([m + eps * x for m, x in zip(Ms, v)], M))[1])
        v = [(a - b) / eps for a, b in zip(g1, g0)]
        est = math.sqrt(sum(float(x.pow(2).sum()) for x in v))
    return est


def mean_curvature(loss_grad: Callable, M: Tensor | Sequence[Tensor], probes: int = 4,
                   rel_eps: float = 1e-2, seed: int = 0) -> float:
    """``tr(H) / n``, the mean Hessian eigenvalue of the loss at ``M`` (``n`` mask entries), by
    Hutchinson's estimator ``E[v^T H v]`` with Rademacher ``v`` and finite-difference ``H v``.

    The scale of a typical entry's curvature: we set ``lam = c * mean_curvature`` so that the
    penalty grid means the same on every layer and objective (our choice).
    """
    Ms = _as_list(M)
    g = torch.Generator().manual_seed(seed)
    n = sum(m.numel() for m in Ms)
    eps = rel_eps * math.sqrt(n)
    g0 = _as_list(loss_grad(_unlist(Ms, M))[1])
    total = 0.0
    for _ in range(probes):
        v = [((torch.randint(0, 2, m.shape, generator=g) * 2 - 1) / math.sqrt(n)).to(m) for m in Ms]
        g1 = _as_list(loss_grad(_unlist([m + eps * x for m, x in zip(Ms, v)], M))[1])
        total += sum(float((x * (a - b)).sum()) for x, a, b in zip(v, g1, g0)) / eps
    return total / probes


def _project(Ms: list[Tensor], lo: float | None, hi: float | None,
             support: list[Tensor] | None) -> list[Tensor]:
    if lo is not None or hi is not None:
        Ms = [m.clamp(lo, hi) for m in Ms]
    if support is not None:
        Ms = [m * s for m, s in zip(Ms, support)]
    return Ms


def mask_gradient_descent(loss_grad: Callable, M0: Tensor | Sequence[Tensor], eta: float, steps: int,
                          lo: float | None = 0.0, hi: float | None = 1.0,
                          support: Tensor | Sequence[Tensor] | None = None
                          ) -> tuple[Tensor | tuple[Tensor, ...], list[float]]:
    """Algorithm 1: ``M <- P(M - eta grad L(M))`` for ``steps`` steps from ``M0``.

    ``P`` clips to ``[lo, hi]`` (``None``: no bound) and, with a ``support`` (a keep-mask shaped
    like ``M``), zeroes the entries outside it (GD on the kept entries only: the weight update
    after binarisation). ``M0`` is one tensor or a tuple of tensors (factored masks);
    ``loss_grad(M)`` returns ``(loss, grad)`` with ``grad`` shaped like ``M``. Returns the final
    ``M`` and the losses before each step plus the final one (``steps + 1`` values); a non-finite
    loss (step size too large) stops early and is recorded.
    """
    return _projected_descent(loss_grad, M0, lambda t, grads: [eta * gr for gr in grads], steps, lo, hi, support)


def mask_adam(loss_grad: Callable, M0: Tensor | Sequence[Tensor], lr: float, steps: int,
              lo: float | None = 0.0, hi: float | None = 1.0,
              support: Tensor | Sequence[Tensor] | None = None, betas: tuple[float, float] = (0.9, 0.999),
              eps: float = 1e-12, callback: Callable | None = None) -> tuple[Tensor | tuple[Tensor, ...], list[float]]:
    """:func:`mask_gradient_descent` with Adam's per-entry step instead of a global ``eta``
    (bias-corrected moments, then the same projection). Our substitution for real models, where
    the mask has ~10^5 entries and plain GD at ``eta <= 1/L`` only shrinks ``M`` uniformly within
    our step budget (the Hessian's condition number is far larger than the budget).

    ``callback(t, M)``, if given, sees the iterate after every ``t = 1 .. steps`` steps (snapshots
    of one run: the iterate after ``t`` steps is the result of a run of ``t`` steps)."""
    b1, b2 = betas
    m1: list[Tensor] = []
    m2: list[Tensor] = []

    def adam_steps(t: int, grads: list[Tensor]) -> list[Tensor]:
        if not m1:
            m1.extend(torch.zeros_like(g) for g in grads)
            m2.extend(torch.zeros_like(g) for g in grads)
        out = []
        for i, gr in enumerate(grads):
            m1[i].mul_(b1).add_(gr, alpha=1 - b1)
            m2[i].mul_(b2).addcmul_(gr, gr, value=1 - b2)
            step = (m1[i] / (1 - b1 ** (t + 1))) / ((m2[i] / (1 - b2 ** (t + 1))).sqrt() + eps)
            out.append(lr * step)
        return out

    return _projected_descent(loss_grad, M0, adam_steps, steps, lo, hi, support, callback)


def _projected_descent(loss_grad: Callable, M0: Tensor | Sequence[Tensor],
                       steps_of: Callable[[int, list[Tensor]], list[Tensor]], steps: int,
                       lo: float | None, hi: float | None, support: Tensor | Sequence[Tensor] | None,
                       callback: Callable | None = None) -> tuple[Tensor | tuple[Tensor, ...], list[float]]:
    """The loop both mask optimisers share: ``M <- P(M - steps_of(t, grad L(M)))``, with the
    projection, the loss history and the early stop on a non-finite loss described in
    :func:`mask_gradient_descent`."""
    sup = None if support is None else [s.to(m.dtype) for s, m in zip(_as_list(support), _as_list(M0))]
    Ms = _project([m.detach().clone() for m in _as_list(M0)], None, None, sup)
    history = []
    for t in range(steps + 1):
        loss, grads = loss_grad(_unlist(Ms, M0))
        history.append(float(loss))
        if t == steps or not math.isfinite(history[-1]):
            break
        deltas = steps_of(t, list(_as_list(grads)))
        Ms = _project([m - d for m, d in zip(Ms, deltas)], lo, hi, sup)
        if callback is not None:
            callback(t + 1, _unlist(Ms, M0))
    return _unlist(Ms, M0), history


# --------------------------------------------------------------------------- binarisation
def binarize_mask(M: Tensor, W: Tensor, sparsity: float, score: str = "mw") -> Tensor:
    """Keep-mask ``bool (out, in)`` from a relaxed mask: per row, prune the ``floor(s * in)`` lowest
    scores, ``|M o W|`` (``score="mw"``) or ``M`` (``score="m"``). Our reconstruction.

    Ties (above all the entries the projection has clamped to exactly 0) are broken by the absolute
    value of ``W``: among equal scores the smaller weight is pruned first, never the earlier column."""
    if score == "mw":
        scores = (M * W).abs()
    elif score == "m":
        scores = M
    else:
        raise ValueError(f"unknown score {score!r}; use 'mw' or 'm'")
    return mask_from_scores(_lexicographic_rank(scores.detach(), W.detach().abs()), sparsity)


def _lexicographic_rank(primary: Tensor, secondary: Tensor) -> Tensor:
    """Per-row rank (float, 0 = lowest) of the entries by ``primary``, ties broken by ``secondary``."""
    by_second = torch.sort(secondary, dim=-1, stable=True).indices
    order = by_second.gather(-1, torch.sort(primary.gather(-1, by_second), dim=-1, stable=True).indices)
    rank = torch.empty_like(order)
    rank.scatter_(-1, order, torch.arange(primary.shape[-1], device=primary.device).expand_as(order))
    return rank.to(torch.float64)


def pruned_weight(W: Tensor, keep: Tensor, M: Tensor | None = None) -> Tensor:
    """``keep o W`` (pure mask) or ``keep o M o W`` (the mask keeps its learned scale, when ``M``
    is given). Exact zeros where pruned, ``W``'s dtype."""
    out = W * keep.to(W.dtype)
    return out if M is None else out * M.to(W.dtype)


def row_masks(d_in: int, n_keep: int, device: torch.device | str | None = None) -> Tensor:
    """Every keep-pattern of one row with ``n_keep`` of ``d_in`` entries: ``bool (C(d_in, n_keep), d_in)``."""
    combos = list(itertools.combinations(range(d_in), n_keep))
    out = torch.zeros(len(combos), d_in, dtype=torch.bool, device=device)
    for i, c in enumerate(combos):
        out[i, list(c)] = True
    return out


def exhaustive_best_mask(X: Tensor, W: Tensor, sparsity: float, causal: bool = False,
                         batch: int = 4096) -> tuple[Tensor, Tensor]:
    """The binary keep-mask (same count per row as :func:`binarize_mask`) that minimises the
    attention error ``1/2 sum_b ||f(keep o W) - f(W)||^2``, by enumeration of all
    ``C(d, k)^rows`` masks. ``W (rows, d)`` small (``d = 4``: 1296 masks).

    Returns ``(best keep-mask (rows, d), errors (n_masks,))`` with the errors in enumeration order
    (``itertools.product`` over rows, row 0 slowest).
    """
    rows, d = W.shape
    k = d - n_pruned(d, sparsity)
    options = row_masks(d, k, W.device)
    n = options.shape[0] ** rows
    if n > 10**6:
        raise ValueError(f"{n} masks are too many to enumerate")
    target = attention_matrix(X, W, causal)
    idx = torch.cartesian_prod(*[torch.arange(options.shape[0], device=W.device)] * rows)
    idx = idx.reshape(n, rows)
    errs = []
    for i in range(0, n, batch):
        keep = options[idx[i:i + batch]]  # (b, rows, d)
        A = attention_matrix(X.unsqueeze(0), (keep * W).unsqueeze(1), causal)  # (b, B, N, N)
        errs.append(0.5 * (A - target).pow(2).flatten(1).sum(1))
    errs = torch.cat(errs)
    return options[idx[int(errs.argmin())]], errs


# --------------------------------------------------------------------------- factored form
def factored_attention_probs(X: Tensor, Wq: Tensor, Wk: Tensor, n_heads: int,
                             bq: Tensor | None = None, bk: Tensor | None = None,
                             n_kv_heads: int | None = None, causal: bool = False,
                             rope: Callable[[Tensor, Tensor], tuple[Tensor, Tensor]] | None = None,
                             key_padding: Tensor | None = None) -> Tensor:
    """Attention probabilities of a multi-head layer from its stored weights.

    ``X (B, N, d)`` layer inputs; ``Wq (H dh, d)``, ``Wk (Hkv dh, d)`` in the ``nn.Linear`` layout,
    optional biases; ``n_kv_heads`` for grouped keys (each key head serves ``H / Hkv`` query
    heads); ``rope(q, k)`` maps ``(B, H, N, dh), (B, Hkv, N, dh)`` to rotated ones; ``key_padding``
    ``bool (B, N)`` is ``True`` on real tokens. Logits are scaled by ``1/sqrt(dh)``.
    Returns ``(B, H, N, N)``.
    """
    S = factored_logits(X, Wq, Wk, n_heads, bq, bk, n_kv_heads, rope)
    if key_padding is not None:
        S = S.masked_fill(~key_padding[:, None, None, :], float("-inf"))
    return masked_softmax(S, causal)


def factored_logits(X: Tensor, Wq: Tensor, Wk: Tensor, n_heads: int, bq: Tensor | None = None,
                    bk: Tensor | None = None, n_kv_heads: int | None = None,
                    rope: Callable[[Tensor, Tensor], tuple[Tensor, Tensor]] | None = None) -> Tensor:
    """The pre-softmax logits ``q k^T / sqrt(dh)`` of :func:`factored_attention_probs`, ``(B, H, N, N)``."""
    B, N, _ = X.shape
    H, Hkv = n_heads, n_kv_heads or n_heads
    dh = Wq.shape[0] // H
    q = torch.nn.functional.linear(X, Wq, bq).view(B, N, H, dh).transpose(1, 2)
    k = torch.nn.functional.linear(X, Wk, bk).view(B, N, Hkv, dh).transpose(1, 2)
    if rope is not None:
        q, k = rope(q, k)
    if Hkv != H:
        k = k.repeat_interleave(H // Hkv, dim=1)
    return q @ k.transpose(-1, -2) / math.sqrt(dh)


def factored_objective(X: Tensor, Wq: Tensor, Wk: Tensor, n_heads: int, lam: float = 0.0,
                       kind: str = "softmax", causal: bool = False, **attn) -> LossGrad:
    """``(Mq, Mk) -> (loss, (grad_q, grad_k))`` of our factored version of eq. (2),

        1/2 sum_{b,h} ||P_bh(Mq o Wq, Mk o Wk) - P_bh(Wq, Wk)||_F^2 + lam/2 (||Mq||^2 + ||Mk||^2),

    with ``P`` the probabilities of :func:`factored_attention_probs` (``kind="softmax"``) or the
    causal-masked logits of :func:`factored_logits` (``kind="logits"``, the control). ``attn`` are
    the other keywords of :func:`factored_attention_probs` (biases, heads, rope, padding). Gradients
    by autograd; ``X`` may be a list of batches (their losses add).
    """
    if kind not in ("softmax", "logits"):
        raise ValueError(f"unknown objective {kind!r}; use 'softmax' or 'logits'")
    batches = X if isinstance(X, (list, tuple)) else [X]

    def forward(x: Tensor, wq: Tensor, wk: Tensor) -> Tensor:
        if kind == "softmax":
            return factored_attention_probs(x, wq, wk, n_heads, causal=causal, **attn)
        extra = {k: v for k, v in attn.items() if k != "key_padding"}
        S = factored_logits(x, wq, wk, n_heads, **extra)
        valid = torch.ones(S.shape[-2:], dtype=torch.bool, device=S.device)
        if causal:
            valid = causal_mask(S.shape[-1], S.device)
        if attn.get("key_padding") is not None:
            valid = valid & attn["key_padding"][:, None, None, :]
        return S * valid

    with torch.no_grad():
        targets = [forward(x, Wq, Wk) for x in batches]

    def loss_grad(M: tuple[Tensor, Tensor]) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        Mq, Mk = (m.detach().requires_grad_(True) for m in M)
        with torch.enable_grad():
            loss = 0.5 * lam * (Mq.pow(2).sum() + Mk.pow(2).sum())
            for x, t in zip(batches, targets):
                loss = loss + 0.5 * (forward(x, Mq * Wq, Mk * Wk) - t).pow(2).sum()
            gq, gk = torch.autograd.grad(loss, (Mq, Mk))
        return loss.detach(), (gq, gk)

    return loss_grad


def relative_attention_error(P: Tensor, P_ref: Tensor) -> float:
    """``||P - P_ref||_F / ||P_ref||_F`` over all sequences and heads (a Python float)."""
    return float((P - P_ref).double().norm() / P_ref.double().norm())


# --------------------------------------------------------------------------- the whole pipeline
def update_kept_merged(X: Tensor, W: Tensor, keep: Tensor, kind: str = "softmax", causal: bool = False,
                       steps: int = 300) -> tuple[Tensor, list[float]]:
    """The weight update after binarisation (ours): GD on the objective (``lam = 0``) over a free
    scale of every kept weight, from ``keep o W``, step ``1/L`` at the start, unclipped.

    ``X (B, N, d)``, ``W (d, d)``, ``keep bool (d, d)`` (any mask: the GD mask, or Wanda's for an
    ablation) -> ``(W' (d, d) with zeros outside keep, loss history)``.
    """
    att = merged_objective(X, W, 0.0, causal, kind)
    start = keep.to(W.dtype)
    R, hist = mask_gradient_descent(att, start, 1.0 / curvature(att, start), steps, lo=None, hi=None,
                                    support=keep)
    return W * R, hist


def update_kept_factored(loss_grad: LossGrad, Wq: Tensor, Wk: Tensor, keep: tuple[Tensor, Tensor],
                         steps: int = 40, lr: float = 0.01, callback: Callable | None = None
                         ) -> tuple[tuple[Tensor, Tensor], list[float]]:
    """:func:`update_kept_merged` for factored masks, with Adam: ``loss_grad`` is a
    :func:`factored_objective` with ``lam = 0``; returns ``((Wq', Wk'), loss history)``.
    ``callback(t, (Wq_t, Wk_t))`` sees the updated weights after every step ``t``."""
    kq, kk = keep
    cb = None if callback is None else (lambda t, R: callback(t, (Wq * R[0], Wk * R[1])))
    (Rq, Rk), hist = mask_adam(loss_grad, (kq.to(Wq.dtype), kk.to(Wk.dtype)), lr, steps, lo=None, hi=None,
                               support=(kq, kk), callback=cb)
    return (Wq * Rq, Wk * Rk), hist


def gd_prune_merged(X: Tensor, W: Tensor, sparsities: Sequence[float], c: float, kind: str = "softmax",
                    causal: bool = False, steps: int = 300, refit_steps: int = 300
                    ) -> tuple[dict[float, dict[str, Tensor]], dict]:
    """Attention-aware pruning of a merged ``W (d, d)`` on calibration inputs ``X (B, N, d)``.

    1. (Algorithm 1) projected GD on eq. (2) from ``M = 1`` with ``lam = c * tr(H)/n`` (the mean
       curvature of the attention term at ``M = 1``) and step ``1 / (L + lam)``, ``L`` the
       largest curvature (power iteration);
    2. binarise each sparsity ``s`` per row by ``|M o W|``: the *mask* variant ``keep o W`` and the
       *scaled* variant ``keep o M o W`` (the kept weights keep their learned scale);
    3. (weight update, our reconstruction) GD on the same objective with ``lam = 0`` over the
       kept entries only, from ``keep o W``, unclipped: the *update* variant.

    ``kind="logits"`` runs the same pipeline on the logit control. Returns
    ``({s: {"mask": W', "scaled": W_s, "update": W'', "keep": keep}}, info)`` with ``info`` holding the relaxed
    ``M``, ``lam``, ``eta``, the loss histories and the curvatures.
    """
    ones = torch.ones_like(W)
    att = merged_objective(X, W, 0.0, causal, kind)
    L, mc = curvature(att, ones), mean_curvature(att, ones)
    lam = c * mc
    M, hist = mask_gradient_descent(merged_objective(X, W, lam, causal, kind), ones, 1.0 / (L + lam), steps)
    out, refit_hist = {}, {}
    for s in sparsities:
        keep = binarize_mask(M, W, s)
        W_upd, refit_hist[s] = update_kept_merged(X, W, keep, kind, causal, refit_steps)
        out[s] = {"mask": pruned_weight(W, keep), "scaled": pruned_weight(W, keep, M), "update": W_upd, "keep": keep}
    info = {"M": M, "lam": lam, "eta": 1.0 / (L + lam), "L": L, "mean_curvature": mc,
            "history": hist, "refit_history": refit_hist}
    return out, info


def gd_prune_factored(X: Tensor | Sequence[Tensor], Wq: Tensor, Wk: Tensor, n_heads: int,
                      sparsities: Sequence[float], c: float, kind: str = "softmax", causal: bool = False,
                      steps: int = 40, refit_steps: int = 40, lr: float = 0.02, refit_lr: float = 0.01,
                      **attn) -> tuple[dict[float, dict[str, tuple[Tensor, Tensor]]], dict]:
    """:func:`gd_prune_merged` for the stored ``Wq (H dh, d)``, ``Wk (Hkv dh, d)`` of a real layer
    (our factored adaptation; masks ``Mq, Mk``; heads, biases, rope, grouped keys via ``attn``, see
    :func:`factored_attention_probs`), with Adam steps (:func:`mask_adam`) instead of ``1/L``.

    ``lam = c * tr(H)/n`` as in the merged case. Returns ``({s: {"mask": (Wq', Wk'),
    "scaled": (Wq_s, Wk_s), "update": (Wq'', Wk''), "keep": (keep_q, keep_k)}}, info)``; ``info`` holds ``M = (Mq, Mk)``,
    ``lam`` and the loss histories.
    """
    ones = (torch.ones_like(Wq), torch.ones_like(Wk))
    att = factored_objective(X, Wq, Wk, n_heads, 0.0, kind, causal, **attn)
    lam = c * mean_curvature(att, ones)
    (Mq, Mk), hist = mask_adam(factored_objective(X, Wq, Wk, n_heads, lam, kind, causal, **attn),
                               ones, lr, steps)
    out, refit_hist = {}, {}
    for s in sparsities:
        kq, kk = binarize_mask(Mq, Wq, s), binarize_mask(Mk, Wk, s)
        upd, refit_hist[s] = update_kept_factored(att, Wq, Wk, (kq, kk), refit_steps, refit_lr)
        out[s] = {"mask": (pruned_weight(Wq, kq), pruned_weight(Wk, kk)),
                  "scaled": (pruned_weight(Wq, kq, Mq), pruned_weight(Wk, kk, Mk)), "update": upd, "keep": (kq, kk)}
    return out, {"M": (Mq, Mk), "lam": lam, "history": hist, "refit_history": refit_hist}
