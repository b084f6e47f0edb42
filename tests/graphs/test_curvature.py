"""Ollivier-Ricci curvature: closed forms, symmetry, node curvature, and POT agreement."""

import networkx as nx
import numpy as np
import ot
import pytest
import torch
from torch_geometric.utils import from_networkx

from iclr25.graphs.curvature import exact_w1, node_curvature, ollivier_ricci, tree_edge_curvature


def _kappa(g, alpha=0.5):
    d = from_networkx(nx.convert_node_labels_to_integers(g, ordering="sorted"))
    return ollivier_ricci(d.edge_index, g.number_of_nodes(), alpha), d.edge_index


@pytest.mark.parametrize("n", [3, 4, 5, 8])
def test_complete_graph(n):
    k, _ = _kappa(nx.complete_graph(n))
    assert torch.allclose(k, torch.full_like(k, n / (2 * (n - 1))), atol=1e-12)


@pytest.mark.parametrize("n", [6, 7, 10])
def test_cycle_is_flat(n):
    k, _ = _kappa(nx.cycle_graph(n))
    assert k.abs().max() < 1e-12


@pytest.mark.parametrize("dx,dy", [(2, 2), (3, 4), (5, 3)])
@pytest.mark.parametrize("alpha", [0.0, 0.5])
def test_tree_edge_jost_liu(dx, dy, alpha):
    g = nx.Graph([(0, 1)] + [(0, 10 + i) for i in range(dx - 1)] + [(1, 20 + i) for i in range(dy - 1)])
    k, ei = _kappa(g, alpha)
    mask = (ei[0] == 0) & (ei[1] == 1)
    kappa0 = -2 * max(1 - 1 / dx - 1 / dy, 0)
    assert abs(k[mask].item() - (1 - alpha) * kappa0) < 1e-12


@pytest.mark.parametrize("alpha", [0.0, 0.25, 0.5, 0.9])
def test_tree_closed_form_on_random_trees_with_leaves(alpha):
    """kappa = min(2 alpha, -2 (1 - alpha)(1 - 1/d_x - 1/d_y)) on every edge of a tree."""
    g = nx.random_labeled_tree(30, seed=4)
    k, ei = _kappa(g, alpha)
    deg = dict(g.degree)
    for (u, v), val in zip(ei.T.tolist(), k.tolist()):
        assert abs(val - tree_edge_curvature(deg[u], deg[v], alpha)) < 1e-12


def test_lazy_tree_curvature_is_scaled_jost_liu_only_without_leaves():
    for dx in range(1, 6):
        for dy in range(1, 6):
            scaled = 0.5 * -2 * max(1 - 1 / dx - 1 / dy, 0)
            same = abs(tree_edge_curvature(dx, dy, 0.5) - scaled) < 1e-12
            assert same == (dx >= 2 and dy >= 2), (dx, dy)
    assert tree_edge_curvature(1, 4, 0.5) == 0.25  # a leaf edge: 1/d_y, not 0
    with pytest.raises(ValueError, match="degrees"):
        tree_edge_curvature(0, 3)


def test_barbell_bridge():
    k, ei = _kappa(nx.barbell_graph(5, 0))
    assert abs(k[(ei[0] == 4) & (ei[1] == 5)].item() + 0.6) < 1e-12


def test_symmetric_and_direction_free():
    g = nx.random_geometric_graph(60, 0.25, seed=1)
    k, ei = _kappa(g)
    rev = {(int(a), int(b)): float(v) for a, b, v in zip(ei[0], ei[1], k)}
    assert all(abs(rev[(b, a)] - v) < 1e-12 for (a, b), v in rev.items())
    one_way = ei[:, ei[0] < ei[1]]
    k1 = ollivier_ricci(one_way, g.number_of_nodes())
    assert torch.allclose(k1, k[ei[0] < ei[1]])


def test_matches_a_direct_pot_computation():
    """Reference: all-pairs hop distances and ot.emd2 on every edge, the textbook way."""
    g = nx.convert_node_labels_to_integers(nx.random_geometric_graph(40, 0.3, seed=3))
    dist = dict(nx.all_pairs_shortest_path_length(g))
    k, ei = _kappa(g, alpha=0.3)
    for (u, v), val in zip(ei.T.tolist(), k.tolist()):
        su, sv = [u, *g[u]], [v, *g[v]]
        mu = np.r_[0.3, np.full(len(su) - 1, 0.7 / (len(su) - 1))]
        nu = np.r_[0.3, np.full(len(sv) - 1, 0.7 / (len(sv) - 1))]
        cost = np.array([[dist[a][b] for b in sv] for a in su], dtype=float)
        assert abs(val - (1 - ot.emd2(mu, nu, cost))) < 1e-10


def test_exact_w1_agrees_with_emd2():
    rng = np.random.default_rng(0)
    for _ in range(20):
        a, b = rng.random(5), rng.random(7)
        a, b = a / a.sum(), b / b.sum()
        m = rng.integers(0, 4, (5, 7)).astype(float)
        assert abs(exact_w1(a, b, m) - ot.emd2(a, b, m)) < 1e-12


def test_node_curvature_is_mean_of_incident_edges():
    g = nx.barbell_graph(4, 2)
    k, ei = _kappa(g)
    gamma = node_curvature(ei, k, g.number_of_nodes())
    for i in range(g.number_of_nodes()):
        assert abs(gamma[i].item() - k[ei[0] == i].mean().item()) < 1e-12


def test_bad_alpha():
    with pytest.raises(ValueError, match="alpha"):
        ollivier_ricci(torch.tensor([[0], [1]]), 2, alpha=1.5)
