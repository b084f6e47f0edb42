"""The transcript-judge machinery of the tau-bench chapter: the two-condition rule search, the verdict
from judge intervals, the task bootstrap, the reward-blind reading, and the nearest published histogram."""

import numpy as np

from iclr25.agents import pass_curve
from iclr25.agents.published import (LEADERBOARD, N_TASKS, cross_fit_rule, judge_literals, label_verdict,
                                     nearest_histogram, two_condition_rules)


def _row(rng):
    return dict(end=str(rng.choice(["user_stop", "transfer", "max_steps"])), agent_done=int(rng.integers(2)),
                last_user=str(rng.choice(["Thank you!", "ok", "no"])), writes=int(rng.integers(0, 5)),
                agent_turns=int(rng.integers(4, 25)))


def test_rule_count_and_the_fitted_rule_recovers_a_planted_rule():
    lits = judge_literals()
    rules = two_condition_rules(lits)
    n = 2 * len(lits)
    assert len(rules) == n + n * (n - 1) // 2          # 351 with the 13 literals
    rng = np.random.default_rng(3)
    rows = [_row(rng) for _ in range(400)]
    planted = "end = user_stop and not (agent wrote)"
    target = np.array([bool(rules[planted](r)) for r in rows])
    hits = {nm: np.array([bool(f(r)) for r in rows]) for nm, f in rules.items()}
    for deal in (None, 1, 2):                            # any deal of the tasks into folds recovers it
        pred, chosen = cross_fit_rule(rules, rows, target, np.arange(400) // 4, deal=deal, hits=hits)
        assert (pred == target).all()
        assert all([bool(rules[c](r)) for r in rows] == target.tolist() for c in chosen)


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


def test_cluster_bootstrap_keeps_tasks_whole():
    from iclr25.agents.published import cluster_bootstrap

    rng = np.random.default_rng(0)
    # one trial per group: the plain bootstrap of a mean
    x = rng.integers(0, 2, size=40)
    b = cluster_bootstrap(x, np.ones(40), np.arange(40), 4000, np.random.default_rng(1))
    assert abs(b.mean() - x.mean()) < 0.01 and 0.04 < b.std() < 0.12
    # groups whose trials all agree: the interval is as wide as with one trial per group, not 4x narrower
    g = np.repeat(np.arange(40), 4)
    b4 = cluster_bootstrap(np.repeat(x, 4), np.ones(160), g, 4000, np.random.default_rng(1))
    assert abs(b4.std() - b.std()) < 0.01
    # a ratio of sums: constant numerator / denominator share gives that share in every replicate
    assert np.allclose(cluster_bootstrap(np.ones(10), 2 * np.ones(10), np.arange(10) % 3, 50, rng), 0.5)


def test_cross_fit_recovers_a_planted_rule_out_of_fold():
    rng = np.random.default_rng(3)
    rows = [_row(rng) for _ in range(300)]
    rules = two_condition_rules(judge_literals())
    target = np.array([r["writes"] <= 1 and r["end"] == "transfer" for r in rows])
    pred, chosen = cross_fit_rule(rules, rows, target, np.arange(300) // 3, n_folds=5)
    assert (pred == target).all() and len(chosen) == 5
    assert all(rules[c](r) == t for c in chosen for r, t in zip(rows, target))


def test_blind_reading_covers_all_trials_in_one_shuffled_stream():
    from iclr25.agents.published import BLIND_SET, blind_transcript, load_airline_table, load_blind_labels, reader_ok

    rows = load_airline_table()
    lab = load_blind_labels()
    assert [(r["task"], r["trial"]) for r in lab] == [(r["task"], r["trial"]) for r in rows] and len(lab) == 200
    order = np.random.default_rng(2029).permutation(200)          # the stream: position -> trial in table order
    assert all(lab[i]["order"] == pos + 1 for pos, i in enumerate(order))
    for r, t in zip(lab, rows):
        assert r["label_blind"] in BLIND_SET and r["label"] in BLIND_SET
        disagree = reader_ok(r["label_blind"]) != t["reward"]
        assert ("settled:" in r["note"]) == disagree                  # settled exactly where reader and reward differ
        assert (r["label"] != r["label_blind"]) <= disagree
    assert reader_ok("user_error") == 1 and reader_ok("wrong_args") == 0
    traj = [{"role": "system", "content": "POLICY"}, {"role": "user", "content": "hi"},
            {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "get_user_details",
                                                                            "arguments": '{"user_id": "x"}'}}]},
            {"role": "tool", "name": "get_user_details", "content": '{"a": 1}'}]
    t = blind_transcript(traj)
    assert "POLICY" not in t and 'A> get_user_details({"user_id": "x"})' in t and 'T[get_user_details]: {"a":1}' in t


def test_adjudication_is_the_seeded_stream_of_every_dispute_and_the_decoys():
    from iclr25.agents.published import (ADJUDICATION_DECOYS, BLIND_SET, adjudication_sample, load_adjudication,
                                         load_airline_table, load_blind_labels, reader_ok)

    reward = {(r["task"], r["trial"]): int(r["reward"]) for r in load_airline_table()}
    blind = {(r["task"], r["trial"]): reader_ok(r["label_blind"]) for r in load_blind_labels()}
    adj = load_adjudication()
    stream = adjudication_sample()
    dis = {k for k in blind if blind[k] != reward[k]}
    assert len(stream) == len(set(stream)) == len(dis) + ADJUDICATION_DECOYS and dis <= set(stream)
    assert sorted((r["task"], r["trial"]) for r in adj) == [(r["task"], r["trial"]) for r in adj] == sorted(stream)
    assert all(stream[r["packet"]] == (r["task"], r["trial"]) for r in adj)   # packet order is the seeded stream
    assert all(r["label"] in BLIND_SET and r["no_trace"] in (0, 1) and r["contaminated"] in (0, 1) and r["reason"]
               for r in adj)
    assert all(r["label"] in ("wrong_args", "wrong_decision", "partial") for r in adj if r["no_trace"])
