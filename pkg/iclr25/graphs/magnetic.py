"""Magnetic Laplacians, walk profiles and multi-q positional encodings for directed graphs.

After Huang, Wang & Li, "What Are Good Positional Encodings for Directed Graphs?" (ICLR 2025).

Conventions (those of the paper's code): for a directed adjacency ``A`` (``A[u, v] = 1`` for an
edge ``u -> v``, self-loops dropped, duplicates merged) and a potential ``q``, with
``omega = exp(2 pi i q)``,

* magnetic adjacency ``A_q = omega A + conj(omega) A^T`` (Hermitian);
* total degree ``d = (A + A^T) 1``;
* normalised magnetic Laplacian ``L_q = I - D^{-1/2} A_q D^{-1/2}``, unnormalised ``D - A_q``;
* walk profile ``Phi[l, k, u, v]`` = number of walks ``u -> v`` of length ``l`` that take ``k``
  edges forwards and ``l - k`` backwards, so that ``omega^l (A_q^l)_{uv} = sum_k Phi[l, k] omega^{2k}``.

Contents: the operators, brute-force and multi-q (inverse DFT) walk profiles, the PE transforms
(multi-q / single-q magnetic, symmetrised Laplacian, SVD) as torch-geometric ``BaseTransform`` classes,
the basis-invariant (SPE-style) pair features, and a small pair regressor that consumes them.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import Tensor, nn
from torch_geometric.data import Data
from torch_geometric.loader import DataLoader
from torch_geometric.nn import MLP
from torch_geometric.transforms import BaseTransform
from torch_geometric.utils import degree, remove_self_loops, to_dense_adj, to_dense_batch

# --------------------------------------------------------------------------------------------
# Operators
# --------------------------------------------------------------------------------------------


def dense_adjacency(edge_index: Tensor, num_nodes: int) -> Tensor:
    """Binary directed adjacency ``A`` [n, n] (float64): ``A[u, v] = 1`` iff ``u -> v``.

    Self-loops are dropped and repeated edges merged.
    """
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise ValueError(f"edge_index must have shape [2, m], got {tuple(edge_index.shape)}")
    if num_nodes < 1:
        raise ValueError(f"num_nodes must be >= 1, got {num_nodes}")
    ei, _ = remove_self_loops(edge_index)
    if ei.numel() == 0:
        return torch.zeros(num_nodes, num_nodes, dtype=torch.float64, device=edge_index.device)
    a = to_dense_adj(ei, max_num_nodes=num_nodes)[0].to(torch.float64)
    return a.clamp(max=1.0)


def magnetic_adjacency(edge_index: Tensor, num_nodes: int, q: float) -> Tensor:
    """Hermitian magnetic adjacency ``A_q = omega A + conj(omega) A^T``, ``omega = e^{2 pi i q}``.

    Returns a complex128 tensor [n, n]. A reciprocal pair ``u <-> v`` gets ``2 cos(2 pi q)``.
    """
    a = dense_adjacency(edge_index, num_nodes).to(torch.complex128)
    omega = complex(math.cos(2 * math.pi * q), math.sin(2 * math.pi * q))
    return omega * a + omega.conjugate() * a.T


def magnetic_laplacian(edge_index: Tensor, num_nodes: int, q: float,
                       normalized: bool = True) -> Tensor:
    """Magnetic Laplacian of a directed graph (complex128, Hermitian, [n, n]).

    ``normalized=True``: ``L_q = I - D^{-1/2} A_q D^{-1/2}`` (eigenvalues in [0, 2]; isolated nodes
    get a 1 on the diagonal); ``normalized=False``: ``L_q = D - A_q`` (positive semi-definite).
    ``D`` is the total (in + out) degree. ``q = 0`` gives the Laplacian of ``A + A^T``.
    On ``edge_index``'s device.
    """
    if not isinstance(normalized, bool):
        raise ValueError(f"normalized must be True or False, got {normalized!r}")
    a_q = magnetic_adjacency(edge_index, num_nodes, float(q))
    a = dense_adjacency(edge_index, num_nodes)
    deg = (a + a.T).sum(1)
    if not normalized:
        return torch.diag(deg).to(torch.complex128) - a_q
    inv_sqrt = torch.where(deg > 0, deg.clamp(min=1e-300).rsqrt(), torch.zeros_like(deg))
    eye = torch.eye(num_nodes, dtype=torch.complex128, device=a_q.device)
    return eye - inv_sqrt[:, None] * a_q * inv_sqrt[None, :]


def total_degree(edge_index: Tensor, num_nodes: int) -> Tensor:
    """Total degree ``d = (A + A^T) 1`` [n] (float64) used by :func:`magnetic_laplacian`."""
    a = dense_adjacency(edge_index, num_nodes)
    return (a + a.T).sum(1)


# --------------------------------------------------------------------------------------------
# Walk profiles
# --------------------------------------------------------------------------------------------


def walk_profile(edge_index: Tensor, num_nodes: int, max_len: int) -> Tensor:
    """Walk profile by brute force: enumerate every word ``b in {0,1}^l`` of forward (1) and
    backward (0) steps and add the matrix product ``M_{b_1} ... M_{b_l}`` (``M_1 = A``,
    ``M_0 = A^T``) to the bin ``k = |b|``.

    Returns
    -------
    Tensor
        int64 ``Phi`` [max_len + 1, max_len + 1, n, n]; ``Phi[l, k, u, v]`` counts the walks
        ``u -> v`` of length ``l`` with exactly ``k`` forward steps (zero for ``k > l``).
    """
    if max_len < 0:
        raise ValueError(f"max_len must be >= 0, got {max_len}")
    a = dense_adjacency(edge_index, num_nodes).long()
    dev = a.device
    steps = torch.stack([a.T, a])                       # [2, n, n]: backward, forward
    phi = torch.zeros(max_len + 1, max_len + 1, num_nodes, num_nodes, dtype=torch.long, device=dev)
    words = torch.eye(num_nodes, dtype=torch.long, device=dev)[None]  # products of all words of length l
    ones = torch.zeros(1, dtype=torch.long, device=dev)  # forward-step count of each word
    phi[0, 0] = words[0]
    for length in range(1, max_len + 1):
        # every word of length l-1 followed by a backward step, then by a forward step
        words = torch.einsum("wij,sjk->swik", words, steps).reshape(-1, num_nodes, num_nodes)
        ones = torch.cat([ones, ones + 1])
        phi[length].index_add_(0, ones, words)
    return phi


def dft_potentials(max_len: int, device: torch.device | str | None = None) -> Tensor:
    """The potentials ``q_j = j / (2 (L + 1))``, ``j = 0..L``: ``omega_j^2`` are the (L+1)-th
    roots of unity, so profiles up to length ``L`` are an inverse DFT away."""
    return torch.arange(max_len + 1, dtype=torch.float64, device=device) / (2 * (max_len + 1))


def _profiles_from_magnetic_adjacencies(a_qs: Tensor, qs: Tensor, max_len: int) -> Tensor:
    """Solve ``omega_j^l (A_{q_j}^l)_{uv} = sum_k Phi[l, k, u, v] omega_j^{2k}`` for each length.

    ``a_qs`` [Q, n, n] complex; least squares (minimum norm if under-determined). Returns the
    real part of the solution, float64 [max_len + 1, max_len + 1, n, n] (not rounded).
    """
    n, dev = a_qs.size(-1), a_qs.device
    omega = torch.exp(2j * math.pi * qs.to(dev, torch.float64))        # [Q]
    out = torch.zeros(max_len + 1, max_len + 1, n, n, dtype=torch.float64, device=dev)
    power = torch.eye(n, dtype=torch.complex128, device=dev).expand_as(a_qs).clone()
    for length in range(max_len + 1):
        if length > 0:
            power = power @ a_qs
        y = (omega ** length)[:, None, None] * power                       # [Q, n, n]
        ks = torch.arange(length + 1, dtype=torch.float64, device=dev)
        f = omega[:, None] ** (2 * ks[None, :])                          # [Q, l + 1]
        sol = torch.linalg.pinv(f) @ y.reshape(len(qs), -1)              # [l + 1, n * n]
        out[length, : length + 1] = sol.real.reshape(length + 1, n, n)
    return out


def potential_rank(qs: Sequence[float] | Tensor, length: int, tol: float = 1e-9) -> int:
    """Rank of the *real*-linear map from a real profile ``Phi(length, .)`` to the measurements
    ``Y_j = omega_j^l (A_{q_j}^l)_{uv} = sum_k Phi_k omega_j^{2k}`` at the potentials ``qs``.

    Over ``C`` the Vandermonde matrix ``F_jk = omega_j^{2k}`` has rank = number of distinct
    ``omega_j^2``; but a profile is real, so a potential whose ``omega^2`` is the conjugate of
    another's (``q`` and ``1/2 - q``) measures nothing new: the rank here is that of
    ``[Re F; Im F]`` (``2Q x (l + 1)``). Linear recovery of every real profile needs rank ``l + 1``.
    """
    qs_t = torch.as_tensor(qs, dtype=torch.float64).reshape(-1)
    ks = torch.arange(length + 1, dtype=torch.float64)
    f = torch.exp(2j * math.pi * 2 * qs_t[:, None] * ks[None, :])
    return int(torch.linalg.matrix_rank(torch.cat([f.real, f.imag]), atol=tol))


def walk_profile_from_potentials(edge_index: Tensor, num_nodes: int, max_len: int,
                                 qs: Sequence[float] | Tensor | None = None) -> Tensor:
    """Walk profile recovered from the magnetic adjacencies at the potentials ``qs`` alone.

    With ``Q >= l + 1`` distinct values of ``omega_j^2`` the recovery of length ``l`` is exact
    (the default ``qs`` is :func:`dft_potentials`); with fewer it is the minimum-norm solution of
    an under-determined system and in general wrong. Returns float64 [L+1, L+1, n, n], unrounded.
    """
    dev = edge_index.device
    qs_t = dft_potentials(max_len, dev) if qs is None else torch.as_tensor(qs, dtype=torch.float64, device=dev)
    a_qs = torch.stack([magnetic_adjacency(edge_index, num_nodes, float(q)) for q in qs_t])
    return _profiles_from_magnetic_adjacencies(a_qs, qs_t, max_len)


def walk_profile_from_pe(eigvecs: Tensor, eigvals: Tensor, deg: Tensor,
                         qs: Sequence[float] | Tensor, max_len: int) -> Tensor:
    """Walk profile recovered from a full multi-q PE of the *normalised* magnetic Laplacian.

    Rebuilds ``A_q = D^{1/2} (I - U diag(lambda) U^H) D^{1/2}`` for each ``q`` and inverts the DFT.

    Parameters
    ----------
    eigvecs : Tensor
        complex [n, Q, n], all eigenvectors of each ``L_{q_j}``.
    eigvals : Tensor
        real [Q, n], the eigenvalues.
    deg : Tensor
        [n], total degrees (:func:`total_degree`).
    """
    n = eigvecs.size(0)
    u = eigvecs.permute(1, 0, 2).to(torch.complex128)                    # [Q, n, n]
    lap = u @ (eigvals.to(torch.complex128)[:, :, None] * u.conj().transpose(1, 2))
    sq = deg.to(torch.float64).sqrt().to(torch.complex128)
    eye = torch.eye(n, dtype=torch.complex128, device=u.device)
    a_qs = sq[None, :, None] * (eye - lap) * sq[None, None, :]
    return _profiles_from_magnetic_adjacencies(
        a_qs, torch.as_tensor(qs, dtype=torch.float64, device=a_qs.device), max_len)


def path_distances_from_profile(phi: Tensor) -> tuple[Tensor, Tensor]:
    """Directed shortest and longest walk lengths up to ``L`` read off a walk profile.

    ``SPD[u, v]`` = smallest ``l >= 1`` with ``Phi[l, l, u, v] > 0`` (a directed walk of length
    ``l``); ``LPD`` = the largest such ``l <= L``; 0 where none exists. Both int64 [n, n].
    """
    directed = torch.stack([phi[length, length] for length in range(1, phi.size(0))]) > 0
    lengths = torch.arange(1, phi.size(0), device=phi.device)[:, None, None]
    spd = torch.where(directed, lengths, phi.size(0)).min(0).values
    spd = torch.where(directed.any(0), spd, torch.zeros_like(spd))
    lpd = torch.where(directed, lengths, 0).max(0).values
    return spd, lpd


# --------------------------------------------------------------------------------------------
# Positional encodings (torch-geometric transforms)
# --------------------------------------------------------------------------------------------


MATRICES = ("laplacian", "adjacency")


def magnetic_eigenpairs(edge_index: Tensor, num_nodes: int, qs: Sequence[float],
                        k: int | None = None, normalized: bool = True,
                        matrix: str = "laplacian") -> tuple[Tensor, Tensor]:
    """The ``k`` smallest eigenpairs of ``L_q`` for each ``q`` (dense ``torch.linalg.eigh``).

    ``matrix="adjacency"`` decomposes the magnetic adjacency ``A_q`` instead (an ablation, not
    the paper's PE). Returns ``U`` complex128 [n, Q, k] and ``lambda`` float64 [Q, k]; if
    ``k > n`` the extra columns are zero (vectors) and zero (values), which adds nothing to
    ``U f(lambda) U^H``.
    """
    k = num_nodes if k is None else int(k)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if matrix not in MATRICES:
        raise ValueError(f"unknown matrix {matrix!r}; valid: {', '.join(MATRICES)}")
    vecs, vals = [], []
    for q in qs:
        mat = (magnetic_laplacian(edge_index, num_nodes, float(q), normalized)
               if matrix == "laplacian" else magnetic_adjacency(edge_index, num_nodes, float(q)))
        lam, u = torch.linalg.eigh(mat)
        m = min(k, num_nodes)
        pad_u = torch.zeros(num_nodes, k, dtype=torch.complex128, device=u.device)
        pad_l = torch.zeros(k, dtype=torch.float64, device=u.device)
        pad_u[:, :m], pad_l[:m] = u[:, :m], lam[:m]
        vecs.append(pad_u)
        vals.append(pad_l)
    return torch.stack(vecs, 1), torch.stack(vals)


class AddMagneticLaplacianPE(BaseTransform):
    """Multi-q magnetic Laplacian PE: eigenpairs of ``L_{q_1}, ..., L_{q_Q}``.

    Stores ``data.pe_U`` complex64 [n, Q, k] and ``data.pe_lambda`` float32 [1, Q, k] (graph
    level: batches stack to [B, Q, k]). One ``q`` gives the single-q Mag-PE; ``qs=(0,)`` the
    symmetrised Laplacian PE.

    Parameters
    ----------
    qs : sequence of float
        The potentials. The paper's code uses ``q_j = j q_0``, ``j = 1..Q``.
    k : int
        Eigenpairs kept per ``q`` (smallest eigenvalues; zero-padded on small graphs).
    normalized : bool
        Normalised (default, as in the paper) or unnormalised Laplacian.
    matrix : str
        ``"laplacian"`` (the paper's PE) or ``"adjacency"`` (eigenpairs of ``A_q``, an ablation).
    """

    def __init__(self, qs: Sequence[float], k: int, normalized: bool = True,
                 matrix: str = "laplacian") -> None:
        if len(qs) == 0:
            raise ValueError("qs must hold at least one potential")
        if matrix not in MATRICES:
            raise ValueError(f"unknown matrix {matrix!r}; valid: {', '.join(MATRICES)}")
        self.qs = [float(q) for q in qs]
        self.k = int(k)
        self.normalized = normalized
        self.matrix = matrix

    def forward(self, data: Data) -> Data:
        u, lam = magnetic_eigenpairs(data.edge_index, data.num_nodes, self.qs, self.k,
                                     self.normalized, self.matrix)
        data.pe_U = u.to(torch.complex64)
        data.pe_lambda = lam.to(torch.float32)[None]
        return data

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(qs={self.qs}, k={self.k})"


class AddSymLaplacianPE(AddMagneticLaplacianPE):
    """Symmetrised-Laplacian PE (Lap-PE): the ``q = 0`` magnetic Laplacian, i.e. the normalised
    Laplacian of ``A + A^T``. Same storage as :class:`AddMagneticLaplacianPE` with ``Q = 1``."""

    def __init__(self, k: int) -> None:
        super().__init__(qs=(0.0,), k=k)


class AddSVDPE(BaseTransform):
    """SVD PE: the top-``k`` singular triplets ``A = U diag(sigma) V^T`` of the adjacency.

    Stores ``data.svd_U``, ``data.svd_V`` float32 [n, k] and ``data.svd_sigma`` [1, k]
    (zero-padded when ``k > n``).
    """

    def __init__(self, k: int) -> None:
        self.k = int(k)

    def forward(self, data: Data) -> Data:
        n = data.num_nodes
        u, s, vh = torch.linalg.svd(dense_adjacency(data.edge_index, n))
        m, dev = min(self.k, n), u.device
        pu, pv = torch.zeros(n, self.k, device=dev), torch.zeros(n, self.k, device=dev)
        ps = torch.zeros(self.k, device=dev)
        pu[:, :m], pv[:, :m], ps[:m] = u[:, :m].float(), vh.T[:, :m].float(), s[:m].float()
        data.svd_U, data.svd_V, data.svd_sigma = pu, pv, ps[None]
        return data


class AddWalkProfileTarget(BaseTransform):
    """Regression target: the walk profile at length ``length`` of every ordered pair.

    Stores ``data.y_pairs`` float32 [n * n, length + 1], rows in row-major ``(u, v)`` order,
    column ``k`` = ``Phi[length, k, u, v]`` (brute force, :func:`walk_profile`).
    """

    def __init__(self, length: int) -> None:
        self.length = int(length)

    def forward(self, data: Data) -> Data:
        phi = walk_profile(data.edge_index, data.num_nodes, self.length)[self.length]
        data.y_pairs = phi.permute(1, 2, 0).reshape(-1, self.length + 1).float()
        return data


def random_phases(eigvecs: Tensor, generator: torch.Generator) -> Tensor:
    """Multiply every eigenvector (last axis of ``eigvecs`` [..., n, Q, k]) by an independent
    random phase ``e^{i theta}``: a symmetry of the eigendecomposition that a PE network must
    not see. The phases are drawn on the generator's device; the result is on the input's."""
    theta = 2 * math.pi * torch.rand(eigvecs.shape[-2:], generator=generator, dtype=torch.float64,
                                     device=generator.device)
    return eigvecs * torch.exp(1j * theta).to(eigvecs.device, eigvecs.dtype)


# --------------------------------------------------------------------------------------------
# Basis-invariant use of eigenvectors and the pair regressor
# --------------------------------------------------------------------------------------------


def weighted_gram(left: Tensor, right: Tensor, weights: Tensor) -> tuple[Tensor, Tensor]:
    """Basis-invariant pair features ``P_c = L diag(w_c) R^H`` (SPE, complex version).

    Parameters
    ----------
    left, right : Tensor
        [B, N, Q, k], real or complex eigenvectors (``left = right = U`` for a Hermitian PE).
    weights : Tensor
        real [B, Q, k, C], the values ``phi_c(lambda)``.

    Returns
    -------
    (Tensor, Tensor)
        real and imaginary parts, each [B, N, N, Q, C]:
        ``P[b, u, v, q, c] = sum_k w[b, q, k, c] left[b, u, q, k] conj(right[b, v, q, k])``.
        Unchanged when ``left, right -> left R, right R`` with ``R`` unitary and commuting with
        ``diag(w)`` (phases, rotations inside eigenspaces).
    """
    lr, li = (left.real, left.imag) if left.is_complex() else (left, torch.zeros_like(left))
    rr, ri = (right.real, right.imag) if right.is_complex() else (right, torch.zeros_like(right))
    bsz, n, nq, k = left.shape
    c = weights.size(-1)
    w2 = torch.cat([weights, weights], 2)[:, :, :, None, :]              # [B, Q, 2k, 1, C]
    r = torch.cat([rr, ri], -1).permute(0, 2, 3, 1)[..., None]           # [B, Q, 2k, N, 1]
    z = (r * w2).reshape(bsz, nq, 2 * k, n * c)                          # [B, Q, 2k, N C]
    l_re = torch.cat([lr, li], -1).transpose(1, 2)                       # [B, Q, N, 2k]
    l_im = torch.cat([li, -lr], -1).transpose(1, 2)
    re = (l_re @ z).reshape(bsz, nq, n, n, c).permute(0, 2, 3, 1, 4)     # [B, N, N, Q, C]
    im = (l_im @ z).reshape(bsz, nq, n, n, c).permute(0, 2, 3, 1, 4)
    return re, im


ENCODERS = ("none", "magnetic", "svd", "naive")


class PairRegressor(nn.Module):
    """Predict a vector for every ordered node pair ``(u, v)`` of each graph from a PE.

    ``f(u, v) = MLP([deg(u), deg(v), 1{u=v}, pair features])``, with in/out degrees as the only
    node features. Encoders:

    * ``"none"``: no PE;
    * ``"magnetic"``: stable, basis-invariant: ``[Re, Im] U diag(phi_c(lambda)) U^H`` for each
      ``q`` and channel ``c``, ``phi`` an MLP on eigenvalues (uses ``pe_U``, ``pe_lambda``;
      the symmetrised Laplacian PE is the ``q = 0`` case);
    * ``"svd"``: stable, ``U phi_c(sigma) V^T``, its transpose, ``U phi U^T``, ``V phi V^T``;
    * ``"naive"``: the raw ``[Re U, Im U]`` and eigenvalues of each node through an MLP to
      ``h_u`` (width ``phi_hidden``), and the pair features ``[h_u, h_v, h_u^T B_j h_v]`` with ``2 Q C`` learned bilinear
      forms ``B_j`` (as many as the stable encoder's features). A bilinear form of linear node
      features can represent ``Re, Im sum_k w_k U_uk conj(U_vk)`` (what the stable encoder computes);
      the model is not invariant to eigenvector phases.

    ``forward`` returns standardised outputs [num_pairs, out_dim] in the order of
    ``data.y_pairs``; :meth:`predict` undoes the standardisation.
    """

    def __init__(self, encoder: str, num_q: int = 1, k: int = 1, channels: int = 8,
                 hidden: int = 64, out_dim: int = 5, phi_hidden: int = 32) -> None:
        super().__init__()
        if encoder not in ENCODERS:
            raise ValueError(f"unknown encoder {encoder!r}; valid: {', '.join(ENCODERS)}")
        self.encoder, self.num_q, self.k = encoder, num_q, k
        pair_dim = 5
        if encoder in ("magnetic", "svd"):
            self.phi = MLP([1, phi_hidden, phi_hidden, channels], norm=None)
            # magnetic: Re and Im for each q; svd: four real products
            pair_dim += (2 * num_q if encoder == "magnetic" else 4) * channels
        elif encoder == "naive":
            self.node_mlp = MLP([3 * num_q * k, hidden, phi_hidden], norm=None)
            n_forms = 2 * num_q * channels
            self.bilinear = nn.Parameter(torch.randn(n_forms, phi_hidden, phi_hidden) / phi_hidden)
            pair_dim += 2 * phi_hidden + n_forms
        self.head = MLP([pair_dim, hidden, hidden, out_dim], norm=None)
        self.register_buffer("y_mean", torch.zeros(out_dim))
        self.register_buffer("y_std", torch.ones(out_dim))

    def _pair_inputs(self, batch: Data) -> Tensor:
        n_all = batch.num_nodes
        deg = torch.stack([degree(batch.edge_index[1], n_all), degree(batch.edge_index[0], n_all)], 1)
        x, mask = to_dense_batch(deg.float(), batch.batch)                  # [B, N, 2]
        bsz, n = mask.shape
        eye = torch.eye(n, device=x.device).expand(bsz, n, n)[..., None]
        feats = [x[:, :, None].expand(bsz, n, n, 2), x[:, None].expand(bsz, n, n, 2), eye]
        if self.encoder == "magnetic":
            u, _ = to_dense_batch(batch.pe_U.reshape(n_all, -1), batch.batch)
            u = u.reshape(bsz, n, self.num_q, -1)
            w = self.phi(batch.pe_lambda[..., None])                       # [B, Q, k, C]
            re, im = weighted_gram(u, u, w)
            feats += [re.flatten(3), im.flatten(3)]
        elif self.encoder == "svd":
            uu, _ = to_dense_batch(batch.svd_U, batch.batch)
            vv, _ = to_dense_batch(batch.svd_V, batch.batch)
            w = self.phi(batch.svd_sigma[:, None, :, None])                # [B, 1, k, C]
            uu, vv = uu[:, :, None], vv[:, :, None]
            for a, b in ((uu, vv), (vv, uu), (uu, uu), (vv, vv)):
                feats.append(weighted_gram(a, b, w)[0].flatten(3))
        elif self.encoder == "naive":
            u = batch.pe_U.reshape(n_all, -1)
            lam = batch.pe_lambda.reshape(batch.pe_lambda.size(0), -1)[batch.batch]
            h, _ = to_dense_batch(self.node_mlp(torch.cat([u.real, u.imag, lam], 1)), batch.batch)
            hd = h.size(-1)
            forms = torch.einsum("bud,jde,bve->buvj", h, self.bilinear, h)  # h_u^T B_j h_v
            feats += [h[:, :, None].expand(bsz, n, n, hd), h[:, None].expand(bsz, n, n, hd), forms]
        pair_mask = mask[:, :, None] & mask[:, None, :]
        return torch.cat(feats, -1)[pair_mask]

    def forward(self, batch: Data) -> Tensor:
        return self.head(self._pair_inputs(batch))

    @torch.no_grad()
    def predict(self, batch: Data) -> Tensor:
        """Predictions in target units [num_pairs, out_dim]."""
        return self(batch) * self.y_std + self.y_mean


def train_pair_regressor(model: PairRegressor, train: list[Data], steps: int, batch_size: int,
                         lr: float, seed: int, device: torch.device | str = "cpu",
                         stop_after: int | None = None) -> list[float]:
    """Adam with a cosine schedule over ``steps`` on the MSE of standardised ``y_pairs``; returns
    the loss per step.

    The target mean and standard deviation over all training pairs are stored in the model.
    ``stop_after`` stops after that many steps of the same schedule (to re-run the start of a
    recorded training run).
    """
    y = torch.cat([g.y_pairs for g in train])
    model.y_mean.copy_(y.mean(0))
    model.y_std.copy_(y.std(0).clamp(min=1e-6))
    model.to(device).train()
    gen = torch.Generator().manual_seed(seed)
    loader = DataLoader(train, batch_size=batch_size, shuffle=True, generator=gen)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    losses: list[float] = []
    while len(losses) < steps:
        for batch in loader:
            batch = batch.to(device)
            target = (batch.y_pairs - model.y_mean) / model.y_std
            loss = torch.nn.functional.mse_loss(model(batch), target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            losses.append(loss.item())
            if len(losses) >= min(steps, stop_after or steps):
                return losses
    return losses


@torch.no_grad()
def predict_pairs(model: PairRegressor, graphs: list[Data], batch_size: int = 64,
                  device: torch.device | str = "cpu") -> tuple[Tensor, Tensor]:
    """Predictions and targets ``y_pairs`` of all pairs of ``graphs`` (each [P, out_dim], CPU)."""
    model.to(device).eval()
    preds, trues = [], []
    for batch in DataLoader(graphs, batch_size=batch_size, shuffle=False):
        batch = batch.to(device)
        preds.append(model.predict(batch).cpu())
        trues.append(batch.y_pairs.cpu())
    return torch.cat(preds), torch.cat(trues)


def rmse(pred: Tensor, true: Tensor) -> float:
    """Root mean squared error over all entries."""
    return float(torch.sqrt(torch.mean((pred - true) ** 2)))
