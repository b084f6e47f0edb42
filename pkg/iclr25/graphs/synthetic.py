"""Offline graph data generators: the Minesweeper benchmark recipe and a barbell long-range task.

Both are regenerated procedurally (nothing is downloaded), as ``torch_geometric.data.Data``.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.utils import from_networkx, to_undirected


def grid_king_edges(height: int, width: int) -> Tensor:
    """Undirected edges of a ``height x width`` grid with 8-neighbour (king-move) adjacency.

    Node ``(i, j)`` has index ``i * width + j``. Returns a LongTensor ``(2, E)`` with both
    directions; interior nodes have degree 8, corners 3.
    """
    if height < 1 or width < 1:
        raise ValueError(f"grid needs height, width >= 1, got {height}x{width}")
    idx = np.arange(height * width).reshape(height, width)
    src, dst = [], []
    for di, dj in ((0, 1), (1, 0), (1, 1), (1, -1)):  # right, down and both diagonals
        rows = np.arange(height - di)
        cols = np.arange(max(0, -dj), width - max(0, dj))
        src.append(idx[np.ix_(rows, cols)].ravel())
        dst.append(idx[np.ix_(rows + di, cols + dj)].ravel())
    ei = torch.as_tensor(np.stack([np.concatenate(src), np.concatenate(dst)]), dtype=torch.long)
    return to_undirected(ei, num_nodes=height * width)


def minesweeper_graph(height: int = 100, width: int = 100, mine_frac: float = 0.2,
                      hide_frac: float = 0.5, split: tuple[float, float, float] = (0.5, 0.25, 0.25),
                      seed: int = 0) -> Data:
    """The Minesweeper node-classification benchmark (Platonov et al., 2023), regenerated.

    A ``height x width`` grid with king-move edges; ``mine_frac`` of the cells are mines (target
    1). Features: the one-hot number (0..8) of mines among a node's neighbours, except that for a
    random ``hide_frac`` of the nodes it is hidden (zeroed) and a separate "unknown" flag is set.
    Random train/val/test masks in proportions ``split``.

    Returns
    -------
    Data with ``x (n, 10)`` float, ``y (n,)`` long, ``edge_index``, ``train_mask``, ``val_mask``,
    ``test_mask`` (bool, disjoint), ``pos (n, 2)`` grid coordinates.
    """
    if not (0 < mine_frac < 1 and 0 <= hide_frac <= 1):
        raise ValueError("need 0 < mine_frac < 1 and 0 <= hide_frac <= 1")
    if abs(sum(split) - 1) > 1e-9:
        raise ValueError(f"split must sum to 1, got {split}")
    rng = np.random.default_rng(seed)
    n = height * width
    ei = grid_king_edges(height, width)
    mines = np.zeros(n, dtype=np.int64)
    mines[rng.choice(n, size=int(round(mine_frac * n)), replace=False)] = 1
    counts = np.bincount(ei[1].numpy(), weights=mines[ei[0].numpy()], minlength=n).astype(np.int64)
    x = np.zeros((n, 10), dtype=np.float32)
    x[np.arange(n), counts] = 1.0
    hidden = rng.random(n) < hide_frac
    x[hidden, :9] = 0.0
    x[hidden, 9] = 1.0
    perm = rng.permutation(n)
    n_tr, n_va = int(split[0] * n), int(split[1] * n)
    masks = [np.zeros(n, dtype=bool) for _ in range(3)]
    masks[0][perm[:n_tr]] = True
    masks[1][perm[n_tr:n_tr + n_va]] = True
    masks[2][perm[n_tr + n_va:]] = True
    ii, jj = np.divmod(np.arange(n), width)
    return Data(x=torch.from_numpy(x), y=torch.from_numpy(mines), edge_index=ei,
                train_mask=torch.from_numpy(masks[0]), val_mask=torch.from_numpy(masks[1]),
                test_mask=torch.from_numpy(masks[2]),
                pos=torch.as_tensor(np.stack([jj, ii], 1), dtype=torch.float32))


def fiedler_vector(edge_index: Tensor, num_nodes: int) -> Tensor:
    """The Fiedler vector (eigenvector of the 2nd smallest eigenvalue of the symmetric normalised
    Laplacian) of a connected graph, with the sign fixed so that its first entry is negative."""
    from iclr25.graphs.bundle import laplacian_eigh

    _, phi = laplacian_eigh(edge_index, num_nodes)
    f = phi[:, 1]
    return -f if f[0] > 0 else f


def barbell_long_range(m: int = 8, p: int = 4, n_graphs: int = 100, seed: int = 0,
                       paired: bool = False, wide: bool = False) -> list[Data]:
    """A long-range regression task on barbell graphs (two ``K_m`` joined by a path of ``p`` nodes).

    Every graph has the topology of ``networkx.barbell_graph(m, p)`` (nodes ``0..m-1``: clique A,
    ``m..m+p-1``: the path, ``m+p..2m+p-1``: clique B) and fresh features ``x_v ~ N(0, 1)``. The
    target of a clique-A node is the mean feature of clique B and vice versa: it can only be
    computed by moving information across the bridge. Path nodes are masked out of the loss.

    ``paired=True`` adds ``m`` edges that join node ``i`` of clique A to node ``i`` of clique B (the
    path stays). This removes the bottleneck, but not only it: every node of the other clique is then
    1 or 2 hops away instead of up to ``p + 3``, and ``pe``, as always the Fiedler vector of the graph,
    encodes a different graph (for ``p >= 4`` it no longer separates the cliques). Features, targets
    and scored nodes are those of the same ``seed`` without the pairing.

    ``wide=True`` removes only the bottleneck: ``m - 1`` more paths of ``p`` nodes each join node ``i`` of
    clique A to node ``i + 1`` of clique B (``i < m - 1``; the original path joins node ``m - 1`` of A to
    node 0 of B), so every clique node ends one of ``m`` disjoint bridges of the same length. The far clique
    stays ``p + 1`` to ``p + 2`` hops away (``p + 3`` on the barbell). The new path nodes are numbered after
    clique B and get features from a separate stream, so features, targets and scored nodes of the
    original nodes are those of the same ``seed``.

    Returns
    -------
    list of Data with ``x (n, 1)``, ``y (n,)``, ``mask (n,)`` bool, ``pe (n, 1)`` (the Fiedler
    vector, identical for all graphs), ``edge_index``; ``n = 2m + p`` (``2m + mp`` if ``wide``).
    """
    if m < 2 or p < 0 or n_graphs < 1:
        raise ValueError(f"need m >= 2, p >= 0, n_graphs >= 1, got m={m}, p={p}, n_graphs={n_graphs}")
    if paired and wide:
        raise ValueError("choose one of paired and wide")
    G = nx.barbell_graph(m, p)
    n0 = G.number_of_nodes()
    if paired:
        G.add_edges_from((i, m + p + i) for i in range(m))
    if wide:
        if p < 1:
            raise ValueError("wide needs p >= 1")
        nxt = n0
        for i in range(m - 1):
            chain = [i] + list(range(nxt, nxt + p)) + [m + p + i + 1]
            G.add_edges_from(zip(chain[:-1], chain[1:]))
            nxt += p
    n = G.number_of_nodes()
    ei = from_networkx(G).edge_index
    pe = fiedler_vector(ei, n).float()[:, None]
    A = torch.arange(m)
    B = torch.arange(m + p, 2 * m + p)
    mask = torch.zeros(n, dtype=torch.bool)
    mask[A] = mask[B] = True
    gen = torch.Generator().manual_seed(seed)
    gen_extra = torch.Generator().manual_seed(seed + 7919)
    out = []
    for _ in range(n_graphs):
        x = torch.randn(n0, 1, generator=gen)
        if n > n0:
            x = torch.cat([x, torch.randn(n - n0, 1, generator=gen_extra)])
        y = torch.zeros(n)
        y[A] = x[B, 0].mean()
        y[B] = x[A, 0].mean()
        out.append(Data(x=x, y=y, mask=mask, pe=pe, edge_index=ei, num_nodes=n))
    return out
