"""Alignment that pushes the harmful loss *up* (gradient ascent with a cap): Booster's level control.

``f(w) - gamma * min(h(w), cap)`` trains refusals and, until the harmful loss ``h`` reaches
``cap``, ascends it. It raises the *level* of ``h`` the attack starts from without ever
simulating an attack step, the ingredient Booster adds; it is also the naive harmful-aware
alignment baseline (a cheap stand-in for RepNoise's ascent term).
"""

from __future__ import annotations

import torch


def clipped_ascent_loss(f: torch.Tensor, h: torch.Tensor, gamma: float, cap: float) -> torch.Tensor:
    """``f - gamma * min(h, cap)``: the ascent term stops pushing (zero gradient) once ``h >= cap``."""
    return f - gamma * torch.clamp(h, max=cap)
