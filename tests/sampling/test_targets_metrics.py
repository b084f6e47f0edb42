"""Scores against autograd of log-densities; Gaussian KL and W2 against closed forms."""

import math

import pytest
import torch

from iclr25.sampling import (gaussian_kl, gaussian_mixture_score, gaussian_score,
                             logistic_posterior_score, wasserstein2)



def _autograd_score(logp, X):
    X = X.clone().requires_grad_()
    return torch.autograd.grad(logp(X).sum(), X)[0]


def test_scores_match_autograd_of_log_density():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(2, 5, 3, generator=g)
    m, C = torch.tensor([1.0, 0.0, -1.0]), torch.tensor([[2.0, 0.3, 0.0], [0.3, 1.0, 0.2], [0.0, 0.2, 0.5]])
    mvn = torch.distributions.MultivariateNormal(m, C)
    torch.testing.assert_close(gaussian_score(m, C)(X), _autograd_score(mvn.log_prob, X))

    means, w = torch.randn(4, 3, generator=g), torch.tensor([0.1, 0.2, 0.3, 0.4])
    mix = torch.distributions.MixtureSameFamily(
        torch.distributions.Categorical(w),
        torch.distributions.Independent(torch.distributions.Normal(means, 0.7), 1))
    torch.testing.assert_close(gaussian_mixture_score(means, 0.7, w)(X), _autograd_score(mix.log_prob, X))

    A, y = torch.randn(30, 3, generator=g), (torch.rand(30, generator=g) < 0.5).double()

    def logp(W):
        z = W @ A.T
        return (y * z - torch.nn.functional.softplus(z)).sum(-1) - (W * W).sum(-1) / (2 * 1.5**2)

    torch.testing.assert_close(logistic_posterior_score(A, y, 1.5)(X), _autograd_score(logp, X))


def test_gaussian_kl_matches_torch_distributions():
    m0, m1 = torch.tensor([0.0, 1.0]), torch.tensor([2.0, -1.0])
    S0, S1 = torch.tensor([[1.0, 0.2], [0.2, 0.5]]), torch.tensor([[2.0, -0.3], [-0.3, 1.0]])
    want = torch.distributions.kl_divergence(torch.distributions.MultivariateNormal(m0, S0),
                                             torch.distributions.MultivariateNormal(m1, S1))
    assert gaussian_kl(m0, S0, m1, S1) == pytest.approx(float(want), rel=1e-12)
    # the chapter's starting law N(2*1, 0.25 I) against N(0, I) in d = 2
    kl = gaussian_kl(2 * torch.ones(2), 0.25 * torch.eye(2), torch.zeros(2), torch.eye(2))
    assert kl == pytest.approx(0.5 * (2 * 0.25 + 8 - 2 - 4 * math.log(0.5)))


def test_w2_closed_forms():
    g = torch.Generator().manual_seed(1)
    X = torch.randn(50, 2, generator=g)
    shift = torch.tensor([3.0, 4.0])
    assert wasserstein2(X, X + shift) == pytest.approx(5.0)  # a translation costs its length
    x, y = torch.randn(40, 1, generator=g), torch.randn(40, 1, generator=g)  # 1-D: sort and match
    want = ((x.sort(0).values - y.sort(0).values) ** 2).mean().sqrt()
    assert wasserstein2(x, y) == pytest.approx(float(want))
    with pytest.raises(ValueError):
        wasserstein2(X, torch.randn(5, 3))
    with pytest.raises(ValueError, match="non-finite"):
        wasserstein2(X, X * float("nan"))


def test_exact_1d_w2_to_the_standard_normal():
    from scipy.special import ndtri

    from iclr25.sampling import wasserstein2_std_normal_1d as w2n
    # one point c: W2^2 = E (Z - c)^2 = 1 + c^2
    torch.testing.assert_close(w2n(torch.tensor([[0.0], [2.0]], dtype=torch.float64)) ** 2,
                               torch.tensor([1.0, 5.0], dtype=torch.float64))
    # against exact OT to a fine quantile grid of N(0, 1) (its own W2 to N(0, 1) is ~1e-3)
    g = torch.Generator().manual_seed(5)
    X = torch.randn(7, 1, generator=g, dtype=torch.float64)
    M = 20_000
    grid = torch.from_numpy(ndtri((torch.arange(M, dtype=torch.float64).numpy() + 0.5) / M))[:, None]
    assert abs(w2n(X.T).item() - wasserstein2(X, grid)) < 5e-3
    # it falls with N like N^(-1/2) (up to logs) on i.i.d. draws
    big = w2n(torch.randn(200, 4096, generator=g, dtype=torch.float64)).mean()
    small = w2n(torch.randn(200, 64, generator=g, dtype=torch.float64)).mean()
    assert 4 < small / big < 12


def test_sliced_w2_to_std_normal():
    from iclr25.sampling import sliced_wasserstein2_std_normal as sw2
    from iclr25.sampling import wasserstein2_std_normal_1d as w2n
    g = torch.Generator().manual_seed(6)
    X = torch.randn(3, 20, 1, generator=g, dtype=torch.float64)
    # in d = 1 with the direction +1 or -1 it is the exact W2 (N(0, 1) is symmetric)
    torch.testing.assert_close(sw2(X, torch.tensor([[1.0]], dtype=torch.float64)), w2n(X[..., 0]))
    torch.testing.assert_close(sw2(X, torch.tensor([[-1.0]], dtype=torch.float64)), w2n(X[..., 0]))
    # in d = 2 it averages the squared 1-D distances of the projections
    Y = torch.randn(4, 30, 2, generator=g, dtype=torch.float64)
    th = torch.tensor([[1.0, 0.0], [0.6, 0.8]], dtype=torch.float64)
    want = ((w2n(Y[..., 0]) ** 2 + w2n(Y @ th[1]) ** 2) / 2).sqrt()
    torch.testing.assert_close(sw2(Y, th), want)
    # a point mass at c: every projection is a point mass at theta.c, W2^2 = 1 + (theta.c)^2
    c = torch.tensor([[[3.0, 4.0]]], dtype=torch.float64)
    torch.testing.assert_close(sw2(c, th), torch.tensor([math.sqrt(1 + (3.0**2 + 5.0**2) / 2)], dtype=torch.float64))
    with pytest.raises(ValueError):
        sw2(Y, torch.ones(2, 2, dtype=torch.float64))
