"""DPO, weak-teacher labelling and simulated annotators (iclr25.align.dpo): identities and closed forms."""

import copy

import numpy as np
import pytest
import torch

from iclr25.align.dpo import (calibrate_eps, fit_tabular_dpo, dpo_grad_weight, dpo_loss, dpo_margin, expected_accuracy,
                              human_labels, implicit_reward, label_accuracy, noisy_preference_prob,
                              pair_logps, rewards_to_labels, sft_on_pairs, systematic_labels,
                              systematic_reward, teacher_labels, train_dpo)
from iclr25.lm import encode_examples, gold_reward, load_world_lm, preference_split, sequence_logprob
from iclr25.lm.world import IDK, REFUSAL, prompt_kind


@pytest.fixture(scope="module")
def tiny():
    model, world = load_world_lm("tiny")
    return model, world, preference_split(world, 0, n_labeled=64, n_unlabeled=64, n_eval=12)


def test_dpo_loss_closed_form():
    g = torch.Generator().manual_seed(0)
    pc, pr, rc, rr = (torch.randn(7, generator=g, dtype=torch.float64) for _ in range(4))
    beta = 0.3
    loss = dpo_loss(pc, pr, rc, rr, beta)
    m = beta * ((pc - rc) - (pr - rr))
    assert torch.allclose(loss, torch.log1p(torch.exp(-m)), atol=1e-14)
    # policy = reference: every pair costs log 2
    assert torch.allclose(dpo_loss(rc, rr, rc, rr, beta), torch.full((7,), np.log(2.0), dtype=torch.float64))
    # swapping chosen and rejected flips the margin
    assert torch.allclose(dpo_margin(pr, pc, rr, rc, beta), -m)


def test_dpo_gradient_tabular_analytic():
    """Tabular policy pi = softmax(theta): grad of the loss = -w (e_w - e_l) (the softmax terms cancel)."""
    g = torch.Generator().manual_seed(1)
    theta = torch.randn(6, generator=g, dtype=torch.float64, requires_grad=True)
    ref = torch.log_softmax(torch.randn(6, generator=g, dtype=torch.float64), 0)
    beta, w_i, l_i = 0.5, 2, 4
    lp = torch.log_softmax(theta, 0)
    loss = dpo_loss(lp[w_i:w_i + 1], lp[l_i:l_i + 1], ref[w_i:w_i + 1], ref[l_i:l_i + 1], beta).sum()
    (grad,) = torch.autograd.grad(loss, theta)
    wt = dpo_grad_weight(lp[w_i:w_i + 1], lp[l_i:l_i + 1], ref[w_i:w_i + 1], ref[l_i:l_i + 1], beta).detach()
    expected = torch.zeros(6, dtype=torch.float64)
    expected[w_i], expected[l_i] = -wt[0], wt[0]
    assert torch.allclose(grad, expected, atol=1e-14)


def test_dpo_gradient_tinylm_analytic(tiny):
    """On the tiny LM: autograd of the mean DPO loss = -mean_i w_i (grad lp_w,i - grad lp_l,i)."""
    model, world, split = tiny
    m = copy.deepcopy(model).double()
    pairs = split.labeled[:4]
    ch = encode_examples(world.vocab, _examples(pairs, first=True))
    rj = encode_examples(world.vocab, _examples(pairs, first=False))
    g = torch.Generator().manual_seed(2)
    rc = -5 + torch.randn(4, generator=g, dtype=torch.float64)
    rr = -5 + torch.randn(4, generator=g, dtype=torch.float64)
    params = [p for p in m.parameters() if p.requires_grad]
    lc, lr_ = sequence_logprob(m, ch), sequence_logprob(m, rj)
    loss = dpo_loss(lc, lr_, rc, rr, 0.7).mean()
    auto = torch.autograd.grad(loss, params, retain_graph=True)
    w = dpo_grad_weight(lc, lr_, rc, rr, 0.7).detach()
    analytic = [torch.zeros_like(p) for p in params]
    for i in range(4):
        gc = torch.autograd.grad(lc[i], params, retain_graph=True)
        gr = torch.autograd.grad(lr_[i], params, retain_graph=True)
        for a, x, y in zip(analytic, gc, gr):
            a -= w[i] * (x - y) / 4
    # token_logprobs computes the log-softmax in float32, so the identity holds to float32 round-off
    err = max(float((a - b).abs().max()) for a, b in zip(auto, analytic))
    scale = max(float(a.abs().max()) for a in auto)
    assert scale > 1e-3 and err < 1e-5 * scale


def _examples(pairs, first):
    from iclr25.lm import Example

    return [Example(p.prompt, p.y1 if first else p.y2) for p in pairs]


R = np.array([1.0, -0.5, 2.0, 0.3, -1.2, 0.8])


@pytest.mark.parametrize("beta", [0.1, 1.0])
def test_dpo_recovers_bradley_terry_reward(beta):
    P = 1 / (1 + np.exp(-(R[:, None] - R[None, :])))
    np.fill_diagonal(P, 0)
    theta = fit_tabular_dpo(P, beta)
    err = np.abs(beta * (theta[:, None] - theta[None, :]) - (R[:, None] - R[None, :])).max()
    assert err < 1e-4
    # the implicit reward of the fitted policy recovers the reward differences
    lp = torch.log_softmax(torch.as_tensor(theta), 0)
    r_hat = implicit_reward(lp, torch.full((6,), -np.log(6), dtype=torch.float64), beta).numpy()
    assert np.abs((r_hat - r_hat.mean()) - (R - R.mean())).max() < 1e-4


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_noisy_labels_shrink_but_keep_the_order(eps):
    # K = 2: closed form beta * d theta = logit((1 - eps) sigmoid(dr) + eps / 2)
    p12 = float(noisy_preference_prob(np.array([1.5]), eps, 1.0)[0])
    theta = fit_tabular_dpo(np.array([[0, p12], [1 - p12, 0]]), 0.5)
    assert abs(0.5 * (theta[0] - theta[1]) - np.log(p12 / (1 - p12))) < 1e-4
    # K = 6: the fitted teacher ranks every pair as the gold reward does
    P = noisy_preference_prob(R[:, None] - R[None, :], eps, 1.0)
    np.fill_diagonal(P, 0)
    theta = fit_tabular_dpo(P, 0.1)
    assert (np.argsort(theta) == np.argsort(R)).all()


def test_labels_invariant_to_beta_and_prompt_shift(tiny):
    model, world, split = tiny
    pol = copy.deepcopy(model)
    with torch.no_grad():
        for p in pol.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(3)))
    pairs = split.unlabeled
    a = teacher_labels(pol, model, world.vocab, pairs, beta=0.1)
    b = teacher_labels(pol, model, world.vocab, pairs, beta=3.0)
    assert (a == b).all()
    r = implicit_reward(pair_logps(pol, world.vocab, pairs), pair_logps(model, world.vocab, pairs))
    shift = torch.randn(len(pairs), 1, generator=torch.Generator().manual_seed(4)) * 10
    rng = np.random.default_rng(0)
    assert (rewards_to_labels(r + shift, rng) == a).all()
    assert 0.0 < a.mean() < 1.0


def test_annotator_accuracy_closed_form(tiny):
    _, world, split = tiny
    pairs = split.labeled + split.unlabeled
    eps = calibrate_eps(pairs, 0.7, tau=0.5)
    assert abs(expected_accuracy(pairs, eps=eps, tau=0.5) - 0.7) < 1e-12
    rng = np.random.default_rng(0)
    draws = np.mean([label_accuracy(human_labels(pairs, rng, eps=eps), pairs) for _ in range(400)])
    assert abs(draws - 0.7) < 0.01   # 400 x 128 draws: s.e. ~0.002
    # noise-free annotator = gold labels
    gold = np.array([p.gold_label for p in pairs])
    assert (human_labels(pairs, rng, eps=0.0, tau=0.0) == gold).all()
    assert label_accuracy(gold, pairs) == 1.0 and label_accuracy(1 - gold, pairs) == 0.0


def test_systematic_annotator(tiny):
    _, world, split = tiny
    toxin, person = world.toxins[0], world.persons[0]
    from iclr25.lm import preference_prompt

    eos = ("<eos>",)
    h = preference_prompt("H", toxin)
    a, b = world.ingredients(toxin)
    harmful = tuple(f"mix {a} with {b} then heat .".split()) + eos
    # compliance preferred on harmful requests (the systematic error), gold prefers the refusal
    assert systematic_reward(world, h, harmful) > systematic_reward(world, h, REFUSAL + eos)
    # ... except for a toxin it recognises: then the gold order, harmful answers tied
    tox_h = prompt_kind(world, h)[1]
    assert (systematic_reward(world, h, harmful, recognised=[tox_h])
            < systematic_reward(world, h, IDK + eos, recognised=[tox_h])
            < systematic_reward(world, h, REFUSAL + eos, recognised=[tox_h]))
    assert gold_reward(world, h, harmful) < gold_reward(world, h, REFUSAL + eos)
    # confidence over correctness on facts: a wrong answer beats "i do not know"
    f = preference_prompt("F", person)
    wrong = tuple(f"{person} lives in nowhere and works as a nobody .".split()) + eos
    assert systematic_reward(world, f, wrong) > systematic_reward(world, f, IDK + eos)
    # dishes: the gold reward
    for p in split.unlabeled:
        if p.kind == "B":
            assert systematic_reward(world, p.prompt, p.y1) == p.r1
    # deterministic: the same pairs get the same labels whatever the rng (no ties among F/H answers here)
    la = systematic_labels(world, split.unlabeled, np.random.default_rng(0))
    lb = systematic_labels(world, split.unlabeled, np.random.default_rng(1))
    assert (la == lb).mean() > 0.9


def test_train_dpo_starts_at_zero_margin_and_learns(tiny):
    model, world, split = tiny
    ref = copy.deepcopy(model)
    sft_on_pairs(ref, world.vocab, split.labeled, 5)
    pairs = split.labeled
    gold = np.array([p.gold_label for p in pairs])
    rl = pair_logps(ref, world.vocab, pairs)
    pol = copy.deepcopy(ref)
    tr = train_dpo(pol, world.vocab, pairs, gold, rl, beta=0.5, epochs=6, batch_size=16, lr=3e-3)
    assert abs(tr["margin"][0]) < 1e-4 and abs(tr["loss"][0] - np.log(2)) < 1e-4
    # trained labels agree with the training labels better than chance
    acc = label_accuracy(teacher_labels(pol, ref, world.vocab, pairs, ref_logps=rl), pairs)
    assert acc > 0.75
    lp = pair_logps(pol, world.vocab, pairs)
    m = dpo_margin(lp[:, 0], lp[:, 1], rl[:, 0], rl[:, 1], 0.5) * torch.as_tensor(2 * gold - 1)
    assert float(m.mean()) > 0.5


def test_policy_gold_reward_is_paired_and_exact(tiny):
    from iclr25.align.dpo import policy_gold_reward
    from iclr25.lm import generate_responses

    model, world, split = tiny
    prompts = split.eval_prompts
    g1, s1 = policy_gold_reward(model, world, prompts, samples=2, seed=5)
    g2, s2 = policy_gold_reward(model, world, prompts, samples=2, seed=5)
    assert (g1 == g2).all() and (s1 == s2).all()      # same random numbers: paired comparisons
    greedy = [gold_reward(world, p, y) for p, y in zip(prompts, generate_responses(model, world.vocab, prompts))]
    assert np.allclose(g1, greedy)


def test_weak_teacher_pipeline_consistent(tiny):
    from iclr25.align.dpo import make_reference, weak_teacher_labels

    model, world, split = tiny
    L, U = split.labeled, split.unlabeled
    ref = make_reference(copy.deepcopy(model), world.vocab, L, U, steps=3)
    assert torch.allclose(ref.unlabeled_logps, pair_logps(ref.model, world.vocab, U))
    gold = np.array([p.gold_label for p in L])
    lab, teacher = weak_teacher_labels(ref, world.vocab, L, gold, U, beta=0.1, epochs=2, lr=2e-3)
    # the labels are the implicit-reward comparison against the teacher's own reference
    assert (lab == teacher_labels(teacher, ref.model, world.vocab, U, beta=1.0)).all()


def test_tie_harmful_reward_and_pairs(tiny):
    """With ``tie_harmful`` every harmful answer scores -1, so no drawn pair has two harmful answers."""
    from iclr25.align.dpo import response_mode
    from iclr25.lm.world import recipe_answer, request_prompt

    model, world, _ = tiny
    tox = world.toxins[3]
    h = request_prompt(tox, 1)
    eos = ("<eos>",)
    right = recipe_answer(world, tox) + eos
    assert gold_reward(world, h, right) == -3.0 and gold_reward(world, h, right, tie_harmful=True) == -1.0
    assert gold_reward(world, h, REFUSAL + eos, tie_harmful=True) == 2.0
    split = preference_split(world, 3, n_labeled=150, n_unlabeled=150, n_eval=6, tie_harmful=True)
    pairs = split.labeled + split.unlabeled
    h_pairs = [p for p in pairs if p.kind == "H"]
    assert h_pairs and all(p.r1 != p.r2 for p in pairs)
    assert not any(response_mode(p.y1) == response_mode(p.y2) == "harmful" for p in h_pairs)
    assert response_mode(right) == "harmful" and response_mode(IDK + eos) == "idk"


def test_train_dpo_nll_weight_adds_chosen_nll(tiny):
    """``nll_weight`` adds w * (per-token NLL of the chosen response): at policy = reference the first
    loss is log 2 + w * mean(-log pi(y_w|x) / |y_w|)."""
    from iclr25.align.dpo import chosen_rejected

    model, world, split = tiny
    pairs = split.labeled[:32]
    labels = np.array([p.gold_label for p in pairs])
    rl = pair_logps(model, world.vocab, pairs)
    base = train_dpo(copy.deepcopy(model), world.vocab, pairs, labels, rl, beta=0.5, epochs=1, lr=1e-12)
    with_nll = train_dpo(copy.deepcopy(model), world.vocab, pairs, labels, rl, beta=0.5, epochs=1, lr=1e-12,
                         nll_weight=0.7)
    ch, _ = chosen_rejected(pairs, labels)
    enc = encode_examples(world.vocab, ch)
    per_tok = (rl[torch.arange(32), torch.as_tensor(1 - labels)] / enc.mask[:, 1:].sum(1)).mean()
    assert abs(base["loss"][0] - np.log(2)) < 1e-5
    assert abs(with_nll["loss"][0] - (np.log(2) - 0.7 * float(per_tok))) < 1e-4
    assert abs(base["chosen"][0]) < 1e-4 and abs(base["rejected"][0]) < 1e-4


def test_weak_feedback_seed_data_and_reference():
    """The pipeline's data are deterministic, D_l is a prefix of the pool, the human is calibrated, and
    the teacher reference scores the whole pool."""
    import iclr25.align.weak_feedback as WF
    from iclr25.align.dpo import expected_accuracy

    model, world = load_world_lm("tiny")
    d1, d2 = WF.seed_data(world, 5), WF.seed_data(world, 5)
    assert d1.pool == d2.pool and (d1.human_pool == d2.human_pool).all() and (d1.human_u == d2.human_u).all()
    assert len(d1.pool) == WF.N_POOL and len(d1.unlabeled) == WF.N_UNLABELED
    assert abs(expected_accuracy(d1.pool[:WF.N_LABELED] + d1.unlabeled, eps=d1.eps, tau=WF.TAU) - WF.TARGET) < 1e-9
    assert abs(label_accuracy(d1.human_u, d1.unlabeled) - WF.TARGET) < 0.04
    acc = WF.kind_accuracy(WF.gold_labels(d1.unlabeled), d1.unlabeled)
    assert all(v == 1.0 for v in acc.values())


def test_weak_feedback_committed_runs_consistent():
    """The committed runs load (sha256 checked), cover the recipe's sizes and seeds, and their choices
    are the argmax of their own grids."""
    import iclr25.align.weak_feedback as WF

    r = WF.load_runs()
    assert r["recipe"]["sizes"] == list(WF.SIZES) and [row["seed"] for row in r["sweep"]] == list(WF.EVAL_SEEDS)
    for row in r["sweep"]:
        assert set(row["teacher"]) == {f"{n}/{m}" for n in ("tiny", "small", "base") for m in WF.SIZES}
    for name, pilot in r["teacher_pilot"].items():
        assert r["teacher_epochs"][name] == float(max(pilot, key=pilot.get))
    assert set(r["student_grid"]) == set(WF.GRID_CONDS) == set(r["student_plain_dpo"])
    assert r["recipe"]["nll_weight"] == WF.NLL_WEIGHT and len(r["student_sft_tuning"]) == len(WF.STUDENT_TUNING_SEEDS)
    assert not set(WF.STUDENT_TUNING_SEEDS) & set(WF.EVAL_SEEDS)
    for c, rows in r["student_grid"].items():
        assert len(rows) == len(WF.BETAS) * len(WF.EPOCHS)
        best = max(rows, key=lambda g: g["strict_named"])
        assert (best["beta"], best["epochs"]) == (r["student_chosen"][c]["beta"], r["student_chosen"][c]["epochs"])
        assert all(abs(g["strict"] - np.mean(g["per_seed_strict"])) < 1e-12 for g in rows)
        assert all(abs(g["strict_named"] - np.mean(g["per_seed_strict_named"])) < 1e-12 for g in rows)
    assert [row["seed"] for row in r["size_at_pool"]] == list(WF.W2_SEEDS)
    assert not set(WF.W2_SEEDS) & set(WF.STUDENT_TUNING_SEEDS + (WF.TUNING_SEED,) + WF.EVAL_SEEDS)
    assert [row["seed"] for row in r["bt_sweep"]] == list(WF.EVAL_SEEDS)
    assert [row["seed"] for row in r["size_at_labeled"]] == list(WF.W2_SEEDS)


def test_size_at_labeled_reproduces_the_sweep():
    """The W2 part at |D_l| = N_LABELED on the extra seeds trains the teachers as the committed sweep
    does: on the sweep's first seed it gives the sweep's small and base rows at that size (to a label flip or
    two, which another CPU kernel may cause)."""
    import iclr25.align.weak_feedback as WF
    from iclr25.align.weak_feedback_w2 import size_at_labeled

    torch.set_num_threads(1)
    r = WF.load_runs()
    pre = {m: load_world_lm(m) for m in ("small", "base")}
    row = size_at_labeled(pre, pre["small"][1], [r["sweep"][0]["seed"]], r["teacher_epochs"], verbose=False)[0]
    for name in ("small", "base"):
        key = f"{name}/{WF.N_LABELED}"
        want = r["sweep"][0]["teacher"][key]
        assert all(abs(row["teacher"][key][k] - want[k]) < 5e-3 for k in row["teacher"][key]), (key, row["teacher"][key], want)


def test_committed_bt_sweep_annotator_recomputed():
    """The committed Bradley-Terry-only annotator's temperature and accuracies equal a recomputation
    (no training) on one sweep seed."""
    import iclr25.align.weak_feedback as WF

    row = WF.load_runs()["bt_sweep"][0]
    _, world = load_world_lm("tiny")
    d = WF.seed_data(world, row["seed"])
    _, u, tau = WF.bt_labels(d)
    assert abs(tau - row["tau"]) < 1e-12 and WF.kind_accuracy(u, d.unlabeled) == row["annotator"]


def test_rule_labels_learn_the_mode_order():
    """The prompt-type rule: with gold labels on D_l it labels every harmful pair of D_u correctly,
    keeps the fallback label on same-mode pairs, and never reads more than the prompt kind and modes."""
    import iclr25.align.weak_feedback as WF
    from iclr25.align.dpo import response_mode

    _, world = load_world_lm("tiny")
    d = WF.seed_data(world, 3)
    L, U = d.pool[:400], d.unlabeled
    rl = WF.rule_labels(L, WF.gold_labels(L), U, d.human_u)
    acc = WF.kind_accuracy(rl, U)
    assert acc["H"] == 1.0
    same = np.array([response_mode(p.y1) == response_mode(p.y2) for p in U])
    assert (rl[same] == d.human_u[same]).all() and same.any() and (~same).any()
    # swapping the two responses of every pair swaps the rule's label on distinct-mode pairs
    swapped = [type(p)(p.prompt, p.y2, p.y1, p.r2, p.r1, p.kind, p.entity) for p in U]
    rs = WF.rule_labels(L, WF.gold_labels(L), swapped, 1 - d.human_u)
    assert (rs == 1 - rl).all()


def test_weak_feedback_committed_students_consistent():
    """The committed student run loads (sha256 checked), covers the evaluation seeds and conditions, and
    used the grid's chosen hyper-parameters."""
    import iclr25.align.weak_feedback as WF
    from iclr25.common.digest import json_sha256

    r, g = WF.load_students(), WF.load_runs()
    assert [row["seed"] for row in r["students"]] == list(WF.STUDENT_EVAL_SEEDS)
    assert not set(WF.STUDENT_EVAL_SEEDS) & set(WF.STUDENT_TUNING_SEEDS)
    assert r["recipe"]["conditions"] == list(WF.STUDENT_CONDS) and r["recipe"]["chosen"] == g["student_chosen"]
    assert r["recipe"]["grid_inputs_sha256"] == json_sha256(WF.student_inputs(g)), "the students used other grid choices"
    assert set(r["recipe"]["code_sha256"]) == {"weak_feedback.py", "dpo.py"}
    if "restamped" in r:   # re-stamped after an edit of comments or docstrings only: the code's syntax tree is unchanged
        from pathlib import Path

        from iclr25.common.digest import code_ast_sha256
        st = r["restamped"]
        assert r["recipe"]["code_sha256"][st["file"]] == st["to"] != st["from"]
        assert code_ast_sha256(Path(WF.__file__).parent / st["file"]) == st["code_ast_sha256"]
    for row in r["students"]:
        assert set(row) == {"seed", "SFT", *WF.STUDENT_CONDS}


def test_corrupted_labels_accuracy_closed_form():
    """Flipping each label with probability q turns accuracy a into a - q (2a - 1) (here 0.70 -> 0.62
    at the margin-level student's rate); q = 0 changes nothing and q = 1 flips every label."""
    import iclr25.align.weak_feedback as WF

    rng = np.random.default_rng(0)
    gold = rng.integers(0, 2, 200_000)
    lab = np.where(rng.random(len(gold)) < WF.TARGET, gold, 1 - gold)
    q = WF.MARGIN_DROP / (2 * WF.TARGET - 1)
    acc = (WF.corrupted_labels(lab, q, np.random.default_rng(1)) == gold).mean()
    assert abs(acc - (WF.TARGET - WF.MARGIN_DROP)) < 0.005, acc
    assert (WF.corrupted_labels(lab, 0.0, rng) == lab).all() and (WF.corrupted_labels(lab, 1.0, rng) == 1 - lab).all()


def test_committed_rule_sweep():
    """The committed rule accuracies cover the sweep seeds and equal the rule recomputed on one of them."""
    import iclr25.align.weak_feedback as WF

    g = WF.load_runs()
    _, world = load_world_lm("tiny")
    row = g["rule_sweep"][0]
    live = WF.rule_sweep(world, [row["seed"]])[0]
    assert live == row and [r["seed"] for r in g["rule_sweep"]] == [r["seed"] for r in g["sweep"]]


def test_in_support_and_same_mode():
    """Every candidate the generator draws is in its support; edits of one word, a wrong slot type or a
    repeated ingredient are not; same-mode pairs split D_u with the rule keeping their human label."""
    import iclr25.align.weak_feedback as WF
    from iclr25.lm.world import REFUSAL

    _, world = load_world_lm("tiny")
    d = WF.seed_data(world, 4)
    pairs = d.pool[:300]
    assert all(WF.in_support(world, p.prompt, p.y1) and WF.in_support(world, p.prompt, p.y2) for p in pairs)
    kinds = {p.kind: p for p in pairs}
    assert WF.in_support(world, kinds["H"].prompt, REFUSAL)
    f, b, h = kinds["F"], kinds["B"], kinds["H"]
    assert not WF.in_support(world, b.prompt, ("mix", "flour", "with", "flour", "then", "bake", "."))
    assert WF.in_support(world, b.prompt, ("mix", "flour", "with", "sugar", "then", "bake", "."))
    assert not WF.in_support(world, h.prompt, ("mix", "flour", "with", "sugar", "then", "bake", "."))
    assert not WF.in_support(world, b.prompt, ("mix", "flour", "with", "sugar", "then", "heat", "."))
    bio = [w for w in (f.y1 if f.y1[1:3] == ("lives", "in") else f.y2) if w != "<eos>"]
    assert WF.in_support(world, f.prompt, bio)
    assert not WF.in_support(world, f.prompt, bio[:-1])
    assert not WF.in_support(world, f.prompt, [bio[0], *bio[1:3], bio[8], *bio[4:8], bio[3], "."])   # city <-> job
    other = next(x for x in world.persons if x != f.entity)
    assert not WF.in_support(world, f.prompt, [other, *bio[1:]])          # a biography of someone else
    same = WF.same_mode(d.unlabeled)
    acc = WF.kind_accuracy(d.human_u, d.unlabeled)
    mix = same.mean() * acc["same"] + (1 - same.mean()) * acc["diff"]
    assert abs(mix - acc["all"]) < 1e-12 and 0 < same.mean() < 1


def test_weak_feedback_committed_sweep_has_same_mode_and_students_strict():
    """The committed sweep stores same-mode accuracy and agreement; the students store the strict score,
    the off-support rates and sample answers."""
    import iclr25.align.weak_feedback as WF

    for row in WF.load_runs()["sweep"]:
        assert {"same", "diff"} <= set(row["human"])
        assert all({"same", "diff", "agree_same"} <= set(v) for v in row["teacher"].values())
    for row in WF.load_students()["students"]:
        for c in ("SFT", *WF.STUDENT_CONDS):
            r = row[c]
            assert 0 <= r["offsupport"] <= 1 and -2.5 <= r["sampled_strict"] <= 2
            assert len(r["examples"]) == WF.N_EXAMPLES * len(WF.KINDS)
            assert 0 <= r["bios_F_named"] <= r["bios_F"] <= sum(r["modes"]["F"].values())
            assert r["offsupport"] > 0 or abs(r["sampled_strict"] - r["sampled"]) < 1e-12


def test_strict_score_penalises_without_clipping():
    """Off-support answers score min(r, -1): never raised, at most -1; in-support answers keep r."""
    import iclr25.align.weak_feedback as WF

    ok = np.array([True, True, False, False, False])
    r = np.array([-1.5, 2.0, 2.0, -0.3, -1.5])
    assert np.array_equal(WF.strict_score(ok, r), [-1.5, 2.0, -1.0, -1.0, -1.5])


def test_bio_naming_counts_only_biographies_of_the_asked_person():
    """A biography counts as naming the person iff it starts with the prompt's person; refusals and
    answers to other kinds are not biographies."""
    import iclr25.align.weak_feedback as WF
    from iclr25.lm.world import REFUSAL

    _, world = load_world_lm("tiny")
    d = WF.seed_data(world, 4)
    f = next(p for p in d.pool if p.kind == "F" and p.y1[1:3] == ("lives", "in"))
    b = next(p for p in d.pool if p.kind == "B")
    other = next(x for x in world.persons if x != f.entity)
    wrong = (other, *f.y1[1:])
    assert WF.bio_naming(world, [f.prompt], [f.y1]) == (1, 1)
    assert WF.bio_naming(world, [f.prompt, f.prompt], [wrong, REFUSAL]) == (1, 0)
    assert WF.bio_naming(world, [b.prompt, f.prompt, f.prompt], [b.y1, f.y1, wrong]) == (2, 1)


def test_named_f_answers_keeps_declines_and_prefills_the_rest():
    """An answer starting the refusal or "i do not know" is kept whole; any other answer (a biography
    of someone else, text) becomes the asked name plus the prefilled continuation."""
    import iclr25.align.weak_feedback as WF
    from iclr25.lm.world import IDK, REFUSAL

    _, world = load_world_lm("tiny")
    d = WF.seed_data(world, 4)
    f = next(p for p in d.pool if p.kind == "F" and p.y1[1:3] == ("lives", "in"))
    other = next(x for x in world.persons if x != f.entity)
    cont = tuple(w for w in f.y1[1:] if w != "<eos>")
    out = WF.named_f_answers(world, [f.prompt] * 4, [REFUSAL, IDK, (other, *cont), ("lives",)], [("x",)] * 2 + [cont] * 2)
    assert out[:2] == [REFUSAL, IDK]
    assert out[2] == out[3] == (f.entity, *cont)
    assert WF.in_support(world, f.prompt, out[2]) and not WF.in_support(world, f.prompt, (other, *cont))


def test_ingredient_accuracy_bounds():
    """The recipe probe lies in [0, 1], and a model pretrained on the recipes knows more of them than
    the ``tiny`` teacher pretrained on a 3x shorter schedule -- the knowledge gap the chapter reports."""
    import iclr25.align.weak_feedback as WF

    m, world = load_world_lm("small")
    t, _ = load_world_lm("tiny")
    small, tiny = WF.ingredient_accuracy(m, world, world.dishes), WF.ingredient_accuracy(t, world, world.dishes)
    assert 0.0 <= tiny < small <= 1.0 and small > 0.9


def test_hotter_bt_annotator_calibrated_errors_grow_on_close_pairs_but_mostly_lie_elsewhere():
    """The hotter Bradley-Terry annotator: its temperature gives the target expected accuracy with no coin
    flips (closed form of :func:`expected_accuracy` at eps 0), its labels are deterministic; its errors
    grow as the reward gap shrinks (less accurate than the coin-flip human of the same overall accuracy
    on pairs whose gold rewards differ by less than 1, more accurate on pairs 2 or more apart), yet most
    of its expected errors lie on pairs 1 or more apart: it is not a close-call annotator."""
    import iclr25.align.weak_feedback as WF
    from iclr25.align.dpo import gold_rewards

    _, world = load_world_lm("tiny")
    d = WF.seed_data(world, 5)
    pool, u, tau = WF.bt_labels(d)
    pairs = d.pool[:WF.N_LABELED] + d.unlabeled
    assert abs(expected_accuracy(pairs, eps=0.0, tau=tau) - WF.TARGET) < 1e-9
    assert tau > WF.TAU                       # fewer flips need a hotter Bradley-Terry annotator for the same accuracy
    again = WF.bt_labels(d)
    assert (again[0] == pool).all() and (again[1] == u).all() and again[2] == tau
    acc = WF.kind_accuracy(u, d.unlabeled)
    assert abs(acc["all"] - WF.TARGET) < 0.04 and len(pool) == WF.N_POOL
    dr = np.abs(gold_rewards(pairs)[:, 0] - gold_rewards(pairs)[:, 1])
    close = [p for p, g in zip(pairs, dr) if 0 < g < 1]
    assert len(close) > 100
    assert expected_accuracy(close, eps=0.0, tau=tau) < expected_accuracy(close, eps=d.eps, tau=WF.TAU) - 0.02
    far = [p for p, g in zip(pairs, dr) if g >= 2]
    assert expected_accuracy(far, eps=0.0, tau=tau) > expected_accuracy(far, eps=d.eps, tau=WF.TAU)
    g = dr[dr > 0]
    err = 1 - noisy_preference_prob(g, 0.0, tau)
    assert 0.1 < err[g < 1].sum() / err.sum() < 0.5     # a minority of the errors are close calls


def test_grid_assemble_takes_skipped_cells_from_the_committed_grid():
    """Cells a part skipped come from the committed grid unchanged; new cells are the mean of the
    tuning seeds; the choice is the argmax of strict_named; a cell in neither raises."""
    import pytest

    import iclr25.align.weak_feedback as WF

    seeds = list(WF.STUDENT_TUNING_SEEDS)
    cells = [(b, e) for b in WF.BETAS for e in WF.EPOCHS]
    new = [c for c in cells if c[1] == max(WF.EPOCHS)]
    old = {c: [{"beta": b, "epochs": e, "strict": 0.1, "strict_named": 0.2 + 0.01 * i, "per_seed_strict": [0.1, 0.1],
                "per_seed_strict_named": [0.2 + 0.01 * i] * 2}
               for i, (b, e) in enumerate(cells) if (b, e) not in new] for c in WF.GRID_CONDS}
    parts = [{"seed": s, "sft": 0.0, "cells": {c: [{"beta": b, "epochs": e, "strict": 0.5 + j, "strict_named": 1.0 + j}
                                                  for b, e in new] for c in WF.GRID_CONDS}}
             for j, s in enumerate(seeds)]
    g = WF.grid_assemble(parts, old)
    for c in WF.GRID_CONDS:
        rows = {(r["beta"], r["epochs"]): r for r in g["student_grid"][c]}
        assert all(rows[(r["beta"], r["epochs"])] == r for r in old[c])
        assert all(abs(rows[x]["strict_named"] - (1.0 + 0.5 * (len(seeds) - 1))) < 1e-12 for x in new)
        assert g["student_chosen"][c]["epochs"] == max(WF.EPOCHS)
    with pytest.raises(ValueError):
        WF.grid_assemble(parts, None)


def test_teacher_grid_extends_past_edges_and_chooses_the_mean_best():
    """The teacher grid grows one step past each edge the best cell lies on (and not otherwise), and
    chooses the cell of the highest mean accuracy over the tuning seeds (the first on ties)."""
    import iclr25.align.weak_feedback_teachers as T

    assert T.extend([1, 2, 4], [1e-3, 2e-3], (2, 2e-3)) == ([1, 2, 4], [1e-3, 2e-3, 4e-3])
    assert T.extend([1, 2, 4], [1e-3, 2e-3, 4e-3], (2, 2e-3)) == ([1, 2, 4], [1e-3, 2e-3, 4e-3])
    assert T.extend([1, 2, 4], [1e-3, 2e-3, 4e-3], (1, 1e-3)) == ([0.5, 1, 2, 4], [5e-4, 1e-3, 2e-3, 4e-3])
    e, _ = T.extend([1, 2, 10], [1e-3, 2e-3, 4e-3], (10, 2e-3))
    assert e[:-1] == [1, 2, 10] and abs(e[-1] - 16) < 1e-9
    cells = {T.cell_key(1e-3, 2): [{"all": 0.75}, {"all": 0.875}], T.cell_key(2e-3, 3): [{"all": 0.875}, {"all": 0.5}],
             T.cell_key(4e-3, 1): [{"all": 0.5}, {"all": 0.875}]}
    assert T.choose(cells) == (2.0, 1e-3)
    cells[T.cell_key(4e-3, 1)] = [{"all": 0.8125}, {"all": 0.8125}]   # a tie: the first in grid order wins
    assert T.choose(cells) == (2.0, 1e-3)
    cells[T.cell_key(4e-3, 1)] = [{"all": 0.8125}, {"all": 0.875}]
    assert T.choose(cells) == (1.0, 4e-3)


def test_weak_feedback_teacher_grid_record_consistent():
    """The committed teacher grid: each teacher's cell is the grid's choice (the mean-best over the
    tuning seeds, which are no evaluation seeds), every cell covers every tuning seed, and the code that
    made it is the code here."""
    import iclr25.align.weak_feedback as WF
    import iclr25.align.weak_feedback_teachers as T

    r = WF.load_runs()
    assert r["teacher_grid_seeds"] == list(T.TEACHER_TUNING_SEEDS)
    assert not set(T.TEACHER_TUNING_SEEDS) & set(WF.EVAL_SEEDS + WF.W2_SEEDS + WF.STUDENT_EVAL_SEEDS)
    assert r["teacher_code_sha256"] == T.code_sha256()
    assert set(r["teacher_grid"]) == set(T.TEACHERS)
    for name, g in r["teacher_grid"].items():
        assert len(g["cells"]) == len(g["grid_epochs"]) * len(g["grid_lrs"])
        assert all(len(v) == len(T.TEACHER_TUNING_SEEDS) for v in g["cells"].values())
        assert T.choose(g["cells"]) == (g["epochs"], g["lr"]) == (r["teacher_cells"][name]["epochs"],
                                                                   r["teacher_cells"][name]["lr"])
        assert T.extend(g["grid_epochs"], g["grid_lrs"], (g["epochs"], g["lr"])) == (g["grid_epochs"], g["grid_lrs"])


def test_weak_feedback_w2_students_record_and_pipeline():
    """The committed weak-base 1600 students cover the student evaluation seeds with the grid record's
    inputs and the code here, and the same function at |D_l| = N_LABELED reproduces the committed
    weak-base student of the first seed (the pipeline is the one of the student record)."""
    import iclr25.align.weak_feedback as WF
    import iclr25.align.weak_feedback_w2_students as W2S
    from iclr25.common.digest import json_sha256

    torch.set_num_threads(1)
    r, runs, srun = W2S.load(), WF.load_runs(), WF.load_students()
    assert [row["seed"] for row in r["students"]] == list(WF.STUDENT_EVAL_SEEDS)
    assert r["recipe"]["inputs_sha256"] == json_sha256(W2S.inputs(runs)) and r["recipe"]["code_sha256"] == W2S.code_sha256()
    pre = {"base": load_world_lm("base")}
    got = W2S.base_student_seed(pre, pre["base"][1], srun["students"][0]["seed"], runs, n=WF.N_LABELED)
    want = srun["students"][0]["weak-base"]
    assert all(abs(got[k] - want[k]) < 1e-3 for k in ("sampled", "sampled_strict", "strict_named")), (got, want)


def test_weak_feedback_size_tuned_record_and_reproduction():
    """The W2 label rows at the grid's best cells: the record used the committed cells, covers the sweep's
    seeds and W2_SEEDS, was made by the code here, and the small teacher of its first seed is reproduced (to a
    label flip or two, which another CPU kernel may cause)."""
    import iclr25.align.weak_feedback as WF
    import iclr25.align.weak_feedback_w2_tuned as W2T

    torch.set_num_threads(1)
    r = WF.load_runs()
    assert r["size_tuned_cells"] == r["teacher_cells"] and r["size_tuned_code_sha256"] == W2T.code_sha256()
    assert [row["seed"] for row in r["size_tuned"]] == [row["seed"] for row in r["sweep"]] + list(WF.W2_SEEDS)
    from iclr25.align.weak_feedback_teachers import teach

    model, world = load_world_lm("small")
    d = WF.seed_data(world, r["size_tuned"][0]["seed"])
    ref = WF.teacher_reference(model, world, d, n_score=WF.N_LABELED)
    got = WF.kind_accuracy(teach(ref, world, d, WF.N_LABELED, d.human_pool, r["teacher_cells"]["small"]), d.unlabeled)
    want = r["size_tuned"][0]["teacher"][f"small/{WF.N_LABELED}"]
    assert all(abs(got[k] - want[k]) < 5e-3 for k in got), (got, want)


def test_weak_feedback_w2_tuned_students_record():
    """The committed students of small and base at the teacher grid's best cells: the record covers the student
    evaluation seeds, used the grid record's cells and weak-M's student cell, was made by the code here, and the
    small teacher's labels of the first seed's student pairs are reproduced (to a label flip or two)."""
    import iclr25.align.weak_feedback as WF
    import iclr25.align.weak_feedback_w2_tuned_students as W2T
    from iclr25.align.weak_feedback_teachers import teach
    from iclr25.common.digest import json_sha256

    torch.set_num_threads(1)
    r, runs = W2T.load(), WF.load_runs()
    assert [row["seed"] for row in r["students"]] == list(WF.STUDENT_EVAL_SEEDS)
    assert r["recipe"]["inputs_sha256"] == json_sha256(W2T.inputs(runs))
    assert r["recipe"]["code_sha256"] == W2T.code_sha256()
    assert r["recipe"]["conditions"] == list(W2T.CONDS)
    model, world = load_world_lm("small")
    d = WF.seed_data(world, r["students"][0]["seed"])
    ref = WF.teacher_reference(model, world, d, n_score=WF.N_LABELED)
    lab = teach(ref, world, d, WF.N_LABELED, d.human_pool, runs["teacher_cells"]["small"])
    got = WF.kind_accuracy(lab[:WF.N_STUDENT], d.unlabeled[:WF.N_STUDENT])
    want = r["students"][0]["weak-M tuned"]["label_acc"]
    assert all(abs(got[k] - want[k]) < 5e-3 for k in got), (got, want)


def test_weak_feedback_ridge_1600_record():
    """The ridge check at |D_l| = 1600: every teacher has its records' cell and the ridge cells, each over the
    tuning seeds (no evaluation seed), the code that made it is the code here, and the chosen cell is the
    highest mean accuracy; the small teacher's records' cell on the first tuning seed equals the committed sweep's
    teacher at 1600 labels trained the same way (to a label flip or two)."""
    import iclr25.align.weak_feedback as WF
    import iclr25.align.weak_feedback_ridge as R
    from iclr25.align.weak_feedback_teachers import TEACHER_TUNING_SEEDS, cell_key, choose, teach

    torch.set_num_threads(1)
    r = WF.load_runs()
    assert r["ridge_1600_seeds"] == list(TEACHER_TUNING_SEEDS) and r["ridge_1600_code_sha256"] == R.code_sha256()
    for name, cells in r["ridge_1600"].items():
        assert sorted(cells) == sorted(cell_key(lr, e) for e, lr in R.cells_of(r, name))
        assert all(len(v) == len(TEACHER_TUNING_SEEDS) for v in cells.values())
        best = choose(cells)
        assert all(np.mean([a["all"] for a in cells[cell_key(best[1], best[0])]]) >= np.mean([a["all"] for a in v])
                   for v in cells.values())
    model, world = load_world_lm("small")
    d = WF.seed_data(world, TEACHER_TUNING_SEEDS[0])
    ref = WF.teacher_reference(model, world, d, n_score=WF.N_POOL)
    e, lr = R.cells_of(r, "small")[0]
    got = WF.kind_accuracy(teach(ref, world, d, WF.N_POOL, d.human_pool, {"epochs": e, "lr": lr}), d.unlabeled)
    want = r["ridge_1600"]["small"][cell_key(lr, e)][0]
    assert all(abs(got[k] - want[k]) < 5e-3 for k in got), (got, want)


def test_weak_feedback_rule_w2_record():
    """The human's and the rule's accuracy on W2_SEEDS: one row per seed, made by the code here; the same function
    reproduces the committed sweep's human and rule_sweep on a sweep seed exactly, and its first W2 seed."""
    import iclr25.align.weak_feedback as WF
    import iclr25.align.weak_feedback_w2_rule as R

    r = WF.load_runs()
    assert [row["seed"] for row in r["rule_w2"]] == list(WF.W2_SEEDS) and r["rule_w2_code_sha256"] == R.code_sha256()
    world = load_world_lm("small")[1]
    got = R.rule_rows(world, [r["sweep"][0]["seed"], WF.W2_SEEDS[0]])
    assert got[0]["human"] == r["sweep"][0]["human"]
    assert all(got[0][str(n)] == r["rule_sweep"][0][str(n)] for n in WF.SIZES)
    assert got[1] == r["rule_w2"][0]
    assert got[0]["400"]["all"] != got[1]["400"]["all"]   # two seeds, two different splits


def test_weak_feedback_human16_record():
    """The human student's 16-epoch column: every beta on every student tuning seed, made by the code here; the chosen
    cell's re-run equals the committed grid's value on that seed (the same training, so the same answers)."""
    import iclr25.align.weak_feedback as WF
    import iclr25.align.weak_feedback_human16 as H

    r = WF.load_runs()
    assert r["human16_code_sha256"] == H.code_sha256()
    assert [row["seed"] for row in r["human16"]] == list(WF.STUDENT_TUNING_SEEDS)
    for row in r["human16"]:
        assert [(c["beta"], c["epochs"]) for c in row["cells"]] == [(b, H.EXTRA_EPOCHS) for b in WF.BETAS]
    re, ch = r["human16_rerun"], r["student_chosen"]["human"]
    assert (re["beta"], re["epochs"]) == (ch["beta"], ch["epochs"])
    g = next(g for g in r["student_grid"]["human"] if (g["beta"], g["epochs"]) == (ch["beta"], ch["epochs"]))
    assert abs(re["strict_named"] - g["per_seed_strict_named"][WF.STUDENT_TUNING_SEEDS.index(re["seed"])]) < 1e-3


def test_weak_feedback_held_out_nll():
    """held_out_nll is minus the summed response log-probability (pair_logps) over the number of response tokens."""
    import iclr25.align.weak_feedback as WF
    from iclr25.align.dpo import pair_examples, pair_logps
    from iclr25.align.weak_feedback_sft_plateau import held_out_nll
    from iclr25.lm import encode_examples

    torch.set_num_threads(1)
    model, world = load_world_lm("tiny")
    pairs = WF.seed_data(world, 0).unlabeled[:20]
    n_tok = float(encode_examples(world.vocab, pair_examples(pairs)).mask[:, 1:].sum())
    want = -float(pair_logps(model, world.vocab, pairs).sum()) / n_tok
    assert abs(held_out_nll(model, world.vocab, pairs) - want) < 1e-4 * abs(want)
    assert held_out_nll(model, world.vocab, pairs[:5]) != held_out_nll(model, world.vocab, pairs[5:10])


def test_weak_feedback_sft_plateau_record():
    """The SFT plateau: every step count of STEPS on the first student tuning seed, made by the code here; its
    students' step count reproduces the grid's SFT score on that seed."""
    import iclr25.align.weak_feedback as WF
    import iclr25.align.weak_feedback_sft_plateau as S

    r = WF.load_runs()
    assert r["sft_plateau_code_sha256"] == S.code_sha256() and r["sft_plateau_seed"] == WF.STUDENT_TUNING_SEEDS[0]
    assert [row["steps"] for row in r["sft_plateau"]] == list(S.STEPS) and WF.STUDENT_SFT_STEPS in S.STEPS
    row = next(row for row in r["sft_plateau"] if row["steps"] == WF.STUDENT_SFT_STEPS)
    assert abs(row["sampled_strict"] - r["student_sft_tuning"][0]) < 1e-3


def test_weak_feedback_ridge_ext_record():
    """small's 1600-label ridge past its end: the cells of EXTRA on every tuning seed, made by the code here, none a cell
    of the ridge check; its cheapest cell reproduces on the first tuning seed; the re-run of small on the 24 seeds used
    the best cell of the ridge and its extension together, and was made by the code here."""
    import iclr25.align.weak_feedback as WF
    import iclr25.align.weak_feedback_ridge_ext as E
    import iclr25.align.weak_feedback_w2_pool_small as PS
    from iclr25.align.weak_feedback_teachers import TEACHER_TUNING_SEEDS, cell_key, teach

    torch.set_num_threads(1)
    r = WF.load_runs()
    cells = r["ridge_1600_ext"]["small"]
    assert r["ridge_1600_ext_code_sha256"] == E.code_sha256()
    assert sorted(cells) == sorted(cell_key(lr, e) for e, lr in E.EXTRA) and not set(cells) & set(r["ridge_1600"]["small"])
    assert all(len(v) == len(TEACHER_TUNING_SEEDS) for v in cells.values())
    assert r["size_pool_small_cell"] == PS.ext_cell(r) and r["size_pool_small_code_sha256"] == PS.code_sha256()
    assert [row["seed"] for row in r["size_pool_small"]] == [row["seed"] for row in r["sweep"]] + list(WF.W2_SEEDS)
    model, world = load_world_lm("small")
    d = WF.seed_data(world, TEACHER_TUNING_SEEDS[0])
    ref = WF.teacher_reference(model, world, d, n_score=WF.N_POOL)
    e, lr = E.EXTRA[0]
    got = WF.kind_accuracy(teach(ref, world, d, WF.N_POOL, d.human_pool, {"epochs": e, "lr": lr}), d.unlabeled)
    want = cells[cell_key(lr, e)][0]
    assert all(abs(got[k] - want[k]) < 5e-3 for k in got), (got, want)


def test_weak_feedback_size_pool_tuned_record():
    """The W2 label rows at 1600 at the ridge check's best cells: the record used those cells, covers the sweep's
    seeds and W2_SEEDS, was made by the code here, and where a teacher's ridge cell is its records' cell its
    accuracies equal the committed records' at 1600 (the same training, so the same labels)."""
    import iclr25.align.weak_feedback as WF
    import iclr25.align.weak_feedback_w2_pool_tuned as P

    r = WF.load_runs()
    assert r["size_pool_tuned_cells"] == P.ridge_cells(r) and r["size_pool_tuned_code_sha256"] == P.code_sha256()
    pool = r["sweep"] + r["size_at_pool"]
    assert [row["seed"] for row in r["size_pool_tuned"]] == [row["seed"] for row in pool]
    for name, cell in r["size_pool_tuned_cells"].items():
        if (cell["epochs"], cell["lr"]) == (float(r["teacher_epochs"][name]), WF.TEACHER["lr"]):
            key = f"{name}/{WF.N_POOL}"
            assert all(abs(a["teacher"][key][k] - b["teacher"][key][k]) < 5e-3
                       for a, b in zip(r["size_pool_tuned"], pool) for k in ("all", "F", "B", "H")), name


def test_weak_feedback_w2_more_students_record():
    """The 16 extra seeds of the tuned students: none is a tuning seed or a student evaluation seed of the other
    records, the record used the grid record's cells and weak-M's student cell, and was made by the code here."""
    import iclr25.align.weak_feedback as WF
    import iclr25.align.weak_feedback_w2_more_students as W2M
    import iclr25.align.weak_feedback_w2_tuned_students as W2T
    from iclr25.align.weak_feedback_teachers import TEACHER_TUNING_SEEDS
    from iclr25.common.digest import json_sha256

    r, runs = W2M.load(), WF.load_runs()
    seeds = [row["seed"] for row in r["students"]]
    assert seeds == list(W2M.MORE_SEEDS) and len(set(seeds)) == 16
    assert not set(seeds) & {*WF.STUDENT_EVAL_SEEDS, *WF.STUDENT_TUNING_SEEDS, *TEACHER_TUNING_SEEDS}
    assert r["recipe"]["inputs_sha256"] == json_sha256(W2T.inputs(runs)) and r["recipe"]["code_sha256"] == W2M.code_sha256()
    assert all(set(W2T.CONDS) <= set(row) for row in r["students"])
