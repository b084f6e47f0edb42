"""The committed table derived from tau-bench's gpt-4o airline trajectories: the script still makes
it (when the repository mirror is on this machine), and it reproduces the published pass^k."""

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from iclr25.agents import pass_curve, success_counts
from iclr25.agents.published import (LEADERBOARD, SOURCE_COMMIT, derive_rows, load_airline_table,
                                     read_source, table_text, to_csv)

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
                   "end": "user_stop", "agent_turns": "2", "writes": "1", "last_user": "Thanks!"}
    rec2 = {**rec, "traj": traj[:4] + [{"role": "tool", "name": "transfer_to_human_agents", "content": ""}],
            "info": {}}
    assert derive_rows([rec2])[0]["end"] == "transfer"
