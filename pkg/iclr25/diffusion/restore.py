"""Blind face restoration with a frozen diffusion or consistency model: InterLCM and its baselines.

A :class:`Restorer` is InterLCM's pair of trainable encoders around a *frozen* U-Net: a visual
encoder (the low-quality image to cross-attention tokens, standing in for CLIP + the paper's visual
encoder) and a spatial encoder (a :class:`~diffusers.ControlNetModel` made from the U-Net, fed the
low-quality image). :func:`interlcm_restore` is the paper's sampler: the low-quality image *is* the
LCM's first-step output, re-noised to the next timestep, then the remaining LCM steps run with the
encoders. :func:`diffusion_restore` is a DiffBIR-style 50-step DDIM restorer with the same encoders.
"""

from __future__ import annotations

import copy
from typing import Callable

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from diffusers import ControlNetModel, UNet2DConditionModel, UNet2DModel
from diffusers.utils.torch_utils import randn_tensor

from iclr25.common.optim import fit, warmup_cosine
from iclr25.diffusion.consistency import (CROSS_DIM, NULL_TOKENS, SCHEDULE, alpha_bar, ddim_scheduler,
                                          lcm_scheduler, null_tokens)


class VisualEncoder(nn.Module):
    """Low-quality image ``(B, 1, H, W)`` to ``(B, NULL_TOKENS, CROSS_DIM)`` tokens: two strided
    convolutions and a linear map whose weights start at zero, so the tokens start as the teacher's
    null tokens."""

    def __init__(self, res: int = 16, width: int = 16):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(1, width, 3, 2, 1), nn.SiLU(), nn.Conv2d(width, width, 3, 2, 1), nn.SiLU(),
                                 nn.Flatten())
        self.out = nn.Linear(width * ((res + 3) // 4) ** 2, NULL_TOKENS * CROSS_DIM)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def forward(self, lq: torch.Tensor) -> torch.Tensor:
        return self.out(self.net(lq)).view(-1, NULL_TOKENS, CROSS_DIM)


class Restorer(nn.Module):
    """InterLCM's trainable encoders for a frozen ``unet``: ``visual`` (:class:`VisualEncoder`) and
    ``spatial`` (``ControlNetModel.from_unet(unet)`` conditioned on the low-quality image; its zero
    convolutions make the restorer start as the frozen model with null tokens).

    Attributes
    ----------
    visual : VisualEncoder
        Tokens for the U-Net's and the ControlNet's cross-attention.
    spatial : diffusers.ControlNetModel
        Residuals added to the U-Net's skip connections and middle block.
    """

    def __init__(self, unet: UNet2DConditionModel, seed: int = 0, visual: bool = True, spatial: bool = True):
        super().__init__()
        torch.manual_seed(seed)
        res = unet.config.sample_size
        self.visual = VisualEncoder(res) if visual else None
        self.spatial = (ControlNetModel.from_unet(unet, conditioning_channels=1,
                                                  conditioning_embedding_out_channels=(16,)) if spatial else None)

    def eps(self, unet: UNet2DConditionModel, x_t: torch.Tensor, t: torch.Tensor, lq: torch.Tensor) -> torch.Tensor:
        """``eps_theta(x_t, t; lq)``: the frozen ``unet`` with this restorer's tokens and residuals; ``t`` ``(B,)``."""
        tok = self.visual(lq) if self.visual is not None else null_tokens(x_t.shape[0], x_t.device)
        if self.spatial is None:
            return unet(x_t, t, encoder_hidden_states=tok).sample
        down, mid = self.spatial(x_t, t, encoder_hidden_states=tok, controlnet_cond=lq, return_dict=False)
        return unet(x_t, t, encoder_hidden_states=tok, down_block_additional_residuals=down,
                    mid_block_additional_residual=mid).sample


def interlcm_restore(unet: UNet2DConditionModel, restorer: Restorer | None, lq: torch.Tensor, start: int = 1,
                     num_steps: int = 4, generator: torch.Generator | None = None) -> torch.Tensor:
    """InterLCM's sampler with diffusers' :class:`~diffusers.LCMScheduler` (``num_steps`` timesteps,
    4: ``[999, 759, 499, 259]``).

    ``start >= 1``: the low-quality image ``lq`` ``(B, 1, H, W)`` is taken as the ``denoised`` output
    of step ``start - 1`` and re-noised to ``timesteps[start]`` (``q(x_t | lq)``, noise from
    ``generator``), then steps ``start .. num_steps - 1`` run (``num_steps - start`` network calls).
    ``start = 0``: the ordinary LCM sampler from pure noise (``num_steps`` calls), ``lq`` entering only
    through the encoders. ``restorer = None`` is the zero-shot model. Differentiable in the restorer.
    """
    sched = lcm_scheduler(num_steps)
    ts = sched.timesteps
    if start == 0:
        x = randn_tensor(lq.shape, generator=generator, device=lq.device, dtype=lq.dtype)
    else:
        noise = randn_tensor(lq.shape, generator=generator, device=lq.device, dtype=lq.dtype)
        ab = alpha_bar(torch.as_tensor(int(ts[start]), device=lq.device)).to(lq.dtype)
        x = ab.sqrt() * lq + (1 - ab).sqrt() * noise
        sched.set_begin_index(start)
    denoised = lq
    for t in ts[start:]:
        tt = torch.full((lq.shape[0],), int(t), device=lq.device)
        eps = (restorer.eps(unet, x, tt, lq) if restorer is not None
               else unet(x, tt, encoder_hidden_states=null_tokens(lq.shape[0], lq.device)).sample)
        x, denoised = sched.step(eps, t, x, generator=generator, return_dict=False)
    return denoised


def diffusion_restore(unet: UNet2DConditionModel, restorer: Restorer | None, lq: torch.Tensor, num_steps: int = 50,
                      t_start: int | None = None, generator: torch.Generator | None = None) -> torch.Tensor:
    """A DiffBIR-style restorer: the teacher ``unet`` with the encoders, sampled by deterministic DDIM
    on a ``num_steps`` grid, from pure noise (``t_start = None``) or from ``lq`` re-noised to the
    grid timestep ``t_start`` (SDEdit start); one network call per grid step used."""
    sched = ddim_scheduler(num_steps)
    ts = sched.timesteps
    noise = randn_tensor(lq.shape, generator=generator, device=lq.device, dtype=lq.dtype)
    if t_start is None:
        x = noise
    else:
        ts = ts[ts <= t_start]
        ab = alpha_bar(torch.as_tensor(int(ts[0]), device=lq.device)).to(lq.dtype)
        x = ab.sqrt() * lq + (1 - ab).sqrt() * noise
    for t in ts:
        tt = torch.full((lq.shape[0],), int(t), device=lq.device)
        eps = (restorer.eps(unet, x, tt, lq) if restorer is not None
               else unet(x, tt, encoder_hidden_states=null_tokens(lq.shape[0], lq.device)).sample)
        x = sched.step(eps, t, x, eta=0.0).prev_sample
    return x


class PerceptualLoss(nn.Module):
    """An LPIPS-style distance from a frozen network's features: the teacher U-Net's down-block and
    middle-block activations on the *clean* image at timestep ``t`` (20), unit-normalised over
    channels, squared differences averaged per layer (over channels and pixels) and summed. Used for training only: evaluation
    never uses this network."""

    def __init__(self, unet: UNet2DConditionModel, t: int = 20):
        super().__init__()
        self.unet = copy.deepcopy(unet).eval().requires_grad_(False)
        self.t = t
        self._feats: list[torch.Tensor] = []
        for block in list(self.unet.down_blocks) + [self.unet.mid_block]:
            block.register_forward_hook(self._hook)

    def _hook(self, module, inputs, output) -> None:
        self._feats.append(output[0] if isinstance(output, tuple) else output)

    def features(self, x: torch.Tensor) -> list[torch.Tensor]:
        """Unit-normalised feature maps of images ``x`` ``(B, 1, H, W)``."""
        self._feats = []
        tt = torch.full((x.shape[0],), self.t, device=x.device)
        self.unet(x, tt, encoder_hidden_states=null_tokens(x.shape[0], x.device))
        feats, self._feats = self._feats, []
        return [f / (f.pow(2).sum(1, keepdim=True).sqrt() + 1e-6) for f in feats]

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():                  # the target's features need no graph (same values)
            fb = self.features(b)
        return sum(((fa - f) ** 2).mean() for fa, f in zip(self.features(a), fb))


def regression_unet(res: int = 16, channels: tuple[int, ...] = (16, 32), seed: int = 0) -> UNet2DModel:
    """The non-generative reference: a :class:`~diffusers.UNet2DModel` mapping the low-quality image to
    a residual correction (called at ``t = 0``)."""
    torch.manual_seed(seed)
    return UNet2DModel(sample_size=res, in_channels=1, out_channels=1, block_out_channels=channels,
                       layers_per_block=1, down_block_types=("DownBlock2D",) * len(channels),
                       up_block_types=("UpBlock2D",) * len(channels), norm_num_groups=8)


def regress(model: UNet2DModel, lq: torch.Tensor) -> torch.Tensor:
    """The regression U-Net's restoration ``lq + model(lq, 0)``."""
    return lq + model(lq, torch.zeros(lq.shape[0], device=lq.device, dtype=torch.long)).sample


def train_restorer(loss_fn: Callable[[torch.Tensor, torch.Tensor, torch.Generator], torch.Tensor],
                   params, pairs: Callable[[int, torch.Generator], tuple[torch.Tensor, torch.Tensor]],
                   steps: int, batch_size: int = 16, lr: float = 5e-4, seed: int = 0,
                   stop_after: int | None = None, progress: Callable | None = None,
                   warmup: int | None = None, on_step: Callable[[int], None] | None = None) -> list[float]:
    """Adam (betas (0.9, 0.99) as the paper, gradient norm clipped at 1) on ``loss_fn(hq, lq, generator)``
    over fresh ``(hq, lq)`` pairs from ``pairs(batch_size, generator)``; returns the loss of every step.

    The learning rate is ``lr`` throughout (``warmup = None``) or a linear warm-up over ``warmup`` steps
    and a cosine decay to 0 at ``steps`` (:func:`~iclr25.common.optim.warmup_cosine`). ``on_step(s)``,
    if given, is called before step ``s`` (e.g. a validation curve; it must not draw from the training
    generator, so the training run is the same with or without it)."""
    params = [p for p in params if p.requires_grad]
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(params, lr=lr, betas=(0.9, 0.99))
    n = steps if stop_after is None else min(steps, stop_after)

    def loss_at(s: int) -> torch.Tensor:
        if on_step is not None:
            on_step(s)
        return loss_fn(*pairs(batch_size, g), g)
    return fit(params, opt, loss_at, n, progress=progress,
               lr_lambda=None if warmup is None else warmup_cosine(warmup, steps))


def eps_loss(unet: UNet2DConditionModel, restorer: Restorer, hq: torch.Tensor, lq: torch.Tensor,
             g: torch.Generator) -> torch.Tensor:
    """The conditional diffusion loss ``|| eps - eps_theta(x_t, t; lq) ||^2`` (``t`` uniform): how a
    diffusion restorer's encoders are trained (DiffBIR's stage-2 loss; no loss through the sampler)."""
    t = torch.randint(0, SCHEDULE["num_train_timesteps"], (hq.shape[0],), generator=g).to(hq.device)
    eps = torch.randn(hq.shape, generator=g).to(hq.device)
    ab = alpha_bar(t).view(-1, 1, 1, 1)
    return F.mse_loss(restorer.eps(unet, ab.sqrt() * hq + (1 - ab).sqrt() * eps, t, lq), eps)


def psnr(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """PSNR in dB of images in ``[-1, 1]`` (peak-to-peak 2), per image ``(B,)``."""
    mse = (a - b).pow(2).flatten(1).mean(1)
    return 10 * torch.log10(4 / mse.clamp(min=1e-12))


class Eigenfaces:
    """The identity proxy (a stand-in for ArcFace): PCA codes (``k`` components fitted on the faces passed in,
    the chapter's reference faces, :class:`sklearn.decomposition.PCA`); identity similarity is the cosine of the
    codes."""

    def __init__(self, train: torch.Tensor, k: int = 16):
        from sklearn.decomposition import PCA

        self.pca = PCA(n_components=k, random_state=0).fit(train.flatten(1).cpu().double().numpy())

    def codes(self, x: torch.Tensor) -> np.ndarray:
        """``(B, k)`` codes of images ``(B, 1, H, W)``."""
        return self.pca.transform(x.detach().flatten(1).cpu().double().numpy())

    def cos(self, a: torch.Tensor, b: torch.Tensor) -> np.ndarray:
        """Per-image cosine similarity ``(B,)`` of the codes of ``a`` and ``b``."""
        ca, cb = self.codes(a), self.codes(b)
        return (ca * cb).sum(1) / (np.linalg.norm(ca, axis=1) * np.linalg.norm(cb, axis=1) + 1e-12)


def frechet(codes_a: np.ndarray, codes_b: np.ndarray) -> float:
    """Fréchet distance between the Gaussians fitted to two code sets ``(n, k)`` (rows are samples, unbiased
    covariances): ``|m_a - m_b|^2 + tr(C_a + C_b - 2 (C_a C_b)^{1/2})``, the formula of FID; FD* is this on
    eigenface codes. Biased upward at small ``n``: compare values computed at the same sample size."""
    from scipy.linalg import sqrtm

    ma, mb = codes_a.mean(0), codes_b.mean(0)
    ca, cb = np.cov(codes_a, rowvar=False), np.cov(codes_b, rowvar=False)
    cross = sqrtm(ca @ cb).real
    return float(((ma - mb) ** 2).sum() + np.trace(ca + cb - 2 * cross))


def ssim(a: torch.Tensor, b: torch.Tensor) -> np.ndarray:
    """Per-image SSIM ``(B,)`` of images in ``[-1, 1]`` (:func:`skimage.metrics.structural_similarity`,
    7 x 7 window, data range 2)."""
    from skimage.metrics import structural_similarity

    a, b = a.detach().cpu().double().numpy(), b.detach().cpu().double().numpy()
    return np.array([structural_similarity(x[0], y[0], data_range=2.0, win_size=7) for x, y in zip(a, b)])
