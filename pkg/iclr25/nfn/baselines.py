"""The baselines of the paper for predicting a checkpoint's accuracy from its weights, and our controls.

- :func:`flatten_weights`: every weight in one vector (the input of the paper's MLP baseline and of
  its gradient-boosted trees);
- :func:`stat_features`: STATNN (Unterthiner et al., 2020): per weight tensor its mean, variance and
  quantiles 0, .25, .5, .75, 1 (the official ``StatFeaturizerTransformer``);
- :func:`product_stat_features`: the same statistics of the invariant products ``QK_i``, ``VO_i``
  (all heads pooled) and of the MLP slots: a group-invariant STATNN, our mechanism control;
- :func:`norm_features`: single-number summaries (``sum_i |QK_i|_F`` and others), the bar every
  method must clear;
- :class:`MLPRegressor`: the small MLP the paper puts on top of flattened weights or statistics;
- :class:`FlatWeightsMLP`: the same MLP reading a weight dict (so a group element can act on its
  input), and :func:`group_augment`: a fresh random group element per training model, the
  augmentation control of the decisive design.
"""

from __future__ import annotations

import torch
from torch import nn

from iclr25.nfn.block import KEYS, BlockSpec
from iclr25.nfn.group import apply_group_action, head_products, random_group_element

Weights = dict[str, torch.Tensor]
QUANTILES = (0.0, 0.25, 0.5, 0.75, 1.0)


def flatten_weights(W: Weights) -> torch.Tensor:
    """``{key: (n, ...)}`` -> ``(n, P)``: all weights of a model, keys in :data:`KEYS` order."""
    n = W["WQ"].shape[0]
    return torch.cat([W[k].reshape(n, -1) for k in KEYS], -1)


def tensor_stats(x: torch.Tensor) -> torch.Tensor:
    """``(n, ...)`` -> ``(n, 7)``: mean, variance and the quantiles 0, .25, .5, .75, 1 of each row."""
    x = x.reshape(x.shape[0], -1)
    q = torch.quantile(x, torch.tensor(QUANTILES, dtype=x.dtype, device=x.device), dim=-1).T
    return torch.cat([x.mean(-1, keepdim=True), x.var(-1, keepdim=True), q], -1)


def stat_features(W: Weights) -> torch.Tensor:
    """STATNN features ``(n, n_blocks * 8 * 7)`` of weights ``{key: (n, n_blocks, ...)}``: the 7
    statistics of each of the 8 tensors of each block."""
    L = W["WQ"].shape[1]
    return torch.cat([tensor_stats(W[k][:, l]) for l in range(L) for k in KEYS], -1)


PRODUCT_SLOTS = ("QK", "VO", "WA", "bA", "WB", "bB")
"""The tensors of :func:`product_stat_features`, per block, in column order."""


def product_stat_features(W: Weights, slots: tuple[str, ...] = PRODUCT_SLOTS) -> torch.Tensor:
    """Invariant STATNN features ``(n, n_blocks * len(slots) * 7)``: the 7 statistics of ``QK`` (all
    heads' entries pooled), ``VO`` (likewise), ``WA``, ``bA``, ``WB``, ``bB`` of each block, or of the
    subset ``slots`` of :data:`PRODUCT_SLOTS` (e.g. the attention products alone). Every one is
    unchanged by the group: the products are invariant up to permutations, and statistics of a
    multiset ignore permutations."""
    qk, vo = head_products(W)
    L = W["WQ"].shape[1]
    tensors = lambda l: {"QK": qk[:, l], "VO": vo[:, l], **{k: W[k][:, l] for k in ("WA", "bA", "WB", "bB")}}
    return torch.cat([tensor_stats(tensors(l)[s]) for l in range(L) for s in slots], -1)


NORMS = ("sum |QK_i|_F", "sum |VO_i|_F", "|WA|_F + |WB|_F", "|all weights|_2")
"""The names of :func:`norm_features`' columns."""


def norm_features(W: Weights) -> torch.Tensor:
    """``(n, 4)`` single-number summaries of weights ``{key: (n, n_blocks, ...)}``, over all blocks:
    ``sum_{l,i} |QK_i|_F``, ``sum_{l,i} |VO_i|_F``, ``sum_l |WA|_F + |WB|_F`` and the norm of all
    weights (:data:`NORMS`). The first three are invariant under the group."""
    qk, vo = head_products(W)
    n = W["WQ"].shape[0]
    fro = lambda x: x.pow(2).sum((-1, -2)).sqrt()
    return torch.stack([fro(qk).reshape(n, -1).sum(-1), fro(vo).reshape(n, -1).sum(-1),
                        (fro(W["WA"]) + fro(W["WB"])).reshape(n, -1).sum(-1),
                        flatten_weights(W).norm(dim=-1)], -1)


class MLPRegressor(nn.Module):
    """``Linear -> ReLU -> Linear -> ReLU -> Linear`` to one logit, on standardised inputs
    (``mean``/``std`` buffers set by :meth:`set_standardization` from training inputs)."""

    def __init__(self, n_in: int, hidden: int = 32):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, 1))
        self.register_buffer("mean", torch.zeros(n_in))
        self.register_buffer("std", torch.ones(n_in))

    @torch.no_grad()
    def set_standardization(self, x: torch.Tensor, per_feature: bool = True) -> None:
        """Standardise by the training inputs ``x`` ``(n, n_in)``: per feature, or (``per_feature=False``)
        one mean and scale for all features."""
        if per_feature:
            self.mean.copy_(x.mean(0))
            self.std.copy_(x.std(0).clamp_min(1e-8))
        else:
            self.mean.fill_(x.mean().item())
            self.std.fill_(max(x.std().item(), 1e-8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(batch, n_in)`` -> logits ``(batch,)``."""
        return self.net((x - self.mean) / self.std).squeeze(-1)


class FlatWeightsMLP(nn.Module):
    """:class:`MLPRegressor` on :func:`flatten_weights` of a weight dict ``{key: (batch, n_blocks, ...)}``:
    the paper's MLP baseline, written so that the input is still a weight dict (on which
    :func:`group_augment` can act before flattening)."""

    def __init__(self, n_in: int, hidden: int = 32):
        super().__init__()
        self.mlp = MLPRegressor(n_in, hidden)

    def forward(self, W: Weights) -> torch.Tensor:
        """``W``: ``{key: (batch, n_blocks, ...)}`` -> logits ``(batch,)``."""
        return self.mlp(flatten_weights(W))


def group_augment(spec: BlockSpec, cond: float = 2.0):
    """An ``augment(W, generator)`` for :func:`iclr25.nfn.fit.fit_ensemble`: every model of the
    mini-batch ``W`` (``{key: (S, batch, n_blocks, ...)}``) is moved by its own independent random
    group element per block (:func:`iclr25.nfn.group.random_group_element`, condition number at
    most ``cond``), so the labels are unchanged and the predictor sees a new point of each orbit."""

    def augment(W: Weights, generator: torch.Generator) -> Weights:
        lead = tuple(W["WQ"].shape[:3])
        g = random_group_element(spec, *lead, cond=cond, generator=generator, dtype=W["WQ"].dtype,
                                 device=W["WQ"].device)
        return apply_group_action(W, g)

    return augment
