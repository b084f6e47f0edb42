"""FT with slack and the extra edit-first seeds (slack_runs): the selection rule, the editor, the records."""

import copy
import json

import pytest
import torch

from iclr25.interventions import control_runs, slack_runs, sweep_runs
from iclr25.lm import edit_split, load_world_lm, mlp_out


def row(success, slack, locality, rel):
    return dict(success=success, success_slack=slack, locality=locality, rel=rel)


def test_slack_key_needs_success_at_the_shrunk_box_too():
    at_edge = row(1.0, 0.7, 0.97, 0.37)          # the chapter's FT: best locality, no slack
    with_slack = row(1.0, 0.9, 0.80, 0.41)
    assert slack_runs.slack_key(with_slack) > slack_runs.slack_key(at_edge)
    assert not slack_runs.slack_key(at_edge)[0] and slack_runs.slack_key(with_slack)[0]


def test_slack_key_respects_the_cap_then_prefers_locality_then_the_smaller_edit():
    too_big = row(1.0, 1.0, 0.99, slack_runs.REL_CAP + 0.01)
    ok = row(0.9, 0.9, 0.70, 0.5)
    assert slack_runs.slack_key(ok) > slack_runs.slack_key(too_big)
    assert slack_runs.slack_key(row(1.0, 1.0, 0.8, 0.4)) > slack_runs.slack_key(row(1.0, 1.0, 0.8, 0.5))
    assert slack_runs.slack_key(row(1.0, 1.0, 0.9, 0.6)) > slack_runs.slack_key(row(1.0, 1.0, 0.8, 0.4))
    # among failing settings, the one closer to making the edit at both boxes ranks higher
    assert slack_runs.slack_key(row(1.0, 0.8, 0.9, 0.4)) > slack_runs.slack_key(row(1.0, 0.5, 0.99, 0.4))


def test_grid_holds_the_chapters_ft_and_interior_points():
    ft = sweep_runs.RECIPE["edit_choice"]["FT"]
    assert {**ft, "lr": 5e-3} in slack_runs.GRID
    for k in ("lr", "box", "steps"):
        assert len({hp[k] for hp in slack_runs.GRID}) >= 3
    assert slack_runs.RECIPE["star"] == control_runs.RECIPE["star"]
    assert not set(slack_runs.RECIPE["seeds"]) & set(slack_runs.RECIPE["extra_seeds"])
    assert slack_runs.TUNE_SEED not in slack_runs.RECIPE["extra_seeds"]


@pytest.fixture(scope="module")
def world_model():
    return load_world_lm("base")


def test_ft_editor_is_the_sweeps_ft_at_its_learning_rate(world_model):
    """FT slack at the sweep's setting and lr 5e-3 gives the same weights as the sweep's FT; another lr does not."""
    base, world = world_model
    split = edit_split(world, 2, 3)
    hp = {**sweep_runs.RECIPE["edit_choice"]["FT"], "steps": 5}
    ids = mask = None                     # FT uses neither
    models = []
    for name, h in (("FT", hp), ("FT slack", {**hp, "lr": 5e-3}), ("FT slack", {**hp, "lr": 5e-4})):
        m = copy.deepcopy(base)
        slack_runs.ft_editor(name, world.vocab, split, ids, mask, h).apply(m)
        models.append(mlp_out(m, 0).weight.detach())
    assert torch.equal(models[0], models[1])
    assert not torch.equal(models[0], models[2])
    assert (models[2] - mlp_out(base, 0).weight).abs().max() <= hp["box"] + 1e-7


def test_committed_records_were_made_by_the_current_code():
    rec = slack_runs.load_runs()
    assert rec["recipe"]["code"] == slack_runs.record_code()
    assert rec["recipe"]["choice"] == max(rec["tuning"], key=slack_runs.slack_key)["hp"]
    if slack_runs.EXTRA_FILE.exists():
        extra = slack_runs.load_runs(slack_runs.EXTRA_FILE)
        assert extra["recipe"]["code"] == slack_runs.record_code()
        assert extra["recipe"]["choice"] == rec["recipe"]["choice"]


def test_load_runs_refuses_an_edited_record(tmp_path):
    rec = json.loads(slack_runs.RUNS_FILE.read_text())
    rec["rows"][0]["success"] = 1.0 - rec["rows"][0].get("success", 0.0)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(rec))
    with pytest.raises(ValueError):
        slack_runs.load_runs(bad)
