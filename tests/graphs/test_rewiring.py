"""PIORF and control rewirings: sources, partners, edge counts, FoSR's spectral gap."""

import networkx as nx
import numpy as np
import pytest
import scipy.sparse.csgraph as csg
import torch
from torch_geometric.utils import from_networkx, is_undirected, to_scipy_sparse_matrix

from iclr25.graphs.rewiring import (add_edges, fosr_edges, hop_coverage, piorf_partners,
                                    piorf_sources, random_partners)


def _grid(n=8):
    return from_networkx(nx.convert_node_labels_to_integers(nx.grid_2d_graph(n, n))).edge_index, n * n


def test_sources_are_lowest_curvature():
    gamma = torch.tensor([0.3, -0.2, 0.1, -0.5, 0.0, 0.2, -0.1, 0.4, 0.05, -0.3])
    s = piorf_sources(gamma, 0.3)
    assert s.tolist() == [3, 9, 1]
    assert piorf_sources(gamma, 0.0).numel() == 0
    with pytest.raises(ValueError, match="ratio"):
        piorf_sources(gamma, 1.5)


@pytest.mark.parametrize("rule", ["speed", "projection"])
def test_partner_maximises_difference(rule):
    g = torch.Generator().manual_seed(0)
    u = torch.randn(50, 2, generator=g)
    w = torch.tensor([0.3, -1.2])
    src = torch.tensor([0, 5, 17, 33])
    p = piorf_partners(u, src, rule, w)
    f = u @ w if rule == "projection" else u.norm(dim=1)
    brute = (f[:, None] - f[src][None]).abs().argmax(0)
    assert torch.equal((f[p] - f[src]).abs(), (f[brute] - f[src]).abs())
    assert len(set(p.tolist())) <= 2  # at most the two extremes of f


def test_max_speed_and_bad_rule():
    u = torch.tensor([[0.0, 0.0], [3.0, 0.0], [1.0, 1.0]])
    assert piorf_partners(u, torch.tensor([0, 2]), "max_speed").tolist() == [1, 1]
    with pytest.raises(ValueError, match="valid rules"):
        piorf_partners(u, torch.tensor([0]), "fastest")


def test_add_edges_union_is_undirected_and_deduplicated():
    ei, n = _grid(4)
    out = add_edges(ei, torch.tensor([0, 0, 5, 3]), torch.tensor([15, 15, 5, 2]), n)
    assert is_undirected(out)
    # (0, 15) once per direction, the self-loop (5, 5) and the existing edge (3, 2) dropped
    assert out.shape[1] == ei.shape[1] + 2
    assert (out[0] != out[1]).all()


def test_random_partners_never_self_and_same_count():
    src = torch.arange(10)
    p = random_partners(src, 11, torch.Generator().manual_seed(0))
    assert p.shape == src.shape and (p != src).all() and (p < 11).all()


def test_fosr_raises_spectral_gap_more_than_random():
    ei, n = _grid(8)

    def gap(e):
        lap = csg.laplacian(to_scipy_sparse_matrix(e, num_nodes=n).toarray().astype(float), normed=True)
        return np.sort(np.linalg.eigvalsh(lap))[1]

    added = fosr_edges(ei, n, 4)
    assert added.shape == (2, 4)
    rnd = torch.randint(0, n, (2, 4), generator=torch.Generator().manual_seed(1))
    g0, g_fosr, g_rand = gap(ei), gap(add_edges(ei, *added, n)), gap(add_edges(ei, *rnd, n))
    assert g_fosr > g_rand > g0 * 0.99
    assert g_fosr > 1.1 * g0


def test_hop_coverage_closed_form_on_a_path():
    n = 6
    ei = from_networkx(nx.path_graph(n)).edge_index
    # pairs within 1 hop on a path: 2 (n - 1) ordered pairs out of n (n - 1)
    assert abs(hop_coverage(ei, n, 1) - 2 * (n - 1) / (n * (n - 1))) < 1e-12
    assert hop_coverage(ei, n, n - 1) == 1.0
