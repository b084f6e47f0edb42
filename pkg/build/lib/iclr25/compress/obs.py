"""Layer-wise reconstruction with second-order (OBS) updates: SparseGPT, GPTQ, optimal compensation.

All three minimise the layer's output error on calibration inputs ``X (n, in)``,

    E(W_hat) = ||W X^T - W_hat X^T||_F^2 = sum_i (w_i - w_hat_i)^T H (w_i - w_hat_i),   H = X^T X,

row by row (rows are independent: they share ``H``). Removing weight ``q`` of a row and re-fitting
the others optimally (Optimal Brain Surgeon, Hassibi & Stork 1993) changes the row by

    delta = -(w_q / [H^-1]_qq) H^-1_{:,q},     and raises E by  w_q^2 / [H^-1]_qq.

SparseGPT (Frantar & Alistarh, 2023) and GPTQ (Frantar et al., 2023) visit the columns left to
right and only let the *later* columns absorb the error. Then the inverse Hessians of the shrinking
column sets ``F_j = {j, ..., in-1}`` are all read off one upper Cholesky factor ``U`` of ``H^-1``
(``H^-1 = U^T U``): ``[H_{F_j}^-1]_{j, F_j} = U_jj U_{j, F_j}``. The update of column ``j``,
``err = (w_j - q_j) / U_jj;  W[:, j:] -= err U_{j, j:}``, is the OBS step on ``F_j``. Columns are
processed in blocks of ``blocksize``, and the updates of later blocks are applied lazily (one
matmul per block). ``H`` is damped, ``H + percdamp * mean(diag H) I``, and inputs that are never
active (``H_jj = 0``) get their weights zeroed. The result does not depend on the scale of ``H``
(``H = X^T X`` and the paper's ``2 X^T X / n`` give the same weights).
"""

from __future__ import annotations

import torch
from torch import Tensor

from iclr25.compress.masks import Pattern, _prune_lowest, n_pruned, parse_pattern, pattern_sparsity
from iclr25.compress.quant import QuantGrid, rtn_grid


def input_hessian(X: Tensor) -> Tensor:
    """``H = X^T X`` (float64, ``(in, in)``) of calibration inputs ``X (..., in)`` (leading dims: tokens)."""
    X2 = X.detach().reshape(-1, X.shape[-1]).double()
    return X2.T @ X2


def output_error(W: Tensor, W_hat: Tensor, H: Tensor) -> Tensor:
    """Layer reconstruction error ``sum_i (w_i - w_hat_i)^T H (w_i - w_hat_i)`` (float64 scalar).

    With ``H = X^T X`` it equals ``||W X^T - W_hat X^T||_F^2``. ``W, W_hat (out, in)``, ``H (in, in)``.
    """
    D = (W.detach() - W_hat.detach()).double()
    return ((D @ H.double().to(D.device)) * D).sum()


def _compute_dtype(W: Tensor) -> torch.dtype:
    return torch.promote_types(W.dtype, torch.float32)


def _damped(H: Tensor, percdamp: float, dtype: torch.dtype, device: torch.device) -> tuple[Tensor, Tensor]:
    """``H`` with dead inputs set to 1 on the diagonal and ``percdamp * mean(diag)`` added; dead mask."""
    if H.ndim != 2 or H.shape[0] != H.shape[1]:
        raise ValueError(f"H must be square (in, in), got {tuple(H.shape)}")
    H = H.detach().to(device=device, dtype=dtype).clone()
    diag = H.diagonal()
    dead = diag == 0
    diag[dead] = 1.0
    diag += percdamp * diag.mean()
    return H, dead


def _inverse_cholesky(H: Tensor, percdamp: float, dtype: torch.dtype,
                      device: torch.device) -> tuple[Tensor, Tensor]:
    """Upper Cholesky factor ``U`` of the damped ``H^-1`` (``H^-1 = U^T U``), and the dead-input mask."""
    Hd, dead = _damped(H, percdamp, dtype, device)
    L, info = torch.linalg.cholesky_ex(Hd)
    if int(info) != 0:
        raise ValueError("the damped Hessian is not positive definite: raise percdamp "
                         "or collect more calibration tokens")
    return torch.linalg.cholesky(torch.cholesky_inverse(L), upper=True), dead


def obs_saliency(W: Tensor, H: Tensor, percdamp: float = 0.01) -> Tensor:
    """OBS saliency ``S_ij = W_ij^2 / [H^-1]_jj`` (damped ``H``): how much ``E`` rises when weight
    ``(i, j)`` alone is removed and the rest of row ``i`` re-fitted. ``W (out, in)``, ``H (in, in)``
    -> ``(out, in)`` float64; a score for :func:`~iclr25.compress.masks.mask_from_scores`."""
    _check_layer(W, H)
    Hd, _ = _damped(H, percdamp, torch.float64, W.device)
    return W.detach().double().pow(2) / torch.linalg.inv(Hd).diagonal()


def _check_layer(W: Tensor, H: Tensor) -> None:
    if W.ndim != 2 or H.shape[-1] != W.shape[1]:
        raise ValueError(f"W must be (out, in) and H (in, in); got {tuple(W.shape)}, {tuple(H.shape)}")


def sparsegpt_prune(W: Tensor, H: Tensor, sparsity: float | None, pattern: Pattern = None,
                    blocksize: int = 128, percdamp: float = 0.01, *,
                    mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """SparseGPT: prune ``W (out, in)`` with OBS updates under the Hessian ``H = X^T X (in, in)``.

    Returns ``(W_pruned, mask)``: the updated weight (``W``'s dtype and device, exact zeros where
    pruned) and the ``bool`` keep-mask ``(out, in)``.

    Mask selection (adaptive, as in the paper): unstructured, at the start of each block of columns
    every row drops its lowest ``w_ij^2 / U_jj^2`` (the OBS saliency, on the weights as updated so
    far); row ``i`` drops ``floor(s * i2) - floor(s * i1)`` of block ``[i1, i2)``, so every row ends
    with exactly ``floor(s * in)`` zeros (the official code instead thresholds the whole block across
    rows; per-row groups keep the comparison with Wanda fair). N:M patterns (``"2:4"``, ``("c4n", n)``)
    choose each group of ``m`` columns when the sweep reaches it, from the updated weights.
    ``mask`` (``bool (out, in)``, optional) fixes the support instead: then only the OBS updates run
    (``sparsity`` and ``pattern`` are ignored).
    """
    _check_layer(W, H)
    rows, cols = W.shape
    dt, dev = _compute_dtype(W), W.device
    nm = None
    if mask is None:
        s = pattern_sparsity(pattern, sparsity)
        nm = parse_pattern(pattern)
        if nm is not None and (cols % nm[1] or blocksize % nm[1]):
            raise ValueError(f"in_features={cols} and blocksize={blocksize} must be multiples of m={nm[1]}")
    elif mask.shape != W.shape:
        raise ValueError(f"mask shape {tuple(mask.shape)} differs from W's {tuple(W.shape)}")
    U, dead = _inverse_cholesky(H, percdamp, dt, dev)
    Wc = W.detach().to(dt).clone()
    Wc[:, dead] = 0
    keep = (torch.ones(rows, cols, dtype=torch.bool, device=dev) if mask is None
            else mask.to(dev, torch.bool).clone())

    for i1 in range(0, cols, blocksize):
        i2 = min(i1 + blocksize, cols)
        W1, U1 = Wc[:, i1:i2].clone(), U[i1:i2, i1:i2]
        d1 = U1.diagonal()
        Err1 = torch.zeros_like(W1)
        if mask is None and nm is None:  # unstructured: the whole block's mask now
            k = n_pruned(i2, s) - n_pruned(i1, s)
            keep[:, i1:i2] = _prune_lowest(W1.pow(2) / d1.pow(2), k)
        for i in range(i2 - i1):
            if nm is not None and i % nm[1] == 0:  # N:M: this group's mask from the updated weights
                g = slice(i, i + nm[1])
                keep[:, i1 + i:i1 + i + nm[1]] = _prune_lowest(W1[:, g].pow(2) / d1[g].pow(2), nm[0])
            w = W1[:, i]
            err = (w - w * keep[:, i1 + i]) / d1[i]
            W1[:, i:] -= err.unsqueeze(1) * U1[i, i:].unsqueeze(0)  # column i becomes w * keep (OBS)
            Err1[:, i] = err
        Wc[:, i1:i2] = W1 * keep[:, i1:i2]  # exact zeros where pruned
        Wc[:, i2:] -= Err1 @ U[i1:i2, i2:]  # lazy update of the later blocks
    return Wc.to(W.dtype), keep


def gptq_quantize(W: Tensor, H: Tensor, bits: int, group_size: int | None = None,
                  symmetric: bool = False, blocksize: int = 128,
                  percdamp: float = 0.01) -> tuple[Tensor, QuantGrid]:
    """GPTQ: round ``W (out, in)`` column by column onto an RTN grid, pushing each column's rounding
    error onto the later columns with the OBS update under ``H = X^T X (in, in)``.

    Returns ``(W_quantized, grid)``: values in ``W``'s dtype that lie on ``grid``
    (:class:`~iclr25.compress.quant.QuantGrid`, ``(out, in // g)``). Per-channel
    (``group_size=None``): one grid per row, fitted to the original weights. Groups: each group's
    grid is fitted when the sweep reaches its first column, to the weights as updated so far
    (GPTQ without static groups); ``blocksize`` must then be a multiple of ``group_size``.
    With ``H`` diagonal no error propagates and GPTQ equals :func:`~iclr25.compress.quant.rtn_quantize`.
    """
    _check_layer(W, H)
    rows, cols = W.shape
    dt, dev = _compute_dtype(W), W.device
    g = cols if group_size is None else int(group_size)
    if cols % g or (g < cols and blocksize % g):
        raise ValueError(f"group_size={group_size} must divide in_features={cols} "
                         f"and blocksize={blocksize}")
    U, dead = _inverse_cholesky(H, percdamp, dt, dev)
    Wc = W.detach().to(dt).clone()
    Wc[:, dead] = 0
    scale = torch.empty(rows, cols // g, dtype=dt, device=dev)
    zero = torch.empty_like(scale)
    if g == cols:
        fit = rtn_grid(Wc, bits, None, symmetric)
        scale[:], zero[:] = fit.scale, fit.zero
    grid = QuantGrid(scale, zero, int(bits), g, bool(symmetric))  # filled in place below
    qmin, qmax = grid.qmin, grid.qmax

    for i1 in range(0, cols, blocksize):
        i2 = min(i1 + blocksize, cols)
        W1, U1 = Wc[:, i1:i2].clone(), U[i1:i2, i1:i2]
        Q1, Err1 = torch.zeros_like(W1), torch.zeros_like(W1)
        for i in range(i2 - i1):
            col = i1 + i
            if g < cols and col % g == 0:
                fit = rtn_grid(W1[:, i:i + g], bits, None, symmetric)
                scale[:, col // g], zero[:, col // g] = fit.scale[:, 0], fit.zero[:, 0]
            s, z = scale[:, col // g], zero[:, col // g]
            w = W1[:, i]
            q = (torch.clamp(torch.round(w / s) + z, qmin, qmax) - z) * s
            err = (w - q) / U1[i, i]
            W1[:, i:] -= err.unsqueeze(1) * U1[i, i:].unsqueeze(0)
            Q1[:, i], Err1[:, i] = q, err
        Wc[:, i1:i2] = Q1
        Wc[:, i2:] -= Err1 @ U[i1:i2, i2:]
    return Wc.to(W.dtype), grid


def compensate(W: Tensor, H: Tensor, mask: Tensor, group_size: int | None = None,
               percdamp: float = 0.01) -> Tensor:
    """The best weights on a fixed support: ``argmin_{W_hat = W_hat * mask} E(W_hat)`` row by row.

    ``W (out, in)``, ``H (in, in)`` (damped like SparseGPT's), ``mask bool (out, in)`` -> ``(out, in)``.
    With kept set ``K`` and pruned set ``P`` of a row, ``w_hat_K = w_K + H_KK^-1 H_KP w_P`` (least
    squares, the OBS update of removing all of ``P`` at once). ``group_size=g`` re-fits each group
    of ``g`` contiguous inputs on its own (``H`` replaced by its ``g x g`` diagonal blocks): the kept
    weights of a group absorb only that group's pruned weights. Cost: ``O(out * in^3)`` for whole
    rows, ``O(out * in * g^2)`` for groups.
    """
    _check_layer(W, H)
    if mask.shape != W.shape:
        raise ValueError(f"mask shape {tuple(mask.shape)} differs from W's {tuple(W.shape)}")
    rows, cols = W.shape
    dt, dev = _compute_dtype(W), W.device
    Hd, _ = _damped(H, percdamp, dt, dev)
    Wc, m = W.detach().to(dt), mask.to(dev, dt)
    g = cols if group_size is None else int(group_size)
    if cols % g:
        raise ValueError(f"group_size={group_size} must divide in_features={cols}")
    counts = mask.sum(1)
    if g == cols and 0 < int(counts[0]) < cols and bool((counts == counts[0]).all()):
        return _compensate_rows(Wc, Hd, mask.to(dev, torch.bool), int(counts[0])).to(W.dtype)
    G = cols // g
    blocks = Hd.reshape(G, g, G, g).diagonal(dim1=0, dim2=2).permute(2, 0, 1)  # (G, g, g)
    Wg, mg = Wc.reshape(rows, G, g), m.reshape(rows, G, g)
    out = torch.empty_like(Wg)
    chunk = max(1, 2**22 // (G * g * g))
    for r0 in range(0, rows, chunk):
        w, mk = Wg[r0:r0 + chunk], mg[r0:r0 + chunk]  # (c, G, g)
        # A = M H M + (I - M),  b = M H ((1 - M) w): the pruned coordinates solve to 0
        A = mk.unsqueeze(-1) * blocks * mk.unsqueeze(-2) + torch.diag_embed(1 - mk)
        b = mk * (blocks @ ((1 - mk) * w).unsqueeze(-1)).squeeze(-1)
        out[r0:r0 + chunk] = mk * (w + _solve_spd(A, b))
    return out.reshape(rows, cols).to(W.dtype)


def _solve_spd(A: Tensor, b: Tensor) -> Tensor:
    """``A^-1 b`` for a batch of positive-definite ``A (..., k, k)``, ``b (..., k)`` (Cholesky; LU if
    a matrix is not numerically positive definite)."""
    L, info = torch.linalg.cholesky_ex(A)
    if bool(info.any()):
        return torch.linalg.solve(A, b)
    return torch.cholesky_solve(b.unsqueeze(-1), L).squeeze(-1)


def _compensate_rows(W: Tensor, Hd: Tensor, mask: Tensor, k: int) -> Tensor:
    """:func:`compensate` on whole rows that all keep ``k`` weights: solve on the gathered ``k x k``
    systems ``H_KK e_K = (H ((1 - m) w))_K`` instead of masked ``in x in`` ones."""
    rows, cols = W.shape
    idx = mask.nonzero()[:, 1].reshape(rows, k)  # kept columns of each row, ascending
    rhs = ((~mask) * W) @ Hd  # (H ((1 - m) w))^T for every row (H symmetric)
    out = torch.zeros_like(W)
    chunk = max(1, 2**22 // (k * k))
    for r0 in range(0, rows, chunk):
        K = idx[r0:r0 + chunk]
        A = Hd[K.unsqueeze(-1), K.unsqueeze(-2)]  # (c, k, k) = H_KK of each row
        e = _solve_spd(A, rhs[r0:r0 + chunk].gather(1, K))
        out[r0:r0 + chunk].scatter_(1, K, W[r0:r0 + chunk].gather(1, K) + e)
    return out
