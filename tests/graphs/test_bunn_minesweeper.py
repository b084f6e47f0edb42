"""The Minesweeper training loop and the committed record of the chapter ``graphs/bunn``."""
import json

import pytest
import torch

from iclr25.graphs.bunn_minesweeper import (MODELS, NAME, RECIPE, WEIGHTS, fit_minesweeper, load_record,
                                            minesweeper_data)


@pytest.fixture(scope="module")
def small():
    torch.set_num_threads(1)
    return minesweeper_data(3, grid=10)


@pytest.mark.parametrize("kind", ["gcn", "bunn"])
def test_fit_is_deterministic_and_reports_its_run(small, kind):
    a = fit_minesweeper(kind, *small, lr=1e-2, dropout=0.2, seed=0, max_epochs=80, patience=2)
    b = fit_minesweeper(kind, *small, lr=1e-2, dropout=0.2, seed=0, max_epochs=80, patience=2)
    assert a["test"] == b["test"] and a["curve"] == b["curve"] and a["loss_head"] == b["loss_head"]
    # evaluations every 10 epochs from the warm-up (50) on: at most 4 up to epoch 80
    assert 1 <= len(a["curve"]) <= 4 and a["val"] == max(a["curve"])
    assert len(a["loss_head"]) == RECIPE["n_loss_head"] and a["prob"].shape == (100,)
    # a stop before the cap is a plateau: `patience` evaluations without a 0.001 gain
    assert a["plateau"] or len(a["curve"]) == 4
    if a["plateau"]:
        assert max(a["curve"][-2:]) <= max(a["curve"][:-2]) + RECIPE["min_gain"]
    if kind == "bunn":
        assert len(a["t"]) == 16 and all(0 <= t <= RECIPE["t_max"] for t in a["t"])


def test_record_matches_the_recipe_and_its_checksum():
    info = load_record()
    assert info["recipe"] == json.loads(json.dumps(RECIPE))
    assert set(info["results"]) == set(MODELS)
    for name, r in info["results"].items():
        assert r["kind"] == MODELS[name]
        assert len(r["tuning"]) == len(RECIPE["lr_grid"]) * len(RECIPE["dropout_grid"])
        best = max(r["tuning"], key=r["tuning"].get)       # the chosen values are the argmax of the table
        assert best == f"{r['lr']:g},{r['dropout']:g}"
        assert sorted(map(int, r["runs"])) == RECIPE["seeds"]
        for run in r["runs"].values():
            assert 0.0 <= run["test"] <= 1.0 and run["val"] == max(run["curve"])


def test_record_edits_are_detected(tmp_path):
    info = json.loads((WEIGHTS / f"{NAME}.json").read_text())
    info["results"]["BuNN"]["runs"]["0"]["test"] += 0.01
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(info))
    with pytest.raises(RuntimeError):
        load_record(path)


def test_record_shows_competent_models():
    """What the chapter reads from the record alone (so it cannot fail when the chapter runs): every graph
    model far above the graph-blind MLP in every seed, every recorded run at its validation plateau, and
    BuNN's mean not more than 2 points below GCN's."""
    res = load_record()["results"]
    auc = {name: [r["runs"][str(s)]["test"] for s in RECIPE["seeds"]] for name, r in res.items()}
    for name in ("GCN", "GraphSAGE", "BuNN, trivial bundle", "BuNN"):
        assert min(auc[name]) > max(auc["MLP"]) + 0.2, name
    assert all(run["plateau"] for r in res.values() for run in r["runs"].values())
    assert sum(auc["BuNN"]) / len(auc["BuNN"]) - sum(auc["GCN"]) / len(auc["GCN"]) > -0.02
