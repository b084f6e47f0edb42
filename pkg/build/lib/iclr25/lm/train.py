"""Training, caching, sampling and evaluation helpers for :class:`~iclr25.lm.model.TinyLM`."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

from iclr25.common.optim import fit
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
             schedule_steps: int | None = None,
             loss_fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor] | None = None) -> list[float]:
    """Train ``model`` with AdamW and a warmup + cosine schedule on batches ``batch_fn(step)``.

    ``batch_fn(step)`` returns ``(ids, weights)`` as in :func:`next_token_loss`. ``loss_fn(logits,
    ids, weights)`` replaces :func:`next_token_loss` as the training loss (e.g. a distillation
    loss that calls a teacher on ``ids``). Deterministic
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
    bar = None
    if progress:
        from iclr25.common import progress as bar_

        def bar(it):
            return bar_(it, desc="train LM")

    def loss_at(step: int) -> torch.Tensor:
        ids, weights = (t.to(device) for t in batch_fn(step))
        return (loss_fn or next_token_loss)(model(ids), ids, weights)

    # the schedule keeps numpy's cos, as the committed checkpoints were trained with it
    losses = fit(model.parameters(), opt, loss_at, steps, clip=clip, progress=bar,
                 lr_lambda=lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + np.cos(np.pi * min(s, total) / total)))
    opt.zero_grad(set_to_none=True)  # leave no gradient behind on the trained model
    model.eval()
    return losses


#: the committed toy model (made by ``python -m iclr25.lm.train``): :func:`pretrained_toy_lm` with its
#: default arguments loads it, so every machine starts from the same weights without training
TOY_CHECKPOINT = "toy-lm.pt"
TOY_SCRIPT = "python -m iclr25.lm.train"


def _toy_recipe(cfg: TinyLMConfig, steps: int, batch_size: int, lr: float, answer_weight: float,
                seed: int) -> dict:
    return {"cfg": asdict(cfg), "steps": steps, "batch_size": batch_size, "lr": lr, "seed": seed,
            "answer_weight": answer_weight}


def _vocab_fingerprint(words: list[str]) -> str:
    import hashlib

    return hashlib.sha256("\n".join(words).encode()).hexdigest()[:16]


def train_toy_lm(cfg: TinyLMConfig, *, steps: int, batch_size: int, lr: float, answer_weight: float,
                 seed: int, stop_after: int | None = None, progress: bool = False) -> tuple[TinyLM, list[float]]:
    """Train the toy LM from scratch (seeded init and data, one torch thread while it runs).

    ``stop_after`` runs only the first steps of the same schedule (the reproduction test).
    Returns the model in eval mode and the loss per step.
    """
    from iclr25.lm.language import pretraining_batch, toy_vocab

    vocab = toy_vocab()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(seed)
        model = TinyLM(cfg)
        rng = np.random.default_rng([seed, 1234])
        n = steps if stop_after is None else min(stop_after, steps)
        losses = train_lm(model, lambda step: pretraining_batch(rng, vocab, batch_size, answer_weight=answer_weight),
                          n, lr=lr, progress=progress, schedule_steps=steps)
    finally:
        torch.set_num_threads(threads)
    return model.eval(), losses


def toy_checkpoint_path() -> Path:
    """Where the committed toy model lives in the package (``iclr25/lm/weights/toy-lm.pt``)."""
    return Path(__file__).resolve().parent / "weights" / TOY_CHECKPOINT


def pretrained_toy_lm(cfg: TinyLMConfig | None = None, *, steps: int = 600, batch_size: int = 32,
                      lr: float = 3e-3, answer_weight: float = 10.0, seed: int = 0, use_cache: bool = True,
                      progress: bool = False) -> tuple[TinyLM, dict]:
    """The tiny LM trained on the toy language of :mod:`iclr25.lm.language`, on the CPU.

    Default: 48-wide, 2 layers, 4 heads (about 60k parameters), 600 AdamW steps of 32
    documents, answer words weighted 10x. With these defaults the weights come from the committed
    file ``iclr25/lm/weights/toy-lm.pt`` (made by ``python -m iclr25.lm.train``, one thread,
    deterministic; ``tests/lm/test_toy_checkpoint.py`` checks that it still reproduces), so every
    machine starts from the same model. Other arguments train once and cache the result with
    :func:`iclr25.common.cached` in ``cache_dir("lm")``.

    Returns
    -------
    model : TinyLM in eval mode, on the CPU
    info : dict with ``losses`` (per step), ``source`` (``"committed"``, ``"cache"`` or
        ``"trained"``) and ``cached`` (whether no training ran).
    """
    import sys

    from iclr25.common import cached
    from iclr25.lm import language, model as model_module
    from iclr25.lm.language import toy_vocab

    vocab = toy_vocab()
    cfg = cfg or TinyLMConfig(vocab_size=len(vocab), d_model=48, d_ff=192)
    if cfg.vocab_size != len(vocab):
        raise ValueError(f"cfg.vocab_size={cfg.vocab_size} but the toy vocabulary has {len(vocab)} words")
    recipe = _toy_recipe(cfg, steps, batch_size, lr, answer_weight, seed)
    path = toy_checkpoint_path()
    if use_cache and path.is_file():
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
        meta = ckpt["meta"]
        if meta["recipe"] == recipe:
            if meta["vocab"] != _vocab_fingerprint(vocab.words):
                raise RuntimeError(f"{path} was trained on another toy vocabulary: regenerate it with "
                                   f"`{TOY_SCRIPT}`")
            model = TinyLM(cfg)
            model.load_state_dict(ckpt["state_dict"])
            return model.eval(), {"losses": meta["losses"], "source": "committed", "cached": True}
    made = []

    def train() -> dict:
        fresh, losses = train_toy_lm(cfg, steps=steps, batch_size=batch_size, lr=lr,
                                     answer_weight=answer_weight, seed=seed, progress=progress)
        made.append(True)
        return {"model": fresh.state_dict(), "losses": losses}

    state = cached("lm", "toy", train, key={**recipe, "threads": 1},
                   code=[sys.modules[__name__], model_module, language], use_cache=use_cache)
    model = TinyLM(cfg)
    model.load_state_dict(state["model"])
    model.eval()
    return model, {"losses": state["losses"], "source": "trained" if made else "cache", "cached": not made}


def make_toy_checkpoint(progress: bool = False) -> dict:
    """Train :func:`pretrained_toy_lm`'s default model and return ``{"state_dict", "meta"}``
    (meta: ``recipe``, ``vocab`` fingerprint, ``losses``, ``torch`` version, ``seconds``)."""
    import time

    from iclr25.lm.language import toy_vocab

    vocab = toy_vocab()
    cfg = TinyLMConfig(vocab_size=len(vocab), d_model=48, d_ff=192)
    recipe = _toy_recipe(cfg, 600, 32, 3e-3, 10.0, 0)
    t0 = time.time()
    model, losses = train_toy_lm(cfg, steps=600, batch_size=32, lr=3e-3, answer_weight=10.0, seed=0,
                                 progress=progress)
    meta = {"recipe": recipe, "vocab": _vocab_fingerprint(vocab.words), "losses": losses,
            "torch": str(torch.__version__), "seconds": round(time.time() - t0, 1)}
    return {"state_dict": {k: v.detach().clone() for k, v in model.state_dict().items()}, "meta": meta}


def main() -> None:
    """``python -m iclr25.lm.train``: (re)make the committed toy model ``weights/toy-lm.pt``."""
    from iclr25.common import atomic_write

    ckpt = make_toy_checkpoint(progress=True)
    path = toy_checkpoint_path()
    atomic_write(path, lambda tmp: torch.save(ckpt, tmp))
    print(f"toy LM: {path.stat().st_size / 1e6:.2f} MB, {ckpt['meta']['seconds']:.0f} s, "
          f"final loss {np.mean(ckpt['meta']['losses'][-50:]):.3f} -> {path}")


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


if __name__ == "__main__":
    main()
