"""The training script of the multiq-maglap chapter: data, fp16 storage, and the committed models."""

import pytest
import torch

from iclr25.graphs import multiq_train as mqt
from iclr25.graphs.magnetic import predict_pairs, rmse, train_pair_regressor


def test_build_split_is_deterministic_and_views_agree():
    a = mqt.build_split(6, (8, 12), 4, 7, ("mq", "lap", "two", "adj"))
    b = mqt.build_split(6, (8, 12), 4, 7, ("mq",))
    assert len(a["mq"]) == len(b["mq"]) == 6
    for g, h, lap, two, adj in zip(a["mq"], b["mq"], a["lap"], a["two"], a["adj"]):
        assert torch.equal(g.edge_index, h.edge_index) and torch.equal(g.y_pairs, h.y_pairs)
        assert torch.equal(g.pe_U, h.pe_U)
        assert g.pe_U.shape[1] == 5 and lap.pe_U.shape[1] == 1 and two.pe_U.shape[1] == 2 and adj.pe_U.shape[1] == 5
        assert torch.equal(g.edge_index, lap.edge_index) and torch.equal(g.y_pairs, adj.y_pairs)
    cut = mqt.view_of(a, "magnetic", 2, "mq")
    assert cut[0].pe_U.shape[1] == 2 and a["mq"][0].pe_U.shape[1] == 5      # copies, inputs untouched
    assert mqt.view_of(a, "svd", 1, "mq") is a["mq"]
    few = mqt.view_of(a, "naive", 5, "mq", {"k": 3})
    assert few[0].pe_U.shape[1:] == (5, 3) and few[0].pe_lambda.shape[1:] == (5, 3)
    assert torch.equal(few[0].pe_U, a["mq"][0].pe_U[:, :, :3])              # the 3 smallest eigenpairs


def test_encoder_options_set_width_and_slots():
    enc, nq, _, opts = mqt.spec("Q=1, C=40")
    wide = mqt.new_model(enc, nq, 0, opts)
    narrow = mqt.new_model("magnetic", 5, 0)
    # the width-matched single-q control feeds the head as many inputs as Multi-q
    assert wide.head.lins[0].in_channels == narrow.head.lins[0].in_channels
    naive = mqt.new_model("naive", 5, 0, {"k": 8})
    assert naive.node_mlp.lins[0].in_channels == 3 * 5 * 8
    # the stable encoder of the stable-vs-naive row reads the naive encoder's 8 eigenpairs per potential
    enc8, nq8, view8, opts8 = mqt.spec("Q=5, k=8")
    assert (enc8, nq8, view8, opts8["k"]) == ("magnetic", 5, "mq", mqt.spec("naive Q=5, k=8")[3]["k"])
    assert mqt.new_model(enc8, nq8, 0, opts8).head.lins[0].in_channels == narrow.head.lins[0].in_channels


def test_ci_test_split_is_a_prefix_of_the_full_one():
    """The chapter states that ci evaluates on the first graphs of full's test split."""
    few = mqt.build_split(3, (21, 24), 22, 200, ("mq",))["mq"]
    more = mqt.build_split(7, (21, 24), 22, 200, ("mq",))["mq"]
    for g, h in zip(few, more[:3]):
        assert torch.equal(g.edge_index, h.edge_index) and torch.equal(g.y_pairs, h.y_pairs)


def test_fp16_round_trip_keeps_buffers_and_predictions():
    graphs = mqt.build_split(4, (8, 10), 4, 1, ("mq",))["mq"]
    model = mqt.new_model("magnetic", 5, 0)
    train_pair_regressor(model, graphs, 3, 2, 1e-2, 0)
    state = mqt.to_fp16(model)
    assert state["y_mean"].dtype == torch.float32 and state["head.lins.0.weight"].dtype == torch.float16
    back = mqt.from_fp16("magnetic", 5, state)
    assert torch.equal(back.y_std, model.y_std)
    p0, t = predict_pairs(model, graphs)
    p1, _ = predict_pairs(back, graphs)
    assert rmse(p1, t) == pytest.approx(rmse(p0, t), rel=1e-2)


def test_stop_after_reruns_the_start_of_a_run():
    graphs = mqt.build_split(8, (8, 10), 4, 2, ("mq",))["mq"]
    full = train_pair_regressor(mqt.new_model("magnetic", 1, 3), mqt.first_q(graphs, 1), 12, 2, 1e-2, 3)
    head = train_pair_regressor(mqt.new_model("magnetic", 1, 3), mqt.first_q(graphs, 1), 12, 2, 1e-2, 3,
                                stop_after=5)
    assert len(full) == 12 and head == full[:5]


@pytest.mark.skipif(not (mqt.WEIGHTS / f"{mqt.NAME}.pt.xz").exists(), reason="no committed models")
def test_committed_models_load_fit_the_share_and_cover_every_run():
    info, models = mqt.load_models()                  # checks the sha256
    path = mqt.WEIGHTS / f"{mqt.NAME}.pt.xz"
    assert path.stat().st_size + (mqt.WEIGHTS / f"{mqt.NAME}.json").stat().st_size < 3_600_000
    names = [*mqt.ENCODERS, *[n for n in mqt.ABLATION if n in info["encoders"]]]
    assert set(models) == {(n, s) for n in names for s in info["recipe"]["seeds"]}
    assert info["recipe"]["steps"] == mqt.RECIPE["steps"] and info["recipe"]["lr_grid"] == mqt.RECIPE["lr_grid"]
    for n in mqt.ENCODERS:
        assert set(info["encoders"][n]["tuning"]) == {str(lr) for lr in mqt.RECIPE["lr_grid"]}


def test_jobs_cover_the_recipe_once():
    js = mqt.jobs()
    assert len(js) == len(set(js))
    r = mqt.RECIPE
    assert sum(k == "tune" for k, _, _ in js) == len(mqt.ENCODERS) * len(r["lr_grid"])
    assert sum(k == "seed" for k, _, _ in js) == (len(mqt.ENCODERS) + len(mqt.ABLATION)) * len(r["seeds"])
    first_seed = next(i for i, j in enumerate(js) if j[0] != "tune")
    assert all(j[0] == "tune" for j in js[:first_seed])          # every grid runs before any seed waits


def test_aliased_control_removes_only_the_information():
    """``"Q=5 aliased"``: the encoder of ``"Q=5"`` at potentials that all reduce to q = 0.1."""
    from iclr25.graphs.magnetic import potential_rank
    assert potential_rank(mqt.ALIAS_QS, 4) == potential_rank([0.1], 4) == 2
    assert potential_rank(mqt.RECIPE["qs"], 4) == 5
    enc, nq, view, opts = mqt.spec("Q=5 aliased")
    assert (enc, nq, opts) == mqt.spec("Q=5")[:2] + (mqt.spec("Q=5")[3],) and view == "alias"
    s = mqt.build_split(3, (8, 12), 4, 7, ("mq", "alias"))
    for g, h in zip(s["mq"], s["alias"]):
        lam, lam_a = g.pe_lambda[0], h.pe_lambda[0]
        n = g.num_nodes
        # L_1.1 = L_0.1 and L_0.9 = conj(L_0.1): the same spectrum as q = 0.1; L_0.4, L_0.6: 2 - that spectrum
        for j in (3, 4):
            assert torch.allclose(lam_a[j, :n], lam[0, :n], atol=1e-5)
        for j in (1, 2):
            assert torch.allclose(torch.sort(2 - lam_a[j, :n]).values, lam[0, :n], atol=1e-5)
