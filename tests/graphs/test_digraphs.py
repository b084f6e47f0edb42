"""Random digraphs and sorting networks (iclr25.graphs.digraphs)."""

import networkx as nx
import numpy as np
import pytest
import torch

from iclr25.graphs.digraphs import (is_sorting_network, random_digraph, random_digraphs,
                                    sorting_network, sorting_network_dataset,
                                    sorting_network_graph)


@pytest.mark.parametrize("seed", range(5))
def test_random_dag_is_acyclic_and_weakly_connected(seed):
    g = random_digraph(20, 2.5, True, np.random.default_rng(seed))
    gx = nx.DiGraph(g.edge_index.T.tolist())
    gx.add_nodes_from(range(g.num_nodes))
    assert nx.is_directed_acyclic_graph(gx)
    assert nx.is_weakly_connected(gx)
    assert not (g.edge_index[0] == g.edge_index[1]).any()


def test_general_digraphs_have_cycles_and_sizes():
    rng = np.random.default_rng(0)
    gs = random_digraphs(30, (10, 14), False, rng)
    assert all(3 <= g.num_nodes <= 14 for g in gs)
    cyclic = sum(not nx.is_directed_acyclic_graph(nx.DiGraph(g.edge_index.T.tolist())) for g in gs)
    assert cyclic > 10


def test_known_sorting_networks():
    # the optimal 4-wire network (5 comparators) sorts; dropping any comparator breaks it
    net = [(0, 1), (2, 3), (0, 2), (1, 3), (1, 2)]
    assert is_sorting_network(net, 4)
    for i in range(len(net)):
        assert not is_sorting_network(net[:i] + net[i + 1:], 4)


@pytest.mark.parametrize("wires", [3, 5, 6])
def test_random_sorting_network_sorts_and_prefix_does_not(wires):
    rng = np.random.default_rng(wires)
    comps = sorting_network(wires, rng)
    assert is_sorting_network(comps, wires) and not is_sorting_network(comps[:-1], wires)
    x = rng.permutation(10 * wires)[:wires]
    for i, j in comps:
        x[i], x[j] = min(x[i], x[j]), max(x[i], x[j])
    assert (np.diff(x) > 0).all()


def test_sorting_graph_edges_follow_wires():
    comps = [(0, 1), (1, 2), (0, 2)]
    g = sorting_network_graph(comps, 3)
    assert sorted(map(tuple, g.edge_index.T.tolist())) == [(0, 1), (0, 2), (1, 2)]
    assert g.x.shape == (3, 3)
    ds = sorting_network_dataset([4], 3, np.random.default_rng(0), reversed_too=True)
    assert len(ds) == 12 and sum(float(d.y) for d in ds) >= 3
