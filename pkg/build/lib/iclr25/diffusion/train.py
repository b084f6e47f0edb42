"""Training a tiny epsilon-prediction diffusion model on images drawn on the fly."""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from diffusers import DDPMScheduler, UNet2DModel

from iclr25.common.optim import fit, warmup_cosine

ImageSource = Callable[[int, torch.Generator], torch.Tensor]
"""``source(n, generator) -> (n, C, H, W)`` images in ``[-1, 1]`` (drawn on the CPU)."""


def ddpm_loss(unet: UNet2DModel, sched: DDPMScheduler, x0: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """The simple DDPM loss ``E || eps - eps_theta(sqrt(abar_t) x0 + sqrt(1 - abar_t) eps, t) ||^2``
    on a batch ``x0`` ``(B, C, H, W)``, with ``t`` uniform and ``eps`` standard normal, both drawn
    from the CPU generator ``g`` (the same draws on every device)."""
    t = torch.randint(0, sched.config.num_train_timesteps, (x0.shape[0],), generator=g)
    eps = torch.randn(x0.shape, generator=g)
    t, eps = t.to(x0.device), eps.to(x0.device)
    return F.mse_loss(unet(sched.add_noise(x0, eps, t), t).sample, eps)


def train_ddpm(unet: UNet2DModel, sched: DDPMScheduler, source: ImageSource, steps: int,
               batch_size: int = 32, lr: float = 2e-3, warmup: int = 50, seed: int = 0,
               stop_after: int | None = None, progress: Callable | None = None) -> list[float]:
    """Train ``unet`` in place with AdamW (weight decay 0.01, gradient norm clipped at 1) and a
    linear warm-up followed by cosine decay of the learning rate; returns the loss of every step.

    ``source`` draws fresh training images every step. Deterministic given the initial weights and
    ``seed`` on a fixed number of threads. ``stop_after`` ends early on the *same* schedule (for
    reproduction tests); ``progress`` wraps the step range (a progress bar).
    """
    device = next(unet.parameters()).device
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(unet.parameters(), lr=lr, weight_decay=0.01)
    n = steps if stop_after is None else min(steps, stop_after)
    unet.train()
    losses = fit(unet.parameters(), opt, lambda _: ddpm_loss(unet, sched, source(batch_size, g).to(device), g), n,
                 lr_lambda=warmup_cosine(warmup, steps), progress=progress)
    unet.eval()
    return losses
