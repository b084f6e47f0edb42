"""The committed table derived from tau-bench's gpt-4o airline trajectories: the script still makes
it (when the repository mirror is on this machine), and it reproduces the published pass^k."""

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from iclr25.agents import pass_curve, success_counts
from iclr25.agents.published import (LEADERBOARD, READ_LABELS, SOURCE_COMMIT, STOP_LABELS, cue_label,
                                     derive_rows, load_airline_table, load_read_labels, load_stop_labels,
                                     read_sample, read_source, table_text, to_csv, write_class)

MIRROR = Path(os.environ.get("TAU_BENCH_REPO", "/work/.mirror/sierra-research+tau-bench/repo"))


def _has_commit(repo: Path) -> bool:
    if not repo.exists():
        return False
    git_dir = repo / ".git" if (repo / ".git").exists() else repo
    r = subprocess.run(["git", f"--git-dir={git_dir}", "cat-file", "-e", f"{SOURCE_COMMIT}^{{commit}}"],
                       capture_output=True)
    return r.returncode == 0


@pytest.mark.skipif(not _has_commit(MIRROR), reason="tau-bench repository not on this machine "
                    "(set TAU_BENCH_REPO to a clone)")
def test_script_reproduces_the_committed_table():
    assert to_csv(derive_rows(read_source(MIRROR))) == table_text()


def test_table_shape_and_published_pass_hat_k():
    rows = load_airline_table()
    assert len(rows) == 200
    tasks = sorted({r["task"] for r in rows})
    assert tasks == list(range(50)) and {r["trial"] for r in rows} == {0, 1, 2, 3}
    R = np.zeros((50, 4))
    for r in rows:
        R[r["task"], r["trial"]] = r["reward"]
    got = pass_curve(success_counts(R), 4)
    assert np.abs(got - np.array(LEADERBOARD["airline", "gpt-4o"])).max() < 5e-4
    for r in rows:
        assert r["end"] in ("user_stop", "transfer", "max_steps")
        assert r["reward"] in (0, 1)
        if r["r_actions"] is not None and r["r_outputs"] is None:
            assert r["reward"] == r["r_actions"]


def test_table_carries_attribution_and_licence():
    from importlib import resources

    head = table_text().splitlines()[:3]
    assert any("sierra-research/tau-bench" in h for h in head) and any("MIT" in h for h in head)
    lic = resources.files("iclr25.agents").joinpath("data/LICENSE-tau-bench.txt").read_text()
    assert "Copyright (c) 2024 Sierra" in lic and "MIT License" in lic


def test_derive_rows_on_a_hand_made_trajectory():
    traj = [{"role": "system", "content": "policy"}, {"role": "user", "content": "hi"},
            {"role": "assistant", "content": None, "tool_calls": [{}]},
            {"role": "tool", "name": "cancel_reservation", "content": "{}"},
            {"role": "assistant", "content": "done"},
            {"role": "user", "content": "Thanks!\n###STOP###"}]
    rec = {"task_id": 3, "trial": 1, "reward": 0.0, "traj": traj,
           "info": {"reward_info": {"info": {"r_actions": 0.0}}}}
    (row,) = derive_rows([rec])
    assert row == {"task": "3", "trial": "1", "reward": "0", "r_actions": "0", "r_outputs": "",
                   "end": "user_stop", "agent_turns": "2", "writes": "1", "last_user": "Thanks!",
                   "gold_writes": "0", "write_class": "extra_write", "push_cue": "0", "agent_done": "0"}
    rec2 = {**rec, "traj": traj[:4] + [{"role": "tool", "name": "transfer_to_human_agents", "content": ""}],
            "info": {}}
    assert derive_rows([rec2])[0]["end"] == "transfer"


def test_write_class_cases():
    g = [("cancel_reservation", {"reservation_id": "A"}), ("cancel_reservation", {"reservation_id": "B"})]
    assert write_class(list(g), g) == "same"
    assert write_class([], []) == "none"
    assert write_class([], g) == "no_write"
    assert write_class(g[:1], g) == "partial"
    assert write_class([("cancel_reservation", {"reservation_id": "C"})], g) == "wrong_args"
    assert write_class([("book_reservation", {})], g) == "extra_write"
    assert write_class([("book_reservation", {})], []) == "extra_write"


def test_cue_labels_and_hand_labels():
    rows = load_airline_table()
    stop_fail = {(r["task"], r["trial"]): r for r in rows if r["reward"] == 0 and r["end"] == "user_stop"}
    assert len(stop_fail) == 98
    labels = {cue_label(r) for r in stop_fail.values()}
    assert labels <= set(STOP_LABELS)
    hand = load_stop_labels()
    assert len(hand) == 20 and len({(h["task"], h["trial"]) for h in hand}) == 20
    assert all((h["task"], h["trial"]) in stop_fail and h["label"] in STOP_LABELS for h in hand)
    agree = sum(cue_label(stop_fail[h["task"], h["trial"]]) == h["label"] for h in hand)
    assert agree >= 16  # the automatic cues agree with reading on most of the 20
    assert cue_label({"write_class": "no_write", "gold_writes": 1, "push_cue": 0}) == "gave_up"
    assert cue_label({"write_class": "extra_write", "gold_writes": 0, "push_cue": 0}) == "asked_violation"
    assert cue_label({"write_class": "wrong_args", "gold_writes": 1, "push_cue": 0}) == "believes_success"


def test_read_labels_are_the_seeded_sample_with_valid_labels():
    rows = load_airline_table()
    lab = load_read_labels()
    assert [(r["task"], r["trial"]) for r in lab] == read_sample(rows)  # exactly the seeded draw, in order
    reward = {(r["task"], r["trial"]): r["reward"] for r in rows}
    assert all(reward[r["task"], r["trial"]] == r["reward"] for r in lab)
    assert sum(r["reward"] == 0 for r in lab) == sum(r["reward"] == 1 for r in lab) == 30
    fail_labels = {"wrong_args", "wrong_decision", "partial", "user_error", "gold_error"}
    assert all(r["label"] in (fail_labels if r["reward"] == 0 else {"ok", "spurious"}) for r in lab)
    assert set(r["label"] for r in lab) <= set(READ_LABELS)
    # reader_ok follows the label: a failure was handled correctly when the gold or the user is at fault,
    # a success only when the reader agrees with it
    assert all(r["reader_ok"] == int(r["label"] in ("gold_error", "user_error", "ok")) for r in lab)


def test_both_readings_are_kept_and_valid():
    from iclr25.agents.published import cohen_kappa, reader_ok

    fail_labels = {"wrong_args", "wrong_decision", "partial", "user_error", "gold_error"}
    for r in load_read_labels():
        for col in ("label_first", "label_second"):
            assert r[col] in (fail_labels if r["reward"] == 0 else {"ok", "spurious"})
        assert r["reader_ok"] == reader_ok(r["label"])
    for h in load_stop_labels():
        assert h["label_first"] in STOP_LABELS and h["label_second"] in STOP_LABELS
        # a settled label is one of the two readings
        assert h["label"] in (h["label_first"], h["label_second"])
    assert cohen_kappa(list("aabb"), list("aabb")) == 1.0
    assert abs(cohen_kappa(list("abab"), list("aabb"))) < 1e-12       # agreement at chance
    assert abs(cohen_kappa(list("aaab"), list("aaba")) - (-1 / 3)) < 1e-12


def test_tau2_corrected_tasks():
    from iclr25.agents.published import PROMPTING, REVISED_TASKS, TAU2_OTHER_FIXES, TAU2_WRONG_GOLD, WRONG_GOLD_TASKS

    # seven "incorrect expected actions" and 22 other fixes, mapped one-to-one onto tau-bench indices 0..49
    assert len(TAU2_WRONG_GOLD) == 7 and len(TAU2_OTHER_FIXES) == 22
    assert len(REVISED_TASKS) == 29 and WRONG_GOLD_TASKS <= REVISED_TASKS <= set(range(50))
    assert WRONG_GOLD_TASKS == {16, 26, 27, 33, 34, 45, 46}
    # the README's prompting baselines have integer histograms over 50 tasks (inverse binomial transform)
    from iclr25.agents import integer_histograms

    hists = {a: integer_histograms(np.array(pk), 50) for (_, a), pk in PROMPTING.items()}
    assert [h.tolist() for h in hists["Act"]] == [[17, 11, 11, 4, 7]]
    assert [h.tolist() for h in hists["ReAct"]] == [[26, 4, 7, 5, 8]]
    # the tool-calling row published with them (before commit 888a1e8 replaced it)
    from iclr25.agents.published import TC_CONTEMPORARY

    assert [h.tolist() for h in integer_histograms(np.array(TC_CONTEMPORARY["airline", "gpt-4o"]), 50)] \
        == [[16, 13, 8, 5, 8]]
