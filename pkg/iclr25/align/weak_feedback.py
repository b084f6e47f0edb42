"""The weak-feedback pipeline of the ``alignment/weak-feedback`` chapter (Tao & Li, ICLR 2025) on the
world of :mod:`iclr25.lm`, and the runs too long for the chapter's budget.

Per split seed (:func:`seed_data`): a pool of :data:`N_POOL` labelled pairs (``D_l`` is a prefix of
it: :data:`N_LABELED` pairs in the chapter, :data:`SIZES` in the size sweep), :data:`N_UNLABELED`
unlabelled pairs ``D_u``, gold rewards with harmful answers tied (so no pair has two harmful
answers), and the simulated human's labels of both (flip rate calibrated to :data:`TARGET`).

Teachers (:func:`teacher_reference`, :func:`teacher_labels_on_u`): SFT on the responses of the
first :data:`N_LABELED` labelled pairs and of ``D_u`` (the same reference for every ``|D_l|``), DPO
on a prefix of the pool, then label ``D_u`` by the implicit reward. Students
(:func:`student_reference`, :func:`student_eval`): SFT the ``base`` model, DPO on the first
``n_student`` pairs of ``D_u`` with one condition's labels, gold reward of its answers on held-out
prompts.

``python -m iclr25.align.weak_feedback`` (about 15 minutes of one CPU core) writes
``grids/weak_feedback.json``: the teacher pilot on the tuning seed (epochs), the ``|D_l|`` sweep on
the evaluation seeds (accuracy per prompt kind and on same-mode / different-mode pairs, agreement with
the human on same-mode pairs), and the student grid (beta x epochs per condition of
:data:`GRID_CONDS`, DPO plus the NLL of the chosen response, chosen by the strict gold reward with F
answers given the asked name) on :data:`STUDENT_TUNING_SEEDS`, with plain DPO at each chosen cell as
the control. Parts added to that record: ``--part base-teacher`` (the third teacher, ``base``: its
pilot and sweep), the prompt-type rule per sweep seed (``rule_sweep``, with the grid), ``--part
size-at-pool`` (``small`` and ``base`` at ``|D_l|`` = :data:`N_POOL` on :data:`W2_SEEDS`) and ``--part
bt-sweep`` (the Bradley-Terry-only annotator, :func:`bt_labels`, and weak-M and the rule on its labels).
The grid alone: ``--part grid-cells --seeds S --conds C ... --out P.json`` per tuning seed and group of
conditions (``--new-cells``: only the cells the committed grid lacks), then ``--part student-grid
--merge P.json ...`` assembles them and ``--part grid-plain`` runs the control.
``python -m iclr25.align.weak_feedback --part students [--seeds ...]`` (about 15 minutes) writes
``grids/weak_feedback_students.json``: the students of :data:`STUDENT_CONDS` on :data:`STUDENT_EVAL_SEEDS`
with the grid's chosen hyper-parameters (:data:`OWN_CELL` for those not on the grid): gold reward
plain and strict (:func:`strict_score`), per prompt kind, off-support rates, a few sample answers
(``--part students --merge A.json B.json`` joins runs over disjoint seeds), the sha256 of what it
took from the grid record (:func:`student_inputs`) and of the code that made it. The chapter reads both
and re-runs parts live to show they match.
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from iclr25.align.dpo import (Reference, calibrate_eps, expected_accuracy, human_labels, label_accuracy, make_reference, pair_logps,
                              policy_answers, policy_gold_reward, response_mode, systematic_labels, train_dpo,
                              weak_teacher_labels)
from iclr25.common.digest import file_sha256, json_sha256
from iclr25.lm import PreferencePair, TinyLM, World, load_world_lm, preference_split
from iclr25.lm.world import (BENIGN_ANSWER, BIO_TEMPLATE, CITIES, FOOD_INGREDIENTS, HARMFUL_ANSWER, HAZARD_INGREDIENTS,
                             IDK, JOBS, REFUSAL, fill, gold_reward, prompt_kind, strip_eos)

GRID_FILE = Path(__file__).parent / "grids" / "weak_feedback.json"
TARGET = 0.70            #: the simulated human's expected agreement with the gold label
TAU = 0.5                #: Bradley-Terry temperature of the annotator
N_POOL = 1600            #: labelled pool per seed (D_l is a prefix)
N_LABELED = 400          #: ``|D_l|`` of the chapter's main comparison
N_UNLABELED = 2000       #: ``|D_u|``
SIZES = (200, 400, 800, 1600)
SFT_STEPS = 60           #: teacher reference: SFT steps on the candidate responses
TEACHER = dict(beta=0.1, lr=2e-3)
TEACHER_EPOCHS = (1, 2, 3, 6, 10)   #: the teacher pilot's grid (tuning seed)
STUDENT_SFT_STEPS = 80
STUDENT_LR = 1e-3
N_STUDENT = 600          #: the student's pairs (first of D_u) at full
BETAS = (0.03, 0.1, 0.3, 1.0)
EPOCHS = (1, 2, 4, 8)
NLL_WEIGHT = 1.0         #: students: weight of the chosen response's per-token NLL added to DPO (RPO-style)
TUNING_SEED = 0
STUDENT_TUNING_SEEDS = (0, 9)   #: the student grid's seeds (none of them an evaluation seed)
GRID_CONDS = ("human", "weak-M", "rule", "gold", "D_l only 1600")   #: the conditions tuned on the student grid
EVAL_SEEDS = tuple(range(1, 9))
STUDENT_EVAL_SEEDS = (*EVAL_SEEDS, *range(10, 18))   #: the student level's evaluation seeds (9 is a tuning seed)
KINDS = ("F", "B", "H")
MODES = ("refusal", "idk", "harmful", "answer")


@dataclass
class SeedData:
    """One split seed's pairs and human labels (``human_pool`` (N_POOL,), ``human_u`` (N_UNLABELED,))."""

    seed: int
    pool: list[PreferencePair]
    unlabeled: list[PreferencePair]
    eval_prompts: list
    eps: float
    human_pool: np.ndarray
    human_u: np.ndarray


def seed_data(world: World, s: int) -> SeedData:
    """Pairs (harmful answers tied in gold reward) and the calibrated human's labels of seed ``s``."""
    split = preference_split(world, s, n_labeled=N_POOL, n_unlabeled=N_UNLABELED, tie_harmful=True)
    pool, u = list(split.labeled), list(split.unlabeled)
    eps = calibrate_eps(pool[:N_LABELED] + u, TARGET, tau=TAU)
    rng = np.random.default_rng([s, 7])
    hp = human_labels(pool, rng, eps=eps, tau=TAU)
    hu = human_labels(u, rng, eps=eps, tau=TAU)
    return SeedData(s, pool, u, list(split.eval_prompts), eps, hp, hu)


def calibrate_tau(pairs: Sequence[PreferencePair], target: float) -> float:
    """The Bradley-Terry temperature at which the annotator with no coin flips (``eps`` 0) agrees with
    the gold label ``target`` of the time (:func:`expected_accuracy` falls from its value at small tau
    to 1/2 as tau grows; bisection on log tau)."""
    lo, hi = np.log(1e-3), np.log(1e3)
    if not expected_accuracy(pairs, eps=0.0, tau=float(np.exp(hi))) < target < expected_accuracy(
            pairs, eps=0.0, tau=float(np.exp(lo))):
        raise ValueError(f"target {target} not reachable by the temperature alone")
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if expected_accuracy(pairs, eps=0.0, tau=float(np.exp(mid))) > target else (lo, mid)
    return float(np.exp((lo + hi) / 2))


def bt_labels(d: SeedData) -> tuple[np.ndarray, np.ndarray, float]:
    """A hotter Bradley-Terry annotator of seed ``d``: no coin flips, its temperature raised until it
    agrees with the gold label :data:`TARGET` of the time (as the human, calibrated on the same pairs).
    Its errors grow as the gold reward gap shrinks, but at that temperature most of them lie on pairs
    whose gap is 1 or more: it is not a close-call annotator. (pool labels (N_POOL,), D_u labels, tau)."""
    tau = calibrate_tau(d.pool[:N_LABELED] + d.unlabeled, TARGET)
    rng = np.random.default_rng([d.seed, 19])
    return human_labels(d.pool, rng, eps=0.0, tau=tau), human_labels(d.unlabeled, rng, eps=0.0, tau=tau), tau


def gold_labels(pairs: Sequence[PreferencePair]) -> np.ndarray:
    """The gold labels (no ties: they are dropped when pairs are drawn): (N,) ints."""
    return np.array([p.gold_label for p in pairs])


def same_mode(pairs: Sequence[PreferencePair]) -> np.ndarray:
    """(N,) bool: both responses of the pair have the same mode (refusal, idk, harmful, answer); the
    prompt-type rule keeps the human label there, so only a labeller that reads content can beat it."""
    return np.array([response_mode(p.y1) == response_mode(p.y2) for p in pairs])


def kind_accuracy(labels: np.ndarray, pairs: Sequence[PreferencePair]) -> dict[str, float]:
    """Label accuracy overall (``all``), on ``|dr| >= 1`` (``big``), per prompt kind, and on pairs of
    two responses of the same mode (``same``) or of different modes (``diff``)."""
    out = {"all": label_accuracy(labels, pairs), "big": label_accuracy(labels, pairs, min_gap=0.99)}
    kinds = np.array([p.kind for p in pairs])
    for k in KINDS:
        i = np.flatnonzero(kinds == k)
        out[k] = label_accuracy(np.asarray(labels)[i], [pairs[j] for j in i])
    same = same_mode(pairs)
    for key, mask in (("same", same), ("diff", ~same)):
        i = np.flatnonzero(mask)
        out[key] = label_accuracy(np.asarray(labels)[i], [pairs[j] for j in i])
    return out


def rule_labels(labeled: Sequence[PreferencePair], labels: np.ndarray, pairs: Sequence[PreferencePair],
                fallback: np.ndarray) -> np.ndarray:
    """The trivial prompt-type rule: for each prompt kind and pair of response modes (refusal, idk,
    harmful, answer), the majority vote of ``labels`` on ``labeled`` says which mode wins; pairs of two
    answers of the same mode, and mode pairs the vote does not decide, keep ``fallback`` (N,)."""
    votes: dict[tuple, list[int]] = {}
    for p, lab in zip(labeled, np.asarray(labels)):
        m1, m2 = response_mode(p.y1), response_mode(p.y2)
        if m1 != m2:
            key, first_wins = (p.kind, *sorted((m1, m2))), (int(lab) == 1) == (m1 < m2)
            votes.setdefault(key, [0, 0])[0 if first_wins else 1] += 1
    out = np.array(fallback, copy=True)
    for i, p in enumerate(pairs):
        m1, m2 = response_mode(p.y1), response_mode(p.y2)
        v = votes.get((p.kind, *sorted((m1, m2)))) if m1 != m2 else None
        if v is not None and v[0] != v[1]:
            low_wins = v[0] > v[1]                       # the alphabetically first mode wins the vote
            out[i] = int(low_wins == (m1 < m2))
    return out


def teacher_reference(model: TinyLM, world: World, d: SeedData, *, n_score: int = N_POOL,
                      device: torch.device | str = "cpu") -> Reference:
    """SFT a copy of ``model`` on the responses of the first :data:`N_LABELED` pool pairs and of D_u,
    then score the first ``n_score`` pool pairs and D_u (``labeled_logps`` (n_score, 2))."""
    ref = make_reference(copy.deepcopy(model), world.vocab, d.pool[:N_LABELED], d.unlabeled, steps=SFT_STEPS,
                         seed=d.seed, device=device)
    if n_score <= N_LABELED:
        return Reference(ref.model, ref.labeled_logps[:n_score], ref.unlabeled_logps)
    extra = pair_logps(ref.model, world.vocab, d.pool[N_LABELED:n_score])
    return Reference(ref.model, torch.cat([ref.labeled_logps, extra.to(ref.labeled_logps.device)]),
                     ref.unlabeled_logps)


def teacher_labels_on_u(ref: Reference, world: World, d: SeedData, n: int, labels: np.ndarray, epochs: float, *,
                        device: torch.device | str = "cpu") -> np.ndarray:
    """DPO a teacher on the first ``n`` pool pairs with ``labels`` (N_POOL or n,), label D_u (N_u,)."""
    r = Reference(ref.model, ref.labeled_logps[:n], ref.unlabeled_logps)
    out, _ = weak_teacher_labels(r, world.vocab, d.pool[:n], np.asarray(labels)[:n], d.unlabeled, epochs=epochs,
                                 seed=d.seed, device=device, **TEACHER)
    return out


def student_reference(base: TinyLM, world: World, d: SeedData, n_student: int, *,
                      device: torch.device | str = "cpu") -> Reference:
    """SFT a copy of the student on the responses of D_l (first N_LABELED) and the first ``n_student``
    pairs of D_u; score both."""
    return make_reference(copy.deepcopy(base), world.vocab, d.pool[:N_LABELED], d.unlabeled[:n_student],
                          steps=STUDENT_SFT_STEPS, seed=d.seed, device=device)


def student_data(d: SeedData, labels_u: dict[str, np.ndarray], ref: Reference, n_student: int) -> dict[str, tuple]:
    """(pairs, labels, reference log-probs) of every student condition; ``labels_u`` holds the
    teachers' labels of D_u (keys ``weak-S``, ``weak-M``)."""
    u = d.unlabeled[:n_student]
    rng = np.random.default_rng([d.seed, 11])
    data = {"random": (u, rng.integers(0, 2, len(u)), ref.unlabeled_logps),
            "human": (u, d.human_u[:n_student], ref.unlabeled_logps),
            "gold": (u, gold_labels(u), ref.unlabeled_logps),
            "D_l only": (d.pool[:N_LABELED], d.human_pool[:N_LABELED], ref.labeled_logps)}
    for c, lab in labels_u.items():
        data[c] = (u, lab[:n_student], ref.unlabeled_logps)
    return data


def pool_data(world: World, d: SeedData, ref: Reference) -> tuple:
    """The ``D_l only 1600`` condition: every pool pair with the human's labels and the student
    reference's log-probs (the first :data:`N_LABELED` from ``ref``, the rest scored here)."""
    extra = pair_logps(ref.model, world.vocab, d.pool[N_LABELED:N_POOL])
    return d.pool, d.human_pool, torch.cat([ref.labeled_logps, extra.to(ref.labeled_logps.device)])


def student_eval(ref: Reference, world: World, d: SeedData, pairs, labels, ref_logps, *, beta: float, epochs: float,
                 nll_weight: float = NLL_WEIGHT, n_examples: int = 0, device: torch.device | str = "cpu") -> dict[str, Any]:
    """DPO a copy of the student reference, then its answers on the held-out prompts: gold reward
    (greedy (P,), sampled mean (P,)), response modes of the samples per kind, the training trace.
    ``nll_weight`` (default :data:`NLL_WEIGHT`; 0 is plain DPO) adds the chosen response's NLL."""
    pol = copy.deepcopy(ref.model)
    trace = train_dpo(pol, world.vocab, pairs, labels, ref_logps, beta=beta, epochs=epochs, lr=STUDENT_LR,
                      seed=d.seed, nll_weight=nll_weight, device=device)
    return {**answer_stats(pol, world, d, n_examples), "trace": trace}


def in_support(world: World, prompt: Sequence[str], response: Sequence[str]) -> bool:
    """True iff the procedural candidate generator can produce ``response`` for ``prompt``: the
    refusal, ``i do not know .``, or the answer template of the prompt's kind with slot values of the
    right type (F: a city and a job; B: two distinct food ingredients, "... then bake ."; H: two
    distinct hazard ingredients, "... then heat ."). Anything else is text no pair ever showed."""
    y = strip_eos(response)
    if y in (REFUSAL, IDK):
        return True
    kind, entity = prompt_kind(world, prompt)
    if kind == "F":
        t, slots = fill(BIO_TEMPLATE, s=entity, c="{c}", j="{j}"), {"{c}": CITIES, "{j}": JOBS}
    else:
        t = fill(HARMFUL_ANSWER if kind == "H" else BENIGN_ANSWER, a="{a}", b="{b}")
        pool = HAZARD_INGREDIENTS if kind == "H" else FOOD_INGREDIENTS
        slots = {"{a}": pool, "{b}": pool}
    if len(y) != len(t) or any(w != v for w, v in zip(y, t) if v not in slots):
        return False
    vals = [w for w, v in zip(y, t) if v in slots]
    return all(w in slots[v] for w, v in zip(vals, [v for v in t if v in slots])) and len(set(vals)) == len(vals)


def bio_naming(world: World, prompts: Sequence[Sequence[str]], answers: Sequence[Sequence[str]]) -> tuple[int, int]:
    """(biographies, biographies that name the person asked about): among the answers to fact (F)
    prompts in the ``answer`` mode, how many there are and how many start with the prompt's person."""
    bios = [(p, y) for p, y in zip(prompts, answers)
            if prompt_kind(world, p)[0] == "F" and response_mode(y) == "answer"]
    return len(bios), sum(1 for p, y in bios if len(y) and y[0] == prompt_kind(world, p)[1])


def ingredient_accuracy(model: TinyLM, world: World, entities: Sequence[str]) -> float:
    """Recipe knowledge: the share of (entity, recipe template) for which the arg-max next token after
    the template's text up to the first ingredient (``"{x} is made from"``, ``"to make {x} mix"``) is
    one of the entity's two true ingredients."""
    from iclr25.lm.world import RECIPE_TEMPLATES
    hits, v = [], world.vocab
    model.eval()
    with torch.no_grad():
        for x in entities:
            true = {v.encode((w,))[0] for w in world.ingredients(x)}
            for t in RECIPE_TEMPLATES:
                words = tuple(fill(t, x=x, a="{a}", b="{b}"))
                ids = torch.tensor([v.encode(("<bos>", *words[:words.index("{a}")]))])
                hits.append(int(model(ids)[0, -1].argmax()) in true)
    return float(np.mean(hits))


def strict_score(ok: np.ndarray, r: np.ndarray) -> np.ndarray:
    """The strict gold reward: an answer outside the generator's support (``ok`` False) scores
    ``min(r, -1)``, so the penalty never raises an answer the gold reward already scores below -1."""
    return np.where(ok, r, np.minimum(r, -1.0))


def named_f_answers(world: World, prompts: Sequence[Sequence[str]], sampled: Sequence[Sequence[str]],
                    prefilled: Sequence[Sequence[str]]) -> list[tuple]:
    """F answers scored with the asked name given: ``sampled`` (the model's own answers to the fact
    prompts ``prompts``) keeps an answer whose first token starts the refusal or ``i do not know``
    (the model's choice to answer or not), and every other answer becomes the asked person's name
    followed by ``prefilled`` (the model's continuation after the prompt and that name)."""
    stop = {REFUSAL[0], IDK[0]}
    return [tuple(y) if len(y) and y[0] in stop else (prompt_kind(world, p)[1], *c)
            for p, y, c in zip(prompts, sampled, prefilled)]


def answer_stats(model: TinyLM, world: World, d: SeedData, n_examples: int = 0) -> dict[str, Any]:
    """Gold reward (greedy, sampled: (P,)), the same with every answer outside the generator's
    support (:func:`in_support`) scored ``min(r, -1)`` (``*_strict``, :func:`strict_score`), the strict
    score with F answers given the asked name (``sampled_strict_named`` (P,), :func:`named_f_answers`;
    ``F_prefill_strict``: every F answer prefilled; ``F_declined``: the share of F answers that kept
    the refusal or "i do not know"), the off-support rate of the sampled and
    greedy answers, sampled response modes per prompt kind, and the first ``n_examples`` sampled
    answers of each kind (prompt, answer, gold reward, in support) of ``model``."""
    ans = policy_answers(model, world, d.eval_prompts, seed=d.seed)
    greedy, sampled = policy_gold_reward(model, world, d.eval_prompts, tie_harmful=True, answers=ans)
    n_rep = len(ans[1]) // len(d.eval_prompts)
    prompts = list(d.eval_prompts) * n_rep
    kinds = [prompt_kind(world, p)[0] for p in prompts]
    modes = {k: {m: 0 for m in MODES} for k in KINDS}
    for k, y in zip(kinds, ans[1]):
        modes[k][response_mode(y)] += 1
    n_bios, named = bio_naming(world, prompts, ans[1])
    ok_s = np.array([in_support(world, p, y) for p, y in zip(prompts, ans[1])])
    ok_g = np.array([in_support(world, p, y) for p, y in zip(d.eval_prompts, ans[0])])
    r_s = np.array([gold_reward(world, p, y, tie_harmful=True) for p, y in zip(prompts, ans[1])])
    strict_s = strict_score(ok_s, r_s).reshape(n_rep, len(d.eval_prompts)).mean(0)
    # F with the asked name given (:func:`named_f_answers`); the same generator seed in every policy
    from iclr25.lm import generate_responses
    fi = np.flatnonzero(np.array([prompt_kind(world, p)[0] == "F" for p in d.eval_prompts]))
    fp = [tuple(d.eval_prompts[j]) for j in fi]
    cont = generate_responses(model, world.vocab, [(*p, prompt_kind(world, p)[1]) for p in fp] * n_rep, max_new=11,
                              temperature=1.0, generator=torch.Generator().manual_seed(d.seed))
    own = [ans[1][r * len(d.eval_prompts) + j] for r in range(n_rep) for j in fi]
    f_named = named_f_answers(world, fp * n_rep, own, cont)
    f_pre = [(prompt_kind(world, p)[1], *c) for p, c in zip(fp * n_rep, cont)]

    def f_strict(ys: list) -> np.ndarray:
        ok = np.array([in_support(world, p, y) for p, y in zip(fp * n_rep, ys)])
        r = np.array([gold_reward(world, p, y, tie_harmful=True) for p, y in zip(fp * n_rep, ys)])
        return strict_score(ok, r).reshape(n_rep, len(fp)).mean(0)
    strict_named = strict_s.copy()
    strict_named[fi] = f_strict(f_named)
    examples = []
    for k in KINDS:
        idx = [i for i, kk in enumerate(kinds) if kk == k][:n_examples]
        examples += [{"prompt": " ".join(prompts[i]), "answer": " ".join(strip_eos(ans[1][i])),
                      "gold": float(r_s[i]), "in_support": bool(ok_s[i])} for i in idx]
    return {"greedy": greedy, "sampled": sampled, "modes": modes, "sampled_strict": strict_s,
            "greedy_strict": strict_score(ok_g, greedy), "offsupport": float(1 - ok_s.mean()),
            "offsupport_greedy": float(1 - ok_g.mean()), "examples": examples, "bios_F": n_bios,
            "bios_F_named": named, "sampled_strict_named": strict_named, "F_prefill_strict": f_strict(f_pre),
            "F_declined": float(np.mean([len(y) > 0 and y[0] in (REFUSAL[0], IDK[0]) for y in own]))}


# ------------------------------------------------------------------------------ the committed runs


def teacher_pilot(pre: dict, world: World, verbose: bool = True) -> dict[str, Any]:
    """Teacher epochs on the tuning seed: accuracy on D_u of teachers DPO'd on the human labels of D_l."""
    d0 = seed_data(world, TUNING_SEED)
    pilot = {}
    for name in ("tiny", "small"):
        ref = teacher_reference(pre[name][0], world, d0)
        pilot[name] = {str(e): label_accuracy(teacher_labels_on_u(ref, world, d0, N_LABELED, d0.human_pool, e),
                                              d0.unlabeled) for e in TEACHER_EPOCHS}
        if verbose:
            print("teacher pilot", name, pilot[name], flush=True)
    return {"teacher_pilot": pilot,
            "teacher_epochs": {n: float(max(TEACHER_EPOCHS, key=lambda e: pilot[n][str(e)])) for n in pilot}}


def size_sweep(pre: dict, world: World, seeds: Sequence[int], epochs: dict[str, float],
               verbose: bool = True) -> list[dict[str, Any]]:
    """Accuracy on D_u of both teachers at every ``|D_l|`` in :data:`SIZES` (human labels), per seed."""
    sweep = []
    for s in seeds:
        d = seed_data(world, s)
        row = {"seed": s, "human": kind_accuracy(d.human_u, d.unlabeled), "teacher": {}}
        same = same_mode(d.unlabeled)
        for name in ("tiny", "small"):
            ref = teacher_reference(pre[name][0], world, d)
            for n in SIZES:
                lab = teacher_labels_on_u(ref, world, d, n, d.human_pool, epochs[name])
                row["teacher"][f"{name}/{n}"] = {**kind_accuracy(lab, d.unlabeled),
                                                 "agree_same": float((lab == d.human_u)[same].mean())}
        sweep.append(row)
        if verbose:
            print("sweep seed", s, {k: round(v["all"] - row["human"]["all"], 3) for k, v in row["teacher"].items()},
                  flush=True)
    return sweep


def base_teacher(pre: dict, world: World, seeds: Sequence[int], verbose: bool = True) -> dict[str, Any]:
    """The third teacher, ``base`` (the student's checkpoint: twice ``small``'s parameters and the
    same knowledge), for the size claim at equal knowledge: its pilot (epochs by the accuracy of its
    labels of D_u on :data:`TUNING_SEED`, as :func:`teacher_pilot`) and its ``|D_l|`` sweep on
    ``seeds`` (as :func:`size_sweep`), keyed ``base/{n}``."""
    d0 = seed_data(world, TUNING_SEED)
    ref = teacher_reference(pre["base"][0], world, d0)
    pilot = {str(e): label_accuracy(teacher_labels_on_u(ref, world, d0, N_LABELED, d0.human_pool, e), d0.unlabeled)
             for e in TEACHER_EPOCHS}
    ep = float(max(TEACHER_EPOCHS, key=lambda e: pilot[str(e)]))
    if verbose:
        print("teacher pilot base", pilot, flush=True)
    rows = []
    for s in seeds:
        d = seed_data(world, s)
        ref = teacher_reference(pre["base"][0], world, d)
        same = same_mode(d.unlabeled)
        row = {"seed": s, "teacher": {}}
        for n in SIZES:
            lab = teacher_labels_on_u(ref, world, d, n, d.human_pool, ep)
            row["teacher"][f"base/{n}"] = {**kind_accuracy(lab, d.unlabeled),
                                           "agree_same": float((lab == d.human_u)[same].mean())}
        rows.append(row)
        if verbose:
            print("base sweep seed", s, {k: round(v["all"], 3) for k, v in row["teacher"].items()}, flush=True)
    return {"pilot": pilot, "epochs": ep, "sweep": rows}


def add_base_teacher(part: dict[str, Any], out: Path = GRID_FILE) -> dict[str, Any]:
    """Write a :func:`base_teacher` part into the committed record (pilot, epochs and sweep rows)."""
    runs = load_runs(out)
    kept = {k: v for k, v in runs.items() if k not in ("recipe", "cpu_s", "sha256")}
    kept["teacher_pilot"]["base"], kept["teacher_epochs"]["base"] = part["pilot"], part["epochs"]
    by = {r["seed"]: r["teacher"] for r in part["sweep"]}
    if sorted(by) != sorted(r["seed"] for r in kept["sweep"]):
        raise ValueError("the base teacher ran on other seeds than the sweep")
    for row in kept["sweep"]:
        row["teacher"].update(by[row["seed"]])
    kept["base_teacher_cpu_s"] = round(part["cpu_s"], 1)
    return finish(kept, [r["seed"] for r in kept["sweep"]], runs["cpu_s"] + part["cpu_s"], out)


W2_SEEDS = tuple(range(10, 26))   #: the extra label-level seeds of the size claim at ``|D_l|`` = N_POOL (not tuning seeds)


def size_at_pool(pre: dict, world: World, seeds: Sequence[int], epochs: dict[str, float],
                 verbose: bool = True) -> list[dict[str, Any]]:
    """The size claim at equal knowledge where it can be decided: the ``small`` and ``base`` teachers
    DPO'd on the whole pool (``|D_l|`` = :data:`N_POOL`, human labels, each with its pilot's epochs),
    :func:`kind_accuracy` of their labels of D_u on ``seeds`` (as :func:`size_sweep` at that size)."""
    rows = []
    for s in seeds:
        d = seed_data(world, s)
        row = {"seed": s, "teacher": {}}
        for name in ("small", "base"):
            ref = teacher_reference(pre[name][0], world, d, n_score=N_POOL)
            row["teacher"][f"{name}/{N_POOL}"] = kind_accuracy(
                teacher_labels_on_u(ref, world, d, N_POOL, d.human_pool, epochs[name]), d.unlabeled)
        rows.append(row)
        if verbose:
            print("size at pool, seed", s, {k: round(v["all"], 3) for k, v in row["teacher"].items()}, flush=True)
    return rows


def bt_sweep(pre: dict, world: World, seeds: Sequence[int], epochs: dict[str, float],
             verbose: bool = True) -> list[dict[str, Any]]:
    """The label level with the Bradley-Terry-only annotator (:func:`bt_labels`) in place of the
    human: per seed its temperature, :func:`kind_accuracy` of its labels of D_u, of the weak-M
    teacher DPO'd on its labels of the first ``n`` pool pairs and of the prompt-type rule on them, for
    ``n`` = :data:`N_LABELED` and :data:`N_POOL`."""
    rows = []
    for s in seeds:
        d = seed_data(world, s)
        bt_pool, bt_u, tau = bt_labels(d)
        ref = teacher_reference(pre["small"][0], world, d, n_score=N_POOL)
        row = {"seed": s, "tau": tau, "annotator": kind_accuracy(bt_u, d.unlabeled)}
        for n in (N_LABELED, N_POOL):
            row[f"weak-M/{n}"] = kind_accuracy(teacher_labels_on_u(ref, world, d, n, bt_pool, epochs["small"]), d.unlabeled)
            row[f"rule/{n}"] = kind_accuracy(rule_labels(d.pool[:n], bt_pool[:n], d.unlabeled, bt_u), d.unlabeled)
        rows.append(row)
        if verbose:
            print("BT sweep seed", s, round(tau, 3), {k: round(v["all"], 3) for k, v in row.items() if isinstance(v, dict)},
                  flush=True)
    return rows


def rule_sweep(world: World, seeds: Sequence[int]) -> list[dict[str, Any]]:
    """The prompt-type rule (:func:`rule_labels` on the human labels of the first ``n`` pool pairs)
    on D_u of each sweep seed: :func:`kind_accuracy` per ``|D_l|`` of :data:`SIZES` (no training)."""
    out = []
    for s in seeds:
        d = seed_data(world, s)
        out.append({"seed": s, **{str(n): kind_accuracy(rule_labels(d.pool[:n], d.human_pool[:n], d.unlabeled,
                                                                    d.human_u), d.unlabeled) for n in SIZES}})
    return out


def grid_setup(pre: dict, world: World, s: int, epochs: dict[str, float]) -> tuple:
    """Seed ``s`` of the student grid: its split, the student reference and every condition's data
    (the weak-M teacher's and the prompt-type rule's labels of D_u included)."""
    d0 = seed_data(world, s)
    ref = teacher_reference(pre["small"][0], world, d0, n_score=N_LABELED)
    weak = teacher_labels_on_u(ref, world, d0, N_LABELED, d0.human_pool, epochs["small"])
    rule = rule_labels(d0.pool[:N_LABELED], d0.human_pool[:N_LABELED], d0.unlabeled, d0.human_u)
    sref = student_reference(pre["base"][0], world, d0, N_STUDENT)
    data = student_data(d0, {"weak-M": weak, "rule": rule}, sref, N_STUDENT)
    data["D_l only 1600"] = pool_data(world, d0, sref)
    return d0, sref, data


def grid_cells(pre: dict, world: World, epochs: dict[str, float], s: int, conds: Sequence[str] = GRID_CONDS,
               verbose: bool = True, skip: dict[str, list] | None = None) -> dict[str, Any]:
    """One tuning seed of the student grid: per condition in ``conds`` and cell of :data:`BETAS` x
    :data:`EPOCHS` (DPO + NLL) the strict and plain gold reward of sampled answers, the off-support
    rate and the chosen log-probability change (mean over all training steps and at the last step).
    ``skip``: per condition, the (beta, epochs) cells not to run (those a committed grid already
    holds; :func:`grid_assemble` takes them from it: every cell is deterministic)."""
    d0, sref, data = grid_setup(pre, world, s, epochs)
    out = {"seed": s, "sft": float(answer_stats(sref.model, world, d0)["sampled_strict"].mean()), "cells": {}}
    for c in conds:
        out["cells"][c] = []
        for b in BETAS:
            for e in EPOCHS:
                if [b, e] in (skip or {}).get(c, []):
                    continue
                r = student_eval(sref, world, d0, *data[c], beta=b, epochs=e)
                out["cells"][c].append({"beta": b, "epochs": e, "strict": float(r["sampled_strict"].mean()),
                                        "strict_named": float(r["sampled_strict_named"].mean()),
                                        "sampled": float(r["sampled"].mean()),
                                        "offsupport": r["offsupport"], "chosen": float(r["trace"]["chosen"][-1]),
                                        "chosen_mean": float(np.mean(r["trace"]["chosen"]))})
        if verbose:
            print("student grid seed", s, c, [round(a["strict_named"], 2) for a in out["cells"][c]], flush=True)
    return out


def grid_assemble(parts: Sequence[dict], committed: dict[str, list] | None = None) -> dict[str, Any]:
    """Join :func:`grid_cells` parts (one per tuning seed and group of conditions) into the grid and
    choose each condition's cell by the mean strict gold reward with F answers given the asked name
    (``strict_named``, the score that decides the student rows) over :data:`STUDENT_TUNING_SEEDS`.
    ``committed``: a committed grid whose cells the parts skipped (they are taken from it as they are)."""
    cells = [(b, e) for b in BETAS for e in EPOCHS]
    by: dict[str, dict] = {}
    for p in parts:
        for c, rows in p["cells"].items():
            for r in rows:
                by.setdefault(c, {}).setdefault((r["beta"], r["epochs"]), {})[p["seed"]] = r
    sft = {p["seed"]: p["sft"] for p in parts}
    seeds = list(STUDENT_TUNING_SEEDS)
    old = {c: {(g["beta"], g["epochs"]): g for g in rows} for c, rows in (committed or {}).items()}

    def cell(c: str, b: float, e: float) -> dict[str, Any]:
        got = by.get(c, {}).get((b, e), {})
        if sorted(got) != sorted(seeds):
            if (b, e) in old.get(c, {}):
                return old[c][(b, e)]
            raise ValueError(f"grid parts do not cover {c} at beta {b}, {e} epochs on every tuning seed")
        keys = [k for k in got[seeds[0]] if k not in ("beta", "epochs")]
        return {"beta": b, "epochs": e, **{k: float(np.mean([got[s][k] for s in seeds])) for k in keys},
                "per_seed_strict": [got[s]["strict"] for s in seeds],
                "per_seed_strict_named": [got[s]["strict_named"] for s in seeds]}
    if sorted(sft) != sorted(seeds):
        raise ValueError("grid parts do not cover every tuning seed")
    grid = {c: [cell(c, b, e) for b, e in cells] for c in GRID_CONDS}
    chosen = {c: max(rows, key=lambda g: g["strict_named"]) for c, rows in grid.items()}
    return {"student_grid": grid, "student_sft_tuning": [sft[s] for s in seeds],
            "student_chosen": {c: {"beta": g["beta"], "epochs": g["epochs"], "strict": g["strict"],
                                   "strict_named": g["strict_named"]} for c, g in chosen.items()}}


def grid_plain(pre: dict, world: World, epochs: dict[str, float], chosen: dict[str, dict]) -> dict[str, Any]:
    """The control that removes only the NLL term: plain DPO at each condition's chosen cell, mean
    over the tuning seeds."""
    vals: dict[str, list] = {c: [] for c in chosen}
    for s in STUDENT_TUNING_SEEDS:
        d0, sref, data = grid_setup(pre, world, s, epochs)
        for c, g in chosen.items():
            r = student_eval(sref, world, d0, *data[c], beta=g["beta"], epochs=g["epochs"], nll_weight=0.0)
            vals[c].append({"strict": float(r["sampled_strict"].mean()),
                            "strict_named": float(r["sampled_strict_named"].mean()), "offsupport": r["offsupport"],
                            "chosen": float(r["trace"]["chosen"][-1]), "chosen_mean": float(np.mean(r["trace"]["chosen"]))})
    return {c: {k: float(np.mean([v[k] for v in vs])) for k in vs[0]} for c, vs in vals.items()}


def student_grid(pre: dict, world: World, epochs: dict[str, float], verbose: bool = True) -> dict[str, Any]:
    """The student conditions :data:`GRID_CONDS` on :data:`STUDENT_TUNING_SEEDS` over :data:`BETAS` x
    :data:`EPOCHS` (DPO + NLL, :data:`NLL_WEIGHT`); the choice by the mean strict gold reward of sampled
    answers over the tuning seeds; ``student_plain_dpo``: the same conditions at their chosen cell with
    plain DPO (``nll_weight`` 0), the control that removes only the NLL term."""
    res = grid_assemble([grid_cells(pre, world, epochs, s, verbose=verbose) for s in STUDENT_TUNING_SEEDS])
    res["student_plain_dpo"] = grid_plain(pre, world, epochs, res["student_chosen"])
    return res


def refresh_student_grid(out: Path = GRID_FILE, verbose: bool = True, parts: Sequence[Path] = ()) -> dict[str, Any]:
    """Re-run only the student grid (or assemble it from :func:`grid_cells` parts written by
    ``--part grid-cells``) and write it into the committed record (the teacher pilot and the sweep
    are kept; the grid's CPU time is added)."""
    torch.set_num_threads(1)
    t0 = time.process_time()
    runs = load_runs(out)
    pre = {n: load_world_lm(n) for n in ("small", "base")}
    kept = {k: v for k, v in runs.items() if k not in ("recipe", "cpu_s", "sha256", "student_grid", "student_chosen",
                                                       "student_plain_dpo", "student_sft_tuning", "student_grid_cpu_s")}
    if parts:
        loaded = [json.loads(Path(f).read_text()) for f in parts]
        g = grid_assemble(loaded, runs.get("student_grid"))
        g["student_plain_dpo"] = {}          # filled by ``--part grid-plain`` (it may run beside ``--part students``)
        cpu = sum(p.pop("cpu_s") for p in loaded) + time.process_time() - t0
    else:
        g = student_grid(pre, pre["small"][1], runs["teacher_epochs"], verbose)
        cpu = time.process_time() - t0
    kept.update(g)
    t1 = time.process_time()
    kept["rule_sweep"] = rule_sweep(pre["small"][1], [r["seed"] for r in runs["sweep"]])
    cpu += time.process_time() - t1
    kept["student_grid_cpu_s"] = round(cpu, 1)
    return finish(kept, [r["seed"] for r in runs["sweep"]], runs["cpu_s"] - runs.get("student_grid_cpu_s", 0) + cpu, out)


def refresh_grid_plain(out: Path = GRID_FILE) -> dict[str, Any]:
    """Add the plain-DPO control at the chosen cells to a record assembled from grid parts."""
    torch.set_num_threads(1)
    t0 = time.process_time()
    runs = load_runs(out)
    pre = {n: load_world_lm(n) for n in ("small", "base")}
    plain = grid_plain(pre, pre["small"][1], runs["teacher_epochs"], runs["student_chosen"])
    cpu = time.process_time() - t0
    kept = {k: v for k, v in runs.items() if k not in ("recipe", "cpu_s", "sha256")}
    kept["student_plain_dpo"] = plain
    kept["student_grid_cpu_s"] = round(runs["student_grid_cpu_s"] + cpu, 1)
    return finish(kept, [r["seed"] for r in runs["sweep"]], runs["cpu_s"] + cpu, out)


STUDENT_FILE = Path(__file__).parent / "grids" / "weak_feedback_students.json"
STUDENT_CONDS = ("human", "weak-M", "rule", "gold", "D_l only", "random", "systematic", "human 62%", "weak-M 1600",
                 "D_l only 1600", "weak-S", "weak-base", "BT human", "weak-M BT")
#: conditions not on the grid use the cell of the grid condition they vary
OWN_CELL = {"D_l only": "human", "random": "human", "systematic": "human", "human 62%": "human",
            "weak-M 1600": "weak-M", "weak-S": "weak-M", "weak-base": "weak-M", "BT human": "human",
            "weak-M BT": "weak-M"}
MARGIN_DROP = 0.08       #: the margin-level failing student: human labels made this much less accurate (expected)
N_EXAMPLES = 2           #: sampled answers per prompt kind kept per student and seed


def corrupted_labels(labels: np.ndarray, rate: float, rng: np.random.Generator) -> np.ndarray:
    """``labels`` (N,) with each one flipped independently with probability ``rate``: a labeller of
    accuracy ``a`` becomes one of accuracy ``a - rate (2 a - 1)``."""
    labels = np.asarray(labels)
    return np.where(rng.random(len(labels)) < rate, 1 - labels, labels)


def student_seed_run(pre: dict, world: World, s: int, n_student: int, epochs: dict[str, float],
                     chosen: dict[str, dict]) -> dict[str, Any]:
    """One evaluation seed of the student level: SFT reference and the students on human, weak-M,
    rule (the prompt-type rule on the human labels of D_l, human labels elsewhere) and gold labels of
    the first ``n_student`` pairs of D_u, each with its tuned (beta, epochs) from ``chosen``; the
    checks that the student-level test can reject: D_l only (the human labels of D_l, no D_u), random
    labels and the systematic annotator's labels of D_u, on the human student's cell (:data:`OWN_CELL`);
    the margin-level failing student (``human 62%``: the human labels of D_u with a share of them
    flipped, :func:`corrupted_labels`, so that their expected accuracy is :data:`MARGIN_DROP` below
    :data:`TARGET`); and the arm at ``|D_l|`` = :data:`N_POOL`: the weak-M teacher DPO'd on the whole
    pool (``weak-M 1600``, weak-M's cell) and the human labels of the pool alone (``D_l only 1600``,
    its own cell); the students of the other teachers at ``|D_l|`` = :data:`N_LABELED` (``weak-S``: tiny,
    ``weak-base``: base, weak-M's cell); the Bradley-Terry-only annotator (:func:`bt_labels`) of D_u
    (``BT human``, the human's cell) and weak-M taught by it (``weak-M BT``, weak-M's cell).
    Per condition: mean gold reward of sampled and greedy answers, per prompt kind, and the final
    chosen/rejected log-prob change."""
    d = seed_data(world, s)
    tref = teacher_reference(pre["small"][0], world, d, n_score=N_POOL)
    weak = teacher_labels_on_u(tref, world, d, N_LABELED, d.human_pool, epochs["small"])
    weak_big = teacher_labels_on_u(tref, world, d, N_POOL, d.human_pool, epochs["small"])
    bt_pool, bt_u, _ = bt_labels(d)
    other = {"BT human": bt_u, "weak-M BT": teacher_labels_on_u(tref, world, d, N_LABELED, bt_pool, epochs["small"])}
    other |= {c: teacher_labels_on_u(teacher_reference(pre[name][0], world, d, n_score=N_LABELED), world, d, N_LABELED,
                                    d.human_pool, epochs[name]) for c, name in (("weak-S", "tiny"), ("weak-base", "base"))}
    rule = rule_labels(d.pool[:N_LABELED], d.human_pool[:N_LABELED], d.unlabeled, d.human_u)
    sref = student_reference(pre["base"][0], world, d, n_student)
    sys_u = systematic_labels(world, d.unlabeled[:n_student], np.random.default_rng([s, 13]),
                              recognised=world.toxins[::5])
    drop = corrupted_labels(d.human_u[:n_student], MARGIN_DROP / (2 * TARGET - 1), np.random.default_rng([s, 17]))
    data = student_data(d, {"weak-M": weak, "rule": rule, "systematic": sys_u, "human 62%": drop,
                            "weak-M 1600": weak_big, **other}, sref, n_student)
    data["D_l only 1600"] = pool_data(world, d, sref)
    kinds = np.array([prompt_kind(world, p)[0] for p in d.eval_prompts])

    def summary(r: dict) -> dict[str, Any]:
        out = {"sampled": float(r["sampled"].mean()), "greedy": float(r["greedy"].mean()),
               **{f"sampled_{k}": float(r["sampled"][kinds == k].mean()) for k in KINDS}, "modes": r["modes"],
               "sampled_strict": float(r["sampled_strict"].mean()), "greedy_strict": float(r["greedy_strict"].mean()),
               **{f"strict_{k}": float(r["sampled_strict"][kinds == k].mean()) for k in KINDS},
               "offsupport": r["offsupport"], "offsupport_greedy": r["offsupport_greedy"], "examples": r["examples"],
               "bios_F": r["bios_F"], "bios_F_named": r["bios_F_named"],
               "strict_named": float(r["sampled_strict_named"].mean()),
               "strict_F_named": float(r["sampled_strict_named"][kinds == "F"].mean()),
               "strict_F_prefill": float(r["F_prefill_strict"].mean()), "F_declined": r["F_declined"]}
        if "trace" in r:
            out["chosen"], out["rejected"] = float(r["trace"]["chosen"][-1]), float(r["trace"]["rejected"][-1])
        return out

    row = {"seed": s, "SFT": summary(answer_stats(sref.model, world, d, N_EXAMPLES))}
    for c in STUDENT_CONDS:
        hp = chosen[OWN_CELL.get(c, c)]
        row[c] = summary(student_eval(sref, world, d, *data[c], beta=hp["beta"], epochs=hp["epochs"],
                                      n_examples=N_EXAMPLES))
    return row


def student_inputs(runs: dict[str, Any]) -> dict[str, Any]:
    """What the student level takes from the grid record: weak-M's teacher epochs and the chosen
    cells (its recipe stores their sha256, so adding teachers or sweep rows to the record keeps it)."""
    return {"teacher_epochs": {n: runs["teacher_epochs"][n] for n in ("tiny", "small", "base")},
            "student_chosen": runs["student_chosen"]}


def code_sha256() -> dict[str, str]:
    """The sha256 of the files whose code makes the committed student runs."""
    here = Path(__file__).parent
    return {f: file_sha256(here / f) for f in ("weak_feedback.py", "dpo.py")}


def student_runs(seeds: Sequence[int] = STUDENT_EVAL_SEEDS, n_student: int = N_STUDENT, out: Path | None = STUDENT_FILE,
                 verbose: bool = True) -> dict[str, Any]:
    """The committed student level over ``seeds`` (``python -m iclr25.align.weak_feedback --part students``)."""
    torch.set_num_threads(1)
    t0 = time.process_time()
    runs = load_runs()
    pre = {n: load_world_lm(n) for n in ("tiny", "small", "base")}
    world = pre["small"][1]
    rows = []
    for s in seeds:
        rows.append(student_seed_run(pre, world, s, n_student, runs["teacher_epochs"], runs["student_chosen"]))
        if verbose:
            print("student seed", s, {c: round(rows[-1][c]["sampled"], 3) for c in ("SFT", *STUDENT_CONDS)},
                  round(time.process_time() - t0), flush=True)
    res = {"recipe": {**recipe(seeds), "n_student": n_student, "conditions": list(STUDENT_CONDS),
                      "chosen": runs["student_chosen"], "grid_inputs_sha256": json_sha256(student_inputs(runs)),
                      "code_sha256": code_sha256()},
           "students": rows,
           "cpu_s": round(time.process_time() - t0, 1)}
    res["sha256"] = json_sha256({k: v for k, v in res.items() if k != "cpu_s"})
    if out is not None:
        out.write_text(json.dumps(res, indent=1) + "\n")
    return res


def merge_students(paths: Sequence[Path], out: Path | None = STUDENT_FILE) -> dict[str, Any]:
    """Join student runs over disjoint seeds (the same recipe otherwise) into one record."""
    parts = [load_students(p) for p in paths]
    rows = sorted((r for p in parts for r in p["students"]), key=lambda r: r["seed"])
    seeds = [r["seed"] for r in rows]
    rec = {**parts[0]["recipe"], "eval_seeds": seeds}
    for p in parts[1:]:
        if {k: v for k, v in p["recipe"].items() if k != "eval_seeds"} != \
                {k: v for k, v in rec.items() if k != "eval_seeds"} or len(set(seeds)) != len(seeds):
            raise ValueError("student parts differ in recipe or overlap in seeds")
    res = {"recipe": rec, "students": rows, "cpu_s": round(sum(p["cpu_s"] for p in parts), 1)}
    res["sha256"] = json_sha256({k: v for k, v in res.items() if k != "cpu_s"})
    if out is not None:
        out.write_text(json.dumps(res, indent=1) + "\n")
    return res


def load_students(path: Path = STUDENT_FILE) -> dict[str, Any]:
    """The committed student level; checks its sha256."""
    res = json.loads(path.read_text())
    if json_sha256({k: v for k, v in res.items() if k not in ("cpu_s", "sha256")}) != res["sha256"]:
        raise ValueError(f"{path}: sha256 does not match its content")
    return res


def recipe(seeds: Sequence[int]) -> dict[str, Any]:
    return {"target": TARGET, "tau": TAU, "n_pool": N_POOL, "n_labeled": N_LABELED, "n_unlabeled": N_UNLABELED,
            "sizes": list(SIZES), "sft_steps": SFT_STEPS, "teacher": TEACHER, "teacher_epochs_grid": list(TEACHER_EPOCHS),
            "student_sft_steps": STUDENT_SFT_STEPS, "student_lr": STUDENT_LR, "n_student": N_STUDENT,
            "betas": list(BETAS), "epochs": list(EPOCHS), "nll_weight": NLL_WEIGHT, "tuning_seed": TUNING_SEED,
            "student_tuning_seeds": list(STUDENT_TUNING_SEEDS), "eval_seeds": list(seeds),
            "torch": str(torch.__version__)}


def finish(parts: dict[str, Any], seeds: Sequence[int], cpu_s: float, out: Path | None = GRID_FILE) -> dict[str, Any]:
    """Assemble the committed record from the parts and write it with its sha256."""
    res = {"recipe": recipe(seeds), **parts, "cpu_s": round(cpu_s, 1)}
    res["sha256"] = json_sha256({k: v for k, v in res.items() if k != "cpu_s"})
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(res, indent=1) + "\n")
    return res


def run_all(out: Path | None = GRID_FILE, seeds: Sequence[int] = EVAL_SEEDS, verbose: bool = True) -> dict[str, Any]:
    """The teacher pilot and the student grid on :data:`TUNING_SEED`, the ``|D_l|`` sweep on ``seeds``."""
    torch.set_num_threads(1)
    t0 = time.process_time()
    pre = {n: load_world_lm(n) for n in ("tiny", "small", "base")}
    world = pre["small"][1]
    parts = teacher_pilot(pre, world, verbose)
    parts["sweep"] = size_sweep(pre, world, seeds, parts["teacher_epochs"], verbose)
    parts.update(student_grid(pre, world, parts["teacher_epochs"], verbose))
    return finish(parts, seeds, time.process_time() - t0, out)


def load_runs(path: Path = GRID_FILE) -> dict[str, Any]:
    """The committed runs (see the module docstring for how they are made); checks their sha256."""
    if not path.exists():
        raise FileNotFoundError(f"{path} missing: run `python -m iclr25.align.weak_feedback`")
    res = json.loads(path.read_text())
    if json_sha256({k: v for k, v in res.items() if k not in ("cpu_s", "sha256")}) != res["sha256"]:
        raise ValueError(f"{path}: sha256 does not match its content")
    return res


def main() -> None:
    """``python -m iclr25.align.weak_feedback`` runs everything; ``--part pilot|sweep|student`` one
    part into a pickle-free JSON (``--seeds`` for the sweep, ``--epochs TINY SMALL`` from the pilot),
    and ``--merge PART.json ...`` assembles them (the same numbers: every part is deterministic)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=GRID_FILE)
    ap.add_argument("--part", choices=["pilot", "sweep", "student", "student-grid", "grid-cells", "grid-plain", "students",
                                       "base-teacher", "size-at-pool", "bt-sweep"])
    ap.add_argument("--conds", nargs="*", default=list(GRID_CONDS))
    ap.add_argument("--n-student", type=int, default=N_STUDENT)
    ap.add_argument("--seeds", type=int, nargs="*", help="evaluation seeds (default: EVAL_SEEDS; students: "
                    "STUDENT_EVAL_SEEDS; grid-cells: the first is the tuning seed)")
    ap.add_argument("--epochs", type=float, nargs=2)
    ap.add_argument("--merge", type=Path, nargs="*")
    ap.add_argument("--new-cells", action="store_true", help="grid-cells: only the cells the committed grid lacks")
    args = ap.parse_args()
    if args.seeds is None:
        args.seeds = list(STUDENT_EVAL_SEEDS if args.part == "students" else EVAL_SEEDS)
    if args.part == "grid-cells":   # one tuning seed (the first of --seeds) and some conditions, into --out
        torch.set_num_threads(1)
        t0 = time.process_time()
        pre = {n: load_world_lm(n) for n in ("small", "base")}
        runs = load_runs()
        skip = ({c: [[g["beta"], g["epochs"]] for g in rows] for c, rows in runs["student_grid"].items()}
                if args.new_cells else None)
        part = grid_cells(pre, pre["small"][1], runs["teacher_epochs"], args.seeds[0], args.conds, skip=skip)
        part["cpu_s"] = time.process_time() - t0
        args.out.write_text(json.dumps(part) + "\n")
        return
    if args.part == "base-teacher":   # --merge P.json: write the part into the record; else run it into --out
        if args.merge:
            res = add_base_teacher(json.loads(args.merge[0].read_text()))
            print("base teacher epochs:", res["teacher_epochs"]["base"], "cpu s:", res["cpu_s"])
            return
        torch.set_num_threads(1)
        t0 = time.process_time()
        pre = {n: load_world_lm(n) for n in ("small", "base")}
        part = base_teacher(pre, pre["small"][1], [r["seed"] for r in load_runs()["sweep"]])
        part["cpu_s"] = time.process_time() - t0
        args.out.write_text(json.dumps(part) + "\n")
        return
    if args.part in ("size-at-pool", "bt-sweep"):   # label-level additions, written into the record
        torch.set_num_threads(1)
        t0 = time.process_time()
        pre = {n: load_world_lm(n) for n in ("small", "base")}
        runs = load_runs()
        key = args.part.replace("-", "_")
        if args.part == "size-at-pool":
            rows = size_at_pool(pre, pre["small"][1], W2_SEEDS, runs["teacher_epochs"])
        else:
            rows = bt_sweep(pre, pre["small"][1], [r["seed"] for r in runs["sweep"]], runs["teacher_epochs"])
        cpu = time.process_time() - t0
        kept = {k: v for k, v in runs.items() if k not in ("recipe", "cpu_s", "sha256")}
        kept[key], kept[f"{key}_cpu_s"] = rows, round(cpu, 1)
        finish(kept, [r["seed"] for r in runs["sweep"]], runs["cpu_s"] + cpu, GRID_FILE)
        print(args.part, "cpu s", round(cpu, 1))
        return
    if args.part == "grid-plain":
        print("plain DPO control:", refresh_grid_plain(GRID_FILE)["student_plain_dpo"])
        return
    if args.part == "student-grid":   # --merge: the grid-cells parts
        res = refresh_student_grid(GRID_FILE, parts=args.merge or ())
        print("student choice:", res["student_chosen"], "cpu s:", res["student_grid_cpu_s"])
        return
    if args.merge and args.part == "students":
        print("merged; cpu s:", merge_students(args.merge, args.out if args.out != GRID_FILE else STUDENT_FILE)["cpu_s"])
        return
    if args.merge:
        parts, cpu = {}, 0.0
        for f in args.merge:
            p = json.loads(f.read_text())
            cpu += p.pop("cpu_s")
            if "sweep" in p and "sweep" in parts:
                p["sweep"] = parts["sweep"] + p["sweep"]
            for k in ("used_epochs",):
                if k in p and k in parts and p[k] != parts[k]:
                    raise ValueError("parts used different teacher epochs")
            parts.update(p)
        if parts.pop("used_epochs") != parts["teacher_epochs"]:
            raise ValueError("the parts did not use the pilot's teacher epochs")
        parts["sweep"] = sorted(parts["sweep"], key=lambda r: r["seed"])
        res = finish(parts, [r["seed"] for r in parts["sweep"]], cpu, args.out)
        print("merged; cpu s:", res["cpu_s"])
        return
    if args.part == "students":
        res = student_runs(args.seeds, args.n_student, out=args.out if args.out != GRID_FILE else STUDENT_FILE)
        print("cpu s:", res["cpu_s"])
        return
    if args.part is None:
        res = run_all(out=args.out, seeds=args.seeds)
        print("teacher epochs:", res["teacher_epochs"], "student choice:", res["student_chosen"], "cpu s:", res["cpu_s"])
        return
    torch.set_num_threads(1)
    t0 = time.process_time()
    pre = {n: load_world_lm(n) for n in ("tiny", "small", "base")}
    world = pre["small"][1]
    epochs = dict(zip(("tiny", "small"), args.epochs)) if args.epochs else None
    if args.part == "pilot":
        part = teacher_pilot(pre, world)
    elif args.part == "sweep":
        part = {"sweep": size_sweep(pre, world, args.seeds, epochs), "used_epochs": epochs}
    else:
        part = {**student_grid(pre, world, epochs), "used_epochs": epochs}
    part["cpu_s"] = time.process_time() - t0
    args.out.write_text(json.dumps(part) + "\n")


if __name__ == "__main__":
    main()
