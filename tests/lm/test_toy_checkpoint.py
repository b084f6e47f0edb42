"""The committed toy LM (``iclr25/lm/weights/toy-lm.pt``): loaded by ``pretrained_toy_lm()`` with its
defaults, small, and still what ``python -m iclr25.lm.train`` makes.

Fast: the recipe is the default one, the first training steps reproduce the recorded losses. With
``ICLR25_SLOW=1`` the whole run is repeated and its final loss compared with the committed one.
"""

import os

import numpy as np
import pytest
import torch

from iclr25.lm import train as train_module
from iclr25.lm.language import toy_vocab
from iclr25.lm.model import TinyLMConfig
from iclr25.lm.train import TOY_SCRIPT, pretrained_toy_lm, toy_checkpoint_path, train_toy_lm


def _meta() -> dict:
    return torch.load(toy_checkpoint_path(), map_location="cpu", weights_only=True)["meta"]


def _default_cfg() -> TinyLMConfig:
    return TinyLMConfig(vocab_size=len(toy_vocab()), d_model=48, d_ff=192)


def test_defaults_load_the_committed_weights_without_training():
    path = toy_checkpoint_path()
    assert path.is_file(), f"missing {path}: run `{TOY_SCRIPT}`"
    assert path.stat().st_size <= 2_000_000
    model, info = pretrained_toy_lm()
    assert info["source"] == "committed" and info["cached"] and not model.training
    assert len(info["losses"]) == 600 and np.mean(info["losses"][-50:]) < np.mean(info["losses"][:50])


def test_first_training_steps_reproduce_the_recorded_losses():
    rec = _meta()["recipe"]
    _, losses = train_toy_lm(_default_cfg(), steps=rec["steps"], batch_size=rec["batch_size"], lr=rec["lr"],
                             answer_weight=rec["answer_weight"], seed=rec["seed"], stop_after=10)
    np.testing.assert_allclose(losses, _meta()["losses"][:10], rtol=2e-3)


def test_another_vocabulary_is_refused_naming_the_script(tmp_path, monkeypatch):
    ckpt = torch.load(toy_checkpoint_path(), map_location="cpu", weights_only=True)
    ckpt["meta"]["vocab"] = "0" * 16
    stale = tmp_path / "toy-lm.pt"
    torch.save(ckpt, stale)
    monkeypatch.setattr(train_module, "toy_checkpoint_path", lambda: stale)
    with pytest.raises(RuntimeError, match="iclr25.lm.train"):
        pretrained_toy_lm()


@pytest.mark.skipif(os.environ.get("ICLR25_SLOW") != "1", reason="set ICLR25_SLOW=1 (retrains, ~30 s)")
def test_the_script_still_makes_the_committed_model():
    made = train_module.make_toy_checkpoint()["meta"]["losses"]
    committed = _meta()["losses"]
    print(f"final loss: new {np.mean(made[-50:]):.4f}, committed {np.mean(committed[-50:]):.4f}")
    assert abs(np.mean(made[-50:]) - np.mean(committed[-50:])) < 0.05
