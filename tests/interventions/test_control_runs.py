"""The committed editing controls (mask-aware FT, SparseGPT, the output ratio at the edited keys)."""

import copy
import json

import pytest
import torch

from iclr25.common.digest import json_sha256
from iclr25.interventions import control_runs, sweep_runs
from iclr25.lm import edit_split, load_world_lm, mlp_out


@pytest.fixture(scope="module")
def world_model():
    return load_world_lm("base")


def test_output_ratio_is_zero_without_recompression_and_one_when_it_undoes_the_edit(world_model):
    base, world = world_model
    split = edit_split(world, 3, 5)
    edited = copy.deepcopy(base)
    with torch.no_grad():
        mlp_out(edited, 0).weight.add_(0.01 * torch.randn_like(mlp_out(edited, 0).weight))
    assert control_runs.output_ratio(base, edited, edited, world.vocab, split.edits, 0) == 0.0
    undo = copy.deepcopy(edited)
    with torch.no_grad():
        mlp_out(undo, 0).weight.copy_(mlp_out(base, 0).weight)
    assert abs(control_runs.output_ratio(base, edited, undo, world.vocab, split.edits, 0) - 1.0) < 1e-9


def test_output_ratio_sums_over_blocks(world_model):
    base, world = world_model
    split = edit_split(world, 3, 5)
    edited = copy.deepcopy(base)
    with torch.no_grad():
        for l in (0, 1):
            mlp_out(edited, l).weight.add_(0.01 * torch.randn_like(mlp_out(edited, l).weight))
    undo = copy.deepcopy(edited)
    with torch.no_grad():
        mlp_out(undo, 1).weight.copy_(mlp_out(base, 1).weight)      # compression undoes block 1's part only
    one = control_runs.output_ratio(base, edited, undo, world.vocab, split.edits, [1])
    assert abs(one - 1.0) < 1e-9 and one == control_runs.output_ratio(base, edited, undo, world.vocab, split.edits, 1)
    both = control_runs.output_ratio(base, edited, undo, world.vocab, split.edits, [0, 1])
    assert 0.0 < both < 1.0


def test_capacity_matched_control_has_dense_fts_frobenius_budget():
    rec = control_runs.RECIPE
    ft, wide = rec["edit_choice"]["FT"], rec["edit_choice"]["FT matched"]
    s = control_runs.S_PRUNE
    assert {rec["star"][c] for c in ("magnitude", "wanda", "sparsegpt")} == {s}
    # the largest change: box * sqrt(number of free weights); dense: all n weights, masked: (1 - s) n
    assert abs(wide["box"] ** 2 * (1 - s) - ft["box"] ** 2) < 1e-4 * ft["box"] ** 2      # the box is rounded to 6 digits
    assert {k: v for k, v in wide.items() if k != "box"} == {k: v for k, v in ft.items() if k != "box"}


def test_committed_records_were_made_by_the_current_code():
    assert sweep_runs.load_runs()["recipe"]["code"] == sweep_runs.record_code()
    assert control_runs.load_runs()["recipe"]["code"] == control_runs.record_code()


def test_committed_controls_match_their_digest_and_the_sweep_recipe():
    runs = json.loads(control_runs.RUNS_FILE.read_text())
    assert json_sha256(runs["rows"]) == runs["rows_sha256"]
    rec = runs["recipe"]
    assert rec["edit_choice"]["FT masked"] == sweep_runs.RECIPE["edit_choice"]["FT"]
    assert rec["edit_choice"]["FT matched"] == control_runs.RECIPE["edit_choice"]["FT matched"]
    assert all(rec["edit_choice"][e] == sweep_runs.RECIPE["edit_choice"][e] for e in sweep_runs.RECIPE["editors"])
    assert sorted({r["seed"] for r in runs["rows"]}) == rec["seeds"] == sweep_runs.load_runs()["recipe"]["seeds"]
    assert control_runs.RUNS_FILE.stat().st_size < 1_000_000


def test_committed_controls_equal_the_sweep_on_shared_cells():
    key = lambda r: (r["seed"], r["editor"], r["comp"], r["strength"], r["order"])  # noqa: E731
    sweep = {key(r): r for r in sweep_runs.load_runs()["rows"]}
    shared = [(r, sweep[key(r)]) for r in control_runs.load_runs()["rows"] if key(r) in sweep]
    assert len(shared) > 100
    assert all(abs(x[k] - y[k]) < 1e-9 for x, y in shared for k in y if not isinstance(y[k], str))


def test_gptq_compressor_puts_every_group_on_its_grid_and_differs_from_rtn(world_model):
    from iclr25.interventions.compose import compose
    from iclr25.lm.hooks import transformer_linears
    base, world = world_model
    ids, _ = sweep_runs.calibration(world, 0, "cpu")
    real = ids != world.vocab.pad_id
    g = compose(base, [control_runs.make_compressor("gptq", 2, ids, real)])
    r = compose(base, [control_runs.make_compressor("rtn", 2, ids, real)])
    lin_g, lin_r = transformer_linears(g), transformer_linears(r)
    for n, m in lin_g.items():
        W = m.weight.detach()
        assert all(len(torch.unique(W[i, j:j + 32])) <= 4 for i in range(0, W.shape[0], 17) for j in range(0, W.shape[1], 32))
    assert any(not torch.equal(lin_g[n].weight, lin_r[n].weight) for n in lin_g)     # error feedback moves weights off RTN's choice
    assert control_runs.make_compressor("gptq", 3, ids, real).name == "GPTQ3"


def test_gptq_record_made_by_the_current_code_and_agrees_with_the_controls():
    if not control_runs.GPTQ_FILE.exists():
        pytest.skip("no GPTQ record")
    rec = control_runs.load_gptq()
    assert rec["recipe"]["code"] == control_runs.gptq_code()
    assert rec["recipe"]["star"] == {"gptq": control_runs.RECIPE["star"]["rtn"]}
    ctl = {(r["seed"], r["editor"]): r for r in control_runs.load_runs()["rows"] if r["order"] == "alone"}
    alone = [r for r in rec["rows"] if r["order"] == "alone" and r["editor"] in ("MEMIT", "FT")]
    assert alone and all(r == ctl[r["seed"], r["editor"]] for r in alone)     # the same edits, bit for bit


def test_trend_record_made_by_the_current_code_agrees_with_the_records_and_holds_every_cell():
    if not control_runs.TREND_FILE.exists():
        pytest.skip("no strength-trend record")
    from iclr25.interventions import decide, slack_runs
    rec = control_runs.load_trend()
    r = rec["recipe"]
    assert r["code"] == control_runs.trend_code()
    assert {k: r[k] for k in control_runs.TREND} == control_runs.TREND
    assert r["bar"] == decide.TREND_BAR and r["orig_min"] == decide.ORIG_MIN
    # the editors alone are the controls' MEMIT and FT slack's records, bit for bit
    ctl = {(x["seed"], x["editor"]): x for x in control_runs.load_runs()["rows"] if x["order"] == "alone"}
    slk = {(x["seed"], x["editor"]): x for x in slack_runs.load_runs()["rows"] if x["order"] == "alone"}
    alone = [x for x in rec["rows"] if x["order"] == "alone"]
    assert len(alone) == 2 * len(r["seeds"])
    assert all(x == (ctl if x["editor"] == "MEMIT" else slk)[x["seed"], x["editor"]] for x in alone)
    cells = decide.trend_cells(rec["rows"], r["strengths"], r["editors"], r["orders"])     # every cell, every seed
    assert len(cells) == len(r["editors"]) * len(r["orders"]) * sum(len(v) for v in r["strengths"].values())
    assert all(c["n"] == len(r["seeds"]) for c in cells.values())


def test_restamped_records_say_what_was_recomputed():
    from iclr25.interventions import slack_runs
    for rec in (control_runs.load_runs(), slack_runs.load_runs(), slack_runs.load_runs(slack_runs.EXTRA_FILE)):
        if "restamp" in rec["recipe"]:
            assert rec["recipe"]["restamp"]["identical"] is True and rec["recipe"]["restamp"]["seeds_recomputed"]
