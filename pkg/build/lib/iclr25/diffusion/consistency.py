"""Latent consistency models in pixel space: the teacher, consistency distillation, the LCM sampler.

Everything runs on Stable Diffusion's ``scaled_linear`` schedule (``beta`` from 0.00085 to 0.012 over
``T = 1000`` steps), the schedule of the LCM InterLCM starts from. The "latent" is the image itself
(the VAE is the identity at our scale). Building blocks are diffusers': a
:class:`~diffusers.UNet2DConditionModel` epsilon-predictor (conditional, so that a
:class:`~diffusers.ControlNetModel` can be made from it), :class:`~diffusers.LCMScheduler` (its
boundary-condition scalings and multistep sampler) and :class:`~diffusers.DDIMScheduler` (the
teacher's sampler).
"""

from __future__ import annotations

import copy
import functools
from typing import Callable

import torch
import torch.nn.functional as F
from diffusers import DDIMScheduler, LCMScheduler, UNet2DConditionModel
from diffusers.utils.torch_utils import randn_tensor

from iclr25.common.optim import fit, warmup_cosine

#: The schedule of Stable Diffusion (and of its LCMs): ``beta`` linear in ``sqrt`` from 0.00085 to 0.012.
SCHEDULE = dict(num_train_timesteps=1000, beta_schedule="scaled_linear", beta_start=0.00085, beta_end=0.012)
#: Tokens of the (unconditional) teacher's cross-attention: ``NULL_TOKENS x CROSS_DIM`` zeros.
NULL_TOKENS, CROSS_DIM = 4, 32

ImageSource = Callable[[int, torch.Generator], torch.Tensor]
"""``source(n, generator) -> (n, C, H, W)`` training images in ``[-1, 1]``."""


def lcm_scheduler(num_steps: int | None = None) -> LCMScheduler:
    """diffusers' LCM sampler on :data:`SCHEDULE` (50-step skipping grid, ``timestep_scaling`` 10,
    epsilon prediction, no clipping); with ``num_steps`` its timesteps are set (4 steps:
    ``[999, 759, 499, 259]``)."""
    s = LCMScheduler(**SCHEDULE, original_inference_steps=50, timestep_scaling=10.0,
                     prediction_type="epsilon", clip_sample=False)
    if num_steps is not None:
        s.set_timesteps(num_steps)
    return s


@functools.lru_cache(maxsize=1)
def _schedule() -> LCMScheduler:
    """One shared :func:`lcm_scheduler` for its constants (``alphas_cumprod``, boundary scalings)."""
    return lcm_scheduler()


def ddim_scheduler(num_steps: int = 50) -> DDIMScheduler:
    """diffusers' DDIM sampler of the teacher on :data:`SCHEDULE`, ``trailing`` spacing (50 steps:
    ``999, 979, ..., 19``, the LCM's skipping grid) and ``alpha_bar = 1`` after the last step."""
    s = DDIMScheduler(**SCHEDULE, clip_sample=False, set_alpha_to_one=True, timestep_spacing="trailing")
    s.set_timesteps(num_steps)
    return s


def make_cond_unet(res: int = 16, channels: tuple[int, ...] = (16, 32), seed: int | None = None) -> UNet2DConditionModel:
    """A tiny grayscale :class:`~diffusers.UNet2DConditionModel` epsilon-predictor for ``res x res``
    images: one resnet per level, cross-attention (to ``CROSS_DIM``-dimensional tokens) at the
    lowest level and in the middle block. ``seed`` fixes the initial weights."""
    if seed is not None:
        torch.manual_seed(seed)
    n = len(channels)
    down = ("DownBlock2D",) * (n - 1) + ("CrossAttnDownBlock2D",)
    up = ("CrossAttnUpBlock2D",) + ("UpBlock2D",) * (n - 1)
    return UNet2DConditionModel(sample_size=res, in_channels=1, out_channels=1, block_out_channels=tuple(channels),
                                layers_per_block=1, down_block_types=down, up_block_types=up,
                                cross_attention_dim=CROSS_DIM, attention_head_dim=8, norm_num_groups=8)


def null_tokens(batch: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """The teacher's constant conditioning ``(batch, NULL_TOKENS, CROSS_DIM)`` (zeros)."""
    return torch.zeros(batch, NULL_TOKENS, CROSS_DIM, device=device)


def alpha_bar(t: torch.Tensor, sched=None) -> torch.Tensor:
    """``alpha_bar_t`` of :data:`SCHEDULE` at integer timesteps ``t`` (any shape; ``t < 0`` gives 1)."""
    ab = (sched or _schedule()).alphas_cumprod.to(t.device)
    return torch.where(t < 0, torch.ones((), device=t.device), ab[t.clamp(min=0)])


def renoise(x0: torch.Tensor, t: int | torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """A draw of ``x_t ~ q(x_t | x_0) = N(sqrt(abar_t) x_0, (1 - abar_t) I)``, the noise from
    ``generator`` by diffusers' ``randn_tensor`` (the draw :class:`~diffusers.LCMScheduler` makes)."""
    t = torch.as_tensor(t, device=x0.device).reshape(-1)
    ab = alpha_bar(t).to(x0.dtype).view(-1, *([1] * (x0.dim() - 1)))
    noise = randn_tensor(x0.shape, generator=generator, device=x0.device, dtype=x0.dtype)
    return ab.sqrt() * x0 + (1 - ab).sqrt() * noise


def predict_x0(eps: torch.Tensor, x_t: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """The epsilon-parametrised clean image ``(x_t - sqrt(1 - abar_t) eps) / sqrt(abar_t)``; ``t`` ``(B,)``."""
    ab = alpha_bar(t).to(x_t.dtype).view(-1, 1, 1, 1)
    return (x_t - (1 - ab).sqrt() * eps) / ab.sqrt()


def consistency_fn(unet: UNet2DConditionModel, x_t: torch.Tensor, t: torch.Tensor,
                   tokens: torch.Tensor | None = None) -> torch.Tensor:
    """The LCM's consistency function ``f(x_t, t) = c_skip(t) x_t + c_out(t) x0_hat(x_t, t)`` with
    diffusers' boundary scalings (``c_skip(0) = 1``, ``c_out(0) = 0``, so ``f(x, 0) = x``); ``t`` ``(B,)``."""
    c_skip, c_out = _schedule().get_scalings_for_boundary_condition_discrete(t.to(x_t.dtype))
    tok = null_tokens(x_t.shape[0], x_t.device) if tokens is None else tokens
    eps = unet(x_t, t.clamp(min=0), encoder_hidden_states=tok).sample
    return c_skip.view(-1, 1, 1, 1) * x_t + c_out.view(-1, 1, 1, 1) * predict_x0(eps, x_t, t)


def ddim_step(eps: torch.Tensor, x_t: torch.Tensor, t: torch.Tensor, t_prev: torch.Tensor) -> torch.Tensor:
    """One deterministic DDIM (probability-flow ODE) step from ``t`` to ``t_prev`` per sample (``(B,)``
    each; ``t_prev < 0`` means ``alpha_bar = 1``): the teacher's solver in consistency distillation."""
    ab_prev = alpha_bar(t_prev).to(x_t.dtype).view(-1, 1, 1, 1)
    return ab_prev.sqrt() * predict_x0(eps, x_t, t) + (1 - ab_prev).sqrt() * eps


def train_teacher(unet: UNet2DConditionModel, source: ImageSource, steps: int, batch_size: int = 32,
                  lr: float = 2e-3, warmup: int = 50, seed: int = 0, stop_after: int | None = None,
                  progress: Callable | None = None) -> list[float]:
    """Train ``unet`` in place with the DDPM loss ``|| eps - eps_theta(x_t, t) ||^2`` on
    :data:`SCHEDULE` (``t`` uniform), AdamW (weight decay 0.01, clip 1), warm-up then cosine decay;
    returns the loss of every step (``stop_after`` ends early on the same schedule)."""
    device = next(unet.parameters()).device
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(unet.parameters(), lr=lr, weight_decay=0.01)
    unet.train()
    n = steps if stop_after is None else min(steps, stop_after)

    def loss_at(_: int) -> torch.Tensor:
        x0 = source(batch_size, g).to(device)
        t = torch.randint(0, SCHEDULE["num_train_timesteps"], (batch_size,), generator=g).to(device)
        eps = torch.randn(x0.shape, generator=g).to(device)
        ab = alpha_bar(t).view(-1, 1, 1, 1)
        pred = unet(ab.sqrt() * x0 + (1 - ab).sqrt() * eps, t, encoder_hidden_states=null_tokens(batch_size, device)).sample
        return F.mse_loss(pred, eps)

    losses = fit(unet.parameters(), opt, loss_at, n, lr_lambda=warmup_cosine(warmup, steps), progress=progress)
    unet.eval()
    return losses


def pseudo_huber(a: torch.Tensor, b: torch.Tensor, c: float = 1e-3) -> torch.Tensor:
    """The pseudo-Huber distance ``sqrt((a - b)^2 + c^2) - c``, averaged (LCD's loss)."""
    return (torch.sqrt((a - b).pow(2) + c * c) - c).mean()


def consistency_distill(teacher: UNet2DConditionModel, source: ImageSource, steps: int, batch_size: int = 32,
                        lr: float = 1e-4, skip: int = 20, ema: float = 0.95, huber_c: float = 1e-3,
                        seed: int = 0, stop_after: int | None = None,
                        progress: Callable | None = None) -> tuple[UNet2DConditionModel, list[float]]:
    """Latent consistency distillation (LCD, without guidance) in pixel space.

    Student and EMA target start as copies of ``teacher``. Each step draws ``t`` on the skipping grid
    ``{skip - 1, 2 skip - 1, ..., 999}``, ``x_t = sqrt(abar_t) x_0 + sqrt(1 - abar_t) eps``, takes one
    teacher DDIM step to ``t - skip`` (``alpha_bar = 1`` below 0) and minimises
    ``d(f_theta(x_t, t), f_target(x_hat_{t - skip}, t - skip))`` (pseudo-Huber ``d``); the target is an
    EMA (``ema``) of the student. Returns the target (eval mode, gradients off) and the losses.
    """
    device = next(teacher.parameters()).device
    teacher = teacher.eval().requires_grad_(False)
    student = copy.deepcopy(teacher).requires_grad_(True).train()
    target = copy.deepcopy(teacher).requires_grad_(False).eval()
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(student.parameters(), lr=lr, weight_decay=0.0)
    grid = torch.arange(1, SCHEDULE["num_train_timesteps"] // skip + 1) * skip - 1
    losses = []
    n = steps if stop_after is None else min(steps, stop_after)
    for _ in (progress(range(n)) if progress else range(n)):
        x0 = source(batch_size, g).to(device)
        t = grid[torch.randint(0, len(grid), (batch_size,), generator=g)].to(device)
        eps = torch.randn(x0.shape, generator=g).to(device)
        ab = alpha_bar(t).view(-1, 1, 1, 1)
        x_t = ab.sqrt() * x0 + (1 - ab).sqrt() * eps
        t_prev = t - skip
        with torch.no_grad():
            e_teacher = teacher(x_t, t, encoder_hidden_states=null_tokens(batch_size, device)).sample
            x_prev = ddim_step(e_teacher, x_t, t, t_prev)
            want = consistency_fn(target, x_prev, t_prev.clamp(min=0))
        loss = pseudo_huber(consistency_fn(student, x_t, t), want, huber_c)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(student.parameters(), 1.0)
        opt.step()
        with torch.no_grad():
            for p_t, p_s in zip(target.parameters(), student.parameters()):
                p_t.mul_(ema).add_(p_s.detach(), alpha=1 - ema)
        losses.append(float(loss.detach()))
    return target, losses


@torch.no_grad()
def lcm_sample(unet: UNet2DConditionModel, shape: tuple[int, ...], num_steps: int = 4,
               generator: torch.Generator | None = None, device: torch.device | str = "cpu") -> torch.Tensor:
    """The multistep LCM sampler from pure noise with diffusers' :class:`~diffusers.LCMScheduler`
    (``num_steps`` network calls); returns the last ``denoised`` ``shape``."""
    sched = lcm_scheduler(num_steps)
    x = randn_tensor(shape, generator=generator, device=torch.device(device))
    for t in sched.timesteps:
        tt = torch.full((shape[0],), int(t), device=x.device)
        eps = unet(x, tt, encoder_hidden_states=null_tokens(shape[0], x.device)).sample
        x, denoised = sched.step(eps, t, x, generator=generator, return_dict=False)
    return denoised


@torch.no_grad()
def teacher_from(unet: UNet2DConditionModel, x_t: torch.Tensor, t_start: int, eta: float,
                 generator: torch.Generator | None = None, num_steps: int = 50) -> torch.Tensor:
    """The teacher's DDIM sampler (``num_steps`` grid, ``eta = 0``: the probability-flow ODE the LCM
    distils; ``eta = 1``: ancestral, DDPM-like) started at the grid timestep ``t_start`` from ``x_t``;
    returns the clean sample (one network call per remaining grid step)."""
    sched = ddim_scheduler(num_steps)
    x = x_t
    for t in sched.timesteps[sched.timesteps <= t_start]:
        tt = torch.full((x.shape[0],), int(t), device=x.device)
        eps = unet(x, tt, encoder_hidden_states=null_tokens(x.shape[0], x.device)).sample
        x = sched.step(eps, t, x, eta=eta, generator=generator).prev_sample
    return x
