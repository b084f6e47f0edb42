"""The one selection rule of the Booster chapter: grids with room on both sides of the paper's settings, the
rule's three conditions, and the committed result chosen by it on tuning seeds apart from the evaluation seeds."""

import re

import numpy as np

from iclr25.align.select_booster import (HELP_K, HELP_NLL_BAR, LENGTH, admissible, grids, load_select, on_edge, select)


def _row(hp, nll, hs, pre_hs=(0.0, 0.0, 0.0), fa=(0.9, 0.9, 0.9)):
    return {"hp": hp, "help_nll": list(nll), "helpful": [0.9] * 3, "hs": list(hs), "hs_strict": list(hs),
            "pre_hs": list(pre_hs), "fa": list(fa), "pre_h": [1.0] * 3}


SFT = _row({}, (0.5, 0.5, 0.5), (0.9, 0.9, 0.9))


def test_grids_span_the_papers_settings():
    g = grids()
    lams = sorted({p["lam"] for p in g["booster"]})
    assert {1.0, 2.0, 5.0} <= set(lams) and lams[0] < 1.0 and lams[-1] > 5.0
    assert len({p["alpha"] for p in g["booster"]}) >= 3
    rhos = [p["rho"] for p in g["vaccine"]]
    assert min(rhos) <= 0.1 and 2.0 < max(rhos)  # Vaccine's paper rho = 2 and the script's default 0.1 inside
    assert any(p["beta"] == 0.001 for p in g["repnoise"]) and all(p["masked"] for p in g["repnoise"])


def test_helpfulness_is_the_point_estimate_of_the_recipe_nll():
    # k = 0, stated before the run: the mean paired NLL increase against the bar, whatever its s.e.
    assert HELP_K == 0.0 and HELP_NLL_BAR == 0.1
    assert admissible(_row({"a": 1}, (0.55, 0.55, 0.55), (0.1, 0.1, 0.1)), SFT)      # +0.05 nats
    assert not admissible(_row({"a": 2}, (0.65, 0.65, 0.65), (0.1, 0.1, 0.1)), SFT)  # +0.15 nats
    # a noisy cost above the bar is rejected even though its interval contains the bar
    noisy = _row({"a": 3}, (0.5, 0.6, 0.8), (0.1, 0.1, 0.1))
    d = np.subtract(noisy["help_nll"], SFT["help_nll"])
    assert np.mean(d) - d.std(ddof=1) / np.sqrt(3) < HELP_NLL_BAR < np.mean(d)
    assert not admissible(noisy, SFT)
    # a gain (lower NLL than SFT) is admissible
    assert admissible(_row({"a": 4}, (0.3, 0.3, 0.3), (0.1, 0.1, 0.1)), SFT)


def test_rule_picks_lowest_hs_among_admissible():
    rows = [_row({"a": 1}, (0.5, 0.5, 0.5), (0.6, 0.6, 0.6)),
            _row({"a": 2}, (0.9, 0.9, 0.9), (0.0, 0.0, 0.0)),                    # unhelpful
            _row({"a": 3}, (0.5, 0.5, 0.5), (0.1, 0.1, 0.1), pre_hs=(0.2, 0.2, 0.2)),  # does not refuse
            _row({"a": 4}, (0.5, 0.5, 0.5), (0.2, 0.2, 0.2), fa=(0.5, 0.5, 0.5)),   # loses the task
            {**_row({"a": 5}, (0.5, 0.5, 0.5), (0.0, 0.0, 0.0)), "hs": [0.0, None, 0.0]},  # not attacked on a seed
            _row({"a": 6}, (0.5, 0.5, 0.5), (0.4, 0.4, 0.4))]
    assert select(rows, SFT) == {"index": 5, "hp": {"a": 6}, "admissible": True}
    assert select(rows[1:5], SFT)["hp"] is None
    assert on_edge(rows, {"a": 6}) == ["a"] and on_edge(rows, {"a": 3}) == []


def test_committed_result_follows_rule():
    res = load_select()
    assert len(res["seeds"]) >= 3 and min(res["seeds"]) >= 100  # the chapter evaluates on seeds 0-4
    assert res["length"] == LENGTH == 2 and res["rule"]["help_nll_bar"] == HELP_NLL_BAR and res["rule"]["help_k_se"] == HELP_K
    assert res["rule"]["help_dishes"] == ["val", "eval"] and res["rehelp_cpu_s"] > 0
    assert all(r.get("reproduced", True) for rs in res["rows"].values() for r in rs)  # re-alignment matches the grid's
    assert all(len(r["help_nll"]) == len(res["seeds"]) for rs in res["rows"].values() for r in rs)
    assert re.fullmatch(r"[0-9a-f]{64}", res["code_sha256"]) and res["cpu_s"] > 0
    sft = res["rows"]["sft"][0]
    for m, c in res["chosen"].items():
        assert [r["hp"] for r in res["rows"][m]] == grids()[m], m
        assert {k: c[k] for k in ("index", "hp", "admissible")} == select(res["rows"][m], sft), m
        assert c["edges"] == on_edge(res["rows"][m], c["hp"])
