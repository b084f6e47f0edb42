"""Load the committed world language models (``iclr25/lm/weights/world-<name>.pt``).

>>> model, world = load_world_lm("base")          # TinyLM in eval mode + the world it read

The files are made by ``python -m iclr25.lm.pretrain_world`` (deterministic; see that module).
A chapter never retrains silently: a missing file, or one trained on a different world than
the current generator makes, raises an error naming that script.
"""

from __future__ import annotations

from pathlib import Path

import torch

from iclr25.lm.model import TinyLM, TinyLMConfig
from iclr25.lm.world import World, build_world

WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"
SCRIPT = "python -m iclr25.lm.pretrain_world"


def checkpoint_file(name: str) -> str:
    """File name of checkpoint ``name``: ``world-<name>.pt``."""
    return f"world-{name}.pt"


def checkpoint_path(name: str = "base") -> Path:
    """Where checkpoint ``name`` lives in the package."""
    return WEIGHTS_DIR / checkpoint_file(name)


def read_checkpoint(name: str = "base", path: Path | None = None) -> dict:
    """The raw checkpoint ``{"state_dict", "meta"}`` (see
    :func:`iclr25.lm.pretrain_world.make_checkpoint`); ``FileNotFoundError`` naming the script if
    the file is missing."""
    path = Path(path) if path is not None else checkpoint_path(name)
    if not path.is_file():
        raise FileNotFoundError(f"no world checkpoint {path}: make it with `{SCRIPT} --name {name}` "
                                f"(chapters never retrain it silently)")
    return torch.load(path, map_location="cpu", weights_only=True)


def checkpoint_meta(name: str = "base") -> dict:
    """The metadata of checkpoint ``name``: recipe, config, world fingerprint, ``metrics`` (the
    :func:`iclr25.lm.probes.world_report` of the saved model), training ``seconds`` ..."""
    return read_checkpoint(name)["meta"]


def load_world_lm(name: str = "base", *, device: torch.device | str = "cpu",
                  path: Path | None = None) -> tuple[TinyLM, World]:
    """A fresh copy of the pre-trained world model ``name`` (``"base"``, ``"small"``, ``"tiny"``)
    in eval mode on ``device``, and the :class:`~iclr25.lm.world.World` it was trained on.

    Raises ``FileNotFoundError`` (missing file) or ``RuntimeError`` (the world generator changed
    since the file was made), both naming ``python -m iclr25.lm.pretrain_world``.
    """
    ckpt = read_checkpoint(name, path)
    meta = ckpt["meta"]
    world = build_world(meta["world_seed"])
    if world.fingerprint() != meta["world_fingerprint"]:
        raise RuntimeError(f"checkpoint {name!r} was trained on world {meta['world_fingerprint']} "
                           f"({meta['world_version']}), but the generator now makes "
                           f"{world.fingerprint()}: regenerate it with `{SCRIPT} --name {name}`")
    model = TinyLM(TinyLMConfig(**meta["config"]))
    model.load_state_dict(ckpt["state_dict"])
    return model.to(device).eval(), world
