"""The chapter's verdict rules on synthetic cells (iclr25.interventions.decide)."""

import math

from iclr25.interventions.decide import (gate, hinders_vote, insensitive, order_verdict, paper_verdict, sensitive,
                                         three_way, verdict)


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


def test_gate_turns_a_no_with_small_ratio_undecided():
    assert gate(False, 0.2) is None
    assert gate(False, 0.5) is False
    assert gate(True, 0.0) is True and gate(None, 9.0) is None
    assert gate(False, math.nan) is None


def test_a_no_with_ratio_below_min_becomes_undecided():
    assert hinders_vote(cell(h1=0.0, ratio=0.2), "ef") == (None, "ratio")
    assert hinders_vote(cell(h1=0.0, ratio=0.8), "ef") == (False, "no")


def test_a_yes_that_fails_the_control_becomes_undecided():
    assert hinders_vote(cell(), "cf") == (True, "yes")                                       # no control needed
    assert hinders_vote(cell(), "cf", control=cell(h1=0.0), needs_control=True) == (None, "control")
    assert hinders_vote(cell(), "cf", control=None, needs_control=True) == (None, "control")
    # a control that cannot make the edit before the final re-compression does not confirm
    assert hinders_vote(cell(), "cf", control=cell(pre=0.3), needs_control=True) == (None, "control")
    assert hinders_vote(cell(), "cf", control=cell(), needs_control=True) == (True, "yes")
    assert hinders_vote(cell(h1=0.15), "cf") == (None, "interval")


def test_order_rules():
    assert sensitive(cell())
    assert not sensitive(cell(diff=0.1, diff_se=0.05))                     # 2 s.e. from 0 only
    # compress first worse (diff > 0): the control must confirm the compress-first loss
    assert not sensitive(cell(), control=cell(h1=0.0), needs_control=True)
    assert not sensitive(cell(), control=cell(pre=0.5), needs_control=True)
    assert sensitive(cell(), control=cell(), needs_control=True)
    # edit first worse (diff < 0): no control needed
    assert sensitive(cell(diff=-0.5), control=cell(h1=0.0), needs_control=True)
    assert insensitive(cell(E_OS=0.02, E_OS_se=0.01))
    assert not insensitive(cell(E_OS=0.02, E_OS_se=0.01, ratio=0.3))      # the edit dwarfs compression
    assert order_verdict([False, True], [False, False]) is True
    assert order_verdict([False, False], [True, True]) is False
    assert order_verdict([False, False], [True, False]) is None
    assert order_verdict([], []) is None


def test_paper_verdict():
    assert paper_verdict(True, "x", True, None) == (True, None)
    assert paper_verdict(None, "why", True, None) == (None, "why")
    assert paper_verdict(True, None, False, "no seeds") == (None, "no seeds")
