"""The one optimisation loop the package's trainers share.

Every trainer in the book (the diffusion U-Nets, the consistency distillation, the restorers, the byte
Mamba, the tiny language models) runs the same step: compute a loss, clear the gradients, back-propagate,
clip the global gradient norm, step the optimiser and its learning-rate schedule. :func:`fit` is that
loop; each trainer keeps what is its own (the optimiser, its parameter groups, the loss and the data
stream, which draws from the trainer's own generator inside ``loss_at``).

>>> import torch
>>> w = torch.nn.Parameter(torch.tensor([3.0]))
>>> opt = torch.optim.SGD([w], lr=0.1)
>>> losses = fit([w], opt, lambda step: (w ** 2).sum(), 2, clip=None)
>>> [round(x, 4) for x in losses]
[9.0, 5.76]
"""

from __future__ import annotations

import math
from typing import Callable, Iterable

import torch


def warmup_cosine(warmup: int, total: int) -> Callable[[int], float]:
    """The learning-rate factor ``min(1, (s + 1) / warmup) * (1 + cos(pi * min(s, total) / total)) / 2``
    at step ``s``: linear warm-up over ``warmup`` steps, then a cosine decay that reaches 0 at ``total``."""
    return lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(s, total) / total))


def fit(params: Iterable[torch.nn.Parameter], opt: torch.optim.Optimizer,
        loss_at: Callable[[int], torch.Tensor], steps: int, *, clip: float | None = 1.0,
        lr_lambda: Callable[[int], float] | None = None,
        progress: Callable[[Iterable[int]], Iterable[int]] | None = None) -> list[float]:
    """Run ``steps`` optimisation steps and return the loss of each.

    Step ``s``: ``loss = loss_at(s)``; clear the gradients of ``opt``; back-propagate; clip the global
    norm of the gradients of ``params`` at ``clip`` (none when ``None``); ``opt.step()``; then step the
    :class:`torch.optim.lr_scheduler.LambdaLR` built from ``lr_lambda`` (constant learning rate when
    ``None``). ``progress`` wraps the step range (e.g. a tqdm bar). The operations run in the same order
    as a hand-written loop, so a trainer moved onto :func:`fit` computes bit-identical weights.
    """
    params = list(params)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda) if lr_lambda is not None else None
    losses = []
    for step in (progress(range(steps)) if progress else range(steps)):
        loss = loss_at(step)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
        if sched is not None:
            sched.step()
        losses.append(float(loss.detach()))
    return losses
