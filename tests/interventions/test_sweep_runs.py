"""The editing x compression sweep shared by the chapter and its caching script."""

import json

import numpy as np

from iclr25.common.digest import json_sha256
from iclr25.interventions import sweep_runs
from iclr25.interventions.sweep_runs import margin_matched, same_rows


def test_same_rows_is_zero_on_identical_rows_and_catches_differences():
    a = [dict(seed=0, editor="MEMIT", order="alone", success=0.9, hobby=0.6)]
    assert same_rows(a, [dict(r) for r in a]) == 0.0
    b = [dict(a[0], success=0.8)]
    assert abs(same_rows(a, b) - 0.1) < 1e-12
    assert same_rows(a, [dict(a[0], order="edit first")]) == float("inf")     # rows that do not line up
    assert same_rows(a, a + a) == float("inf")


class _Fact:
    def __init__(self, subject):
        self.meta = {"subject": subject}


def test_margin_match_is_nearest_without_replacement_and_skips_excluded():
    pool = [_Fact(f"p{i}") for i in range(5)]
    margins = np.array([-1.0, 1.0, 2.0, 2.1, 5.0])
    facts, gap = margin_matched(pool, margins, [2.05, 2.05], exclude={"p3"})
    assert [f.meta["subject"] for f in facts] == ["p2", "p1"]              # p3 excluded, p0 not known
    assert abs(gap - (0.05 + 1.05) / 2) < 1e-9


def test_committed_sweep_matches_its_digest_and_recipe():
    runs = json.loads(sweep_runs.RUNS_FILE.read_text())
    assert json_sha256(runs["rows"]) == runs["rows_sha256"]
    rec = runs["recipe"]
    assert rec["edit_choice"] == sweep_runs.RECIPE["edit_choice"] and rec["sweep"] == sweep_runs.RECIPE["sweep"]
    assert sorted({r["seed"] for r in runs["rows"]}) == rec["seeds"]
    assert sweep_runs.RUNS_FILE.stat().st_size < 1_000_000
