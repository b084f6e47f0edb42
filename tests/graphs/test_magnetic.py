"""Identities of the magnetic Laplacian, walk profiles and the multi-q PE (iclr25.graphs.magnetic)."""

import math

import numpy as np
import pytest
import torch
from torch_geometric.data import Batch, Data
from torch_geometric.transforms import AddLaplacianEigenvectorPE
from torch_geometric.utils import get_laplacian, to_dense_adj

from iclr25.graphs.digraphs import random_digraph
from iclr25.graphs.magnetic import (AddMagneticLaplacianPE, AddSVDPE, AddSymLaplacianPE,
                                    AddWalkProfileTarget, PairRegressor, dft_potentials,
                                    magnetic_adjacency, magnetic_eigenpairs, magnetic_laplacian,
                                    path_distances_from_profile, potential_rank, predict_pairs,
                                    random_phases,
                                    total_degree, train_pair_regressor, walk_profile,
                                    walk_profile_from_pe, walk_profile_from_potentials,
                                    weighted_gram)


def _graph(seed: int, n: int = 10, acyclic: bool = False, deg: float = 2.0) -> Data:
    return random_digraph(n, deg, acyclic, np.random.default_rng(seed))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("q", [0.0, 0.1, 0.25, 0.37])
def test_laplacian_hermitian_psd_spectrum_in_0_2(seed, q):
    g = _graph(seed)
    lap = magnetic_laplacian(g.edge_index, g.num_nodes, q)
    assert torch.allclose(lap, lap.conj().T, atol=1e-14)
    lam = torch.linalg.eigvalsh(lap)
    assert lam.min() > -1e-12 and lam.max() < 2 + 1e-12
    lam_u = torch.linalg.eigvalsh(magnetic_laplacian(g.edge_index, g.num_nodes, q, normalized=False))
    assert lam_u.min() > -1e-10  # D - A_q is PSD: x^H (D - A_q) x = sum_edges |x_u - w x_v|^2


def test_q0_is_symmetric_normalized_laplacian_of_pyg():
    g = _graph(0, n=12)
    sym = torch.cat([g.edge_index, g.edge_index.flip(0)], 1)
    ei, ew = get_laplacian(sym, normalization="sym", num_nodes=g.num_nodes)
    ref = to_dense_adj(ei, edge_attr=ew, max_num_nodes=g.num_nodes)[0].double()
    lap = magnetic_laplacian(g.edge_index, g.num_nodes, 0.0)
    assert torch.allclose(lap.imag, torch.zeros_like(lap.imag))
    assert torch.allclose(lap.real, ref, atol=1e-6)


def test_periodic_conjugate_and_reversal():
    g = _graph(1)
    n, q = g.num_nodes, 0.13
    lap = magnetic_laplacian(g.edge_index, n, q)
    assert torch.allclose(magnetic_laplacian(g.edge_index, n, q + 1), lap, atol=1e-12)
    assert torch.allclose(magnetic_laplacian(g.edge_index, n, -q), lap.conj(), atol=1e-12)
    assert torch.allclose(magnetic_laplacian(g.edge_index.flip(0), n, q), lap.conj(), atol=1e-12)


def test_reciprocal_edge_weight_is_2cos():
    ei = torch.tensor([[0, 1], [1, 0]])
    a_q = magnetic_adjacency(ei, 2, 0.1)
    assert math.isclose(a_q[0, 1].real, 2 * math.cos(0.2 * math.pi), abs_tol=1e-12)
    assert abs(a_q[0, 1].imag) < 1e-12


def test_walk_profile_closed_forms():
    g = _graph(2, n=9)
    n, big_l = g.num_nodes, 4
    phi = walk_profile(g.edge_index, n, big_l)
    a = to_dense_adj(g.edge_index, max_num_nodes=n)[0].long()
    for length in range(big_l + 1):
        # all-forward walks are A^l, all-backward ones (A^T)^l, and summing k gives (A + A^T)^l
        assert torch.equal(phi[length, length], torch.linalg.matrix_power(a, length))
        assert torch.equal(phi[length, 0], torch.linalg.matrix_power(a.T, length))
        assert torch.equal(phi[length].sum(0), torch.linalg.matrix_power(a + a.T, length))
    # reversing every edge swaps forward and backward steps
    phi_rev = walk_profile(g.edge_index.flip(0), n, big_l)
    for length in range(big_l + 1):
        assert torch.equal(phi_rev[length, : length + 1], phi[length, : length + 1].flip(0))


def test_walk_profile_counts_explicit_walks():
    # path 0 -> 1 -> 2: length-2 walks 0~>0: forward then backward (k=1) only
    ei = torch.tensor([[0, 1], [1, 2]])
    phi = walk_profile(ei, 3, 2)
    assert phi[2, 2, 0, 2] == 1 and phi[2, 1, 0, 0] == 1 and phi[2, 1, 1, 1] == 2
    assert phi[2, :, 2, 0].tolist() == [1, 0, 0]


@pytest.mark.parametrize("acyclic", [True, False])
@pytest.mark.parametrize("seed", range(3))
def test_multiq_recovers_walk_profile_exactly(acyclic, seed):
    g = _graph(seed, n=11, acyclic=acyclic, deg=2.5)
    big_l = 4
    phi = walk_profile(g.edge_index, g.num_nodes, big_l)
    rec = walk_profile_from_potentials(g.edge_index, g.num_nodes, big_l)
    assert (rec - phi).abs().max() < 1e-8
    # the paper code's grid q_j = j / 10, j = 1..5, also has five distinct omega^2
    rec2 = walk_profile_from_potentials(g.edge_index, g.num_nodes, big_l, qs=[0.1 * j for j in range(1, 6)])
    assert torch.equal(rec2.round().long(), phi)
    # from the PE (eigenpairs of the normalised Laplacians) and the degrees alone
    u, lam = magnetic_eigenpairs(g.edge_index, g.num_nodes, dft_potentials(big_l))
    rec3 = walk_profile_from_pe(u, lam, total_degree(g.edge_index, g.num_nodes), dft_potentials(big_l), big_l)
    assert (rec3 - phi).abs().max() < 1e-8


def test_fewer_potentials_fail():
    g = _graph(3, n=12, deg=3.0)
    phi = walk_profile(g.edge_index, g.num_nodes, 4)
    for nq in range(1, 5):
        rec = walk_profile_from_potentials(g.edge_index, g.num_nodes, 4, qs=dft_potentials(nq - 1))
        assert (rec[4].round() - phi[4]).abs().max() >= 1


def test_single_q_collision_at_quarter():
    # (1, 0, 1) vs (0, 0, 2) at length 2 give the same A_q^2 entry for q = 1/4
    g1 = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]])        # u=0 -> 1 -> v=2 and v=2 -> 3 -> u=0
    g2 = torch.tensor([[0, 1, 0, 3], [1, 2, 3, 2]])        # two paths u=0 -> 1 -> 2, 0 -> 3 -> 2
    p1, p2 = walk_profile(g1, 4, 2)[2, :, 0, 2], walk_profile(g2, 4, 2)[2, :, 0, 2]
    assert p1.tolist() == [1, 0, 1] and p2.tolist() == [0, 0, 2]
    sq = lambda ei, q: (magnetic_adjacency(ei, 4, q) @ magnetic_adjacency(ei, 4, q))[0, 2]  # noqa: E731
    assert abs(sq(g1, 0.25) - sq(g2, 0.25)) < 1e-12
    assert abs(sq(g1, 1 / 6) - sq(g2, 1 / 6)) > 0.5


def test_spd_lpd_from_profile_match_networkx():
    import networkx as nx
    g = _graph(4, n=10, acyclic=True, deg=2.0)
    phi = walk_profile(g.edge_index, g.num_nodes, g.num_nodes)
    spd, lpd = path_distances_from_profile(phi)
    gx = nx.DiGraph(g.edge_index.T.tolist())
    gx.add_nodes_from(range(g.num_nodes))
    for u, dists in nx.all_pairs_shortest_path_length(gx):
        for v, d in dists.items():
            assert spd[u, v] == d
    for u in range(g.num_nodes):
        for v in range(g.num_nodes):
            paths = list(nx.all_simple_paths(gx, u, v))
            assert lpd[u, v] == max((len(p) - 1 for p in paths), default=0)


def test_transform_matches_pyg_laplacian_pe_eigenspaces():
    g = _graph(5, n=12)
    k = 4
    ours = AddSymLaplacianPE(k=k + 1)(g.clone())
    sym = Data(edge_index=torch.cat([g.edge_index, g.edge_index.flip(0)], 1), num_nodes=g.num_nodes)
    pyg = AddLaplacianEigenvectorPE(k=k, attr_name="pe", is_undirected=True)(sym)
    u = ours.pe_U[:, 0, 1:].real.double()
    lam = ours.pe_lambda[0, 0]
    assert (lam[1:].diff() > 1e-4).all(), "test graph should have a simple low spectrum"
    overlap = (u.T @ pyg.pe.double()).abs()
    assert torch.allclose(overlap.diag(), torch.ones(k, dtype=torch.float64), atol=1e-4)


def test_svd_pe_reconstructs_adjacency():
    g = _graph(6, n=9)
    d = AddSVDPE(k=20)(g.clone())
    a = to_dense_adj(g.edge_index, max_num_nodes=g.num_nodes)[0]
    assert torch.allclose(d.svd_U * d.svd_sigma @ d.svd_V.T, a, atol=1e-5)


def test_spe_features_phase_and_basis_invariant_naive_not():
    # a directed 6-cycle: L_q has repeated eigenvalues, so eigenvectors are not unique
    n = 6
    ei = torch.tensor([list(range(n)), [(i + 1) % n for i in range(n)]])
    u, lam = magnetic_eigenpairs(ei, n, [0.1, 0.2])
    w = torch.stack([torch.sin(3 * lam), lam ** 2], -1)[None]            # phi(lambda), C = 2
    re, im = weighted_gram(u[None], u[None], w)
    u2 = random_phases(u, torch.Generator().manual_seed(0))
    # plus a random unitary inside each repeated eigenspace of the first q
    vals = lam[0]
    for val in vals.unique(sorted=True):
        idx = ((vals - val).abs() < 1e-9).nonzero().flatten()
        if len(idx) > 1:
            z = torch.randn(len(idx), len(idx), dtype=torch.complex128, generator=torch.Generator().manual_seed(1))
            qm, _ = torch.linalg.qr(z)
            u2[:, 0, idx] = u2[:, 0, idx] @ qm
    re2, im2 = weighted_gram(u2[None], u2[None], w)
    assert torch.allclose(re, re2, atol=1e-12) and torch.allclose(im, im2, atol=1e-12)
    assert (u2 - u).abs().max() > 0.1


def test_spe_features_permutation_equivariant():
    g = _graph(7, n=10)
    n = g.num_nodes
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(0))
    inv = torch.argsort(perm)
    ei_p = inv[g.edge_index]                    # node i becomes inv[i]
    u, lam = magnetic_eigenpairs(g.edge_index, n, [0.1])
    up, lamp = magnetic_eigenpairs(ei_p, n, [0.1])
    w = torch.exp(-lam)[..., None][None]
    re, im = weighted_gram(u[None], u[None], w)
    rep, imp = weighted_gram(up[None], up[None], torch.exp(-lamp)[..., None][None])
    assert torch.allclose(rep[0][inv][:, inv], re[0], atol=1e-10)
    assert torch.allclose(imp[0][inv][:, inv], im[0], atol=1e-10)


def test_pair_regressor_invariant_to_eigenvector_phases_and_learns():
    rng = np.random.default_rng(0)
    tf = lambda g: AddWalkProfileTarget(2)(AddSVDPE(8)(AddMagneticLaplacianPE([0.1, 0.2, 0.3], 8)(g)))  # noqa: E731
    graphs = [tf(random_digraph(int(rng.integers(5, 8)), 2.0, False, rng)) for _ in range(24)]
    torch.manual_seed(0)
    model = PairRegressor("magnetic", num_q=3, k=8, out_dim=3)
    losses = train_pair_regressor(model, graphs, steps=40, batch_size=8, lr=3e-3, seed=0)
    assert np.mean(losses[-5:]) < np.mean(losses[:5])
    pred, true = predict_pairs(model, graphs)
    gen = torch.Generator().manual_seed(3)
    rotated = []
    for g in graphs:
        h = g.clone()
        h.pe_U = random_phases(g.pe_U, gen)
        rotated.append(h)
    pred2, _ = predict_pairs(model, rotated)
    assert torch.allclose(pred, pred2, atol=1e-4)
    for enc in ("none", "svd", "naive"):
        m = PairRegressor(enc, num_q=3, k=8, out_dim=3)
        out = m(Batch.from_data_list(graphs[:3]))
        assert out.shape == (sum(g.num_nodes ** 2 for g in graphs[:3]), 3)


def test_adjacency_ablation_reconstructs_a_q():
    g = _graph(8, n=9)
    u, lam = magnetic_eigenpairs(g.edge_index, g.num_nodes, [0.1], matrix="adjacency")
    a_q = magnetic_adjacency(g.edge_index, g.num_nodes, 0.1)
    assert torch.allclose(u[:, 0] @ torch.diag(lam[0]).to(u.dtype) @ u[:, 0].conj().T, a_q, atol=1e-10)


def test_bad_input_errors():
    with pytest.raises(ValueError, match="valid"):
        AddMagneticLaplacianPE([0.1], 4, matrix="incidence")
    with pytest.raises(ValueError, match="valid"):
        PairRegressor("transformer")
    with pytest.raises(ValueError):
        walk_profile(torch.tensor([[0], [1]]), 2, -1)
    with pytest.raises(ValueError):
        magnetic_laplacian(torch.tensor([0, 1]), 2, 0.1)


def test_real_rank_of_potential_grids():
    """Profiles are real: q and 1/2 - q (conjugate omega^2) measure the same thing."""
    assert potential_rank(dft_potentials(4), 4) == 5
    paper = [0.1 * j for j in range(1, 6)]
    assert [potential_rank(paper[:nq], 4) for nq in range(1, 6)] == [2, 4, 4, 4, 5]
    assert potential_rank([0.0, 0.1], 4) == 3 and potential_rank([0.0, 0.1, 0.2], 4) == 5
    assert potential_rank([0.25], 2) == 1  # omega^2 = -1 is real


def test_conjugate_potentials_add_nothing_for_integer_profiles():
    """Y at q = 0.4 is the conjugate of Y at q = 0.1 (omega^2 conjugate), for every pair."""
    g = _graph(9, n=10, deg=2.5)
    a1 = torch.linalg.matrix_power(magnetic_adjacency(g.edge_index, g.num_nodes, 0.1), 4)
    a4 = torch.linalg.matrix_power(magnetic_adjacency(g.edge_index, g.num_nodes, 0.4), 4)
    w1, w4 = np.exp(2j * np.pi * 0.1 * 4), np.exp(2j * np.pi * 0.4 * 4)
    assert torch.allclose(w4 * a4, (w1 * a1).conj(), atol=1e-9)


def test_naive_pair_features_are_bilinear_forms_of_node_embeddings():
    rng = np.random.default_rng(1)
    graphs = [AddMagneticLaplacianPE([0.1, 0.2], 6)(random_digraph(6, 2.0, True, rng)) for _ in range(2)]
    torch.manual_seed(0)
    m = PairRegressor("naive", num_q=2, k=6, channels=3, hidden=16, out_dim=2, phi_hidden=8)
    assert m.bilinear.shape == (2 * 2 * 3, 8, 8)
    batch = Batch.from_data_list(graphs)
    feats = m._pair_inputs(batch)
    u = batch.pe_U.reshape(batch.num_nodes, -1)
    lam = batch.pe_lambda.reshape(2, -1)[batch.batch]
    h = m.node_mlp(torch.cat([u.real, u.imag, lam], 1))
    n0 = graphs[0].num_nodes
    for a, b in [(0, 0), (1, 4), (4, 2)]:  # pairs of the first graph (5 nodes), row-major order
        row = feats[a * n0 + b]
        assert torch.allclose(row[5:13], h[a], atol=1e-6) and torch.allclose(row[13:21], h[b], atol=1e-6)
        assert torch.allclose(row[21:], torch.einsum("d,jde,e->j", h[a], m.bilinear, h[b]), atol=1e-5)


def test_package_functions_keep_their_inputs_device(on_foreign_device):
    g = AddSVDPE(6)(AddMagneticLaplacianPE([0.1, 0.2], 6)(AddWalkProfileTarget(2)(_graph(10, n=8))))
    ei, n = g.edge_index, g.num_nodes
    for q in (0.0, 0.1):
        on_foreign_device(magnetic_laplacian, ei, n, q)
        on_foreign_device(magnetic_laplacian, ei, n, q, normalized=False)
    on_foreign_device(magnetic_adjacency, ei, n, 0.1)
    on_foreign_device(total_degree, ei, n)
    on_foreign_device(walk_profile, ei, n, 3)
    on_foreign_device(walk_profile_from_potentials, ei, n, 3)
    u, lam = magnetic_eigenpairs(ei, n, dft_potentials(3))
    on_foreign_device(walk_profile_from_pe, u, lam, total_degree(ei, n), dft_potentials(3), 3)
    on_foreign_device(path_distances_from_profile, walk_profile(ei, n, 3))
    on_foreign_device(magnetic_eigenpairs, ei, n, [0.1, 0.2], k=n + 2)
    on_foreign_device(random_phases, u, torch.Generator().manual_seed(0))
    on_foreign_device(weighted_gram, u[None], u[None], torch.rand(1, 4, n, 2, dtype=torch.float64))
    for attr, tf in (("pe_U", AddMagneticLaplacianPE([0.1], n + 1)), ("svd_U", AddSVDPE(n + 1))):
        on_foreign_device(lambda: getattr(tf(Data(edge_index=ei, num_nodes=n)), attr))
    batch = Batch.from_data_list([g, g])
    for enc in ("none", "magnetic", "svd", "naive"):
        model = PairRegressor(enc, num_q=2, k=6, out_dim=3)
        on_foreign_device(model, batch)
