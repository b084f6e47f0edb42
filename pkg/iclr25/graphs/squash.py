"""Structural over-squashing diagnostics for a rewired mesh graph (chapter ``graphs/piorf``).

Reach (how many hops a message-passing network sees) and over-squashing (how little of a far node's input
survives the way through the graph's bottlenecks) are different things. These functions measure the second:

* :func:`effective_resistance`, the resistance distance between every pair of nodes when each edge is a unit
  resistor. Small resistance means many short, parallel paths; it bounds how well a message-passing network can
  mix the two nodes' information (Black et al., 2023), and adding an edge can only lower it (Rayleigh
  monotonicity);
* :func:`hop_distances`, all-pairs hop counts (``scipy.sparse.csgraph``);
* :func:`influence_by_hops`, the Jacobian magnitude of a network's outputs at some target nodes with respect to
  every input node, grouped by the input's hop distance from the target: the quantity over-squashing analyses
  bound (Topping et al., 2022).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.sparse as sp
import torch
from scipy.sparse.csgraph import shortest_path
from torch import Tensor
from torch_geometric.utils import get_laplacian, to_dense_adj

from iclr25.graphs.rewiring import node_influence


def effective_resistance(edge_index: Tensor, num_nodes: int) -> Tensor:
    """[N, N] float64 resistance distances ``R_uv = (e_u - e_v)^T L^+ (e_u - e_v)`` of a connected graph.

    ``L`` is the combinatorial Laplacian (``torch_geometric.utils.get_laplacian``, unit edge weights, edges stored
    in both directions); its pseudo-inverse is ``(L + J/N)^{-1} - J/N`` with ``J`` the all-ones matrix, exact for
    a connected graph."""
    ei, w = get_laplacian(edge_index.cpu(), num_nodes=num_nodes)
    lap = to_dense_adj(ei, edge_attr=w.double(), max_num_nodes=num_nodes)[0]
    j = torch.full_like(lap, 1.0 / num_nodes)
    pinv = torch.linalg.inv(lap + j) - j
    d = pinv.diagonal()
    return d[:, None] + d[None, :] - 2 * pinv


def hop_distances(edge_index: Tensor, num_nodes: int) -> np.ndarray:
    """[N, N] hop counts between all pairs (``inf`` between components), by breadth-first search."""
    ei = edge_index.cpu().numpy()
    adj = sp.coo_matrix((np.ones(ei.shape[1]), (ei[0], ei[1])), shape=(num_nodes, num_nodes)).tocsr()
    return shortest_path(adj, unweighted=True, directed=False)


def influence_by_hops(fn: Callable[[Tensor], Tensor], x: Tensor, targets: Tensor, dist: np.ndarray,
                      max_hops: int) -> np.ndarray:
    """Mean over ``targets`` of the Jacobian magnitude per hop distance.

    For each target ``v``, :func:`iclr25.graphs.rewiring.node_influence` gives ``sum_{k,c} |d fn(x)[v,k] / d x[u,c]|``
    for every input node ``u``; it is normalised to sum to one over ``u`` and summed over the nodes ``u`` at each
    hop distance ``dist[v, u]`` = 0, 1, ..., ``max_hops`` (the last bin holds every farther node).

    Returns
    -------
    ndarray, shape [max_hops + 1]: the mean share of a target's total input sensitivity per distance bin
    """
    out = np.zeros(max_hops + 1)
    for v in targets.tolist():
        infl = node_influence(fn, x, v).detach().cpu().double().numpy()
        share = infl / infl.sum()
        d = np.minimum(dist[v], max_hops)
        out += np.bincount(d.astype(int), weights=share, minlength=max_hops + 1)
    return out / len(targets)
