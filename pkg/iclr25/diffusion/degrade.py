"""The blind-restoration degradation (blur, downsampling, noise, JPEG, upsampling) of faces in ``[-1, 1]``.

The degradation is a small-image version of the CodeFormer pipeline InterLCM trains on,
``x_LQ = up_r(JPEG_q(down_r(x * k_sigma) + n_delta))``.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class Degradation:
    """One degradation: Gaussian blur ``sigma`` (pixels), downsampling factor ``r`` (>= 1), additive
    Gaussian noise ``noise`` (std on the ``[0, 1]`` scale) and JPEG quality ``jpeg`` (1-100)."""

    sigma: float
    r: float
    noise: float
    jpeg: int


#: Ranges of the random degradations (the brief's scaled CodeFormer ranges: downsampling up to 4 x):
#: ``mild`` and ``severe`` are the lower and upper halves of every training range.
SEVERITY = {"train": dict(sigma=(0.3, 2.0), r=(1.0, 4.0), noise=(0.0, 0.08), jpeg=(40, 95)),
            "mild": dict(sigma=(0.3, 1.15), r=(1.0, 2.5), noise=(0.0, 0.04), jpeg=(68, 95)),
            "severe": dict(sigma=(1.15, 2.0), r=(2.5, 4.0), noise=(0.04, 0.08), jpeg=(40, 67))}


def random_degradation(rng: np.random.Generator, severity: str = "train") -> Degradation:
    """A degradation drawn uniformly from the ranges ``SEVERITY[severity]``."""
    s = SEVERITY[severity]
    return Degradation(sigma=float(rng.uniform(*s["sigma"])), r=float(rng.uniform(*s["r"])),
                       noise=float(rng.uniform(*s["noise"])), jpeg=int(rng.integers(s["jpeg"][0], s["jpeg"][1] + 1)))


def gaussian_kernel(sigma: float, size: int = 5) -> torch.Tensor:
    """A normalised ``(size, size)`` isotropic Gaussian kernel of standard deviation ``sigma``."""
    ax = torch.arange(size, dtype=torch.float64) - (size - 1) / 2
    k = torch.exp(-ax ** 2 / (2 * sigma ** 2))
    k = torch.outer(k, k)
    return (k / k.sum()).float()


def jpeg(img01: np.ndarray, quality: int) -> np.ndarray:
    """JPEG round trip of a grayscale image ``(H, W)`` in ``[0, 1]`` through 8 bits (PIL)."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.clip(np.round(img01 * 255), 0, 255).astype(np.uint8), mode="L").save(
        buf, format="JPEG", quality=int(quality))
    buf.seek(0)
    return np.asarray(Image.open(buf), dtype=np.float32) / 255


def degrade(x: torch.Tensor, d: Degradation, rng: np.random.Generator) -> torch.Tensor:
    """Degrade one image ``(1, H, W)`` in ``[-1, 1]`` with ``d``: blur, bilinear downsampling to
    ``round(H / r)``, noise drawn from ``rng``, JPEG, bilinear upsampling back to ``H x W``."""
    h, w = x.shape[-2:]
    y = (x[None].float().cpu() + 1) / 2
    y = F.conv2d(F.pad(y, (2, 2, 2, 2), mode="replicate"), gaussian_kernel(d.sigma)[None, None])
    size = (max(2, round(h / d.r)), max(2, round(w / d.r)))
    y = F.interpolate(y, size=size, mode="bilinear", antialias=True, align_corners=False)
    y = y + torch.from_numpy(rng.normal(0, d.noise, size=y.shape).astype(np.float32))
    y = torch.from_numpy(jpeg(y[0, 0].clamp(0, 1).numpy(), d.jpeg))[None, None]
    y = F.interpolate(y, size=(h, w), mode="bilinear", align_corners=False)
    return (y[0].clamp(0, 1) * 2 - 1).to(x.device)


def degrade_batch(x: torch.Tensor, rng: np.random.Generator, severity: str = "train") -> torch.Tensor:
    """Each image of ``x`` ``(B, 1, H, W)`` degraded by its own random degradation of ``severity``."""
    return torch.stack([degrade(xi, random_degradation(rng, severity), rng) for xi in x])
