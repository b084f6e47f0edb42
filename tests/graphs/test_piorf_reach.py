"""The reach record of the PIORF chapter: its arms are the committed records' training (the re-trained arms give
the committed errors), the touched nodes are PIORF-as-published's edge ends and their rings, the node metrics
are RMSEs on and off them, and the record matches its pre-registration."""

import json

import pytest
import torch

from iclr25.graphs import piorf_arms as A
from iclr25.graphs import piorf_depth as D
from iclr25.graphs import piorf_fixed as F
from iclr25.graphs import piorf_reach as R
from iclr25.graphs.rewiring import piorf_partners

SMALL = dict(R.RECIPE, data=dict(n_train=2, n_val=1, n_test=1, frames=7, every=20, spinup=100, h_min=0.02,
                                 h_max=0.06, seed=3))


@pytest.fixture(scope="module")
def trajs():
    return D.trajectories(SMALL)


def test_arms_are_the_committed_records_training(trajs):
    for arm in ["none", "deep", "official", "random4", "matched4"]:
        method, lr, shared, latent = R.ARMS[arm]
        assert lr == 4e-3 and latent == F.RECIPE["latent"]
        if arm in A.ARMS:
            assert A.ARMS[arm] == (method, lr, shared)
        _, _, a = A.fit(arm, 10, trajs, R.arm_recipe(arm, SMALL), curve=False, stop=4)
        _, _, b = (A.fit(arm, 10, trajs, dict(SMALL, arms=A.RECIPE["arms"]), curve=False, stop=4) if arm in A.ARMS
                   else F.fit(method, 10, lr, trajs, SMALL, curve=False, stop=4))
        assert a["losses"] == b["losses"], arm
    wide = R.A.fit("wide4", 10, trajs, R.arm_recipe("wide4", SMALL), curve=False, stop=0)[0]
    assert wide.net.node_enc[0].out_features == 43


def test_touched_mask_is_the_one_hop_ring_of_the_edge_ends(trajs):
    tr, seed = trajs[-1], 12
    rand = [torch.randperm(t["n"])[:len(t["sources"])] for t in trajs]
    M = R.touched_mask(tr, seed, rand, 1, False)
    Mr = R.touched_mask(tr, seed, rand, 1, True)
    assert M.shape == (len(tr["u"]) - 1, tr["n"]) and bool((M <= Mr).all())
    f = 2
    p = piorf_partners(tr["u"][f], tr["sources"], "projection", F.projection_weight(seed), candidates=tr["fluid"])
    ends = torch.cat([tr["sources"], p])
    assert bool(M[f, ends].all()) and bool(Mr[f, rand[tr["k"]]].all())
    ring = D.hop_mask(tr["edge_index"], tr["n"], ends, 1)
    assert torch.equal(M[f], ring)
    assert not bool(R.touched_mask(tr, seed, rand, 0, False)[f].equal(M[f]))  # the ring adds nodes


def test_node_metrics_on_and_off_the_touched_nodes():
    torch.manual_seed(0)
    sq = [(torch.rand(3, 10), torch.rand(3, 10))]
    every = {"off": [torch.ones(3, 10, dtype=torch.bool)], "offr": [torch.zeros(3, 10, dtype=torch.bool)]}
    every["offr"][0][:, 0] = True
    m = R.node_metrics(sq, every)
    assert m["local_off_1"] == pytest.approx(float(sq[0][0].mean(1).sqrt().mean()) * 1e3, rel=1e-6)
    assert m["oracle_off_1"] == 0 and m["share"] == 1
    assert m["local_offr_P"] == pytest.approx(float(sq[0][1][:, 0].sqrt().mean()) * 1e3, rel=1e-6)


def test_record_matches_the_preregistration_and_the_committed_runs(tmp_path):
    rec = R.load()
    assert rec["recipe"] == json.loads(json.dumps(R.RECIPE)) and rec["code"] == R.code_fingerprint()
    fixed, arms = F.load()["results"]["runs"], A.load()["results"]["runs"]
    runs = rec["results"]["runs"]
    for key, run in runs.items():
        arm, seed = key.split(",")
        if arm in R.RERUNS:
            assert run["r1"] == (arms if arm in A.ARMS else fixed)[key]["r1"], key
    for s in R.RECIPE["seeds"]:  # the decision's arms on every seed
        assert all(f"{a},{s}" in runs for a in R.ORDER[0])
    rec["results"]["runs"][key]["r1"] += 1e-9
    bad = tmp_path / "piorf-reach.json"
    bad.write_text(json.dumps(rec))
    with pytest.raises(Exception):
        R.load(bad)
