"""Occupancy metrics from dataset-level confusion matrices (Occ3D / OccWorld style)."""

from __future__ import annotations

import torch


def occ_confusion(pred: torch.Tensor, gt: torch.Tensor, n_classes: int,
                  mask: torch.Tensor | None = None) -> torch.Tensor:
    """Confusion matrix (n_classes, n_classes), rows = ground truth, of class-id tensors
    ``pred`` and ``gt`` (any matching shape), over the voxels where ``mask`` is true."""
    p, g = pred.reshape(-1).long(), gt.reshape(-1).long()
    if mask is not None:
        m = mask.reshape(-1)
        p, g = p[m], g[m]
    return torch.bincount(g * n_classes + p, minlength=n_classes ** 2).reshape(n_classes, n_classes).cpu()


def iou_per_class(hist: torch.Tensor) -> torch.Tensor:
    """Per-class IoU ``|P & G| / |P | G|`` (float64, NaN for a class absent from both)."""
    h = hist.double()
    inter = torch.diag(h)
    union = h.sum(0) + h.sum(1) - inter
    return torch.where(union > 0, inter / union.clamp_min(1), torch.full_like(inter, float("nan")))


def miou_from_confusion(hist: torch.Tensor, free: int = 0) -> float:
    """Mean IoU in percent over the classes other than ``free`` (NaN classes skipped)."""
    iou = iou_per_class(hist)
    keep = torch.ones(len(iou), dtype=torch.bool)
    keep[free] = False
    return float(100 * iou[keep].nanmean())


def binary_iou_from_confusion(hist: torch.Tensor, free: int = 0) -> float:
    """IoU in percent of the occupied-vs-free split (every non-free class merged)."""
    h = hist.double()
    tp = h.sum() - h[free].sum() - h[:, free].sum() + h[free, free]
    fp = h[free].sum() - h[free, free]
    fn = h[:, free].sum() - h[free, free]
    return float(100 * tp / (tp + fp + fn))
