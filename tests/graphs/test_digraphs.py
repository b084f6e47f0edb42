"""Random digraphs (iclr25.graphs.digraphs)."""

import networkx as nx
import numpy as np
import pytest

from iclr25.graphs.digraphs import random_digraph, random_digraphs


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
