"""Composing interventions and the paper's composability metrics.

An :class:`Intervention` is a named in-place function of a model with a *category*
(``"edit"``, ``"compress"``, ``"unlearn"``). :func:`compose` applies a sequence to a copy of a
model with the rule of the paper's code: when there are two or more interventions and the first
is a compression, the compression is applied again at the end, so that the final model is
compressed (compress -> X -> compress).

The metrics of the paper (its order-free error and order sensitivity), for a metric ``m`` of the
model after ``A -> B`` and after ``B -> A``:

* higher-is-better ``m`` in [0, 1] (edit success, utility accuracy):
  ``E_OF = 1 - max(m_AB, m_BA)``, ``E_OS = |m_AB - m_BA|``;
* lower-is-better ``m`` (forget accuracy after unlearning): ``E_OF = min(m_AB, m_BA)``, same ``E_OS``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Callable, Sequence

import torch
from torch import Tensor

from iclr25.compress import (apply_mask_, collect_inputs, magnitude_mask, prune_layers_, prune_linear_, quantize_linear_,
                             wanda_mask)
from iclr25.lm.hooks import transformer_linears
from iclr25.lm.model import TinyLM

CATEGORIES = ("edit", "compress", "unlearn")


@dataclass(frozen=True)
class Intervention:
    """A named in-place intervention ``apply(model)`` of a ``category`` in :data:`CATEGORIES`."""

    name: str
    category: str
    apply: Callable[[TinyLM], object]

    def __post_init__(self) -> None:
        if self.category not in CATEGORIES:
            raise ValueError(f"category must be one of {CATEGORIES}, got {self.category!r}")


def compose(model: TinyLM, interventions: Sequence[Intervention], *, recompress: bool = True) -> TinyLM:
    """A deep copy of ``model`` after ``interventions`` in order; when ``recompress`` and the
    first of two or more is a compression, it is applied once more at the end (the paper's code)."""
    m = copy.deepcopy(model)
    for iv in interventions:
        iv.apply(m)
    if recompress and len(interventions) >= 2 and interventions[0].category == "compress":
        interventions[0].apply(m)
    return m


def order_free_error(m_ab: float, m_ba: float, higher_is_better: bool = True) -> float:
    """The paper's order-free error: the error of the better order, ``1 - max(m_AB, m_BA)``
    (``min(m_AB, m_BA)`` for a lower-is-better metric)."""
    return 1.0 - max(m_ab, m_ba) if higher_is_better else min(m_ab, m_ba)


def order_sensitivity(m_ab: float, m_ba: float) -> float:
    """The paper's order sensitivity ``|m_AB - m_BA|``."""
    return abs(m_ab - m_ba)


# ------------------------------------------------------------------ compression as interventions

def _select(model: TinyLM, layers: Sequence[int] | None) -> dict:
    lin = transformer_linears(model)
    if layers is None:
        return lin
    keep = tuple(f"blocks.{l}." for l in layers)
    return {n: m for n, m in lin.items() if n.startswith(keep)}


def prune_model_(model: TinyLM, method: str, sparsity: float, calib_ids: Tensor | None = None,
                 layers: Sequence[int] | None = None, calib_mask: Tensor | None = None) -> None:
    """Prune every linear inside the selected blocks (all by default; embeddings and unembedding
    untouched), unstructured per output row, in place. ``"magnitude"`` needs no data; ``"wanda"``
    and ``"sparsegpt"`` calibrate each linear on ``calib_ids`` with the earlier linears already
    pruned (sequential, as the Wanda code). With ``calib_mask`` (B, T; nonzero at real tokens,
    e.g. ``ids != pad``), Wanda's input norms and SparseGPT's Hessian are taken over those tokens only (padding
    excluded, as the official code's unpadded calibration sequences)."""
    lin = _select(model, layers)
    if sparsity <= 0:
        return
    if method == "magnitude":
        for m in lin.values():
            apply_mask_(m, magnitude_mask(m.weight.detach(), sparsity))
        return
    dev = next(model.parameters()).device
    ids = calib_ids.to(dev)
    if method == "wanda" and calib_mask is not None:
        keep = calib_mask.to(dev).reshape(-1).bool()
        for m in lin.values():                       # sequential: inputs after the earlier prunings
            X = collect_inputs(m, lambda: model(ids))[keep]
            apply_mask_(m, wanda_mask(m.weight.detach(), X, sparsity))
        return
    if method == "sparsegpt" and calib_mask is not None:
        keep = calib_mask.to(dev).reshape(-1).bool()
        for m in lin.values():                       # sequential, the Hessian X^T X over the real tokens only
            prune_linear_(m, "sparsegpt", sparsity, X=collect_inputs(m, lambda: model(ids))[keep])
        return
    prune_layers_(lin, method, sparsity, run=lambda: model(ids), sequential=True)


def quantize_model_(model: TinyLM, bits: int, group_size: int = 32, symmetric: bool = False,
                    layers: Sequence[int] | None = None) -> None:
    """Round-to-nearest fake quantization of every linear inside the selected blocks (groups of
    ``group_size`` inputs, asymmetric by default, ``symmetric=True``: zero point 0), in place;
    biases stay in full precision."""
    for m in _select(model, layers).values():
        quantize_linear_(m, bits, min(group_size, m.in_features), symmetric=symmetric)


def compressor(method: str, strength: float, calib_ids: Tensor | None = None,
               layers: Sequence[int] | None = None, calib_mask: Tensor | None = None) -> Intervention:
    """A compression :class:`Intervention`: ``method`` in ``("magnitude", "wanda", "sparsegpt")``
    with sparsity ``strength`` (Wanda and SparseGPT calibrated on the unpadded tokens of
    ``calib_ids`` when ``calib_mask`` is given), or ``"rtn"`` with ``strength`` bits (group 32, asymmetric)."""
    if method == "rtn":
        return Intervention(f"RTN{int(strength)}", "compress",
                            lambda m: quantize_model_(m, int(strength), layers=layers))
    return Intervention(f"{method}{strength:g}", "compress",
                        lambda m: prune_model_(m, method, strength, calib_ids, layers, calib_mask))


def gptq_model_(model: TinyLM, bits: int, calib_ids: Tensor, calib_mask: Tensor, group_size: int = 32,
                layers: Sequence[int] | None = None) -> None:
    """GPTQ fake quantization (:func:`iclr25.compress.obs.gptq_quantize`: groups of ``group_size`` inputs,
    asymmetric, as :func:`quantize_model_`) of every linear inside the selected blocks, in place, each
    calibrated on its inputs over the real tokens (``calib_mask``) of ``calib_ids`` with the earlier linears
    already quantized (sequential, as SparseGPT here); biases stay in full precision."""
    dev = next(model.parameters()).device
    ids, keep = calib_ids.to(dev), calib_mask.to(dev).reshape(-1).bool()
    for m in _select(model, layers).values():
        X = collect_inputs(m, lambda: model(ids))[keep]
        quantize_linear_(m, bits, min(group_size, m.in_features), method="gptq", X=X)


def gptq_compressor(bits: int, calib_ids: Tensor, calib_mask: Tensor,
                    layers: Sequence[int] | None = None) -> Intervention:
    """GPTQ at ``bits`` (:func:`gptq_model_`) as a compression :class:`Intervention`."""
    return Intervention(f"GPTQ{int(bits)}", "compress", lambda m: gptq_model_(m, int(bits), calib_ids, calib_mask,
                                                                              layers=layers))


@torch.no_grad()
def same_weights(a: TinyLM, b: TinyLM) -> bool:
    """Whether two models have bit-identical parameters."""
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
