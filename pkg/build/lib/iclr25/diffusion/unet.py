"""Tiny diffusers U-Nets for small images, and the noise schedules used to train and sample them."""

from __future__ import annotations

from typing import Sequence

import torch
from diffusers import DDIMScheduler, DDPMScheduler, UNet2DModel


def make_tiny_unet(res: int, in_channels: int = 3, channels: Sequence[int] = (16, 32, 48),
                   attention: Sequence[bool] = (False, True, True), norm_groups: int = 8,
                   seed: int | None = None) -> UNet2DModel:
    """A small :class:`diffusers.UNet2DModel` for ``res x res`` images with ``in_channels`` channels
    (and as many output channels: an epsilon-predictor).

    One resnet per level, ``len(channels)`` levels (resolution halves between levels), self-attention
    (one head per block) at the levels where ``attention`` is true, so that attention-injection
    methods have attention layers to hook. ``seed`` fixes the initial weights (CPU generator).
    """
    if seed is not None:
        torch.manual_seed(seed)
    down = tuple("AttnDownBlock2D" if a else "DownBlock2D" for a in attention)
    up = tuple("AttnUpBlock2D" if a else "UpBlock2D" for a in reversed(attention))
    return UNet2DModel(sample_size=res, in_channels=in_channels, out_channels=in_channels,
                       block_out_channels=tuple(channels), layers_per_block=1,
                       down_block_types=down, up_block_types=up, norm_num_groups=norm_groups,
                       attention_head_dim=None)


def train_schedule(num_train_timesteps: int = 1000) -> DDPMScheduler:
    """The forward process the U-Nets are trained on: DDPM, linear betas ``1e-4 .. 0.02``."""
    return DDPMScheduler(num_train_timesteps=num_train_timesteps, beta_schedule="linear",
                         beta_start=1e-4, beta_end=0.02, clip_sample=False)


def inversion_schedule(num_steps: int, num_train_timesteps: int = 1000) -> DDIMScheduler:
    """The sampler for inversion and guided sampling: DDIM with ``num_steps`` steps on the training
    schedule, ``trailing`` spacing (the first step starts at ``t = T - 1``) and ``alpha_bar`` of
    ``t = 0`` (not 1) after the last step, so every step has a positive noise level ``sigma`` and the
    edit-friendly noise maps are finite."""
    sched = DDIMScheduler(num_train_timesteps=num_train_timesteps, beta_schedule="linear",
                          beta_start=1e-4, beta_end=0.02, clip_sample=False,
                          set_alpha_to_one=False, timestep_spacing="trailing")
    sched.set_timesteps(num_steps)
    return sched


def n_params(model: torch.nn.Module) -> int:
    """Number of parameters of ``model``."""
    return sum(p.numel() for p in model.parameters())
