"""Kernels: Gram matrices, SVGD repulsions and Stein kernels against autograd of the definitions."""

import math

import pytest
import torch

from iclr25.sampling import IMQ, RBF, Linear, Matern52, SumKernel, stein_kernel_matrix


# each kernel with its definition k(x, y), written from the formula, for autograd
KERNELS = [
    (RBF(0.7), lambda x, y: torch.exp(-((x - y) ** 2).sum() / (2 * 0.7**2))),
    (IMQ(1.3, -0.5), lambda x, y: (1.3**2 + ((x - y) ** 2).sum()) ** -0.5),
    (IMQ(0.8, -0.3), lambda x, y: (0.8**2 + ((x - y) ** 2).sum()) ** -0.3),
    (Matern52(1.5), lambda x, y: _matern(torch.linalg.norm(x - y), math.sqrt(5) / 1.5)),
    (Linear(2.0), lambda x, y: 2.0 + x @ y),
    (Matern52(1.0) + Linear(1.0),
     lambda x, y: _matern(torch.linalg.norm(x - y), math.sqrt(5)) + 1.0 + x @ y),
]
IDS = ["rbf", "imq", "imq-0.3", "matern52", "linear", "matern+linear"]


def _matern(r, a):
    return (1 + a * r + (a * r) ** 2 / 3) * torch.exp(-a * r)


def _stein_autograd(k, x, y, sx, sy):
    """k_pi(x, y) from its definition, with gradients and the mixed Hessian by autograd."""
    x, y = x.clone().requires_grad_(), y.clone().requires_grad_()
    kxy = k(x, y)
    gx, gy = torch.autograd.grad(kxy, (x, y), create_graph=True)
    tr = sum(torch.autograd.grad(gx[a], y, retain_graph=True)[0][a] for a in range(len(x)))
    return (kxy * (sx @ sy) + sx @ gy + sy @ gx + tr).detach()


@pytest.mark.parametrize("kernel,k", KERNELS, ids=IDS)
def test_gram_matches_definition(kernel, k):
    g = torch.Generator().manual_seed(0)
    X, Y = torch.randn(4, 3, generator=g), torch.randn(5, 3, generator=g)
    want = torch.stack([torch.stack([k(x, y) for y in Y]) for x in X])
    torch.testing.assert_close(kernel.matrix(X, Y), want)


@pytest.mark.parametrize("kernel,k", KERNELS, ids=IDS)
def test_repulsion_matches_autograd(kernel, k):
    g = torch.Generator().manual_seed(1)
    X, Y = torch.randn(6, 3, generator=g), torch.randn(4, 3, generator=g)
    want = torch.zeros_like(Y)
    for m, y in enumerate(Y):
        for x in X:
            x = x.clone().requires_grad_()
            want[m] += torch.autograd.grad(k(x, y), x)[0]
    torch.testing.assert_close(kernel.repulsion(X, Y), want)


@pytest.mark.parametrize("kernel,k", KERNELS, ids=IDS)
def test_stein_kernel_matches_autograd(kernel, k):
    g = torch.Generator().manual_seed(2)
    X, Y = torch.randn(4, 3, generator=g), torch.randn(3, 3, generator=g)
    SX, SY = torch.randn(4, 3, generator=g), torch.randn(3, 3, generator=g)
    want = torch.stack([torch.stack([_stein_autograd(k, x, y, sx, sy) for y, sy in zip(Y, SY)])
                        for x, sx in zip(X, SX)])
    torch.testing.assert_close(kernel.stein(X, Y, SX, SY), want)


@pytest.mark.parametrize("kernel", [k for k, _ in KERNELS], ids=IDS)
def test_stein_matrix_symmetric_psd_and_batched(kernel):
    g = torch.Generator().manual_seed(3)
    X, S = torch.randn(2, 7, 3, generator=g), torch.randn(2, 7, 3, generator=g)
    K = stein_kernel_matrix(X, S, kernel)
    torch.testing.assert_close(K, K.transpose(-1, -2))
    assert torch.linalg.eigvalsh(K).min() > -1e-9  # a Stein kernel is positive semi-definite
    torch.testing.assert_close(K[1], stein_kernel_matrix(X[1], S[1], kernel))


def test_rbf_stein_diagonal_closed_form():
    # k_pi(x, x) = |s(x)|^2 + d / h^2 for the RBF kernel
    g = torch.Generator().manual_seed(4)
    X, S = torch.randn(5, 4, generator=g), torch.randn(5, 4, generator=g)
    diag = stein_kernel_matrix(X, S, RBF(0.5)).diagonal()
    torch.testing.assert_close(diag, (S * S).sum(-1) + 4 / 0.25)


def test_sum_kernel_is_sum_of_stein_kernels():
    g = torch.Generator().manual_seed(5)
    X, S = torch.randn(6, 2, generator=g), torch.randn(6, 2, generator=g)
    ks = [RBF(1.0), IMQ(1.0, -0.5), Linear(0.5)]
    total = stein_kernel_matrix(X, S, SumKernel(*ks))
    torch.testing.assert_close(total, sum(stein_kernel_matrix(X, S, k) for k in ks))
    assert len((ks[0] + ks[1] + ks[2]).kernels) == 3  # sums flatten


@pytest.mark.parametrize("make", [lambda: RBF(0.0), lambda: RBF(-1), lambda: IMQ(0.0),
                                  lambda: IMQ(1.0, 0.5), lambda: IMQ(1.0, -1.0),
                                  lambda: Matern52(0.0), lambda: Linear(-1.0),
                                  lambda: SumKernel(), lambda: SumKernel(RBF(), 3)])
def test_bad_parameters_raise(make):
    with pytest.raises(ValueError):
        make()


def test_bad_shapes_raise():
    X = torch.randn(4, 2)
    with pytest.raises(ValueError, match="scores"):
        stein_kernel_matrix(X, torch.randn(4, 3), RBF())
    with pytest.raises(ValueError, match="particles"):
        stein_kernel_matrix(torch.randn(4), torch.randn(4), RBF())
    with pytest.raises(ValueError, match="particles"):
        stein_kernel_matrix(torch.ones(4, 2, dtype=torch.long), torch.ones(4, 2), RBF())


@pytest.mark.parametrize("kernel", [k for k, _ in KERNELS], ids=IDS)
def test_svgd_terms_is_the_velocity_and_the_stein_sum(kernel):
    # the fused pass equals N * (drift + repulsion) / N and the V-statistic sum, batched
    g = torch.Generator().manual_seed(6)
    X, S = torch.randn(3, 7, 2, generator=g), torch.randn(3, 7, 2, generator=g)
    drive, stein_sum = kernel.svgd_terms(X, S)
    torch.testing.assert_close(drive, kernel.matrix(X, X).transpose(-1, -2) @ S + kernel.repulsion(X, X))
    torch.testing.assert_close(stein_sum, stein_kernel_matrix(X, S, kernel).sum((-1, -2)))


@pytest.mark.parametrize("kernel", [RBF(0.7), IMQ(1.0, -0.5), Matern52(1.3), Linear(0.5), Matern52(1.0) + Linear(1.0)])
def test_gram_and_repulsion_equal_the_separate_calls(kernel):
    g = torch.Generator().manual_seed(3)
    X = torch.randn(2, 7, 3, generator=g, dtype=torch.float64)
    K, R = kernel.gram_and_repulsion(X)
    assert torch.equal(K, kernel.matrix(X, X)) and torch.equal(R, kernel.repulsion(X, X))
