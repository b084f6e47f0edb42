"""Prompt/response examples and their encoding into padded batches with a loss mask.

Every task of the world (a fact probe, a chat exchange, a preference candidate, a review) is an
:class:`Example`: a *prompt* (words, without ``<bos>``) and a *response* (words; chat responses
end with ``<eos>``). :func:`encode_examples` turns a list of them into a :class:`SeqBatch`
``<bos> prompt response`` whose ``mask`` marks the response tokens, the only ones a
response log-probability, an answer-masked loss or DPO scores.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

from iclr25.lm.vocab import BOS, Vocab, pad_batch

Words = tuple[str, ...]


@dataclass(frozen=True)
class Example:
    """A prompt and a response, as words.

    ``prompt`` excludes ``<bos>`` (encoding adds it); ``response`` is scored/trained on and
    includes ``<eos>`` where the model should stop. ``kind`` names the task (``"fact"``,
    ``"refusal"``, ``"harmful"``, ``"recipe"``, ``"sentiment"``, ...); ``meta`` holds what the
    generator knows (subject, relation, template, label, entity ...), documented where made.
    """

    prompt: Words
    response: Words
    kind: str = ""
    meta: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def text(self) -> Words:
        """``prompt + response``."""
        return self.prompt + self.response


@dataclass(frozen=True)
class MCItem:
    """A multiple-choice probe: the model's next token after ``prompt`` is compared among
    ``choices`` (single words, one correct at index ``answer``; chance ``1/len(choices)``)."""

    prompt: Words
    choices: Words
    answer: int
    kind: str = ""


@dataclass(frozen=True)
class SeqBatch:
    """Encoded examples: ``<bos> prompt response`` right-padded.

    Attributes
    ----------
    ids : LongTensor (B, T)
    mask : FloatTensor (B, T)
        1 where ``ids[:, t]`` is a response token (the tokens a response log-probability sums),
        0 on ``<bos>``, the prompt and padding. It is the ``weights`` of
        :func:`iclr25.lm.next_token_loss`.
    lengths : LongTensor (B,)  number of real tokens
    prompt_lengths : LongTensor (B,)  ``1 + len(prompt)`` (``<bos>`` included)
    """

    ids: torch.Tensor
    mask: torch.Tensor
    lengths: torch.Tensor
    prompt_lengths: torch.Tensor

    def to(self, device: torch.device | str) -> "SeqBatch":
        """The same batch on ``device``."""
        return SeqBatch(self.ids.to(device), self.mask.to(device), self.lengths.to(device),
                        self.prompt_lengths.to(device))

    def __len__(self) -> int:
        return int(self.ids.shape[0])


def with_bos(words: Sequence[str]) -> Words:
    """``words`` with a leading ``<bos>`` (not doubled if already there)."""
    words = tuple(words)
    return words if words[:1] == (BOS,) else (BOS, *words)


def encode_pairs(vocab: Vocab, prompts: Sequence[Sequence[str]],
                 responses: Sequence[Sequence[str]]) -> SeqBatch:
    """Encode prompt/response word sequences (see :class:`SeqBatch`)."""
    if len(prompts) != len(responses):
        raise ValueError(f"{len(prompts)} prompts but {len(responses)} responses")
    seqs, plens = [], []
    for p, r in zip(prompts, responses):
        p = with_bos(p)
        seqs.append(vocab.encode(p + tuple(r)))
        plens.append(len(p))
    ids, lengths = pad_batch(seqs, vocab.pad_id)
    plen = torch.tensor(plens, dtype=torch.long)
    t = torch.arange(ids.shape[1])[None, :]
    mask = ((t >= plen[:, None]) & (t < lengths[:, None])).float()
    return SeqBatch(ids, mask, lengths, plen)


def encode_examples(vocab: Vocab, examples: Sequence[Example]) -> SeqBatch:
    """Encode :class:`Example` s: ``<bos> prompt response`` with the response masked in."""
    return encode_pairs(vocab, [e.prompt for e in examples], [e.response for e in examples])


def token_position(prompt: Sequence[str], word: str, *, last: bool = True) -> int:
    """Index of ``word`` in the *encoded* prompt (``<bos>`` is position 0), e.g. the subject's
    position for ROME. The last occurrence unless ``last=False``; ``ValueError`` if absent."""
    p = with_bos(prompt)
    if word not in p:
        raise ValueError(f"{word!r} is not in the prompt {' '.join(p)!r}")
    return len(p) - 1 - p[::-1].index(word) if last else p.index(word)
