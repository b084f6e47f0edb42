"""Graph rewiring by edge addition: PIORF and its controls.

* :func:`piorf_sources` + :func:`piorf_partners`: PIORF (Yu et al., ICLR 2025). The ``ratio * N``
  nodes of lowest Ollivier-Ricci node curvature (the bottlenecks) are joined, at every time step,
  to the node whose velocity differs most from theirs.
* :func:`random_partners`: the same sources joined to uniformly random nodes (same edge count).
* :func:`central_node`: the hub control's partner, one fixed central node for every source (a
  virtual node made of a mesh node: the same sources, no velocity).
* :func:`fosr_edges`: a topology-only rewiring in the style of FoSR (Karhadkar et al., ICLR 2023):
  greedily add the non-edge that most increases the spectral gap, to first order.

All rewirings return edge sets with both directions, deduplicated and without self-loops.
Receptive-field diagnostics: :func:`hop_coverage`, :func:`hop_ball` and :func:`node_influence`
(the Jacobian of an output node with respect to the input nodes).

Tensors come back on the device of the input tensors; the graph algorithms that run in scipy move
their inputs to the CPU and their results back.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import scipy.sparse as sp
import scipy.sparse.csgraph as csgraph
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


def new_edges(edge_index: Tensor, src: Tensor, dst: Tensor, num_nodes: int) -> Tensor:
    """The edges that :func:`add_edges` adds to ``edge_index``, as a separate edge set.

    Returns
    -------
    Tensor, shape [2, A]
        Both directions of every edge ``src[k] -- dst[k]`` that is not a self-loop and not already
        in ``edge_index``, sorted and deduplicated.
    """
    new = torch.stack([src.long(), dst.long()])
    ei, _ = remove_self_loops(torch.cat([new, new.flip(0)], dim=1))
    ei = coalesce(ei, num_nodes=num_nodes)
    old = edge_index[0].long() * num_nodes + edge_index[1].long()
    return ei[:, ~torch.isin(ei[0] * num_nodes + ei[1], old)]


def piorf_sources(node_curv: Tensor, ratio: float = 0.03, tiebreak: Tensor | None = None,
                  decimals: int = 9) -> Tensor:
    """The ``floor(ratio * N)`` nodes of lowest curvature, most negative first.

    Two nodes whose neighbourhoods are alike have the same curvature up to round-off that depends
    on the order of their neighbours, so curvatures are compared after rounding to ``decimals``
    decimals, and equal values are ordered by ``tiebreak`` (a key that does not depend on the node
    numbering, such as a coordinate), then by index. With a ``tiebreak`` that has no ties among
    them, renumbering the nodes renumbers the sources.

    Parameters
    ----------
    node_curv : Tensor, shape [N]
        Node curvature (mean Ollivier-Ricci curvature of incident edges).
    ratio : float
        Pooling ratio ``rho`` in ``[0, 1]`` (PIORF uses 3 %).
    tiebreak : Tensor, shape [N] or [N, k], optional
        Secondary sort key, ascending (lexicographic over the ``k`` columns, e.g. positions).
    decimals : int
        Curvatures equal to this many decimals count as tied.

    Returns
    -------
    LongTensor, shape [floor(ratio * N)], on ``node_curv``'s device
    """
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"ratio must lie in [0, 1], got {ratio}")
    k = int(np.floor(ratio * node_curv.numel() + 1e-9))
    key = torch.round(node_curv.to(torch.float64) * 10.0**decimals)
    order = torch.arange(key.numel(), device=key.device)
    if tiebreak is not None:
        cols = tiebreak.to(key.device).reshape(key.numel(), -1)
        for c in reversed(range(cols.shape[1])):  # least significant column first
            order = order[torch.argsort(cols[order, c], stable=True)]
    return order[torch.argsort(key[order], stable=True)][:k]


def _masked(values: Tensor, candidates: Tensor | None, fill: float) -> Tensor:
    """``values`` with the entries outside the boolean mask ``candidates`` replaced by ``fill``."""
    if candidates is None:
        return values
    if candidates.dtype != torch.bool or candidates.shape != values.shape:
        raise ValueError("candidates must be a boolean mask of shape [N]")
    if not bool(candidates.any()):
        raise ValueError("candidates selects no node")
    return torch.where(candidates.to(values.device), values, torch.full_like(values, fill))


def piorf_partners(velocity: Tensor, sources: Tensor, rule: str = "speed",
                   weight: Tensor | None = None, candidates: Tensor | None = None) -> Tensor:
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
    candidates : BoolTensor, shape [N], optional
        The nodes that may be partners (default: all). Pass the fluid nodes: every wall node has
        speed 0, so over all nodes the slowest node is a tie that ``argmin`` breaks by index.
        Exact ties among candidates are still broken by index.

    Returns
    -------
    LongTensor, shape [K], on ``velocity``'s device
    """
    if rule not in PARTNER_RULES:
        raise ValueError(f"unknown partner rule {rule!r}; valid rules: {', '.join(PARTNER_RULES)}")
    sources = sources.to(velocity.device)
    if rule == "max_speed":
        return _masked(velocity.norm(dim=1), candidates, -torch.inf).argmax().repeat(sources.numel())
    if rule == "projection":
        if weight is None:
            raise ValueError("rule='projection' needs a weight of shape [2]")
        f = velocity @ weight.to(velocity)
    else:
        f = velocity.norm(dim=1)
    # |f_j - f_s| is maximal at the max or the min of f over the candidates: no N x K matrix needed
    hi = _masked(f, candidates, -torch.inf).argmax()
    lo = _masked(f, candidates, torch.inf).argmin()
    fs = f[sources]
    return torch.where(f[hi] - fs >= fs - f[lo], hi, lo)


def random_partners(sources: Tensor, num_nodes: int, generator: torch.Generator | None = None,
                    candidates: Tensor | None = None) -> Tensor:
    """A uniformly random partner ``!= s`` for each source ``s`` (the same number of new edges).

    Partners are drawn among ``candidates`` (a boolean mask [N]; default: all nodes), uniformly,
    the source itself excluded. The draw uses ``generator`` on its own device, and the result is
    moved to ``sources``' device.

    Returns
    -------
    LongTensor, shape [K]
    """
    dev = generator.device if generator is not None else torch.device("cpu")
    if candidates is None:
        candidates = torch.ones(num_nodes, dtype=torch.bool)
    cand = torch.nonzero(candidates.to(dev)).flatten()  # candidate nodes, sorted
    src = sources.to(dev).long()
    pos = torch.searchsorted(cand, src)  # rank of s among the candidates
    inside = (pos < cand.numel()) & (cand[pos.clamp(max=cand.numel() - 1)] == src)
    count = cand.numel() - inside.long()
    if bool((count < 1).any()):
        raise ValueError("a source has no candidate partner other than itself")
    r = (torch.rand(src.numel(), generator=generator, device=dev, dtype=torch.float64) * count).long()
    r = r + (inside & (r >= pos)).long()  # skip the source itself
    return cand[r].to(sources.device)


def central_node(edge_index: Tensor, num_nodes: int, candidates: Tensor | None = None) -> int:
    """The closeness centre: the node (among ``candidates``) with the smallest mean hop distance
    to all nodes; exact ties broken by index. The partner of every source in the hub control.
    """
    row, col = edge_index.long().cpu().numpy()
    adj = sp.csr_matrix((np.ones(row.size), (row, col)), shape=(num_nodes, num_nodes))
    hops = csgraph.shortest_path(adj, unweighted=True, directed=False)
    total = torch.as_tensor(hops.sum(1))
    if candidates is not None:
        total = _masked(total, candidates.cpu(), np.inf)
    return int(total.argmin())


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
    LongTensor, shape [2, num_edges], on ``edge_index``'s device
        The added undirected edges (one direction each).
    """
    ei = coalesce(to_undirected(remove_self_loops(edge_index.long().cpu())[0], num_nodes=num_nodes))
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
    return torch.as_tensor(np.array(added, dtype=np.int64).T.reshape(2, -1), device=edge_index.device)


def _adjacency(edge_index: Tensor, num_nodes: int) -> sp.csr_matrix:
    """Unit-weight CSR adjacency of ``edge_index`` (on the CPU, in numpy)."""
    row, col = edge_index.long().cpu().numpy()
    return sp.csr_matrix((np.ones(row.size), (row, col)), shape=(num_nodes, num_nodes))


def hop_coverage(edge_index: Tensor, num_nodes: int, hops: int | Sequence[int]) -> float | list[float]:
    """Fraction of ordered node pairs ``(u, v)``, ``u != v``, within ``hops`` hops.

    An ``L``-block message-passing network computes node ``v``'s output from exactly the nodes
    within ``L`` hops, so this is the share of input-output pairs it can connect at all. For one
    ``hops`` the ``L``-hop reachability is built by ``L`` sparse products; for a sequence, all hop
    distances are computed once (breadth-first search from every node) and a list is returned.
    """
    adj = _adjacency(edge_index, num_nodes)
    pairs = num_nodes * (num_nodes - 1)
    if not isinstance(hops, int):
        dist = csgraph.shortest_path(adj, unweighted=True, directed=False)
        return [float(((dist <= h).sum() - num_nodes) / pairs) for h in hops]
    reach = sp.identity(num_nodes, format="csr")
    step = (adj + sp.identity(num_nodes)).astype(bool).astype(np.float64)
    for _ in range(hops):
        reach = (reach @ step).astype(bool).astype(np.float64)
    return float((reach.nnz - num_nodes) / pairs)


def hop_ball(edge_index: Tensor, num_nodes: int, center: int, hops: int) -> Tensor:
    """Boolean mask [N] of the nodes within ``hops`` hops of ``center`` (on ``edge_index``'s device)."""
    dist = csgraph.shortest_path(_adjacency(edge_index, num_nodes), unweighted=True, indices=int(center))
    return torch.as_tensor(dist <= hops, device=edge_index.device)


def node_influence(fn: Callable[[Tensor], Tensor], x: Tensor, target: int) -> Tensor:
    """How strongly each input node reaches one output node: ``sum_{k, c} |d fn(x)[target, k] / d x[u, c]|``.

    The Jacobian that over-squashing analyses bound (Topping et al., 2022). For an ``L``-block
    message-passing ``fn`` it is exactly zero for every ``u`` more than ``L`` hops from
    ``target``: its support is the receptive field.

    Parameters
    ----------
    fn : callable, [N, C] -> [N, K]
    x : Tensor, shape [N, C]
    target : int

    Returns
    -------
    Tensor, shape [N], on ``x``'s device
    """
    x = x.detach().requires_grad_(True)
    out = fn(x)[target]
    rows = [torch.autograd.grad(out[k], x, retain_graph=k + 1 < out.numel())[0] for k in range(out.numel())]
    return torch.stack(rows).abs().sum(dim=(0, 2))


def mean_degree(edge_index: Tensor, num_nodes: int) -> float:
    """Mean number of neighbours (edges stored in both directions)."""
    return float(degree(edge_index[0], num_nodes).mean())
