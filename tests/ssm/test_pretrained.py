"""The committed byte-level Mamba: small, loads, and its script still reproduces it."""

from dataclasses import asdict

import pytest
import torch

from iclr25.lm.text import mean_nll
from iclr25.ssm import pretrained
from iclr25.ssm.pretrained import CHECKPOINT, RECIPE, make_text_mamba, text_mamba, text_splits


def test_checkpoint_is_small_loads_and_matches_its_record() -> None:
    assert CHECKPOINT.stat().st_size <= 2_000_000
    model, info = text_mamba()
    assert info["cfg"] == asdict(RECIPE["cfg"])
    assert info["recipe"] == {k: v for k, v in RECIPE.items() if k != "cfg"}
    assert len(info["losses"]) == RECIPE["steps"]
    _, val = text_splits()
    # a 2 kB slice of the held-out text (the whole of it takes too long for a unit test): close to the
    # recorded held-out loss (1.25 nats/byte; the untrained model has 5.5), far below the first steps'
    nll = mean_nll(model, val[: 16 * RECIPE["block"] + 1], RECIPE["block"])
    assert abs(nll - info["val_nll"]) < 0.3
    assert nll < 0.3 * float(info["losses"][:10].mean())


def test_script_reproduces_the_first_training_steps() -> None:
    # training amplifies float differences between CPUs, so the reproduction test compares the
    # recorded losses of the first steps (same data, seed, schedule), where they agree to ~1e-5
    steps = 12
    fresh = make_text_mamba(stop_after=steps)
    _, info = text_mamba()
    assert torch.allclose(fresh["losses"], info["losses"][:steps], atol=2e-3)


def test_missing_checkpoint_names_the_script(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setattr(pretrained, "CHECKPOINT", tmp_path / "absent.pt")
    with pytest.raises(FileNotFoundError, match="python -m iclr25.ssm.pretrained"):
        text_mamba()
