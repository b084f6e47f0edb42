"""Flat vector bundles on graphs and Bundle Neural Networks (BuNN).

Bamberger, Barbero, Dong and Bronstein, *Bundle Neural Networks for message diffusion on graphs*,
ICLR 2025 (arXiv 2405.15540).

A flat vector bundle on a graph with ``n`` nodes gives every node ``v`` an orthogonal map
``O_v`` in ``O(d)``. Stacking them block-diagonally as ``O_B``, the bundle Laplacian is

    L_B = O_B^T (L ⊗ I_d) O_B,

with ``L = I - D^{-1/2} A D^{-1/2}`` the symmetric normalised graph Laplacian, and the bundle heat
kernel is ``H_B(t) = exp(-t L_B) = O_B^T (exp(-t L) ⊗ I_d) O_B``: rotate every fibre into the shared
frame (*sync*), run ordinary graph heat diffusion per channel, rotate back (*de-sync*). Only the
``n x n`` graph Laplacian is ever diagonalised.

Layout convention for features of a layer with ``c`` bundles of dimension ``d`` and ``m`` channels
per fibre: ``x`` has shape ``(n, c * d * m)`` and is viewed as ``(n, c, d, m)``; frames ``O`` have
shape ``(n, c, d, d)``.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np
import torch
from torch import Tensor, nn
from torch_geometric.nn import GCNConv, GINConv, MessagePassing, SAGEConv
from torch_geometric.utils import get_laplacian, remove_self_loops, to_dense_adj, to_undirected

ORTHOGONAL_METHODS = ("householder", "angle")
KERNELS = ("spectral", "taylor")
FRAMES = ("learned", "identity")


# --------------------------------------------------------------------------------------------
# Orthogonal maps
# --------------------------------------------------------------------------------------------
def num_orthogonal_params(d: int) -> int:
    """Number of free parameters of an orthogonal ``d x d`` map: ``d (d - 1) / 2``."""
    return d * (d - 1) // 2


def householder_orthogonal(p: Tensor, d: int) -> Tensor:
    """Orthogonal matrices as products of ``d`` Householder reflections.

    The ``d(d-1)/2`` parameters fill the strictly lower triangle of ``A = I + tril(P, -1)``; the
    columns ``a_i`` of ``A`` are the reflection vectors and ``Q = prod_i (I - 2 a_i a_i^T/|a_i|^2)``
    (the Neural-Sheaf-Diffusion / BuNN parametrisation). ``det Q = (-1)^d`` always (a fixed
    coset of SO(d), which is harmless: a global sign is a gauge choice); zero parameters give
    ``Q = -I``.

    Parameters
    ----------
    p : Tensor, shape (..., d(d-1)/2)
    d : int, the bundle dimension (>= 1)

    Returns
    -------
    Tensor, shape (..., d, d), orthogonal.
    """
    if p.shape[-1] != num_orthogonal_params(d):
        raise ValueError(f"expected {num_orthogonal_params(d)} parameters for d={d}, got {p.shape[-1]}")
    batch = p.shape[:-1]
    a = torch.eye(d, dtype=p.dtype, device=p.device).expand(*batch, d, d).clone()
    rows, cols = torch.tril_indices(d, d, offset=-1, device=p.device)
    a[..., rows, cols] = p
    tau = 2.0 / (a * a).sum(dim=-2)  # one scale per column (reflection vector)
    return torch.linalg.householder_product(a, tau)


def angle_orthogonal(theta: Tensor) -> Tensor:
    """2-D rotations ``[[cos θ, -sin θ], [sin θ, cos θ]]``.

    Parameters
    ----------
    theta : Tensor, shape (..., 1) or (...,), angles in radians

    Returns
    -------
    Tensor, shape (..., 2, 2), in SO(2).
    """
    if theta.dim() > 0 and theta.shape[-1] == 1:
        theta = theta[..., 0]
    c, s = torch.cos(theta), torch.sin(theta)
    return torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)


def orthogonal_from_params(p: Tensor, d: int, method: str = "householder") -> Tensor:
    """Map unconstrained parameters ``(..., d(d-1)/2)`` to orthogonal matrices ``(..., d, d)``.

    ``method``: ``"householder"`` (any ``d``) or ``"angle"`` (``d = 2``, the parameter is the angle).
    """
    if method == "householder":
        return householder_orthogonal(p, d)
    if method == "angle":
        if d != 2:
            raise ValueError(f"method 'angle' needs d=2, got d={d}")
        return angle_orthogonal(p)
    raise ValueError(f"unknown orthogonal method {method!r}; valid: {', '.join(ORTHOGONAL_METHODS)}")


# --------------------------------------------------------------------------------------------
# Laplacians (dense, for tests and small graphs)
# --------------------------------------------------------------------------------------------
def normalized_laplacian(edge_index: Tensor, num_nodes: int, dtype: torch.dtype = torch.float64,
                         self_loops: bool = False) -> Tensor:
    """Dense symmetric normalised Laplacian ``L = I - D^{-1/2} A D^{-1/2}``, shape ``(n, n)``.

    Built with ``torch_geometric.utils.get_laplacian(normalization="sym")``; the graph is made
    undirected first and self-loops are dropped. Isolated nodes get ``L_vv = 1``.
    ``self_loops=True`` gives GCN's Laplacian ``I - D~^{-1/2} (A + I) D~^{-1/2}`` instead
    (``torch_geometric.nn.conv.gcn_conv.gcn_norm``; ``D~ = D + I``), whose kernel is spanned by
    ``sqrt(d_v + 1)``: the fixed point of repeated GCN propagation. On ``edge_index``'s device.
    """
    ei = to_undirected(remove_self_loops(edge_index)[0], num_nodes=num_nodes)
    if self_loops:
        from torch_geometric.nn.conv.gcn_conv import gcn_norm

        aei, aw = gcn_norm(ei, None, num_nodes, add_self_loops=True, dtype=dtype)
        eye = torch.eye(num_nodes, dtype=dtype, device=edge_index.device)
        return eye - to_dense_adj(aei, edge_attr=aw, max_num_nodes=num_nodes)[0]
    lei, lw = get_laplacian(ei, normalization="sym", num_nodes=num_nodes, dtype=dtype)
    return to_dense_adj(lei, edge_attr=lw, max_num_nodes=num_nodes)[0]


def bundle_laplacian(edge_index: Tensor, O: Tensor, num_nodes: int) -> Tensor:
    """Dense bundle Laplacian ``L_B = O_B^T (L ⊗ I_d) O_B``.

    Block ``(v, u)`` is ``L_vu O_v^T O_u``: ``I_d`` on the diagonal and
    ``-O_v^T O_u / sqrt(d_v d_u)`` for an edge ``u ~ v``.

    Parameters
    ----------
    edge_index : LongTensor, shape (2, E)
    O : Tensor, shape (n, d, d), one orthogonal map per node
    num_nodes : int

    Returns
    -------
    Tensor, shape (n d, n d), symmetric positive semi-definite.
    """
    if O.dim() != 3 or O.shape[0] != num_nodes or O.shape[1] != O.shape[2]:
        raise ValueError(f"O must have shape (num_nodes, d, d) = ({num_nodes}, d, d), got {tuple(O.shape)}")
    n, d = num_nodes, O.shape[-1]
    L = normalized_laplacian(edge_index, n, dtype=O.dtype).to(O.device)
    blocks = torch.einsum("vu,vki,ukj->viuj", L, O, O)  # L_vu (O_v^T O_u)_ij
    return blocks.reshape(n * d, n * d)


def laplacian_eigh(edge_index: Tensor, num_nodes: int, k: int | None = None,
                   dtype: torch.dtype = torch.float64) -> tuple[Tensor, Tensor]:
    """Eigenpairs of the symmetric normalised Laplacian, smallest first.

    ``k=None`` (or ``k >= n``): all of them, by dense ``torch.linalg.eigh``. Otherwise the ``k``
    smallest by ``scipy.sparse.linalg.eigsh`` (shift-invert around a small negative shift).
    The decomposition does not depend on any learned parameter: compute it once per graph.

    Returns
    -------
    lam : Tensor, shape (k,), ascending, in [0, 2]
    phi : Tensor, shape (n, k), orthonormal columns
    Both on ``edge_index``'s device.
    """
    dev = edge_index.device
    if k is None or k >= num_nodes:
        lam, phi = torch.linalg.eigh(normalized_laplacian(edge_index, num_nodes, dtype=torch.float64))
        return lam.clamp_min(0).to(dtype), phi.to(dtype)
    import scipy.sparse as sp
    from scipy.sparse.linalg import eigsh

    ei = to_undirected(remove_self_loops(edge_index.cpu())[0], num_nodes=num_nodes)
    lei, lw = get_laplacian(ei, normalization="sym", num_nodes=num_nodes, dtype=torch.float64)
    L = sp.csr_matrix((lw.numpy(), (lei[0].numpy(), lei[1].numpy())), shape=(num_nodes, num_nodes))
    v0 = np.ones(num_nodes) / math.sqrt(num_nodes)
    lam, phi = eigsh(L, k=k, sigma=-1e-3, which="LM", v0=v0)
    order = np.argsort(lam)
    return (torch.as_tensor(np.clip(lam[order], 0, None), dtype=dtype, device=dev),
            torch.as_tensor(phi[:, order], dtype=dtype, device=dev))


def block_diag_eig(eigs: Sequence[tuple[Tensor, Tensor]]) -> tuple[Tensor, Tensor]:
    """Eigenpairs of a disjoint union of graphs from those of its parts (diagonalise per graph).

    Parameters
    ----------
    eigs : sequence of (lam_i (k_i,), phi_i (n_i, k_i)), in the node order of the batch

    Returns
    -------
    lam : Tensor, shape (sum k_i,)
    phi : sparse COO Tensor, shape (sum n_i, sum k_i), block diagonal
    (on the device of the inputs). For ``B`` copies of one topology, :func:`stacked_eig` is faster.
    """
    lam = torch.cat([e[0] for e in eigs])
    idx, val, r0, c0 = [], [], 0, 0
    for _, ph in eigs:
        nz = ph.nonzero(as_tuple=True)
        idx.append(torch.stack([nz[0] + r0, nz[1] + c0]))
        val.append(ph[nz])
        r0, c0 = r0 + ph.shape[0], c0 + ph.shape[1]
    vals = torch.cat(val)
    phi = torch.sparse_coo_tensor(torch.cat(idx, 1), vals, (r0, c0), device=vals.device).coalesce()
    return lam, phi


def stacked_eig(lam: Tensor, phi: Tensor, copies: int) -> tuple[Tensor, Tensor]:
    """Eigenpairs of ``copies`` disjoint copies of one graph, as a dense stack.

    Equivalent to ``block_diag_eig([(lam, phi)] * copies)`` for :func:`heat_kernel_spectral`, but
    applied by batched dense products. Returns ``lam (k,)`` and ``phi (copies, n, k)`` (a view).
    """
    if phi.dim() != 2 or lam.shape != phi.shape[1:]:
        raise ValueError(f"need lam (k,) and phi (n, k), got {tuple(lam.shape)} and {tuple(phi.shape)}")
    return lam, phi.expand(copies, *phi.shape)


# --------------------------------------------------------------------------------------------
# Heat kernels
# --------------------------------------------------------------------------------------------
def _per_bundle_t(t: Tensor | float, y: Tensor) -> Tensor:
    """Broadcast a scalar or per-bundle ``t`` of shape ``(c,)`` against ``y`` of shape ``(n, c, f)``."""
    t = torch.as_tensor(t, dtype=y.dtype, device=y.device)
    if t.dim() == 0:
        t = t.expand(y.shape[1])
    if t.shape != (y.shape[1],):
        raise ValueError(f"t must be a scalar or have shape ({y.shape[1]},), got {tuple(t.shape)}")
    return t


def heat_kernel_spectral(y: Tensor, lam: Tensor, phi: Tensor, t: Tensor | float) -> Tensor:
    """Graph heat diffusion ``exp(-t L) y`` from eigenpairs ``L = Φ Λ Φ^T`` (exact if all kept).

    Parameters
    ----------
    y : Tensor, shape (n, c, f): ``c`` groups (bundles) of ``f`` channels
    lam, phi : Tensor, shapes (k,), (n, k): eigenpairs of ``L`` (``k <= n``; the lowest ``k``);
        ``phi`` may be sparse, e.g. block-diagonal for a batch of graphs (:func:`block_diag_eig`),
        or a dense stack (B, n / B, k) for ``B`` copies of one graph (:func:`stacked_eig`)
    t : float or Tensor, scalar or shape (c,): diffusion time per group (differentiable)

    Returns
    -------
    Tensor, shape (n, c, f): ``Φ diag(exp(-t_c λ)) Φ^T y[:, c]`` for every group ``c``.
    """
    t = _per_bundle_t(t, y)
    n, c, f = y.shape
    lam, phi = lam.to(y), phi.to(y)  # phi may be a sparse (block-diagonal) COO tensor
    decay = torch.exp(-lam[:, None] * t[None, :])  # (k, c)
    if phi.dim() == 3:  # B copies of one graph: batched dense products
        b, m, _ = phi.shape
        if b * m != n:
            raise ValueError(f"stacked phi {tuple(phi.shape)} does not cover the {n} rows of y")
        coef = phi.transpose(1, 2) @ y.reshape(b, m, c * f)  # (B, k, c f)
        coef = (coef.reshape(b, -1, c, f) * decay[None, :, :, None]).reshape(b, -1, c * f)
        return (phi @ coef).reshape(n, c, f)
    coef = (phi.transpose(0, 1) @ y.reshape(n, c * f)).reshape(-1, c, f)  # Φ^T y
    return (phi @ (coef * decay[..., None]).reshape(-1, c * f)).reshape(n, c, f)


def taylor_error_bound(t_lam_max: float, K: int) -> float:
    """Bound ``x^{K+1} / (K+1)!``, ``x = t λ_max``, on ``|exp(-tL) - sum_{k<=K} (-tL)^k/k!|``.

    For a symmetric ``L`` with spectrum in ``[0, λ_max]`` the operator-norm error is the largest
    error on one eigenvalue, and the Lagrange remainder of ``e^{-x}`` at ``x >= 0`` is
    ``e^{-ξ} x^{K+1} / (K+1)!`` with ``ξ in [0, x]``, so ``e^{-ξ} <= 1``: no ``e^{x}`` factor.
    """
    x = float(t_lam_max)
    if x < 0 or K < 0:
        raise ValueError("t_lam_max and K must be >= 0")
    return math.exp((K + 1) * math.log(x) - math.lgamma(K + 2)) if x > 0 else 0.0


def taylor_degree(t_lam_max: float, tol: float = 1e-8) -> int:
    """Smallest degree ``K`` whose Taylor bound :func:`taylor_error_bound` ``(x, K) <= tol``, ``x = t λ_max``.

    ``exp(-tL) ≈ sum_{k<=K} (-tL)^k / k!`` then has operator-norm error at most ``tol`` (symmetric
    ``L``, spectrum in ``[0, λ_max]``).
    """
    x = float(t_lam_max)
    if x < 0 or tol <= 0:
        raise ValueError("t_lam_max must be >= 0 and tol > 0")
    K = 0
    while taylor_error_bound(x, K) > tol:
        K += 1
    return K


def heat_kernel_taylor(y: Tensor, apply_L: Callable[[Tensor], Tensor] | Tensor,
                       t: Tensor | float, K: int) -> Tensor:
    """Truncated Taylor series ``sum_{k=0}^K (-t L)^k y / k!`` (Algorithm 1 of the paper).

    Parameters
    ----------
    y : Tensor, shape (n, c, f)
    apply_L : a dense/sparse ``(n, n)`` Laplacian or a function ``z (n, c*f) -> L z``
    t : scalar or shape (c,)
    K : int >= 0, degree; use :func:`taylor_degree` for a target accuracy

    Returns
    -------
    Tensor, shape (n, c, f). Exact heat kernel only when ``K`` is well above ``t λ_max``.
    """
    if K < 0:
        raise ValueError(f"K must be >= 0, got {K}")
    t = _per_bundle_t(t, y)
    Lop = (lambda z: apply_L @ z) if isinstance(apply_L, Tensor) else apply_L
    n, c, f = y.shape
    out, cur = y, y
    for k in range(1, K + 1):
        Lcur = Lop(cur.reshape(n, c * f)).reshape(n, c, f)
        cur = -(t[None, :, None] / k) * Lcur
        out = out + cur
    return out


def bundle_heat_kernel(x: Tensor, O: Tensor, lam: Tensor, phi: Tensor, t: Tensor | float) -> Tensor:
    """Bundle heat diffusion ``exp(-t L_B) x`` by sync → graph heat kernel → de-sync.

    Parameters
    ----------
    x : Tensor, shape (n, c, d, m)
    O : Tensor, shape (n, c, d, d)
    lam, phi : eigenpairs of the graph Laplacian (shapes (k,), (n, k))
    t : scalar or shape (c,)

    Returns
    -------
    Tensor, shape (n, c, d, m).
    """
    n, c, d, m = x.shape
    y = torch.einsum("ncij,ncjm->ncim", O, x)  # sync: y_v = O_v x_v
    z = heat_kernel_spectral(y.reshape(n, c, d * m), lam, phi, t).reshape(n, c, d, m)
    return torch.einsum("ncji,ncjm->ncim", O, z)  # de-sync: O_v^T z_v


# --------------------------------------------------------------------------------------------
# The BuNN layer
# --------------------------------------------------------------------------------------------
class SumGNN(nn.Module):
    """The paper's neighbour-aware frame network: ``Linear`` → ``layers`` x
    ``h ← h + GELU(W_s h + W_n Σ_{u~v} h_u)`` → ``Linear`` (indexable: ``self[-1]`` is the output layer).

    The neighbour sum is over the undirected edges of ``edge_index`` (no self-loops).
    """

    def __init__(self, in_dim: int, hidden: int, out_dim: int, layers: int = 1) -> None:
        super().__init__()
        self.inp = nn.Linear(in_dim, hidden)
        self.self_lin = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(layers))
        self.nbr_lin = nn.ModuleList(nn.Linear(hidden, hidden, bias=False) for _ in range(layers))
        self.out = nn.Linear(hidden, out_dim)

    def __getitem__(self, i: int) -> nn.Module:
        if i != -1:
            raise IndexError("only the output layer, [-1], is indexable")
        return self.out

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        h = nn.functional.gelu(self.inp(x))
        src, dst = edge_index
        for ws, wn in zip(self.self_lin, self.nbr_lin):
            nbr = torch.zeros_like(h).index_add_(0, dst, h[src])
            h = h + nn.functional.gelu(ws(h) + wn(nbr))
        return self.out(h)


class BuNNConv(MessagePassing):
    r"""One Bundle Neural Network layer (without the non-linearity).

    For features ``x`` of shape ``(n, c*d*m)`` it computes, per bundle ``b``,

    .. math:: x'_v = O_v^T \Big( W \sum_u H(t_b)_{vu} \, O_u x_u + \text{bias} \Big)

    with ``O_v = Orth(φ(x)_v)`` (an MLP ``φ`` whose last layer starts at zero) and
    ``H(t) = exp(-t L)`` the graph heat kernel, computed either spectrally from cached eigenpairs
    (``kernel="spectral"``; pass ``eig=(lam, phi)`` to ``forward``) or by a degree-``K`` Taylor
    series whose products ``L z = z - D^{-1/2} A D^{-1/2} z`` are message passing
    (``kernel="taylor"``). ``W`` is a Linear over all channels, applied after diffusing (as in the
    paper's code); it would commute with ``H`` only if every bundle had the same time ``t``, since a
    dense ``W`` mixes bundles diffused for different times. ``frames="identity"`` fixes ``O_v = I`` (the trivial bundle: a plain
    heat-diffusion GNN), the ablation that isolates the bundle.

    Parameters
    ----------
    channels : int, ``c * d * m``
    bundle_dim : int, ``d``
    num_bundles : int, ``c``
    t_init : float or sequence of ``c`` floats, initial diffusion times; ``t = relu(τ)`` is learned
        (``t_param="relu"``, the paper's code) or ``t = exp(τ)`` (``t_param="log"``: Adam's steps on
        ``τ`` are then relative changes of ``t``, so a time can move by decades in a few hundred steps)
    kernel : "spectral" | "taylor"
    K : int, Taylor degree (taylor only)
    t_max : float or None, clamp of the learned time (keeps Taylor in its safe range)
    frames : "learned" | "identity"
    orth : "householder" | "angle"
    phi_hidden : int, hidden width of φ
    phi_in : int or None, input width of φ (defaults to ``channels``; larger if a positional
        encoding is concatenated through ``forward(..., phi_input=...)``)
    phi_gnn : int, number of neighbour-aware "SumGNN" layers in φ (0: an MLP of the node's own
        features). Each is ``h ← h + GELU(W_s h + W_n Σ_{u~v} h_u)``, the paper's frame network; it
        needs the graph, passed as ``forward(..., phi_edge_index=...)``.
    sep : bool, the block of the paper's heterophily code (Platonov et al.'s ego/aggregate
        concatenation): after diffusing, a feed-forward network reads ``[x_v, z_v]`` (the input
        and the diffused synced features, concatenated), ``Linear(2C, C) → GELU → Linear(C, C)``,
        and its output is de-synced. ``False``: the Linear ``W`` on ``z`` alone.
    """

    def __init__(self, channels: int, bundle_dim: int = 2, num_bundles: int = 8,
                 t_init: float | Sequence[float] = 1.0, kernel: str = "spectral", K: int = 8,
                 t_max: float | None = None, frames: str = "learned", orth: str = "householder",
                 phi_hidden: int = 32, phi_in: int | None = None, phi_gnn: int = 0,
                 sep: bool = False, t_param: str = "relu") -> None:
        super().__init__(aggr="add")
        if kernel not in KERNELS:
            raise ValueError(f"unknown kernel {kernel!r}; valid: {', '.join(KERNELS)}")
        if frames not in FRAMES:
            raise ValueError(f"unknown frames {frames!r}; valid: {', '.join(FRAMES)}")
        if orth not in ORTHOGONAL_METHODS:
            raise ValueError(f"unknown orth {orth!r}; valid: {', '.join(ORTHOGONAL_METHODS)}")
        if channels % (bundle_dim * num_bundles):
            raise ValueError(f"channels={channels} must be divisible by bundle_dim*num_bundles="
                             f"{bundle_dim * num_bundles}")
        self.channels, self.d, self.c = channels, bundle_dim, num_bundles
        self.m = channels // (bundle_dim * num_bundles)
        if t_param not in ("relu", "log"):
            raise ValueError(f"unknown t_param {t_param!r}; valid: relu, log")
        self.kernel, self.K, self.t_max, self.frames, self.orth = kernel, K, t_max, frames, orth
        self.t_param = t_param
        t0 = torch.as_tensor(t_init, dtype=torch.float32).expand(num_bundles).clone()
        if t_param == "log" and (t0 <= 0).any():
            raise ValueError("t_param='log' needs t_init > 0")
        self.tau = nn.Parameter(t0.log() if t_param == "log" else t0)
        self.sep = sep
        self.lin: nn.Module = nn.Linear(channels, channels) if not sep else nn.Sequential(
            nn.Linear(2 * channels, channels), nn.GELU(), nn.Linear(channels, channels))
        n_par = num_orthogonal_params(bundle_dim) if orth == "householder" else 1
        self.phi: nn.Module | None = None
        if frames == "learned":
            self.phi = nn.Sequential(nn.Linear(phi_in or channels, phi_hidden), nn.GELU(),
                                     nn.Linear(phi_hidden, num_bundles * n_par)) if phi_gnn == 0 \
                else SumGNN(phi_in or channels, phi_hidden, num_bundles * n_par, phi_gnn)
            nn.init.zeros_(self.phi[-1].weight)  # start near a constant (trivial-like) bundle
            nn.init.normal_(self.phi[-1].bias, std=1.0)

    def diffusion_time(self) -> Tensor:
        """The per-bundle times ``t = relu(τ)`` or ``exp(τ)`` (clamped at ``t_max``), shape ``(c,)``."""
        t = torch.exp(self.tau) if self.t_param == "log" else torch.relu(self.tau)
        return t if self.t_max is None else t.clamp(max=self.t_max)

    def frames_of(self, x: Tensor, phi_input: Tensor | None = None,
                  phi_edge_index: Tensor | None = None) -> Tensor:
        """The orthogonal maps ``O``, shape ``(n, c, d, d)``."""
        n = x.shape[0]
        if self.phi is None:
            return torch.eye(self.d, dtype=x.dtype, device=x.device).expand(n, self.c, self.d, self.d)
        inp = x if phi_input is None else phi_input
        if isinstance(self.phi, SumGNN):
            if phi_edge_index is None:
                raise ValueError("a SumGNN frame network needs phi_edge_index")
            p = self.phi(inp, phi_edge_index).reshape(n, self.c, -1)
        else:
            p = self.phi(inp).reshape(n, self.c, -1)
        return orthogonal_from_params(p, self.d, self.orth)

    def laplacian_apply(self, z: Tensor, adj_t: Tensor) -> Tensor:
        """``L z = z - D^{-1/2} A D^{-1/2} z`` by one round of message passing; ``z: (n, F)``."""
        return z - self.propagate(adj_t, x=z)

    def message_and_aggregate(self, adj_t: Tensor, x: Tensor) -> Tensor:
        return _SymmetricSpMM.apply(adj_t, x)

    def forward(self, x: Tensor, edge_index: Tensor, eig: tuple[Tensor, Tensor] | None = None,
                phi_input: Tensor | None = None, return_frames: bool = False,
                phi_edge_index: Tensor | None = None):
        """Apply the layer.

        Parameters
        ----------
        x : Tensor, shape (n, c*d*m)
        edge_index : LongTensor (2, E), undirected, or the sparse normalised adjacency
            ``D^{-1/2} A D^{-1/2}`` from :func:`normalized_adjacency` (faster: built once)
        eig : (lam (k,), phi (n, k)), needed for ``kernel="spectral"``
        phi_input : Tensor (n, phi_in) or None, input of φ (defaults to ``x``)
        phi_edge_index : LongTensor (2, E), the graph for a SumGNN φ (``phi_gnn > 0``)

        Returns
        -------
        Tensor, shape (n, c*d*m) (and the frames ``(n, c, d, d)`` if ``return_frames``).
        """
        n = x.shape[0]
        O = self.frames_of(x, phi_input, phi_edge_index)
        v = x.reshape(n, self.c, self.d, self.m)
        y = torch.einsum("ncij,ncjm->ncim", O, v).reshape(n, self.c, self.d * self.m)  # sync
        t = self.diffusion_time().to(x.dtype)
        if self.kernel == "spectral":
            if eig is None:
                raise ValueError("kernel='spectral' needs eig=(lam, phi) from laplacian_eigh")
            z = heat_kernel_spectral(y, eig[0], eig[1], t)
        else:
            adj = edge_index if edge_index.is_sparse or edge_index.layout != torch.strided \
                else normalized_adjacency(edge_index, n, x.dtype)
            z = heat_kernel_taylor(y, lambda s: self.laplacian_apply(s, adj), t, self.K)
        z = z.reshape(n, self.channels)
        z = self.lin(torch.cat([x, z], -1) if self.sep else z).reshape(n, self.c, self.d, self.m)
        out = torch.einsum("ncji,ncjm->ncim", O, z).reshape(n, self.channels)  # de-sync
        return (out, O) if return_frames else out


class _SymmetricSpMM(torch.autograd.Function):
    """``A @ x`` for a *symmetric* sparse ``A``: the backward is ``A^T @ grad = A @ grad``.

    Five times faster than autograd through a CSR product, whose backward transposes ``A``. Only
    matrices from :func:`normalized_adjacency` reach it; they are symmetric by construction.
    """

    @staticmethod
    def forward(ctx, adj: Tensor, x: Tensor) -> Tensor:  # type: ignore[override]
        ctx.adj = adj
        return adj @ x

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[None, Tensor]:  # type: ignore[override]
        return None, ctx.adj @ grad


def normalized_adjacency(edge_index: Tensor, num_nodes: int, dtype: torch.dtype = torch.float32) -> Tensor:
    """Sparse CSR ``D^{-1/2} A D^{-1/2}`` (no self-loops), shape ``(n, n)``, so that ``L = I - Â``.

    The graph is made undirected and its self-loops dropped first (as in
    :func:`normalized_laplacian`), so the matrix is symmetric, which the backward of the layer's
    sparse product relies on. On ``edge_index``'s device. Pass it as ``edge_index`` to
    :class:`BuNNConv` to build it once per graph.
    """
    from torch_geometric.utils import degree, to_torch_csr_tensor

    ei = to_undirected(remove_self_loops(edge_index)[0], num_nodes=num_nodes)
    deg = degree(ei[0], num_nodes, dtype=dtype)
    dis = deg.pow(-0.5).masked_fill(deg == 0, 0)
    w = dis[ei[0]] * dis[ei[1]]
    return to_torch_csr_tensor(ei, w, size=(num_nodes, num_nodes))


# --------------------------------------------------------------------------------------------
# Models: a shared residual backbone with BuNN or baseline layers
# --------------------------------------------------------------------------------------------
MODELS = ("mlp", "gcn", "sage", "gin", "bunn", "bunn-identity")


class _LinearConv(nn.Module):
    """A graph-blind layer (the MLP baseline) with the ``conv(x, edge_index)`` signature."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.lin = nn.Linear(channels, channels)

    def forward(self, x: Tensor, edge_index: Tensor, **_: object) -> Tensor:
        return self.lin(x)


class NodeModel(nn.Module):
    """Encoder → ``layers`` residual blocks ``h ← h + GELU(conv(h))`` → linear readout.

    ``kind`` is one of ``mlp, gcn, sage, gin`` (torch-geometric layers: ``GCNConv``, ``SAGEConv``,
    ``GINConv``) or ``bunn`` / ``bunn-identity`` (:class:`BuNNConv` with learned or identity
    frames). ``pe_dim > 0``: a positional encoding ``pe`` is concatenated to the input (all
    models) and, for BuNN, also to φ's input. ``bunn_kwargs`` go to :class:`BuNNConv`.

    ``block="sep"``: ``h ← h + FF([LN(h), conv(LN(h))])``, the pre-LayerNorm residual block of
    Platonov et al. (2023) for GraphSAGE, in which a feed-forward network
    ``Linear(2C, C) → GELU → Linear(C, C)`` reads the ego features beside the aggregated ones. Every
    ``kind`` gets this concatenation here, so ``gcn`` with ``block="sep"`` is "GCN-sep", not
    Platonov et al.'s GCN module (``FF(conv(LN(h)))``, no ego features). For BuNN the concatenation
    happens inside the layer, before de-syncing, with the un-synced input (the paper's code
    concatenates the synced one). A final LayerNorm precedes the readout.
    ``block="plain"``: ``h ← h + GELU(conv(h))``.
    """

    def __init__(self, kind: str, in_dim: int, hidden: int, out_dim: int, layers: int = 2,
                 pe_dim: int = 0, dropout: float = 0.0, residual: bool = True,
                 block: str = "plain", **bunn_kwargs: object) -> None:
        super().__init__()
        if kind not in MODELS:
            raise ValueError(f"unknown model {kind!r}; valid: {', '.join(MODELS)}")
        if block not in ("plain", "sep", "res"):
            raise ValueError(f"unknown block {block!r}; valid: plain, sep, res")
        if block == "res" and kind in ("bunn", "bunn-identity"):
            raise ValueError("block='res' is for the message-passing baselines; BuNN takes block='sep'")
        self.kind, self.pe_dim, self.dropout, self.residual = kind, pe_dim, dropout, residual
        self.block = block
        self.enc = nn.Linear(in_dim + pe_dim, hidden)
        convs: list[nn.Module] = []
        for _ in range(layers):
            if kind == "mlp":
                convs.append(_LinearConv(hidden))
            elif kind == "gcn":
                convs.append(GCNConv(hidden, hidden))
            elif kind == "sage":
                convs.append(SAGEConv(hidden, hidden))
            elif kind == "gin":
                convs.append(GINConv(nn.Sequential(nn.Linear(hidden, hidden), nn.GELU(),
                                                   nn.Linear(hidden, hidden)), train_eps=True))
            else:
                frames = "identity" if kind == "bunn-identity" else "learned"
                convs.append(BuNNConv(hidden, frames=frames, phi_in=hidden + pe_dim,
                                      sep=block == "sep", **bunn_kwargs))  # type: ignore[arg-type]
        self.convs = nn.ModuleList(convs)
        sep_ff = block in ("sep", "res") and kind not in ("bunn", "bunn-identity")
        ff_in = 2 * hidden if block == "sep" else hidden
        self.ffs = nn.ModuleList(nn.Sequential(nn.Linear(ff_in, hidden), nn.GELU(), nn.Linear(hidden, hidden))
                                 for _ in range(layers)) if sep_ff else None
        self.norms = nn.ModuleList(nn.LayerNorm(hidden) for _ in range(layers + 1)) if block != "plain" else None
        self.dec = nn.Linear(hidden, out_dim)

    def forward(self, x: Tensor, edge_index: Tensor, pe: Tensor | None = None,
                eig: tuple[Tensor, Tensor] | None = None, adj: Tensor | None = None) -> Tensor:
        """``x (n, in_dim)``, ``edge_index (2, E)`` → ``(n, out_dim)``.

        Optional: ``pe (n, pe_dim)``; for BuNN, ``eig`` (spectral kernel) and ``adj`` (the cached
        :func:`normalized_adjacency`, Taylor kernel).
        """
        if self.pe_dim:
            if pe is None:
                raise ValueError("this model was built with pe_dim > 0: pass pe")
            x = torch.cat([x, pe], -1)
        h = self.enc(x)
        for i, conv in enumerate(self.convs):
            z = h if self.norms is None else self.norms[i](h)
            if isinstance(conv, BuNNConv):
                phi_in = z if not self.pe_dim else torch.cat([z, pe], -1)  # type: ignore[list-item]
                out = conv(z, edge_index if adj is None else adj, eig=eig, phi_input=phi_in,
                           phi_edge_index=edge_index)
            else:
                out = conv(z, edge_index)
                if self.ffs is not None:
                    out = self.ffs[i](torch.cat([z, out], -1) if self.block == "sep" else out)
            if self.block == "plain":
                out = nn.functional.gelu(out)
            out = nn.functional.dropout(out, self.dropout, self.training)
            h = h + out if self.residual else out
        return self.dec(h if self.norms is None else self.norms[-1](h))


# --------------------------------------------------------------------------------------------
# Diagnostics
# --------------------------------------------------------------------------------------------
def dirichlet_energy(x: Tensor, L: Tensor) -> Tensor:
    """Normalised Dirichlet energy ``tr(X^T L X) / tr(X^T X)``; ``x (N, F)``, ``L (N, N)``."""
    return torch.einsum("nf,nm,mf->", x, L, x) / (x * x).sum()
