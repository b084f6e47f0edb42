"""Real faces and the blind-restoration degradation (blur, downsampling, noise, JPEG, upsampling).

The faces are the 100 face crops of :func:`skimage.data.lfw_subset` (shipped inside the
scikit-image wheel, no download), grayscale, resized and scaled to ``[-1, 1]``. The degradation is a
small-image version of the CodeFormer pipeline InterLCM trains on,
``x_LQ = up_r(JPEG_q(down_r(x * k_sigma) + n_delta))``.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F


def lfw_faces(res: int = 16) -> torch.Tensor:
    """The 100 LFW face crops of ``skimage.data.lfw_subset()`` as ``(100, 1, res, res)`` float32
    in ``[-1, 1]`` (area-resized from 25 x 25)."""
    from skimage.data import lfw_subset

    faces = torch.from_numpy(np.asarray(lfw_subset()[:100], dtype=np.float32))[:, None]
    if res != faces.shape[-1]:
        faces = F.interpolate(faces, size=(res, res), mode="bilinear", antialias=True, align_corners=False)
    return (faces.clamp(0, 1) * 2 - 1).contiguous()


def face_split(n: int = 100, n_val: int = 10, n_test: int = 20, seed: int = 0) -> dict[str, np.ndarray]:
    """A fixed random split of the ``n`` face indices into ``train``, ``val`` and ``test`` (disjoint)."""
    perm = np.random.default_rng(seed).permutation(n)
    return {"test": np.sort(perm[:n_test]), "val": np.sort(perm[n_test:n_test + n_val]),
            "train": np.sort(perm[n_test + n_val:])}


def augment(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """Random horizontal flips, shifts of up to one pixel (edge-replicated) and gamma in
    ``[0.8, 1.25]`` of a batch ``(B, 1, H, W)`` in ``[-1, 1]``, drawn from the CPU generator ``g``."""
    b = x.shape[0]
    flip = torch.rand(b, generator=g) < 0.5
    x = torch.where(flip[:, None, None, None], x.flip(-1), x)
    shifts = torch.randint(-1, 2, (b, 2), generator=g)
    pad = F.pad(x, (1, 1, 1, 1), mode="replicate")
    h, w = x.shape[-2:]
    x = torch.stack([pad[i, :, 1 + int(dy):1 + int(dy) + h, 1 + int(dx):1 + int(dx) + w]
                     for i, (dy, dx) in enumerate(shifts)])
    gamma = torch.exp(torch.empty(b).uniform_(np.log(0.8), np.log(1.25), generator=g))
    return ((x + 1) / 2).clamp(0, 1).pow(gamma[:, None, None, None]) * 2 - 1


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
