"""Batched evaluation of a :class:`~iclr25.lm.model.TinyLM`: log-probabilities, generation,
multiple choice, next-token (fact) accuracy, perplexity.

All functions are device-agnostic: inputs are moved to the model's device, results come back
there (reductions as Python floats). The differentiable ones (:func:`token_logprobs`,
:func:`sequence_logprob`, :func:`answer_nll`) are what DPO, Booster and unlearning train with;
the ``@torch.no_grad`` ones evaluate large sets in chunks.

Identity (tested): ``-sequence_logprob(model, b).sum() / b.mask.sum() ==
next_token_loss(model(b.ids), b.ids, b.mask) == answer_nll(model, b)``.
"""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F

from iclr25.lm.data import Example, MCItem, SeqBatch, encode_examples, encode_pairs, with_bos
from iclr25.lm.model import TinyLM
from iclr25.lm.train import next_token_loss
from iclr25.lm.vocab import EOS, Vocab, pad_batch

Words = tuple[str, ...]


def model_device(model: torch.nn.Module) -> torch.device:
    """The device of the model's first parameter."""
    return next(model.parameters()).device


def token_logprobs(model: TinyLM, ids: torch.Tensor) -> torch.Tensor:
    """``lp[b, t] = log p(ids[b, t] | ids[b, :t])`` for t >= 1; ``lp[:, 0] = 0``.

    ids (B, T) -> (B, T), differentiable, on the model's device.
    """
    ids = ids.to(model_device(model))
    logp = F.log_softmax(model(ids)[:, :-1].float(), dim=-1)
    lp = logp.gather(-1, ids[:, 1:, None]).squeeze(-1)
    return torch.cat([torch.zeros_like(lp[:, :1]), lp], dim=1)


def sequence_logprob(model: TinyLM, batch: SeqBatch, *, mean: bool = False) -> torch.Tensor:
    """Response log-probability of each sequence: ``sum_t mask[b, t] * lp[b, t]`` (B,), or the
    per-token mean with ``mean=True``. Differentiable (DPO uses the sum)."""
    lp = token_logprobs(model, batch.ids)
    mask = batch.mask.to(lp.device)
    s = (lp * mask).sum(1)
    return s / mask.sum(1).clamp_min(1.0) if mean else s


def answer_nll(model: TinyLM, batch: SeqBatch) -> torch.Tensor:
    """Mean negative log-likelihood of the response tokens over the whole batch (a scalar, the
    answer-masked SFT loss). Differentiable."""
    b = batch.to(model_device(model))
    return next_token_loss(model(b.ids), b.ids, b.mask)


@torch.no_grad()
def score_examples(model: TinyLM, vocab: Vocab, examples: Sequence[Example], *, mean: bool = False,
                   batch_size: int = 512) -> torch.Tensor:
    """:func:`sequence_logprob` of many examples, in chunks, without gradients: (N,)."""
    out = [sequence_logprob(model, encode_examples(vocab, examples[i:i + batch_size]), mean=mean)
           for i in range(0, len(examples), batch_size)]
    return torch.cat(out) if out else torch.zeros(0, device=model_device(model))


@torch.no_grad()
def next_token_logprobs(model: TinyLM, vocab: Vocab, prompts: Sequence[Sequence[str]], *,
                        batch_size: int = 512) -> torch.Tensor:
    """Log-distribution of the token after each prompt (``<bos>`` added): (N, vocab)."""
    dev = model_device(model)
    out = []
    for i in range(0, len(prompts), batch_size):
        ids, lengths = pad_batch([vocab.encode(with_bos(p)) for p in prompts[i:i + batch_size]],
                                 vocab.pad_id)
        ids, lengths = ids.to(dev), lengths.to(dev)
        logits = model(ids)[torch.arange(len(ids), device=dev), lengths - 1]
        out.append(F.log_softmax(logits.float(), -1))
    return torch.cat(out) if out else torch.zeros(0, len(vocab), device=dev)


def _first_targets(vocab: Vocab, examples: Sequence[Example], device: torch.device) -> torch.Tensor:
    return torch.tensor([vocab.id(e.response[0]) for e in examples], device=device)


def next_token_accuracy(model: TinyLM, vocab: Vocab, examples: Sequence[Example]) -> float:
    """Fraction of examples whose first response word is the arg-max next token after the prompt
    (over the whole vocabulary): exact-match fact accuracy for single-word objects."""
    if not examples:
        raise ValueError("no examples")
    lp = next_token_logprobs(model, vocab, [e.prompt for e in examples])
    return float((lp.argmax(-1) == _first_targets(vocab, examples, lp.device)).float().mean())


def next_token_margin(model: TinyLM, vocab: Vocab, examples: Sequence[Example]) -> torch.Tensor:
    """``log p(target) - max_{w != target} log p(w)`` per example (N,): > 0 iff correct; the
    log-probability margin of a fact (how robust it is, not only whether it is right)."""
    lp = next_token_logprobs(model, vocab, [e.prompt for e in examples])
    tgt = _first_targets(vocab, examples, lp.device)
    true = lp.gather(1, tgt[:, None]).squeeze(1)
    other = lp.scatter(1, tgt[:, None], float("-inf")).max(1).values
    return true - other


def mc_logprobs(model: TinyLM, vocab: Vocab, items: Sequence[MCItem]) -> torch.Tensor:
    """Next-token log-probability of each choice of each item: (N, C)."""
    lp = next_token_logprobs(model, vocab, [it.prompt for it in items])
    choice_ids = torch.tensor([vocab.encode(it.choices) for it in items], device=lp.device)
    return lp.gather(1, choice_ids)


def mc_accuracy(model: TinyLM, vocab: Vocab, items: Sequence[MCItem]) -> float:
    """Fraction of items whose correct choice has the highest log-probability among the choices
    (ties count as wrong unless the correct choice is the first maximum); chance 1/C."""
    if not items:
        raise ValueError("no items")
    scores = mc_logprobs(model, vocab, items)
    answers = torch.tensor([it.answer for it in items], device=scores.device)
    return float((scores.argmax(1) == answers).float().mean())


@torch.no_grad()
def generate_ids(model: TinyLM, prompts: Sequence[Sequence[int]], *, max_new: int = 12,
                 temperature: float = 0.0, generator: torch.Generator | None = None,
                 eos_id: int = 2, batch_size: int = 256) -> list[list[int]]:
    """Continue each id prompt by up to ``max_new`` tokens (greedy if ``temperature == 0``, else
    sampled from ``softmax(logits / temperature)``), stopping at ``eos_id`` (kept) or at the
    model's ``max_len``. Prompts of equal length run together (no padding, so exact).

    Sampling draws on the CPU from ``generator`` (a CPU ``torch.Generator``), so a seed gives the
    same samples on any device up to floating-point ties.
    """
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    dev = model_device(model)
    max_len = model.cfg.max_len
    out: list[list[int]] = [[] for _ in prompts]
    by_len: dict[int, list[int]] = {}
    for i, p in enumerate(prompts):
        by_len.setdefault(len(p), []).append(i)
    for length in sorted(by_len):
        group = by_len[length]
        for s in range(0, len(group), batch_size):
            idx = group[s:s + batch_size]
            x = torch.tensor([list(prompts[i]) for i in idx], dtype=torch.long, device=dev)
            done = torch.zeros(len(idx), dtype=torch.bool, device=dev)
            new: list[torch.Tensor] = []
            for _ in range(min(max_new, max_len - length)):
                logits = model(x)[:, -1].float()
                if temperature == 0:
                    nxt = logits.argmax(-1)
                else:
                    probs = torch.softmax(logits / temperature, -1).cpu()
                    nxt = torch.multinomial(probs, 1, generator=generator).squeeze(-1).to(dev)
                nxt = torch.where(done, torch.full_like(nxt, eos_id), nxt)
                done |= nxt == eos_id
                new.append(nxt)
                x = torch.cat([x, nxt[:, None]], 1)
                if bool(done.all()):
                    break
            gen = torch.stack(new, 1).tolist() if new else [[] for _ in idx]
            for i, g in zip(idx, gen):
                out[i] = g[: g.index(eos_id) + 1] if eos_id in g else g
    return out


def generate_responses(model: TinyLM, vocab: Vocab, prompts: Sequence[Sequence[str]], *,
                       max_new: int = 12, temperature: float = 0.0,
                       generator: torch.Generator | None = None) -> list[Words]:
    """Responses (words, ``<eos>`` dropped) to word prompts (``<bos>`` added); see
    :func:`generate_ids`. Greedy by default."""
    ids = generate_ids(model, [vocab.encode(with_bos(p)) for p in prompts], max_new=max_new,
                       temperature=temperature, generator=generator, eos_id=vocab.eos_id)
    return [tuple(w for w in vocab.decode(g).split() if w != EOS) for g in ids]


@torch.no_grad()
def perplexity(model: TinyLM, vocab: Vocab, texts: Sequence[Sequence[str]], *,
               batch_size: int = 512) -> float:
    """exp of the mean next-token NLL over every token after ``<bos>`` of each text (an
    ``<eos>`` is appended to each): a held-out utility metric."""
    if not texts:
        raise ValueError("no texts")
    total, count = 0.0, 0.0
    for i in range(0, len(texts), batch_size):
        b = encode_pairs(vocab, [()] * len(texts[i:i + batch_size]),
                         [tuple(t) + (EOS,) for t in texts[i:i + batch_size]])
        lp = token_logprobs(model, b.ids)
        m = b.mask.to(lp.device)
        total += float(-(lp * m).sum())
        count += float(m.sum())
    return float(torch.exp(torch.tensor(total / count)))
