"""The transcript-judge machinery of the tau-bench chapter: stratification-weighted agreement,
the two-condition rule search, the per-labelling verdict, and the nearest published histogram."""

import numpy as np

from iclr25.agents import pass_curve
from iclr25.agents.published import (LEADERBOARD, N_TASKS, fit_rule, judge_literals, label_verdict,
                                     nearest_histogram, stratified_boot_idx, stratified_weights,
                                     two_condition_rules, weighted_agreement)


def _row(rng):
    return dict(end=str(rng.choice(["user_stop", "transfer", "max_steps"])), agent_done=int(rng.integers(2)),
                last_user=str(rng.choice(["Thank you!", "ok", "no"])), writes=int(rng.integers(0, 5)),
                agent_turns=int(rng.integers(4, 25)))


def test_weighted_agreement_equals_unweighted_on_a_proportional_sample():
    rng = np.random.default_rng(0)
    strata = [0] * 30 + [1] * 20                       # sample in the population's 60/40 proportion
    wt = stratified_weights([0] * 600 + [1] * 400, strata)
    assert np.allclose(wt, wt[0])
    agree = rng.integers(0, 2, size=50)
    idx = stratified_boot_idx(strata, 200, np.random.default_rng(1))
    w, wb = weighted_agreement(agree, wt, idx)
    assert abs(w - agree.mean()) < 1e-12
    assert np.allclose(wb, agree[idx].mean(1))
    # every replicate keeps each stratum's size
    assert all((np.asarray(strata)[i] == 0).sum() == 30 for i in idx)


def test_weights_correct_an_oversampled_stratum():
    strata = [0] * 10 + [1] * 10                       # population 90 / 10: stratum 0 under-sampled
    wt = stratified_weights([0] * 90 + [1] * 10, strata)
    agree = np.array([1] * 10 + [0] * 10)
    w, _ = weighted_agreement(agree, wt, stratified_boot_idx(strata, 5, np.random.default_rng(0)))
    assert abs(w - 0.9) < 1e-12


def test_rule_count_and_the_fitted_rule_recovers_a_planted_rule():
    lits = judge_literals()
    rules = two_condition_rules(lits)
    n = 2 * len(lits)
    assert len(rules) == n + n * (n - 1) // 2          # 351 with the 13 literals
    rng = np.random.default_rng(3)
    rows = [_row(rng) for _ in range(400)]
    planted = "end = user_stop and not (agent wrote)"
    for r in rows:
        r["reward"] = int(rules[planted](r))
    best, acc = fit_rule(rules, rows)
    assert acc[best] == 1.0
    assert [bool(rules[best](r)) for r in rows] == [bool(rules[planted](r)) for r in rows]


def test_label_verdict():
    assert label_verdict({"a": (0.01, 0.2), "b": (0.05, 0.3)}) is True
    assert label_verdict({"a": (-0.01, 0.2), "b": (0.05, 0.3)}) is None
    assert label_verdict({"a": (-0.3, -0.01), "b": (0.05, 0.3)}) is False


def test_nearest_histogram_exact_and_rounded():
    h, exact = nearest_histogram(LEADERBOARD["airline", "gpt-4o"], N_TASKS["airline"])
    assert exact and h.tolist() == [14, 12, 10, 4, 10]
    pk = LEADERBOARD["retail", "claude-3-5-sonnet-20240620"]
    h, exact = nearest_histogram(pk, N_TASKS["retail"])
    assert h.sum() == N_TASKS["retail"] and (h >= 0).all()
    err = np.abs(pass_curve(np.repeat(np.arange(5), h), 4) - np.array(pk)).max()
    assert err <= 0.005 + 1e-9
