"""Tests of the over-squashing diagnostics (iclr25.graphs.squash)."""

import networkx as nx
import numpy as np
import pytest
import torch

from iclr25.graphs import squash


def both_ways(pairs):
    e = torch.tensor(pairs, dtype=torch.long).T
    return torch.cat([e, e.flip(0)], 1)


def path(n):
    return both_ways([(i, i + 1) for i in range(n - 1)])


def test_resistance_path_and_cycle_closed_forms():
    R = squash.effective_resistance(path(7), 7)
    assert torch.allclose(R[0], torch.arange(7, dtype=torch.float64), atol=1e-10)  # series resistors
    n = 9
    R = squash.effective_resistance(both_ways([(i, (i + 1) % n) for i in range(n)]), n)
    k = torch.arange(n, dtype=torch.float64)
    assert torch.allclose(R[0], k * (n - k) / n, atol=1e-10)  # two paths in parallel


def test_resistance_matches_networkx_and_is_monotone():
    g = nx.connected_watts_strogatz_graph(30, 4, 0.3, seed=1)
    ei = both_ways(list(g.edges()))
    R = squash.effective_resistance(ei, 30)
    for u, v in [(0, 15), (3, 27), (8, 9)]:
        assert float(R[u, v]) == pytest.approx(nx.resistance_distance(g, u, v), rel=1e-8)
    assert torch.allclose(R, R.T) and float(R.diagonal().abs().max()) < 1e-10
    R2 = squash.effective_resistance(torch.cat([ei, both_ways([(0, 15)])], 1), 30)
    assert bool((R2 <= R + 1e-10).all()) and float(R2[0, 15]) < float(R[0, 15])  # Rayleigh monotonicity


def test_hop_distances():
    d = squash.hop_distances(path(5), 5)
    assert np.array_equal(d[0], [0, 1, 2, 3, 4])
    d = squash.hop_distances(torch.cat([path(5), both_ways([(0, 4)])], 1), 5)
    assert d[0, 4] == 1 and d[0, 3] == 2


def test_influence_by_hops_shares_and_support():
    n, L = 12, 3
    ei = path(n)
    A = torch.zeros(n, n, dtype=torch.float64)
    A[ei[0], ei[1]] = 1
    W = A + torch.eye(n, dtype=torch.float64)
    fn = lambda x: torch.linalg.matrix_power(W, L) @ x  # noqa: E731  an L-layer linear message passing
    x = torch.randn(n, 2, dtype=torch.float64)
    dist = squash.hop_distances(ei, n)
    share = squash.influence_by_hops(fn, x, torch.tensor([5, 6]), dist, 6)
    assert share.sum() == pytest.approx(1.0)
    assert share[L + 1:].sum() == 0  # nothing from beyond L hops
    assert (share[:L + 1] > 0).all()
    # a long edge moves sensitivity to far nodes
    ei2 = torch.cat([ei, both_ways([(5, 11)])], 1)
    A2 = torch.zeros(n, n, dtype=torch.float64)
    A2[ei2[0], ei2[1]] = 1
    fn2 = lambda x: torch.linalg.matrix_power(A2 + torch.eye(n, dtype=torch.float64), L) @ x  # noqa: E731
    share2 = squash.influence_by_hops(fn2, x, torch.tensor([5]), dist, 6)
    assert share2[L + 1:].sum() > 0
