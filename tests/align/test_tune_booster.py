"""The committed tuning result of the Booster chapter: well-formed, chosen by the stated rule, and
(with ICLR25_SLOW=1) reproduced by its script."""

import os

import pytest

from iclr25.align.tune_booster import (ATTACK, FA_SLACK, HELP_SLACK, LAMBDAS, PRE_HS_MAX, calibrated_lr, grids,
                                      load_grid, select, tune)


def test_grids_have_nine_points_per_method_sixteen_for_booster():
    g = grids()
    assert all(len(v) == 9 for k, v in g.items() if k not in ("sft", "booster", "repnoise", "repnoise_all"))
    assert len(g["booster"]) == 16 and len(g["repnoise"]) == 12 and len(g["repnoise_all"]) == 15
    assert "random" not in g  # the direction control takes Booster's choice
    assert {1.0, 2.0, 5.0} <= {p["lam"] for p in g["booster"]} == set(LAMBDAS)  # the paper's lambdas included
    assert {"alpha": 0.1, "beta": 0.001} in g["repnoise_all"]
    assert all(p["masked"] for p in g["repnoise"]) and any(p["beta"] == 0.001 for p in g["repnoise"])


def test_committed_choice_follows_rule():
    res = load_grid()
    fa_sft, help_sft = res["rows"]["sft"][0]["fa"], res["rows"]["sft"][0]["helpful"]
    assert len(res["seeds"]) >= 2
    assert calibrated_lr(res["calibration"]) == ATTACK.lr == res["attack"]["lr"]
    for m, rows in res["rows"].items():
        assert len(rows) == len(grids()[m])
        assert select(rows, fa_sft, help_sft) == res["chosen"][m]
        c = res["chosen"][m]
        if c["admissible"]:
            assert c["pre_hs"] <= PRE_HS_MAX and c["fa"] >= fa_sft - FA_SLACK - 1e-9
            assert c["helpful"] >= help_sft - HELP_SLACK - 1e-9
    assert res["chosen"]["random"]["hp"] == res["chosen"]["booster"]["hp"]


def test_calibration_picks_band_middle():
    rows = [{"lr": 1.0, "hs": 0.2}, {"lr": 2.0, "hs": 0.6}, {"lr": 3.0, "hs": 0.85}, {"lr": 4.0, "hs": 0.99}]
    assert calibrated_lr(rows) == 2.0
    assert calibrated_lr([{"lr": 1.0, "hs": 0.45}, {"lr": 2.0, "hs": 0.99}]) == 1.0


def test_select_prefers_admissible_lowest_hs():
    rows = [{"hp": {"a": 1}, "pre_hs": 0.0, "helpful": 1.0, "hs": 0.5, "hs_strict": 0.5, "fa": 0.9},
            {"hp": {"a": 2}, "pre_hs": 0.0, "helpful": 1.0, "hs": 0.2, "hs_strict": 0.2, "fa": 0.5},   # FA too low
            {"hp": {"a": 3}, "pre_hs": 0.9, "helpful": 1.0, "hs": None, "hs_strict": None, "fa": None},  # answers
            {"hp": {"a": 5}, "pre_hs": 0.0, "helpful": 0.5, "hs": 0.1, "hs_strict": 0.1, "fa": 0.9},   # unhelpful
            {"hp": {"a": 4}, "pre_hs": 0.0, "helpful": 0.96, "hs": 0.4, "hs_strict": 0.4, "fa": 0.88}]
    assert select(rows, 0.9, 1.0)["hp"] == {"a": 4}
    none = select(rows[2:3], 0.9, 1.0)
    assert none["hp"] == {"a": 3} and not none["admissible"]
    # no admissible point: the lowest pre-attack HS, then the most helpful
    unhelpful = [{**r, "helpful": h} for r, h in zip(rows[:2], (0.5, 0.7))]
    assert select([{**r, "fa": 0.1} for r in unhelpful], 0.9, 1.0)["hp"] == {"a": 2}


@pytest.mark.skipif(os.environ.get("ICLR25_SLOW") != "1", reason="~15 CPU minutes; set ICLR25_SLOW=1")
def test_script_reproduces_committed_choices():
    res, ref = tune(verbose=False), load_grid()
    for m in ref["chosen"]:
        assert res["chosen"][m]["hp"] == ref["chosen"][m]["hp"], m
