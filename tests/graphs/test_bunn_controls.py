"""Controls and the authors' frame network of the 64x64 Minesweeper study (``iclr25.graphs.bunn_controls``)."""
import json

import pytest
import torch

from iclr25.graphs import bunn_controls as bc
from iclr25.graphs import bunn_deep, bunn_gate, bunn_headroom
from iclr25.graphs.bundle import BuNNConv
from iclr25.graphs.synthetic import minesweeper_graph


def test_the_loop_is_the_bunn_arms_loop():
    """``fit`` with the study's BuNN gives the first losses and curve of ``bunn_deep.run`` (same seed, lr)."""
    a = bunn_deep.run(2, 1e-3, 5, max_epochs=50)
    b = bc.fit(lambda d: bunn_deep.make_model(2, d), 1e-3, 5, max_epochs=50)
    assert a["loss_head"] == b["loss_head"] and a["curve"] == b["curve"] and len(a["curve"]) == 1


def test_trivial_bundle_changes_only_the_frames():
    deep, triv = bunn_deep.make_model(3, 10), bc.make_trivial(3, 10)
    for c_deep, c_triv in zip(deep.convs, triv.convs):
        assert c_triv.phi is None and c_deep.phi is not None
        assert (c_triv.kernel, c_triv.K, c_triv.sep) == (c_deep.kernel, c_deep.K, c_deep.sep)
        assert not c_triv.tau.requires_grad and torch.equal(c_triv.diffusion_time(), c_deep.diffusion_time())
    # every parameter outside the frame networks has the same name and shape
    shapes = lambda m: {k: v.shape for k, v in m.named_parameters() if ".phi." not in k}  # noqa: E731
    assert shapes(deep) == shapes(triv)
    x = torch.randn(7, 32)
    ei = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
    assert torch.equal(triv.convs[0].frames_of(x), torch.eye(2).expand(7, 8, 2, 2))


def test_sage_frames_average_the_neighbours():
    """One block by hand: h + FF([LN(h), mean of the neighbours' LN(h)]); isolated nodes get a zero mean."""
    torch.manual_seed(0)
    net = bc.SAGEFrames(4, 6, 3, blocks=1)
    x = torch.randn(5, 4)
    ei = torch.tensor([[0, 1, 0, 2, 1, 2], [1, 0, 2, 0, 2, 1]])  # a triangle 0-1-2; nodes 3, 4 isolated
    h = net.inp(x)
    z = net.norms[0](h)
    adj = torch.zeros(5, 5)
    adj[ei[1], ei[0]] = 1.0
    mean = adj @ z / adj.sum(1, keepdim=True).clamp(min=1)
    want = net.out(h + net.ffs[0](torch.cat([z, mean], -1)))
    assert torch.allclose(net(x, ei), want, atol=1e-6)
    assert torch.equal(mean[3:], torch.zeros(2, 6))


def test_authors_frames_replace_every_layers_frame_network():
    model = bc.make_authors(3, 10, blocks=2)
    data = minesweeper_graph(8, 8, seed=1)
    for conv in model.convs:
        assert isinstance(conv, BuNNConv) and isinstance(conv.phi, bc.SAGEFrames) and len(conv.phi.ffs) == 2
        assert torch.equal(conv.phi[-1].weight, torch.zeros_like(conv.phi[-1].weight))
    assert model(data.x, data.edge_index).shape == (data.num_nodes, 1)


@pytest.mark.parametrize("vals, nxt", [((0.90, 0.92, 0.91, 0.90), None), ((0.95, 0.92, 0.91, 0.90), 1e-5),
                                       ((0.90, 0.91, 0.92, 0.93), 3e-3)])
def test_the_tuning_rule_steps_past_an_edge_only(vals, nxt):
    table = {f"{lr:g}": dict(val=v) for lr, v in zip(bc.RECIPE["lr_grid"], vals)}
    got = bc.next_lr(table)
    assert got == pytest.approx(nxt) if nxt is not None else got is None


def test_controls_record():
    info = bc.record("controls")
    assert info["recipe"] == json.loads(json.dumps(bc.RECIPE)) and info["part"] == "controls"
    assert bc.fingerprint_ok(info, "controls")
    assert info["sources"] == {"bunn-deep": bunn_deep.load_record()["sha256_results"],
                               "bunn-headroom": bunn_headroom.load_record()["sha256_results"]}
    arms = bc.control_arms()
    assert set(info["arms"]) == set(arms)
    for name, a in info["arms"].items():
        assert (a["depth"], a["lr"]) == (arms[name]["depth"], arms[name]["lr"])
        assert sorted(map(int, a["runs"])) == bc.RECIPE["control_seeds"] == list(range(20))
    # the seeds are those of both committed looks, on which BuNN was trained
    assert sorted(map(int, bunn_deep.load_record()["results"]["runs"])) == list(range(10))


def test_authors_tuning_record_follows_its_rule():
    info = bc.record("tune")
    assert info["recipe"] == json.loads(json.dumps(bc.RECIPE)) and bc.fingerprint_ok(info, "tune")
    table = info["table"]
    grid = [f"{lr:g}" for lr in bc.RECIPE["lr_grid"]]
    assert set(grid) <= set(table) and len(table) <= len(grid) + bc.RECIPE["max_extend"]
    assert info["lr"] == bc.tuned_lr(table) and info["interior"] == (bc.next_lr(table) is None)
    assert info["depth"] == bunn_deep.load_record()["results"]["tuning"]["depth"]


def test_authors_evaluation_record_is_the_preregistered_one():
    info = bc.record("eval")
    assert info["eval"] == json.loads(json.dumps(bc.EVAL)) and bc.fingerprint_ok(info, "eval")
    assert info["sources"]["bunn-authors-tune"] == bc.record("tune")["sha256"]
    seeds = bc.EVAL["seeds"]
    assert len(seeds) >= 8 and bc.RECIPE["tune_seed"] not in seeds and set(seeds) <= set(range(20))
    arms = bc.eval_arms()
    assert list(info["arms"]) == bc.EVAL["arms"] and {r["b"] for r in bc.EVAL["rows"]} <= set(arms)
    for name, a in info["arms"].items():
        assert sorted(map(int, a["runs"])) == seeds and (a["depth"], a["lr"]) == (arms[name]["depth"], arms[name]["lr"])
    # the comparators were trained on these seeds by the committed records (both looks)
    assert sorted(map(int, bunn_deep.load_record()["results"]["runs"])) + bunn_look2_seeds() == list(range(20))


def test_authors_second_look_is_the_preregistered_one():
    info = bc.record("eval2")
    assert info["eval"] == json.loads(json.dumps(bc.EVAL2)) and bc.fingerprint_ok(info, "eval2")
    assert info["sources"]["bunn-authors-tune"] == bc.record("tune")["sha256"]
    assert info["sources"]["bunn-authors-eval"] == bc.record("eval")["sha256"]
    # look 2 trains the seeds look 1 left out and reads all of them, same rows and bars, at 97.5 %
    assert sorted(bc.EVAL["seeds"] + bc.EVAL2["seeds"]) == bc.EVAL2["read_seeds"] == list(range(20))
    assert bc.EVAL2["rows"] == bc.EVAL["rows"] and bc.EVAL2["level"] == 0.975 and bc.EVAL2["looks"] == 2
    assert set(bc.EVAL2["paper_rows"]) <= {r["b"] for r in bc.EVAL2["rows"]} and bc.EVAL2["variant"] == "BuNN"
    arms = bc.eval_arms()
    for name, a in info["arms"].items():
        assert sorted(map(int, a["runs"])) == bc.EVAL2["seeds"]
        assert (a["depth"], a["lr"]) == (arms[name]["depth"], arms[name]["lr"])


def bunn_look2_seeds() -> list[int]:
    from iclr25.graphs import bunn_look2
    return bunn_look2.RECIPE["seeds"]


def test_a_changed_function_fails_the_fingerprint():
    info = bc.record("controls")
    key = next(k for k in info["code"] if k.endswith(".make_trivial"))
    assert bc.fingerprint_ok(info, "controls")
    assert not bc.fingerprint_ok(dict(info, code=dict(info["code"], **{key: "0" * 64})), "controls")


def test_an_edited_record_is_refused(tmp_path):
    info = json.loads((bc.WEIGHTS / f"{bc.PARTS['controls']}.json").read_text())
    first = next(iter(info["arms"].values()))["runs"]["0"]
    first["test"] += 0.01
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(info))
    from iclr25.common.digest import load_record
    with pytest.raises(ValueError):
        load_record(path, "rerun")
