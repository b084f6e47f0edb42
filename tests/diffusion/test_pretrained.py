"""The committed scene U-Net (``iclr25/diffusion/weights/scenes-unet.pt``): small, loaded without
training, refused (naming the script) when missing or made with another recipe, and still what
``python -m iclr25.diffusion.pretrained`` makes (first steps fast; the whole run with ICLR25_SLOW=1)."""

import os

import numpy as np
import pytest
import torch

from iclr25.diffusion import pretrained
from iclr25.diffusion.pretrained import (N_MODELS, RECIPE, WEIGHTS, load_scene_unet, model_path, model_recipe,
                                         plateau_gap, train_scene_unet, validation_loss)


def _meta() -> dict:
    return torch.load(WEIGHTS, map_location="cpu", weights_only=True)["meta"]


def test_committed_weights_load_without_training():
    assert WEIGHTS.is_file(), "missing committed weights: run `python -m iclr25.diffusion.pretrained`"
    assert WEIGHTS.stat().st_size <= 2_000_000
    unet, meta = load_scene_unet()
    assert not unet.training and not any(p.requires_grad for p in unet.parameters())
    losses = np.array(meta["losses"])
    assert len(losses) == RECIPE["steps"] and losses[-50:].mean() < 0.5 * losses[:50].mean()


@pytest.mark.parametrize("k", range(1, N_MODELS))
def test_every_committed_model_loads_and_has_its_own_seeds(k):
    path = model_path(k)
    assert path.is_file(), f"missing committed weights: run `python -m iclr25.diffusion.pretrained {k}`"
    assert path.stat().st_size <= 1_100_000
    unet, meta = load_scene_unet(path=path, recipe=model_recipe(k))
    losses = np.array(meta["losses"])
    assert meta["recipe"]["seed"] == k and len(losses) == RECIPE["steps"]
    assert losses[-50:].mean() < 0.5 * losses[:50].mean()
    torch.set_num_threads(1)
    _, first = train_scene_unet(model_recipe(k), stop_after=2)
    np.testing.assert_allclose(first, losses[:2], rtol=2e-3)


@pytest.mark.parametrize("k", range(N_MODELS))
def test_recorded_validation_loss_is_the_committed_models(k):
    unet, meta = load_scene_unet(path=model_path(k), recipe=model_recipe(k))
    steps = [s for s, _ in meta["val"]]
    assert steps[0] == 0 and steps[-1] == RECIPE["steps"] and steps[1] == RECIPE["val_every"]
    # float16 storage changes the loss by far less than 1 %
    assert abs(validation_loss(unet) - meta["val"][-1][1]) < 0.01 * meta["val"][-1][1]
    assert meta["val"][-1][1] < 0.5 * meta["val"][0][1]


def test_plateau_gap_reads_the_log_at_three_quarters():
    assert plateau_gap([(0, 1.0), (50, 0.5), (150, 0.4), (200, 0.38)]) == pytest.approx((0.4 - 0.38) / 0.4)


def test_validation_does_not_change_training():
    torch.set_num_threads(1)
    log = []
    _, with_val = train_scene_unet(dict(RECIPE, val_every=1), stop_after=2, val_log=log)
    _, without = train_scene_unet(RECIPE, stop_after=2)
    assert with_val == without and [s for s, _ in log] == [0, 1, 2]


def test_first_training_steps_reproduce_the_recorded_losses():
    torch.set_num_threads(1)
    _, losses = train_scene_unet(RECIPE, stop_after=3)
    np.testing.assert_allclose(losses, _meta()["losses"][:3], rtol=2e-3)


def test_missing_or_stale_checkpoint_is_refused_naming_the_script(tmp_path):
    with pytest.raises(FileNotFoundError, match="iclr25.diffusion.pretrained"):
        load_scene_unet(path=tmp_path / "none.pt")
    ckpt = torch.load(WEIGHTS, map_location="cpu", weights_only=True)
    ckpt["meta"]["recipe"]["steps"] = 1
    torch.save(ckpt, tmp_path / "stale.pt")
    with pytest.raises(RuntimeError, match="iclr25.diffusion.pretrained"):
        load_scene_unet(path=tmp_path / "stale.pt")


@pytest.mark.skipif(os.environ.get("ICLR25_SLOW") != "1", reason="set ICLR25_SLOW=1 (retrains, minutes)")
def test_the_script_still_makes_the_committed_model(tmp_path):
    made = pretrained.make_checkpoint(path=tmp_path / "again.pt")["meta"]["losses"]
    committed = _meta()["losses"]
    assert abs(np.mean(made[-50:]) - np.mean(committed[-50:])) < 0.01
