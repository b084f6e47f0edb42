"""A RepNoise-style alignment loss (Rosati et al., 2024), a baseline of Booster.

Representation noising removes the information about harmful answers from the hidden states, so
that a later fine-tuning step cannot find it again. The loss of the official Booster repository's
RepNoise baseline, on a tiny transformer::

    L = f(w) + beta * mean_l MMD^2(H_l(harmful), N(0, I)) - alpha * log(1 + mean_l CE_l(harmful)),

``H_l`` the output of block ``l`` on the harmful batch at its response tokens (flattened per
sequence), ``CE_l`` the harmful answer's cross-entropy read out from layer ``l`` through the final
norm and the unembedding (the "logit lens"; the last layer's is the harmful loss ``h`` itself).
Ours perturbs the block outputs where the official code hooks the MLPs: "RepNoise-style". Both terms
sum over the harmful batch's response mask; the chapter passes a mask kept on the hazard tokens only
(``HFTData.harmful_distinct``), where the official code keeps the positions at which the harmful sample
differs from its paired harmless one.
"""

from __future__ import annotations

import torch

from iclr25.lm.data import SeqBatch
from iclr25.lm.evaluate import answer_nll, model_device
from iclr25.lm.model import TinyLM
from iclr25.lm.train import next_token_loss


def mmd_rbf(x: torch.Tensor, y: torch.Tensor, *, kernel_mul: float = 2.0, kernel_num: int = 5) -> torch.Tensor:
    """Squared maximum mean discrepancy (V-statistic) between samples ``x`` (n, D) and ``y``
    (m, D) under a sum of ``kernel_num`` Gaussian kernels ``exp(-|a-b|^2 / b_k)``, ``b_k = b0 *
    kernel_mul^k``, ``b0`` the mean pairwise squared distance over the pooled sample divided by
    ``kernel_mul^(kernel_num // 2)`` (detached), as in RepNoise's code. Zero iff ``x`` and ``y``
    are the same sample (up to order)."""
    z = torch.cat([x, y])
    d2 = torch.cdist(z, z).pow(2)
    n_all = z.shape[0]
    b0 = d2.detach().sum() / (n_all * n_all - n_all) / kernel_mul ** (kernel_num // 2)
    k = sum(torch.exp(-d2 / (b0 * kernel_mul**i)) for i in range(kernel_num))
    n = x.shape[0]
    return k[:n, :n].mean() + k[n:, n:].mean() - 2 * k[:n, n:].mean()


def repnoise_loss(model: TinyLM, align_batch: SeqBatch, harm_batch: SeqBatch, *, alpha: float,
                  beta: float, generator: torch.Generator) -> torch.Tensor:
    """The RepNoise-style loss above (a differentiable scalar). The Gaussian samples are drawn on
    the CPU from ``generator`` (the same on every device)."""
    dev = model_device(model)
    f = answer_nll(model, align_batch)
    hb = harm_batch.to(dev)
    _, hidden = model(hb.ids, return_hidden=True)
    m = hb.mask[..., None]
    noise, ce = 0.0, 0.0
    for layer, h in enumerate(hidden):
        logits = model.ln_f(h) @ model.tok.weight.T
        ce = ce + next_token_loss(logits, hb.ids, hb.mask)
        if layer > 0:
            z = torch.randn(h.shape, generator=generator, dtype=h.dtype).to(dev)
            noise = noise + mmd_rbf((h * m).flatten(1), (z * m).flatten(1))
    noise = noise / (len(hidden) - 1)
    ce = ce / len(hidden)
    return f + beta * noise - alpha * torch.log1p(ce)
