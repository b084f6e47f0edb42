"""The committed byte-level LM of the Python docs: small, loads, its recorded metrics recompute, its
recipe still starts from the same initial loss; with ICLR25_SLOW_TESTS=1 the script re-makes it
(validation perplexity within 2 %, a tolerance another CPU meets)."""

import os

import pytest
import torch

from iclr25.lm import pydoc_lm
from iclr25.lm.model import TinyLM
from iclr25.lm.text import random_blocks
from iclr25.lm.train import next_token_loss


@pytest.fixture(scope="module")
def loaded():
    return pydoc_lm.load_pydoc_lm()


def test_checkpoint_is_small_and_loads_in_eval_mode(loaded):
    model, meta = loaded
    assert pydoc_lm.WEIGHTS.stat().st_size <= 2_000_000
    assert not model.training and meta["config"] == pydoc_lm.PYDOC_LM_CONFIG.__dict__
    assert meta["recipe"] == pydoc_lm.RECIPE


def test_recorded_validation_perplexity_recomputes_and_beats_unigram(loaded):
    model, meta = loaded
    ppl = pydoc_lm.validation_perplexity(model)
    assert abs(ppl / meta["val_perplexity"] - 1) < 1e-4
    train, _ = pydoc_lm.pydoc_splits()
    counts = torch.bincount(train, minlength=256).double() + 1
    p = counts / counts.sum()
    unigram_ppl = float(torch.exp(-(p * p.log()).sum()))
    assert ppl < 0.5 * unigram_ppl


def test_the_recipe_still_starts_from_the_recorded_first_loss(loaded):
    _, meta = loaded
    r = pydoc_lm.RECIPE
    torch.manual_seed(r["seed"])
    model = TinyLM(pydoc_lm.PYDOC_LM_CONFIG)
    train, _ = pydoc_lm.pydoc_splits()
    x, _ = random_blocks(train, r["batch_size"], r["block"], torch.Generator().manual_seed(r["seed"]))
    with torch.no_grad():
        loss = float(next_token_loss(model(x), x, torch.ones(r["batch_size"], r["block"])))
    assert loss == pytest.approx(meta["first_losses"][0], rel=2e-5)  # float32 mean over the batch


def test_missing_file_names_the_script(tmp_path):
    with pytest.raises(FileNotFoundError, match="python -m iclr25.lm.pydoc_lm"):
        pydoc_lm.load_pydoc_lm(path=tmp_path / "nope.pt")


@pytest.mark.skipif(not os.environ.get("ICLR25_SLOW_TESTS"), reason="retrains for ~1 min; set ICLR25_SLOW_TESTS=1")
def test_the_script_reproduces_the_checkpoint(tmp_path, loaded):
    _, meta = loaded
    new = pydoc_lm.make_checkpoint(tmp_path / "again.pt")
    assert new["first_losses"][:5] == pytest.approx(meta["first_losses"][:5], rel=1e-4)
    assert abs(new["val_perplexity"] / meta["val_perplexity"] - 1) < 0.02
