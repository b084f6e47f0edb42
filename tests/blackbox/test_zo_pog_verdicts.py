"""The gating table of theory/zo-pog's paper rows (iclr25.blackbox.zo_pog_verdicts), on synthetic studies."""

import numpy as np
import pytest

from iclr25.blackbox import zo_pog_verdicts as V

SEEDS = list(range(40))


def study(acc: dict, *, rand: float = 90.0, ceiling: float | None = None, noise: float = 0.5, edge=(),
          words: float | None = None):
    """A synthetic study: per-arm mean accuracies (seed noise added), random prompts whose best-of-any-k
    scores ``rand`` on test, the template alone at 80, a 2-value-neighbour grid with the chosen cell interior
    (or on the edge for the arms in ``edge``); ``words``: the white-box words comparison's mean, if measured."""
    rng = np.random.default_rng(0)
    runs = {}
    for m, a in acc.items():
        runs[m] = {}
        for s in SEEDS:
            x = round(a + noise * rng.standard_normal(), 2)
            n = 13 if m in V.Z_POLICY else 26
            runs[m][str(s)] = {"acc": x, "n_dev_evals": n, "at": {"500": x - 1.0, "1000": x}}
            if m in V.DRAW_ARMS:
                runs[m][str(s)]["mode"] = x - 0.5
    draws = {str(s): {"dev": [50.0] * 64, "test": {"0": rand + noise * rng.standard_normal()}} for s in SEEDS}
    chosen = {m: [1.0] for m in acc}
    grids = {m: [[1.0, 2.0]] if m in edge else [[0.5, 1.0, 2.0]] for m in acc}
    ceil = None if ceiling is None else {str(s): ceiling + noise * rng.standard_normal() for s in SEEDS[:30]}
    w = None if words is None else {str(s): words + 2 * noise * rng.standard_normal() for s in SEEDS[:30]}
    return V.analyse(V.view(1000, SEEDS, runs, chosen, grids, {str(s): 80.0 for s in SEEDS}, draws, ceil, words=w))


BASE = {"ZO-PoG": 93.0, V.NC: 90.0, "ZO-only": 93.0, "BDPL": 90.0, "BBT": 93.0, V.NG: 93.0}


def verdicts(a):
    return {r.arm: V.row_verdict(a, r) for r in V.ROWS}


def test_each_row_has_its_own_gate_when_the_discrete_block_fails():
    a = study(BASE)                 # no-continuous and BDPL level with random search (90); no eta_z = 0 arm
    v = verdicts(a)
    assert not a["learns"][V.NC] and not a["learns"]["BDPL"] and a["words_arm"] == V.NC
    for arm in ("BBT", "ZO-only", V.NG):    # rows about the words: undecided, with the measurement
        assert v[arm][0] is None and "not detectably better than the best on dev of 25 random prompts" in v[arm][1]
        assert "no-continuous" in v[arm][1] and "is still gaining +1.0 points from 500 to 1000 queries" in v[arm][1]
    assert v["BDPL"] == (True, None)        # one rule: the baseline's failed bar is a caveat, as for no-continuous
    assert v[V.NC] == (True, None)
    for row in (V.ROWS[1], V.ROWS[4]):
        assert "the gain is what z adds to such tokens" in V.caveat(a, row)
    assert V.caveat(a, V.ROWS[0]) is None
    assert v["Manual"] == (True, None)


def test_the_words_gate_reads_zo_pog_at_eta_z_zero_and_the_white_box_comparison():
    learns = dict(BASE, **{V.FZ: 95.0, "BBT": 91.0, "ZO-only": 91.0, V.NG: 91.0})   # its own words beat random search
    a = study(learns, words=2.0)
    assert a["words_arm"] == V.FZ and a["learns"][V.FZ] and a["k"][V.FZ] == 13
    assert a["only_z"][1] < 0                      # ZO-PoG (93) below its frozen-z self (95): z adds nothing
    v = verdicts(a)
    assert v["BBT"] == (True, None) and v["ZO-only"] == (True, None) and v[V.NG] == (True, None)
    assert v[V.NC][0] is None and "z does not add to ZO-PoG's own words" in v[V.NC][1]
    level = study(learns, words=0.0)               # with white-box z, ZO-PoG's tokens are level with BBT's
    for arm in ("BBT", "ZO-only"):
        vv, why = V.row_verdict(level, next(r for r in V.ROWS if r.arm == arm))
        assert vv is None and "once z is fitted the words do not matter" in why
    assert V.row_verdict(level, V.ROWS[5])[0] is not None     # the Gumbel row needs only the z = 0 bar
    fails = study(dict(learns, **{V.FZ: 90.0}), words=2.0)    # the words at z = 0 level with random search
    assert "ZO-PoG's own words (ZO-PoG with eta_z = 0) are not detectably better than the best on dev of 13" \
        in V.row_verdict(fails, V.ROWS[5])[1]
    assert fails["only_z"][1] > 0 and V.row_verdict(fails, V.ROWS[4]) == (True, None)


def test_k_counts_distinct_dev_evaluations():
    assert V.distinct_evals(26, 1000, 20) == 25       # 25 passes end at 1000: the final evaluation repeats
    assert V.distinct_evals(13, 1000, 40) == 13       # 25 steps: the last one after the last pass is new
    assert V.distinct_evals(8, 300, 20) == 8 and V.distinct_evals(101, 4000, 20) == 100
    assert V.queries_per_step(V.FZ) == 40 and V.queries_per_step(V.NC) == 20


def test_a_failure_to_show_a_gain_needs_room_but_a_significant_loss_reads_no():
    acc = dict(BASE, **{V.NC: 95.0, "BDPL": 95.0, "BBT": 93.1})   # token learners beat random search
    a = study(acc)                       # no reference measured; ZO-PoG - BBT about -0.1: not a loss, not a gain
    assert a["learns"][V.NC] and a["gain"]["BBT"][1] < 0 < a["gain"]["BBT"][2]
    assert V.row_verdict(a, V.ROWS[0]) == (None, "a NO that is not a loss needs room above the other arm, and no "
                                                 "reference was measured here")
    low = study(acc, ceiling=93.5)       # the reference is level with BBT: no room for a point
    v, why = V.row_verdict(low, V.ROWS[0])
    assert v is None and why.startswith("no measured room")
    high = study(acc, ceiling=99.0)      # room: the NO stands
    assert V.row_verdict(high, V.ROWS[0]) == (False, None)
    assert V.row_verdict(high, V.ROWS[2]) == (True, None)    # the template alone is far below


def test_a_significant_loss_reads_no_without_room():
    acc = dict(BASE, **{V.NC: 95.0, "BDPL": 95.0, "BBT": 95.0})   # ZO-PoG 2 points behind BBT
    for a in (study(acc), study(acc, ceiling=95.5)):               # no reference; a reference level with BBT
        assert a["gain"]["BBT"][2] < 0
        assert V.row_verdict(a, V.ROWS[0]) == (False, None)
    assert V.row_reasons(study(acc, ceiling=95.5), V.ROWS[0])[0].startswith("no measured room")


def test_the_no_room_reason_comes_first():
    a = study(BASE, ceiling=93.2)       # discrete block fails its bar, and no room above BBT
    v, why = V.row_verdict(a, V.ROWS[0])
    assert v is None and why.startswith("no measured room") and "not detectably better" in why


def test_competence_edges_and_headroom_gate_the_rows_that_need_them():
    a = study(dict(BASE, BBT=81.0), edge=("BDPL",))
    assert "BBT does not beat the template alone" in V.row_verdict(a, V.ROWS[0])[1]
    assert "BDPL's tuned optimum lies on its grid's edge" in V.row_verdict(a, V.ROWS[1])[1]
    assert V.row_verdict(a, V.ROWS[4])[0] is True    # unaffected rows stay decided
    full = study({m: 98.0 for m in BASE})
    assert all("no headroom" in V.row_verdict(full, r)[1] for r in V.ROWS if r.arm != "Manual")
    assert V.row_verdict(full, V.ROWS[2]) == (True, None)     # a gain above 0 needs no room


def test_mode_is_explicit_per_arm():
    a = study(BASE)
    assert np.allclose(V.vacc(a, "BDPL", "mode"), V.vacc(a, "BDPL"))          # BDPL's own rule is its mode
    assert np.allclose(V.vacc(a, "ZO-PoG", "mode"), V.vacc(a, "ZO-PoG") - 0.5)
    del a["runs"]["ZO-PoG"]["0"]["mode"]
    with pytest.raises(KeyError):
        V.vacc(a, "ZO-PoG", "mode")


def test_untouched_rows_gate_on_the_learners_bar():
    seeds = SEEDS[:20]
    runs = {m: {str(s): {"acc": a, "draw": a, "wb": 99.0} for s, a in zip(seeds, 90 + np.linspace(-1, 1, 20) + d)}
            for m, d in (("ZO-PoG", 5.0), (V.NC, 2.0), ("BDPL", 0.0), (V.NG, 3.0))}
    rand_dev = {str(s): [50.0] * 64 for s in seeds}
    rand_test = {str(s): [88.0] * 64 for s in seeds}
    k = {"ZO-PoG": 13, V.NC: 26, "BDPL": 26}
    u = V.untouched(runs, seeds, rand_dev, rand_test, k, {"z": True})
    assert u["learns"][V.NC] and u["learns"]["BDPL"]
    assert [V.u_row_verdict(u, r)[0] for r in V.U_ROWS] == [True, True, True]
    u2 = V.untouched(runs, seeds, rand_dev, {str(s): [93.0] * 64 for s in seeds}, k, {"z": True})
    assert not u2["learns"][V.NC]
    assert not u2["learns"]["BDPL"]
    assert [V.u_row_verdict(u2, r)[0] for r in V.U_ROWS] == [True, True, None]   # BDPL's failed bar: a caveat
    assert "what z adds" in V.u_caveat(u2, V.U_ROWS[0]) and V.u_caveat(u, V.U_ROWS[0]) is None
    assert V.u_caveat(u2, V.U_ROWS[2]) is None
    lose = {m: {s: dict(r, draw=r["draw"] - 6.0 if m == "ZO-PoG" else r["draw"]) for s, r in rs.items()}
            for m, rs in runs.items()}
    for m in lose:
        for r in lose[m].values():
            r["acc"] = r["draw"]
            r["wb"] = 90.0      # no room above any arm
    u3 = V.untouched(lose, seeds, rand_dev, rand_test, k, {"z": True})
    assert V.u_row_verdict(u3, V.U_ROWS[1]) == (False, None)      # a significant loss: NO without room
    assert V.dev_evals(40, 2, 1000) == 13 and V.dev_evals(20, 2, 1000) == 25
