"""The rewiring positive control of the PIORF chapter (iclr25.graphs.piorf_control): the virtual node joins every
fluid node and is left out of the errors, the ratio arms re-pick sources by the chapter's rule, the node classes
are the edges' sources, hubs and rings, and the record matches its pre-registration."""

import json

import pytest
import torch

from iclr25.graphs import piorf_arms as A
from iclr25.graphs import piorf_control as C
from iclr25.graphs import piorf_depth as D
from iclr25.graphs import piorf_fixed as F
from iclr25.graphs.mesh import FlowSimulator

SMALL = dict(C.RECIPE, data=dict(n_train=2, n_val=1, n_test=1, frames=7, every=20, spinup=100, h_min=0.02,
                                 h_max=0.06, seed=3))


@pytest.fixture(scope="module")
def trajs():
    return D.trajectories(SMALL)


def test_ratio_arms_use_the_chapters_source_rule(trajs):
    by = C.with_ratios(trajs, [SMALL["ratio"], 0.3])
    assert all(torch.equal(a["sources"], t["sources"]) for a, t in zip(by[SMALL["ratio"]], trajs))
    assert all(len(a["sources"]) == int(0.3 * t["n"] + 1e-9) for a, t in zip(by[0.3], trajs))
    # the draw fit makes for random partners is the one the classes use
    _, rand, _ = F.fit("random", 10, 4e-3, by[0.3], SMALL, curve=False, stop=0)
    assert all(torch.equal(a, b) for a, b in zip(rand, C.random_draw(by[0.3], 10)))


def test_virtual_node_joins_every_fluid_node(trajs):
    tr = trajs[0]
    v = C.with_virtual(tr)
    n = tr["n"]
    assert v["n"] == n + 1 and v["node_type"][-1] == C.VIRTUAL_TYPE and not bool(v["fluid"][-1])
    assert not bool(FlowSimulator.integrated(v["node_type"])[-1])  # never integrated: its velocity stays 0
    new = v["edge_index"][:, tr["edge_index"].shape[1]:]
    fluid = tr["fluid"].nonzero().flatten()
    assert sorted(new[0, :len(fluid)].tolist()) == fluid.tolist() and bool((new[1, :len(fluid)] == n).all())
    assert bool((new[0, len(fluid):] == n).all()) and new.shape[1] == 2 * len(fluid)
    assert torch.equal(v["u"][:, :n], tr["u"]) and bool((v["u"][:, n] == 0).all())


def test_whole_mesh_leaves_the_added_node_out():
    torch.manual_seed(0)
    e = torch.rand(4, 6)
    e_v = torch.cat([e, torch.zeros(4, 1)], 1)  # an added node with zero error
    ref = C.whole_mesh([dict(rH=1.0)], [(e, e)], [6])
    out = C.whole_mesh([dict(rH=1.0 * (6 / 7) ** 0.5)], [(e_v, e_v)], [6])
    assert out["r1"] == pytest.approx(ref["r1"]) and out["rP"] == pytest.approx(ref["rP"])
    assert out["rH"] == pytest.approx(1.0)
    assert ref["r1"] == pytest.approx(float((e.mean(1).sqrt() * 1e3).mean()), rel=1e-6)


def test_node_classes_and_metrics(trajs):
    tr, seed = trajs[-1], 11
    rand = C.random_draw(trajs, seed)
    c = C.node_classes(tr, "random", seed, rand, 0)
    assert bool((c[tr["sources"]] == 0).all())
    hubs = rand[tr["k"]][~torch.isin(rand[tr["k"]], tr["sources"])]
    assert bool((c[hubs] == 1).all())
    ring = D.hop_mask(tr["edge_index"], tr["n"], torch.cat([tr["sources"], rand[tr["k"]]]), 1)
    assert torch.equal(c <= 2, ring)
    cp = C.node_classes(tr, "projection", seed, rand, 0)
    assert bool((cp[tr["sources"]] == 0).all()) and int((cp == 1).sum()) >= 1
    sq = [(torch.ones(2, tr["n"]) * 4, torch.ones(2, tr["n"]))]
    m = C.class_metrics(sq, [torch.stack([c, c])])
    assert m["1"] == pytest.approx([2e3] * 4) and m["P"] == pytest.approx([1e3] * 4)


def test_arms_are_piorf_arms_training(trajs):
    by = C.with_ratios(trajs, [0.1])
    for arm in ["none", "official10", "random10"]:
        method, lr, ratio, virtual = C.ARMS[arm]
        assert lr == 4e-3 and not virtual
        data = by[ratio] if ratio else trajs
        r = dict(SMALL, arms={arm: [method, lr, method != "none"]})
        _, _, a = A.fit(arm, 10, data, r, curve=False, stop=3)
        shared = dict(SMALL, arms={"x": [method, lr, method != "none"]})
        _, _, b = A.fit("x", 10, data, shared, curve=False, stop=3)
        assert a["losses"] == b["losses"]
    # the mesh alone is the reach record's arm (same simulator, same rate)
    assert C.ARMS["none"][:2] == ("none", 4e-3)


def test_record_matches_its_preregistration():
    if not C.PATH.exists():
        pytest.skip("no control record committed")
    rec = C.load()
    assert rec["recipe"] == json.loads(json.dumps(C.RECIPE))
    assert rec["code"] == C.code_fingerprint()
    runs = rec["results"]["runs"]
    # seed by seed, in the registered order: every run made precedes the first one missing
    order = [f"{m},{s}" for s in C.RECIPE["seeds"] for m in C.RECIPE["order"]]
    made = [k in runs for k in order]
    assert made == sorted(made, reverse=True) and set(runs) <= set(order)
    tampered = dict(rec, cpu_s=rec["cpu_s"])
    tampered["results"] = dict(rec["results"], runs={**runs})
    k = next(iter(runs))
    tampered["results"]["runs"][k] = dict(runs[k], r1=runs[k]["r1"] + 1)
    from iclr25.common.digest import record_sha256
    assert record_sha256(tampered) != rec["sha256"]
