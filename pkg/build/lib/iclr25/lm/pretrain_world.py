"""Pre-train the world's base language models and commit them: ``python -m iclr25.lm.pretrain_world``.

The deterministic script behind the checkpoints in ``iclr25/lm/weights/`` (loaded with
:func:`iclr25.lm.checkpoints.load_world_lm`). Each named :class:`PretrainRecipe` trains a
:class:`~iclr25.lm.model.TinyLM` from seed 0 on :func:`iclr25.lm.world.world_batch` documents of
``build_world(0)`` with :func:`iclr25.lm.train.train_lm` (AdamW, warmup + cosine), on the CPU and
one thread, then evaluates it with :func:`iclr25.lm.probes.world_report` and saves weights and
metadata (recipe, world fingerprint, the first losses, a hash of the first batches, metrics,
seconds). ``tests/lm/test_checkpoints.py`` checks that the script still reproduces them.

Usage::

    python -m iclr25.lm.pretrain_world                 # every recipe, into iclr25/lm/weights/
    python -m iclr25.lm.pretrain_world --name base     # one of them
    python -m iclr25.lm.pretrain_world --out /tmp/w    # elsewhere (e.g. to compare)
"""

from __future__ import annotations

import argparse
import hashlib
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from iclr25.lm.model import TinyLM, TinyLMConfig
from iclr25.lm.train import train_lm
from iclr25.lm.world import WORLD_VERSION, build_world, pretraining_sentences, world_batch

#: losses recorded from the start of training (what the fast reproduction test re-runs)
N_LOSS_HEAD = 30


@dataclass(frozen=True)
class PretrainRecipe:
    """Model sizes and training arguments of one checkpoint (all of it is recorded)."""

    d_model: int
    n_layers: int
    d_ff: int
    n_heads: int = 4
    max_len: int = 32
    steps: int = 3000
    batch_size: int = 64
    lr: float = 3e-3
    warmup: int = 100
    weight_decay: float = 0.01
    seed: int = 0
    world_seed: int = 0

    def config(self, vocab_size: int) -> TinyLMConfig:
        return TinyLMConfig(vocab_size=vocab_size, d_model=self.d_model, n_layers=self.n_layers,
                            n_heads=self.n_heads, d_ff=self.d_ff, max_len=self.max_len)


#: the committed checkpoints: ``base`` (the model chapters start from) and two weaker models for
#: chapters that need a weak teacher: ``small`` (narrower, same data and schedule: knows the
#: common facts, fewer rare ones) and ``tiny`` (one narrow layer, trained 3x shorter: knows only
#: part of the world)
RECIPES: dict[str, PretrainRecipe] = {
    "base": PretrainRecipe(d_model=96, n_layers=2, d_ff=384, steps=3000),
    "small": PretrainRecipe(d_model=64, n_layers=2, d_ff=256, steps=3000),
    "tiny": PretrainRecipe(d_model=32, n_layers=1, d_ff=128, steps=1000),
}


def batch_stream(recipe: PretrainRecipe):
    """The deterministic batch function ``step -> (ids, weights)`` of a recipe (batches are drawn
    in order from one generator, so call it with steps 0, 1, 2, ...)."""
    world = build_world(recipe.world_seed)
    sentences = pretraining_sentences(world)
    rng = np.random.default_rng([recipe.seed, 4242])
    return lambda step: world_batch(world, rng, recipe.batch_size, max_len=recipe.max_len,
                                    sentences=sentences)


def batches_fingerprint(recipe: PretrainRecipe, n: int = 5) -> str:
    """sha256 (16 hex) of the ids of the first ``n`` training batches: exact on every machine."""
    fn = batch_stream(recipe)
    h = hashlib.sha256()
    for s in range(n):
        ids, _ = fn(s)
        h.update(str(tuple(ids.shape)).encode())
        h.update(ids.numpy().astype(np.int64).tobytes())
    return h.hexdigest()[:16]


def pretrain(recipe: PretrainRecipe, *, stop_after: int | None = None,
             progress: bool = False) -> tuple[TinyLM, list[float]]:
    """Train a recipe's model: seeded init and data, one torch thread while it runs, on the CPU.

    ``stop_after`` runs only the first steps of the full run (same schedule): the fast
    reproduction test. Returns the model (eval mode) and the loss per step.
    """
    world = build_world(recipe.world_seed)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(recipe.seed)
        model = TinyLM(recipe.config(len(world.vocab)))
        steps = recipe.steps if stop_after is None else min(stop_after, recipe.steps)
        losses = train_lm(model, batch_stream(recipe), steps, lr=recipe.lr, warmup=recipe.warmup,
                          weight_decay=recipe.weight_decay, progress=progress,
                          schedule_steps=recipe.steps)
    finally:
        torch.set_num_threads(threads)
    return model.eval(), losses


def make_checkpoint(name: str, *, progress: bool = False) -> dict:
    """Train recipe ``name`` and return the checkpoint: ``{"state_dict", "meta"}`` (weights in
    float32; ``meta`` holds the recipe, config, world seed/fingerprint/version, ``loss_head`` (the
    first :data:`N_LOSS_HEAD` losses), ``batches`` (:func:`batches_fingerprint`), ``final_loss``
    (mean of the last 100), ``metrics`` (:func:`iclr25.lm.probes.world_report`), ``seconds``
    (wall) and ``cpu_seconds`` of training, ``torch`` version and ``n_params``)."""
    from iclr25.lm.probes import world_report

    recipe = RECIPES[name]
    world = build_world(recipe.world_seed)
    t0, c0 = time.time(), time.process_time()
    model, losses = pretrain(recipe, progress=progress)
    seconds, cpu_seconds = time.time() - t0, time.process_time() - c0
    meta = {"name": name, "recipe": asdict(recipe), "config": asdict(recipe.config(len(world.vocab))),
            "world_seed": recipe.world_seed, "world_fingerprint": world.fingerprint(),
            "world_version": WORLD_VERSION, "loss_head": losses[:N_LOSS_HEAD],
            "batches": batches_fingerprint(recipe), "final_loss": float(np.mean(losses[-100:])),
            "metrics": world_report(model, world), "seconds": round(seconds, 1),
            "cpu_seconds": round(cpu_seconds, 1),
            "torch": str(torch.__version__), "n_params": model.n_params()}
    state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    return {"state_dict": state, "meta": meta}


def main(argv: list[str] | None = None) -> None:
    from iclr25.common import atomic_write
    from iclr25.lm.checkpoints import WEIGHTS_DIR, checkpoint_file

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--name", choices=sorted(RECIPES), action="append",
                    help="recipe(s) to train (default: all)")
    ap.add_argument("--out", type=Path, default=WEIGHTS_DIR, help="output folder")
    ap.add_argument("--progress", action="store_true", help="show a progress bar")
    args = ap.parse_args(argv)
    for name in args.name or list(RECIPES):
        ckpt = make_checkpoint(name, progress=args.progress)
        path = args.out / checkpoint_file(name)
        atomic_write(path, lambda tmp: torch.save(ckpt, tmp))
        m = ckpt["meta"]
        print(f"{name}: {m['n_params']:,} parameters, {path.stat().st_size / 1e6:.2f} MB, "
              f"{m['seconds']:.0f} s ({m['cpu_seconds']:.0f} s CPU), final loss {m['final_loss']:.3f} -> {path}")
        print("  " + ", ".join(f"{k} {v:.3f}" for k, v in m["metrics"].items()))


if __name__ == "__main__":
    main()
