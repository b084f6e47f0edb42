"""A small byte-level causal LM of real English (the Python reference documentation), committed as
``iclr25/lm/weights/pydoc-tinylm.pt`` so that chapters need not train it.

>>> model, meta = load_pydoc_lm()          # TinyLM in eval mode; meta["val_perplexity"], ...

Make (or re-make) the file with ``python -m iclr25.lm.pydoc_lm``: training is deterministic (one
thread, seeded initialisation and batches) and takes about a minute on one CPU core. A chapter
never retrains it silently: a missing file raises an error naming that command.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path

import torch

from iclr25.lm.model import TinyLM, TinyLMConfig
from iclr25.lm.text import encode_bytes, perplexity, pydoc_text, random_blocks, split_ids
from iclr25.lm.train import train_lm

PYDOC_LM_CONFIG = TinyLMConfig(vocab_size=256, d_model=64, n_layers=2, n_heads=4, d_ff=256, max_len=64)
"""Width 64, 2 layers of 4 heads, context 64 bytes (about 120k parameters)."""

RECIPE = {"steps": 1500, "batch_size": 32, "block": 64, "lr": 3e-3, "warmup": 50, "seed": 0,
          "val_fraction": 0.1, "eval_bytes": 32_768}
"""Training and evaluation settings of the committed file."""

WEIGHTS = Path(__file__).resolve().parent / "weights" / "pydoc-tinylm.pt"
SCRIPT = "python -m iclr25.lm.pydoc_lm"


def pydoc_splits(val_fraction: float = RECIPE["val_fraction"]) -> tuple[torch.Tensor, torch.Tensor]:
    """(train, validation) byte streams of :func:`~iclr25.lm.text.pydoc_text`: the last
    ``val_fraction`` is held out."""
    return split_ids(encode_bytes(pydoc_text()), val_fraction)


def train_pydoc_lm(recipe: dict | None = None) -> tuple[TinyLM, list[float]]:
    """Train :data:`PYDOC_LM_CONFIG` on the training bytes with AdamW (warmup + cosine), one thread.

    Deterministic: the initialisation (``torch.manual_seed(seed)`` then ``TinyLM``) and the batches
    (a CPU generator seeded with ``seed``) come from ``recipe["seed"]``. Returns (model in eval
    mode on the CPU, loss per step).
    """
    r = {**RECIPE, **(recipe or {})}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(r["seed"])
        model = TinyLM(PYDOC_LM_CONFIG)
        train, _ = pydoc_splits(r["val_fraction"])
        g = torch.Generator().manual_seed(r["seed"])
        batch = lambda step: (random_blocks(train, r["batch_size"], r["block"], g)[0],
                              torch.ones(r["batch_size"], r["block"]))
        losses = train_lm(model, batch, r["steps"], lr=r["lr"], warmup=r["warmup"])
    finally:
        torch.set_num_threads(threads)
    return model.eval(), losses


def validation_perplexity(model: TinyLM, eval_bytes: int = RECIPE["eval_bytes"]) -> float:
    """Perplexity (per byte) on the first ``eval_bytes`` of the validation stream, windows of 64."""
    _, val = pydoc_splits()
    dev = next(model.parameters()).device
    return perplexity(model, val[:eval_bytes].to(dev), PYDOC_LM_CONFIG.max_len)


def make_checkpoint(path: Path = WEIGHTS) -> dict:
    """Train with :data:`RECIPE` and write ``{"state_dict", "meta"}`` to ``path``; returns the meta."""
    t0 = time.time()
    model, losses = train_pydoc_lm()
    meta = {"config": asdict(PYDOC_LM_CONFIG), "recipe": dict(RECIPE), "first_losses": losses[:20],
            "final_loss": sum(losses[-50:]) / 50, "val_perplexity": validation_perplexity(model),
            "torch": str(torch.__version__), "seconds": round(time.time() - t0, 1)}
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"state_dict": model.state_dict(), "meta": meta}, path)
    return meta


def load_pydoc_lm(device: torch.device | str = "cpu", path: Path | None = None) -> tuple[TinyLM, dict]:
    """(the committed model in eval mode on ``device``, its meta). ``FileNotFoundError`` naming
    ``python -m iclr25.lm.pydoc_lm`` if the file is missing."""
    path = Path(path) if path is not None else WEIGHTS
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint {path}: make it with `{SCRIPT}` "
                                "(chapters never retrain it silently)")
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    model = TinyLM(TinyLMConfig(**ckpt["meta"]["config"]))
    model.load_state_dict(ckpt["state_dict"])
    return model.to(device).eval(), ckpt["meta"]


if __name__ == "__main__":
    info = make_checkpoint()
    print(f"wrote {WEIGHTS} ({WEIGHTS.stat().st_size / 1e6:.2f} MB): validation perplexity "
          f"{info['val_perplexity']:.3f}, final training loss {info['final_loss']:.3f}, {info['seconds']} s")
