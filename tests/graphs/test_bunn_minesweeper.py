"""The Minesweeper training loop and the committed record of the chapter ``graphs/bunn``."""
import json

import numpy as np
import pytest
import torch

from iclr25.graphs.bunn_minesweeper import (MODELS, NAME, RECIPE, WEIGHTS, fit_minesweeper, load_record,
                                            minesweeper_data, t_init)


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
        assert len(a["t"]) == 16 and all(t > 0 for t in a["t"])
    # BuNN's log-times have their own learning rate: they start at t_init(t0) and move
    c = fit_minesweeper(kind, *small, lr=1e-3, dropout=0.0, seed=0, t0=10.0, max_epochs=60, patience=1)
    if kind == "bunn":
        start = np.tile(t_init(10.0), RECIPE["layers"])
        assert np.median(np.abs(np.log10(np.array(c["t"]) / start))) > 0.05


def test_record_matches_the_recipe_and_its_checksum():
    info = load_record()
    assert info["recipe"] == json.loads(json.dumps(RECIPE))
    assert set(info["results"]) == set(MODELS)
    for name, r in info["results"].items():
        assert r["kind"] == MODELS[name]
        stage1 = len(RECIPE["lr_grid"]) * len(RECIPE["dropout_grid"])
        bunn = "bunn" in r["kind"]   # BuNN: stage 2 adds t0 at the chosen pair (t0_default is already in stage 1)
        assert len(r["tuning"]) == stage1 + (len(RECIPE["t_grid"]) - 1 if bunn else 0)
        best = max(r["tuning"], key=r["tuning"].get)       # the chosen values are the argmax of the table
        assert best == f"{r['lr']:g},{r['dropout']:g}" + (f",{r['t0']:g}" if bunn else "")
        if bunn:  # stage 2 ran at the best pair of stage 1
            s1 = {k: v for k, v in r["tuning"].items() if k.endswith(f",{RECIPE['t0_default']:g}")}
            assert max(s1, key=s1.get).rsplit(",", 1)[0] == f"{r['lr']:g},{r['dropout']:g}"
            assert all(f"{r['lr']:g},{r['dropout']:g},{t:g}" in r["tuning"] for t in RECIPE["t_grid"])
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
    model far above the graph-blind MLP in every seed, every recorded run at its validation plateau, and both
    BuNNs' learned times moved from their start (median |log10(learned / initial)| of at least 0.1)."""
    res = load_record()["results"]
    auc = {name: [r["runs"][str(s)]["test"] for s in RECIPE["seeds"]] for name, r in res.items()}
    for name in ("GCN", "GraphSAGE", "BuNN, trivial bundle", "BuNN"):
        assert min(auc[name]) > max(auc["MLP"]) + 0.2, name
    assert all(run["plateau"] for r in res.values() for run in r["runs"].values())
    for name in ("BuNN, trivial bundle", "BuNN"):
        start = np.tile(t_init(res[name]["t0"]), RECIPE["layers"])
        learned = np.array([res[name]["runs"][str(s)]["t"] for s in RECIPE["seeds"]])
        assert np.median(np.abs(np.log10(learned / start))) >= 0.1, name
