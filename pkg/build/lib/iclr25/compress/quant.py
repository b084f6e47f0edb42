"""Round-to-nearest (RTN) weight quantization on a per-channel or per-group grid.

A weight ``W (out, in)`` is cut into groups of ``group_size`` contiguous inputs of each row
(``group_size=None``: one group per row, i.e. per output channel). Each group gets a uniform grid

* asymmetric (default): ``scale = (max - min) / (2^b - 1)``, integer ``zero = round(-min / scale)``,
  codes ``q = clamp(round(w / scale) + zero, 0, 2^b - 1)``, value ``(q - zero) * scale``;
* symmetric: ``scale = max|w| / (2^(b-1) - 1)``, ``zero = 0``, codes in ``[-(2^(b-1) - 1), 2^(b-1) - 1]``
  (the restricted range, so the grid is symmetric about 0; needs ``bits >= 2``).

As in GPTQ's quantizer, the range of a group always contains 0 (``min <= 0 <= max``): zero is on
every grid, so a pruned weight stays exactly 0 after quantization. An all-zero group gets scale 1.
Rounding is torch's (half to even). Every value then lies within half a step of its weight.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor


class QuantGrid(NamedTuple):
    """The grid of :func:`rtn_grid`: ``scale`` and integer-valued ``zero``, both ``(out, n_groups)``."""

    scale: Tensor
    zero: Tensor
    bits: int
    group_size: int
    symmetric: bool

    @property
    def qmin(self) -> int:
        """Smallest code."""
        return -(2 ** (self.bits - 1) - 1) if self.symmetric else 0

    @property
    def qmax(self) -> int:
        """Largest code."""
        return 2 ** (self.bits - 1) - 1 if self.symmetric else 2**self.bits - 1


def _groups(W: Tensor, group_size: int | None) -> tuple[Tensor, int]:
    """``W (out, in)`` viewed as ``(out, in // g, g)``, and ``g``."""
    if W.ndim != 2:
        raise ValueError(f"expected a weight (out, in), got shape {tuple(W.shape)}")
    g = W.shape[1] if group_size is None else int(group_size)
    if g < 1 or W.shape[1] % g:
        raise ValueError(f"group_size={group_size} must divide in_features={W.shape[1]}")
    return W.reshape(W.shape[0], W.shape[1] // g, g), g


def _check_bits(bits: int, symmetric: bool) -> None:
    if int(bits) != bits or bits < (2 if symmetric else 1) or bits > 16:
        raise ValueError(f"bits must be an integer in [{2 if symmetric else 1}, 16], got {bits}")


def rtn_grid(W: Tensor, bits: int, group_size: int | None = None, symmetric: bool = False) -> QuantGrid:
    """Fit the RTN grid of every group of ``W (out, in)`` -> :class:`QuantGrid` (``(out, in // g)``).

    Computed in ``W``'s floating dtype (float32 for half types) on ``W``'s device.
    """
    _check_bits(bits, symmetric)
    Wg, g = _groups(W.detach(), group_size)
    Wg = Wg.to(torch.promote_types(W.dtype, torch.float32))
    lo = Wg.amin(-1).clamp(max=0)
    hi = Wg.amax(-1).clamp(min=0)
    if symmetric:
        scale = torch.maximum(-lo, hi) / (2 ** (bits - 1) - 1)
    else:
        scale = (hi - lo) / (2**bits - 1)
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    zero = torch.zeros_like(scale) if symmetric else torch.round(-lo / scale)
    return QuantGrid(scale, zero, int(bits), g, bool(symmetric))


def quantize_codes(W: Tensor, grid: QuantGrid) -> Tensor:
    """Integer codes ``(out, in)`` (int32) of ``W`` on ``grid``: ``clamp(round(w / s) + z, qmin, qmax)``."""
    Wg, _ = _groups(W.detach(), grid.group_size)
    s, z = grid.scale.unsqueeze(-1), grid.zero.unsqueeze(-1)
    q = torch.clamp(torch.round(Wg.to(s.dtype) / s) + z, grid.qmin, grid.qmax)
    return q.reshape(W.shape).to(torch.int32)


def dequantize(codes: Tensor, grid: QuantGrid, dtype: torch.dtype | None = None) -> Tensor:
    """Values ``(q - zero) * scale`` of ``codes (out, in)`` on ``grid``, in ``dtype`` (default: the grid's)."""
    qg, _ = _groups(codes, grid.group_size)
    s, z = grid.scale.unsqueeze(-1), grid.zero.unsqueeze(-1)
    W = ((qg.to(s.dtype) - z) * s).reshape(codes.shape)
    return W if dtype is None else W.to(dtype)


def rtn_quantize(W: Tensor, bits: int, group_size: int | None = None, symmetric: bool = False) -> Tensor:
    """Round-to-nearest fake quantization: ``W (out, in)`` -> its grid values, same shape and dtype.

    ``group_size=None`` is per-channel (one grid per output row). ``|W - Q(W)| <= scale / 2``,
    ``Q(Q(W)) = Q(W)`` (same codes, values equal up to round-off of the refitted scale), and
    ``Q(W) = W`` when ``W`` already lies on a grid that spans each group's range.
    """
    grid = rtn_grid(W, bits, group_size, symmetric)
    return dequantize(quantize_codes(W, grid), grid, W.dtype)


def quantization_step(W: Tensor, bits: int, group_size: int | None = None,
                      symmetric: bool = False) -> Tensor:
    """The grid step of every weight: ``scale`` of its group broadcast to ``W``'s shape ``(out, in)``.

    Useful to predict which small edits ``Delta`` survive re-quantization (``|Delta| < step / 2``).
    """
    grid = rtn_grid(W, bits, group_size, symmetric)
    return grid.scale.repeat_interleave(grid.group_size, dim=1)
