"""Linear models with per-sample losses for spectral risk minimisation, and the offline data sets.

The objective is ``F(w) = R_sigma(l(w)) + (mu/2) ||w||^2`` with ``l_i(w) = phi(x_i @ w, y_i)`` and
``phi`` the squared loss ``(z - y)^2 / 2`` or the logistic loss ``log(1 + exp(-y z))``, ``y = +-1``.
Per-sample gradients are ``phi'(z_i) x_i``, so optimisers only need the scalar derivative ``phi'``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from .spectral import spectral_risk

LOSSES = ("squared", "logistic")
DATASETS = ("diabetes", "breast_cancer", "outliers")


@dataclass(frozen=True)
class LinearProblem:
    """Data ``X`` (n, d), targets ``y`` (n,), a loss in :data:`LOSSES` and the l2 weight ``mu``."""

    X: np.ndarray
    y: np.ndarray
    loss: str = "squared"
    mu: float = 1e-3
    name: str = ""

    def __post_init__(self) -> None:
        if self.loss not in LOSSES:
            raise ValueError(f"unknown loss {self.loss!r}; valid losses: {', '.join(LOSSES)}")
        if self.X.ndim != 2 or self.y.shape != (self.X.shape[0],):
            raise ValueError(f"need X (n, d) and y (n,), got {self.X.shape} and {self.y.shape}")
        if self.mu <= 0:
            raise ValueError("mu must be positive (the methods need a strongly convex regulariser)")

    @property
    def n(self) -> int:
        return self.X.shape[0]

    @property
    def d(self) -> int:
        return self.X.shape[1]

    def phi(self, z: np.ndarray, idx: np.ndarray | None = None) -> np.ndarray:
        """Per-sample losses at predictions ``z`` (n,) or (len(idx),) for the samples ``idx``."""
        y = self.y if idx is None else self.y[idx]
        if self.loss == "squared":
            return 0.5 * (z - y) ** 2
        return np.logaddexp(0.0, -y * z)

    def dphi(self, z: np.ndarray, idx: np.ndarray | None = None) -> np.ndarray:
        """``phi'(z_i)``: the gradient of ``l_i`` is ``dphi_i * x_i``. Shape of ``z``."""
        y = self.y if idx is None else self.y[idx]
        if self.loss == "squared":
            return z - y
        return -y * expit(-y * z)

    def d2phi(self, z: np.ndarray) -> np.ndarray:
        """``phi''(z_i)`` (n,)."""
        if self.loss == "squared":
            return np.ones_like(z)
        p = expit(self.y * z)
        return p * (1.0 - p)

    def losses(self, w: np.ndarray) -> np.ndarray:
        """``l(w)``, shape (n,)."""
        return self.phi(self.X @ w)

    def weighted_grad(self, w: np.ndarray, lam: np.ndarray) -> np.ndarray:
        """``sum_i lam_i grad l_i(w) + mu w``, shape (d,)."""
        return self.X.T @ (lam * self.dphi(self.X @ w)) + self.mu * w

    def objective(self, w: np.ndarray, sigma: np.ndarray) -> float:
        """``F(w) = R_sigma(l(w)) + mu/2 ||w||^2`` (the *unsmoothed* spectral risk objective)."""
        return spectral_risk(self.losses(w), sigma) + 0.5 * self.mu * float(w @ w)

    def smoothness(self) -> np.ndarray:
        """Per-sample smoothness constants ``L_i = sup phi'' * ||x_i||^2`` (n,)."""
        sq = np.einsum("ij,ij->i", self.X, self.X)
        return sq if self.loss == "squared" else 0.25 * sq


def _standardize(X: np.ndarray) -> np.ndarray:
    """Standardized columns plus an intercept column, all scaled by one constant so that
    ``max_i ||x_i|| = 1`` (per-sample smoothness at most 1; the usual setting for SVRG/SAGA)."""
    X = (X - X.mean(0)) / X.std(0)
    X = np.hstack([X, np.ones((X.shape[0], 1))])
    return X / np.sqrt(np.einsum("ij,ij->i", X, X).max())


def load_problem(name: str, *, mu: float | None = None, n: int = 1000, d: int = 20,
                 outlier_frac: float = 0.05, seed: int = 0) -> LinearProblem:
    """A spectral risk problem on offline data: standardized features plus an intercept column,
    scaled so that the largest row norm is 1.

    ``"diabetes"`` (442 x 11, squared loss, standardized target), ``"breast_cancer"`` (569 x 31,
    logistic loss, labels +-1), both bundled with scikit-learn; ``"outliers"`` (n x (d+1), squared
    loss): :func:`sklearn.datasets.make_regression` with Student-t(2) noise and a fraction
    ``outlier_frac`` of targets shifted by 10 standard deviations. ``mu`` defaults to ``1/n``
    (the l2 weight used by the SOREL and Prospect code bases).
    """
    from sklearn import datasets

    if name == "diabetes":
        X, y = datasets.load_diabetes(return_X_y=True)
        X, y, loss = _standardize(X), (y - y.mean()) / y.std(), "squared"
    elif name == "breast_cancer":
        X, y = datasets.load_breast_cancer(return_X_y=True)
        X, y, loss = _standardize(X), 2.0 * y - 1.0, "logistic"
    elif name == "outliers":
        rng = np.random.default_rng(seed)
        X, y = datasets.make_regression(n_samples=n, n_features=d, n_informative=d // 2,
                                        noise=0.0, random_state=seed)
        y = (y - y.mean()) / y.std() + 0.1 * rng.standard_t(2.0, size=n)
        bad = rng.choice(n, size=int(round(outlier_frac * n)), replace=False)
        y[bad] += 10.0 * rng.choice([-1.0, 1.0], size=bad.size)
        X, loss = _standardize(X), "squared"
    else:
        raise ValueError(f"unknown data set {name!r}; valid data sets: {', '.join(DATASETS)}")
    X, y = np.ascontiguousarray(X, dtype=float), np.asarray(y, dtype=float)
    return LinearProblem(X, y, loss, mu if mu is not None else 1.0 / X.shape[0], name)
