"""The committed stage-1 world models of the PreWorld chapter (``iclr25/occupancy/weights/``): small,
loadable, refused (naming the script) when missing or stale, and still what
``python -m iclr25.occupancy.pretrained`` makes (first steps of one variant; the whole run of one
variant with ICLR25_SLOW=1)."""

import os

import numpy as np
import pytest
import torch

from iclr25.occupancy import pretrained as pt

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_committed_files_are_small_and_load():
    for name in pt.VARIANTS:
        path = pt.WEIGHTS / f"preworld-{name}.pt"
        assert path.is_file(), f"missing {path}: run `{pt.SCRIPT}`"
        assert path.stat().st_size <= 2_000_000
        _, meta = pt.load_pretrained(name)
        ls = np.array(meta["losses"])
        assert len(ls) == pt.RECIPE["steps"] and ls[-50:].mean() < 0.5 * ls[:50].mean()


def test_first_steps_reproduce_the_recorded_losses():
    for name in ("main-s0", "noaux-s1"):
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
