"""KSD: the Stein identity, the i.i.d. V-statistic identity, U vs V, bad input."""

import pytest
import torch

from iclr25.sampling import IMQ, RBF, Matern52, ksd, standard_gaussian_score



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
