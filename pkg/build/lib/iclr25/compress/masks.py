"""Pruning masks: unstructured per-row, N:M / C_4^n semi-structured, magnitude and Wanda scores.

Conventions (every function of :mod:`iclr25.compress`):

* a weight ``W`` has the torch ``nn.Linear`` layout ``(out_features, in_features)``: row ``i`` holds
  the weights of output ``i``; the *input* dimension is the last one;
* a mask is a ``bool`` tensor shaped like ``W`` with ``True`` where the weight is **kept**, so the
  pruned weight is ``W * mask``;
* a *score* ranks the weights of one comparison group (a row, or a group of ``m`` contiguous inputs
  of a row); the lowest scores are pruned. Ties are broken by position (the earlier weight goes
  first), with a stable sort, so a mask is the same on every device;
* a ``pattern`` is ``None`` or ``"unstructured"`` (prune ``floor(sparsity * in_features)`` weights
  of every row), ``"n:m"`` such as ``"2:4"`` (in every group of ``m`` contiguous inputs of every row
  prune exactly ``n``), or ``("c4n", n)``, the C_4^n pattern of the SSM-sparsity paper (``n:4``).
"""

from __future__ import annotations

import math
from typing import Union

import torch
from torch import Tensor

Pattern = Union[None, str, tuple[str, int]]
"""A sparsity pattern: ``None``/``"unstructured"``, ``"n:m"`` (e.g. ``"2:4"``) or ``("c4n", n)``."""

_EPS = 1e-9  # floor(s * d + eps): 0.29 * 100 -> 29, not 28 (binary round-off of s)


def parse_pattern(pattern: Pattern) -> tuple[int, int] | None:
    """``(n, m)`` for an N:M pattern (prune ``n`` of every ``m``), ``None`` for unstructured.

    >>> parse_pattern("2:4"), parse_pattern(("c4n", 3)), parse_pattern("unstructured")
    ((2, 4), (3, 4), None)
    """
    if pattern is None or pattern == "unstructured":
        return None
    if isinstance(pattern, str) and ":" in pattern:
        n_str, m_str = pattern.split(":", 1)
        n, m = int(n_str), int(m_str)
    elif isinstance(pattern, tuple) and len(pattern) == 2 and pattern[0] == "c4n":
        n, m = int(pattern[1]), 4
    else:
        raise ValueError(f"unknown sparsity pattern {pattern!r}; use None, 'unstructured', "
                         "'n:m' (e.g. '2:4') or ('c4n', n)")
    if m < 1 or not 0 <= n <= m:
        raise ValueError(f"pattern {pattern!r} needs 0 <= n <= m and m >= 1")
    return n, m


def pattern_sparsity(pattern: Pattern, sparsity: float | None = None) -> float:
    """The sparsity a pattern imposes (``n / m``), checked against ``sparsity`` when both are given.

    For an unstructured pattern ``sparsity`` is required and returned; for N:M it may be omitted,
    and a given value must equal ``n / m`` (a mismatch raises ``ValueError``, never silently wins).
    """
    nm = parse_pattern(pattern)
    if nm is None:
        if sparsity is None:
            raise ValueError("an unstructured pattern needs a sparsity in [0, 1]")
        if not 0.0 <= sparsity <= 1.0:
            raise ValueError(f"sparsity must lie in [0, 1], got {sparsity}")
        return float(sparsity)
    s = nm[0] / nm[1]
    if sparsity is not None and abs(sparsity - s) > 1e-9:
        raise ValueError(f"pattern {pattern!r} has sparsity {s}, but sparsity={sparsity} was given")
    return s


def n_pruned(d: int, sparsity: float) -> int:
    """How many of ``d`` weights an unstructured group prunes: ``floor(sparsity * d)`` (as Wanda)."""
    return min(d, math.floor(sparsity * d + _EPS))


def _prune_lowest(scores: Tensor, k: int) -> Tensor:
    """Keep-mask over the last dim of ``scores (..., d)`` that drops the ``k`` lowest of each slice
    (ties: the earlier position is dropped first)."""
    order = torch.sort(scores, dim=-1, stable=True).indices  # ascending: lowest first
    rank = torch.empty_like(order)
    rank.scatter_(-1, order, torch.arange(scores.shape[-1], device=scores.device).expand_as(order))
    return rank >= k


def unstructured_mask(scores: Tensor, sparsity: float) -> Tensor:
    """Keep-mask that prunes the ``floor(sparsity * d)`` lowest scores of every row.

    ``scores (..., d)`` -> ``bool (..., d)``; every row has exactly that many ``False`` entries.
    """
    pattern_sparsity(None, sparsity)  # validates the range
    return _prune_lowest(scores, n_pruned(scores.shape[-1], sparsity))


def nm_mask(scores: Tensor, n: int, m: int) -> Tensor:
    """N:M keep-mask: in every group of ``m`` contiguous entries of the last dim, drop the ``n`` lowest.

    ``scores (..., d)`` with ``d`` divisible by ``m`` -> ``bool (..., d)``. Groups are
    ``{m g, ..., m g + m - 1}`` (aligned to the start of the row), so each holds exactly ``m - n``
    kept entries.
    """
    d = scores.shape[-1]
    if m < 1 or not 0 <= n <= m:
        raise ValueError(f"N:M needs 0 <= n <= m, got n={n}, m={m}")
    if d % m:
        raise ValueError(f"the last dim ({d}) must be divisible by m={m} for an {n}:{m} pattern")
    grouped = scores.reshape(*scores.shape[:-1], d // m, m)
    return _prune_lowest(grouped, n).reshape(scores.shape)


def c4n_mask(scores: Tensor, n: int) -> Tensor:
    """C_4^n keep-mask: in every group of 4 contiguous inputs of every row, zero the ``n`` lowest.

    ``scores (out, in)`` (any leading dims) with ``in % 4 == 0`` -> ``bool`` of the same shape;
    ``n`` in {0, 1, 2, 3, 4}; ``n = 2`` is NVIDIA's 2:4 pattern.
    """
    return nm_mask(scores, n, 4)


def mask_from_scores(scores: Tensor, sparsity: float | None, pattern: Pattern = None) -> Tensor:
    """Keep-mask of ``scores (out, in)`` for any :data:`Pattern` (the dispatcher the pruners share).

    Unstructured: :func:`unstructured_mask` per row; N:M: :func:`nm_mask` (``sparsity`` optional,
    must equal ``n / m`` if given).
    """
    s = pattern_sparsity(pattern, sparsity)
    nm = parse_pattern(pattern)
    return unstructured_mask(scores, s) if nm is None else nm_mask(scores, *nm)


def magnitude_mask(W: Tensor, sparsity: float | None, pattern: Pattern = None, *,
                   per_row: bool = True) -> Tensor:
    """Magnitude pruning: keep the largest ``|W_ij|`` of every comparison group.

    ``W (out, in)`` -> ``bool (out, in)``. Groups are rows (unstructured, default) or N:M groups.
    ``per_row=False`` (unstructured only) compares the whole matrix at once instead, as the Wanda
    repository's magnitude baseline does; it prunes exactly ``floor(sparsity * W.numel())``.
    """
    scores = W.detach().abs()
    if per_row:
        return mask_from_scores(scores, sparsity, pattern)
    if parse_pattern(pattern) is not None:
        raise ValueError("per_row=False is only defined for unstructured pruning")
    return unstructured_mask(scores.reshape(-1), pattern_sparsity(pattern, sparsity)).reshape(W.shape)


def input_norms(X: Tensor) -> Tensor:
    """``||X_{:,j}||_2`` for calibration inputs ``X (..., in)`` (all leading dims are tokens) -> ``(in,)``.

    Accumulated in float64 so that many tokens do not lose digits.
    """
    return X.detach().reshape(-1, X.shape[-1]).double().pow(2).sum(0).sqrt()


def wanda_scores(W: Tensor, X: Tensor) -> Tensor:
    """Wanda importance ``S_ij = |W_ij| * ||X_{:,j}||_2`` (Sun et al., 2024, eq. 1).

    ``W (out, in)``, calibration inputs ``X (n, in)`` (or ``(batch, seq, in)``) -> ``(out, in)``,
    in float64 (on ``W``'s device).
    """
    if X.shape[-1] != W.shape[-1]:
        raise ValueError(f"X has {X.shape[-1]} features, W has {W.shape[-1]} inputs")
    return W.detach().abs().double() * input_norms(X).to(W.device)


def wanda_mask(W: Tensor, X: Tensor, sparsity: float | None, pattern: Pattern = None) -> Tensor:
    """Wanda pruning mask: keep the highest ``|W_ij| ||X_:,j||`` within each output row (or N:M group).

    ``W (out, in)``, ``X (n, in)`` -> ``bool (out, in)``. No weight update (apply with ``W * mask``).
    """
    return mask_from_scores(wanda_scores(W, X), sparsity, pattern)


def sparsity_of(W: Tensor, dim: int | None = None) -> Tensor:
    """Fraction of exact zeros of ``W`` (over all entries, or along ``dim``), as float64."""
    zeros = (W == 0).double()
    return zeros.mean() if dim is None else zeros.mean(dim)
