"""The chapter's verdict rules on synthetic cells (iclr25.interventions.decide)."""

import math

import pytest

from iclr25.interventions import decide

from iclr25.interventions.decide import (hinders_vote, loss_beyond_control, insensitive, order_verdict, paper_verdict,
                                         sensitive, three_way, verdict)


def cell(h1=0.5, se=0.05, ratio=1.0, pre=1.0, E_OS=0.5, E_OS_se=0.05, diff=0.5, diff_se=0.05):
    return dict(h1_ef=h1, h1_ef_se=se, h1_cf=h1, h1_cf_se=se, ratio_ef=ratio, ratio_cf=ratio, pre=pre,
                E_OS=E_OS, E_OS_se=E_OS_se, diff=diff, diff_se=diff_se)


def test_three_way_interval_against_bar():
    assert three_way(0.5, 0.1) is True                 # [0.3, 0.7] above 0.15
    assert three_way(0.0, 0.05) is False               # [-0.1, 0.1] below
    assert three_way(0.15, 0.05) is None               # contains the bar
    assert three_way(0.2501, 0.05) is True and three_way(0.25, 0.05) is None   # the edge: mean - 2 se = 0.15


def test_verdict_any_yes_all_no():
    assert verdict([None, True, False]) is True
    assert verdict([False, False]) is False
    assert verdict([False, None]) is None
    assert verdict([]) is None


def test_a_no_stands_on_the_interval_whatever_the_ratio():
    # the ratio at the keys is printed beside the row, it never turns a no undecided
    assert hinders_vote(cell(h1=0.0, ratio=0.2), "ef") == (False, "no")
    assert hinders_vote(cell(h1=0.0, ratio=math.nan), "cf") == (False, "no")
    assert hinders_vote(cell(h1=0.15), "cf") == (None, "interval")


def test_a_yes_stands_on_the_paper_pipeline_and_the_control_is_a_check():
    assert hinders_vote(cell(), "cf") == (True, "yes")
    ft = cell(h1=0.9)
    assert loss_beyond_control(ft, cell(h1=0.05), "cf") is True        # the control keeps the edit: FT's loss is not capacity
    assert loss_beyond_control(ft, cell(h1=0.9), "cf") is False        # the control loses as much: capacity explains it
    assert loss_beyond_control(ft, cell(h1=0.75), "cf") is None        # the difference's interval contains the bar
    assert loss_beyond_control(ft, None, "cf") is None


def test_order_rules():
    assert sensitive(cell())
    assert not sensitive(cell(diff=0.1, diff_se=0.05))                     # 2 s.e. from 0 only
    assert not sensitive(cell(E_OS=0.1))                                   # E_OS below the bar
    assert insensitive(cell(E_OS=0.02, E_OS_se=0.01))
    assert insensitive(cell(E_OS=0.02, E_OS_se=0.01, ratio=0.3))          # the ratio plays no part
    assert not insensitive(cell(E_OS=0.12, E_OS_se=0.03))                 # interval contains the bar
    assert order_verdict([False, True], [False, False]) is True
    assert order_verdict([False, False], [True, True]) is False
    assert order_verdict([False, False], [True, False]) is None
    assert order_verdict([], []) is None


def test_paper_verdict():
    assert paper_verdict(True, "x", True, None) == (True, None)
    assert paper_verdict(None, "why", True, None) == (None, "why")
    assert paper_verdict(True, None, False, "no seeds") == (None, "no seeds")


def _urows(setting="S", comp="wanda", st=0.5, seeds=(0, 1, 2, 3), alone=0.3, control=0.95, first=None, second=None):
    first = first if first is not None else [alone] * len(seeds)
    second = second if second is not None else [alone] * len(seeds)
    return [dict(setting=setting, comp=comp, strength=st, seed=s, alone=alone, control=control, first=f, second=g,
                 pre=alone, ratio_first=0.1, ratio_second=0.2, hobby=0.55, base_hobby=0.6)
            for s, f, g in zip(seeds, first, second)]


def test_unlearn_cells_pair_by_seed_not_order():
    rows = _urows(first=[0.3, 0.6, 0.3, 0.6]) + _urows(comp="rtn", st=3)
    cells = decide.unlearn_cells(rows[::-1])                      # reversed: pairing is by seed
    c = cells["S", "wanda", 0.5]
    assert c["n"] == 4 and c["seeds"] == [0, 1, 2, 3]
    assert abs(c["rise_first"] - 0.15) < 1e-9 and c["rise_second"] == 0.0 and abs(c["room"] - 0.65) < 1e-9
    assert abs(c["E_OS"] - 0.15) < 1e-9 and abs(c["hobby_drop"] - 0.05) < 1e-9


def test_unlearn_cells_refuse_unequal_or_repeated_seeds():
    with pytest.raises(ValueError):
        decide.unlearn_cells(_urows() + _urows(comp="rtn", st=3, seeds=(0, 1, 2)))
    with pytest.raises(ValueError):
        decide.unlearn_cells(_urows() + _urows(seeds=(0,)))


def test_unlearn_vote_three_way_and_control():
    up = decide.unlearn_cells(_urows(first=[0.7, 0.72, 0.68, 0.7]))["S", "wanda", 0.5]
    assert decide.unlearn_vote(up, "first") == (True, "yes")
    assert decide.unlearn_vote(up, "second") == (False, "no")
    wide = decide.unlearn_cells(_urows(first=[0.3, 0.7, 0.3, 0.5]))["S", "wanda", 0.5]
    assert decide.unlearn_vote(wide, "first") == (None, "interval")
    # compression alone leaves the knowledge at the unlearned level: no rise could show, so no vote
    flat = decide.unlearn_cells(_urows(control=0.35, first=[0.7] * 4))["S", "wanda", 0.5]
    assert decide.unlearn_vote(flat, "first") == (None, "control")


def test_unlearn_competent():
    c = decide.unlearn_cells(_urows())["S", "wanda", 0.5]
    assert decide.unlearn_competent(c)
    assert not decide.unlearn_competent({**c, "alone": 0.45}) and not decide.unlearn_competent({**c, "hobby_drop": 0.2})


def _trows(seeds=(0, 1, 2, 3), comp_succ=(0.5, 0.6, 0.5, 0.6), margin=(0.9, 0.9, 0.9, 0.9), orig=(0.95, 0.95, 0.85, 0.95),
           sts=(0.6, 0.7)):
    rows = [dict(seed=s, editor="E", comp="none", strength=0, order="alone", success=1.0) for s in seeds]
    for st in sts:
        rows += [dict(seed=s, editor="none", comp="sgpt", strength=st, order="compress only",
                      orig_fact=orig[i] if st == sts[-1] else 1.0) for i, s in enumerate(seeds)]
        rows += [dict(seed=s, editor="E", comp="sgpt", strength=st, order="margin control", success=margin[i])
                 for i, s in enumerate(seeds)]
        rows += [dict(seed=s, editor="E", comp="sgpt", strength=st, order="edit first", ratio=0.3,
                      success=comp_succ[i] if st == sts[-1] else 1.0) for i, s in enumerate(seeds)]
    return rows


def test_trend_cells_excess_over_margin_facts_paired_by_seed():
    cells = decide.trend_cells(_trows()[::-1], {"sgpt": [0.6, 0.7]}, ["E"], ["edit first"])
    c = cells["E", "sgpt", 0.7, "edit first"]
    assert c["n"] == 4 and abs(c["excess"] - (0.45 - 0.1)) < 1e-9 and abs(c["orig_fact"] - 0.925) < 1e-9
    assert abs(cells["E", "sgpt", 0.6, "edit first"]["excess"] + 0.1) < 1e-9
    with pytest.raises(ValueError):
        decide.trend_cells(_trows() + _trows(seeds=(0,)), {"sgpt": [0.6, 0.7]}, ["E"], ["edit first"])


def test_trend_votes_use_the_strongest_setting_that_keeps_the_original_facts():
    st = {"sgpt": [0.6, 0.7]}
    cells = decide.trend_cells(_trows(), st, ["E"], ["edit first"])
    assert decide.trend_votes(cells, st, ["E"], ["edit first"])["E", "sgpt", "edit first"] == (True, 0.7)
    low = decide.trend_cells(_trows(orig=(0.8,) * 4), st, ["E"], ["edit first"])   # 0.7 loses the original facts
    assert decide.trend_votes(low, st, ["E"], ["edit first"])["E", "sgpt", "edit first"] == (False, 0.6)
    bad = decide.trend_cells(_trows(orig=(0.8,) * 4), {"sgpt": [0.7]}, ["E"], ["edit first"])
    assert decide.trend_votes(bad, {"sgpt": [0.7]}, ["E"], ["edit first"])["E", "sgpt", "edit first"] == (None, None)
