"""The committed stage-1 world models of the PreWorld chapter (``iclr25/occupancy/weights/``): small,
loadable, refused (naming the script) when missing or stale, and still what
``python -m iclr25.occupancy.pretrained`` makes (first steps of one variant; the whole run of one
variant with ICLR25_SLOW=1)."""

import json
import os

import numpy as np
import pytest
import torch

from iclr25.occupancy import pretrained as pt

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_committed_files_are_small_and_load():
    for name in [f"main-s{s}" for s in pt.FT["seeds"]] + ["tune"]:      # the evaluation seeds committed so far
        path = pt.WEIGHTS / f"preworld-{name}.pt"
        assert path.is_file(), f"missing {path}: run `{pt.SCRIPT}`"
        assert path.stat().st_size <= 2_000_000
        _, meta = pt.load_pretrained(name)
        ls = np.array(meta["losses"])
        assert len(ls) == pt.RECIPE["steps"] and ls[-50:].mean() < 0.5 * ls[:50].mean()


def test_first_steps_reproduce_the_recorded_losses():
    for name in ("main-s0", f"main-s{pt.FT['seeds'][-1]}", "tune"):
        _, meta = pt.load_pretrained(name)
        _, ls = pt.train_variant(name, stop_after=3)
        np.testing.assert_allclose(ls, meta["losses"][:3], rtol=2e-3)


def test_missing_or_stale_checkpoint_is_refused_naming_the_script(tmp_path):
    with pytest.raises(RuntimeError, match="occupancy.pretrained"):
        pt.load_pretrained("main-s0", recipe={**pt.RECIPE, "steps": 1})
    with pytest.raises(FileNotFoundError, match="occupancy.pretrained"):
        pt.load_pretrained("main-s0", path=tmp_path / "none.pt")


@pytest.mark.skipif(os.environ.get("ICLR25_SLOW") != "1", reason="set ICLR25_SLOW=1 (retrains one variant, ~1 min)")
def test_the_script_still_makes_the_committed_model():
    _, meta = pt.load_pretrained("main-s0")
    model, ls = pt.train_variant("main-s0")
    np.testing.assert_allclose(ls[-10:], meta["losses"][-10:], rtol=1e-2)


# --- stage 2: the committed tuning curves and the tuned, fine-tuned models -------------------------------

def _finals():
    return [(r, s) for r in pt.REGIMES for s in pt.FT["seeds"]] + [("ceiling", 0)]


def test_committed_finetuned_files_are_small_load_and_follow_the_tuning():
    curves = pt.load_tuning()
    total = 0
    for regime, s in _finals():
        path = pt.WEIGHTS / f"preworld-ft-{regime}-s{s}.pt"
        assert path.is_file(), f"missing {path}: run `{pt.SCRIPT} finetuned`"
        assert path.stat().st_size <= 2_000_000
        total += path.stat().st_size
        _, meta = pt.load_finetuned(regime, s)
        if regime != "ceiling":
            assert (meta["lr"], meta["steps"]) == pt.chosen(regime, curves) and len(meta["losses"]) == meta["steps"]
        else:       # its own choice: the best validated step of its run
            assert str(meta["steps"]) == max(meta["scores"], key=meta["scores"].get)
    assert total + pt.TUNING.stat().st_size < 5_000_000      # 13 finals (6 seeds x 2 regimes + ceiling) and the curves
    assert "seeds" not in json.loads(pt.TUNING.read_text())["ft"]      # the tuning records no evaluation seed
    folder = sum(f.stat().st_size for f in pt.WEIGHTS.iterdir())
    assert folder < 13_000_000, f"weights/ holds {folder / 1e6:.1f} MB: each added seed costs ~0.9 MB"
    for regime in pt.REGIMES:      # every learning rate was run, validated on grid points only
        assert set(curves[regime]) == {str(lr) for lr in pt.FT["lrs"]}
        for c in curves[regime].values():
            assert set(c["scores"]) <= {str(s) for s in pt.FT["evals"]}
            assert all(abs(0.5 * (c["now"][k] + c["future"][k]) - v) < 1e-9 for k, v in c["scores"].items())
            run = max(int(k) for k in c["scores"])          # steps the run made (patience may stop it early)
            assert len(c["losses"]) == min(pt.LOSS_HEAD, run) and len(c["loss_means"]) == -(-run // 50)


def test_added_seeds_change_no_freshness_check_but_other_fields_do():
    """Evaluation seeds can be added without remaking the others: the checks ignore ``seeds`` only."""
    assert pt._grid({**pt.FT, "seeds": (0, 1)}) == pt._grid(pt.FT)
    assert pt._grid({**pt.FT, "lrs": (1e-3,)}) != pt._grid(pt.FT)
    assert pt._grid({**pt.FT, "occ_loss": "enet"}) != pt._grid(pt.FT)
    m0 = pt.load_finetuned("PreWorld", 0)[1]
    m5 = pt.load_finetuned("PreWorld", pt.FT["seeds"][-1])[1]
    assert pt._grid(m0["ft"]) == pt._grid(m5["ft"]) == pt._grid(pt.FT)


def test_committed_runs_record_cpu_seconds_and_the_training_code():
    code = pt.code_sha()
    for regime, s in (("3D-only", 0), ("PreWorld", pt.FT["seeds"][-1])):
        m = pt.load_finetuned(regime, s)[1]
        assert m["code"] == code and m["cpu_seconds"] > 0
    j = json.loads(pt.TUNING.read_text())
    assert j["code"] == code and all(c["cpu_seconds"] > 0 for r in j["curves"].values() for c in r.values())


def test_chosen_is_the_best_validated_grid_point():
    curves = {"3D-only": {"0.003": {"scores": {"200": 30.0, "400": 35.0}},
                          "0.01": {"scores": {"200": 33.0, "400": 34.0, "800": 34.5}}}}
    assert pt.chosen("3D-only", curves) == (0.003, 400)


def test_first_finetuning_steps_reproduce_the_recorded_losses():
    curves = pt.load_tuning()
    data = pt._data(pt.VARIANTS["main-s0"])
    for regime, s in (("3D-only", 0), ("PreWorld", 0), ("3D-only", pt.FT["seeds"][-1]), ("PreWorld", pt.FT["seeds"][-1])):
        _, meta = pt.load_finetuned(regime, s)
        _, ls = pt.train_final(regime, s, meta["lr"], meta["steps"], data=data, stop_after=3)
        np.testing.assert_allclose(ls, meta["losses"][:3], rtol=2e-3)
    lr = pt.FT["lrs"][0]
    c = pt.tune("PreWorld", lr, stop_after=3)
    np.testing.assert_allclose(c["losses"], curves["PreWorld"][str(lr)]["losses"][:3], rtol=2e-3)
    _, meta = pt.load_finetuned("ceiling", 0)
    _, _, ls = pt.train_ceiling(meta["lr"], stop_after=3)
    np.testing.assert_allclose(ls, meta["losses"][:3], rtol=2e-3)


def test_stale_finetuned_model_or_tuning_is_refused_naming_the_script(tmp_path):
    with pytest.raises(RuntimeError, match="occupancy.pretrained finetuned"):
        pt.load_tuning(ft={**pt.FT, "evals": (1,)})
    with pytest.raises(RuntimeError, match="occupancy.pretrained finetuned"):
        pt.load_finetuned("3D-only", 0, ft={**pt.FT, "batch": 1})
    with pytest.raises(FileNotFoundError, match="occupancy.pretrained finetuned"):
        pt.load_finetuned("3D-only", 0, path=tmp_path / "none.pt")


def test_make_finetuned_leaves_no_global_state(monkeypatch):
    def body(*a):
        assert torch.get_num_threads() == pt.FT["threads"]
        raise KeyboardInterrupt
    monkeypatch.setattr(pt, "_make_finetuned", body)
    torch.set_num_threads(3)
    with pytest.raises(KeyboardInterrupt):
        pt.make_finetuned()
    assert torch.get_num_threads() == 3
    x = torch.tensor([1e-39])          # a denormal survives: flushing is off again
    assert float(x * 1.0) > 0


def test_finetuned_model_from_another_stage1_model_is_refused(tmp_path):
    ckpt = torch.load(pt.WEIGHTS / "preworld-ft-PreWorld-s0.pt", map_location="cpu", weights_only=True)
    ckpt["meta"]["start"] = "0" * 64
    torch.save(ckpt, tmp_path / "stale.pt")
    with pytest.raises(RuntimeError, match="another stage-1 model"):
        pt.load_finetuned("PreWorld", 0, path=tmp_path / "stale.pt")


# --- the widened learning-rate grid and the stage-1 plateau probe -------------------------------------------

@pytest.mark.skipif(not pt.TUNING_EXT.is_file(), reason="no widened grid committed (no choice at an edge)")
def test_widened_grid_loads_and_its_rates_are_new():
    ext = pt.load_tuning_ext()
    assert set(ext) <= set(pt.REGIMES) and ext
    for regime, c in ext.items():
        assert {float(lr) for lr in c} <= set(pt.EXT_LRS) and not {float(lr) for lr in c} & set(pt.FT["lrs"])
        for run in c.values():
            assert {int(st) for st in run["scores"]} <= set(pt.FT["evals"])
    assert pt.TUNING_EXT.stat().st_size < 200_000


@pytest.mark.skipif(not pt.TUNING_EXT.is_file(), reason="no widened grid committed (no choice at an edge)")
def test_widened_grid_first_steps_reproduce():
    ext = pt.load_tuning_ext()
    regime = sorted(ext)[0]
    lr = sorted(ext[regime])[0]
    out = pt.tune(regime, float(lr), stop_after=3)
    np.testing.assert_allclose(out["losses"], ext[regime][lr]["losses"][:3], rtol=2e-3)


def test_plateau_probe_loads_continues_the_tuning_variant_and_is_refused_when_stale():
    j = pt.load_plateau()
    rec = pt.load_pretrained("tune")[1]["losses"]
    np.testing.assert_allclose(j["losses"][:50], rec[:50], rtol=1e-6)
    assert "0" in j["val"] and pt.PLATEAU_FILE.stat().st_size < 200_000
    with pytest.raises(RuntimeError, match="occupancy.pretrained"):
        pt.load_plateau(probe={**pt.PLATEAU, "steps": 1})


def test_pretrain_callback_changes_nothing():
    from iclr25.occupancy.train import Recipe, build_data, pretrain
    from iclr25.occupancy.model import WorldModel
    from iclr25.occupancy.world import make_rig
    rig = make_rig()
    d = build_data(4, 7, rig)
    logs, calls = [], []
    for cb in (None, (lambda step, m: calls.append(step), 1)):
        torch.manual_seed(0)
        log = []
        pretrain(WorldModel(rig), d, torch.arange(4), Recipe(steps=2, batch=2, rays=8), rig, 0, torch.device("cpu"),
                 log, callback=cb)
        logs.append(log)
    assert logs[0] == logs[1] and calls == [1, 2]
