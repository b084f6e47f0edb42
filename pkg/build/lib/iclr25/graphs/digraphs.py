"""Random directed graphs, as torch-geometric ``Data`` objects.

Generators for the directed-graph chapters (multi-q magnetic Laplacian PEs):
:func:`random_digraph` is an Erdos-Renyi digraph, optionally acyclic (upper-triangular, then
randomly relabelled), restricted to its largest weakly connected component, as in the distance
datasets of Huang, Wang & Li (ICLR 2025), themselves after Geisler et al. (2023).
"""

from __future__ import annotations

from typing import Sequence

import networkx as nx
import numpy as np
import torch
from torch_geometric.data import Data

AVERAGE_DEGREES = {"acyclic": (1.0, 1.5, 2.0, 2.5, 3.0), "general": (1.0, 1.5, 2.0)}
"""Average degrees the distance datasets of the paper's code draw from, by graph family."""


def random_digraph(num_nodes: int, avg_degree: float, acyclic: bool,
                   rng: np.random.Generator, connected: bool = True) -> Data:
    """An Erdos-Renyi directed graph with edge probability ``avg_degree / (num_nodes - 1)``.

    Parameters
    ----------
    num_nodes : int
        Number of nodes before taking the largest weakly connected component (>= 2).
    avg_degree : float
        Expected out-degree of a node (of the full digraph; an acyclic one keeps about half).
    acyclic : bool
        If True keep only ``u < v`` edges, then relabel the nodes by a random permutation,
        giving a DAG whose topological order is hidden.
    rng : numpy.random.Generator
        The source of randomness.
    connected : bool
        Keep only the largest weakly connected component (relabelled ``0..n'-1``).

    Returns
    -------
    Data
        ``edge_index`` [2, m] (no self-loops, no duplicates) and ``num_nodes``.
    """
    if num_nodes < 2:
        raise ValueError(f"num_nodes must be >= 2, got {num_nodes}")
    if avg_degree <= 0:
        raise ValueError(f"avg_degree must be positive, got {avg_degree}")
    p = min(1.0, avg_degree / (num_nodes - 1))
    mat = rng.binomial(1, p, size=(num_nodes, num_nodes))
    np.fill_diagonal(mat, 0)
    if acyclic:
        mat = np.triu(mat, k=1)
        perm = rng.permutation(num_nodes)
        mat = mat[perm][:, perm]
    if connected:
        g = nx.from_numpy_array(mat, create_using=nx.DiGraph)
        keep = sorted(max(nx.weakly_connected_components(g), key=lambda c: (len(c), -min(c))))
        mat = mat[np.ix_(keep, keep)]
    src, dst = np.nonzero(mat)
    edge_index = torch.from_numpy(np.stack([src, dst])).long()
    return Data(edge_index=edge_index, num_nodes=int(mat.shape[0]))


def random_digraphs(num_graphs: int, n_range: tuple[int, int], acyclic: bool,
                    rng: np.random.Generator, avg_degrees: Sequence[float] | None = None,
                    min_nodes: int = 3) -> list[Data]:
    """``num_graphs`` random digraphs with ``n`` uniform in ``[n_range[0], n_range[1]]``.

    The average degree of each graph is drawn from ``avg_degrees`` (default
    :data:`AVERAGE_DEGREES` of the family); graphs whose largest weakly connected component has
    fewer than ``min_nodes`` nodes are redrawn.
    """
    if avg_degrees is None:
        avg_degrees = AVERAGE_DEGREES["acyclic" if acyclic else "general"]
    lo, hi = n_range
    if not 2 <= lo <= hi:
        raise ValueError(f"n_range must satisfy 2 <= lo <= hi, got {n_range}")
    out: list[Data] = []
    while len(out) < num_graphs:
        n = int(rng.integers(lo, hi + 1))
        deg = float(rng.choice(np.asarray(avg_degrees, dtype=float)))
        g = random_digraph(n, deg, acyclic, rng)
        if g.num_nodes >= min_nodes:
            out.append(g)
    return out
