"""Inverting images into a diffusion model's noise, and sampling back from it.

Edit-friendly DDPM inversion (Huberman-Spiegelglas et al., CVPR 2024): draw *independent* noisy
versions ``x_t = sqrt(abar_t) x0 + sqrt(1 - abar_t) eps_t`` of the image at every sampling step's
timestep, then store the noise map that makes each stochastic (DDIM ``eta = 1``) step land exactly on
the next noisy version,

    z_t = (x_{t_prev} - mu_theta(x_t, t)) / sigma_t .

Sampling from ``x_{t_S}`` with the stored ``z`` then reproduces the image up to round-off, for *any*
model; guidance that changes the noise prediction along the way edits the image instead. DDIM
(``eta = 0``) inversion, the deterministic alternative, is here for comparison: it reconstructs only
as well as the model's ODE is locally linear.

Trajectories are ``(S + 1, B, C, H, W)`` tensors in sampling order: ``xs[0] = x_{t_S}`` (the start),
``xs[i]`` the input of step ``i`` at timestep ``sched.timesteps[i]``, ``xs[S] = x0``. Noise maps are
``(S, B, C, H, W)``, ``zs[i]`` the noise of step ``i``.
"""

from __future__ import annotations

from typing import Callable

import torch
from diffusers import DDIMScheduler, UNet2DModel

EpsFn = Callable[[torch.Tensor, int, int], torch.Tensor]
"""``eps_fn(x_t, t, i) -> eps`` (``(B, C, H, W)``): the noise prediction used at step ``i``."""


def unet_eps(unet: UNet2DModel) -> EpsFn:
    """The plain noise prediction of ``unet``, without gradients: ``eps_fn(x, t, i)``."""
    @torch.no_grad()
    def eps_fn(x: torch.Tensor, t: int, i: int) -> torch.Tensor:
        return unet(x, t).sample
    return eps_fn


def prev_timestep(sched: DDIMScheduler, t: int) -> int:
    """The timestep a DDIM step from ``t`` lands on (negative after the last step)."""
    return int(t) - sched.config.num_train_timesteps // sched.num_inference_steps


def alpha_bar(sched: DDIMScheduler, t: int) -> torch.Tensor:
    """``abar_t`` of the scheduler, and its final value (``final_alpha_cumprod``) for ``t < 0``."""
    return sched.alphas_cumprod[int(t)] if t >= 0 else sched.final_alpha_cumprod


def step_sigma(sched: DDIMScheduler, t: int) -> float:
    """The noise level of a stochastic (``eta = 1``) DDIM step from ``t``, i.e. the DDPM posterior's
    standard deviation ``sigma_t^2 = (1 - abar_prev) / (1 - abar_t) * (1 - abar_t / abar_prev)``."""
    a_t, a_prev = alpha_bar(sched, t), alpha_bar(sched, prev_timestep(sched, t))
    return float(((1 - a_prev) / (1 - a_t) * (1 - a_t / a_prev)).sqrt())


def posterior_mean(sched: DDIMScheduler, eps: torch.Tensor, t: int, x: torch.Tensor) -> torch.Tensor:
    """``mu_theta(x_t, t)``: the stochastic DDIM step from ``x`` with noise prediction ``eps`` and
    zero noise (``(B, C, H, W)``)."""
    return sched.step(eps, t, x, eta=1.0, variance_noise=torch.zeros_like(x)).prev_sample


def noisy_versions(sched: DDIMScheduler, x0: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """Independent noisy versions of ``x0`` at every sampling timestep, plus ``x0`` itself:
    ``(S + 1, B, C, H, W)`` in sampling order. The noise comes from the CPU generator ``g``."""
    xs = []
    for t in sched.timesteps:
        eps = torch.randn(x0.shape, generator=g).to(x0)
        a = alpha_bar(sched, int(t))
        xs.append(a.sqrt().to(x0) * x0 + (1 - a).sqrt().to(x0) * eps)
    return torch.stack(xs + [x0])


def ddpm_invert(unet: UNet2DModel, sched: DDIMScheduler, x0: torch.Tensor, g: torch.Generator,
                eps_fn: EpsFn | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Edit-friendly DDPM inversion of images ``x0`` ``(B, C, H, W)``.

    Returns the trajectory ``xs`` ``(S + 1, B, C, H, W)`` (independent noisy versions of ``x0``, see
    :func:`noisy_versions`) and the noise maps ``zs`` ``(S, B, C, H, W)`` with
    ``xs[i + 1] = mu(xs[i], t_i) + sigma_{t_i} zs[i]``, so that :func:`sample_with_noises` from
    ``xs[0]`` returns ``x0``. ``eps_fn`` defaults to the plain U-Net (:func:`unet_eps`).
    """
    eps_fn = eps_fn or unet_eps(unet)
    xs = noisy_versions(sched, x0, g)
    zs = []
    for i, t in enumerate(sched.timesteps):
        t = int(t)
        mu = posterior_mean(sched, eps_fn(xs[i], t, i), t, xs[i])
        zs.append((xs[i + 1] - mu) / step_sigma(sched, t))
    return xs, torch.stack(zs)


def sample_with_noises(unet: UNet2DModel, sched: DDIMScheduler, x_start: torch.Tensor,
                       zs: torch.Tensor, eps_fn: EpsFn | None = None,
                       progress: Callable | None = None) -> torch.Tensor:
    """Stochastic DDIM (``eta = 1``) sampling from ``x_start`` ``(B, C, H, W)`` at the first
    timestep, with the given noise maps ``zs`` ``(S, B, C, H, W)`` instead of fresh noise; returns the
    sample ``(B, C, H, W)``. With the noise maps of :func:`ddpm_invert` and the plain U-Net this is
    the inverted image; an ``eps_fn`` that adds guidance edits it."""
    eps_fn = eps_fn or unet_eps(unet)
    x = x_start
    steps = list(enumerate(sched.timesteps))
    for i, t in (progress(steps) if progress else steps):
        t = int(t)
        eps = eps_fn(x, t, i).detach()
        x = sched.step(eps, t, x, eta=1.0, variance_noise=zs[i]).prev_sample
    return x


@torch.no_grad()
def ddim_invert(unet: UNet2DModel, sched: DDIMScheduler, x0: torch.Tensor) -> torch.Tensor:
    """Deterministic DDIM inversion: run the ``eta = 0`` update backwards, from ``x0`` to the first
    timestep, with the noise prediction at the *current* (lower-noise) point, the usual
    approximation. Returns ``x_{t_S}`` ``(B, C, H, W)``; :func:`ddim_sample` maps it back to
    (approximately) ``x0``."""
    x = x0
    ts = [int(t) for t in sched.timesteps]
    for t in reversed(ts):
        t_prev = prev_timestep(sched, t)
        a_t, a_prev = alpha_bar(sched, t).to(x0), alpha_bar(sched, t_prev).to(x0)
        eps = unet(x, max(t_prev, 0)).sample
        x0_hat = (x - (1 - a_prev).sqrt() * eps) / a_prev.sqrt()
        x = a_t.sqrt() * x0_hat + (1 - a_t).sqrt() * eps
    return x


@torch.no_grad()
def ddim_sample(unet: UNet2DModel, sched: DDIMScheduler, x_start: torch.Tensor) -> torch.Tensor:
    """Deterministic DDIM (``eta = 0``) sampling from ``x_start`` at the first timestep."""
    x = x_start
    for t in sched.timesteps:
        x = sched.step(unet(x, int(t)).sample, int(t), x, eta=0.0).prev_sample
    return x
