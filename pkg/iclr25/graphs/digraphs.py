"""Random directed graphs and sorting networks, as torch-geometric ``Data`` objects.

Generators for the directed-graph chapters (multi-q magnetic Laplacian PEs):

* :func:`random_digraph`: an Erdos-Renyi digraph, optionally acyclic (upper-triangular, then
  randomly relabelled), restricted to its largest weakly connected component, as in the
  distance datasets of Huang, Wang & Li (ICLR 2025), themselves after Geisler et al. (2023).
* :func:`sorting_network` / :func:`is_sorting_network` / :func:`sorting_network_graph`: random
  comparator networks grown until they sort, checked with the 0-1 principle, and their DAG.
"""

from __future__ import annotations

import itertools
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


def is_sorting_network(comparators: Sequence[tuple[int, int]], num_wires: int) -> bool:
    """Whether the comparator network sorts every input (0-1 principle: test all 2^w bit vectors).

    A comparator ``(i, j)`` with ``i < j`` puts the minimum on wire ``i`` and the maximum on ``j``.
    """
    x = np.array(list(itertools.product((0, 1), repeat=num_wires)), dtype=np.int8)  # [2^w, w]
    for i, j in comparators:
        lo, hi = np.minimum(x[:, i], x[:, j]), np.maximum(x[:, i], x[:, j])
        x[:, i], x[:, j] = lo, hi
    return bool(np.all(np.diff(x, axis=1) >= 0))


def sorting_network(num_wires: int, rng: np.random.Generator,
                    max_comparators: int = 10_000) -> list[tuple[int, int]]:
    """Add uniformly random comparators ``(i < j)`` until the network sorts (0-1 principle).

    The check is incremental: the 2^w bit vectors are pushed through each new comparator once.
    """
    if num_wires < 2:
        raise ValueError(f"num_wires must be >= 2, got {num_wires}")
    x = np.array(list(itertools.product((0, 1), repeat=num_wires)), dtype=np.int8)
    comps: list[tuple[int, int]] = []
    while not np.all(np.diff(x, axis=1) >= 0):
        if len(comps) >= max_comparators:
            raise RuntimeError("no sorting network found within max_comparators")
        i, j = sorted(rng.choice(num_wires, size=2, replace=False).tolist())
        lo, hi = np.minimum(x[:, i], x[:, j]), np.maximum(x[:, i], x[:, j])
        x[:, i], x[:, j] = lo, hi
        comps.append((i, j))
    return comps


def sorting_network_graph(comparators: Sequence[tuple[int, int]], num_wires: int) -> Data:
    """The DAG of a comparator network: one node per comparator, an edge from the previous
    comparator on each of its two wires.

    Node features ``x`` [m, 3]: (position / m, i / (w - 1), j / (w - 1)).
    """
    last = [-1] * num_wires
    src: list[int] = []
    dst: list[int] = []
    for t, (i, j) in enumerate(comparators):
        for w in (i, j):
            if last[w] >= 0:
                src.append(last[w])
                dst.append(t)
            last[w] = t
    m = len(comparators)
    edge_index = torch.tensor([src, dst], dtype=torch.long).reshape(2, -1)
    edge_index = torch.unique(edge_index, dim=1) if edge_index.numel() else edge_index
    x = torch.tensor([[t / max(m, 1), i / (num_wires - 1), j / (num_wires - 1)]
                      for t, (i, j) in enumerate(comparators)], dtype=torch.float32)
    return Data(x=x, edge_index=edge_index, num_nodes=m)


def sorting_network_dataset(wires: Sequence[int], per_wires: int, rng: np.random.Generator,
                            reversed_too: bool = False) -> list[Data]:
    """Balanced sorting-network satisfiability data.

    For each wire count and each of ``per_wires`` draws: the random sorting network (label 1) and
    the same network without its last comparator (label 0: it does not sort, since the generator
    stops at the first sorting prefix). With ``reversed_too``, also the two networks with their
    comparator order reversed, labelled by testing them.
    """
    out: list[Data] = []
    for w in wires:
        for _ in range(per_wires):
            comps = sorting_network(w, rng)
            nets = [comps, comps[:-1]]
            if reversed_too:
                nets += [comps[::-1], comps[:-1][::-1]]
            for c in nets:
                g = sorting_network_graph(c, w)
                g.y = torch.tensor([float(is_sorting_network(c, w))])
                g.num_wires = w
                out.append(g)
    return out
