"""A word-level tokenizer: a fixed list of words <-> integer ids.

The toy languages of :mod:`iclr25.lm.language` are generated word by word, so a word-level
vocabulary is exact (no unknown words) and every id has a readable meaning, which makes the
prompts that black-box optimisers find easy to print.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

import torch

PAD, BOS, EOS = "<pad>", "<bos>", "<eos>"
SPECIALS = (PAD, BOS, EOS)


@dataclass(frozen=True)
class Vocab:
    """A word-level vocabulary. ``words[0:3]`` are ``<pad> <bos> <eos>``.

    Parameters
    ----------
    words : sequence of str
        The words, without the specials (they are prepended); duplicates are an error.
    """

    words: tuple[str, ...]
    _index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __init__(self, words: Iterable[str]) -> None:
        ws = tuple(SPECIALS) + tuple(w for w in words if w not in SPECIALS)
        if len(set(ws)) != len(ws):
            dup = sorted({w for w in ws if ws.count(w) > 1})
            raise ValueError(f"duplicate words in vocabulary: {dup}")
        object.__setattr__(self, "words", ws)
        object.__setattr__(self, "_index", {w: i for i, w in enumerate(ws)})

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: str) -> bool:
        return word in self._index

    @property
    def pad_id(self) -> int:
        return 0

    @property
    def bos_id(self) -> int:
        return 1

    @property
    def eos_id(self) -> int:
        return 2

    def id(self, word: str) -> int:
        """The id of one word; ``ValueError`` naming the word if it is not in the vocabulary."""
        try:
            return self._index[word]
        except KeyError:
            raise ValueError(f"word {word!r} is not in the vocabulary") from None

    def encode(self, text: str | Sequence[str]) -> list[int]:
        """Ids of a whitespace-separated string or of a list of words."""
        tokens = text.split() if isinstance(text, str) else list(text)
        return [self.id(w) for w in tokens]

    def decode(self, ids: Iterable[int], *, skip_pad: bool = True) -> str:
        """The words of ``ids`` joined by spaces (``<pad>`` dropped unless ``skip_pad=False``)."""
        out = []
        for i in ids:
            i = int(i)
            if skip_pad and i == self.pad_id:
                continue
            out.append(self.words[i])
        return " ".join(out)


def pad_batch(seqs: Sequence[Sequence[int]], pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad id lists into a batch.

    Returns
    -------
    ids : LongTensor, shape (B, T_max)
    lengths : LongTensor, shape (B,)
        The true length of each sequence (so ``ids[b, lengths[b]-1]`` is its last token).
    """
    if len(seqs) == 0:
        raise ValueError("pad_batch needs at least one sequence")
    lengths = torch.tensor([len(s) for s in seqs], dtype=torch.long)
    ids = torch.full((len(seqs), int(lengths.max())), pad_id, dtype=torch.long)
    for b, s in enumerate(seqs):
        ids[b, : len(s)] = torch.as_tensor(list(s), dtype=torch.long)
    return ids, lengths
