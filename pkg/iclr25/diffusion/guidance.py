"""Energy guidance of a diffusion sampler: steer every denoising step down an energy's gradient.

With the noise prediction ``eps_theta(x_t, t)`` the score is ``-eps_theta / sqrt(1 - abar_t)``, so
adding ``eta_t grad E(x_t)`` to the noise prediction adds ``-eta_t grad E / sqrt(1 - abar_t)`` to the
score: sampling is tilted towards low energy, and the predicted clean image
``x0_hat = (x_t - sqrt(1 - abar_t) eps) / sqrt(abar_t)`` moves *down* the energy. The energy may be
any differentiable function of the U-Net's intermediate features (read with
:class:`~iclr25.diffusion.features.FeatureHook`) and of ``x_t``.
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch
from diffusers import UNet2DModel

from iclr25.diffusion.features import FeatureHook

Energy = Callable[[dict, torch.Tensor], torch.Tensor]
"""``energy(features, x_t) -> (B,)``: one energy per sample, from the hooked features (a dict
name -> tensor) and the input ``x_t`` ``(B, C, H, W)``."""


def block_rms(g: torch.Tensor, block: int) -> torch.Tensor:
    """The RMS of ``g`` ``(B, C, H, W)`` over each ``block x block`` block of pixels and the channels:
    ``(B, 1, H / block, W / block)``."""
    return torch.nn.functional.avg_pool2d(g.pow(2).mean(1, keepdim=True), block).sqrt()


def normalised(g: torch.Tensor, floor: float | torch.Tensor, block: int = 0) -> torch.Tensor:
    """``g / max(rms(g), floor)``: a unit-RMS direction, except that a gradient smaller than ``floor``
    is scaled by ``1 / floor`` and so stays small (below the floor the step is plain gradient descent
    with gain ``1 / floor``, never an amplified round-off). ``floor`` is a number or ``(B,)``: one per
    sample. ``block = 0``: one RMS per sample ``b`` of ``g`` ``(B, ...)``; ``block = k``: one RMS per
    ``k x k`` block of pixels of ``g`` ``(B, C, H, W)`` (:func:`block_rms`), so that every block
    (region) above the floor moves by the same amount whatever the other blocks' gradients are."""
    floor = torch.as_tensor(floor, dtype=g.dtype, device=g.device).reshape(-1, *([1] * (g.dim() - 1)))
    if block:
        rms = torch.nn.functional.interpolate(block_rms(g, block), size=g.shape[-2:], mode="nearest")
        return g / torch.maximum(rms, floor)
    rms = g.flatten(1).pow(2).mean(1).sqrt().view(-1, *([1] * (g.dim() - 1)))
    return g / torch.maximum(rms, floor)


def energy_and_gradient(unet: UNet2DModel, x_t: torch.Tensor, t: int, energy: Energy,
                        names: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One forward pass of ``unet`` on ``x_t`` ``(B, C, H, W)`` at timestep ``t`` with the layers
    ``names`` hooked; returns the noise prediction ``(B, C, H, W)``, the energies ``(B,)`` and
    ``grad_{x_t} sum_b E_b`` ``(B, C, H, W)`` (each sample's gradient is its own energy's as long as
    the network treats samples independently, as a U-Net with group norm does)."""
    x = x_t.detach().requires_grad_(True)
    with torch.enable_grad(), FeatureHook(unet, names) as feats:
        eps = unet(x, t).sample
        e = energy(feats, x)
        (g,) = torch.autograd.grad(e.sum(), x)
    return eps.detach(), e.detach(), g


def smoothed(g: torch.Tensor, width: int) -> torch.Tensor:
    """``g`` ``(B, C, H, W)`` averaged over ``width x width`` windows (odd ``width``, borders averaged
    over the pixels inside): a low-passed gradient moves colours of regions rather than single pixels.
    ``width = 1`` returns ``g``."""
    if width <= 1:
        return g
    return torch.nn.functional.avg_pool2d(g, width, 1, width // 2, count_include_pad=False)


def low_passed(g: torch.Tensor, smooth: int | torch.Tensor = 1) -> torch.Tensor:
    """``g`` ``(B, C, H, W)`` low-passed by :func:`smoothed` with window ``smooth`` (a number, or ``(B,)``
    integers: one per sample)."""
    if isinstance(smooth, torch.Tensor):
        widths = smooth.to(g.device).view(-1, *([1] * (g.dim() - 1)))
        return sum(torch.where(widths == w, smoothed(g, int(w)), torch.zeros_like(g)) for w in smooth.unique().tolist())
    return smoothed(g, smooth)

