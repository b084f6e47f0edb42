"""Tests of iclr25.graphs.synthetic: the Minesweeper recipe and the barbell long-range task."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import torch
from torch_geometric.utils import degree, to_networkx

from iclr25.graphs.synthetic import barbell_long_range, grid_king_edges, minesweeper_graph


@pytest.mark.parametrize("h,w", [(1, 1), (3, 5), (7, 7)])
def test_king_grid_matches_networkx(h, w):
    ei = grid_king_edges(h, w)
    G = nx.grid_2d_graph(h, w)
    G.add_edges_from(((i, j), (i + 1, j + dj)) for i in range(h - 1) for j in range(w)
                     for dj in (-1, 1) if 0 <= j + dj < w)
    assert ei.shape[1] == 2 * G.number_of_edges()
    ours = {tuple(e) for e in ei.T.tolist()}
    ref = {(i * w + j, k * w + l) for (i, j), (k, l) in G.edges()}
    assert ours == ref | {(b, a) for a, b in ref}


def test_minesweeper_recipe():
    d = minesweeper_graph(30, 20, seed=3)
    n = 600
    deg = degree(d.edge_index[0], n)
    assert int(deg.max()) == 8 and int(deg.min()) == 3  # interior and corners
    assert int(d.y.sum()) == 120  # exactly 20 % mines
    hidden = d.x[:, 9] == 1
    assert abs(hidden.float().mean().item() - 0.5) < 0.1
    assert torch.all(d.x[hidden, :9] == 0) and torch.all(d.x[~hidden, :9].sum(1) == 1)
    # the visible number is the count of neighbouring mines
    counts = torch.zeros(n, dtype=torch.float32).index_add_(0, d.edge_index[1], d.y[d.edge_index[0]].float())
    assert torch.equal(d.x[~hidden, :9].argmax(1).float(), counts[~hidden])
    masks = torch.stack([d.train_mask, d.val_mask, d.test_mask]).int()
    assert torch.all(masks.sum(0) == 1) and int(d.train_mask.sum()) == 300
    # same seed, same graph
    assert torch.equal(minesweeper_graph(30, 20, seed=3).x, d.x)
    with pytest.raises(ValueError):
        minesweeper_graph(5, 5, mine_frac=1.5)


def test_barbell_task():
    graphs = barbell_long_range(m=5, p=3, n_graphs=4, seed=0)
    g = graphs[0]
    G = to_networkx(g, to_undirected=True)
    assert nx.is_isomorphic(G, nx.barbell_graph(5, 3))
    A, B = torch.arange(5), torch.arange(8, 13)
    assert torch.allclose(g.y[A], g.x[B, 0].mean().expand(5))
    assert torch.allclose(g.y[B], g.x[A, 0].mean().expand(5))
    assert g.mask.sum() == 10 and not g.mask[5:8].any()
    # the Fiedler vector separates the cliques and is antisymmetric under the mirror map
    pe = g.pe[:, 0].numpy()
    assert np.allclose(pe, -pe[::-1], atol=1e-6) and pe[0] < 0 < pe[-1]
    assert not torch.equal(graphs[0].x, graphs[1].x)  # fresh features per graph
    with pytest.raises(ValueError):
        barbell_long_range(m=1)


def test_barbell_paired_adds_the_pairing_edges_and_keeps_the_task():
    plain = barbell_long_range(m=5, p=3, n_graphs=2, seed=1)
    paired = barbell_long_range(m=5, p=3, n_graphs=2, seed=1, paired=True)
    G = to_networkx(paired[0], to_undirected=True)
    expected = nx.barbell_graph(5, 3)
    expected.add_edges_from((i, 8 + i) for i in range(5))
    assert nx.is_isomorphic(G, expected) and G.number_of_edges() == nx.barbell_graph(5, 3).number_of_edges() + 5
    for a, b in zip(plain, paired):  # the same features, targets and scored nodes
        assert torch.equal(a.x, b.x) and torch.equal(a.y, b.y) and torch.equal(a.mask, b.mask)


def test_barbell_wide_has_m_disjoint_bridges_of_length_p_and_keeps_the_task():
    m, p = 5, 3
    plain = barbell_long_range(m=m, p=p, n_graphs=2, seed=1)
    wide = barbell_long_range(m=m, p=p, n_graphs=2, seed=1, wide=True)
    G = to_networkx(wide[0], to_undirected=True)
    n0 = 2 * m + p
    assert G.number_of_nodes() == 2 * m + m * p
    A, B = set(range(m)), set(range(m + p, n0))
    # removing the two cliques leaves m paths of p nodes, each joining one A node to one B node
    bridges = G.subgraph(set(G) - A - B)
    comps = list(nx.connected_components(bridges))
    assert len(comps) == m and all(len(c) == p for c in comps)
    ends = [sorted(u for v in c for u in G[v] if u in A | B) for c in comps]
    assert all(len(e) == 2 and e[0] in A and e[1] in B for e in ends)
    assert sorted(e[0] for e in ends) == sorted(A) and sorted(e[1] for e in ends) == sorted(B)
    # the minimum cut between the cliques is m edges (no bottleneck); distances as on the barbell, minus one
    assert nx.edge_connectivity(G, 0, n0 - 1) == m
    d = dict(nx.single_source_shortest_path_length(G, 0))
    assert max(d[b] for b in B) == p + 2 and min(d[b] for b in B) == p + 1
    for a, b in zip(plain, wide):  # the same features, targets and scored nodes on the barbell's nodes
        assert torch.equal(a.x, b.x[:n0]) and torch.equal(a.y, b.y[:n0]) and torch.equal(a.mask, b.mask[:n0])
        assert not b.mask[n0:].any()
    with pytest.raises(ValueError):
        barbell_long_range(m=m, p=p, paired=True, wide=True)
