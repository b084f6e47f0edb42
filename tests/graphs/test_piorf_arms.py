"""The five further arms of the fixed-length PIORF evaluation: they are ``piorf_fixed``'s training with the
registered method and learning rate, the shared edge encoding sends the added edges through the mesh edges'
normaliser (statistics over all edges) and encoder, and the record matches the pre-registration."""

import json

import pytest
import torch

from iclr25.graphs import piorf_arms as A
from iclr25.graphs import piorf_depth as D
from iclr25.graphs import piorf_fixed as F
from iclr25.graphs.mesh import FlowSimulator, mesh_edge_features

SMALL = dict(A.RECIPE, data=dict(n_train=2, n_val=1, n_test=1, frames=7, every=20, spinup=100, h_min=0.02,
                                 h_max=0.06, seed=3))


@pytest.fixture(scope="module")
def trajs():
    return D.trajectories(SMALL)


def test_unshared_arms_are_piorf_fixeds_runs_at_the_registered_rate(trajs):
    for arm in ["random4", "moving4", "projection"]:
        method, lr, shared = A.ARMS[arm]
        assert lr == F.LR["piorf"] and not shared
        _, _, a = A.fit(arm, 10, trajs, SMALL, curve=False, stop=5)
        _, _, b = F.fit(method, 10, lr, trajs, SMALL, curve=False, stop=5)
        assert a["losses"] == b["losses"], arm
    assert F.FlowSimulator is FlowSimulator  # the swap is undone


def test_shared_arms_differ_and_start_from_the_same_weights(trajs):
    sims = {arm: A.fit(arm, 10, trajs, SMALL, curve=False, stop=0)[0] for arm in ["shared", "official"]}
    plain = F.fit("piorf", 10, 4e-3, trajs, SMALL, curve=False, stop=0)[0]
    assert F.FlowSimulator is FlowSimulator
    for sim in sims.values():
        assert isinstance(sim, A.SharedEdgeSimulator)
        for (name, p), q in zip(sim.net.named_parameters(), plain.net.parameters()):
            assert torch.equal(p, q), name  # the same initial weights per seed
    # the long added edges widen the shared normaliser's spread of the edge lengths
    assert float(sims["shared"].edge_norm.std[2]) > 1.5 * float(plain.edge_norm.std[2])
    _, _, a = A.fit("shared", 10, trajs, SMALL, curve=False, stop=3)
    _, _, b = F.fit("piorf", 10, 4e-3, trajs, SMALL, curve=False, stop=3)
    assert a["losses"] != b["losses"]


def test_pooled_normaliser_is_the_statistics_of_all_edges():
    torch.manual_seed(0)
    mesh_rows, added_rows, copies = torch.randn(40, 3), 5 * torch.randn(7, 3) + 2, 3
    sim = A.SharedEdgeSimulator(8, 1, 1, copies=copies)
    sim.edge_norm.fit(mesh_rows)
    sim.added_norm.fit(added_rows)
    every = torch.cat([mesh_rows] * copies + [added_rows])
    assert torch.allclose(sim.edge_norm.mean, every.mean(0), atol=1e-5)
    assert torch.allclose(sim.edge_norm.std, every.std(0, unbiased=False), atol=1e-5)
    with pytest.raises(AssertionError):  # the order piorf_fixed.fit uses: mesh edges first
        A.SharedEdgeSimulator(8, 1, 1).added_norm.fit(added_rows)


def test_shared_forward_is_the_plain_forward_with_added_edges_as_mesh_edges(trajs):
    tr = trajs[0]
    u = tr["u"][1]
    added = F.added("piorf", tr, u, [], F.context(10, 0))
    torch.manual_seed(0)
    shared = A.SharedEdgeSimulator(16, 2, 1)
    torch.manual_seed(0)
    plain = FlowSimulator(16, 2, 1)
    every = torch.cat([tr["edge_index"], added], 1)
    for sim in (shared, plain):
        sim.edge_norm.fit(mesh_edge_features(tr["pos"], every))
    out = shared(u, tr["node_type"], tr["pos"], tr["edge_index"], added)
    assert torch.allclose(out, plain(u, tr["node_type"], tr["pos"], every), atol=1e-6)
    # and not what the plain simulator computes with its own encoder for the added edges
    plain.added_norm.fit(mesh_edge_features(tr["pos"], added))
    assert not torch.allclose(out, plain(u, tr["node_type"], tr["pos"], tr["edge_index"], added), atol=1e-4)


def test_frames_the_pooling_counts_are_the_frames_fit_uses():
    T = A.RECIPE["data"]["frames"]
    assert len(range(0, T - 1, A.FRAME_STRIDE)) == 17  # the normalisers see frames 0, 3, ..., 48 of each mesh
    assert "range(0, T - 1, 3)" in __import__("inspect").getsource(F.fit)


def _record():
    if not A.PATH.exists():
        pytest.skip("no record yet")
    return A.load()


def test_record_matches_the_preregistration_and_the_code():
    rec = _record()
    assert rec["recipe"] == json.loads(json.dumps(A.RECIPE))
    assert {k: v for k, v in rec["recipe"].items() if k not in ("methods", "arms")} == \
        {k: v for k, v in json.loads(json.dumps(F.RECIPE)).items() if k != "methods"}
    assert rec["code"] == A.code_fingerprint()
    arms = {key.split(",")[0] for key in rec["results"]["runs"]}
    assert arms <= set(A.ARMS)
    for arm in arms:
        assert all(f"{arm},{s}" in rec["results"]["runs"] for s in A.RECIPE["seeds"])
    assert all(r["steps"] == A.RECIPE["max_steps"] for r in rec["results"]["runs"].values())


def test_record_edits_are_detected(tmp_path):
    rec = _record()
    key = next(iter(rec["results"]["runs"]))
    rec["results"]["runs"][key]["r1"] *= 0.9
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(rec))
    with pytest.raises(ValueError):
        A.load(path)
