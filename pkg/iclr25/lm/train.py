"""Training, caching, sampling and evaluation helpers for :class:`~iclr25.lm.model.TinyLM`."""

from __future__ import annotations

from dataclasses import asdict
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

from iclr25.lm.model import TinyLM, TinyLMConfig

BatchFn = Callable[[int], tuple[torch.Tensor, torch.Tensor]]


def next_token_loss(logits: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
    """Weighted mean next-token cross-entropy.

    ``logits`` (B, T, V) from ``model(ids)``; ``ids`` (B, T); ``weights`` (B, T) is the weight of
    predicting ``ids[:, t]`` (position 0 is never predicted). Without weights: every token but
    the first, padding (id 0) excluded.
    """
    if weights is None:
        weights = (ids != 0).float()
    w = weights[:, 1:]
    ce = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1),
                         reduction="none").view_as(w)
    return (ce * w).sum() / w.sum().clamp_min(1e-12)


def train_lm(model: TinyLM, batch_fn: BatchFn, steps: int, *, lr: float = 3e-3,
             warmup: int = 50, weight_decay: float = 0.01, clip: float = 1.0,
             device: torch.device | str = "cpu", progress: bool = False,
             schedule_steps: int | None = None) -> list[float]:
    """Train ``model`` with AdamW and a warmup + cosine schedule on batches ``batch_fn(step)``.

    ``batch_fn(step)`` returns ``(ids, weights)`` as in :func:`next_token_loss`. Deterministic
    given the model's initial weights and a deterministic ``batch_fn``. The cosine decays over
    ``schedule_steps`` (default ``steps``): ``steps < schedule_steps`` runs exactly the first
    ``steps`` steps of the longer run. Returns the loss per step.
    """
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    total = steps if schedule_steps is None else schedule_steps
    if total < 1:
        raise ValueError(f"schedule_steps must be >= 1, got {total}")
    model.to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + np.cos(np.pi * min(s, total) / total)))
    it = range(steps)
    if progress:
        from iclr25.common import progress as bar

        it = bar(it, desc="train LM")
    losses = []
    for step in it:
        ids, weights = (t.to(device) for t in batch_fn(step))
        loss = next_token_loss(model(ids), ids, weights)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
    opt.zero_grad(set_to_none=True)  # leave no gradient behind on the trained model
    model.eval()
    return losses


def pretrained_toy_lm(cfg: TinyLMConfig | None = None, *, steps: int = 600, batch_size: int = 32,
                      lr: float = 3e-3, answer_weight: float = 10.0, seed: int = 0, use_cache: bool = True,
                      progress: bool = False) -> tuple[TinyLM, dict]:
    """The tiny LM trained on the toy language of :mod:`iclr25.lm.language`, on the CPU.

    Default: 48-wide, 2 layers, 4 heads (about 60k parameters), 600 AdamW steps of 32
    documents, answer words weighted 10x. Trained once per (config, training arguments, seed,
    torch threads, source of the model, the language and this module) and cached with
    :func:`iclr25.common.cached` in ``cache_dir("lm")``; training is deterministic, so a cache
    hit returns the same weights a fresh run would make on this machine.

    Returns
    -------
    model : TinyLM in eval mode, on the CPU
    info : dict with ``losses`` (per step) and ``cached`` (whether the weights came from the cache).
    """
    import sys

    from iclr25.common import cached
    from iclr25.lm import language, model as model_module
    from iclr25.lm.language import pretraining_batch, toy_vocab

    vocab = toy_vocab()
    cfg = cfg or TinyLMConfig(vocab_size=len(vocab), d_model=48, d_ff=192)
    if cfg.vocab_size != len(vocab):
        raise ValueError(f"cfg.vocab_size={cfg.vocab_size} but the toy vocabulary has {len(vocab)} words")
    made = []

    def train() -> dict:
        torch.manual_seed(seed)
        fresh = TinyLM(cfg)
        rng = np.random.default_rng([seed, 1234])
        losses = train_lm(fresh, lambda step: pretraining_batch(rng, vocab, batch_size, answer_weight=answer_weight),
                          steps, lr=lr, progress=progress)
        made.append(True)
        return {"model": fresh.state_dict(), "losses": losses}

    key = {"cfg": asdict(cfg), "steps": steps, "batch_size": batch_size, "lr": lr, "seed": seed,
           "answer_weight": answer_weight, "threads": torch.get_num_threads()}
    state = cached("lm", "toy", train, key=key, code=[sys.modules[__name__], model_module, language],
                   use_cache=use_cache)
    torch.manual_seed(seed)
    model = TinyLM(cfg)
    model.load_state_dict(state["model"])
    model.eval()
    return model, {"losses": state["losses"], "cached": not made}


@torch.no_grad()
def last_token_logits(model: TinyLM, ids: torch.Tensor, lengths: torch.Tensor,
                      embed_offset: torch.Tensor | None = None) -> torch.Tensor:
    """Logits of the token after the last real token of each right-padded sequence.

    ``ids`` (B, T), ``lengths`` (B,) -> (B, vocab). Causality makes right padding harmless.
    """
    logits = model(ids, embed_offset=embed_offset)
    return logits[torch.arange(ids.shape[0], device=ids.device), lengths.to(ids.device) - 1]


@torch.no_grad()
def generate(model: TinyLM, prefix: torch.Tensor, n_new: int, *, temperature: float = 1.0,
             generator: torch.Generator | None = None, eos_id: int | None = None) -> torch.Tensor:
    """Sample ``n_new`` tokens after ``prefix`` (B, T0) -> (B, T0 + n_new).

    ``temperature=0`` is greedy decoding; after ``eos_id`` a row keeps emitting ``eos_id``.
    """
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    out = prefix.clone()
    done = torch.zeros(out.shape[0], dtype=torch.bool, device=out.device)
    for _ in range(n_new):
        logits = model(out[:, -model.cfg.max_len:])[:, -1]
        if temperature == 0:
            nxt = logits.argmax(-1)
        else:
            probs = torch.softmax(logits / temperature, -1)
            nxt = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
        if eos_id is not None:
            nxt = torch.where(done, torch.full_like(nxt, eos_id), nxt)
            done |= nxt == eos_id
        out = torch.cat([out, nxt[:, None]], dim=1)
    return out


@torch.no_grad()
def sequence_nll(model: TinyLM, ids: torch.Tensor, weights: torch.Tensor | None = None) -> float:
    """Mean next-token negative log-likelihood (nats/token) of a batch; ``exp`` of it is the
    perplexity."""
    model.eval()
    return float(next_token_loss(model(ids), ids, weights))
