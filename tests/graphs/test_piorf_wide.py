"""The wide two-block arm: its record matches its pre-registration (``piorf_fixed``'s recipe with 2 blocks at
width 43), the code that made it, and the parameter match it claims; an edited record is refused."""

import json

import pytest

from iclr25.graphs import piorf_fixed as F
from iclr25.graphs import piorf_wide as W


def test_width_is_the_largest_not_exceeding_the_four_block_control():
    deep = W.used_parameters(F.RECIPE["latent"], F.RECIPE["deep_blocks"])
    assert W.used_parameters(W.RECIPE["latent"], F.RECIPE["blocks"]) <= deep
    assert W.used_parameters(W.RECIPE["latent"] + 1, F.RECIPE["blocks"]) > deep


def test_record_matches_the_preregistration_and_the_code():
    if not W.PATH.exists():
        pytest.skip("no record yet")
    rec = W.load()
    assert rec["recipe"] == json.loads(json.dumps(W.RECIPE))
    assert {k: v for k, v in rec["recipe"].items() if k != "latent"} == \
        {k: v for k, v in json.loads(json.dumps(F.RECIPE)).items() if k not in ("latent", "methods")} | \
        {"methods": ["none"]}
    assert rec["code"] == W.code_fingerprint()
    assert sorted(rec["results"]["runs"]) == sorted(f"wide,{s}" for s in F.RECIPE["seeds"])
    assert all(r["steps"] == F.RECIPE["max_steps"] for r in rec["results"]["runs"].values())
    assert rec["params"] == dict(wide=W.used_parameters(43, 2), deep=W.used_parameters(32, 4))


def test_record_edits_are_detected(tmp_path):
    if not W.PATH.exists():
        pytest.skip("no record yet")
    rec = json.loads(W.PATH.read_text())
    rec["results"]["runs"]["wide,10"]["r1"] *= 0.9
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(rec))
    with pytest.raises(Exception):
        W.load(path)
