"""Policies over discrete prompts and their policy-gradient (REINFORCE) steps.

A prompt of ``n`` positions picks, at each position i, one of ``V`` candidate tokens,
independently: :math:`P(j) = \\prod_i p_{i, j_i}`. Two parameterisations:

* :class:`CategoricalPromptPolicy` (ZO-PoG): weights α > 0 and
  :math:`p = \\mathrm{softmax}((\\log α + g)/τ)` with Gumbel noise g redrawn after every update
  (``gumbel=False``: g = 0, the ablation). Score function
  :math:`∂\\log P(j)/∂α_{i,v} = (\\mathbb 1[v=j_i] - p_{i,v}) / (τ α_{i,v})`.
* :class:`SimplexPromptPolicy` (BDPL): the probabilities themselves, projected back onto the
  simplex after every step; :math:`∂\\log P(j)/∂p_{i,v} = \\mathbb 1[v=j_i] / p_{i,v}`.

Both use the variance-reduced estimator with the mean loss as baseline,
:math:`\\hat g = \\frac{1}{I-1} \\sum_k (L_k - \\bar L)\\, ∇ \\log P(j^{(k)})`, which is unbiased
for :math:`∇ \\mathbb E_j L(j)` (:func:`pg_gradient`).
"""

from __future__ import annotations

import torch


def pg_gradient(losses: torch.Tensor, scores: torch.Tensor, *, baseline: bool = True) -> torch.Tensor:
    """REINFORCE estimate of ∇ E_j[L(j)] from I samples.

    Parameters
    ----------
    losses : Tensor (I,)
        L(j^(k)) for each sampled prompt.
    scores : Tensor (I, ...)
        ∇ log P(j^(k)) for each sample.
    baseline : bool
        ``True``: (1/(I−1)) Σ_k (L_k − L̄) s_k, unbiased (the I/(I−1) factor corrects the
        correlation between L_k and the mean L̄); ``False``: plain (1/I) Σ_k L_k s_k.

    Returns
    -------
    Tensor with the shape of ``scores[0]``.
    """
    I = losses.shape[0]
    if scores.shape[0] != I:
        raise ValueError(f"{I} losses but {scores.shape[0]} scores")
    shape = (I,) + (1,) * (scores.dim() - 1)
    if not baseline:
        return (losses.view(shape) * scores).mean(0)
    if I < 2:
        raise ValueError("the mean baseline needs at least 2 samples")
    return ((losses - losses.mean()).view(shape) * scores).sum(0) / (I - 1)


def project_simplex(v: torch.Tensor) -> torch.Tensor:
    """Euclidean projection of each row of ``v`` (n, V) onto the probability simplex.

    The sort-based algorithm: find the threshold θ with Σ_v max(v_v − θ, 0) = 1.
    """
    s, _ = torch.sort(v, dim=-1, descending=True)
    css = s.cumsum(-1) - 1
    k = torch.arange(1, v.shape[-1] + 1, device=v.device, dtype=v.dtype)
    rho = ((s - css / k) > 0).to(v.dtype).cumsum(-1).argmax(-1, keepdim=True)  # last True
    theta = css.gather(-1, rho) / (rho + 1).to(v.dtype)
    return (v - theta).clamp_min(0)


class CategoricalPromptPolicy:
    """ZO-PoG's policy: α ∈ R_{>0}^{n×V}, p = softmax((log α + g)/τ), g ~ Gumbel (redrawn).

    Parameters
    ----------
    n_pos, n_cand : int
        Prompt length n and number of candidate tokens V.
    tau : float
        Temperature τ.
    gumbel : bool
        Redraw Gumbel noise g after every update (the paper); ``False``: g = 0.
    generator : torch.Generator
        The source of all the policy's randomness (Gumbel noise and samples).
    """

    def __init__(self, n_pos: int, n_cand: int, *, tau: float = 1.0, gumbel: bool = True,
                 generator: torch.Generator | None = None, alpha_min: float = 1e-11) -> None:
        if tau <= 0:
            raise ValueError(f"tau must be > 0, got {tau}")
        self.tau, self.gumbel, self.gen, self.alpha_min = tau, gumbel, generator, alpha_min
        self.alpha = torch.full((n_pos, n_cand), 1.0 / n_cand, dtype=torch.float64)
        self.redraw()

    def redraw(self) -> torch.Tensor:
        """Recompute p from α with fresh Gumbel noise (or none); returns p (n, V)."""
        logits = torch.log(self.alpha)
        if self.gumbel:
            e = torch.empty_like(logits).exponential_(generator=self.gen)
            logits = logits - torch.log(e)  # -log(Exp(1)) ~ Gumbel(0, 1)
        self.probs = torch.softmax(logits / self.tau, dim=-1)
        return self.probs

    def sample(self, n_samples: int) -> torch.Tensor:
        """``n_samples`` prompts j ~ Cat(p), independent per position: LongTensor (I, n)."""
        return torch.multinomial(self.probs, n_samples, replacement=True, generator=self.gen).T

    def argmax(self) -> torch.Tensor:
        """The most likely prompt under the current p: LongTensor (n,).

        With Gumbel noise this is the paper's deployed prompt, and a random one: by the
        Gumbel-max trick, ``argmax(log α + g)`` is a draw from ``Cat(α / Σα)``.
        """
        return self.probs.argmax(-1)

    def mode(self) -> torch.Tensor:
        """The mode of the noise-free policy, ``argmax_v α_{i,v}`` per position: LongTensor (n,)."""
        return self.alpha.argmax(-1)

    def score(self, samples: torch.Tensor) -> torch.Tensor:
        """∂ log P(j)/∂α for each sample: (I, n) -> (I, n, V), (1[v=j_i] − p_iv)/(τ α_iv)."""
        onehot = torch.nn.functional.one_hot(samples, self.alpha.shape[1]).to(self.alpha.dtype)
        return (onehot - self.probs) / (self.tau * self.alpha)

    def step(self, losses: torch.Tensor, samples: torch.Tensor, lr: float, *,
             baseline: bool = True) -> torch.Tensor:
        """One policy-gradient step α ← max(α − lr·ĝ, α_min), then redraw p; returns ĝ."""
        g = pg_gradient(losses.to(self.alpha.dtype), self.score(samples), baseline=baseline)
        self.alpha = (self.alpha - lr * g).clamp_min(self.alpha_min)
        self.redraw()
        return g


class SimplexPromptPolicy:
    """BDPL's policy: p in the product of simplices, updated by projected policy gradient."""

    def __init__(self, n_pos: int, n_cand: int, *, generator: torch.Generator | None = None) -> None:
        self.gen = generator
        self.probs = torch.full((n_pos, n_cand), 1.0 / n_cand, dtype=torch.float64)

    def sample(self, n_samples: int) -> torch.Tensor:
        """(I, n) prompts j ~ Cat(p)."""
        return torch.multinomial(self.probs, n_samples, replacement=True, generator=self.gen).T

    def argmax(self) -> torch.Tensor:
        return self.probs.argmax(-1)

    def score(self, samples: torch.Tensor) -> torch.Tensor:
        """∂ log P(j)/∂p: (I, n) -> (I, n, V), equal to 1/p_iv at v = j_i and 0 elsewhere."""
        onehot = torch.nn.functional.one_hot(samples, self.probs.shape[1]).to(self.probs.dtype)
        return onehot / self.probs.clamp_min(1e-12)

    def step(self, losses: torch.Tensor, samples: torch.Tensor, lr: float, *,
             baseline: bool = True) -> torch.Tensor:
        """p ← Proj_simplex(p − lr·ĝ); returns ĝ."""
        g = pg_gradient(losses.to(self.probs.dtype), self.score(samples), baseline=baseline)
        self.probs = project_simplex(self.probs - lr * g)
        return g
