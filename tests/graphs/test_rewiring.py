"""PIORF and control rewirings: sources, partners, relabelling, edge counts, FoSR's spectral gap,
receptive fields; every kernel keeps its result on its input's device."""

import networkx as nx
import numpy as np
import pytest
import scipy.sparse.csgraph as csg
import torch
from torch_geometric.utils import from_networkx, is_undirected, to_scipy_sparse_matrix

from iclr25.graphs.curvature import node_curvature, ollivier_ricci
from iclr25.graphs.mesh import FlowSimulator, MeshGraphNet, NodeType, graded_cylinder_mesh, triangles_to_edges
from iclr25.graphs.rewiring import (add_edges, central_node, fosr_edges, hop_ball, hop_coverage, new_edges,
                                    node_influence, piorf_partners, piorf_sources, random_partners)

from .fake_device import FAKE_CUDA, fake_cuda, to_fake


def _grid(n=8):
    return from_networkx(nx.convert_node_labels_to_integers(nx.grid_2d_graph(n, n))).edge_index, n * n


def test_new_edges_are_what_add_edges_adds():
    ei, n = _grid(5)
    src, dst = torch.tensor([0, 0, 3, 7, 12]), torch.tensor([24, 1, 3, 20, 24])  # (0, 1): a mesh edge; (3, 3): a loop
    new = new_edges(ei, src, dst, n)
    union = add_edges(ei, src, dst, n)
    assert new.shape[1] == union.shape[1] - ei.shape[1] == 6  # 3 new undirected edges
    both = {tuple(e) for e in ei.T.tolist()} | {tuple(e) for e in new.T.tolist()}
    assert both == {tuple(e) for e in union.T.tolist()}
    assert not ({tuple(e) for e in ei.T.tolist()} & {tuple(e) for e in new.T.tolist()})


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


def test_sources_tie_break_by_key_not_by_index():
    gamma = torch.tensor([0.0, -0.5, -0.5 + 1e-15, -0.5, 0.2])  # three ties up to round-off
    key = torch.tensor([0.0, 3.0, 1.0, 2.0, 0.0])
    assert piorf_sources(gamma, 0.4, tiebreak=key).tolist() == [2, 3]
    lex = torch.tensor([[0.0, 0], [1, 5], [1, 4], [0, 9], [0, 0]])  # by column 0, then column 1
    assert piorf_sources(gamma, 0.6, tiebreak=lex).tolist() == [3, 2, 1]


@pytest.mark.parametrize("rule", ["speed", "projection", "max_speed"])
def test_partners_only_among_candidates(rule):
    g = torch.Generator().manual_seed(1)
    u = torch.randn(40, 2, generator=g)
    u[:10] = 0.0  # walls: speed 0, a 10-way tie for the slowest node
    fluid = torch.arange(40) >= 10
    src = torch.tensor([12, 20, 31])
    p = piorf_partners(u, src, rule, torch.tensor([1.0, 0.5]), candidates=fluid)
    assert fluid[p].all()
    if rule == "speed":  # the fluid extreme that differs most from each source
        f = u.norm(dim=1)
        brute = torch.where(fluid[:, None], (f[:, None] - f[src][None]).abs(), -1.0).argmax(0)
        assert torch.equal(p, brute)
        # over all nodes, the fastest node's partner is the slowest: a 10-way tie, broken by index
        assert piorf_partners(u, f.argmax()[None], rule).item() == 0
    with pytest.raises(ValueError, match="no node"):
        piorf_partners(u, src, rule, torch.tensor([1.0, 0.5]), candidates=torch.zeros(40, dtype=torch.bool))


def _rewired_mesh(pos, cells, node_type, velocity, ratio=0.05):
    """PIORF's rewired graph of a mesh, as the chapter builds it, and its sources."""
    n = len(pos)
    ei = triangles_to_edges(cells, n)
    gamma = node_curvature(ei, ollivier_ricci(ei, n), n)
    src = piorf_sources(gamma, ratio, tiebreak=pos)
    fluid = FlowSimulator.integrated(node_type)
    return add_edges(ei, src, piorf_partners(velocity, src, "speed", candidates=fluid), n), src


def test_relabelling_nodes_relabels_the_rewired_graph():
    pos, cells, nt = graded_cylinder_mesh(h_min=0.03, h_max=0.08, iters=30, seed=2)
    pos, cells, nt = torch.as_tensor(pos), torch.as_tensor(cells), torch.as_tensor(nt)
    u = torch.stack([torch.sin(7 * pos[:, 0] + 3 * pos[:, 1]), torch.cos(5 * pos[:, 1] - 2 * pos[:, 0])], 1)
    u[(nt == NodeType.WALL_BOUNDARY) | (nt == NodeType.OBSTACLE)] = 0.0  # no-slip: many speed-0 ties
    ei, src = _rewired_mesh(pos, cells, nt, u)
    perm = torch.randperm(len(pos), generator=torch.Generator().manual_seed(0))  # new node j = old perm[j]
    inv = torch.argsort(perm)
    ei_p, src_p = _rewired_mesh(pos[perm], inv[cells], nt[perm], u[perm])
    assert set(perm[src_p].tolist()) == set(src.tolist())
    assert {tuple(e) for e in perm[ei_p].T.tolist()} == {tuple(e) for e in ei.T.tolist()}


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


def test_random_partners_uniform_over_candidates_without_self():
    cand = torch.zeros(12, dtype=torch.bool)
    cand[[2, 5, 7, 11]] = True
    src = torch.tensor([5, 0])  # 5 is a candidate (excluded as its own partner), 0 is not
    draws = torch.stack([random_partners(src, 12, torch.Generator().manual_seed(k), cand) for k in range(3000)])
    assert cand[draws].all() and (draws[:, 0] != 5).all()
    freq0 = torch.bincount(draws[:, 0], minlength=12)[[2, 7, 11]] / 3000
    freq1 = torch.bincount(draws[:, 1], minlength=12)[[2, 5, 7, 11]] / 3000
    assert (freq0 - 1 / 3).abs().max() < 0.04 and (freq1 - 1 / 4).abs().max() < 0.04
    with pytest.raises(ValueError, match="no candidate"):
        random_partners(torch.tensor([2]), 12, None, torch.arange(12) == 2)


def test_central_node_of_a_path_and_a_star():
    path = from_networkx(nx.path_graph(7)).edge_index
    assert central_node(path, 7) == 3
    assert central_node(path, 7, candidates=torch.tensor([1, 1, 0, 0, 0, 1, 1], dtype=torch.bool)) == 1
    star = from_networkx(nx.star_graph(5)).edge_index
    assert central_node(star, 6) == 0


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


def test_hop_ball_on_a_grid_is_the_l1_ball():
    ei, n = _grid(6)  # node i * 6 + j sits at (i, j)
    ball = hop_ball(ei, n, 14, 2)
    ij = torch.stack([torch.arange(n) // 6, torch.arange(n) % 6], 1)
    assert torch.equal(ball, (ij - ij[14]).abs().sum(1) <= 2)


def test_node_influence_support_is_the_hop_ball_after_rewiring():
    """The Jacobian of an L-block network is nonzero exactly on the L-hop ball, new edges included."""
    torch.manual_seed(0)
    ei, n = _grid(7)
    ei = add_edges(ei, torch.tensor([0]), torch.tensor([48]), n)  # one long edge, corner to corner
    net = MeshGraphNet(3, 2, 2, latent=8, blocks=3, layers=1)
    x, ea = torch.randn(n, 3), torch.randn(ei.shape[1], 2)
    for target in (1, 24, 47):
        infl = node_influence(lambda z: net(z, ei, ea), x, target)
        assert torch.equal(infl > 0, hop_ball(ei, n, target, 3))


def test_hop_coverage_closed_form_on_a_path():
    n = 6
    ei = from_networkx(nx.path_graph(n)).edge_index
    # pairs within 1 hop on a path: 2 (n - 1) ordered pairs out of n (n - 1)
    assert abs(hop_coverage(ei, n, 1) - 2 * (n - 1) / (n * (n - 1))) < 1e-12
    assert hop_coverage(ei, n, n - 1) == 1.0
    ei2, n2 = _grid(5)
    ei2 = add_edges(ei2, torch.tensor([0, 3]), torch.tensor([24, 17]), n2)
    assert hop_coverage(ei2, n2, [1, 3, 6]) == [hop_coverage(ei2, n2, h) for h in (1, 3, 6)]


def test_kernels_keep_results_on_the_input_device():
    """Each kernel run on (fake) GPU tensors returns GPU tensors and never mixes devices."""
    pos, cells, nt = graded_cylinder_mesh(h_min=0.04, h_max=0.08, iters=20, seed=0)
    n = len(pos)
    with fake_cuda():
        cells_d, pos_d = to_fake(torch.as_tensor(cells)), to_fake(torch.as_tensor(pos).float())
        nt_d = to_fake(torch.as_tensor(nt))
        ei = triangles_to_edges(cells_d, n)
        kappa = ollivier_ricci(ei, n)
        gamma = node_curvature(ei, kappa, n)
        src = piorf_sources(gamma, 0.05, tiebreak=pos_d)
        u = to_fake(torch.randn(n, 2))
        fluid = FlowSimulator.integrated(nt_d)
        outs = [ei, kappa, gamma, src, fluid, fosr_edges(ei, n, 3), hop_ball(ei, n, 0, 2),
                random_partners(src, n, torch.Generator().manual_seed(0), fluid)]
        for rule in ("speed", "projection", "max_speed"):
            outs.append(piorf_partners(u, src, rule, torch.tensor([1.0, 0.0]), candidates=fluid))
        rewired = add_edges(ei, src, outs[-1], n)
        outs.append(rewired)
        sim = FlowSimulator(8, 2, 1).to(FAKE_CUDA)
        outs += list(sim.step(u, nt_d, pos_d, rewired))
        outs.append(node_influence(lambda z: sim(z, nt_d, pos_d, rewired), u, 3))
        assert all(o.device == FAKE_CUDA for o in outs)
        assert isinstance(hop_coverage(rewired, n, 2), float) and 0 <= central_node(ei, n, fluid) < n
        with pytest.raises(RuntimeError, match="same device"):
            FlowSimulator(8, 2, 1)(u, nt_d, pos_d, rewired)  # a model left on the CPU
