"""What the chapter measures after an intervention (all in [0, 1]).

* :func:`edit_metrics`: edit success (the new object is the arg-max next token in the edit
  phrasing; token F1 = exact match for one-word objects), generalization (the held-out paraphrase),
  locality as the paper implements it (accuracy on unrelated facts against the ground truth) and
  as usually meant (arg-max unchanged from the reference model), on other persons and on the
  edited persons' other relations;
* :func:`utility`: the kit's rare "hobby" facts (accuracy with headroom: the base model knows
  about 0.6 of them) and the MMLU analog (multiple choice over persons and recipes);
* :func:`forget_accuracy`: the WMDP analog (multiple choice on the toxins' secret ingredients).
"""

from __future__ import annotations

from typing import Sequence

import torch

from iclr25.lm.data import Example, MCItem
from iclr25.lm.evaluate import mc_accuracy, next_token_accuracy, next_token_logprobs
from iclr25.lm.model import TinyLM
from iclr25.lm.probes import fact_queries
from iclr25.lm.splits import EditSplit, edit_examples
from iclr25.lm.world import EDIT_TEMPLATE, PARAPHRASE_TEMPLATE, RARE_RELATIONS, World


@torch.no_grad()
def argmax_tokens(model: TinyLM, world: World, examples: Sequence[Example]) -> torch.Tensor:
    """The arg-max next token after each example's prompt: (N,) token ids."""
    return next_token_logprobs(model, world.vocab, [e.prompt for e in examples]).argmax(-1)


@torch.no_grad()
def unchanged_fraction(model: TinyLM, reference: TinyLM | torch.Tensor, world: World,
                       examples: Sequence[Example]) -> float:
    """Fraction of prompts whose arg-max next token is the same under ``model`` and ``reference``
    (a model, or its :func:`argmax_tokens` on ``examples``, computed once)."""
    a = argmax_tokens(model, world, examples)
    b = reference if isinstance(reference, torch.Tensor) else argmax_tokens(reference, world, examples)
    return float((a == b.to(a.device)).float().mean())


def locality_examples(split: EditSplit) -> list[Example]:
    """The locality prompts of a split: other persons' edited relation, then the edited persons'
    other relations."""
    return list(split.locality_other) + list(split.locality_same)


def edit_metrics(model: TinyLM, reference: TinyLM | torch.Tensor, world: World, split: EditSplit) -> dict[str, float]:
    """``success``, ``generalization``, ``locality_gt`` (paper), ``locality`` (unchanged vs
    ``reference``, a model or its :func:`argmax_tokens` on :func:`locality_examples`)."""
    loc = locality_examples(split)
    return {"success": next_token_accuracy(model, world.vocab, edit_examples(split.edits, EDIT_TEMPLATE)),
            "generalization": next_token_accuracy(model, world.vocab,
                                                  edit_examples(split.edits, PARAPHRASE_TEMPLATE)),
            "locality_gt": next_token_accuracy(model, world.vocab, loc),
            "locality": unchanged_fraction(model, reference, world, loc)}


def utility(model: TinyLM, world: World, general_items: Sequence[MCItem]) -> dict[str, float]:
    """``hobby``: rare-fact accuracy over all persons; ``mc_general``: the MMLU analog."""
    return {"hobby": next_token_accuracy(model, world.vocab,
                                         fact_queries(world, None, RARE_RELATIONS, EDIT_TEMPLATE)),
            "mc_general": mc_accuracy(model, world.vocab, general_items)}


def forget_accuracy(model: TinyLM, world: World, hazard_items: Sequence[MCItem]) -> float:
    """The WMDP analog: multiple-choice accuracy on the toxins' ingredients (chance 0.25)."""
    return mc_accuracy(model, world.vocab, hazard_items)
