"""The prompt search space: candidate tokens (PMI) and the random projection of BBT/ZO-PoG."""

from __future__ import annotations

import math
from collections import Counter
from typing import Sequence

import torch


def pmi_scores(texts: Sequence[Sequence[str]], labels: Sequence[int]) -> dict[str, float]:
    """max_y PMI(w, y) = max_y log p(w, y) / (p(w) p(y)) over documents (presence counts).

    ``texts[i]`` is a list of words with label ``labels[i]``. A word seen in one document only
    gets no score (its PMI is pure noise).
    """
    if len(texts) != len(labels):
        raise ValueError(f"{len(texts)} texts but {len(labels)} labels")
    n = len(texts)
    n_y = Counter(int(y) for y in labels)
    n_w: Counter[str] = Counter()
    n_wy: Counter[tuple[str, int]] = Counter()
    for words, y in zip(texts, labels):
        for w in set(words):
            n_w[w] += 1
            n_wy[w, int(y)] += 1
    return {w: max(math.log(n_wy[w, y] * n / (c * n_y[y])) for y in n_y if n_wy[w, y] > 0)
            for w, c in n_w.items() if c >= 2}


def pmi_candidates(texts: Sequence[Sequence[str]], labels: Sequence[int], k: int, *,
                   exclude: Sequence[str] = ()) -> list[str]:
    """The ``k`` words with the highest label PMI (ties broken alphabetically), as in the
    paper's task-specific candidate lists."""
    scores = pmi_scores(texts, labels)
    ranked = sorted((w for w in scores if w not in set(exclude)), key=lambda w: (-scores[w], w))
    return ranked[:k]


def random_projection(n_pos: int, embed_dim: int, d: int, embedding_std: float, *,
                      alpha: float = 100.0, sigma: float = 1.0,
                      generator: torch.Generator | None = None) -> torch.Tensor:
    """BBT's fixed random projection A ∈ R^{(n·D)×d}, entries N(0, s²), s = α σ̂_E / (√d σ).

    The prompt offset of a low-dimensional z is ``(A @ z).view(n_pos, embed_dim)``; with this
    scale a smoothing step μ·u (u ~ N(0, I_d)) moves each prompt embedding coordinate by about
    α μ σ̂_E / σ.
    """
    if min(n_pos, embed_dim, d) < 1:
        raise ValueError("n_pos, embed_dim and d must be positive")
    s = alpha * embedding_std / (math.sqrt(d) * sigma)
    return torch.randn(n_pos * embed_dim, d, generator=generator) * s
