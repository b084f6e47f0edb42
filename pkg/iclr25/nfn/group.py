"""The symmetry group of an encoder block's weights and its action.

An element ``g = (tau, M, N, pO, pA)`` of ``S_h x (GL(Dk)^h x GL(Dv)^h) x S_D x S_Da`` acts on one
block's weights (:mod:`iclr25.nfn.block`) as

    WQ_i <- WQ_tau(i) M_tau(i)^T        WK_i <- WK_tau(i) M_tau(i)^{-1}
    WV_i <- WV_tau(i) N_tau(i)          WO_i <- N_tau(i)^{-1} WO_tau(i) P_O
    WA <- P_O^T WA P_A    bA <- bA P_A    WB <- P_A^T WB    bB <- bB

with ``P_O`` the permutation matrix of ``pO`` (``W P_O = W[..., pO]``) and ``P_A`` that of ``pA``.
It leaves every per-head product ``WQ_i WK_i^T`` unchanged, permutes the heads, permutes the
columns of ``WV_i WO_i`` by ``pO``, and leaves the zoo block's function unchanged.

Every tensor of ``g`` may carry leading batch dimensions (one element per model of a batch).
"""

from __future__ import annotations

import torch

from iclr25.nfn.block import BlockSpec, Weights

Group = dict[str, torch.Tensor]


def well_conditioned(n: int, *batch: int, cond: float = 2.0, generator: torch.Generator | None = None,
                     dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Random invertible ``(*batch, n, n)`` matrices ``U diag(s) V^T`` with Haar-random orthogonal
    ``U, V`` and singular values ``s`` log-uniform in ``[1/sqrt(cond), sqrt(cond)]``, so the
    condition number is at most ``cond`` (``cond=1``: orthogonal matrices)."""
    u, _ = torch.linalg.qr(torch.randn(*batch, n, n, generator=generator, dtype=dtype))
    v, _ = torch.linalg.qr(torch.randn(*batch, n, n, generator=generator, dtype=dtype))
    half = 0.5 * torch.log(torch.tensor(float(cond), dtype=dtype))
    s = torch.exp((2 * torch.rand(*batch, n, generator=generator, dtype=dtype) - 1) * half)
    return (u * s[..., None, :]) @ v.transpose(-1, -2)


def _randperm(n: int, batch: tuple[int, ...], generator: torch.Generator | None) -> torch.Tensor:
    return torch.argsort(torch.rand(*batch, n, generator=generator), dim=-1)


def random_group_element(spec: BlockSpec, *batch: int, cond: float = 2.0, permute_output: bool = True,
                         generator: torch.Generator | None = None, dtype: torch.dtype = torch.float64,
                         device: torch.device | str | None = None) -> Group:
    """A random ``g = (tau, M, N, pO, pA)`` for blocks of size ``spec``, with batch shape ``batch``.

    ``M`` and ``N`` come from :func:`well_conditioned` (condition number at most ``cond``);
    ``permute_output=False`` sets ``pO`` to the identity (the subgroup that survives a residual
    connection). Drawn on the CPU from ``generator``, then moved to ``device``.
    """
    h, D, Dk, Dv, Da = spec.h, spec.D, spec.Dk, spec.Dv, spec.Da
    g = {"tau": _randperm(h, batch, generator),
         "M": well_conditioned(Dk, *batch, h, cond=cond, generator=generator, dtype=dtype),
         "N": well_conditioned(Dv, *batch, h, cond=cond, generator=generator, dtype=dtype),
         "pO": _randperm(D, batch, generator) if permute_output else torch.arange(D).expand(*batch, D),
         "pA": _randperm(Da, batch, generator)}
    return {k: v.to(device) for k, v in g.items()}


def identity_element(spec: BlockSpec, dtype: torch.dtype = torch.float64,
                     device: torch.device | str | None = None) -> Group:
    """The identity of the group."""
    return {"tau": torch.arange(spec.h, device=device),
            "M": torch.eye(spec.Dk, dtype=dtype, device=device).expand(spec.h, -1, -1),
            "N": torch.eye(spec.Dv, dtype=dtype, device=device).expand(spec.h, -1, -1),
            "pO": torch.arange(spec.D, device=device), "pA": torch.arange(spec.Da, device=device)}


def _take(x: torch.Tensor, idx: torch.Tensor, dim: int, core: int) -> torch.Tensor:
    """``x`` re-indexed along axis ``dim`` (negative) by ``idx`` of shape ``(*batch, n)``. ``x`` has
    ``core`` trailing non-batch axes; leading batch axes of ``x`` and ``idx`` broadcast."""
    idx = idx.reshape(*idx.shape[:-1], *([1] * (core + dim)), idx.shape[-1], *([1] * (-dim - 1)))
    while idx.dim() < x.dim():
        idx = idx.unsqueeze(0)
    while x.dim() < idx.dim():
        x = x.unsqueeze(0)
    return torch.take_along_dim(x, idx, dim)


def apply_group_action(weights: Weights, g: Group) -> Weights:
    """``g . weights`` (see the module docstring). Batch dims of ``weights`` and ``g`` broadcast;
    ``g``'s batch dims must lead those of ``weights``' key tensors (e.g. both ``(n,)``)."""
    tau, pO, pA = g["tau"], g["pO"], g["pA"]
    M = _take(g["M"].to(weights["WQ"]), tau, -3, 3)
    N = _take(g["N"].to(weights["WV"]), tau, -3, 3)
    WQ, WK = _take(weights["WQ"], tau, -3, 3), _take(weights["WK"], tau, -3, 3)
    WV, WO = _take(weights["WV"], tau, -3, 3), _take(weights["WO"], tau, -3, 3)
    WA = _take(_take(weights["WA"], pO, -2, 2), pA, -1, 2)
    return {
        "WQ": WQ @ M.transpose(-1, -2),
        "WK": torch.linalg.solve(M, WK, left=False),                    # WK M^{-1}
        "WV": WV @ N,
        "WO": _take(torch.linalg.solve(N, WO), pO, -1, 3),              # N^{-1} WO P_O
        "WA": WA,
        "bA": _take(weights["bA"], pA, -1, 1),
        "WB": _take(weights["WB"], pA, -2, 2),
        "bB": weights["bB"].expand(*torch.broadcast_shapes(weights["bB"].shape[:-1], pA.shape[:-1]),
                                   weights["bB"].shape[-1]),  # untouched (broadcast to the batch)
    }


def head_products(weights: Weights) -> tuple[torch.Tensor, torch.Tensor]:
    """The per-head products ``QK_i = WQ_i WK_i^T`` and ``VO_i = WV_i WO_i``, each ``(..., h, D, D)``."""
    return (weights["WQ"] @ weights["WK"].transpose(-1, -2), weights["WV"] @ weights["WO"])


def products_match(w1: Weights, w2: Weights, *, rtol: float = 1e-9) -> tuple[bool, torch.Tensor | None]:
    """Whether some head permutation ``tau`` makes ``QK(w2)_i = QK(w1)_tau(i)`` and
    ``VO(w2)_i = VO(w1)_tau(i)`` (to relative tolerance ``rtol``): the condition of the theorem.
    Returns (matched, tau or None). Unbatched weights; tries every permutation (small ``h``)."""
    from itertools import permutations

    qk1, vo1 = head_products(w1)
    qk2, vo2 = head_products(w2)
    scale = max(qk1.abs().max().item(), vo1.abs().max().item())
    for perm in permutations(range(qk1.shape[-3])):
        tau = torch.tensor(perm, device=qk1.device)
        err = max((qk2 - qk1[tau]).abs().max().item(), (vo2 - vo1[tau]).abs().max().item())
        if err <= rtol * scale:
            return True, tau
    return False, None


def recover_gl(w: Weights, gw: Weights, tau: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float]:
    """Recover ``M`` and ``N`` from weights ``w`` and ``gw = g.w`` (known head permutation ``tau``)
    by least squares: ``M_i^T = argmin |WQ_tau(i) X - gWQ_i|``, ``N_i = argmin |WV_tau(i) X - gWV_i|``.
    Returns (M (h, Dk, Dk), N (h, Dv, Dv), the largest relative residual of the three least-squares
    equations ``WQ_tau(i) M_i^T = gWQ_i``, ``WK_tau(i) = gWK_i M_i`` and ``WV_tau(i) N_i = gWV_i``;
    ``WO`` is not checked)."""
    Mt = torch.linalg.lstsq(w["WQ"][tau], gw["WQ"]).solution
    N = torch.linalg.lstsq(w["WV"][tau], gw["WV"]).solution
    M = Mt.transpose(-1, -2)
    res_k = (w["WK"][tau] - gw["WK"] @ M).norm() / w["WK"].norm()
    res_q = (w["WQ"][tau] @ Mt - gw["WQ"]).norm() / w["WQ"].norm()
    res_v = (w["WV"][tau] @ N - gw["WV"]).norm() / w["WV"].norm()
    return M, N, float(max(res_k, res_q, res_v))


def exchange_head_columns(w: Weights, j: int = 0) -> Weights:
    """A weight set with the same head sums ``sum_i QK_i`` and ``sum_i VO_i`` as ``w`` but different
    per-head products: column ``j`` of ``WQ`` and ``WK`` is exchanged between heads 0 and 1, and so
    is column ``j`` of ``WV`` with row ``j`` of ``WO``. Each product is a sum of rank-one terms
    (``QK_i = sum_c WQ_i[:, c] WK_i[:, c]^T``), so moving one term from head 0 to head 1 and one back
    keeps their sum over heads. Not a group element: the block's function changes."""
    out = {k: v.clone() for k, v in w.items()}
    for key, axis in (("WQ", -1), ("WK", -1), ("WV", -1), ("WO", -2)):
        a = out[key].select(-3, 0).select(axis, j).clone()
        out[key].select(-3, 0).select(axis, j).copy_(out[key].select(-3, 1).select(axis, j))
        out[key].select(-3, 1).select(axis, j).copy_(a)
    return out
