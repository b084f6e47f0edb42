"""Knowledge editors for a :class:`~iclr25.lm.model.TinyLM`: ROME, MEMIT and constrained fine-tuning.

All three act on the second MLP matrix ``W_out`` (d, d_ff) of a block, whose input is the *key*
``k = GELU(W_in LN(x) + b_in)`` (d_ff,) of :func:`iclr25.lm.hooks.mlp_keys`:

* :func:`rank_one_edit`: ROME's closed form, ``W' = W + (v - W k)(C^{-1} k)^T / ((C^{-1} k)^T k)``,
  the minimiser of ``||(W' - W) K||_F`` over all matrices with ``W' k = v`` when
  ``C = K K^T / n`` (identity ``C`` = the minimum-Frobenius-norm change);
* :func:`memit_delta`: MEMIT's batch least squares ``Delta = R K^T (lam C + K K^T)^{-1}``;
* :func:`target_deltas`: the ``v*`` optimisation both need (a vector added to the MLP output at
  the subject's token so the model says the new object);
* :func:`rome_edit`, :func:`memit_edit`, :func:`ft_edit`: the editors on a model (in place).
"""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from iclr25.lm.data import encode_pairs, token_position
from iclr25.lm.evaluate import model_device
from iclr25.lm.hooks import key_covariance, mlp_keys, mlp_out
from iclr25.lm.model import TinyLM
from iclr25.lm.splits import Edit
from iclr25.lm.vocab import Vocab
from iclr25.lm.world import fact_prompt

#: phrasings the editors optimise on (edit form, declarative, chat); 1 (the paraphrase) is held out
EDIT_TEMPLATES = (0, 2, 3)


def rank_one_edit(W: Tensor, k: Tensor, v: Tensor, C: Tensor | None = None) -> Tensor:
    """ROME's update: ``W (d, m)``, key ``k (m,)``, value ``v (d,)``, key second moment ``C (m, m)``
    (identity when ``None``) -> ``W' (d, m)`` with ``W' k = v`` and ``W' - W`` of rank one.

    ``W' = W + (v - W k) u^T / (u^T k)`` with ``u = C^{-1} k`` (computed in float64, returned in
    ``W``'s dtype): among all ``W'`` with ``W' k = v`` it minimises ``tr((W' - W) C (W' - W)^T)``,
    the mean squared change of the outputs on keys with second moment ``C``.
    """
    Wd, kd, vd = W.double(), k.double().to(W.device), v.double().to(W.device)
    u = kd if C is None else torch.linalg.solve(C.double().to(W.device), kd)
    return (Wd + torch.outer(vd - Wd @ kd, u) / (u @ kd)).to(W.dtype)


def memit_delta(K: Tensor, R: Tensor, C: Tensor, lam: float) -> Tensor:
    """MEMIT's batch update of one layer: keys ``K (m, n)``, residuals ``R (d, n)``, key second
    moment ``C (m, m)``, weight ``lam`` -> ``Delta (d, m) = R K^T (lam C + K K^T)^{-1}``, the
    minimiser of ``||Delta K - R||_F^2 + lam tr(Delta C Delta^T)`` (float64)."""
    Kd, Rd = K.double(), R.double().to(K.device)
    A = lam * C.double().to(K.device) + Kd @ Kd.T
    return torch.linalg.solve(A, Kd @ Rd.T).T          # A symmetric: (A^{-1} K R^T)^T


def edit_prompts(edits: Sequence[Edit], templates: Sequence[int] = EDIT_TEMPLATES, position: str = "last"):
    """Prompts, new objects, edited positions (``<bos>`` = 0) and edit index of every
    (edit, template) pair: four lists of length ``len(edits) * len(templates)``. ``position``:
    ``"subject"`` (the subject's token, ROME's choice in large models) or ``"last"`` (the prompt's
    last token, where the object is predicted)."""
    if position not in ("subject", "last"):
        raise ValueError(f"position must be 'subject' or 'last', got {position!r}")
    prompts, objects, pos, idx = [], [], [], []
    for i, e in enumerate(edits):
        for t in templates:
            p = fact_prompt(e.subject, e.relation, t)
            prompts.append(p), objects.append((e.new,)), idx.append(i)
            pos.append(token_position(p, e.subject) if position == "subject" else len(p))
    return prompts, objects, pos, idx


def add_at(model: TinyLM, layer: int, delta: Tensor, rows: Tensor, pos: Tensor):
    """Forward hook adding ``delta[rows[b]]`` to block ``layer``'s MLP output at ``pos[b]``."""
    def hook(_m, _a, out):
        add = torch.zeros_like(out)
        add[torch.arange(out.shape[0], device=out.device), pos] = delta[rows].to(out.dtype)
        return out + add
    return model.blocks[layer].mlp.register_forward_hook(hook)


def subject_keys(model: TinyLM, vocab: Vocab, edits: Sequence[Edit], layer: int,
                 templates: Sequence[int] = EDIT_TEMPLATES, position: str = "last") -> Tensor:
    """``k*`` of each edit: block ``layer``'s MLP key at the edited position (see :func:`edit_prompts`; with
    ``position="last"``, the default, the prompt's *last* token, not the subject's), averaged over the editing
    phrasings -> (n_edits, d_ff) float64. The last tokens of the phrasings are not all one word, so the mean is over unlike
    keys (ROME averages one token's key over prefixes); the name is kept because records fingerprint its callers."""
    prompts, objects, pos, idx = edit_prompts(edits, templates, position)
    b = encode_pairs(vocab, prompts, objects).to(model_device(model))
    with torch.no_grad():
        keys = mlp_keys(model, b.ids, layer)
    k = keys[torch.arange(len(pos)), torch.tensor(pos)].double()
    out = torch.zeros(len(edits), k.shape[1], dtype=torch.float64, device=k.device)
    out.index_add_(0, torch.tensor(idx, device=k.device), k)
    return out / len(templates)


def target_deltas(model: TinyLM, vocab: Vocab, edits: Sequence[Edit], layer: int, *,
                  steps: int = 30, lr: float = 0.5, weight_decay: float = 1e-3,
                  clamp_factor: float = 4.0, templates: Sequence[int] = EDIT_TEMPLATES,
                  position: str = "last") -> Tensor:
    """The ``v*`` optimisation of ROME/MEMIT for all edits at once: ``delta_i (d,)`` added to block
    ``layer``'s MLP output at edit i's edited position (``position``: the prompt's last token by
    default, or the subject's token, see :func:`edit_prompts`), minimising the mean NLL of the new object
    over the editing phrasings plus ``weight_decay ||delta_i||^2`` (Adam, ``steps`` steps), each
    ``||delta_i||`` clamped to ``clamp_factor`` times the norm of the unedited MLP output there.
    Returns (n_edits, d) float32 (``v*_i = W_out k*_i + b_out + delta_i``)."""
    dev = model_device(model)
    prompts, objects, pos, idx = edit_prompts(edits, templates, position)
    b = encode_pairs(vocab, prompts, objects).to(dev)
    pos_t, rows = torch.tensor(pos, device=dev), torch.tensor(idx, device=dev)
    with torch.no_grad():
        from iclr25.lm.hooks import capture_inputs
        m_out = model.blocks[layer].mlp(
            model.blocks[layer].ln2(capture_inputs(model, {"x": model.blocks[layer].ln2}, b.ids)["x"]))
        base_norm = torch.zeros(len(edits), device=dev).index_add_(
            0, rows, m_out[torch.arange(len(pos)), pos_t].norm(dim=-1)) / len(templates)
    delta = torch.zeros(len(edits), model.cfg.d_model, device=dev, requires_grad=True)
    opt = torch.optim.Adam([delta], lr=lr)
    tgt = b.ids.gather(1, b.prompt_lengths[:, None]).squeeze(1)
    flags = [p.requires_grad for p in model.parameters()]     # the caller's flags, restored below
    for p in model.parameters():
        p.requires_grad_(False)
    try:
        for _ in range(steps):
            h = add_at(model, layer, delta, rows, pos_t)
            try:
                logits = model(b.ids)
            finally:
                h.remove()
            last = logits[torch.arange(len(pos), device=dev), b.prompt_lengths - 1]
            loss = F.cross_entropy(last, tgt) + weight_decay * (delta ** 2).sum(-1).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            with torch.no_grad():
                cap = clamp_factor * base_norm
                n = delta.norm(dim=-1)
                delta.mul_(torch.where(n > cap, cap / n.clamp_min(1e-12), torch.ones_like(n))[:, None])
    finally:
        for p, f in zip(model.parameters(), flags):
            p.requires_grad_(f)
    return delta.detach()


@torch.no_grad()
def rome_edit(model: TinyLM, vocab: Vocab, edits: Sequence[Edit], layer: int, calib_ids: Tensor,
              calib_mask: Tensor | None = None, *, eps: float = 1e-3, position: str = "last",
              **v_kwargs) -> None:
    """ROME, one rank-one update of block ``layer``'s ``W_out`` per edit, in sequence (in place).

    ``C`` is the key second moment of the *current* model on ``calib_ids`` (plus ``eps`` times
    the mean of its diagonal on the diagonal); ``v*`` comes from :func:`target_deltas` on the
    current model, and the value target of edit i is ``W_out k*_i + delta_i`` with the
    ``W_out`` before any edit of this call.
    """
    C = key_covariance(model, calib_ids, layer, calib_mask)
    C = C + eps * C.diagonal().mean() * torch.eye(C.shape[0], dtype=C.dtype, device=C.device)
    with torch.enable_grad():
        deltas = target_deltas(model, vocab, edits, layer, position=position, **v_kwargs)
    K = subject_keys(model, vocab, edits, layer, position=position)
    lin = mlp_out(model, layer)
    W0 = lin.weight.detach().double()
    W = lin.weight.detach().clone()
    for k, d in zip(K, deltas):
        W = rank_one_edit(W, k, W0 @ k + d.double(), C)
    lin.weight.copy_(W)


@torch.no_grad()
def memit_edit(model: TinyLM, vocab: Vocab, edits: Sequence[Edit], layer: int, calib_ids: Tensor,
               calib_mask: Tensor | None = None, *, lam: float = 50.0, eps: float = 0.0,
               position: str = "last", **v_kwargs) -> None:
    """MEMIT on one layer (a two-block model has one layer to spread over; the chapter says so):
    all edits in one least-squares update ``Delta = R K^T (lam C + K K^T)^{-1}`` of block
    ``layer``'s ``W_out``, ``R = [delta_1 ... delta_n]`` from :func:`target_deltas`, ``K`` the
    subject keys and ``C`` the key second moment of the current model (in place).

    ``eps > 0`` adds ``eps`` times the mean of ``C``'s diagonal to its diagonal, i.e. the penalty
    ``lam eps mean(diag C) ||Delta||_F^2``: a cap on the edit's Frobenius norm, needed where the
    keys span few directions and ``C`` is nearly singular (the update then grows along the
    directions ordinary keys never use)."""
    C = key_covariance(model, calib_ids, layer, calib_mask)
    if eps > 0:
        C = C + eps * C.diagonal().mean() * torch.eye(C.shape[0], dtype=C.dtype, device=C.device)
    with torch.enable_grad():
        deltas = target_deltas(model, vocab, edits, layer, position=position, **v_kwargs)
    K = subject_keys(model, vocab, edits, layer, position=position)
    lin = mlp_out(model, layer)
    D = memit_delta(K.T, deltas.T, C, lam)
    lin.weight.add_(D.to(lin.weight.dtype))


def ft_edit(model: TinyLM, vocab: Vocab, edits: Sequence[Edit], layer: int, *, steps: int = 40,
            lr: float = 5e-3, max_change: float = 0.05, templates: Sequence[int] = EDIT_TEMPLATES,
            keep_zeros: bool = False) -> None:
    """Constrained fine-tuning (FT-L): Adam on block ``layer``'s ``W_out`` only, the mean NLL of
    every edit's new object over the editing phrasings, all edits in one batch; after each step
    every weight is clipped to within ``max_change`` of its starting value (in place).
    ``keep_zeros=True`` (mask-aware FT, for a pruned model): weights that are exactly zero at the
    start stay zero, so the update lands on the surviving weights only."""
    dev = model_device(model)
    prompts, objects, _, _ = edit_prompts(edits, templates)
    b = encode_pairs(vocab, prompts, objects).to(dev)
    lin = mlp_out(model, layer)
    W0 = lin.weight.detach().clone()
    free = (W0 != 0).to(W0.dtype) if keep_zeros else torch.ones_like(W0)
    params = list(model.parameters())
    flags = [p.requires_grad for p in params]
    for p in params:
        p.requires_grad_(False)
    lin.weight.requires_grad_(True)
    opt = torch.optim.Adam([lin.weight], lr=lr)
    tgt = b.ids.gather(1, b.prompt_lengths[:, None]).squeeze(1)
    try:
        for _ in range(steps):
            logits = model(b.ids)
            last = logits[torch.arange(len(tgt), device=dev), b.prompt_lengths - 1]
            loss = F.cross_entropy(last, tgt)
            opt.zero_grad()
            loss.backward()
            opt.step()
            with torch.no_grad():
                lin.weight.copy_(W0 + (lin.weight - W0).clamp(-max_change, max_change) * free)
    finally:
        for p, f in zip(params, flags):
            p.requires_grad_(f)
