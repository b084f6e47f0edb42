"""KSD: the Stein identity, the i.i.d. V-statistic identity, U vs V, bad input."""

import pytest
import torch

from iclr25.sampling import (IMQ, RBF, Matern52, gaussian_mixture_score, ksd, standard_gaussian_score,
                            svgd_direction)



@pytest.mark.parametrize("kernel", [RBF(1.0), IMQ(1.0, -0.5), Matern52(1.5)], ids=repr)
def test_stein_identity_u_statistic_has_mean_zero(kernel):
    # E_pi k_pi(x, y) = 0 for independent x, y ~ pi, so the U-statistic of i.i.d. draws is centred
    g = torch.Generator().manual_seed(0)
    X = torch.randn(2000, 20, 2, generator=g)  # 2000 independent sets of 20 draws from N(0, I)
    u = ksd(X, standard_gaussian_score, kernel, kind="U")
    assert abs(u.mean()) < 4 * u.std() / len(u) ** 0.5


@pytest.mark.parametrize("d,h", [(2, 1.0), (3, 0.5)])
def test_iid_v_statistic_identity(d, h):
    # N E[KSD_V^2] = E_pi k_pi(x, x) = d (1 + 1/h^2) for N(0, I_d) and RBF(h), for every N
    g = torch.Generator().manual_seed(1)
    N = 16
    X = torch.randn(4000, N, d, generator=g)
    v = N * ksd(X, standard_gaussian_score, RBF(h))
    want = d * (1 + 1 / h**2)
    assert abs(v.mean() - want) < 4 * v.std() / len(v) ** 0.5 + 1e-3 * want


def test_u_and_v_statistics_are_related_by_the_diagonal():
    g = torch.Generator().manual_seed(2)
    X, N = torch.randn(9, 2, generator=g), 9
    v, u = ksd(X, standard_gaussian_score, RBF()), ksd(X, standard_gaussian_score, RBF(), "U")
    diag = ((X * X).sum(-1) + 2.0).sum()  # k_pi(x, x) = |x|^2 + d/h^2
    torch.testing.assert_close(N * N * v, N * (N - 1) * u + diag)


def test_ksd_is_zero_only_in_the_limit_and_positive():
    g = torch.Generator().manual_seed(3)
    shifted = torch.randn(200, 2, generator=g) + 3.0
    assert ksd(shifted, standard_gaussian_score, RBF()) > 1.0  # far from the target
    assert ksd(shifted - 3.0, standard_gaussian_score, RBF()) < 0.1


def test_bad_kind_and_bad_scores_raise():
    X = torch.randn(5, 2)
    with pytest.raises(ValueError, match="valid kinds: V, U"):
        ksd(X, standard_gaussian_score, RBF(), kind="W")
    with pytest.raises(ValueError, match="scores"):
        ksd(X, lambda x: x[:, :1], RBF())
    with pytest.raises(ValueError, match="at least 2"):
        ksd(X[:1], standard_gaussian_score, RBF(), kind="U")


def _mixture():
    means = torch.tensor([[-1.5, 0.0, 0.5], [1.5, 0.5, -0.5]], dtype=torch.float64)
    return gaussian_mixture_score(means, 0.8)


def _drift_divergence(X, score, kernel, autograd):
    """sum_i div_{x_i} phi_i(X): the divergence of each particle's SVGD velocity in its own position
    (the N-particle field, so the j = i term moves with x_i in both arguments)."""
    N, d = X.shape

    def phi(Y):
        return svgd_direction(Y, score(Y), kernel)

    total = 0.0
    for i in range(N):
        for a in range(d):
            if autograd:
                Y = X.clone().requires_grad_(True)
                g, = torch.autograd.grad(phi(Y)[i, a], Y)
                total += g[i, a].item()
            else:  # central differences (float64): Matern's sqrt(u) has no autograd derivative at u = 0
                e, Y1, Y2 = 1e-5, X.clone(), X.clone()
                Y1[i, a] += e
                Y2[i, a] -= e
                total += ((phi(Y1)[i, a] - phi(Y2)[i, a]) / (2 * e)).item()
    return total


def _laplacian_V(X, score):
    # Delta V = -div s, by autograd on the score
    out = []
    for i in range(X.shape[0]):
        x = X[i].clone().requires_grad_(True)
        s = score(x[None])[0]
        out.append(-sum(torch.autograd.grad(s[a], x, retain_graph=True)[0][a] for a in range(len(x))))
    return torch.stack(out)


@pytest.mark.parametrize("kernel,autograd,lap0", [
    (RBF(1.3), True, lambda d: -d / 1.3**2),                       # kappa = exp(-r^2/(2h^2))
    (IMQ(1.0, -0.5), True, lambda d: -d),                          # kappa = (1 + r^2)^(-1/2): 2 beta d c^(2beta-2)
    (Matern52(1.5), False, lambda d: -d * 5.0 / (3 * 1.5**2)),     # kappa ~ 1 - (5/6) r^2 / ell^2 near 0
], ids=["RBF", "IMQ", "Matern52"])
def test_key_identity_by_differentiation(kernel, autograd, lap0):
    # sum_i [div_i phi_i + s(x_i).phi_i] = N KSD_V^2 - (1/N) sum_i (kappa(0) Delta V(x_i) - Delta kappa(0)),
    # the identity behind d/dt KL(rho^N | pi^N); mixture score, N = 6, d = 3, kappa(0) = 1 for all three
    score = _mixture()
    g = torch.Generator().manual_seed(4)
    X = torch.randn(6, 3, generator=g, dtype=torch.float64)
    N, d = X.shape
    lhs = _drift_divergence(X, score, kernel, autograd)
    lhs += (score(X) * svgd_direction(X, score(X), kernel)).sum().item()
    rhs = N * ksd(X, score, kernel).item() - ((_laplacian_V(X, score) - lap0(d)).sum() / N).item()
    assert abs(lhs - rhs) < (1e-9 if autograd else 1e-6) * max(1.0, abs(rhs))
