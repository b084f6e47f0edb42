"""The committed stage-1 (2D-rendering) pre-trained world models of the PreWorld chapter
(``weights/preworld-*.pt``).

>>> model, meta = load_pretrained("main-s0")      # WorldModel after stage 1, and its recipe and losses

Made by ``python -m iclr25.occupancy.pretrained`` (deterministic on one CPU thread): for each
variant of :data:`VARIANTS`, a :class:`~iclr25.occupancy.model.WorldModel` initialised with the
variant's seed and pre-trained with :func:`~iclr25.occupancy.train.pretrain` on the 2D labels of
the first ``pool`` sequences of ``build_data(RECIPE["pool"], RECIPE["data_seed"])`` (the tuning
variant on its own data). Pre-training does not depend on the 3D-label fraction, so these are
shared by every fine-tuning. Chapters never retrain them silently: a missing file, or one made
with another recipe, raises an error naming the script.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from .model import WorldModel
from .train import Recipe, build_data, pretrain
from .world import make_rig

SCRIPT = "python -m iclr25.occupancy.pretrained"
WEIGHTS = Path(__file__).resolve().parent / "weights"
RECIPE = dict(pool=160, data_seed=1, tune_data_seed=100, steps=800, batch=8, rays=100, lr=3e-3)
"""Stage-1 recipe shared by all variants: the pre-training pool (sequences and data seed, and the
tuning run's data seed), steps, batch, labelled rays per sample and frame, learning rate."""
VARIANTS = {**{f"main-s{s}": dict(seed=s, data="main", pool=160, aux=True) for s in range(5)},
            "tune": dict(seed=100, data="tune", pool=160, aux=True),
            **{f"noaux-s{s}": dict(seed=s, data="main", pool=160, aux=False) for s in range(3)},
            **{f"pool16-s{s}": dict(seed=s, data="main", pool=16, aux=True) for s in range(3)}}
"""Every committed variant: initial-weight / batch seed, data set, number of pre-training sequences
(the first ``pool`` of the data), and whether the aux frames' rays are used (temporal supervision)."""


def _data(variant: dict, recipe: dict = RECIPE) -> dict:
    seed = recipe["data_seed"] if variant["data"] == "main" else recipe["tune_data_seed"]
    return build_data(recipe["pool"], seed, make_rig())


def train_variant(name: str, recipe: dict = RECIPE, stop_after: int | None = None,
                  data: dict | None = None) -> tuple[WorldModel, list[float]]:
    """Pre-train variant ``name`` from its initial weights (``stop_after`` ends early on the same
    schedule); returns the model and the loss of every step."""
    v = VARIANTS[name]
    torch.manual_seed(v["seed"])
    rig = make_rig()
    model = WorldModel(rig)
    d = _data(v, recipe) if data is None else data
    rec = Recipe(lr=recipe["lr"], steps=recipe["steps"] if stop_after is None else stop_after,
                 batch=recipe["batch"], rays=recipe["rays"], aux=v["aux"])
    log: list[float] = []
    pretrain(model, d, torch.arange(v["pool"]), rec, rig, v["seed"], torch.device("cpu"), log)
    return model, log


def make_checkpoints(recipe: dict = RECIPE, names: tuple | None = None) -> None:
    """Train every variant (or ``names``) on one CPU thread and save ``{"state_dict", "meta"}``
    to ``WEIGHTS / f"preworld-{name}.pt"``."""
    torch.set_num_threads(1)
    data = {k: build_data(recipe["pool"], recipe[s], make_rig())
            for k, s in (("main", "data_seed"), ("tune", "tune_data_seed"))}
    WEIGHTS.mkdir(parents=True, exist_ok=True)
    for name in names or tuple(VARIANTS):
        start = time.time()
        model, losses = train_variant(name, recipe, data=data[VARIANTS[name]["data"]])
        ckpt = {"state_dict": model.state_dict(),
                "meta": {"recipe": dict(recipe), "variant": dict(VARIANTS[name]), "losses": losses,
                         "seconds": time.time() - start}}
        torch.save(ckpt, WEIGHTS / f"preworld-{name}.pt")
        print(f"{name}: {time.time() - start:.0f} s, loss first 50 {sum(losses[:50]) / 50:.3f}, "
              f"last 50 {sum(losses[-50:]) / 50:.3f}", flush=True)


def load_pretrained(name: str, device: torch.device | str = "cpu", recipe: dict = RECIPE,
                    path: Path | None = None) -> tuple[WorldModel, dict]:
    """The committed stage-1 model ``name`` (train mode, ready to fine-tune) on ``device`` and its
    metadata. Raises ``FileNotFoundError`` (no file) or ``RuntimeError`` (made with another recipe
    or variant), both naming ``python -m iclr25.occupancy.pretrained``."""
    path = Path(path) if path is not None else WEIGHTS / f"preworld-{name}.pt"
    if not path.is_file():
        raise FileNotFoundError(f"no committed pre-trained world model at {path}: make it with `{SCRIPT}` "
                                f"(chapters never retrain it silently)")
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    if ckpt["meta"]["recipe"] != dict(recipe) or ckpt["meta"]["variant"] != VARIANTS[name]:
        raise RuntimeError(f"{path} was made with {ckpt['meta']['recipe']} / {ckpt['meta']['variant']}, the "
                           f"package now says {recipe} / {VARIANTS[name]}: regenerate it with `{SCRIPT}`")
    model = WorldModel(make_rig())
    model.load_state_dict(ckpt["state_dict"])
    return model.to(device), ckpt["meta"]


if __name__ == "__main__":
    import sys
    make_checkpoints(names=tuple(sys.argv[1:]) or None)
