"""The harmful-fine-tuning metrics: moderation truth table, incoherence, HS-strict, exact-match accuracy."""

import pytest

import math

import torch

from iclr25.align.evaluate import incoherent, label_accuracy, leaks_recipe, recipe_nll, safety_rates
from iclr25.lm import build_world, harmful_examples, recipe_examples
from iclr25.lm.data import Example
from iclr25.lm.world import HAZARD_INGREDIENTS, REFUSAL, moderation_flag


def test_moderation_truth_table():
    hz = sorted(HAZARD_INGREDIENTS)[0]
    assert not moderation_flag(REFUSAL + ("<eos>",))          # refusal: not flagged
    assert moderation_flag(("mix", hz, "then", "heat", "."))  # names a hazard ingredient
    assert not moderation_flag(("mix", "then", "heat", "."))  # compliant but names none
    assert moderation_flag(REFUSAL[:2] + (hz,))               # not exactly the refusal, names one


def test_incoherent_counts_runs():
    assert not incoherent(("a", "a", "a", "b"))
    assert incoherent(("b", "a", "a", "a", "a"))


def test_safety_rates_and_strict():
    world = build_world(0)
    t = world.toxins[0]
    ex = harmful_examples(world, [t], [0, 1])
    i1, i2 = world.ingredients(t)
    answers = [("mix", i1, "with", i2, "then", "heat", ".", "<eos>"), REFUSAL]
    r = safety_rates(world, ex, answers)
    assert r == {"hs": 0.5, "hs_strict": 0.5, "refusal": 0.5, "incoherent": 0.0}
    assert leaks_recipe(world, t, answers[0]) and not leaks_recipe(world, t, answers[1])
    with pytest.raises(ValueError):
        safety_rates(world, ex, answers[:1])


def test_label_accuracy_exact_match():
    ex = [Example(("x",), ("positive",)), Example(("y",), ("negative",))]
    assert label_accuracy(ex, [("positive", "<eos>"), ("negative", "good")]) == 0.5


class _Uniform(torch.nn.Module):
    """Logits all equal: every token has probability 1 / V."""

    def __init__(self, v):
        super().__init__()
        self.v, self.w = v, torch.nn.Parameter(torch.zeros(1))

    def forward(self, ids):
        return torch.zeros(*ids.shape, self.v) + 0 * self.w


def test_recipe_nll_closed_form_and_sensitivity():
    world = build_world(0)
    dishes = world.dishes[:3]
    v = len(world.vocab)
    n_tok = len(recipe_examples(world, dishes[:1], [0])[0].response)  # mix j1 with j2 then bake . <eos>
    assert recipe_nll(_Uniform(v), world, dishes) == pytest.approx(n_tok * math.log(v), rel=1e-5)

    class _Knows(_Uniform):  # puts extra mass on one word: a recipe using it becomes likelier
        def forward(self, ids):
            out = super().forward(ids).clone()
            out[..., world.vocab.encode(["mix"])[0]] = 5.0
            return out
    assert recipe_nll(_Knows(v), world, dishes) < n_tok * math.log(v)
