"""The committed tiny diffusion model of procedural semantic scenes (``weights/scenes-unet.pt``).

>>> unet, meta = load_scene_unet()          # UNet2DModel in eval mode, and its recipe and losses

Made by ``python -m iclr25.diffusion.pretrained`` (deterministic on one CPU thread): a
:func:`~iclr25.diffusion.unet.make_tiny_unet` trained with :func:`~iclr25.diffusion.train.train_ddpm`
on scenes drawn on the fly by :func:`~iclr25.diffusion.scenes.random_scenes`, stored in float16
(under 2 MB). Chapters never retrain it silently: a missing file, or one made with another recipe,
raises an error naming the script.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch
from diffusers import UNet2DModel

from iclr25.diffusion.scenes import random_scenes
from iclr25.diffusion.train import train_ddpm
from iclr25.diffusion.unet import make_tiny_unet, train_schedule

SCRIPT = "python -m iclr25.diffusion.pretrained"
WEIGHTS = Path(__file__).resolve().parent / "weights" / "scenes-unet.pt"
RECIPE = dict(res=24, channels=(16, 32, 48), attention=(False, True, True), init_seed=0, steps=700,
              batch_size=32, lr=2e-3, warmup=50, seed=0)
"""The recipe of the committed model: U-Net shape, initial-weight seed, training steps, batch, learning
rate, warm-up and data/noise seed."""
N_MODELS = 3
"""Committed checkpoints: model ``k`` is :data:`RECIPE` with initial-weight and data seeds ``k``."""


def model_recipe(k: int) -> dict:
    """The recipe of committed model ``k`` (``0 <= k < N_MODELS``): :data:`RECIPE` with both seeds ``k``."""
    return dict(RECIPE, init_seed=k, seed=k)


def model_path(k: int) -> Path:
    """Where committed model ``k`` lives (model 0 is :data:`WEIGHTS`)."""
    return WEIGHTS if k == 0 else WEIGHTS.with_name(f"scenes-unet-{k}.pt")


def scene_source(res: int):
    """Training images: fresh random scenes ``(n, 3, res, res)`` from the generator each call."""
    return lambda n, g: random_scenes(n, res, g)[0]


def untrained_unet(recipe: dict = RECIPE) -> UNet2DModel:
    """The U-Net of ``recipe`` with its initial (random) weights: the random-feature control."""
    return make_tiny_unet(recipe["res"], channels=recipe["channels"], attention=recipe["attention"],
                          seed=recipe["init_seed"])


def train_scene_unet(recipe: dict = RECIPE, stop_after: int | None = None,
                     progress=None) -> tuple[UNet2DModel, list[float]]:
    """Train the recipe's U-Net from its initial weights (``stop_after`` ends early on the same
    schedule); returns the model (eval mode) and the loss of every step."""
    unet = untrained_unet(recipe)
    losses = train_ddpm(unet, train_schedule(), scene_source(recipe["res"]), steps=recipe["steps"],
                        batch_size=recipe["batch_size"], lr=recipe["lr"], warmup=recipe["warmup"],
                        seed=recipe["seed"], stop_after=stop_after, progress=progress)
    return unet, losses


def make_checkpoint(recipe: dict = RECIPE, path: Path = WEIGHTS) -> dict:
    """Train with ``recipe`` on one CPU thread and save ``{"state_dict" (float16), "meta"}`` to
    ``path``; returns the checkpoint."""
    torch.set_num_threads(1)
    start = time.time()
    unet, losses = train_scene_unet(recipe)
    state = {k: v.half() for k, v in unet.state_dict().items()}
    ckpt = {"state_dict": state, "meta": {"recipe": dict(recipe), "losses": losses,
                                          "seconds": time.time() - start}}
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(ckpt, path)
    return ckpt


def load_scene_unet(device: torch.device | str = "cpu", path: Path = WEIGHTS,
                    recipe: dict = RECIPE) -> tuple[UNet2DModel, dict]:
    """The committed model in float32 and eval mode on ``device``, gradients off, and its metadata.

    Raises ``FileNotFoundError`` (no file) or ``RuntimeError`` (made with another recipe), both naming
    ``python -m iclr25.diffusion.pretrained``.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no committed scene U-Net at {path}: make it with `{SCRIPT}` "
                                f"(chapters never retrain it silently)")
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    made = {k: tuple(v) if isinstance(v, list) else v for k, v in ckpt["meta"]["recipe"].items()}
    if made != dict(recipe):
        raise RuntimeError(f"{path} was made with recipe {made}, the package now says {recipe}: "
                           f"regenerate it with `{SCRIPT}`")
    unet = untrained_unet(recipe)
    unet.load_state_dict({k: v.float() for k, v in ckpt["state_dict"].items()})
    return unet.to(device).eval().requires_grad_(False), ckpt["meta"]


if __name__ == "__main__":
    import sys

    k = int(sys.argv[1]) if len(sys.argv) > 1 else 0        # which committed model (0, 1, 2)
    ck = make_checkpoint(model_recipe(k), model_path(k))
    ls = ck["meta"]["losses"]
    print(f"saved {model_path(k)} ({model_path(k).stat().st_size / 1e6:.2f} MB) in {ck['meta']['seconds']:.0f} s; "
          f"loss first 50 {sum(ls[:50]) / 50:.4f}, last 50 {sum(ls[-50:]) / 50:.4f}")
