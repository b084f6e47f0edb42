"""The BuNN arm of the 64x64 Minesweeper study (``iclr25.graphs.bunn_deep``): its layer and its record."""
import json

import pytest
import torch

from iclr25.common.digest import file_sha256
from iclr25.graphs import bunn_deep, bunn_gate, bunn_headroom
from iclr25.graphs.bundle import BuNNConv, laplacian_eigh, normalized_adjacency, taylor_error_bound
from iclr25.graphs.synthetic import minesweeper_graph


def test_taylor_layer_at_fixed_unit_time_matches_the_exact_kernel_on_a_minesweeper_grid():
    """The arm's layer (Taylor K=8, t=1, angle frames from a SumGNN, sep block) against the same layer with the
    exact spectral kernel, on a 16x16 king-move grid, float64: the Lagrange bound (2t)^9/9! = 1.4e-3."""
    data = minesweeper_graph(16, 16, seed=3)
    ei, n = data.edge_index, data.num_nodes
    r = bunn_deep.RECIPE
    kw = dict(bundle_dim=r["bundle_dim"], num_bundles=r["num_bundles"], t_init=r["t"], orth=r["orth"],
              phi_gnn=r["phi_gnn"], sep=True)
    torch.manual_seed(0)
    tay = BuNNConv(r["width"], kernel="taylor", K=r["K"], **kw).double()
    spec = BuNNConv(r["width"], kernel="spectral", **kw).double()
    torch.nn.init.normal_(tay.phi[-1].weight, std=0.5)  # non-trivial frames
    spec.load_state_dict(tay.state_dict())
    x = torch.randn(n, r["width"], dtype=torch.float64)
    a = spec(x, ei, eig=laplacian_eigh(ei, n), phi_edge_index=ei)
    adj = normalized_adjacency(ei, n, torch.float64)
    b = tay(x, adj, phi_edge_index=ei)
    assert taylor_error_bound(2.0 * r["t"], r["K"]) < 2e-3
    err = (a - b).abs().max().item()
    assert err < 2e-3, err
    # and the kernel is not trivially close: a degree-2 series misses by far more
    low = BuNNConv(r["width"], kernel="taylor", K=2, **kw).double()
    low.load_state_dict(tay.state_dict())
    assert (low(x, adj, phi_edge_index=ei) - a).abs().max() > 10 * err


def test_the_arm_freezes_the_time_and_uses_the_authors_kernel():
    model = bunn_deep.make_model(3, 10)
    assert len(model.convs) == 3
    for conv in model.convs:
        assert (conv.kernel, conv.K, conv.orth) == ("taylor", 8, "angle")
        assert not conv.tau.requires_grad and torch.allclose(conv.diffusion_time(), torch.ones(8))


def test_record_follows_the_baselines_rule_and_pairs_their_seeds():
    info = bunn_deep.load_record()
    assert info["recipe"] == json.loads(json.dumps(bunn_deep.RECIPE))
    assert info["code_sha256"]["bunn_deep.py"] == file_sha256(bunn_deep.HERE / "bunn_deep.py")
    r, t = info["recipe"], info["results"]["tuning"]
    hr = bunn_headroom.RECIPE
    assert (r["depth_grid"], r["lr_grid"], r["depth_extend"], r["tune_seed"], r["seeds"]) == (
        hr["depth_grid"], hr["lr_grid"], hr["depth_extend"], hr["tune_seed"], hr["seeds"])
    grid = [k for k in t["table"] if float(k.split(",")[1]) in r["lr_grid"]]
    depths = sorted({int(k.split(",")[0]) for k in grid})
    grid_best = max((k for k in grid if int(k.split(",")[0]) in r["depth_grid"]), key=lambda k: t["table"][k]["val"])
    extended = int(grid_best.split(",")[0]) == max(r["depth_grid"])
    # the depth grid, extended only when its deepest depth was best
    assert depths == sorted(r["depth_grid"] + ([r["depth_extend"]] if extended else []))
    assert len(grid) == len(depths) * len(r["lr_grid"])
    # then one learning rate beyond the chosen edge, at the chosen depth
    best = max(grid, key=lambda k: t["table"][k]["val"])
    d, lr = int(best.split(",")[0]), float(best.split(",")[1])
    assert set(t["table"]) - set(grid) == {f"{d},{r['lr_up'] if lr == max(r['lr_grid']) else r['lr_down']:g}"}
    assert max(t["table"], key=lambda k: t["table"][k]["val"]) == f"{t['depth']},{t['lr']:g}"
    runs = info["results"]["runs"]
    assert sorted(map(int, runs)) == r["seeds"] == bunn_headroom.load_record()["recipe"]["seeds"]
    assert sorted(map(int, bunn_gate.load_record()["results"]["runs"])) == r["seeds"]
    for run in list(runs.values()) + list(t["table"].values()):
        assert run["val"] == max(run["curve"]) and 0.0 <= run["test"] <= 1.0 and len(run["loss_head"]) == 5


def test_record_edits_are_detected(tmp_path):
    info = json.loads((bunn_deep.WEIGHTS / f"{bunn_deep.NAME}.json").read_text())
    info["results"]["runs"]["0"]["test"] += 0.01
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(info))
    with pytest.raises(RuntimeError):
        bunn_deep.load_record(path)


def test_edges_record_steps_one_learning_rate_past_each_chosen_edge():
    from iclr25.graphs import bunn_edges

    info = bunn_edges.load_record()
    hr = bunn_headroom.load_record()
    res, rec = info["results"], hr["recipe"]
    assert info["recipe"] == json.loads(json.dumps(bunn_edges.RECIPE))
    assert info["code_sha256"]["bunn_edges.py"] == file_sha256(bunn_edges.HERE / "bunn_edges.py")
    assert res["headroom_sha256_results"] == hr["sha256_results"]
    assert "lr_ext" in res["parts"] and set(res["parts"]) <= set(bunn_edges.RECIPE["parts"])
    tuning = hr["results"]["tuning"]
    assert set(res["lr_ext"]) == set(tuning)
    for name, e in res["lr_ext"].items():
        t = tuning[name]
        step = bunn_edges.RECIPE["lr_up"] if t["lr"] == max(rec["lr_grid"]) else bunn_edges.RECIPE["lr_down"]
        assert (e["depth"], e["lr"]) == (t["depth"], step)
        run = e["run"]
        assert run["val"] == max(run["curve"]) and 0.0 <= run["test"] <= 1.0 and len(run["loss_head"]) == 5


def test_second_look_record_pairs_new_seeds_with_the_tuned_arms(tmp_path):
    """The second look (``bunn_look2``): seeds 10-19, disjoint from the first look's and the tuning seed, every
    arm at the depth and learning rate its first-look record tuned, read from the committed records."""
    from iclr25.graphs import bunn_look2

    info = bunn_look2.load_record()
    assert info["recipe"] == json.loads(json.dumps(bunn_look2.RECIPE))
    assert info["code_sha256"]["bunn_look2.py"] == file_sha256(bunn_look2.HERE / "bunn_look2.py")
    res, r = info["results"], info["recipe"]
    hr, deep, gate = bunn_headroom.load_record(), bunn_deep.load_record(), bunn_gate.load_record()
    assert res["sources"] == {"bunn-headroom": hr["sha256_results"], "bunn-deep": deep["sha256_results"],
                              "bunn-gate": gate["sha256_results"]}
    assert not set(r["seeds"]) & (set(hr["recipe"]["seeds"]) | {hr["recipe"]["tune_seed"]})
    assert r["level"] == 1 - 0.05 / r["looks"]   # Bonferroni over the looks
    assert set(res["arms"]) == set(r["arms"]) == set(bunn_look2.arms())
    for name, arm in res["arms"].items():
        assert {k: arm[k] for k in ("model", "depth", "lr")} == bunn_look2.arms()[name]
        assert sorted(map(int, arm["runs"])) == r["seeds"]
        for run in arm["runs"].values():
            assert run["val"] == max(run["curve"]) and 0.0 <= run["test"] <= 1.0 and len(run["loss_head"]) == 5
    info["results"]["arms"]["BuNN"]["runs"]["10"]["test"] += 0.01
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(info))
    with pytest.raises(RuntimeError):
        bunn_look2.load_record(path)


def test_runner_up_record_pairs_the_evaluation_seeds():
    """``bunn_edges --parts runner_up``: the second-best tuned baseline on the first look's evaluation seeds."""
    from iclr25.graphs import bunn_edges

    info = bunn_edges.load_record(bunn_edges.WEIGHTS / f"{bunn_edges.NAME}-runner-up.json")
    hr = bunn_headroom.load_record()
    res, tuning = info["results"], hr["results"]["tuning"]
    assert info["code_sha256"]["bunn_edges.py"] == file_sha256(bunn_edges.HERE / "bunn_edges.py")
    assert res["parts"] == ["runner_up"] and res["headroom_sha256_results"] == hr["sha256_results"]
    val = {k: t["table"][f"{t['depth']},{t['lr']:g}"]["val"] for k, t in tuning.items()}
    ru = res["runner_up"]
    assert ru["model"] == sorted(val, key=val.get)[-2] != hr["results"]["best"]
    assert (ru["depth"], ru["lr"]) == (tuning[ru["model"]]["depth"], tuning[ru["model"]]["lr"])
    assert sorted(map(int, ru["runs"])) == hr["recipe"]["seeds"]
    for run in ru["runs"].values():
        assert run["val"] == max(run["curve"]) and 0.0 <= run["test"] <= 1.0 and len(run["loss_head"]) == 5
