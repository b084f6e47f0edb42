"""A small (μ/μ_w, λ)-CMA-ES (Hansen's tutorial, arXiv:1604.00772), the optimiser of BBT.

``cma`` is not a dependency of the book, so this is a compact ask/tell implementation with
the tutorial's default parameters (rank-one + rank-μ covariance update, cumulative step-size
adaptation). The linear algebra runs in torch (float64, on the CPU, with torch's thread
setting), so that it does not start a second BLAS thread pool beside the model's.
"""

from __future__ import annotations

import math

import torch


class CMAES:
    """Minimise f: R^n -> R by covariance-matrix adaptation.

    Parameters
    ----------
    x0 : Tensor or array (n,)
        Initial mean.
    sigma0 : float
        Initial step size.
    popsize : int, optional
        λ (default 4 + ⌊3 ln n⌋; BBT uses 20).
    seed : int
        Seed of the sampling generator.

    Use ``X = es.ask()`` (λ, n) float64, evaluate ``f`` on each row, then ``es.tell(X, f_values)``.
    """

    def __init__(self, x0, sigma0: float, *, popsize: int | None = None, seed: int = 0) -> None:
        x0 = torch.as_tensor(x0, dtype=torch.float64).cpu()
        if x0.dim() != 1 or sigma0 <= 0:
            raise ValueError("x0 must be a vector and sigma0 > 0")
        n = x0.numel()
        self.n, self.mean, self.sigma = n, x0.clone(), float(sigma0)
        self.lam = popsize or 4 + int(3 * math.log(n))
        if self.lam < 2:
            raise ValueError(f"popsize must be >= 2, got {self.lam}")
        self.mu = self.lam // 2
        w = math.log(self.mu + 0.5) - torch.log(torch.arange(1, self.mu + 1, dtype=torch.float64))
        self.weights = w / w.sum()
        self.mueff = 1.0 / float((self.weights ** 2).sum())
        self.cc = (4 + self.mueff / n) / (n + 4 + 2 * self.mueff / n)
        self.cs = (self.mueff + 2) / (n + self.mueff + 5)
        self.c1 = 2 / ((n + 1.3) ** 2 + self.mueff)
        self.cmu = min(1 - self.c1, 2 * (self.mueff - 2 + 1 / self.mueff) / ((n + 2) ** 2 + self.mueff))
        self.damps = 1 + 2 * max(0.0, math.sqrt((self.mueff - 1) / (n + 1)) - 1) + self.cs
        self.chi_n = math.sqrt(n) * (1 - 1 / (4 * n) + 1 / (21 * n ** 2))
        self.pc, self.ps = torch.zeros(n, dtype=torch.float64), torch.zeros(n, dtype=torch.float64)
        self.B, self.D = torch.eye(n, dtype=torch.float64), torch.ones(n, dtype=torch.float64)
        self.C = torch.eye(n, dtype=torch.float64)
        self.generation = 0
        self.gen = torch.Generator().manual_seed(seed)

    def ask(self) -> torch.Tensor:
        """λ candidates x_k = m + σ B D z_k, z_k ~ N(0, I): Tensor (λ, n), float64."""
        z = torch.randn(self.lam, self.n, generator=self.gen, dtype=torch.float64)
        return self.mean + self.sigma * (z * self.D) @ self.B.T

    def tell(self, X, fvals) -> None:
        """Update mean, evolution paths, covariance and step size from evaluated candidates."""
        X = torch.as_tensor(X, dtype=torch.float64).cpu()
        fvals = torch.as_tensor(fvals, dtype=torch.float64).cpu()
        if X.shape != (self.lam, self.n) or fvals.shape != (self.lam,):
            raise ValueError(f"tell needs X ({self.lam}, {self.n}) and f ({self.lam},)")
        self.generation += 1
        best = torch.argsort(fvals, stable=True)[: self.mu]
        old = self.mean
        self.mean = self.weights @ X[best]
        y_w = (self.mean - old) / self.sigma
        inv_sqrt_c = (self.B / self.D) @ self.B.T
        self.ps = (1 - self.cs) * self.ps + math.sqrt(self.cs * (2 - self.cs) * self.mueff) * inv_sqrt_c @ y_w
        ps_norm = float(self.ps.norm())
        hsig = ps_norm / math.sqrt(1 - (1 - self.cs) ** (2 * self.generation)) / self.chi_n < 1.4 + 2 / (self.n + 1)
        self.pc = (1 - self.cc) * self.pc + hsig * math.sqrt(self.cc * (2 - self.cc) * self.mueff) * y_w
        Y = (X[best] - old) / self.sigma
        self.C = ((1 - self.c1 - self.cmu) * self.C
                  + self.c1 * (torch.outer(self.pc, self.pc) + (1 - hsig) * self.cc * (2 - self.cc) * self.C)
                  + self.cmu * (Y.T * self.weights) @ Y)
        self.sigma *= math.exp((self.cs / self.damps) * (ps_norm / self.chi_n - 1))
        self.C = (self.C + self.C.T) / 2
        eigval, self.B = torch.linalg.eigh(self.C)
        self.D = eigval.clamp_min(1e-20).sqrt()
