"""Forecasting metrics as the TS-LIF / SeqSNN code computes them (``common/function.py``).

Both take the targets and predictions of a test set, windows first: ``(N, horizon, C)`` or any
shape whose first axis indexes the windows, on the data's scale (after undoing the per-window
normalisation).
"""

from __future__ import annotations

import numpy as np
import torch


def _np(x: np.ndarray | torch.Tensor) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().numpy()
    return np.asarray(x, dtype=np.float64)


def r2_score(y: np.ndarray | torch.Tensor, y_hat: np.ndarray | torch.Tensor) -> float:
    """R^2 over all entries flattened: ``1 - sum (y_hat - y)^2 / sum (y - mean(y))^2``
    (``sklearn.metrics.r2_score`` on the flattened arrays, one global mean)."""
    y, y_hat = _np(y).ravel(), _np(y_hat).ravel()
    return float(1 - ((y_hat - y) ** 2).sum() / ((y - y.mean()) ** 2).sum())


def rse(y: np.ndarray | torch.Tensor, y_hat: np.ndarray | torch.Tensor) -> float:
    """Root relative squared error ``sqrt(sum (y_hat - y)^2) / sqrt(sum (y - ybar)^2)`` where ``ybar``
    is the mean over windows of each output column (horizon step x channel), as SeqSNN's ``rrse``."""
    y, y_hat = _np(y), _np(y_hat)
    y2, y_hat2 = y.reshape(len(y), -1), y_hat.reshape(len(y), -1)
    return float(np.sqrt(((y_hat2 - y2) ** 2).sum()) / np.sqrt(((y2 - y2.mean(axis=0)) ** 2).sum()))
