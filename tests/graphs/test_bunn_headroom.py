"""The Minesweeper 64x64 records of the chapter ``graphs/bunn``: the depth-tuned baselines and the gate arm."""
import json

import pytest

from iclr25.common.digest import file_sha256
from iclr25.graphs.bunn_headroom import HERE, MODELS, NAME, RECIPE, WEIGHTS, load_record


def test_record_matches_the_recipe_the_code_and_its_checksum():
    info = load_record()
    assert info["recipe"] == json.loads(json.dumps(RECIPE))
    assert info["models"] == {k: list(v) for k, v in MODELS.items()}
    # the chapter's own modules are the code that made the record (bundle.py and synthetic.py are shared; the
    # chapter re-trains a tuning run live to show that they still train the same)
    for name in ("bunn_headroom.py", "bunn_minesweeper.py"):
        assert info["code_sha256"][name] == file_sha256(HERE / name), name
    res = info["results"]
    assert set(res["tuning"]) == set(MODELS)
    for name, t in res["tuning"].items():
        depths = sorted({int(k.split(",")[0]) for k in t["table"]})
        # the depth grid, extended only when its deepest depth was best
        grid_best = max((k for k in t["table"] if int(k.split(",")[0]) in RECIPE["depth_grid"]),
                        key=lambda k: t["table"][k]["val"])
        extended = int(grid_best.split(",")[0]) == max(RECIPE["depth_grid"])
        assert depths == sorted(RECIPE["depth_grid"] + ([RECIPE["depth_extend"]] if extended else []))
        assert len(t["table"]) == len(depths) * len(RECIPE["lr_grid"])
        best = max(t["table"], key=lambda k: t["table"][k]["val"])   # the chosen values are the argmax
        assert best == f"{t['depth']},{t['lr']:g}"
        for run in t["table"].values():
            assert run["val"] == max(run["curve"]) and 0.0 <= run["test"] <= 1.0
    chosen = {n: t["table"][f"{t['depth']},{t['lr']:g}"]["val"] for n, t in res["tuning"].items()}
    assert res["best"] == max(chosen, key=chosen.get)
    assert sorted(map(int, res["runs"])) == RECIPE["seeds"]
    # every run stopped at its plateau, not at the epoch cap
    assert all(r["plateau"] for r in res["runs"].values())
    assert all(r["plateau"] for t in res["tuning"].values() for r in t["table"].values())


def test_record_edits_are_detected(tmp_path):
    info = json.loads((WEIGHTS / f"{NAME}.json").read_text())
    info["results"]["runs"]["0"]["test"] += 0.01
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(info))
    with pytest.raises(RuntimeError):
        load_record(path)


def test_gate_record_pairs_platonovs_gcn_with_the_evaluation_seeds():
    from iclr25.graphs import bunn_gate

    info = bunn_gate.load_record()
    hr = load_record()
    res = info["results"]
    assert info["recipe"] == json.loads(json.dumps(bunn_gate.RECIPE))
    assert info["code_sha256"]["bunn_gate.py"] == file_sha256(HERE / "bunn_gate.py")
    # the arm the headroom study tuned, on the record it was read from, on the same evaluation seeds
    assert res["headroom_sha256_results"] == hr["sha256_results"]
    tuned = hr["results"]["tuning"][bunn_gate.RECIPE["model"]]
    assert (res["model"], res["depth"], res["lr"]) == (bunn_gate.RECIPE["model"], tuned["depth"], tuned["lr"])
    assert sorted(map(int, res["runs"])) == sorted(map(int, res["mlp"])) == sorted(map(int, hr["results"]["runs"]))
    for run in res["runs"].values():
        assert run["plateau"] and run["val"] == max(run["curve"]) and 0.0 <= run["test"] <= 1.0
        assert len(run["loss_head"]) == RECIPE["n_loss_head"]


def test_gate_record_edits_are_detected(tmp_path):
    from iclr25.graphs import bunn_gate

    info = json.loads((WEIGHTS / f"{bunn_gate.NAME}.json").read_text())
    info["results"]["mlp"]["0"]["test"] += 0.01
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(info))
    with pytest.raises(RuntimeError):
        bunn_gate.load_record(path)
