"""The chapter's verdict rules on synthetic cells (iclr25.interventions.decide)."""

import math

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
