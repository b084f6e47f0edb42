"""Unlearners for a :class:`~iclr25.lm.model.TinyLM`: gradient ascent, gradient difference and RMU.

* :func:`gradient_ascent` (GA): maximise the next-token NLL of the *forget* text;
* :func:`gradient_difference` (GD): GA plus ``retain_weight`` times the NLL of *retain* text;
* :func:`rmu`: representation misdirection (Li et al., WMDP): push the residual stream after block
  ``layer`` on forget text towards a fixed random vector ``c u`` and keep it on retain text equal
  to a frozen copy's, ``L = mean ||h(x_f) - c u||^2 + alpha mean ||h(x_r) - h_0(x_r)||^2``, updating
  only the MLP ``W_out`` of the blocks up to ``layer``.

All act in place, on full batches of the given texts (tiny data), with Adam.
"""

from __future__ import annotations

import copy
from typing import Sequence

import torch
from torch import Tensor, nn

from iclr25.lm.data import SeqBatch, encode_pairs
from iclr25.lm.evaluate import answer_nll, model_device
from iclr25.lm.hooks import mlp_in, mlp_out
from iclr25.lm.model import TinyLM
from iclr25.lm.vocab import Vocab

Words = Sequence[str]


def text_batch(vocab: Vocab, texts: Sequence[Words]) -> SeqBatch:
    """Plain texts as a :class:`~iclr25.lm.data.SeqBatch` whose mask covers every token after ``<bos>``."""
    return encode_pairs(vocab, [()] * len(texts), texts)


def upper_params(model: TinyLM, n_frozen: int) -> list[nn.Parameter]:
    """The parameters of blocks ``n_frozen, n_frozen + 1, ...`` (GA's configuration freezes the
    embeddings and the lower blocks)."""
    return [p for b in model.blocks[n_frozen:] for p in b.parameters()]


def _train(params: list[nn.Parameter], loss_fn, steps: int, lr: float, model: TinyLM,
           after_step=None) -> list[float]:
    flags = [p.requires_grad for p in model.parameters()]
    for p in model.parameters():
        p.requires_grad_(False)
    for p in params:
        p.requires_grad_(True)
    opt = torch.optim.Adam(params, lr=lr)
    losses = []
    try:
        for _ in range(steps):
            loss = loss_fn()
            opt.zero_grad()
            loss.backward()
            opt.step()
            if after_step is not None:
                after_step()
            losses.append(float(loss.detach()))
    finally:
        for p, f in zip(model.parameters(), flags):
            p.requires_grad_(f)
    return losses


def gradient_difference(model: TinyLM, forget: SeqBatch, retain: SeqBatch | None, *, steps: int,
                        lr: float, retain_weight: float = 1.0, n_frozen: int = 1) -> list[float]:
    """GD: minimise ``-NLL(forget) + retain_weight * NLL(retain)`` over the blocks from
    ``n_frozen`` on (``retain=None`` or ``retain_weight=0``: plain GA). Returns the losses."""
    dev = model_device(model)
    f, r = forget.to(dev), None if retain is None else retain.to(dev)

    def loss():
        out = -answer_nll(model, f)
        if r is not None and retain_weight:
            out = out + retain_weight * answer_nll(model, r)
        return out
    return _train(upper_params(model, n_frozen), loss, steps, lr, model)


def gradient_ascent(model: TinyLM, forget: SeqBatch, *, steps: int, lr: float, n_frozen: int = 1) -> list[float]:
    """GA: minimise ``-NLL(forget)`` over the blocks from ``n_frozen`` on. Returns the losses."""
    return gradient_difference(model, forget, None, steps=steps, lr=lr, n_frozen=n_frozen)


def block_output(model: TinyLM, ids: Tensor, layer: int) -> Tensor:
    """The residual stream after block ``layer``: (B, T, d), differentiable."""
    return model(ids, return_hidden=True)[1][layer + 1]


def rmu_direction(d: int, seed: int, device: torch.device | str = "cpu") -> Tensor:
    """RMU's control vector: ``u ~ U[0, 1)^d`` normalised to unit length (seeded)."""
    g = torch.Generator().manual_seed(seed)
    u = torch.rand(d, generator=g)
    return (u / u.norm()).to(device)


def project_update(params: Sequence[nn.Parameter], start: Sequence[Tensor], max_rel: float) -> None:
    """In place: shrink each ``p - p0`` whose Frobenius norm exceeds ``max_rel * ||p0||_F`` onto that
    sphere (the Euclidean projection onto the ball around ``p0``)."""
    with torch.no_grad():
        for p, p0 in zip(params, start):
            d = p - p0
            r = max_rel * float(p0.norm())
            n = float(d.norm())
            if n > r:
                p.copy_(p0 + d * (r / n))


def rmu(model: TinyLM, forget: SeqBatch, retain: SeqBatch, *, layer: int, coeff: float, alpha: float,
        steps: int, lr: float, seed: int = 0, max_rel: float | None = None, weights: str = "out") -> list[float]:
    """RMU (in place): minimise ``mean ||h_l(x_f) - coeff u||^2``
    ``+ alpha mean ||h_l(x_r) - h_l^frozen(x_r)||^2`` (means over masked tokens and dimensions,
    ``h_l`` the output of block ``layer``) over the MLP ``W_out`` of blocks ``0..layer``
    (``weights="mlp"``: ``W_in`` and ``W_out`` of those blocks, so the same change is spread over twice the
    matrices, as the paper's RMU updates the MLPs of several layers). With
    ``max_rel``, every step ends by projecting each changed matrix back into the ball
    ``||W - W_0||_F <= max_rel ||W_0||_F`` (projected Adam; our variant, not the paper's), so the update is
    bounded like the edits'. Returns the losses."""
    dev = model_device(model)
    f, r = forget.to(dev), retain.to(dev)
    frozen = copy.deepcopy(model).eval()
    with torch.no_grad():
        h_ref = block_output(frozen, r.ids, layer)
    u = rmu_direction(model.cfg.d_model, seed, dev)
    mf, mr = f.mask[..., None], r.mask[..., None]
    d = model.cfg.d_model

    def loss():
        hf = block_output(model, f.ids, layer)
        hr = block_output(model, r.ids, layer)
        lf = (((hf - coeff * u) ** 2) * mf).sum() / (mf.sum() * d)
        lr_ = (((hr - h_ref) ** 2) * mr).sum() / (mr.sum() * d)
        return lf + alpha * lr_
    if weights not in ("out", "mlp"):
        raise ValueError(f"weights must be 'out' or 'mlp', not {weights!r}")
    params = [mlp_out(model, l).weight for l in range(layer + 1)]
    if weights == "mlp":
        params += [mlp_in(model, l).weight for l in range(layer + 1)]
    start = [p.detach().clone() for p in params]
    after = None if max_rel is None else (lambda: project_update(params, start, max_rel))
    return _train(params, loss, steps, lr, model, after)
