"""Graph rewiring by edge addition: PIORF and its controls.

* :func:`piorf_sources` + :func:`piorf_partners`: PIORF (Yu et al., ICLR 2025). The ``ratio * N``
  nodes of lowest Ollivier-Ricci node curvature (the bottlenecks) are joined, at every time step,
  to the node whose velocity differs most from theirs.
* :func:`random_partners`: the same sources joined to uniformly random nodes (same edge count).
* :func:`fosr_edges`: a topology-only rewiring in the style of FoSR (Karhadkar et al., ICLR 2023):
  greedily add the non-edge that most increases the spectral gap, to first order.

All rewirings return edge sets with both directions, deduplicated and without self-loops.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as sla
import torch
from torch import Tensor
from torch_geometric.utils import coalesce, degree, remove_self_loops, to_undirected

PARTNER_RULES = ("speed", "projection", "max_speed")


def add_edges(edge_index: Tensor, src: Tensor, dst: Tensor, num_nodes: int) -> Tensor:
    """Union of ``edge_index`` and the undirected edges ``src[k] -- dst[k]``.

    Returns
    -------
    Tensor, shape [2, E']
        Both directions of every edge, sorted, deduplicated, self-loops removed.
    """
    new = torch.stack([src.long(), dst.long()])
    ei = torch.cat([edge_index.long(), new, new.flip(0)], dim=1)
    ei, _ = remove_self_loops(ei)
    return coalesce(ei, num_nodes=num_nodes)


def piorf_sources(node_curv: Tensor, ratio: float = 0.03) -> Tensor:
    """The ``floor(ratio * N)`` nodes of lowest curvature, most negative first.

    Parameters
    ----------
    node_curv : Tensor, shape [N]
        Node curvature (mean Ollivier-Ricci curvature of incident edges).
    ratio : float
        Pooling ratio ``rho`` in ``[0, 1]`` (PIORF uses 3 %).

    Returns
    -------
    LongTensor, shape [floor(ratio * N)]
    """
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"ratio must lie in [0, 1], got {ratio}")
    k = int(np.floor(ratio * node_curv.numel() + 1e-9))
    return torch.argsort(node_curv, stable=True)[:k]


def piorf_partners(velocity: Tensor, sources: Tensor, rule: str = "speed",
                   weight: Tensor | None = None) -> Tensor:
    """PIORF's physics partner of each source node, from the current velocity field.

    Parameters
    ----------
    velocity : Tensor, shape [N, 2]
        Input velocity of the current time step (after training noise; never the target).
    sources : LongTensor, shape [K]
    rule : {"speed", "projection", "max_speed"}
        ``"speed"``: ``argmax_j | |u_j| - |u_s| |`` (this chapter's default);
        ``"projection"``: ``argmax_j |f_j - f_s|`` with ``f = u @ weight``, a 1-D projection (the
        official code, where the projection is an untrained linear layer);
        ``"max_speed"``: every source joins the fastest node (the paper's Fig. 1).
    weight : Tensor, shape [2], optional
        Projection for ``rule="projection"``.

    Returns
    -------
    LongTensor, shape [K]
    """
    if rule not in PARTNER_RULES:
        raise ValueError(f"unknown partner rule {rule!r}; valid rules: {', '.join(PARTNER_RULES)}")
    if rule == "max_speed":
        return velocity.norm(dim=1).argmax().repeat(sources.numel())
    if rule == "projection":
        if weight is None:
            raise ValueError("rule='projection' needs a weight of shape [2]")
        f = velocity @ weight.to(velocity)
    else:
        f = velocity.norm(dim=1)
    # |f_j - f_s| is maximal at the global max or min of f: no N x K distance matrix needed
    hi, lo = f.argmax(), f.argmin()
    fs = f[sources]
    return torch.where(f[hi] - fs >= fs - f[lo], hi, lo)


def random_partners(sources: Tensor, num_nodes: int, generator: torch.Generator | None = None) -> Tensor:
    """A uniformly random partner ``!= s`` for each source ``s`` (the same number of new edges).

    Returns
    -------
    LongTensor, shape [K]
    """
    r = torch.randint(0, num_nodes - 1, (sources.numel(),), generator=generator)
    return r + (r >= sources).long()  # skip the source itself


def fosr_edges(edge_index: Tensor, num_nodes: int, num_edges: int) -> Tensor:
    """Topology-only edge addition in the style of FoSR (first-order spectral rewiring).

    Let ``x`` be the second eigenvector of ``D^-1/2 A D^-1/2`` (the Fiedler direction). Adding
    the edge ``(u, v)`` changes the spectral gap by about ``-2 x_u x_v / sqrt((d_u+1)(d_v+1))``
    to first order, so the non-edge minimising ``y_u y_v`` with ``y = x / sqrt(d + 1)`` is
    added; then degrees are updated and ``x`` is refreshed by one power iteration, ``num_edges``
    times. Unlike the official code (a few power iterations from a random vector), ``x`` starts
    from the exact eigenvector (``scipy.sparse.linalg.eigsh``), so the result is deterministic.

    Returns
    -------
    LongTensor, shape [2, num_edges]
        The added undirected edges (one direction each).
    """
    ei = coalesce(to_undirected(remove_self_loops(edge_index.long())[0], num_nodes=num_nodes))
    row, col = ei.numpy()
    adj = sp.csr_matrix((np.ones(row.size), (row, col)), shape=(num_nodes, num_nodes))
    deg = np.asarray(adj.sum(1)).ravel()
    dis = 1 / np.sqrt(deg)
    norm_adj = sp.diags(dis) @ adj @ sp.diags(dis)
    vals, vecs = sla.eigsh(norm_adj, k=2, which="LA", v0=np.sqrt(deg) + 0.01 * np.arange(num_nodes) / num_nodes)
    x = vecs[:, np.argsort(vals)[0]]
    dense = adj.toarray().astype(bool)
    np.fill_diagonal(dense, True)
    added = []
    for _ in range(num_edges):
        y = x / np.sqrt(deg + 1)
        prod = np.where(dense, np.inf, np.outer(y, y))
        u, v = np.unravel_index(np.argmin(prod), prod.shape)
        added.append((u, v))
        dense[u, v] = dense[v, u] = True
        adj = adj + sp.csr_matrix(([1.0, 1.0], ([u, v], [v, u])), shape=adj.shape)
        deg[u] += 1
        deg[v] += 1
        # one power iteration of (I + D^-1/2 A D^-1/2) with the top eigenvector sqrt(d) deflated
        s = np.sqrt(deg)
        x = x - x.dot(s) * s / deg.sum()
        x = x + (adj @ (x / s)) / s
        x /= np.linalg.norm(x)
    return torch.as_tensor(np.array(added, dtype=np.int64).T.reshape(2, -1))


def hop_coverage(edge_index: Tensor, num_nodes: int, hops: int) -> float:
    """Fraction of ordered node pairs ``(u, v)``, ``u != v``, within ``hops`` hops."""
    row, col = edge_index.long().numpy()
    adj = sp.csr_matrix((np.ones(row.size), (row, col)), shape=(num_nodes, num_nodes))
    reach = sp.identity(num_nodes, format="csr")
    step = (adj + sp.identity(num_nodes)).astype(bool).astype(np.float64)
    for _ in range(hops):
        reach = (reach @ step).astype(bool).astype(np.float64)
    return float((reach.nnz - num_nodes) / (num_nodes * (num_nodes - 1)))


def mean_degree(edge_index: Tensor, num_nodes: int) -> float:
    """Mean number of neighbours (edges stored in both directions)."""
    return float(degree(edge_index[0], num_nodes).mean())
