"""The fixed-length PIORF evaluation: its training is ``piorf_depth``'s without the patience rule, its new arms
(moving random hubs, the official projection rule, the capacity-matched reach control) do what they say, and its
record matches the pre-registration."""

import json

import pytest
import torch

from iclr25.graphs import piorf_depth as D
from iclr25.graphs import piorf_fixed as F
from iclr25.graphs.mesh import FlowSimulator
from iclr25.graphs.rewiring import new_edges, piorf_partners

#: a few short trajectories: enough to train a few steps of every arm
SMALL = dict(F.RECIPE, data=dict(n_train=2, n_val=1, n_test=1, frames=6, every=20, spinup=100, h_min=0.02,
                                 h_max=0.06, seed=3))


@pytest.fixture(scope="module")
def trajs():
    return D.trajectories(SMALL)


def test_training_is_piorf_depths_without_the_patience_rule(trajs):
    for m in ["none", "random", "piorf", "fosr", "deep"]:
        _, _, a = D.fit(m, 10, 4e-3, trajs, steps=30, recipe=SMALL, patience=False, stop=6)
        _, _, b = F.fit(m, 10, 4e-3, trajs, recipe=SMALL, steps=30, curve=False, stop=6)
        assert a["losses"] == b["losses"], m
    # the fixed schedule runs to its end and reads the validation error on its grid
    _, _, log = F.fit("piorf", 10, 4e-3, trajs, recipe=dict(SMALL, check_every=10), steps=25)
    assert log["steps"] == 25 and [i for i, _ in log["curve"]] == [10, 20, 25]


def test_moving_hubs_keep_piorfs_structure_with_random_hubs(trajs):
    tr = trajs[0]
    gen = torch.Generator().manual_seed(0)
    draws = []
    for f in range(len(tr["u"])):
        u = tr["u"][f]
        p = piorf_partners(u, tr["sources"], SMALL["rule"], None, candidates=tr["fluid"])
        q = F.moving_hubs(u, tr, gen)
        assert bool(tr["fluid"][q].all())  # hubs among the fluid nodes
        # the same partition of the sources: same PIORF hub <=> same random hub
        assert torch.equal(p[:, None] == p[None, :], q[:, None] == q[None, :])
        draws.append(q)
    assert any(not torch.equal(draws[0], q) for q in draws[1:])  # the hubs move
    # a different generator state gives different hubs (the draw is random, not a function of u)
    assert not torch.equal(F.moving_hubs(tr["u"][0], tr, torch.Generator().manual_seed(1)),
                           F.moving_hubs(tr["u"][0], tr, torch.Generator().manual_seed(2)))


def test_projection_arm_uses_the_official_rule_and_matched_arm_the_mesh(trajs):
    tr, ctx = trajs[0], F.context(10, 0)
    u = tr["u"][2]
    want = new_edges(tr["edge_index"], tr["sources"],
                     piorf_partners(u, tr["sources"], "projection", F.projection_weight(10), candidates=tr["fluid"]),
                     tr["n"])
    assert torch.equal(F.added("projection", tr, u, [], ctx), want)
    assert torch.equal(F.projection_weight(10), F.projection_weight(10))
    assert F.added("matched", tr, u, [], ctx).shape[1] == 0
    # capacity matched: 4 blocks at the matched width have no more parameters than 2 blocks at the full width
    count = lambda w, b: sum(p.numel() for p in FlowSimulator(w, b, layers=1).parameters())  # noqa: E731
    small, two, four = (count(F.RECIPE["matched_latent"], F.RECIPE["deep_blocks"]),
                        count(F.RECIPE["latent"], F.RECIPE["blocks"]), count(F.RECIPE["latent"], F.RECIPE["deep_blocks"]))
    assert 0.99 * two <= small <= two < four
    assert count(F.RECIPE["matched_latent"] + 1, F.RECIPE["deep_blocks"]) > two


def _record():
    if not F.PATH.exists():
        pytest.skip("no record yet")
    return F.load()


def test_record_matches_the_preregistration_and_the_code():
    rec = _record()
    assert rec["recipe"] == json.loads(json.dumps(F.RECIPE))
    assert rec["code"] == F.code_fingerprint()
    res = rec["results"]
    for m, lr in F.LR.items():
        assert res["lr"][m] == lr                         # the committed tuning's rates
    for m, table in res["tuning"].items():
        table = {float(k): v for k, v in table.items()}
        assert res["lr"][m] == min(table, key=table.get) and min(table) < res["lr"][m] < max(table)
    for key, r in res["runs"].items():
        if not key.startswith("touched"):
            assert r["steps"] == F.RECIPE["max_steps"]      # no early stopping
            assert r["curve"][-1][0] == F.RECIPE["max_steps"]
    for m in [m for p in rec["parts"] for m in p["methods"]]:
        assert all(f"{m},{s}" in res["runs"] for s in F.RECIPE["seeds"])
    assert rec["cpu_s"] == pytest.approx(sum(p["cpu_s"] for p in rec["parts"]))


def test_record_edits_are_detected(tmp_path):
    rec = _record()
    rec["results"]["runs"]["piorf,10"]["r1"] *= 0.9
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(rec))
    with pytest.raises(ValueError):
        F.load(path)


def test_late_drop_reads_the_last_quarter_by_interpolation():
    # readings every 300 steps of 3000: none at 2250, which lies halfway between 2100 and 2400
    curve = [(st, 100.0) for st in range(300, 2101, 300)] + [(2400, 80.0), (2700, 78.0), (3000, 76.0)]
    # v(2250) = (100 + 80) / 2 = 90, so the fall over the last quarter is 1 - 76 / 90 (not 1 - 76 / 100 from 2100)
    assert F.late_drop(curve) == pytest.approx(1 - 76 / 90)
    assert F.late_drop(curve, end="best") == pytest.approx(1 - 76 / 90)
    # a reading exactly at three quarters is used as it is; "best" takes the lowest reading, "last" the last one
    curve = [(200, 50.0), (400, 40.0), (600, 36.0), (700, 30.0), (800, 33.0)]
    assert F.late_drop(curve) == pytest.approx(1 - 33 / 36)
    assert F.late_drop(curve, end="best") == pytest.approx(1 - 30 / 36)
    # a curve still falling steeply fails a 5 % bar, a flat one passes
    assert F.late_drop([(st, 1000.0 / st) for st in range(300, 3001, 300)]) > 0.05
    assert F.late_drop([(st, 10.0) for st in range(300, 3001, 300)]) == 0.0
