"""The unlearning x compression strength test's pre-registered grid logic and its committed record."""

import pytest

from iclr25.interventions import rmu_strength, unlearn_runs
from iclr25.interventions.rmu_strength import MID, MID_GRID, beyond, positions


def test_grid_is_the_preregistered_layer0_capped_steer():
    assert all(g["layer"] == 0 and g["weights"] == "mlp" and g["max_rel"] == unlearn_runs.REL_CAP for g in MID_GRID)
    assert sorted({g["c"] for g in MID_GRID}) == [30.0, 50.0, 70.0] and len(MID_GRID) == 11


def test_beyond_adds_one_step_past_an_edge_only():
    assert beyond(MID_GRID, dict(MID, c=50.0, lr=4e-3, steps=240)) == []          # interior on every axis of >= 3 values
    out = beyond(MID_GRID, dict(MID, c=70.0, lr=2e-3, steps=240))
    assert dict(MID, c=90.0, lr=2e-3, steps=240) in out and dict(MID, c=70.0, lr=1e-3, steps=240) in out and len(out) == 2
    assert beyond(MID_GRID, dict(MID, c=50.0, lr=4e-3, steps=480)) == [dict(MID, c=50.0, lr=4e-3, steps=960)]
    assert positions(MID_GRID, dict(MID, c=30.0, lr=8e-3, steps=240)) == {"c": "low edge of 3", "lr": "high edge of 3",
                                                                         "steps": "1 tried"}


def test_smallest_competent_takes_the_smallest_update_that_meets_both_targets():
    rows = [dict(hp={"a": 1}, forget=0.30, hobby=0.55, rel=0.6), dict(hp={"a": 2}, forget=0.34, hobby=0.52, rel=0.5),
            dict(hp={"a": 3}, forget=0.50, hobby=0.60, rel=0.2), dict(hp={"a": 4}, forget=0.30, hobby=0.40, rel=0.1)]
    assert rmu_strength.smallest_competent(dict(rows=rows, recipe=dict(rel_cap=0.7)), base_hobby=0.6)["hp"] == {"a": 2}


def test_committed_record_matches_the_code_and_the_chapters_settings():
    if not rmu_strength.RUNS_FILE.exists():
        pytest.skip("no strength record")
    rec = rmu_strength.load()
    r = rec["recipe"]
    assert r["code"] == rmu_strength.record_code() and r["mid_grid"] == MID_GRID
    runs, capped = unlearn_runs.load_runs(), unlearn_runs.load_capped()
    assert r["settings"][rmu_strength.SETTINGS[2]] == unlearn_runs.choices(runs, capped)["RMU"]["hp"]
    assert r["settings"][rmu_strength.SETTINGS[1]] == rmu_strength.smallest_competent(capped, runs["results"]["base"]["hobby"])["hp"]
    assert (rmu_strength.SETTINGS[0] in r["settings"]) == r["mid_ok"]        # composed only if competent at tuning
    # the layer-0 steer is composed exactly when the capped rule's pick over the recorded tuning rows meets both targets
    pick = unlearn_runs.choose(rec["tuning"], cap=r["rel_cap"])
    assert r["mid_ok"] == unlearn_runs.meets_targets(pick, runs["results"]["base"]["hobby"])
    if r["mid_ok"]:
        assert r["settings"][rmu_strength.SETTINGS[0]] == pick["hp"]
    seeds = sorted({x["seed"] for x in rec["rows"]})
    assert seeds == r["seeds"] and len(rec["rows"]) == len(seeds) * len(r["settings"]) * sum(map(len, r["strengths"].values()))


def test_edited_record_is_refused(tmp_path, monkeypatch):
    if not rmu_strength.RUNS_FILE.exists():
        pytest.skip("no strength record")
    import json
    rec = json.loads(rmu_strength.RUNS_FILE.read_text())
    rec["rows"][0]["first"] = 0.0 if rec["rows"][0]["first"] else 1.0
    p = tmp_path / "x.json"
    p.write_text(json.dumps(rec))
    monkeypatch.setattr(rmu_strength, "RUNS_FILE", p)
    with pytest.raises(ValueError):
        rmu_strength.load()
