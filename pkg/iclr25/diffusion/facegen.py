"""A procedural face generator: every face is a parameter vector (its *identity*), rendered in grayscale.

A face is drawn from 20 independent uniform parameters (head shape and position, skin and background tone,
hair line and darkness, eye position, spacing, size and darkness, brow height, thickness and tilt, nose
length, mouth position, width, smile and thickness, and a lighting gradient) and rendered with soft edges
at four times the target resolution, then area-downsampled (anti-aliased). Because identities are drawn
afresh from a generator, a model trained on this stream never sees a face twice, and validation and test
identities (drawn from their own seeds, :data:`SPLIT_SEEDS`) are people no model has seen: the data set
cannot be memorised, unlike a few dozen real faces.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

#: name -> (low, high) of each identity parameter (coordinates in ``[-1, 1]``, ``y`` pointing down;
#: tones in ``[0, 1]``).
PARAMS = {
    "cx": (-0.08, 0.08), "cy": (-0.02, 0.1), "head_w": (0.5, 0.72), "head_h": (0.68, 0.88),
    "skin": (0.45, 0.9), "bg": (0.0, 0.45), "hair": (0.0, 0.35), "hairline": (-0.6, -0.25),
    "eye_y": (-0.22, 0.0), "eye_dx": (0.22, 0.4), "eye_r": (0.07, 0.13), "eye_dark": (0.0, 0.25),
    "brow_dy": (0.12, 0.22), "brow_t": (0.03, 0.08), "brow_tilt": (-0.35, 0.35),
    "nose_len": (0.12, 0.3), "mouth_y": (0.32, 0.55), "mouth_w": (0.12, 0.3), "smile": (-0.15, 0.2),
    "light": (-0.3, 0.3),
}
#: Generator seeds of the fixed identity sets (training draws come from the training generator instead).
SPLIT_SEEDS = {"val": 10_001, "test": 20_002, "reference": 30_003}


def draw_identities(n: int, generator: torch.Generator) -> torch.Tensor:
    """``(n, len(PARAMS))`` identity parameters, uniform in the ranges of :data:`PARAMS`."""
    lo = torch.tensor([v[0] for v in PARAMS.values()])
    hi = torch.tensor([v[1] for v in PARAMS.values()])
    return lo + (hi - lo) * torch.rand(n, len(PARAMS), generator=generator)


def _soft(d: torch.Tensor, sharp: float) -> torch.Tensor:
    """Soft indicator of ``d < 0`` (a signed distance), ``sharp`` per unit of coordinate."""
    return torch.sigmoid(-sharp * d)


def render(params: torch.Tensor, res: int = 16, oversample: int = 4) -> torch.Tensor:
    """Faces ``(n, 1, res, res)`` in ``[-1, 1]`` of identity parameters ``params`` ``(n, len(PARAMS))``."""
    p = {k: params[:, i].view(-1, 1, 1) for i, k in enumerate(PARAMS)}
    r = res * oversample
    ax = (torch.arange(r, dtype=torch.float32) + 0.5) / r * 2 - 1
    y, x = ax.view(1, r, 1), ax.view(1, 1, r)
    sharp = 3.0 * r                                          # about a third of a fine pixel of edge blur
    X, Y = x - p["cx"], y - p["cy"]
    head = _soft(torch.sqrt((X / p["head_w"]) ** 2 + (Y / p["head_h"]) ** 2) - 1, sharp * 0.6)
    img = p["bg"] * (1 - head) + p["skin"] * (1 + p["light"] * X) * head
    # hair: the part of the (slightly enlarged) head above the hair line
    hair_region = _soft(torch.sqrt((X / (p["head_w"] + 0.06)) ** 2 + ((Y + 0.04) / (p["head_h"] + 0.06)) ** 2) - 1,
                        sharp * 0.6) * _soft(Y - p["hairline"] - 0.08 * X ** 2 * 4, sharp)
    img = img * (1 - hair_region) + p["hair"] * hair_region
    for side in (-1.0, 1.0):
        ex, ey = side * p["eye_dx"], p["eye_y"]
        eye = _soft(torch.sqrt((X - ex) ** 2 + ((Y - ey) / 0.7) ** 2) - p["eye_r"], sharp)
        img = img * (1 - eye) + p["eye_dark"] * eye
        by = ey - p["brow_dy"] + side * p["brow_tilt"] * (X - ex) * 0.5
        brow = _soft((X - ex).abs() - p["eye_r"] * 1.4, sharp) * _soft((Y - by).abs() - p["brow_t"] / 2, sharp)
        img = img * (1 - 0.8 * brow) + 0.8 * p["hair"] * brow
    nose_top, nose_bot = p["eye_y"] + 0.08, p["eye_y"] + 0.08 + p["nose_len"]
    nose = _soft(X.abs() - 0.035, sharp) * _soft(Y - nose_bot, sharp) * _soft(nose_top - Y, sharp)
    img = img * (1 - 0.35 * nose)
    my = p["mouth_y"] - p["smile"] * (1 - (X / p["mouth_w"]) ** 2)
    mouth = _soft(X.abs() - p["mouth_w"], sharp) * _soft((Y - my).abs() - 0.04, sharp)
    img = img * (1 - 0.7 * mouth)
    img = F.avg_pool2d(img[:, None], oversample)
    return (img.clamp(0, 1) * 2 - 1).contiguous()


def faces(n: int, split: str, res: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    """The fixed identity set ``split`` (``val``, ``test`` or ``reference``): ``(faces, params)``."""
    params = draw_identities(n, torch.Generator().manual_seed(SPLIT_SEEDS[split]))
    return render(params, res), params


def face_stream(res: int = 16):
    """``source(n, g)``: ``n`` faces of fresh identities drawn from the generator ``g`` (training)."""
    return lambda n, g: render(draw_identities(n, g), res)
