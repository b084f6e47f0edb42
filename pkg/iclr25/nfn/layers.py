"""Transformer-NFN layers: linear maps on an encoder block's weight space that commute with (or
are invariant to) the action of :mod:`iclr25.nfn.group`.

A *weight-space feature* ``U`` has channels: ``{key: (batch, channels, *shape)}`` with the shapes of
:class:`iclr25.nfn.block.BlockSpec`. The rule behind every term (Tran et al., 2025): an index that
the group does not touch (the block's input and output feature index, written ``p, q`` or a free
``k``) may carry a learned weight; an index the group permutes (heads; ``pO`` on the attention
output; ``pA`` on the MLP's hidden units) must be kept in place or summed out uniformly; the indices
acted on by ``GL(Dk)`` and ``GL(Dv)`` appear only through the invariant per-head products
``QK_i = WQ_i WK_i^T`` and ``VO_i = WV_i WO_i`` (which makes the layer quadratic in the weights) or
through a multiplication on the side the group does not act on.

The official code writes each term as its own einsum with its own weight; here terms that read the
same pooled quantity are gathered into one ``nn.Linear`` (a linear map of a concatenation is the sum
of the linear maps of the parts), which is the same function class:

- ``pooled`` (:func:`invariant_features`): every quantity invariant under the whole group,
- ``per_hidden`` (:func:`hidden_unit_features`): quantities indexed by an MLP hidden unit (``pA``),
- ``per_output`` (:func:`output_unit_features`): quantities indexed by an attention output unit (``pO``).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from iclr25.nfn.block import KEYS, BlockSpec
from iclr25.nfn.group import head_products

Features = dict[str, torch.Tensor]
LINEAR_KEYS = ("WQ", "WK", "WV", "WO")
"""Slots acted on by ``GL``: an elementwise nonlinearity there would break equivariance."""


def invariant_features(U: Features) -> torch.Tensor:
    """The pooled invariants of a weight-space feature, ``(batch, channels * (D^2 + 3 D + 2))``:
    ``sum_h QK_h`` (``D x D``, both indices free), ``sum_{h,q} VO_h[p, q]`` (``D``: the ``pO``
    index ``q`` summed), ``sum WA`` (both indices permuted), ``sum_p WB[p, q]`` (``D``), ``sum bA``
    and ``bB`` (``D``, free)."""
    qk, vo = head_products(U)
    b, c = U["bB"].shape[:2]
    parts = [qk.sum(2), vo.sum((2, 4)), U["WA"].sum((2, 3))[..., None], U["WB"].sum(2),
             U["bA"].sum(2)[..., None], U["bB"]]
    return torch.cat([p.reshape(b, c, -1) for p in parts], -1).reshape(b, -1)


def hidden_unit_features(U: Features) -> torch.Tensor:
    """Features of each MLP hidden unit ``j`` (permuted by ``pA``), ``(batch, Da, channels * (D + 2))``:
    the column sum ``sum_p WA[p, j]``, the bias ``bA[j]`` and the row ``WB[j, :]``."""
    b, c, D, Da = U["WA"].shape
    parts = torch.cat([U["WA"].sum(2)[..., None], U["bA"][..., None], U["WB"]], -1)   # (b, c, Da, D + 2)
    return parts.transpose(1, 2).reshape(b, Da, c * (D + 2))


def output_unit_features(U: Features) -> torch.Tensor:
    """Features of each attention output unit ``j`` (permuted by ``pO``), ``(batch, D, channels * (D + 1))``:
    the column ``sum_h VO_h[:, j]`` and the row sum ``sum_q WA[j, q]``."""
    _, vo = head_products(U)
    b, c, D = U["bB"].shape
    parts = torch.cat([vo.sum(2).transpose(-1, -2), U["WA"].sum(3)[..., None]], -1)     # (b, c, D, D + 1)
    return parts.transpose(1, 2).reshape(b, D, c * (D + 1))


def n_invariant_features(spec: BlockSpec, channels: int) -> int:
    """Length of :func:`invariant_features` for ``channels`` channels."""
    return channels * (spec.D ** 2 + 3 * spec.D + 2)


class TransformerNFNEquivariant(nn.Module):
    """The equivariant linear layer ``E: U -> U'`` on one block's weight space, ``d -> e`` channels.

    Output slots (``b`` batch, ``i`` head; every term also mixes channels):

    - ``WQ'_i = Phi_Q WQ_i`` (and ``WK``, ``WV`` alike): a learned ``D x D`` map on the free input
      index, shared by the heads; the group acts on the right, so it commutes;
    - ``WO'_i[j, k] = a WO_i[j, k] + c sum_k' WO_i[j, k']``;
    - ``WA'[j, k] = s + r_j + t_k + a WA[j, k]`` with a scalar ``s`` of the pooled invariants, a
      term ``r_j`` of output unit ``j``'s features and ``t_k`` of hidden unit ``k``'s;
    - ``bA'[k] = s' + t'_k``;  ``WB'[j, k] = v_k + w_{jk}`` with ``v`` a vector over the free index
      ``k`` from the pooled invariants and ``w_{j.}`` from hidden unit ``j``'s features;
    - ``bB'[k] = v'_k`` (pooled invariants; the bias of the pooled map carries the bias terms).
    """

    def __init__(self, spec: BlockSpec, d: int, e: int):
        super().__init__()
        D, self.spec, self.d, self.e = spec.D, spec, d, e
        init = lambda *shape, fan: nn.Parameter(torch.randn(*shape) / math.sqrt(fan))
        self.phi = nn.ParameterDict({k: init(e, d, D, D, fan=d * D) for k in ("WQ", "WK", "WV")})
        self.o_self, self.o_rowsum = init(e, d, fan=d), init(e, d, fan=d * D)
        self.a_self = init(e, d, fan=d)
        self.pooled = nn.Linear(n_invariant_features(spec, d), 2 * e + 2 * e * D)  # WA s, bA s', WB v, bB v'
        self.per_hidden = nn.Linear(d * (D + 2), 2 * e + e * D, bias=False)         # WA t, bA t', WB w
        self.per_output = nn.Linear(d * (D + 1), e, bias=False)                      # WA r

    def forward(self, U: Features) -> Features:
        """``U``: ``{key: (batch, d, *shape)}`` -> ``{key: (batch, e, *shape)}``."""
        e, D = self.e, self.spec.D
        out = {k: torch.einsum("edjp,bdhpk->behjk", self.phi[k], U[k]) for k in ("WQ", "WK", "WV")}
        WO = U["WO"]
        out["WO"] = (torch.einsum("ed,bdhjk->behjk", self.o_self, WO)
                     + torch.einsum("ed,bdhj->behj", self.o_rowsum, WO.sum(-1))[..., None])
        b = WO.shape[0]
        z = self.pooled(invariant_features(U))
        s, s2, v, v2 = torch.split(z, [e, e, e * D, e * D], -1)
        hid = self.per_hidden(hidden_unit_features(U))                    # (b, Da, 2e + eD)
        t, t2, w = torch.split(hid, [e, e, e * D], -1)
        r = self.per_output(output_unit_features(U))                      # (b, D, e)
        out["WA"] = (s[:, :, None, None] + r.transpose(1, 2)[..., None] + t.transpose(1, 2)[:, :, None, :]
                     + torch.einsum("ed,bdjk->bejk", self.a_self, U["WA"]))
        out["bA"] = s2[..., None] + t2.transpose(1, 2)
        out["WB"] = v.reshape(b, e, 1, D) + w.reshape(b, -1, e, D).transpose(1, 2)
        out["bB"] = v2.reshape(b, e, D)
        return out


class TransformerNFNInvariant(nn.Module):
    """The invariant layer ``I: U -> R^e`` of one block: a linear map of the pooled invariants
    (:func:`invariant_features`), ``sum Phi1 QK + sum phi2 VO + phi3 sum WA + sum phi4 WB
    + phi5 sum bA + sum phi6 bB + c`` with channel mixing."""

    def __init__(self, spec: BlockSpec, d: int, e: int):
        super().__init__()
        self.lin = nn.Linear(n_invariant_features(spec, d), e)

    def forward(self, U: Features) -> torch.Tensor:
        """``U``: ``{key: (batch, d, *shape)}`` -> ``(batch, e)``."""
        return self.lin(invariant_features(U))


def masked_relu(U: Features) -> Features:
    """ReLU on the MLP slots (``WA, bA, WB, bB``: permutations commute with it); the ``GL``-acted
    slots ``WQ, WK, WV, WO`` pass unchanged (an elementwise ReLU there would break equivariance)."""
    return {k: (v if k in LINEAR_KEYS else torch.relu(v)) for k, v in U.items()}


class TransformerNFN(nn.Module):
    """The invariant predictor of the paper (the encoder branch of ``InvariantNFN``): per block,
    ``[E -> masked ReLU] x len(channels)`` then ``I``; the blocks' invariants are concatenated,
    layer-normalised and read out by an MLP to one logit.

    ``channels=(10,)`` is the official README's size (one equivariant layer of 10 channels);
    ``head="batch"`` (our control, not the paper's) replaces the per-sample LayerNorm by a
    standardisation of each feature over the models of a batch.

    Input: ``{key: (batch, n_blocks, *shape)}`` (one channel). Each slot is first divided by a fixed
    scale (:meth:`set_scales`, from training weights): a constant per slot and block, which keeps
    the model invariant."""

    def __init__(self, spec: BlockSpec, n_blocks: int, channels: tuple[int, ...] = (10,), hidden: int = 16,
                 head: str = "layernorm"):
        super().__init__()
        if head not in ("layernorm", "batch"):
            raise ValueError(f"head must be 'layernorm' or 'batch', not {head!r}")
        self.n_blocks = n_blocks
        dims = (1, *channels)
        self.equivariant = nn.ModuleList(
            nn.ModuleList(TransformerNFNEquivariant(spec, a, b) for a, b in zip(dims[:-1], dims[1:]))
            for _ in range(n_blocks))
        self.invariant = nn.ModuleList(TransformerNFNInvariant(spec, dims[-1], dims[-1]) for _ in range(n_blocks))
        width = n_blocks * dims[-1]
        # "layernorm": the paper's per-sample LayerNorm (each model's features divided by their own
        # scale); "batch": each feature standardised over the models of the batch instead (the
        # training mini-batch, or the whole evaluated set; no labels), which keeps every model's
        # overall feature scale relative to the others
        norm = nn.LayerNorm(width) if head == "layernorm" else nn.BatchNorm1d(width, track_running_stats=False)
        self.head = nn.Sequential(norm, nn.Linear(width, hidden), nn.ReLU(),
                                  nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))
        self.register_buffer("scales", torch.ones(n_blocks, len(KEYS)))

    @torch.no_grad()
    def set_scales(self, W: Features) -> None:
        """Slot scales from training weights ``W`` ``{key: (n, n_blocks, *shape)}``: per run the rms of
        ``QK`` (all heads' entries), of ``VO`` and of every other slot; the scale is the median over
        the runs (one diverged run with a huge rms cannot set it), square-rooted for the products:
        ``WQ, WK`` by ``median rms(QK)^(1/2)``, ``WV, WO`` by ``median rms(VO)^(1/2)``."""
        qk, vo = head_products(W)
        med_rms = lambda x: x.pow(2).flatten(1).mean(1).sqrt().median()
        s = torch.ones(self.n_blocks, len(KEYS), dtype=self.scales.dtype, device=self.scales.device)
        for l in range(self.n_blocks):
            r_qk, r_vo = med_rms(qk[:, l]).sqrt(), med_rms(vo[:, l]).sqrt()
            for i, k in enumerate(KEYS):
                s[l, i] = {"WQ": r_qk, "WK": r_qk, "WV": r_vo, "WO": r_vo}.get(k, med_rms(W[k][:, l]))
        self.scales.copy_(s.clamp_min(1e-8))

    def forward(self, W: Features) -> torch.Tensor:
        """``W``: ``{key: (batch, n_blocks, *shape)}`` -> logits ``(batch,)``."""
        feats = []
        for l in range(self.n_blocks):
            U = {k: (W[k][:, l] / self.scales[l, i])[:, None] for i, k in enumerate(KEYS)}
            for layer in self.equivariant[l]:
                U = masked_relu(layer(U))
            feats.append(self.invariant[l](U))
        return self.head(torch.cat(feats, -1)).squeeze(-1)
