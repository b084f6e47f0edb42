"""The Booster chapter's record: the three-stream helpfulness reference, its null bar, the reselection and the
JSON round trip of one arm's result."""

import numpy as np
import pytest

from iclr25.align import booster_eval as be
from iclr25.align.select_booster import HELP_NLL_BAR, load_select, select


def test_null_bar_closed_form():
    sigma0, bar = be.null_bar([[1.0, 2.0, 3.0], [2.0, 2.0, 2.0]])  # variances 1 and 0
    assert sigma0 == pytest.approx(np.sqrt(0.5))
    assert bar == pytest.approx(2 * np.sqrt(0.5) * np.sqrt(4 / 3) / np.sqrt(2))
    assert be.null_bar([[1.0, 1.0, 1.0]] * 3) == (0.0, HELP_NLL_BAR)  # no spread: the 0.1-nat floor


def test_reselect_with_sfts_single_run_is_the_old_rule():
    sel = load_select()
    sft = sel["rows"]["sft"][0]
    new = be.reselect(sel, sft["help_nll"], HELP_NLL_BAR)
    for m, rows in sel["rows"].items():
        if m != "sft":
            old = select(rows, sft)
            assert new[m]["admissible"] == old["admissible"], m
            if old["admissible"]:
                assert (new[m]["index"], new[m]["hp"]) == (old["index"], old["hp"]), m


def test_encode_decode_round_trip():
    out = {"align": {"f": [1.0, 0.5]}, "pre": {"hs": 0.0}, "gap_pre": 0.1,
           "post": {0.2: {"hs": 0.5, "trace": {"h": [1.0], "evals": {1: {"hs": 0.5}, 2: {"hs": 0.9}}}},
                    0.0: {"hs": 0.0, "trace": {"h": [1.0], "evals": {1: {"hs": 0.0}}}}},
           "long": {1: {"hs": 0.5}, 2: {"hs": 0.9}}}
    import json
    assert be.decode(json.loads(json.dumps(be.encode(out)))) == out


def test_committed_record():
    sel, rec = load_select(), be.load_eval()
    tun = rec["tuning"]
    assert tun["seeds"] == sel["seeds"] and rec["eval_seeds"] == list(be.EVAL_SEEDS)
    # stream 0 is the stream every method trains on: it reproduces the grid's SFT run
    assert np.allclose([s[0] for s in tun["streams"]], sel["rows"]["sft"][0]["help_nll"], atol=1e-4)
    assert np.allclose(tun["ref"], np.mean(tun["streams"], axis=1))
    assert be.null_bar(tun["streams"]) == pytest.approx((tun["sigma0"], tun["bar"]))
    assert be.reselect(sel, tun["ref"], tun["bar"]) == tun["chosen"]
    assert rec["hp"] == be.chosen_points(sel, tun["chosen"])
    assert rec["hp"]["booster_s"]["lam"] == 5.0 and rec["cpu_s"] > 0 and len(rec["code_sha256"]) == 64
    for s in be.EVAL_SEEDS:
        e = rec["eval"][str(s)]
        assert len(e["sft_streams"]) == len(be.SFT_STREAMS)
        assert sorted(e["arms"]) == sorted(m for m, seeds in be.RECORDED.items() if s in seeds)
        for m, o in e["arms"].items():
            assert sorted(int(k) for k in o["long"]) == list(be.ARM_LENGTHS[m])


def test_committed_records_were_made_by_this_code():
    """Each committed record's stored code hash equals the hash of the code now: a change to the code that made
    it must be followed by a re-run (or, where it is bit-identical, a re-verified re-stamp) of the record."""
    from iclr25.align import select_booster as sb
    assert be.load_eval()["code_sha256"] == be.code_sha256()
    assert load_select()["code_sha256"] == sb.code_sha256()
