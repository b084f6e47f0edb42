"""The committed face models of the InterLCM chapter (``iclr25/diffusion/weights/faces-*.pt``): small,
loaded without training, refused (naming the script) when missing or stale, and still what
``python -m iclr25.diffusion.faces_pretrained`` makes (first steps of every stage; the whole run with
ICLR25_SLOW=1)."""

import os

import numpy as np
import pytest
import torch

from iclr25.diffusion import faces_pretrained as fp

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def models():
    return fp.load_face_models()


def test_committed_files_are_small_and_load_frozen(models):
    for name in ("teacher", "lcm") + fp.KINDS + fp.LATER_KINDS:
        path = fp.WEIGHTS / fp.FILES[name]
        assert path.is_file(), f"missing {path}: run `{fp.SCRIPT}`"
        assert path.stat().st_size <= 2_000_000
    for name in ("teacher", "lcm") + fp.KINDS + fp.LATER_KINDS:
        assert not models[name].training and not any(p.requires_grad for p in models[name].parameters())
    t = np.array(models["meta"]["teacher"]["losses"])
    assert len(t) == fp.RECIPE["teacher"]["steps"] and t[-50:].mean() < 0.3 * t[:50].mean()
    for kind in fp.KINDS + fp.LATER_KINDS:
        assert len(models["meta"][kind]["losses"]) == fp.restorer_total_steps(kind)


def test_first_steps_of_every_stage_reproduce_the_recorded_losses(models):
    _, lt = fp.fit_teacher(stop_after=3)
    np.testing.assert_allclose(lt, models["meta"]["teacher"]["losses"][:3], rtol=2e-3)
    _, ll = fp.fit_lcm(models["teacher"], stop_after=2)
    np.testing.assert_allclose(ll, models["meta"]["lcm"]["losses"][:2], rtol=2e-3)
    for kind in fp.KINDS + fp.LATER_KINDS:
        _, lr = fp.fit_restorer(kind, models["teacher"], models["lcm"], stop_after=1)
        np.testing.assert_allclose(lr, models["meta"][kind]["losses"][:1], rtol=2e-3)


def test_missing_or_stale_checkpoint_is_refused_naming_the_script(tmp_path, monkeypatch):
    stale = {**fp.RECIPE, "teacher": {**fp.RECIPE["teacher"], "steps": 1}}
    with pytest.raises(RuntimeError, match="faces_pretrained"):
        fp.load_face_models(stale, ("teacher",))
    monkeypatch.setattr(fp, "WEIGHTS", tmp_path)
    with pytest.raises(FileNotFoundError, match="faces_pretrained"):
        fp.load_face_models(which=("teacher",))


@pytest.mark.skipif(os.environ.get("ICLR25_SLOW") != "1", reason="set ICLR25_SLOW=1 (retrains, about half an hour on one core)")
def test_the_script_still_makes_the_committed_models(tmp_path, monkeypatch, models):
    monkeypatch.setattr(fp, "WEIGHTS", tmp_path)
    fp.make_checkpoints()
    for name in ("teacher", "lcm") + fp.KINDS + fp.LATER_KINDS:
        made = torch.load(tmp_path / fp.FILES[name], weights_only=True)["meta"]["losses"]
        np.testing.assert_allclose(made[-10:], models["meta"][name]["losses"][-10:], rtol=1e-2)


def test_committed_restorers_log_their_validation_curve(models):
    r = fp.RECIPE["restorer"]
    for kind in fp.KINDS + fp.LATER_KINDS:
        curve = np.array(models["meta"][kind]["curve"])
        budget = fp.budget_of(kind)      # both cosine cycles, logged on one grid of InterLCM-equivalent steps
        assert budget == r["steps"] + fp.more_for(kind)
        assert list(curve[:, 0]) == list(range(0, budget, r["eval_every"])) + [budget]
        cases = np.array(models["meta"][kind]["curve_cases"])      # per-case gains, 2 n_val cases per point
        assert cases.shape == (len(curve), 2 * r["n_val"])
        np.testing.assert_allclose(cases.mean(1), curve[:, 1], atol=1e-3)
    # the last point is the committed model's own validation PSNR gain (the curve is of the saved run)
    gain = fp.validation_psnr("regression", models["regression"], models["teacher"], models["lcm"])
    assert abs(gain - models["meta"]["regression"]["curve"][-1][1]) < 1e-3


def test_late_mean_by_closed_forms():
    steps = np.arange(0, 801, 50)
    assert fp.late_mean(np.c_[steps, np.full(len(steps), -3.0)]) == -3.0          # a flat curve
    # a line: the last-quarter window {600..800} has mean 700 a; the window {200..400} has mean 300 a
    np.testing.assert_allclose(fp.late_mean(np.c_[steps, steps]), 700.0)
    np.testing.assert_allclose(fp.late_mean(np.c_[steps, 0.01 * steps], 0.25, 0.5), 3.0)


@pytest.mark.skipif(not (fp.WEIGHTS / fp.GRID_JSON).is_file(), reason="no learning-rate grid committed")
def test_diffusion_lr_is_the_grid_choice_and_only_its_file_depends_on_it(models):
    grid = fp.grid_log()
    assert set(fp.M4_GRID) <= set(grid), "every rate of the grid has a logged run"
    best = max(grid, key=lambda lr: grid[lr]["late_mean"])
    assert fp.lr_for("diffusion") == best
    for lr, g in grid.items():
        assert abs(g["late_mean"] - fp.late_mean(g["curve"])) < 1e-12
    # the committed diffusion restorer is the grid's run at that rate (same validation curve)
    np.testing.assert_allclose(np.array(models["meta"]["diffusion"]["curve"]), np.array(grid[best]["curve"]))
    # another diffusion rate makes its file stale, and no other restorer's
    other = fp.with_lr("diffusion", 1.2345e-4)
    with pytest.raises(RuntimeError, match="faces_pretrained"):
        fp.load_face_models(other, ("diffusion",))
    fp.load_face_models(other, ("interlcm", "regression"))


def test_diffusion_restorer_is_conditioned_on_the_precleaned_image(models):
    hq, lq = fp.validation_pairs(16, 4)
    clean = fp.precleaned(lq)
    from iclr25.diffusion.restore import regress
    assert torch.equal(clean, regress(models["regression"], lq))
    # the regression pre-cleaner moves the input towards the clean faces (DiffBIR's first stage)
    from iclr25.diffusion.restore import psnr
    assert psnr(clean, hq).mean() > psnr(lq, hq).mean()


def test_diffusion_restorer_trains_at_its_own_rate_and_reproduces_its_first_steps(models):
    r = fp.RECIPE["restorer"]
    _, lr = fp.fit_restorer("diffusion", models["teacher"], models["lcm"], stop_after=4)
    np.testing.assert_allclose(lr, models["meta"]["diffusion"]["losses"][:4], rtol=2e-3)
    assert fp.stage_recipe("diffusion")["restorer"]["lr"] == fp.lr_for("diffusion")
    assert fp.stage_recipe("interlcm")["restorer"]["lr"] == r["lr"] and "lr_of" not in fp.stage_recipe("interlcm")["restorer"]


def test_second_cycle_resumed_from_the_first_is_the_run_without_a_break(models):
    """A restorer continued by ``restorer.more_of`` from a saved first cycle equals the uninterrupted run
    (losses, curve and weights), and only its own stage recipe records the second cycle."""
    r = fp.RECIPE["restorer"]
    tiny = {**fp.RECIPE, "restorer": {**r, "steps": 4, "warmup": 2, "eval_every": 2, "n_val": 2,
                                      "more_of": {"regression": 2}}}
    assert "more" in fp.stage_recipe("regression", tiny)["restorer"]
    assert "more" not in fp.stage_recipe("diffusion", tiny)["restorer"]
    assert "more" not in fp.stage_recipe("regression", fp.base_recipe("regression", tiny))["restorer"]
    assert fp.restorer_total_steps("regression", tiny) == 8 + 4 and fp.budget_of("regression", tiny) == 6
    whole_curve, first_curve, resumed_curve = [], [], []
    whole, lw = fp.fit_restorer("regression", models["teacher"], None, tiny, curve=whole_curve)
    base = fp.base_recipe("regression", tiny)
    first, lf = fp.fit_restorer("regression", models["teacher"], None, base, curve=first_curve)
    ck = {"state_dict": first.state_dict(), "meta": {"losses": lf, "curve": [c[:2] for c in first_curve],
                                                      "curve_cases": [c[2] for c in first_curve]}}
    resumed, lr = fp.fit_restorer("regression", models["teacher"], None, tiny, curve=resumed_curve, first=ck)
    assert len(lw) == 12 and lr == lw and lf == lw[:8]
    assert [c[0] for c in whole_curve] == [0, 2, 4, 6] and [c[0] for c in resumed_curve] == [0, 2, 4, 6]
    np.testing.assert_allclose([c[1] for c in resumed_curve], [c[1] for c in whole_curve], atol=1e-6)
    for (k, a), b in zip(whole.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), k
    assert not torch.equal(whole.state_dict()[next(iter(whole.state_dict()))], first.state_dict()[next(iter(first.state_dict()))])
