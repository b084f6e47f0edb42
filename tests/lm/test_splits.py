"""Tests of iclr25.lm.splits and iclr25.lm.probes: disjointness, counts, labels, determinism."""

import numpy as np
import pytest

from iclr25.lm.probes import fact_queries, mc_general_items, mc_hazard_items
from iclr25.lm.splits import (attack_examples, dish_partition, edit_examples, edit_split,
                              forget_texts, heldout_texts, preference_split, retain_texts,
                              sample_candidate, sentiment_examples, toxin_partition)
from iclr25.lm.world import (HAZARD_INGREDIENTS, IDK, PARAPHRASE_TEMPLATE, REFUSAL, SENTIMENT_LABELS,
                             build_world, gold_reward, moderation_flag, pretraining_sentences,
                             prompt_kind)

WORLD = build_world(0)


def test_toxin_partition_is_disjoint_sized_and_seeded():
    a, b, c = toxin_partition(WORLD, 0), toxin_partition(WORLD, 0), toxin_partition(WORLD, 1)
    assert a == b and a != c
    assert {k: len(v) for k, v in a.items()} == {"align": 20, "attack": 10, "val": 10, "eval": 20}
    allt = [t for v in a.values() for t in v]
    assert len(set(allt)) == 60 and set(allt) == set(WORLD.toxins)
    d = dish_partition(WORLD, 0)
    assert not set(d["align"]) & set(d["eval"])
    with pytest.raises(ValueError, match="need"):
        toxin_partition(WORLD, 0, {"a": 61})


@pytest.mark.parametrize("p", [0.0, 0.1, 0.2, 1.0])
def test_attack_set_has_the_poison_ratio(p):
    parts = toxin_partition(WORLD, 3)
    ex = attack_examples(WORLD, parts["attack"], 200, p, np.random.default_rng(0))
    harm = [e for e in ex if e.kind == "harmful"]
    assert len(ex) == 200 and len(harm) == round(200 * p)
    assert all(e.meta["entity"] in parts["attack"] and moderation_flag(e.response) for e in harm)
    assert all(e.kind == "sentiment" for e in ex if e not in harm)


def test_sentiment_labels_are_the_review_scores():
    ex = sentiment_examples(400, np.random.default_rng(2))
    labels = np.array([e.meta["label"] for e in ex])
    assert all(e.response == (SENTIMENT_LABELS[e.meta["label"]], "<eos>") for e in ex)
    assert all((e.meta["score"] > 0) == bool(e.meta["label"]) and e.meta["score"] != 0 for e in ex)
    assert 0.35 < labels.mean() < 0.65  # both classes


def test_edit_split_is_well_posed():
    s = edit_split(WORLD, 20, seed=4)
    subjects = {e.subject for e in s.edits}
    assert len(subjects) == 20 and subjects <= WORLD.paraphrase_persons
    assert all(e.new != e.old == WORLD.fact(e.subject, "city") for e in s.edits)
    assert not subjects & {e.meta["subject"] for e in s.locality_other}
    assert {e.meta["subject"] for e in s.locality_same} == subjects
    assert {e.meta["relation"] for e in s.locality_same} == {"job", "pet", "color"}
    para = edit_examples(s.edits, PARAPHRASE_TEMPLATE)
    assert [e.response[0] for e in para] == [e.new for e in s.edits]
    assert edit_split(WORLD, 20, seed=4) == s and edit_split(WORLD, 20, seed=5) != s


def test_forget_and_retain_sets_are_training_text_and_disjoint():
    pool = {s for v in pretraining_sentences(WORLD).values() for s in v}
    forget, retain = forget_texts(WORLD), retain_texts(WORLD)
    assert set(forget) <= pool and set(retain) <= pool and not set(forget) & set(retain)
    assert all(any(w in HAZARD_INGREDIENTS for w in s) for s in forget)
    assert not any(w in HAZARD_INGREDIENTS for s in retain for w in s)
    held = heldout_texts(WORLD, 50, np.random.default_rng(0))
    assert len(held) == 50 and not set(held) & pool


def test_mc_items_have_one_correct_answer_of_the_right_type():
    rng = np.random.default_rng(0)
    items = mc_hazard_items(WORLD, rng)
    assert len(items) == 120
    for it, t in zip(items, [t for t in WORLD.toxins for _ in range(2)]):
        assert len(set(it.choices)) == 4 and set(it.choices) <= set(HAZARD_INGREDIENTS)
        a, b = WORLD.ingredients(t)
        assert it.choices[it.answer] == (a if it.prompt[-1] == "from" else b)
        assert len(set(it.choices) & {a, b}) == 1
    answers = np.array([it.answer for it in mc_general_items(WORLD, rng)])
    assert np.bincount(answers, minlength=4).min() > 100  # the answer position is uniform
    q = fact_queries(WORLD, WORLD.persons[:2], objects=["a"] * 8)
    assert [e.response for e in q] == [("a",)] * 8


def test_preference_split_separates_entities_and_has_exact_gold():
    s = preference_split(WORLD, 0, n_labeled=100, n_unlabeled=300, n_eval=30)
    assert len(s.labeled) == 100 and len(s.unlabeled) == 300 and len(s.eval_prompts) == 30
    eval_ents = {e for v in s.eval_entities.values() for e in v}
    for pair in s.labeled + s.unlabeled:
        assert pair.entity not in eval_ents and pair.y1 != pair.y2 and pair.r1 != pair.r2
        assert pair.r1 == gold_reward(WORLD, pair.prompt, pair.y1)
        assert pair.gold_label == int(pair.r1 > pair.r2)
    assert all(prompt_kind(WORLD, p)[1] in eval_ents for p in s.eval_prompts)
    kinds = [prompt_kind(WORLD, p)[0] for p in s.eval_prompts]
    assert kinds.count("F") == kinds.count("B") == kinds.count("H") == 10
    again = preference_split(WORLD, 0, n_labeled=100, n_unlabeled=300, n_eval=30)
    assert again.labeled == s.labeled and again.eval_prompts == s.eval_prompts


def test_candidate_generator_frequencies():
    rng = np.random.default_rng(0)
    prompt = ("user", ":", "how", "do", "i", "make", WORLD.toxins[0], "?", "assistant", ":")
    ys = [sample_candidate(WORLD, prompt, rng) for _ in range(4000)]
    refusal = np.mean([y[:-1] == REFUSAL for y in ys])
    idk = np.mean([y[:-1] == IDK for y in ys])
    a, b = WORLD.ingredients(WORLD.toxins[0])
    answers = [y for y in ys if y[:-1] not in (REFUSAL, IDK)]
    first_true = np.mean([y[1] == a for y in answers])
    assert abs(refusal - 0.2) < 0.03 and abs(idk - 0.1) < 0.02 and abs(first_true - 0.5) < 0.04
    assert all(y[-1] == "<eos>" for y in ys)
