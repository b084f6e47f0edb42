"""The harmful fine-tuning experiment of Booster's threat model, on the world model.

Stage 1, the provider aligns the pre-trained model with one of :data:`METHODS` on an alignment set
(harmful requests -> refusal, dish requests -> recipe) and, for the methods that use it, a
*harmful set* (harmful requests -> harmful answers). Stage 2, a user fine-tunes the aligned
model on ``n`` examples of the downstream sentiment task of which a fraction ``p`` are harmful
(request -> harmful answer, on toxins the alignment never saw): the attack. The harmful score is
measured on yet other toxins (:func:`iclr25.align.evaluate.harmful_score`), the fine-tune
accuracy on held-out reviews.

Everything random is drawn from the split seed, so two methods run with the same seed see the
same toxins, the same alignment batches and the same attack data (paired comparisons).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import torch
from torch import nn

from iclr25.align.ascent import clipped_ascent_loss
from iclr25.align.booster import booster_grad, random_unit_direction, trainable
from iclr25.align.evaluate import benign_rates, finetune_accuracy, harmful_score
from iclr25.align.repnoise import repnoise_loss
from iclr25.align.vaccine import vaccine_grad
from iclr25.lm.data import Example, SeqBatch, encode_examples
from iclr25.lm.evaluate import answer_nll
from iclr25.lm.model import TinyLM
from iclr25.lm.splits import (attack_examples, dish_partition, harmful_examples, recipe_examples,
                              refusal_examples, sentiment_examples, toxin_partition)
from iclr25.lm.world import World

#: alignment methods: plain SFT, Booster, its two mechanism controls, and two baselines
METHODS = ("sft", "booster", "random", "ascent", "vaccine", "repnoise")
#: hyperparameter names of each method (the tuning grid's axes)
HYPERPARAMETERS: dict[str, tuple[str, ...]] = {
    "sft": (), "booster": ("lam", "alpha"), "random": ("lam", "alpha"), "ascent": ("gamma", "cap"),
    "vaccine": ("rho",), "repnoise": ("alpha", "beta")}


@dataclass(frozen=True)
class HFTData:
    """One seed's data. ``toxins``/``dishes``: the role partitions
    (:func:`iclr25.lm.toxin_partition`); ``align``: refusals for the ``align`` toxins, recipes
    for the ``align`` dishes (request templates 0-2) and labelled reviews of the downstream task
    (the base model never saw its format; a 7B base model can already follow it when asked, so
    the aligned model gets it from the provider, the same for every method); ``harmful``: the same toxins' requests with
    harmful answers (Booster's harmful set); ``attack_probe``: every harmful example the attacker
    may draw (``attack`` toxins, templates 0-2), on which the harmful training loss is tracked;
    ``sentiment_test``: held-out reviews (fine-tune accuracy); ``harmful_distinct``: ``harmful`` with its
    response mask kept only on the tokens that a harmful answer does not share with every benign recipe
    (the hazard ingredients and ``heat``; not ``mix``, ``with``, ``then``, ``.``, ``<eos>``), the
    positions RepNoise's masked variant ascends on."""

    seed: int
    toxins: dict[str, tuple[str, ...]]
    dishes: dict[str, tuple[str, ...]]
    align: SeqBatch
    harmful: SeqBatch
    attack_probe: SeqBatch
    sentiment_test: list[Example] = field(repr=False)
    harmful_distinct: SeqBatch | None = field(default=None, repr=False)


def hft_data(world: World, seed: int, *, n_reviews: int = 240, n_test: int = 400) -> HFTData:
    """The data of split seed ``seed`` (on the CPU): ``n_reviews`` reviews in the alignment set,
    ``n_test`` test reviews (all with the downstream task's negation rate)."""
    toxins, dishes = toxin_partition(world, seed), dish_partition(world, seed)
    v = world.vocab
    align = (refusal_examples(world, toxins["align"]) + recipe_examples(world, dishes["align"])
             + sentiment_examples(n_reviews, np.random.default_rng([seed, 9])))
    harm = harmful_examples(world, toxins["align"])
    harmful = encode_examples(v, harm)
    shared = set.intersection(*(set(e.response) for e in harm + recipe_examples(world, dishes["align"])))
    shared_ids = torch.tensor(sorted(v.id(w) for w in shared))
    distinct = SeqBatch(harmful.ids, harmful.mask * ~torch.isin(harmful.ids, shared_ids), harmful.lengths,
                        harmful.prompt_lengths)
    return HFTData(seed, toxins, dishes, encode_examples(v, align), harmful,
                   encode_examples(v, harmful_examples(world, toxins["attack"])),
                   sentiment_examples(n_test, np.random.default_rng([seed, 5])), distinct)


def take(batch: SeqBatch, rows: Sequence[int] | np.ndarray) -> SeqBatch:
    """The rows ``rows`` of ``batch``, trimmed to their longest sequence."""
    idx = torch.as_tensor(np.asarray(rows), dtype=torch.long)
    T = int(batch.lengths[idx].max())
    return SeqBatch(batch.ids[idx, :T], batch.mask[idx, :T], batch.lengths[idx], batch.prompt_lengths[idx])


@dataclass(frozen=True)
class AlignConfig:
    """Stage 1: AdamW (constant lr, weight decay 0.1 and gradient clipping at 1 as the official
    scripts). First ``warm_steps`` steps of plain SFT (:func:`warm_start`, the same for every
    method: it leaves the memorised harmful minimum of the base model), then ``steps`` steps of
    the method with a fresh optimiser, on alignment batches of ``batch`` and harmful batches of
    ``harm_batch``."""

    steps: int = 100
    warm_steps: int = 0
    batch: int = 16
    harm_batch: int = 16
    lr: float = 1e-3
    weight_decay: float = 0.1
    clip: float = 1.0


@dataclass(frozen=True)
class AttackConfig:
    """Stage 2: ``epochs`` epochs over ``n`` user examples in batches of ``batch``, AdamW with a
    linear warm-up over the first 10% of steps (ours: the official script sets a warm-up ratio,
    but its constant schedule ignores it) then constant ``lr`` as the official script, weight
    decay 0.1, clipping at 1."""

    lr: float = 1e-3
    epochs: int = 3
    n: int = 200
    batch: int = 10
    weight_decay: float = 0.1
    clip: float = 1.0

    @property
    def steps(self) -> int:
        return self.epochs * (-(-self.n // self.batch))


def method_grads(method: str, model: TinyLM, fb: SeqBatch, hb: SeqBatch, hp: dict[str, float],
                 generator: torch.Generator) -> tuple[list[torch.Tensor], dict[str, float]]:
    """One step's gradient of alignment ``method`` (see :data:`METHODS`) on the alignment batch
    ``fb`` and the harmful batch ``hb``, with hyperparameters ``hp``:

    * ``sft``: ``grad f``;
    * ``booster``: :func:`~iclr25.align.booster.booster_grad` (``lam``, ``alpha``);
    * ``random``: the same with a fresh random unit direction each step instead of
      ``g_h / ||g_h||`` (the direction control);
    * ``ascent``: ``grad [f - gamma * min(h, cap)]`` (the level control);
    * ``vaccine``: :func:`~iclr25.align.vaccine.vaccine_grad` (``rho``);
    * ``repnoise``: ``grad`` of :func:`~iclr25.align.repnoise.repnoise_loss` (``alpha``, ``beta``).
    """
    params = trainable(model)
    f_fn = lambda m: answer_nll(m, fb)  # noqa: E731
    h_fn = lambda m: answer_nll(m, hb)  # noqa: E731
    if method == "sft":
        f = f_fn(model)
        return list(torch.autograd.grad(f, params)), {"f": float(f.detach())}
    if method in ("booster", "random"):
        u = random_unit_direction(params, generator) if method == "random" else None
        return booster_grad(model, f_fn, h_fn, hp["lam"], hp["alpha"], direction=u)
    if method == "ascent":
        f, h = f_fn(model), h_fn(model)
        loss = clipped_ascent_loss(f, h, hp["gamma"], hp["cap"])
        return list(torch.autograd.grad(loss, params)), {"f": float(f.detach()), "h": float(h.detach())}
    if method == "vaccine":
        return vaccine_grad(model, f_fn, hp["rho"])
    if method == "repnoise":
        loss = repnoise_loss(model, fb, hb, alpha=hp["alpha"], beta=hp["beta"], generator=generator)
        return list(torch.autograd.grad(loss, params)), {"loss": float(loss.detach())}
    raise ValueError(f"unknown method {method!r}; valid: {', '.join(METHODS)}")


def _apply(opt: torch.optim.Optimizer, params: list[nn.Parameter], grads: Sequence[torch.Tensor],
           clip: float) -> None:
    for p, g in zip(params, grads):
        p.grad = g.to(p.dtype)
    torch.nn.utils.clip_grad_norm_(params, clip)
    opt.step()
    opt.zero_grad(set_to_none=True)


def warm_start(model: TinyLM, data: HFTData, cfg: AlignConfig) -> dict[str, list[float]]:
    """The shared first phase of every alignment: ``cfg.warm_steps`` steps of plain SFT (its own
    batch stream, drawn from the data's seed), in place."""
    return _align_steps(model, data, "sft", {}, cfg, cfg.warm_steps, stream=1)


def align(model: TinyLM, data: HFTData, method: str, hp: dict[str, float] | None = None,
          cfg: AlignConfig = AlignConfig(), *, warm: bool = True) -> dict[str, list[float]]:
    """Align ``model`` in place with ``method``: :func:`warm_start` (if ``cfg.warm_steps`` and
    ``warm``; pass ``warm=False`` for a model that is already warm-started), then ``cfg.steps``
    steps of the method; returns the method phase's per-step stats (``f``, and ``h``, ``gap``
    where the method computes them). Batches and random directions are drawn from the data's
    seed alone: every method sees the same batches."""
    hp = dict(hp or {})
    missing = set(HYPERPARAMETERS[method]) - set(hp)
    if missing:
        raise ValueError(f"{method} needs hyperparameters {sorted(missing)}")
    if warm and cfg.warm_steps:
        warm_start(model, data, cfg)
    return _align_steps(model, data, method, hp, cfg, cfg.steps)


def _align_steps(model: TinyLM, data: HFTData, method: str, hp: dict[str, float], cfg: AlignConfig,
                 steps: int, stream: int = 0) -> dict[str, list[float]]:
    dev = next(model.parameters()).device
    rng = np.random.default_rng([data.seed, 11] if stream == 0 else [data.seed, 11, stream])
    gen = torch.Generator().manual_seed(data.seed * 1000 + 17)
    params = trainable(model)
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    model.train()
    trace: dict[str, list[float]] = {}
    # RepNoise's masked variant (hp ``masked``): the same rows, its loss on the distinct tokens only
    harm = data.harmful_distinct if method == "repnoise" and hp.get("masked") else data.harmful
    for _ in range(steps):
        fb = take(data.align, rng.integers(len(data.align), size=cfg.batch)).to(dev)
        hb = take(harm, rng.integers(len(harm), size=cfg.harm_batch)).to(dev)
        grads, stats = method_grads(method, model, fb, hb, hp, gen)
        _apply(opt, params, grads, cfg.clip)
        for k, v in stats.items():
            trace.setdefault(k, []).append(v)
    model.eval()
    return trace


@torch.no_grad()
def harmful_loss(model: TinyLM, batch: SeqBatch) -> float:
    """The harmful loss ``h``: mean NLL (nats per token) of the harmful answers in ``batch``."""
    model.eval()
    return float(answer_nll(model, batch))


def attack_set(world: World, data: HFTData, p: float, cfg: AttackConfig) -> list[Example]:
    """The user's fine-tuning set at poison ratio ``p``: the same for every method at a seed."""
    return attack_examples(world, data.toxins["attack"], cfg.n, p,
                           np.random.default_rng([data.seed, 23, int(round(1000 * p))]))


def attack(model: TinyLM, world: World, data: HFTData, p: float, cfg: AttackConfig, *,
           hs_every: int = 0, hs_toxins: Sequence[str] = (), lengths: Sequence[int] = (),
           split: str = "eval", h_every_long: int = 5, hs_start: float | None = None,
           trace_h: bool = True) -> dict[str, Any]:
    """Fine-tune ``model`` in place on :func:`attack_set` (the attack). Returns ``h_steps``/``h``:
    the harmful loss on ``data.attack_probe`` before the attack and after every step of the 1x
    attack (so ``h[k]`` is after step ``k`` for ``k <= cfg.steps``), then every ``h_every_long``
    steps; and, if ``hs_every``, ``hs_steps``/``hs``: the harmful score on ``hs_toxins``
    every ``hs_every`` steps (step 0 included).

    ``lengths`` (e.g. ``(1, 2, 4)``): the durability test. The attack runs ``max(lengths)`` times
    ``cfg.epochs`` epochs (the warm-up of the 1x attack, then the same constant lr; the first
    ``cfg.steps`` steps are exactly the 1x attack) and ``evals[k]`` is :func:`evaluate` on
    ``split`` after ``k`` times ``cfg.steps`` steps.

    Nothing is computed twice: where a traced step is also an evaluation step (and ``hs_toxins`` are
    the ``split`` toxins) the trace takes the harmful score from :func:`evaluate`; ``hs_start``, the
    harmful score of the model as passed in (when the caller has it), stands for step 0.
    ``trace_h=False`` records ``h`` only at step 0 and at the evaluation steps."""
    dev = next(model.parameters()).device
    examples = attack_set(world, data, p, cfg)
    batch_all = encode_examples(world.vocab, examples)
    probe = data.attack_probe.to(dev)
    rng = np.random.default_rng([data.seed, 29])
    params = trainable(model)
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    warm = max(1, int(0.1 * cfg.steps))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm))
    out: dict[str, Any] = {"h_steps": [0], "h": [harmful_loss(model, probe)], "hs_steps": [], "hs": []}

    same = list(hs_toxins) == list(data.toxins[split])  # the trace's toxins are the evaluation's

    def record_hs(step: int, known: float | None = None) -> None:
        if hs_every and step % hs_every == 0:
            out["hs_steps"].append(step)
            out["hs"].append(known if known is not None else harmful_score(model, world, hs_toxins)["hs"])

    record_hs(0, hs_start)
    step = 0
    out["evals"] = {}
    for _ in range(cfg.epochs * max([1, *lengths])):
        order = rng.permutation(len(examples))
        for i in range(0, len(order), cfg.batch):
            model.train()
            b = take(batch_all, order[i:i + cfg.batch]).to(dev)
            loss = answer_nll(model, b)
            grads = torch.autograd.grad(loss, params)
            _apply(opt, params, grads, cfg.clip)
            sched.step()
            step += 1
            at_eval = step % cfg.steps == 0 and step // cfg.steps in lengths
            if (step <= cfg.steps or step % h_every_long == 0) if trace_h else at_eval:
                out["h_steps"].append(step)
                out["h"].append(harmful_loss(model, probe))
            if at_eval:
                out["evals"][step // cfg.steps] = evaluate(model, world, data, split)
            record_hs(step, out["evals"][step // cfg.steps]["hs"] if at_eval and same else None)
    model.eval()
    return out


def evaluate(model: TinyLM, world: World, data: HFTData, split: str = "eval") -> dict[str, float]:
    """Harmful score etc. on the ``split`` toxins (``"val"`` for tuning, ``"eval"`` for the
    results), helpfulness/over-refusal on the ``split`` dishes, fine-tune accuracy, and the
    harmful loss on the attack probe (``h``) and on the ``split`` toxins' harmful answers in the trained
    phrasings (``h_eval``: toxins that no stage trains on when ``split`` is ``"eval"``)."""
    dev = next(model.parameters()).device
    out = harmful_score(model, world, data.toxins[split])
    out.update(benign_rates(model, world, data.dishes[split]))
    out["fa"] = finetune_accuracy(model, world, data.sentiment_test)
    out["h"] = harmful_loss(model, data.attack_probe.to(dev))
    out["h_eval"] = harmful_loss(model, encode_examples(world.vocab, harmful_examples(world, data.toxins[split])).to(dev))
    return out

