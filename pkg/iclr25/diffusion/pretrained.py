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
RECIPE = dict(res=24, channels=(16, 32, 48), attention=(False, True, True), init_seed=0, steps=1400,
              batch_size=32, lr=2e-3, warmup=50, seed=0, val_every=50)
"""The recipe of the committed model: U-Net shape, initial-weight seed, training steps, batch, learning
rate, warm-up, data/noise seed, and how often the validation loss is recorded."""
VAL_SEED, VAL_SIZE = 99_000, 256
"""The validation set: :data:`VAL_SIZE` scenes, noises and stratified timesteps drawn from their own
seed (never a training or evaluation seed), the same for every checkpoint, so that two validation
losses differ only by the weights."""
PLATEAU_FROM = 0.75
"""The plateau check compares the validation loss at the end of training with the one at this fraction
of the steps."""
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


@torch.no_grad()
def validation_loss(unet: UNet2DModel, res: int = RECIPE["res"]) -> float:
    """The DDPM loss of ``unet`` on the fixed validation set (:data:`VAL_SIZE` scenes of seed
    :data:`VAL_SEED`, one noise each, timesteps stratified over ``0 .. T-1``)."""
    g = torch.Generator().manual_seed(VAL_SEED)
    x0 = random_scenes(VAL_SIZE, res, g)[0]
    eps = torch.randn(x0.shape, generator=g)
    sched = train_schedule()
    t = ((torch.arange(VAL_SIZE) + 0.5) * sched.config.num_train_timesteps / VAL_SIZE).long()
    device = next(unet.parameters()).device
    x0, eps, t = x0.to(device), eps.to(device), t.to(device)
    return float(torch.nn.functional.mse_loss(unet(sched.add_noise(x0, eps, t), t).sample, eps))


def train_scene_unet(recipe: dict = RECIPE, stop_after: int | None = None,
                     progress=None, val_log: list | None = None) -> tuple[UNet2DModel, list[float]]:
    """Train the recipe's U-Net from its initial weights (``stop_after`` ends early on the same
    schedule); returns the model (eval mode) and the loss of every step. With ``val_log``, appends
    ``(step, validation loss)`` every ``recipe["val_every"]`` steps and at the end (it draws from its
    own generator, so the training run is the same with or without it)."""
    unet = untrained_unet(recipe)
    every = recipe.get("val_every", 0)

    def steps_with_validation(rng):
        for step in (progress(rng) if progress else rng):
            if val_log is not None and every and step % every == 0:
                val_log.append((step, validation_loss(unet, recipe["res"])))
            yield step

    losses = train_ddpm(unet, train_schedule(), scene_source(recipe["res"]), steps=recipe["steps"],
                        batch_size=recipe["batch_size"], lr=recipe["lr"], warmup=recipe["warmup"],
                        seed=recipe["seed"], stop_after=stop_after, progress=steps_with_validation)
    if val_log is not None:
        val_log.append((len(losses), validation_loss(unet, recipe["res"])))
    return unet, losses


def plateau_gap(val: list) -> float:
    """Relative drop of the validation loss from :data:`PLATEAU_FROM` of training to its end:
    ``(v(from) - v(end)) / v(from)`` from a ``[(step, loss), ...]`` log (positive: still improving)."""
    steps = [s for s, _ in val]
    at = min(steps, key=lambda s: abs(s - PLATEAU_FROM * steps[-1]))
    v_from, v_end = dict(val)[at], val[-1][1]
    return (v_from - v_end) / v_from


def make_checkpoint(recipe: dict = RECIPE, path: Path = WEIGHTS) -> dict:
    """Train with ``recipe`` on one CPU thread and save ``{"state_dict" (float16), "meta"}`` to
    ``path``; returns the checkpoint."""
    torch.set_num_threads(1)
    start, cpu = time.time(), time.process_time()
    val: list = []
    unet, losses = train_scene_unet(recipe, val_log=val)
    state = {k: v.half() for k, v in unet.state_dict().items()}
    ckpt = {"state_dict": state, "meta": {"recipe": dict(recipe), "losses": losses, "val": [list(v) for v in val],
                                          "seconds": time.time() - start, "cpu_seconds": time.process_time() - cpu}}
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

    for k in ([int(a) for a in sys.argv[1:]] or [0]):        # which committed models (0, 1, 2)
        ck = make_checkpoint(model_recipe(k), model_path(k))
        ls, val = ck["meta"]["losses"], ck["meta"]["val"]
        print(f"saved {model_path(k)} ({model_path(k).stat().st_size / 1e6:.2f} MB) in {ck['meta']['seconds']:.0f} s; "
              f"loss first 50 {sum(ls[:50]) / 50:.4f}, last 50 {sum(ls[-50:]) / 50:.4f}; validation "
              + " ".join(f"{s}:{v:.4f}" for s, v in val[::4]) + f"; plateau gap {plateau_gap(val):.1%}", flush=True)
