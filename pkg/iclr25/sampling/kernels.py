"""Positive-definite kernels for SVGD and kernel Stein discrepancies.

Every kernel ``k`` knows three things, all on batches of points ``(..., N, d)``:

* ``k.matrix(X, Y)``: the Gram matrix ``K[..., n, m] = k(x_n, y_m)``;
* ``k.repulsion(X, Y)``: ``R[..., m, :] = sum_n grad_1 k(x_n, y_m)`` (the SVGD repulsive force);
* ``k.stein(X, Y, SX, SY)``: the Stein kernel ``k_pi(x_n, y_m)`` given the scores ``SX, SY``;
* ``k.svgd_terms(X, S)``: both at once for one particle set, the summed SVGD velocity and the summed
  Stein kernel, from one pass over the Gram quantities (what an SVGD run that records its KSD needs).

Radial kernels ``k(x, y) = f(|x - y|^2)`` need only their profile ``f`` and its first two
derivatives in ``u = |x - y|^2`` (:meth:`RadialKernel.profile`); everything else follows from
the chain rule (see :meth:`RadialKernel.stein`). Kernels add: ``Matern52(1.0) + Linear(1.0)``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def sq_dists(X: Tensor, Y: Tensor) -> Tensor:
    """Squared distances ``U[..., n, m] = |x_n - y_m|^2`` for ``X (..., N, d)``, ``Y (..., M, d)``.

    Computed as ``|x|^2 + |y|^2 - 2 x.y`` (one matmul, in place) and clamped at 0 against round-off.
    """
    xx = (X * X).sum(-1, keepdim=True)  # (..., N, 1)
    yy = (Y * Y).sum(-1).unsqueeze(-2)  # (..., 1, M)
    return (X @ Y.transpose(-1, -2)).mul_(-2.0).add_(xx).add_(yy).clamp_(min=0.0)


class Kernel:
    """Base class: a positive-definite kernel ``k(x, y)`` on ``R^d``. Kernels add with ``+``."""

    def matrix(self, X: Tensor, Y: Tensor) -> Tensor:
        """Gram matrix ``(..., N, M)`` with entries ``k(x_n, y_m)``."""
        raise NotImplementedError

    def repulsion(self, X: Tensor, Y: Tensor) -> Tensor:
        """``(..., M, d)``: row ``m`` is ``sum_n grad_x k(x, y_m)`` at ``x = x_n``."""
        raise NotImplementedError

    def stein(self, X: Tensor, Y: Tensor, SX: Tensor, SY: Tensor) -> Tensor:
        """Stein kernel matrix ``(..., N, M)`` with entries ``k_pi(x_n, y_m)``.

        ``k_pi(x, y) = s(x).s(y) k + s(x).grad_y k + s(y).grad_x k + tr(grad_x grad_y^T k)``,
        where ``SX (..., N, d)`` and ``SY (..., M, d)`` are the scores ``s = grad log pi``.
        """
        raise NotImplementedError

    def gram_and_repulsion(self, X: Tensor) -> tuple[Tensor, Tensor]:
        """``(matrix(X, X), repulsion(X, X))``, the two Gram quantities of an SVGD step (radial kernels share
        one pass over the pairwise distances)."""
        return self.matrix(X, X), self.repulsion(X, X)

    def svgd_terms(self, X: Tensor, S: Tensor) -> tuple[Tensor, Tensor]:
        """``(N phi, N^2 KSD_V^2)`` for particles ``X (..., N, d)`` with scores ``S``: the SVGD
        velocity times ``N``, ``(..., N, d)``, and the sum of the Stein kernel matrix, ``(...)``."""
        drive = self.matrix(X, X).transpose(-1, -2) @ S + self.repulsion(X, X)
        return drive, self.stein(X, X, S, S).sum((-1, -2))

    def __add__(self, other: "Kernel") -> "SumKernel":
        if not isinstance(other, Kernel):
            return NotImplemented
        return SumKernel(self, other)


class RadialKernel(Kernel):
    """``k(x, y) = f(u)`` with ``u = |x - y|^2``; subclasses define :meth:`profile`."""

    def profile(self, u: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``f(u), f'(u), f''(u)`` elementwise (derivatives in ``u``, not in ``r = sqrt(u)``)."""
        raise NotImplementedError

    def matrix(self, X: Tensor, Y: Tensor) -> Tensor:
        return self.profile(sq_dists(X, Y))[0]

    def repulsion(self, X: Tensor, Y: Tensor) -> Tensor:
        # grad_x f(|x - y|^2) = 2 f'(u) (x - y);  sum over n of 2 f'(u_nm) (x_n - y_m)
        f1 = self.profile(sq_dists(X, Y))[1]  # (..., N, M)
        return 2.0 * (f1.transpose(-1, -2) @ X - f1.sum(-2).unsqueeze(-1) * Y)

    def stein(self, X: Tensor, Y: Tensor, SX: Tensor, SY: Tensor) -> Tensor:
        u = sq_dists(X, Y)
        return self._stein(X, Y, SX, SY, u, *self.profile(u))

    def gram_and_repulsion(self, X: Tensor) -> tuple[Tensor, Tensor]:
        f, f1, _ = self.profile(sq_dists(X, X))
        return f, 2.0 * (f1.transpose(-1, -2) @ X - f1.sum(-2).unsqueeze(-1) * X)

    def svgd_terms(self, X: Tensor, S: Tensor) -> tuple[Tensor, Tensor]:
        # one sq_dists and one profile serve the drift, the repulsion and the Stein kernel
        u = sq_dists(X, X)
        f, f1, f2 = self.profile(u)
        drive = f.transpose(-1, -2) @ S + 2.0 * (f1.transpose(-1, -2) @ X - f1.sum(-2).unsqueeze(-1) * X)
        return drive, self._stein(X, X, S, S, u, f, f1, f2).sum((-1, -2))

    @staticmethod
    def _stein(X: Tensor, Y: Tensor, SX: Tensor, SY: Tensor, u: Tensor, f: Tensor, f1: Tensor,
               f2: Tensor) -> Tensor:
        # k_pi = f s(x).s(y) + 2 f' [(s(y) - s(x)).(x - y) - d] - 4 u f''   (in place: N x N is big)
        out = (SX @ SY.transpose(-1, -2)).mul_(f)  # f s(x).s(y)
        # (s(y) - s(x)).(x - y) = x.s(y) + s(x).y - s(x).x - s(y).y
        cross = (X @ SY.transpose(-1, -2)).add_(SX @ Y.transpose(-1, -2))
        cross.sub_((SX * X).sum(-1, keepdim=True)).sub_((SY * Y).sum(-1).unsqueeze(-2) + X.shape[-1])
        return out.addcmul_(f1, cross, value=2.0).addcmul_(u, f2, value=-4.0)


class RBF(RadialKernel):
    """Gaussian kernel ``k(x, y) = exp(-|x - y|^2 / (2 h^2))`` with fixed width ``h > 0``."""

    def __init__(self, h: float = 1.0) -> None:
        if not h > 0:
            raise ValueError(f"RBF width h must be > 0, got {h}")
        self.h = float(h)

    def profile(self, u: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        a = 1.0 / (2.0 * self.h**2)
        f = torch.exp(-a * u)
        return f, -a * f, a * a * f

    def __repr__(self) -> str:
        return f"RBF(h={self.h:g})"


class IMQ(RadialKernel):
    """Inverse multiquadric ``k(x, y) = (c^2 + |x - y|^2)^beta``, ``c > 0``, ``-1 < beta < 0``."""

    def __init__(self, c: float = 1.0, beta: float = -0.5) -> None:
        if not c > 0:
            raise ValueError(f"IMQ c must be > 0, got {c}")
        if not -1.0 < beta < 0.0:
            raise ValueError(f"IMQ beta must lie in (-1, 0), got {beta}")
        self.c, self.beta = float(c), float(beta)

    def profile(self, u: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        b, w = self.beta, self.c**2 + u
        f = w**b
        return f, b * f / w, b * (b - 1.0) * f / (w * w)

    def __repr__(self) -> str:
        return f"IMQ(c={self.c:g}, beta={self.beta:g})"


class Matern52(RadialKernel):
    """Matérn-5/2 kernel ``(1 + a r + a^2 r^2 / 3) exp(-a r)``, ``r = |x - y|``, ``a = sqrt(5) / ell``.

    In ``u = r^2``: ``f'(u) = -(a^2/6)(1 + a r) e^{-a r}`` and ``f''(u) = (a^4/12) e^{-a r}``,
    both finite at ``r = 0`` (the kernel is twice differentiable, as the Stein kernel needs).
    """

    def __init__(self, ell: float = 1.0) -> None:
        if not ell > 0:
            raise ValueError(f"Matern52 length scale ell must be > 0, got {ell}")
        self.ell = float(ell)

    def profile(self, u: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        a = math.sqrt(5.0) / self.ell
        ar = a * u.sqrt()
        e = torch.exp(-ar)
        return (1.0 + ar + ar * ar / 3.0) * e, -(a * a / 6.0) * (1.0 + ar) * e, (a**4 / 12.0) * e

    def __repr__(self) -> str:
        return f"Matern52(ell={self.ell:g})"


class Linear(Kernel):
    """Linear (bilinear) kernel ``k(x, y) = c + x.y`` with ``c >= 0``.

    Its Stein kernel is ``(c + x.y) s(x).s(y) + s(x).x + s(y).y + d``; SVGD with it matches the
    first two moments of a Gaussian target exactly at its fixed points.
    """

    def __init__(self, c: float = 1.0) -> None:
        if not c >= 0:
            raise ValueError(f"Linear kernel offset c must be >= 0, got {c}")
        self.c = float(c)

    def matrix(self, X: Tensor, Y: Tensor) -> Tensor:
        return self.c + X @ Y.transpose(-1, -2)

    def repulsion(self, X: Tensor, Y: Tensor) -> Tensor:
        return X.shape[-2] * Y  # grad_x (c + x.y) = y, summed over the N points x_n

    def stein(self, X: Tensor, Y: Tensor, SX: Tensor, SY: Tensor) -> Tensor:
        sx_x = (SX * X).sum(-1, keepdim=True)
        sy_y = (SY * Y).sum(-1).unsqueeze(-2)
        return self.matrix(X, Y) * (SX @ SY.transpose(-1, -2)) + sx_x + sy_y + X.shape[-1]

    def __repr__(self) -> str:
        return f"Linear(c={self.c:g})"


class SumKernel(Kernel):
    """``k = k_1 + k_2 + ...``: Gram matrices, repulsions and Stein kernels all add."""

    def __init__(self, *kernels: Kernel) -> None:
        if not kernels or not all(isinstance(k, Kernel) for k in kernels):
            raise ValueError("SumKernel needs one or more Kernel objects")
        flat: list[Kernel] = []
        for k in kernels:
            flat.extend(k.kernels if isinstance(k, SumKernel) else [k])
        self.kernels = tuple(flat)

    def matrix(self, X: Tensor, Y: Tensor) -> Tensor:
        return sum(k.matrix(X, Y) for k in self.kernels)  # type: ignore[return-value]

    def repulsion(self, X: Tensor, Y: Tensor) -> Tensor:
        return sum(k.repulsion(X, Y) for k in self.kernels)  # type: ignore[return-value]

    def stein(self, X: Tensor, Y: Tensor, SX: Tensor, SY: Tensor) -> Tensor:
        return sum(k.stein(X, Y, SX, SY) for k in self.kernels)  # type: ignore[return-value]

    def gram_and_repulsion(self, X: Tensor) -> tuple[Tensor, Tensor]:
        parts = [k.gram_and_repulsion(X) for k in self.kernels]
        return sum(p[0] for p in parts), sum(p[1] for p in parts)  # type: ignore[return-value]

    def svgd_terms(self, X: Tensor, S: Tensor) -> tuple[Tensor, Tensor]:
        parts = [k.svgd_terms(X, S) for k in self.kernels]
        return sum(p[0] for p in parts), sum(p[1] for p in parts)  # type: ignore[return-value]

    def __repr__(self) -> str:
        return " + ".join(map(repr, self.kernels))
