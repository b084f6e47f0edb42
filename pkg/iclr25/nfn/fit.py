"""Training accuracy predictors: many configurations and data splits at once, selected on validation.

:func:`fit_ensemble` trains one copy of a predictor per (split seed, configuration) pair together:
their parameters are stacked (``torch.func.stack_module_state``) and one ``torch.func.vmap`` call
evaluates all of them, each on its own split's mini-batch. The loss is the paper's: binary
cross-entropy between ``sigmoid(logit)`` and the true accuracy. The optimizer is Adam with
decoupled weight decay, each member with its own learning rate and decay, under the official
schedule (linear warm-up for the first tenth of the epochs, then cosine decay). Every
``eval_every`` epochs each member's Kendall tau on its validation split is recorded with its test
predictions; the result keeps, per member, the test predictions of its best validation epoch, and
per split the configuration with the best validation tau (epoch included). Test numbers never
take part in a member's choice. (Under cross-fitting, e.g. ``iclr25.nfn.study.fold_indices``, the
validation fold of one split is the test fold of another, so a choice averaged over the splits does
use every run's label once, through another split's model.)
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap
from torch.utils._pytree import tree_map

from iclr25.nfn.metrics import kendall_tau


@dataclass
class Selection:
    """What :func:`fit_ensemble` and :func:`select` return, for ``S`` splits and ``K`` configurations.

    ``val_tau`` ``(S, K)``: best validation tau of each member (over epochs); ``epoch`` ``(S, K)``: its
    epoch; ``test_pred`` ``(S, K, n_test)``: the member's test predictions at that epoch; ``chosen``
    ``(S,)``: the configuration chosen per split; ``pred`` ``(S, n_test)``: the chosen member's test
    predictions."""

    val_tau: np.ndarray
    epoch: np.ndarray
    test_pred: np.ndarray
    chosen: np.ndarray
    pred: np.ndarray
    val_curve: np.ndarray | None = None
    """``(S, K, n_evals)``: every member's validation tau at each evaluation (epochs ``eval_every``,
    ``2 eval_every``, ..., ``epochs``), to check that training reached a plateau."""


def select(val_tau: np.ndarray, epoch: np.ndarray, test_pred: np.ndarray,
           val_curve: np.ndarray | None = None) -> Selection:
    """Per split, the configuration with the highest validation tau (the first on a tie)."""
    chosen = np.nanargmax(np.nan_to_num(val_tau, nan=-2.0), axis=1)
    pred = test_pred[np.arange(len(chosen)), chosen]
    return Selection(val_tau, epoch, test_pred, chosen, pred, val_curve)


def select_mean(sel: Selection) -> tuple[int, np.ndarray, Selection]:
    """One configuration for all splits: the one with the highest validation tau averaged over the
    splits (``sel.val_tau`` ``(S, K)``; the first on a tie). Returns its index ``k``, the mean
    validation tau of every configuration ``(K,)`` (the curve to print) and the :class:`Selection`
    with ``chosen = k`` on every split."""
    mean = np.nanmean(np.nan_to_num(sel.val_tau, nan=-2.0), 0)
    k = int(np.argmax(mean))
    chosen = np.full(sel.val_tau.shape[0], k)
    return k, mean, Selection(sel.val_tau, sel.epoch, sel.test_pred, chosen, sel.test_pred[:, k], sel.val_curve)


def interior(k: int, n_configs: int) -> bool:
    """Whether configuration ``k`` of a grid of ``n_configs`` ordered values is strictly inside it."""
    return 0 < k < n_configs - 1


def _schedule(epoch: int, epochs: int) -> float:
    warm = max(1, epochs // 10)
    if epoch < warm:
        return (epoch + 1) / warm
    return 0.5 * (1 + math.cos(math.pi * (epoch - warm) / max(1, epochs - warm)))


def fit_ensemble(make_model: Callable[[int, int], nn.Module], data: dict[str, Any], targets: dict[str, torch.Tensor],
                 configs: Sequence[dict[str, float]], *, epochs: int, batch: int = 32, eval_every: int = 1,
                 augment: Callable[[Any, torch.Generator], Any] | None = None, seed: int = 0,
                 select_epoch: bool = True) -> Selection:
    """Train ``S x K`` predictors together and select on validation.

    - ``make_model(s, k)``: a fresh predictor for split ``s`` and configuration ``k`` (its
      normalising buffers set from split ``s``'s training inputs);
    - ``data[split]``: the inputs of ``"train"``, ``"val"``, ``"test"``, a tensor or a dict of tensors
      with leading axes ``(S, n_split, ...)`` (each split seed's own points);
    - ``targets[split]``: ``(S, n_split)`` accuracies in ``[0, 1]``;
    - ``configs``: ``K`` dicts with ``lr`` and ``wd`` (decoupled weight decay);
    - ``augment(batch, generator)``: applied to every training mini-batch (``(S, batch, ...)``);
    - ``select_epoch``: keep each member's best validation epoch (``True``) or its last epoch
      (``False``: a fixed epoch budget; validation then only chooses the configuration).
    """
    S, n_train = targets["train"].shape
    K = len(configs)
    models = [make_model(s, k) for s in range(S) for k in range(K)]
    params, buffers = stack_module_state(models)
    base = copy.deepcopy(models[0]).to("meta")
    params = {k: v.detach().requires_grad_(True) for k, v in params.items()}
    member_split = torch.arange(S).repeat_interleave(K)
    device = targets["train"].device
    member_split = member_split.to(device)

    def call(p, b, x):
        return functional_call(base, (p, b), (x,))

    forward = vmap(call)
    spread = lambda tree: tree_map(lambda t: t[member_split], tree)   # (S, ...) -> (S*K, ...)
    col = lambda key: torch.tensor([c[key] for c in configs] * S, dtype=torch.float32, device=device)
    lr, wd = col("lr"), col("wd")
    m_state = {k: torch.zeros_like(v) for k, v in params.items()}
    v_state = {k: torch.zeros_like(v) for k, v in params.items()}
    gen = torch.Generator().manual_seed(seed)
    steps_per_epoch = max(1, math.ceil(n_train / batch))
    best_tau = np.full(S * K, -np.inf)
    best_epoch = np.zeros(S * K, dtype=int)
    best_pred = np.zeros((S * K, targets["test"].shape[1]))
    y_val = targets["val"].cpu().numpy()[member_split.cpu().numpy()]
    data_val, data_test = spread(data["val"]), spread(data["test"])
    t, curve = 0, []
    for epoch in range(epochs):
        order = torch.argsort(torch.rand(S, n_train, generator=gen), dim=1).to(device)
        rate = _schedule(epoch, epochs)
        for i in range(steps_per_epoch):
            idx = order[:, i * batch:(i + 1) * batch]
            pick = lambda x: torch.gather(x, 1, idx.view(*idx.shape, *([1] * (x.dim() - 2))).expand(
                *idx.shape, *x.shape[2:]))
            xb = tree_map(pick, data["train"])
            if augment is not None:
                xb = augment(xb, gen)
            yb = pick(targets["train"])
            logits = forward(params, buffers, spread(xb))
            loss = nn.functional.binary_cross_entropy_with_logits(logits, spread(yb), reduction="none").mean(1).sum()
            grads = torch.autograd.grad(loss, list(params.values()))
            t += 1
            with torch.no_grad():
                for (name, p), g in zip(params.items(), grads):
                    shape = (-1,) + (1,) * (p.dim() - 1)
                    m, v = m_state[name], v_state[name]
                    m.mul_(0.9).add_(0.1 * g)
                    v.mul_(0.999).add_(0.001 * g * g)
                    step = (m / (1 - 0.9 ** t)) / (torch.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
                    p.mul_(1 - (lr * rate * wd).view(shape)).sub_((lr * rate).view(shape) * step)
        if (epoch + 1) % eval_every == 0 or epoch == epochs - 1:
            with torch.no_grad():
                pv = torch.sigmoid(forward(params, buffers, data_val)).cpu().numpy()
                tau = kendall_tau(pv, y_val)
                curve.append(tau)
                better = np.nan_to_num(tau, nan=-2.0) > best_tau
                if not select_epoch:
                    better = np.full(S * K, epoch == epochs - 1)
                if better.any():
                    pt = torch.sigmoid(forward(params, buffers, data_test)).cpu().numpy()
                    best_tau = np.where(better, np.nan_to_num(tau, nan=-2.0), best_tau)
                    best_epoch = np.where(better, epoch + 1, best_epoch)
                    best_pred[better] = pt[better]
    return select(best_tau.reshape(S, K), best_epoch.reshape(S, K), best_pred.reshape(S, K, -1),
                  np.stack(curve, -1).reshape(S, K, -1))
