"""Graded mesh, mesh graph, MeshGraphNets: geometry, invariances, locality, fused edge MLP."""

import numpy as np
import pytest
import torch

from iclr25.graphs.mesh import (FlowSimulator, GraphNetBlock, MeshGraphNet, NodeType, Normalizer, cross2,
                                graded_cylinder_mesh, mesh_edge_features, triangles_to_edges)


@pytest.fixture(scope="module")
def mesh():
    return graded_cylinder_mesh(h_min=0.02, h_max=0.06, iters=40, seed=0)


def test_mesh_covers_the_channel_minus_the_disc(mesh):
    pos, cells, nt = mesh
    e = pos[cells]
    area = 0.5 * cross2(e[:, 1] - e[:, 0], e[:, 2] - e[:, 0])
    assert (area > 0).all()  # counter-clockwise, no degenerate triangles
    exact = 1.6 * 0.41 - np.pi * 0.05**2
    assert abs(area.sum() - exact) / exact < 0.02  # polygonal approximation of the disc
    assert set(np.unique(nt)) == {NodeType.NORMAL, NodeType.OBSTACLE, NodeType.INFLOW, NodeType.OUTFLOW,
                                  NodeType.WALL_BOUNDARY}
    assert np.unique(cells).size == len(pos)  # no unused nodes


def test_cross2_is_the_z_component_of_the_3d_cross_product():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 50, 2))
    pad = lambda v: np.concatenate([v, np.zeros((len(v), 1))], 1)  # noqa: E731
    assert np.allclose(cross2(a, b), np.cross(pad(a), pad(b))[:, 2], atol=1e-15)
    assert cross2(np.array([1.0, 0.0]), np.array([0.0, 1.0])) == 1.0  # counter-clockwise: positive


def test_mesh_is_graded(mesh):
    pos, cells, _ = mesh
    ei = triangles_to_edges(torch.as_tensor(cells), len(pos)).numpy()
    length = np.linalg.norm(pos[ei[0]] - pos[ei[1]], axis=1)
    dist = np.linalg.norm(pos[ei].mean(0) - [0.2, 0.2], axis=1)
    assert length[dist < 0.1].mean() < 0.6 * length[dist > 0.6].mean()


def test_triangles_to_edges():
    cells = torch.tensor([[0, 1, 2], [1, 3, 2]])
    ei = triangles_to_edges(cells, 4)
    assert ei.shape[1] == 10  # 5 undirected edges, both directions
    assert {tuple(e) for e in ei.T.tolist()} >= {(1, 2), (2, 1), (3, 2)}


def test_edge_features_antisymmetric():
    pos = torch.tensor([[0.0, 0.0], [3.0, 4.0]])
    f = mesh_edge_features(pos, torch.tensor([[0, 1], [1, 0]]))
    assert torch.allclose(f[0, :2], -f[1, :2]) and torch.allclose(f[:, 2], torch.tensor([5.0, 5.0]))


def test_fused_edge_update_equals_mlp_on_concatenation():
    torch.manual_seed(0)
    blk = GraphNetBlock(8, layers=2)
    h, e = torch.randn(5, 8), torch.randn(7, 8)
    ei = torch.randint(0, 5, (2, 7))
    ref = blk.edge_mlp(torch.cat([h[ei[0]], h[ei[1]], e], 1))
    # three partial products summed vs one product on the concatenation: float32 round-off of the
    # outputs' scale (entries near 0 used 30 % of a 1e-6 bar under ATen's default kernels)
    assert torch.allclose(blk.edge_update(h, ei, e), ref, rtol=1e-5, atol=1e-5 * float(ref.abs().max()))


def test_permutation_equivariance_and_receptive_field():
    torch.manual_seed(0)
    n = 12
    chain = torch.stack([torch.arange(n - 1), torch.arange(1, n)])
    ei = torch.cat([chain, chain.flip(0)], 1)
    net = MeshGraphNet(3, 2, 1, latent=8, blocks=3, layers=1)
    x, ea = torch.randn(n, 3, requires_grad=True), torch.randn(ei.shape[1], 2)
    out = net(x, ei, ea)
    perm = torch.randperm(n)
    inv = torch.argsort(perm)
    out_p = net(x[perm], inv[ei], ea)
    assert torch.allclose(out_p, out[perm], atol=1e-5)
    # node 0 hears from nodes at most 3 hops away (L = 3 blocks), exactly
    (grad,) = torch.autograd.grad(out[0, 0], x)
    reach = grad.abs().sum(1) > 0
    assert reach[:4].all() and not reach[4:].any()


def test_normalizer_roundtrip():
    x = torch.randn(100, 3) * torch.tensor([1.0, 10.0, 0.1]) + 5
    nrm = Normalizer(3).fit(x)
    z = nrm(x)
    assert torch.allclose(z.mean(0), torch.zeros(3), atol=1e-5)
    assert torch.allclose(nrm.inverse(z), x, atol=1e-4)


def _strip_mesh(n: int = 30):
    """A strip of n - 2 triangles: positions, edges, node types (all normal) and a random velocity."""
    torch.manual_seed(0)
    pos = torch.rand(n, 2)
    cells = torch.tensor([[i, i + 1, i + 2] for i in range(n - 2)])
    return pos, triangles_to_edges(cells, n), torch.zeros(n, dtype=torch.long), torch.randn(n, 2)


def test_simulator_keeps_boundary_nodes_and_learns():
    pos, ei, nt, u = _strip_mesh()
    nt[:5] = NodeType.WALL_BOUNDARY
    target = u + 0.1 * torch.tanh(u)  # a learnable local map
    sim = FlowSimulator(latent=16, blocks=2, layers=1)
    sim.dv_norm.fit((target - u)[5:])
    nxt, p = sim.step(u, nt, pos, ei)
    assert torch.equal(nxt[:5], u[:5]) and p.shape == (30,)
    opt = torch.optim.Adam(sim.parameters(), 1e-2)
    losses = []
    for _ in range(60):
        loss = sim.loss(u, nt, pos, ei, target, torch.zeros(30))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.2 * losses[0]


def test_added_edges_have_their_own_encoder_and_normaliser():
    pos, ei, nt, u = _strip_mesh()
    new = torch.tensor([[0, 29], [29, 0]])
    sim = FlowSimulator(latent=16, blocks=1, layers=1)
    base = sim(u, nt, pos, ei)
    assert torch.equal(base, sim(u, nt, pos, ei, ei[:, :0]))  # no added edges: the mesh model
    with_new = sim(u, nt, pos, ei, new)
    assert not torch.allclose(with_new[29], base[29]) and torch.allclose(with_new[10], base[10])
    sim.edge_norm.fit(torch.randn(50, 3) * 5)  # the mesh normaliser does not touch the added edges
    sim2 = FlowSimulator(latent=16, blocks=1, layers=1)
    sim2.load_state_dict(sim.state_dict())
    sim2.edge_norm.fit(torch.randn(50, 3))
    d1, d2 = sim(u, nt, pos, ei[:, :0], new), sim2(u, nt, pos, ei[:, :0], new)
    assert torch.equal(d1, d2)
    with torch.no_grad():  # ... and the added edges go through their own encoder
        sim2.net.added_enc[0].weight.mul_(2)
    assert not torch.allclose(sim2(u, nt, pos, ei[:, :0], new), d1)


def test_mesh_edge_inputs_are_unchanged_when_long_edges_are_added(mesh):
    """Fitted as in the chapter (mesh normaliser on mesh edges, added normaliser on added edges), the
    normalised mesh-edge features the encoder sees are the same with and without added edges; one
    normaliser shared by both sets (the official code) would compress them."""
    pos, cells, _ = mesh
    pos = torch.as_tensor(pos, dtype=torch.float32)
    ei = triangles_to_edges(torch.as_tensor(cells), len(pos))
    src = torch.arange(0, len(pos), max(1, len(pos) // 20))[:20]  # 20 long edges to the far node
    far = torch.full_like(src, int(torch.argmax(pos[:, 0])))
    new = torch.cat([torch.stack([src, far]), torch.stack([far, src])], 1)
    new = new[:, new[0] != new[1]]
    seen = []

    def run(sim, added):
        hook = sim.net.edge_enc.register_forward_hook(lambda mod, inp, out: seen.append(inp[0].clone()))
        nt = torch.zeros(len(pos), dtype=torch.long)
        sim(torch.zeros(len(pos), 2), nt, pos, ei, added)
        hook.remove()
        return seen[-1]

    mesh_feat, new_feat = mesh_edge_features(pos, ei), mesh_edge_features(pos, new)
    plain = FlowSimulator(latent=8, blocks=1, layers=1)
    plain.edge_norm.fit(mesh_feat)
    rewired = FlowSimulator(latent=8, blocks=1, layers=1)
    rewired.edge_norm.fit(mesh_feat)
    rewired.added_norm.fit(new_feat)
    assert torch.equal(run(plain, None), run(rewired, new))
    shared = FlowSimulator(latent=8, blocks=1, layers=1)
    shared.edge_norm.fit(torch.cat([mesh_feat, new_feat]))
    ratio = run(plain, None).std(0) / run(shared, None).std(0)
    assert ratio[2] > 3  # a shared normaliser shrinks the spread of the mesh-edge lengths (here ~11x)


def test_bad_sizes():
    with pytest.raises(ValueError, match="h_min"):
        graded_cylinder_mesh(h_min=0.1, h_max=0.05)
