"""Tests of iclr25.graphs.bundle: identities of flat vector bundles, heat kernels and BuNN layers."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest
import scipy.linalg
import torch
from torch_geometric.utils import from_networkx

from iclr25.graphs.bundle import (
    BuNNConv,
    NodeModel,
    SumGNN,
    angle_orthogonal,
    block_diag_eig,
    bundle_heat_kernel,
    bundle_laplacian,
    heat_kernel_spectral,
    heat_kernel_taylor,
    householder_orthogonal,
    laplacian_eigh,
    normalized_adjacency,
    normalized_laplacian,
    orthogonal_from_params,
    stacked_eig,
    taylor_degree,
    taylor_error_bound,
    dirichlet_energy,
)

pytestmark = pytest.mark.usefixtures("float64_default")  # every test here runs in float64


@pytest.fixture(scope="module")
def karate():
    G = nx.karate_club_graph()
    return from_networkx(G).edge_index, G.number_of_nodes()


def random_frames(n: int, d: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return householder_orthogonal(torch.randn(n, d * (d - 1) // 2, generator=g), d)


@pytest.mark.parametrize("d", [2, 3, 4, 5])
def test_householder_is_orthogonal_with_fixed_determinant(d):
    Q = householder_orthogonal(torch.randn(200, d * (d - 1) // 2), d)
    eye = torch.eye(d).expand_as(Q)
    assert torch.allclose(Q.transpose(-1, -2) @ Q, eye, atol=1e-12)
    assert torch.allclose(torch.linalg.det(Q), torch.full((200,), (-1.0) ** d), atol=1e-10)
    assert torch.allclose(householder_orthogonal(torch.zeros(1, d * (d - 1) // 2), d)[0], -torch.eye(d))


def test_angle_map_is_a_rotation_group_homomorphism():
    a, b = torch.tensor([0.3]), torch.tensor([1.1])
    assert torch.allclose(angle_orthogonal(a) @ angle_orthogonal(b), angle_orthogonal(a + b), atol=1e-14)
    assert torch.allclose(torch.linalg.det(angle_orthogonal(torch.randn(50, 1))), torch.ones(50))
    with pytest.raises(ValueError, match="householder"):
        orthogonal_from_params(torch.zeros(3, 1), 2, method="cayley")
    with pytest.raises(ValueError, match="d=2"):
        orthogonal_from_params(torch.zeros(3, 3), 3, method="angle")


def test_bundle_laplacian_blocks_psd_and_kernel(karate):
    ei, n = karate
    d = 3
    O = random_frames(n, d)
    LB = bundle_laplacian(ei, O, n)
    L = normalized_laplacian(ei, n)
    assert torch.allclose(LB, LB.T, atol=1e-14)
    u, v = ei[:, 0].tolist()
    blk = LB[v * d:(v + 1) * d, u * d:(u + 1) * d]
    assert torch.allclose(blk, L[v, u] * O[v].T @ O[u], atol=1e-14)
    assert torch.allclose(LB[v * d:(v + 1) * d, v * d:(v + 1) * d], torch.eye(d), atol=1e-14)
    ev, vec = torch.linalg.eigh(LB)
    assert ev.min() > -1e-12  # PSD
    assert int((ev < 1e-10).sum()) == d  # connected graph: ker L_B has dimension d
    # the kernel is {O_v^T y sqrt(deg_v)}: check for every y in a basis
    deg = torch.bincount(ei[0], minlength=n).double()
    for y in torch.eye(d):
        k = (O.transpose(1, 2) @ y * deg.sqrt()[:, None]).reshape(-1)
        assert (LB @ k).abs().max() < 1e-12


def test_bundle_laplacian_equals_sheaf_laplacian(karate):
    """NSD's normalised sheaf Laplacian with restriction maps F_{v<e} = O_v equals L_B."""
    ei, n = karate
    d = 2
    O = random_frames(n, d, seed=3)
    und = ei[:, ei[0] < ei[1]]
    delta = torch.zeros(und.shape[1] * d, n * d)  # coboundary: (δx)_e = F_{v<e} x_v - F_{u<e} x_u
    for e, (u, v) in enumerate(und.T.tolist()):
        delta[e * d:(e + 1) * d, v * d:(v + 1) * d] = O[v]
        delta[e * d:(e + 1) * d, u * d:(u + 1) * d] = -O[u]
    deg = torch.bincount(ei[0], minlength=n).double()
    Dm = torch.diag(deg.repeat_interleave(d).rsqrt())
    assert torch.allclose(Dm @ delta.T @ delta @ Dm, bundle_laplacian(ei, O, n), atol=1e-13)


def test_gauge_invariance_of_bundle_laplacian(karate):
    ei, n = karate
    O = random_frames(n, 3, seed=1)
    R = random_frames(1, 3, seed=2)[0]
    assert torch.allclose(bundle_laplacian(ei, R @ O, n), bundle_laplacian(ei, O, n), atol=1e-13)


@pytest.mark.parametrize("t", [0.1, 1.0, 7.5])
def test_spectral_bundle_heat_kernel_equals_expm(karate, t):
    ei, n = karate
    d, m = 2, 3
    O = random_frames(n, d, seed=4)
    lam, phi = laplacian_eigh(ei, n)
    x = torch.randn(n, 1, d, m)
    out = bundle_heat_kernel(x, O[:, None], lam, phi, t).reshape(n * d, m)
    ref = torch.from_numpy(scipy.linalg.expm(-t * bundle_laplacian(ei, O, n).numpy())) @ x.reshape(n * d, m)
    assert (out - ref).abs().max() < 1e-10


def test_truncated_eigs_and_sparse_operators(karate):
    ei, n = karate
    lam, phi = laplacian_eigh(ei, n)
    lk, pk = laplacian_eigh(ei, n, k=8)
    assert torch.allclose(lk, lam[:8], atol=1e-10)
    assert torch.allclose((pk.T @ phi[:, :8]).abs(), torch.eye(8), atol=1e-8)  # same eigenvectors up to sign
    A = normalized_adjacency(ei, n, torch.float64).to_dense()
    assert torch.allclose(torch.eye(n) - A, normalized_laplacian(ei, n), atol=1e-14)
    assert lam.min() > -1e-12 and lam.max() <= 2 + 1e-12


@pytest.mark.parametrize("t", [0.5, 3.0])
def test_taylor_meets_its_bound(karate, t):
    ei, n = karate
    L = normalized_laplacian(ei, n)
    lam, phi = laplacian_eigh(ei, n)
    y = torch.randn(n, 2, 4)
    K = taylor_degree(t * 2.0, tol=1e-9)
    err = (heat_kernel_taylor(y, L, t, K) - heat_kernel_spectral(y, lam, phi, t)).abs().max()
    assert err < 1e-9 * y.abs().sum(0).max()
    low = (heat_kernel_taylor(y, L, t, 2) - heat_kernel_spectral(y, lam, phi, t)).abs().max()
    assert low > 10 * err  # truncation matters
    assert taylor_degree(6.0) > taylor_degree(1.0) > taylor_degree(0.1)


@pytest.mark.parametrize("K", [0, 1, 2, 4, 9, 20])
def test_taylor_bound_holds_on_the_spectrum_and_needs_no_exponential_factor(K):
    """|e^{-x} - T_K(x)| <= x^{K+1}/(K+1)! on [0, x_max]; the bound is attained up to e^{-x}."""
    x = torch.linspace(0, 6.0, 601)
    taylor = sum((-x) ** k / math.factorial(k) for k in range(K + 1))
    err = (torch.exp(-x) - taylor).abs()
    bound = torch.tensor([taylor_error_bound(float(v), K) for v in x])
    assert (err <= bound * (1 + 1e-9) + 1e-15).all()
    # the remainder is e^{-ξ} x^{K+1}/(K+1)! with ξ in [0, x]: at least e^{-x} times the bound
    assert (err >= torch.exp(-x) * bound * (1 - 1e-9) - 1e-15).all()
    # degrees from the bound: K(2, 1e-3) = 9 (the old bound with e^{x} asked for 10)
    assert taylor_degree(2.0, 1e-3) == 9 and taylor_error_bound(2.0, 8) > 1e-3


def test_gcn_laplacian_kernel_is_sqrt_degree_plus_one(karate):
    """GCN's operator D~^{-1/2}(A+I)D~^{-1/2} has fixed point sqrt(d+1): not a constant."""
    ei, n = karate
    Lt = normalized_laplacian(ei, n, self_loops=True)
    deg = torch.bincount(ei[0], minlength=n).double()
    k = (deg + 1).sqrt()
    assert (Lt @ k).abs().max() < 1e-12
    ev = torch.linalg.eigvalsh(Lt)
    assert int((ev.abs() < 1e-10).sum()) == 1 and ev.max() < 2  # self-loops: no eigenvalue 2
    x = torch.randn(n, 3, generator=torch.Generator().manual_seed(0)) + 1.0  # k @ x far from 0
    h = x
    for _ in range(400):
        h = h - Lt @ h  # 400 GCN propagations
    limit = k[:, None] * (k @ x) / (k @ k)
    assert (h - limit).abs().max() < 1e-6
    assert (h / k[:, None]).std(0).max() < 1e-6 and h.std(0).min() > 1e-3  # constant only after / sqrt(d+1)


def test_normalized_adjacency_is_symmetric_for_directed_input_and_backward_is_exact():
    """The layer's sparse product uses A as its own transpose in the backward: the matrix must be
    symmetric even when edge_index is directed or has self-loops."""
    ei = torch.tensor([[0, 1, 2, 3, 3, 4, 2], [1, 2, 0, 4, 3, 0, 2]])  # directed, with self-loops
    n = 5
    A = normalized_adjacency(ei, n, torch.float64).to_dense()
    assert torch.allclose(A, A.T, atol=0)
    assert torch.allclose(torch.eye(n) - A, normalized_laplacian(ei, n), atol=1e-14)
    torch.manual_seed(3)
    conv = BuNNConv(8, 2, 2, t_init=[0.4, 1.1], kernel="taylor", K=6).double()
    with torch.no_grad():
        conv.phi[-1].weight.normal_()
    x = torch.randn(n, 8, requires_grad=True)
    out = conv(x, ei)
    (g,) = torch.autograd.grad(out.square().sum(), x)
    L = normalized_laplacian(ei, n)  # dense reference, autograd through ordinary matmuls
    conv_dense = BuNNConv(8, 2, 2, t_init=[0.4, 1.1], kernel="taylor", K=6).double()
    conv_dense.load_state_dict(conv.state_dict())
    conv_dense.laplacian_apply = lambda z, adj: L @ z  # type: ignore[method-assign]
    out_ref = conv_dense(x, ei)
    (g_ref,) = torch.autograd.grad(out_ref.square().sum(), x)
    assert (out - out_ref).abs().max() < 1e-12
    assert (g - g_ref).abs().max() < 1e-12


def test_per_bundle_time_and_batch_block_diag(karate):
    ei, n = karate
    lam, phi = laplacian_eigh(ei, n)
    y = torch.randn(n, 2, 3)
    t = torch.tensor([0.2, 4.0])
    out = heat_kernel_spectral(y, lam, phi, t)
    for b in range(2):
        assert torch.allclose(out[:, b:b + 1], heat_kernel_spectral(y[:, b:b + 1], lam, phi, t[b]), atol=1e-13)
    lam2, phi2 = block_diag_eig([(lam, phi), (lam, phi)])
    y2 = torch.randn(2 * n, 2, 3)
    out2 = heat_kernel_spectral(y2, lam2, phi2, t)
    assert torch.allclose(out2[n:], heat_kernel_spectral(y2[n:], lam, phi, t), atol=1e-12)
    out3 = heat_kernel_spectral(y2, *stacked_eig(lam, phi, 2), t)  # dense stack of two copies
    assert torch.allclose(out3, out2, atol=1e-12)
    with pytest.raises(ValueError, match="rows"):
        heat_kernel_spectral(y2, *stacked_eig(lam, phi, 3), t)


def _identity_lin(conv: BuNNConv) -> None:
    with torch.no_grad():
        conv.lin.weight.copy_(torch.eye(conv.channels))
        conv.lin.bias.zero_()


@pytest.mark.parametrize("kernel", ["spectral", "taylor"])
def test_bunnconv_is_the_bundle_heat_kernel(karate, kernel):
    """With W = I and no bias, the layer is exp(-t L_B) for the frames it computes (layout check)."""
    ei, n = karate
    torch.manual_seed(0)
    conv = BuNNConv(8, bundle_dim=2, num_bundles=2, t_init=[0.4, 1.3], kernel=kernel, K=40).double()
    _identity_lin(conv)
    with torch.no_grad():
        conv.phi[-1].weight.normal_()  # node-dependent frames
    x = torch.randn(n, 8)
    out, O = conv(x, ei, eig=laplacian_eigh(ei, n), return_frames=True)
    xv, ov = x.reshape(n, 2, 2, 2), out.reshape(n, 2, 2, 2)
    for b, t in enumerate(conv.diffusion_time().tolist()):
        HB = torch.from_numpy(scipy.linalg.expm(-t * bundle_laplacian(ei, O[:, b], n).detach().numpy()))
        ref = (HB @ xv[:, b].reshape(2 * n, 2)).reshape(n, 2, 2)
        assert (ov[:, b] - ref).abs().max() < 1e-10


@pytest.mark.parametrize("block", ["plain", "sep", "res"])
@pytest.mark.parametrize("kind", ["bunn", "bunn-identity", "gcn", "sage", "gin", "mlp"])
def test_models_are_permutation_equivariant(karate, kind, block):
    ei, n = karate
    if block == "res" and kind.startswith("bunn"):
        with pytest.raises(ValueError, match="res"):
            NodeModel(kind, 3, 16, 2, layers=2, block=block)
        return
    torch.manual_seed(1)
    model = NodeModel(kind, 3, 16, 2, layers=2, block=block, bundle_dim=2, num_bundles=4, kernel="taylor", K=6,
                      phi_gnn=1 if block == "sep" else 0) \
        if kind.startswith("bunn") else NodeModel(kind, 3, 16, 2, layers=2, block=block)
    model = model.double().eval()
    x = torch.randn(n, 3)
    perm = torch.randperm(n)
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(n)
    out = model(x, ei)
    out_p = model(x[perm], inv[ei])
    assert torch.allclose(out_p, out[perm], atol=1e-10)


def test_res_block_is_platonovs_gcn_module_without_ego_features(karate):
    """block="res": h <- h + FF(conv(LN(h))), the FF reading the aggregate alone (Platonov et al.'s GCN module)."""
    ei, n = karate
    torch.manual_seed(3)
    model = NodeModel("gcn", 3, 8, 1, layers=1, block="res").double().eval()
    x = torch.randn(n, 3, dtype=torch.float64)
    h = model.enc(x)
    h = h + model.ffs[0](model.convs[0](model.norms[0](h), ei))
    assert (model(x, ei) - model.dec(model.norms[1](h))).abs().max() < 1e-12
    assert model.ffs[0][0].in_features == 8  # no ego concatenation (sep reads 2 x 8)
    assert NodeModel("gcn", 3, 8, 1, layers=1, block="sep").ffs[0][0].in_features == 16


def test_spectral_and_taylor_layers_agree_and_backprop(karate):
    ei, n = karate
    torch.manual_seed(2)
    spec = BuNNConv(8, 2, 2, t_init=0.7, kernel="spectral").double()
    tay = BuNNConv(8, 2, 2, t_init=0.7, kernel="taylor", K=taylor_degree(1.4, 1e-12)).double()
    tay.load_state_dict(spec.state_dict())
    x = torch.randn(n, 8, requires_grad=True)
    a = spec(x, ei, eig=laplacian_eigh(ei, n))
    b = tay(x, normalized_adjacency(ei, n, torch.float64))
    assert (a - b).abs().max() < 1e-10
    (ga,) = torch.autograd.grad(a.square().sum(), x)
    (gb,) = torch.autograd.grad(b.square().sum(), x)
    assert (ga - gb).abs().max() < 1e-9  # the symmetric sparse product's backward is right


def test_large_time_limit_oversmooths_only_the_trivial_bundle(karate):
    ei, n = karate
    d = 2
    lam, phi = laplacian_eigh(ei, n)
    deg = torch.bincount(ei[0], minlength=n).double()
    L = normalized_laplacian(ei, n)
    x = torch.randn(n, 1, d, 1)
    eye = torch.eye(d).expand(n, 1, d, d)
    triv = bundle_heat_kernel(x, eye, lam, phi, 1e4)[:, 0, :, 0]
    assert (triv / deg.sqrt()[:, None]).std(0).max() < 1e-10  # constant after D^{-1/2}
    assert dirichlet_energy(triv, L) < 1e-12
    O = random_frames(n, d, seed=5)[:, None]
    rot = bundle_heat_kernel(x, O, lam, phi, 1e4)[:, 0, :, 0]
    assert dirichlet_energy(rot, L) > 0.1  # stays spread across nodes
    # ... while its bundle Dirichlet energy vanishes: it converged to ker L_B, not to a constant
    assert dirichlet_energy(rot.reshape(n * d, 1), bundle_laplacian(ei, O[:, 0], n)) < 1e-12


def test_bad_options_raise():
    with pytest.raises(ValueError, match="spectral"):
        BuNNConv(8, 2, 2, kernel="chebyshev")
    with pytest.raises(ValueError, match="identity"):
        BuNNConv(8, 2, 2, frames="random")
    with pytest.raises(ValueError, match="divisible"):
        BuNNConv(6, 2, 2)
    with pytest.raises(ValueError, match="gcn"):
        NodeModel("gat", 3, 8, 1)
    with pytest.raises(ValueError, match="sep"):
        NodeModel("gcn", 3, 8, 1, block="gated")
    with pytest.raises(ValueError, match="eig"):
        BuNNConv(8, 2, 2, kernel="spectral")(torch.randn(4, 8), torch.tensor([[0, 1], [1, 0]]))
    with pytest.raises(ValueError):
        taylor_degree(-1.0)
    assert math.isfinite(taylor_degree(20.0))
    with pytest.raises(ValueError, match="t_param"):
        BuNNConv(8, 2, 2, t_param="softplus")
    with pytest.raises(ValueError, match="t_init > 0"):
        BuNNConv(8, 2, 2, t_param="log", t_init=[0.0, 1.0])


def test_log_time_parametrisation_starts_at_t_init_and_moves_by_relative_steps():
    conv = BuNNConv(8, 2, 2, t_param="log", t_init=[0.1, 100.0])
    assert np.allclose(conv.diffusion_time().tolist(), [0.1, 100.0], rtol=1e-6)
    # one Adam step of size lr on tau = log t multiplies every t by about exp(+-lr), whatever its scale
    opt = torch.optim.Adam([conv.tau], lr=0.05)
    conv.diffusion_time().sum().backward()
    opt.step()
    ratio = np.array(conv.diffusion_time().tolist()) / np.array([0.1, 100.0])
    assert np.allclose(ratio, math.exp(-0.05), rtol=1e-4)
    relu = BuNNConv(8, 2, 2, t_init=[0.1, 100.0], t_max=50.0)
    assert np.allclose(relu.diffusion_time().tolist(), [0.1, 50.0], rtol=1e-6)


def test_layer_jacobian_factorises_through_the_heat_kernel(karate):
    """For u != v, d out_v / d x_u = Ô_v^T W D_vu S'(x_u): the learned frames add only the
    node-local factor S'(x_u) = d(O(x_u) x_u)/dx_u; the distance enters through H(t_b)_vu alone."""
    ei, n = karate
    torch.manual_seed(4)
    c, d, m = 2, 2, 2
    conv = BuNNConv(c * d * m, d, c, t_init=[0.7, 5.0], kernel="spectral").double()
    with torch.no_grad():
        conv.phi[-1].weight.normal_()  # frames that depend on the features
    lam, phi = laplacian_eigh(ei, n)
    x = torch.randn(n, c * d * m)
    v = 0
    J = torch.autograd.functional.jacobian(lambda z: conv(z, ei, eig=(lam, phi))[v], x)  # (F, n, F)
    O = conv.frames_of(x)  # (n, c, d, d)
    W = conv.lin.weight
    H = torch.stack([phi @ torch.diag(torch.exp(-t * lam)) @ phi.T for t in conv.diffusion_time()])  # (c, n, n)

    def sync(z):  # S(x_u) = O(x_u) x_u, per bundle, for one node
        o = conv.frames_of(z[None])[0]
        return torch.einsum("cij,cjm->cim", o, z.reshape(c, d, m)).reshape(-1)

    Ohat = torch.block_diag(*[torch.kron(O[v, b].contiguous(), torch.eye(m)) for b in range(c)])
    for u in range(1, n, 3):
        S = torch.autograd.functional.jacobian(sync, x[u])
        D = torch.diag(H[:, v, u].repeat_interleave(d * m))
        assert torch.allclose(J[:, u], Ohat.T @ W @ D @ S, atol=1e-12)
        bound = torch.linalg.matrix_norm(W, 2) * H[:, v, u].abs().max() * torch.linalg.matrix_norm(S, 2)
        assert torch.linalg.matrix_norm(J[:, u], 2) <= bound * (1 + 1e-9)


def test_package_functions_keep_their_inputs_device(karate, on_foreign_device):
    """Every tensor a function makes lives on its input's device (no tensor made without device=):
    run with the default device switched to 'meta', the results must stay on the CPU."""
    ei, n = karate
    O = random_frames(n, 2)
    lam, phi = laplacian_eigh(ei, n)
    y = torch.randn(n, 2, 4)
    on_foreign_device(normalized_laplacian, ei, n)
    on_foreign_device(normalized_laplacian, ei, n, self_loops=True)
    on_foreign_device(bundle_laplacian, ei, O, n)
    on_foreign_device(laplacian_eigh, ei, n)
    on_foreign_device(laplacian_eigh, ei, n, k=6)
    on_foreign_device(block_diag_eig, [(lam, phi), (lam, phi)])
    on_foreign_device(heat_kernel_spectral, y, lam, phi, torch.tensor([0.5, 2.0]))
    on_foreign_device(heat_kernel_spectral, torch.cat([y, y]), *stacked_eig(lam, phi, 2), 1.0)
    on_foreign_device(heat_kernel_taylor, y, normalized_laplacian(ei, n), 1.0, 5)
    on_foreign_device(bundle_heat_kernel, torch.randn(n, 1, 2, 3), O[:, None], lam, phi, 3.0)
    on_foreign_device(normalized_adjacency, ei, n)
    on_foreign_device(householder_orthogonal, torch.randn(5, 3), 3)
    on_foreign_device(angle_orthogonal, torch.randn(5, 1))
    on_foreign_device(dirichlet_energy, torch.randn(n, 3), normalized_laplacian(ei, n))
    x = torch.randn(n, 3)
    for kind, kw in [("bunn", dict(kernel="taylor", K=4)), ("bunn-identity", dict(kernel="spectral")),
                     ("gcn", {}), ("sage", {}), ("gin", {}), ("mlp", {})]:
        model = NodeModel(kind, 3, 8, 1, layers=2, bundle_dim=2, num_bundles=2, **kw) if kind.startswith("bunn") \
            else NodeModel(kind, 3, 8, 1, layers=2)
        model = model.double()
        on_foreign_device(model, x, ei, eig=(lam, phi), adj=normalized_adjacency(ei, n, torch.float64))


def test_sumgnn_is_the_neighbour_sum_network(karate):
    """One SumGNN layer is h + GELU(W_s h + W_n A h) after the input layer, with A the 0/1 adjacency."""
    ei, n = karate
    torch.manual_seed(2)
    net = SumGNN(5, 8, 3, layers=1).double()
    x = torch.randn(n, 5)
    A = torch.zeros(n, n)
    A[ei[1], ei[0]] = 1.0
    h = torch.nn.functional.gelu(net.inp(x))
    h = h + torch.nn.functional.gelu(net.self_lin[0](h) + net.nbr_lin[0](A @ h))
    assert (net(x, ei) - net.out(h)).abs().max() < 1e-12
    assert net[-1] is net.out


def test_sep_layer_concatenates_ego_and_diffused_features_before_desync(karate):
    """BuNNConv(sep=True): O_v^T FF([x_v, (H(t) (O x))_v]) with a SumGNN frame network."""
    ei, n = karate
    torch.manual_seed(3)
    conv = BuNNConv(8, bundle_dim=2, num_bundles=2, t_init=[0.4, 1.3], kernel="spectral", phi_gnn=1,
                    sep=True).double()
    with torch.no_grad():
        conv.phi[-1].weight.normal_()
    x = torch.randn(n, 8)
    eig = laplacian_eigh(ei, n)
    out, O = conv(x, ei, eig=eig, phi_edge_index=ei, return_frames=True)
    y = torch.einsum("ncij,ncjm->ncim", O, x.reshape(n, 2, 2, 2)).reshape(n, 2, 4)
    z = heat_kernel_spectral(y, *eig, conv.diffusion_time()).reshape(n, 8)
    f = conv.lin(torch.cat([x, z], -1)).reshape(n, 2, 2, 2)
    ref = torch.einsum("ncji,ncjm->ncim", O, f).reshape(n, 8)
    assert (out - ref).abs().max() < 1e-12
    with pytest.raises(ValueError):
        conv(x, ei, eig=eig)  # a SumGNN frame network needs the graph
