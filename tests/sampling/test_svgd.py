"""SVGD: the vectorised step against a naive double loop, moment matching, the recorded trace."""

import math

import pytest
import torch

from iclr25.sampling import (IMQ, RBF, Linear, Matern52, gaussian_score, ksd,
                             standard_gaussian_score, svgd, svgd_step, ula)



def _matern(x, y, ell):
    ar = math.sqrt(5) / ell * torch.linalg.vector_norm(x - y)  # its gradient at x = y is 0
    return (1 + ar + ar**2 / 3) * torch.exp(-ar)


# each kernel object with its definition k(x, y), written from the formula, for autograd
KERNELS = [
    (RBF(0.8), lambda x, y: torch.exp(-((x - y) ** 2).sum() / (2 * 0.8**2))),
    (IMQ(1.0, -0.5), lambda x, y: (1.0 + ((x - y) ** 2).sum()) ** -0.5),
    (Matern52(1.2), lambda x, y: _matern(x, y, 1.2)),
    (Linear(1.0), lambda x, y: 1.0 + x @ y),
    (Matern52(1.0) + Linear(1.0), lambda x, y: _matern(x, y, 1.0) + 1.0 + x @ y),
]


def _naive_step(X, score_fn, k, eta):
    """x_i + eta/N sum_j [k(x_j, x_i) s(x_j) + grad_{x_j} k(x_j, x_i)], j = i included, by loops."""
    S, N = score_fn(X), len(X)
    out = X.clone()
    for i in range(N):
        phi = torch.zeros(X.shape[1])
        for j in range(N):
            xj = X[j].clone().requires_grad_()
            kji = k(xj, X[i])
            phi += kji.detach() * S[j] + torch.autograd.grad(kji, xj)[0]
        out[i] += eta * phi / N
    return out


@pytest.mark.parametrize("kernel,k", KERNELS, ids=[repr(k) for k, _ in KERNELS])
def test_step_matches_naive_double_loop(kernel, k):
    g = torch.Generator().manual_seed(0)
    X = torch.randn(7, 3, generator=g)
    score = gaussian_score(torch.tensor([0.5, -1.0, 0.0]), torch.diag(torch.tensor([1.0, 2.0, 0.5])))
    torch.testing.assert_close(svgd_step(X, score, kernel, 0.1), _naive_step(X, score, k, 0.1))


def test_single_particle_follows_the_score():
    # N = 1: the j = i term gives k(x, x) s(x) with zero repulsion: gradient ascent on log pi
    X = torch.tensor([[2.0, -1.0]])
    torch.testing.assert_close(svgd_step(X, standard_gaussian_score, RBF(), 0.1), 0.9 * X)


def test_linear_kernel_matches_gaussian_moments():
    # with k = 1 + x.y the fixed points satisfy mean(s) = 0 and mean(s x^T) = -I: for a Gaussian
    # target the particles' mean and (1/N) covariance equal the target's exactly
    m = torch.tensor([1.0, -2.0])
    C = torch.tensor([[2.0, 0.6], [0.6, 1.0]])
    g = torch.Generator().manual_seed(1)
    X = torch.randn(10, 2, generator=g) * 0.5
    X, _ = svgd(X, gaussian_score(m, C), Linear(1.0), eta=0.05, n_steps=3000, record_every=3000)
    mean = X.mean(0)
    cov = (X - mean).T @ (X - mean) / len(X)
    torch.testing.assert_close(mean, m, atol=1e-6, rtol=0)
    torch.testing.assert_close(cov, C, atol=1e-6, rtol=0)


def test_svgd_trace_and_batches():
    g = torch.Generator().manual_seed(2)
    X0 = torch.randn(3, 12, 2, generator=g) + 2.0  # 3 independent runs
    X, trace = svgd(X0, standard_gaussian_score, RBF(), eta=0.3, n_steps=40, record_every=10)
    assert trace.shape == (5, 3)
    torch.testing.assert_close(trace[0], ksd(X0, standard_gaussian_score, RBF()))
    torch.testing.assert_close(trace[-1], ksd(X, standard_gaussian_score, RBF()))
    X1, _ = svgd(X0[1], standard_gaussian_score, RBF(), eta=0.3, n_steps=40)
    torch.testing.assert_close(X[1], X1)  # batches are independent runs
    assert (trace[-1] < trace[0] / 10).all()  # KSD falls as the particles move to the target


@pytest.mark.parametrize("n_steps, record_every", [(5, 2), (7, 3), (4, 4), (3, 10)])
def test_svgd_takes_exactly_n_steps_whatever_the_recording(n_steps: int, record_every: int) -> None:
    g = torch.Generator().manual_seed(4)
    X0 = torch.randn(9, 2, generator=g) + 1.0
    X, trace = svgd(X0, standard_gaussian_score, RBF(), eta=0.2, n_steps=n_steps, record_every=record_every)
    Y = X0.clone()
    for _ in range(n_steps):  # one-step runs, chained: the reference for n_steps steps
        Y, _ = svgd(Y, standard_gaussian_score, RBF(), eta=0.2, n_steps=1)
    torch.testing.assert_close(X, Y)
    assert trace.shape[0] == n_steps // record_every + 1


def test_ula_keeps_the_gaussian_roughly_invariant():
    g = torch.Generator().manual_seed(3)
    X = ula(torch.randn(4000, 1, generator=g), standard_gaussian_score, 0.01, 50, generator=g)
    # ULA on N(0,1) with step eta has stationary variance 1/(1 - eta/2)
    assert abs(X.var() - 1 / (1 - 0.005)) < 0.1


def test_bad_arguments_raise():
    X = torch.randn(4, 2)
    with pytest.raises(ValueError, match="eta"):
        svgd(X, standard_gaussian_score, RBF(), eta=0.0, n_steps=3)
    with pytest.raises(ValueError, match="record_every"):
        svgd(X, standard_gaussian_score, RBF(), eta=0.1, n_steps=3, record_every=0)
    with pytest.raises(ValueError, match="particles"):
        svgd_step(X.numpy(), standard_gaussian_score, RBF(), 0.1)


def test_svgd_jacobian_closed_form_matches_autograd():
    from torch.func import jacrev, vmap

    from iclr25.sampling import svgd_direction, svgd_jacobian_rbf_std_normal
    g = torch.Generator().manual_seed(3)
    for d, N, h in [(1, 7, 1.0), (2, 5, 0.7), (3, 4, 2.0)]:
        X = torch.randn(3, N, d, generator=g, dtype=torch.float64) * 1.5 + 0.5
        auto = vmap(jacrev(lambda Z: svgd_direction(Z, -Z, RBF(h))))(X).reshape(3, N * d, N * d)
        assert torch.allclose(svgd_jacobian_rbf_std_normal(X, h), auto, atol=1e-12)


def test_logdet_series_lower_bound():
    """The chapter's step (discrete-bound): for a = eta ||A||_op < 1,
    log det(I + eta A) >= eta tr A - eta^2 ||A||_F^2 / (2 (1 - a)), on random non-symmetric A."""
    g = torch.Generator().manual_seed(11)
    for n in (1, 2, 5, 16):
        for scale in (0.3, 1.0, 3.0):
            A = torch.randn(200, n, n, generator=g, dtype=torch.float64) * scale
            op = torch.linalg.matrix_norm(A, ord=2)
            for frac in (0.1, 0.5, 0.9, 0.99):
                eta = frac / op                                          # a = frac < 1
                lhs = torch.linalg.slogdet(torch.eye(n, dtype=torch.float64) + eta[:, None, None] * A)
                assert (lhs.sign > 0).all()                              # I + eta A stays invertible, det > 0
                fro2 = (A * A).sum((-1, -2))
                rhs = eta * A.diagonal(dim1=-2, dim2=-1).sum(-1) - eta**2 * fro2 / (2 * (1 - frac))
                assert (lhs.logabsdet >= rhs - 1e-12).all()
            # and the bound is not vacuous: at small a it is tight to second order
            eta = 1e-3 / op
            lhs = torch.linalg.slogdet(torch.eye(n, dtype=torch.float64) + eta[:, None, None] * A).logabsdet
            first = eta * A.diagonal(dim1=-2, dim2=-1).sum(-1)
            assert ((lhs - first).abs() <= eta**2 * (A * A).sum((-1, -2))).all()
