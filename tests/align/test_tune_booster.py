"""What the Booster chapter still reads from ``grids/booster.json`` (made by :mod:`iclr25.align.tune_booster`):
the attack's learning-rate calibration on SFT alone, and the RepNoise-style rows on every response token
(``repnoise_all``) that the chapter cites for masking the loss to the hazard tokens. The methods themselves
are selected by :mod:`iclr25.align.select_booster` (``tests/align/test_select_booster.py``)."""

from iclr25.align.tune_booster import ATTACK, calibrated_lr, load_grid


def test_committed_calibration_gives_the_frozen_attack():
    res = load_grid()
    assert len(res["seeds"]) >= 2 and min(res["seeds"]) >= 100  # the chapter evaluates on seeds 0-4
    assert calibrated_lr(res["calibration"]) == ATTACK.lr == res["attack"]["lr"]
    hs = [r["hs"] for r in sorted(res["calibration"], key=lambda r: r["lr"])]
    assert hs == sorted(hs) and hs[0] < 0.5 < hs[-1]  # the calibrated rate lies inside the grid


def test_calibration_picks_band_middle():
    rows = [{"lr": 1.0, "hs": 0.2}, {"lr": 2.0, "hs": 0.6}, {"lr": 3.0, "hs": 0.85}, {"lr": 4.0, "hs": 0.99}]
    assert calibrated_lr(rows) == 2.0
    assert calibrated_lr([{"lr": 1.0, "hs": 0.45}, {"lr": 2.0, "hs": 0.99}]) == 1.0


def test_repnoise_on_every_response_token_costs_helpfulness_everywhere():
    # the chapter: "on every response token the loss ... costs helpfulness at every point of a fifteen-point grid"
    res = load_grid()
    sft, rows = res["rows"]["sft"][0], res["rows"]["repnoise_all"]
    assert len(rows) == 15 and {r["hp"]["alpha"] for r in rows} == {0.01, 0.03, 0.1, 0.5, 2.0}
    assert all(r["helpful"] < sft["helpful"] - res["help_slack"] for r in rows)
