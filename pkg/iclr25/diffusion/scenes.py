"""Procedural "semantic scenes": images whose semantic style transfer has an exact answer.

Every image has three classes, ``SKY`` (above a tilted horizon), ``GROUND`` (below it) and one
``OBJECT`` standing on the ground (an ellipse or a house). What a region *is* shows in its geometry
and its texture, never in its colour: sky is a smooth vertical gradient, ground has horizontal
stripes, the object a checkerboard, and every class wears a colour drawn independently of its
class. A scene is a :class:`Layout` (geometry and texture periods: the structure) rendered with an
:class:`Appearance` (one palette per class: hue, saturation, value and shade contrast: the style),
so the exact result of transferring a reference's style onto a context is
``render(context_layout, reference_appearance)``.

Images are ``(3, res, res)`` tensors in ``[-1, 1]``; class maps are ``(res, res)`` integer tensors.
Every random draw comes from a CPU :class:`torch.Generator`, so a seed gives the same scenes on
every machine and device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

SKY, GROUND, OBJECT = 0, 1, 2
CLASSES = ("sky", "ground", "object")
"""Class names, indexed by the class ids ``SKY, GROUND, OBJECT``."""


@dataclass(frozen=True)
class Layout:
    """The structure of ``B`` scenes (each field a ``(B,)`` tensor; lengths in image fractions).

    ``horizon``: height of the horizon at the image centre (from the top); ``tilt``: its slope;
    ``obj_x``: centre of the object; ``obj_w``, ``obj_h``: its size; ``obj_drop``: how far below the
    horizon its base stands; ``house``: 1 for a house (box and roof), 0 for an ellipse;
    ``stripe``: ground stripe period and ``checker``: object checker cell, in pixels.
    """

    horizon: torch.Tensor
    tilt: torch.Tensor
    obj_x: torch.Tensor
    obj_w: torch.Tensor
    obj_h: torch.Tensor
    obj_drop: torch.Tensor
    house: torch.Tensor
    stripe: torch.Tensor
    checker: torch.Tensor

    def __len__(self) -> int:
        return self.horizon.shape[0]


@dataclass(frozen=True)
class Appearance:
    """The style of ``B`` scenes: ``hsv`` ``(B, 3 classes, 3)`` (hue, saturation, value of the first
    shade) and ``contrast`` ``(B, 3)``, the second shade's value as a fraction of the first's."""

    hsv: torch.Tensor
    contrast: torch.Tensor

    def __len__(self) -> int:
        return self.hsv.shape[0]

    def permuted(self, perm: torch.Tensor) -> "Appearance":
        """The appearance in which class ``k`` wears the palette of class ``perm[b, k]``
        (``perm`` is ``(B, 3)`` or ``(3,)``)."""
        perm = perm.expand(len(self), 3)
        idx = perm.unsqueeze(-1)
        return Appearance(self.hsv.gather(1, idx.expand(-1, -1, 3)), self.contrast.gather(1, perm))


def _uniform(n: int, lo: float, hi: float, g: torch.Generator) -> torch.Tensor:
    return lo + (hi - lo) * torch.rand(n, generator=g)


def random_layouts(n: int, g: torch.Generator) -> Layout:
    """``n`` independent layouts from the generator ``g``."""
    return Layout(horizon=_uniform(n, 0.32, 0.55, g),
                  tilt=torch.tan(math.radians(10.0) * (2 * torch.rand(n, generator=g) - 1)),
                  obj_x=_uniform(n, 0.25, 0.75, g), obj_w=_uniform(n, 0.3, 0.45, g),
                  obj_h=_uniform(n, 0.3, 0.42, g), obj_drop=_uniform(n, 0.22, 0.36, g),
                  house=(torch.rand(n, generator=g) < 0.5).float(),
                  stripe=torch.randint(3, 5, (n,), generator=g).float(),
                  checker=torch.randint(2, 4, (n,), generator=g).float())


def random_appearances(n: int, g: torch.Generator, distinct_hues: bool = False) -> Appearance:
    """``n`` appearances: a palette per class. With ``distinct_hues`` the three hues are a third of
    the colour wheel apart (up to a jitter of 0.05), so that the classes' colours differ clearly."""
    if distinct_hues:
        base = torch.rand(n, 1, generator=g)
        order = torch.argsort(torch.rand(n, 3, generator=g), dim=1).float()
        hue = (base + order / 3 + 0.05 * (2 * torch.rand(n, 3, generator=g) - 1)) % 1.0
    else:
        hue = torch.rand(n, 3, generator=g)
    sat = 0.45 + 0.45 * torch.rand(n, 3, generator=g)
    val = 0.55 + 0.4 * torch.rand(n, 3, generator=g)
    contrast = 0.5 + 0.25 * torch.rand(n, 3, generator=g)
    return Appearance(torch.stack([hue, sat, val], dim=-1), contrast)


def hsv_to_rgb(hsv: torch.Tensor) -> torch.Tensor:
    """HSV in ``[0, 1]`` to RGB in ``[0, 1]``, on the last axis (``(..., 3)`` -> ``(..., 3)``)."""
    h, s, v = hsv.unbind(-1)
    k = (torch.tensor([5.0, 3.0, 1.0], dtype=hsv.dtype, device=hsv.device) + 6 * h.unsqueeze(-1)) % 6
    return v.unsqueeze(-1) - (v * s).unsqueeze(-1) * torch.clamp(torch.minimum(k, 4 - k), 0, 1)


def class_maps(layout: Layout, res: int) -> torch.Tensor:
    """The class of every pixel, ``(B, res, res)`` with values ``SKY, GROUND, OBJECT``."""
    c = (torch.arange(res, dtype=torch.float32) + 0.5) / res
    v, u = c.view(1, res, 1), c.view(1, 1, res)             # v: down, u: right
    col = lambda t: t.view(-1, 1, 1)                        # noqa: E731 - a reshape
    horizon = col(layout.horizon) + col(layout.tilt) * (u - 0.5)
    labels = torch.where(v < horizon, SKY, GROUND)
    base = (col(layout.horizon) + col(layout.tilt) * (col(layout.obj_x) - 0.5)
            + col(layout.obj_drop)).clamp(max=0.97)
    top, half_w = base - col(layout.obj_h), col(layout.obj_w) / 2
    dx = (u - col(layout.obj_x)).abs()
    ellipse = (dx / half_w) ** 2 + ((v - (base + top) / 2) / (col(layout.obj_h) / 2)) ** 2 <= 1
    roof_base = top + 0.45 * col(layout.obj_h)
    box = (dx <= 0.8 * half_w) & (v >= roof_base) & (v <= base)
    roof = (v >= top) & (v < roof_base) & (dx <= half_w * (v - top) / (roof_base - top))
    obj = torch.where(col(layout.house) > 0.5, box | roof, ellipse)
    return torch.where(obj, OBJECT, labels)


def texture_weights(layout: Layout, res: int) -> torch.Tensor:
    """Per class and pixel, the weight of the first shade (the rest is the second): ``(B, 3, res,
    res)`` in ``[0, 1]``. Sky: a vertical gradient from the top (first shade) down to the horizon;
    ground: stripes of ``stripe`` pixels; object: a checkerboard of ``checker``-pixel cells."""
    y = torch.arange(res, dtype=torch.float32).view(1, res, 1)
    x = torch.arange(res, dtype=torch.float32).view(1, 1, res)
    col = lambda t: t.view(-1, 1, 1)                        # noqa: E731 - a reshape
    sky = (1 - (y + 0.5) / res / col(layout.horizon).clamp(min=0.1)).clamp(0, 1).expand(-1, -1, res)
    stripes = ((y % col(layout.stripe)) < col(layout.stripe) / 2).float().expand(-1, -1, res)
    checks = ((torch.div(y, col(layout.checker), rounding_mode="floor")
               + torch.div(x, col(layout.checker), rounding_mode="floor")) % 2 == 0).float()
    return torch.stack([sky, stripes, checks], dim=1)


def render(layout: Layout, appearance: Appearance, res: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Images ``(B, 3, res, res)`` in ``[-1, 1]`` and class maps ``(B, res, res)`` of the scenes
    ``layout`` painted with ``appearance`` (the two must have the same length ``B``)."""
    labels = class_maps(layout, res)
    w = texture_weights(layout, res)                                      # (B, 3, H, W)
    shade1 = hsv_to_rgb(appearance.hsv)                                   # (B, 3 classes, 3 rgb)
    dark = appearance.hsv * torch.stack([torch.ones_like(appearance.contrast),
                                         torch.ones_like(appearance.contrast),
                                         appearance.contrast], dim=-1)
    shade2 = hsv_to_rgb(dark)
    colour = (w.unsqueeze(2) * shade1[..., None, None]
              + (1 - w.unsqueeze(2)) * shade2[..., None, None])          # (B, cls, rgb, H, W)
    onehot = torch.nn.functional.one_hot(labels, 3).permute(0, 3, 1, 2).float()
    image = (onehot.unsqueeze(2) * colour).sum(1)
    return 2 * image - 1, labels


def random_scenes(n: int, res: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` random scenes (independent layouts and palettes): images ``(n, 3, res, res)`` and
    class maps ``(n, res, res)`` (the training distribution)."""
    return render(random_layouts(n, g), random_appearances(n, g), res)


def derangements(n: int, g: torch.Generator) -> torch.Tensor:
    """``n`` random derangements of the 3 classes (no class keeps its own palette): ``(n, 3)``,
    each one of the two 3-cycles."""
    cycles = torch.tensor([[1, 2, 0], [2, 0, 1]])
    return cycles[torch.randint(0, 2, (n,), generator=g)]


@dataclass(frozen=True)
class TransferPairs:
    """Context/reference pairs with their exact transfer result, all ``(B, 3, res, res)`` images
    and ``(B, res, res)`` class maps: ``context`` (layout A, palettes permuted), ``reference``
    (layout B, palettes P), ``target`` (layout A, palettes P)."""

    context: torch.Tensor
    reference: torch.Tensor
    target: torch.Tensor
    context_labels: torch.Tensor
    reference_labels: torch.Tensor
    perm: torch.Tensor

    def __len__(self) -> int:
        return self.context.shape[0]


def transfer_pairs(n: int, res: int, seed: int, permute: bool = True) -> TransferPairs:
    """``n`` test pairs for semantic style transfer, from ``seed``.

    Context and reference have independent layouts; the reference wears three palettes with hues a
    third of the wheel apart, and with ``permute`` the context wears *the same three palettes,
    deranged between its classes* (its sky has the colour of the reference's ground or object, and
    so on). Then a global colour transfer changes nearly nothing, matching by colour is always wrong
    and matching by position is wrong wherever the layouts differ: only a correspondence by *what
    the regions are* gives the target.
    """
    g = torch.Generator().manual_seed(seed)
    lay_c, lay_r = random_layouts(n, g), random_layouts(n, g)
    app_r = random_appearances(n, g, distinct_hues=True)
    perm = derangements(n, g) if permute else torch.arange(3).expand(n, 3)
    ctx, lab_c = render(lay_c, app_r.permuted(perm), res)
    ref, lab_r = render(lay_r, app_r, res)
    tgt, _ = render(lay_c, app_r, res)
    return TransferPairs(ctx, ref, tgt, lab_c, lab_r, perm)


def cast_pairs(n: int, res: int, seed: int, gain: tuple[float, float] = (0.5, 0.9),
               shift: float = 0.4) -> TransferPairs:
    """``n`` pairs whose answer is *global*: the context is the exact target under one colour cast
    per image (every RGB channel scaled by a gain drawn from ``gain`` and shifted by up to
    ``+-shift``, then clipped to ``[-1, 1]``); reference and target are those of
    ``transfer_pairs(n, res, seed, permute=False)``. A method that matches global colour or feature
    statistics can undo most of the cast without any correspondence: the task on which a global
    baseline has to show that it works at all."""
    base = transfer_pairs(n, res, seed, permute=False)
    g = torch.Generator().manual_seed(seed + 1)
    a = _uniform(3 * n, *gain, g).view(n, 3, 1, 1)
    b = _uniform(3 * n, -shift, shift, g).view(n, 3, 1, 1)
    ctx = (a * base.target + b).clamp(-1, 1)
    return TransferPairs(ctx, base.reference, base.target, base.context_labels, base.reference_labels, base.perm)


def downsample_labels(labels: torch.Tensor, size: int) -> torch.Tensor:
    """Class maps ``(B, res, res)`` at ``size x size`` (``res`` a multiple of ``size``): the most
    frequent class of each block (ties to the lower class id)."""
    onehot = torch.nn.functional.one_hot(labels, 3).permute(0, 3, 1, 2).float()
    return torch.nn.functional.adaptive_avg_pool2d(onehot, size).argmax(1)


def class_colour_error(output: torch.Tensor, target: torch.Tensor, labels: torch.Tensor,
                       n_classes: int = 3) -> torch.Tensor:
    """Per image and class, the distance between the mean colours of ``output`` and ``target``
    over that class's pixels (``labels``, the context's class map): ``(B, n_classes)`` in RGB units
    of ``[0, 1]`` (images are in ``[-1, 1]``); NaN for a class the image lacks. Zero for the exact
    transfer result whatever its texture."""
    onehot = torch.nn.functional.one_hot(labels, n_classes).permute(0, 3, 1, 2).to(output)  # (B, K, H, W)
    n = onehot.sum((2, 3))                                                               # (B, K)
    mean = lambda im: torch.einsum("bchw,bkhw->bkc", im, onehot) / n.clamp(min=1).unsqueeze(-1)  # noqa: E731
    err = (mean(output) - mean(target)).norm(dim=-1) / 2
    return torch.where(n > 0, err, torch.full_like(err, float("nan")))


def sobel_magnitude(images: torch.Tensor) -> torch.Tensor:
    """Gradient magnitude (Sobel filters, replicate padding) summed over colour channels:
    ``(B, C, H, W)`` -> ``(B, H, W)``."""
    kx = torch.tensor([[-1.0, 0.0, 1.0], [-2.0, 0.0, 2.0], [-1.0, 0.0, 1.0]], dtype=images.dtype,
                      device=images.device)
    k = torch.stack([kx, kx.T]).unsqueeze(1)                                 # (2, 1, 3, 3)
    b, c, h, w = images.shape
    x = torch.nn.functional.pad(images.reshape(b * c, 1, h, w), (1, 1, 1, 1), mode="replicate")
    gx, gy = torch.nn.functional.conv2d(x, k).unbind(1)
    return (gx**2 + gy**2).sqrt().view(b, c, h, w).sum(1)


def structure_score(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Pearson correlation of the Sobel edge maps of ``output`` and ``target`` ``(B, 3, H, W)``,
    per image ``(B,)``: 1 when the edges are where the target's are, whatever their colours."""
    a, b = sobel_magnitude(output).flatten(1), sobel_magnitude(target).flatten(1)
    a, b = a - a.mean(1, keepdim=True), b - b.mean(1, keepdim=True)
    return (a * b).sum(1) / (a.norm(dim=1) * b.norm(dim=1)).clamp(min=1e-12)


def psnr(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Peak signal-to-noise ratio in dB of images in ``[-1, 1]`` (peak-to-peak 2), per image ``(B,)``."""
    mse = (output - target).pow(2).flatten(1).mean(1)
    return 10 * torch.log10(4 / mse.clamp(min=1e-12))
