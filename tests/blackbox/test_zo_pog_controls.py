"""The room pilot, the eta_z = 0 control, the 32-example-dev random-prompt record and BDPL's official update
of theory/zo-pog (iclr25.blackbox.zo_pog_room, zo_pog_frozen, zo_pog_bar32, zo_pog_fair.run_bdpl_official)."""

import json

import pytest
import torch

from iclr25.blackbox import zo_pog_bar32 as b32
from iclr25.blackbox import zo_pog_budget as zb
from iclr25.blackbox import zo_pog_budget2 as z2
from iclr25.blackbox import zo_pog_frozen as zf
from iclr25.blackbox import zo_pog_room as zr
from iclr25.blackbox import zo_pog_study as study


def test_room_conditions_read_the_best_words_and_pilot_bar():
    run = {"BBT_tokens": [90.0, 91.0], "random": [95.0, 94.0], "BBT": 92.0}
    assert zr.room(run) == (2.0, 3.0)                       # (a) best words (random, better dev) minus BBT
    tie = dict(run, random=[90.0, 99.0])                     # a tie on dev goes to BBT's tokens
    assert zr.room(tie) == (-1.0, 8.0)
    big = {str(s): dict(run, random=[95.0, 94.0 + 0.1 * s]) for s in range(3)}
    v = zr.verdict(big, pilot=True)
    assert v["room"] and v["a"][0] == pytest.approx(2.1) and v["b"][0] == pytest.approx(3.1)
    assert zr.verdict(big, pilot=False)["room"]              # tight intervals: the study's bar holds too
    wide = {str(s): dict(run, random=[95.0, 90.0 + 4 * s]) for s in range(3)}   # (a) -2, +2, +6: mean 2, wide
    assert zr.verdict(wide, pilot=True)["room"] and not zr.verdict(wide, pilot=False)["room"]
    low = {str(s): dict(run, random=[95.0, 92.5]) for s in range(3)}  # (a) +0.5 < 1.5
    assert not zr.verdict(low, pilot=True)["room"]


def test_room_record_is_current_and_shows_no_room():
    rec = zr.load()
    assert rec["code_sha256"] == zr.code_sha256(), "re-run python -m iclr25.blackbox.zo_pog_room"
    assert set(rec["runs"]) == set(zr.VARIANTS) and all(set(r) == {str(s) for s in zr.PILOT_SEEDS} for r in rec["runs"].values())
    assert {n: zr.verdict(r, pilot=True) for n, r in rec["runs"].items()} == rec["verdicts"]
    from iclr25.blackbox import zo_pog_template as tpl
    assert torch.equal(zr.projection(200, 8), tpl.setup(200)[2])    # d = 8 is the deciding study's projection
    assert zr.projection(200, 2).shape == (tpl.setup(200)[2].shape[0], 2)


def test_frozen_control_is_current_and_keeps_zo_pogs_queries_and_steps(tmp_path):
    rec, ext, bud = zf.load(), z2.load_ext(), zb.load()
    assert rec["code_sha256"] == zf.code_sha256(), "re-run python -m iclr25.blackbox.zo_pog_frozen"
    assert rec["ext_record_sha256"] == ext["sha256"] and rec["budget_record_sha256"] == bud["sha256"]
    assert rec["cells"]["1000"] == [ext["chosen"]["ZO-PoG"][0], 0.0] and rec["cells"]["300"] == [bud["chosen"]["ZO-PoG"][0], 0.0]
    for q, seeds in (("1000", z2.SEEDS_BIG), ("300", zb.EVAL_SEEDS_B)):
        runs = rec["runs"][q]
        assert set(runs) == {str(s) for s in seeds}
        assert all(o["queries"] == int(q) and not o["leak"] for o in runs.values())
    zo = ext["runs"]["ZO-PoG"] if "ZO-PoG" in ext["runs"] else z2.load_big()["runs"]["ZO-PoG"]
    assert all(rec["runs"]["1000"][s]["n_dev_evals"] == zo[s]["n_dev_evals"] for s in zo)   # same dev evaluations
    rec["runs"]["1000"][str(z2.SEEDS_BIG[0])]["acc"] = 100.0
    bad = tmp_path / "f.json"
    bad.write_text(json.dumps(rec))
    with pytest.raises(ValueError):
        zf.load(bad)


def test_bar32_record_is_current_and_keeps_every_dev_leader():
    rec = b32.load()
    assert rec["code_sha256"] == b32.code_sha256(), "re-run python -m iclr25.blackbox.zo_pog_bar32"
    assert set(rec["draws"]) == {str(s) for s in study.EVAL_SEEDS}
    for d in rec["draws"].values():
        assert len(d["dev"]) == b32.N_DRAWS
        for k in (1, 13, 25, 64):   # the best on dev of any first k has a test score
            assert str(max(range(k), key=lambda j: (d["dev"][j], -j))) in d["test"]


def test_bdpl_official_update_spends_its_budget_and_stays_on_the_simplex():
    from iclr25.blackbox import zo_pog_fair as fair
    from iclr25.blackbox.api import BlackBoxLM
    torch.set_num_threads(1)
    lm, vocab = study.model_and_vocab()
    enc, cands, _ = zb.setup(300)
    bb = BlackBoxLM(lm, vocab, study.TASK, 120)
    log: list = []
    r = fair.run_bdpl_official(bb, enc["train"], enc["dev"], enc["test"], cands, study.N_POS, 0.1,
                               batch_size=16, n_samples=20, seed=0, log=log)
    assert r.queries == 120 and bb.n_queries == 120 and len(log) == 6        # six steps of I = 20 queries
    p = r.probs
    assert torch.all(p >= 0) and torch.allclose(p.sum(-1), torch.ones(p.shape[0], dtype=p.dtype))
    assert all(0 <= share <= 1 for _, share in log) and log[0][0] < torch.log(torch.tensor(float(cands.numel())))
    assert all(q.grad is None for q in lm.parameters())


def test_room10_tie_rule_favours_neither_set_and_reading():
    from iclr25.blackbox import zo_pog_room10 as r10
    run = {"BBT_tokens": [90.0, 91.0], "random": [90.0, 95.0], "BBT": 92.0}   # a dev tie: the mean of 91 and 95
    assert r10.room_fair(run) == (1.0, 4.0)
    assert r10.room_fair(dict(run, random=[91.0, 95.0])) == (3.0, 4.0)
    room = {str(s): dict(run, random=[95.0, 95.0 + 0.1 * s], BBT=91.0) for s in range(10)}
    assert r10.read(room)["reading"] == "room"
    none = {str(s): dict(run, random=[95.0, 91.0 + 0.1 * (s % 2)], BBT=91.0) for s in range(10)}   # (b) ~0
    assert r10.read(none)["reading"] == "no room"
    wide = {str(s): dict(run, random=[95.0, 91.0 + 6 * (s % 2)], BBT=91.0) for s in range(4)}      # (b) 0 or 6, 4 seeds
    assert r10.read(wide)["reading"] == "undecided"


def test_room10_record_is_current():
    from iclr25.blackbox import zo_pog_room10 as r10
    rec = r10.load()
    assert rec["code_sha256"] == r10.code_sha256(), "re-run python -m iclr25.blackbox.zo_pog_room10"
    assert set(rec["runs"]) == {str(s) for s in r10.SEEDS} and not set(r10.SEEDS) & set(zr.PILOT_SEEDS)
    assert not set(r10.SEEDS) & (set(zb.EVAL_SEEDS_B) | set(zb.TUNE_SEEDS_B) | set(study.EVAL_SEEDS))
    assert r10.read(rec["runs"]) == rec["reading"]


def test_uniform_control_is_current_and_keeps_zo_pogs_queries_and_draws():
    from iclr25.blackbox import zo_pog_uniform as zu
    rec, ext, bud = zu.load(), z2.load_ext(), zb.load()
    assert rec["code_sha256"] == zu.code_sha256(), "re-run python -m iclr25.blackbox.zo_pog_uniform"
    assert rec["ext_record_sha256"] == ext["sha256"] and rec["budget_record_sha256"] == bud["sha256"]
    assert rec["cells"]["1000"] == [0.0, ext["chosen"]["ZO-PoG"][1]] and rec["cells"]["300"] == [0.0, bud["chosen"]["ZO-PoG"][1]]
    for q, seeds in (("1000", z2.SEEDS_BIG), ("300", zb.EVAL_SEEDS_B)):
        runs = rec["runs"][q]
        assert set(runs) == {str(s) for s in seeds}
        assert all(o["queries"] == int(q) and not o["leak"] for o in runs.values())
    zo = ext["runs"]["ZO-PoG"] if "ZO-PoG" in ext["runs"] else z2.load_big()["runs"]["ZO-PoG"]
    assert all(rec["runs"]["1000"][s]["n_dev_evals"] == zo[s]["n_dev_evals"] for s in zo)   # same dev evaluations
