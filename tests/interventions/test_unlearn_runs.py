"""The unlearning setup shared by the chapter and its tuning script: data split, selection rule, committed grid."""

import copy
import json

import torch

from iclr25.common.digest import json_sha256
from iclr25.interventions import unlearn_runs
from iclr25.interventions.unlearn_runs import GRIDS, choose, interior, unlearning_data
from iclr25.lm import load_world_lm
from iclr25.lm.world import DECLARATIVE_TEMPLATE, EDIT_TEMPLATE, RARE_RELATIONS, fact_sentence


def test_retain_set_never_shows_the_heldout_persons_hobbies():
    _, world = load_world_lm("tiny")
    d = unlearning_data(world, 3)
    assert not set(d.retain_persons) & set(d.heldout_persons)
    assert len(d.retain_persons) + len(d.heldout_persons) == len(world.persons)
    rows = [world.vocab.decode(r) for r in d.R.ids.tolist()]
    held = [" ".join(fact_sentence(p, r, t, world.fact(p, r))) for p in d.heldout_persons for r in RARE_RELATIONS
            for t in (EDIT_TEMPLATE, DECLARATIVE_TEMPLATE)]
    kept = [" ".join(fact_sentence(p, r, t, world.fact(p, r))) for p in d.retain_persons for r in RARE_RELATIONS
            for t in (EDIT_TEMPLATE, DECLARATIVE_TEMPLATE)]
    assert not any(h in row for h in held for row in rows)
    assert sum(any(k in row for k in kept) for row in rows) == unlearn_runs.N_HOBBY
    # the same seed gives the same draw
    d2 = unlearning_data(world, 3)
    assert d2.retain_persons == d.retain_persons and (d2.F.ids == d.F.ids).all() and (d2.R.ids == d.R.ids).all()


def test_choose_prefers_the_target_then_utility():
    rows = [dict(hp=1, forget=0.30, hobby=0.2), dict(hp=2, forget=0.34, hobby=0.5), dict(hp=3, forget=0.6, hobby=0.6)]
    assert choose(rows)["hp"] == 2
    assert choose([dict(hp=1, forget=0.5, hobby=0.6), dict(hp=2, forget=0.4, hobby=0.1)])["hp"] == 2


def test_interior_reports_grid_edges():
    lo = GRIDS["RMU"][0]
    pos = interior("RMU", lo)
    assert pos["c"].startswith("low edge") and pos["lr"].startswith("low edge") and pos["layer"] == "2 values tried"


def test_interior_looks_along_each_axis_at_the_chosen_point():
    # the capped grid tries c in {200, 800} only at one (lr, steps): at another point c has one value
    capped = [g for g in unlearn_runs.CAPPED_GRID if g.get("weights", "out") == "mlp"]
    other = next(g for g in capped if g.get("c") == 400.0 and not any(
        h.get("c") != 400.0 and all(h.get(j) == g.get(j) for j in ("layer", "lr", "steps")) for h in capped))
    pos = interior(unlearn_runs.CAPPED_KEY, other)
    assert pos["c"].startswith("1 value tried here")


def test_committed_grid_matches_its_digest_and_recipe():
    runs = json.loads(unlearn_runs.RUNS_FILE.read_text())
    assert json_sha256(runs["results"]) == runs["results_sha256"]
    assert runs["recipe"]["grids"] == json.loads(json.dumps(GRIDS))
    assert all(len(runs["results"][k]) == len(GRIDS[k]) for k in GRIDS)
    assert unlearn_runs.RUNS_FILE.stat().st_size < 20_000


def test_committed_pairs_match_their_digest_and_the_committed_grid():
    pairs = json.loads(unlearn_runs.PAIRS_FILE.read_text())
    assert json_sha256(pairs["rows"]) == pairs["rows_sha256"]
    runs = unlearn_runs.load_runs()
    assert pairs["recipe"]["grid_sha256"] == runs["results_sha256"]
    # the pairs cover exactly the composed unlearners (RMU) whose chosen setting meets both targets at the tuning seed
    assert set(pairs["recipe"]["unlearners"]) == {u for u in unlearn_runs.PAIR_UNLEARNERS if unlearn_runs.tuned_ok(runs, u)}
    assert {r["seed"] for r in pairs["rows"] if r["metric"] == "forget"} == set(pairs["recipe"]["seeds"])
    assert {r["seed"] for r in pairs["rows"] if r["metric"] == "edit"} == set(pairs["recipe"]["edit_seeds"])
    assert pairs["recipe"]["seeds"] == list(range(unlearn_runs.PAIR_SEEDS))
    assert pairs["recipe"]["edit_seeds"] == list(range(unlearn_runs.EDIT_PAIR_SEEDS))
    assert all(r["ratio_first"] > 0 and r["ratio_second"] > 0 for r in pairs["rows"] if r["metric"] == "forget" and r["A"] == "RMU")
    # composed with the setting unlearn_runs.choices picks (the capped RMU when it meets both targets)
    chosen = unlearn_runs.choices(runs, unlearn_runs.load_capped())
    assert pairs["recipe"]["capped_sha256"] == unlearn_runs.load_capped()["rows_sha256"]
    assert all(pairs["recipe"]["unlearners"][u] == chosen[u]["hp"] for u in pairs["recipe"]["unlearners"])
    assert all("hobby" in r and "base_hobby" in r for r in pairs["rows"] if r["metric"] == "forget")


def test_forget_ratio_is_zero_without_recompression_and_one_when_it_undoes_the_unlearning():
    base, world = load_world_lm("tiny")
    d = unlearning_data(world, 3)
    changed = copy.deepcopy(base)
    with torch.no_grad():
        for p in changed.parameters():
            p.add_(0.01 * torch.randn_like(p))
    assert unlearn_runs.forget_ratio(base, changed, changed, d.F, 0) == 0.0
    assert abs(unlearn_runs.forget_ratio(base, changed, base, d.F, 0) - 1.0) < 1e-9


def test_tuned_ok_needs_both_targets():
    base = dict(forget=1.0, hobby=0.6)
    ok = {"base": base, "X": [dict(hp={}, forget=0.3, hobby=0.55)]}
    assert unlearn_runs.tuned_ok({"results": ok}, "X")
    assert not unlearn_runs.tuned_ok({"results": {"base": base, "X": [dict(hp={}, forget=0.3, hobby=0.4)]}}, "X")
    assert not unlearn_runs.tuned_ok({"results": {"base": base, "X": [dict(hp={}, forget=0.5, hobby=0.6)]}}, "X")


def test_update_ratio_is_the_largest_relative_change_of_a_changed_matrix():
    import copy

    import torch
    torch.manual_seed(0)
    a = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 4))
    b = copy.deepcopy(a)
    assert unlearn_runs.update_ratio(a, b) == 0.0
    with torch.no_grad():
        b[1].weight.mul_(1.5)          # ||1.5 W - W|| / ||W|| = 0.5
        b[0].bias.add_(10.0)           # biases are not matrices
    assert abs(unlearn_runs.update_ratio(a, b) - 0.5) < 1e-6


def test_choose_with_a_cap_ignores_larger_updates():
    rows = [dict(hp=1, forget=0.30, hobby=0.6, rel=1.2), dict(hp=2, forget=0.34, hobby=0.5, rel=0.6),
            dict(hp=3, forget=0.5, hobby=0.6, rel=0.3)]
    assert choose(rows)["hp"] == 1
    assert choose(rows, cap=0.7)["hp"] == 2
    assert choose(rows, cap=0.5)["hp"] == 3         # none within the cap reaches the target: the lowest forget


def test_committed_capped_grid_matches_its_digest_and_recipe():
    runs = unlearn_runs.load_capped()
    assert runs["recipe"]["grid"] == json.loads(json.dumps(unlearn_runs.CAPPED_GRID))
    assert [r["hp"] for r in runs["rows"]] == runs["recipe"]["grid"]
    assert runs["recipe"]["rel_cap"] == unlearn_runs.REL_CAP
    assert unlearn_runs.CAPPED_FILE.stat().st_size < 20_000


def test_choices_take_the_capped_rmu_only_when_it_meets_both_targets():
    base = dict(forget=1.0, hobby=0.6)
    runs = {"results": {"base": base, "RMU": [dict(hp={"u": 1}, forget=0.3, hobby=0.55)]}}
    capped = {"recipe": {"rel_cap": 0.7}, "rows": [dict(hp={"c": 1}, forget=0.3, hobby=0.55, rel=0.5),
                                                  dict(hp={"c": 2}, forget=0.2, hobby=0.58, rel=0.9)]}
    assert unlearn_runs.choices(runs, capped)["RMU"]["hp"] == {"c": 1}      # the 0.9x setting is over the cap
    capped["rows"][0]["forget"] = 0.5                                        # within the cap, misses the target
    assert unlearn_runs.choices(runs, capped)["RMU"]["hp"] == {"u": 1}
    assert unlearn_runs.choices(runs)["RMU"]["hp"] == {"u": 1}


def test_committed_unlearners_alone_match_their_digest_and_the_chosen_settings():
    alone = unlearn_runs.load_alone()
    assert json_sha256(alone["rows"]) == alone["rows_sha256"]
    runs = unlearn_runs.load_runs()
    chosen = unlearn_runs.choices(runs, unlearn_runs.load_capped())
    rec = alone["recipe"]
    assert rec["grid_sha256"] == runs["results_sha256"]
    assert all(rec["unlearners"][u] == chosen[u]["hp"] for u in unlearn_runs.ALONE_UNLEARNERS)
    assert all(sorted(r["seed"] for r in alone["rows"] if r["name"] == u) == rec["seeds"][u] for u in unlearn_runs.ALONE_UNLEARNERS)
