"""A tiny Mamba trained on real English (the Python reference topics, byte-level), committed as a
small checkpoint and re-made by this module's script::

    python -m iclr25.ssm.pretrained          # trains it (one CPU thread, deterministic), writes CHECKPOINT
    python -m iclr25.ssm.pretrained 1        # the same recipe with seed 1: a second model (SEEDS)
    python -m iclr25.ssm.pretrained half     # the plateau control: seed 0 with half the steps
    python -m iclr25.ssm.pretrained manifest # after all SEEDS and half: writes MANIFEST (sha256, plateau rule)

Training a byte-level Mamba in pure torch takes minutes, more than a chapter's ``ci`` budget, so the
weights ship with the package (float16, about 0.29 MB per model). Each checkpoint records the
training loss of every step and a validation curve (held-out loss every ``eval_every`` steps on the
*monitor* segments of the held-out text, disjoint from the segments the chapter evaluates on; see
:func:`monitor_split`). The plateau rule (:data:`PLATEAU`) is fixed here, before training.
:func:`text_mamba` loads a checkpoint, refuses it if its sha256 differs from :data:`MANIFEST`, and
raises, naming the script, if the file is missing; a unit test and the chapter re-run the script's
first steps and compare them with the recorded losses.
"""

from __future__ import annotations

import io
import math
from dataclasses import asdict
from pathlib import Path

import torch
import torch.nn.functional as F

import json

from iclr25.common.digest import check_sha256, file_sha256
from iclr25.common.optim import fit, warmup_cosine
from iclr25.lm.text import encode_bytes, mean_nll, pydoc_text, random_blocks, split_ids
from iclr25.ssm.mamba import MambaConfig, TinyMamba

CHECKPOINT = Path(__file__).parent / "data" / "text_mamba.pt"
"""Where the committed weights live (inside the package)."""

SCRIPT = "python -m iclr25.ssm.pretrained"
"""The command that (re)makes :data:`CHECKPOINT` (append a seed for the other committed models)."""

MANIFEST = Path(__file__).parent / "data" / "text_mamba.json"
"""sha256 and summary of every committed checkpoint (written by ``python -m iclr25.ssm.pretrained manifest``)."""

SEEDS = (0, 1, 2)
"""Training seeds of the committed models: seed 0 is :data:`CHECKPOINT`, seed ``s`` is
:func:`checkpoint_path` ``(s)`` (same recipe, other initial weights and windows). The recipe was
registered for six seeds; on a shared two-core machine (about 0.25 CPU-s per step) three were
trained, and ``python -m iclr25.ssm.pretrained 3 4 5`` makes the others."""


def checkpoint_path(seed: int = 0) -> Path:
    """Where the committed model of training seed ``seed`` lives (:data:`CHECKPOINT` for 0)."""
    return CHECKPOINT if seed == 0 else CHECKPOINT.with_name(f"text_mamba_seed{seed}.pt")


def recipe_for(seed: int = 0) -> dict:
    """:data:`RECIPE` with training seed ``seed``."""
    return {**RECIPE, "seed": int(seed)}

RECIPE = dict(cfg=MambaConfig(vocab_size=256, d_model=64, n_layers=4, d_state=8), steps=2000,
              batch_size=16, block=128, lr=3e-3, warmup=100, weight_decay=0.01, val_fraction=0.1,
              eval_every=100, burn_in=64, monitor_every=4, seed=0)
"""How :data:`CHECKPOINT` is made: 4 blocks of width 64 (135k parameters), 2000 AdamW steps of
16 windows of 128 bytes (about 4 M tokens, about ten passes over the training text) on one cosine
schedule, a validation point every 100 steps on the *monitor* segments of the held-out text (every
``monitor_every``-th segment of ``burn_in + block`` bytes, scored on its last ``block`` bytes, see
:func:`monitor_split`); weights stored in float16."""

HALF_STEPS = RECIPE["steps"] // 2
"""The plateau control: seed 0's recipe with half the steps (its own cosine schedule), written to
:data:`HALF_CHECKPOINT` by ``python -m iclr25.ssm.pretrained half``."""

PLATEAU = dict(max_doubling_gain_bits=0.02, max_above_min_nats=0.01)
"""The plateau rule, fixed before the models were trained (:func:`plateau_verdict`): doubling the
training budget (:data:`HALF_STEPS` -> ``steps``, seed 0, same recipe otherwise) lowers the monitor
segments' loss by less than ``max_doubling_gain_bits`` bits/byte, and the model's last validation
point lies within ``max_above_min_nats`` nats/byte of its curve's minimum (no late overfitting);
the second part is judged for every seed."""


def text_splits(val_fraction: float = RECIPE["val_fraction"]) -> tuple[torch.Tensor, torch.Tensor]:
    """Byte ids of the pydoc corpus, split contiguously: (train, validation). The topics are in sorted
    order, so the validation stream is the last topics of the alphabet, unseen in training."""
    return split_ids(encode_bytes(pydoc_text()), val_fraction)


def heldout_segments(ids: torch.Tensor, block: int = RECIPE["block"], burn_in: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """The stream ``ids`` cut into consecutive segments of ``burn_in + block`` inputs and their
    next-byte targets, ``(x, y)`` of shape (n, burn_in + block). :func:`context_nll` scores each
    segment on its last ``block`` targets only: the first ``burn_in`` bytes give the model context,
    so the score is not a window-start score (a count model sees context at every byte)."""
    seg = burn_in + block
    n = (len(ids) - 1) // seg
    if n < 1:
        raise ValueError(f"the stream has {len(ids)} tokens, fewer than burn_in + block + 1 = {seg + 1}")
    return ids[: n * seg].view(n, seg), ids[1: n * seg + 1].view(n, seg)


def monitor_split(val_ids: torch.Tensor, block: int = RECIPE["block"], burn_in: int = RECIPE["burn_in"],
                  monitor_every: int = RECIPE["monitor_every"]) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """The held-out stream cut by :func:`heldout_segments` into segments of ``burn_in + block``
    bytes, split into two disjoint sets: ``monitor`` (every ``monitor_every``-th segment, starting
    with segment ``monitor_every - 1``), on which training records its validation curve, and
    ``eval`` (all the others), the chapter's evaluation pool. Returns ``{"monitor": (x, y),
    "eval": (x, y)}``."""
    x, y = heldout_segments(val_ids, block, burn_in)
    if len(x) < monitor_every:
        raise ValueError(f"{len(x)} segments, fewer than monitor_every = {monitor_every}")
    mon = torch.arange(len(x)) % monitor_every == monitor_every - 1
    return {"monitor": (x[mon], y[mon]), "eval": (x[~mon], y[~mon])}


def plateau_verdict(curve: torch.Tensor, full_nll: float | None = None, half_nll: float | None = None) -> dict:
    """Apply :data:`PLATEAU` to one validation curve (rows ``(step, nll)``, nats/byte): how far its
    last point lies above its minimum (``above_min_nats``), and, given seed 0's final monitor loss
    at ``steps`` (``full_nll``) and at :data:`HALF_STEPS` (``half_nll``), the doubling gain in
    bits/byte. ``holds`` is True only when every part given passes."""
    curve = torch.as_tensor(curve, dtype=torch.float64).reshape(-1, 2)
    above = float(curve[-1, 1] - curve[:, 1].min())
    out = {"above_min_nats": above, "holds": above < PLATEAU["max_above_min_nats"]}
    if full_nll is not None and half_nll is not None:
        gain = (half_nll - full_nll) / math.log(2)
        out["doubling_gain_bits"] = gain
        out["holds"] = bool(out["holds"] and gain < PLATEAU["max_doubling_gain_bits"])
    return out


def strided(n_total: int, n_pick: int | None) -> torch.Tensor:
    """``n_pick`` indices spread evenly over ``range(n_total)`` (all of them for ``None``)."""
    if n_pick is None or n_pick >= n_total:
        return torch.arange(n_total)
    return torch.div(torch.arange(n_pick) * n_total, n_pick, rounding_mode="floor")


@torch.no_grad()
def context_nll(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, block: int = RECIPE["block"],
                batch_size: int = 64) -> float:
    """Mean next-byte loss (nats) of ``model`` on the last ``block`` targets of each row of
    (``x``, ``y``); the earlier positions are context only (see :func:`heldout_segments`)."""
    dev = next(model.parameters()).device
    total, count = 0.0, 0
    for i in range(0, len(x), batch_size):
        xb, yb = x[i:i + batch_size].to(dev), y[i:i + batch_size, -block:].to(dev)
        logits = model(xb)[:, -block:]
        total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), yb.reshape(-1),
                                 reduction="sum").item()
        count += yb.numel()
    return total / count


@torch.no_grad()
def segment_nll(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, block: int = RECIPE["block"],
                batch_size: int = 64) -> torch.Tensor:
    """The mean next-byte loss (nats) of ``model`` on the last ``block`` targets of *each* row of
    (``x``, ``y``), shape (n,), on the CPU: :func:`context_nll` segment by segment, so that the
    loss on any subset of the rows is the mean of its entries (every row scores ``block`` bytes)."""
    dev = next(model.parameters()).device
    out = []
    for i in range(0, len(x), batch_size):
        xb, yb = x[i:i + batch_size].to(dev), y[i:i + batch_size, -block:].to(dev)
        logits = model(xb)[:, -block:].float()
        out.append(F.cross_entropy(logits.transpose(1, 2), yb, reduction="none").mean(1).double().cpu())
    return torch.cat(out) if out else torch.zeros(0, dtype=torch.float64)


def ngram_stream(x: torch.Tensor, y: torch.Tensor, block: int = RECIPE["block"]) -> tuple[torch.Tensor, torch.Tensor]:
    """The segments (``x``, ``y``) as one byte stream for a count model, and one flag per token of
    ``stream[1:]`` marking the tokens :func:`context_nll` scores (the last ``block`` of each
    segment): each segment contributes its inputs and its last target."""
    pieces = torch.cat([x, y[:, -1:]], dim=1)                     # (n, L + 1): segment i's bytes
    width = pieces.shape[1]
    flags = torch.arange(1, pieces.numel()) % width >= width - block
    return pieces.reshape(-1), flags


def train_byte_lm(model: torch.nn.Module, train_ids: torch.Tensor, steps: int, batch_size: int,
                  block: int, lr: float, warmup: int, weight_decay: float, seed: int,
                  stop_after: int | None = None,
                  monitor: tuple[torch.Tensor, torch.Tensor] | None = None,
                  eval_every: int = 0) -> tuple[list[float], list[tuple[int, float]]]:
    """AdamW with linear warmup and cosine decay on random windows of ``train_ids`` (next-byte loss).

    Deterministic given the model's initial weights and ``seed`` (the windows come from a CPU
    generator) on a fixed number of threads. ``stop_after`` ends the run early, on the *same*
    schedule (for the reproduction test). With ``monitor`` (held-out segments scored by
    :func:`context_nll`) and ``eval_every > 0``, the held-out loss (nats/byte) of the weights after ``s`` updates is recorded for every ``s`` divisible by
    ``eval_every`` and at the end; it draws no random numbers, so the weights do not depend on it.
    Returns the training loss of every step and the validation curve ``[(step, nll), ...]``.
    """
    device = next(model.parameters()).device
    g = torch.Generator().manual_seed(seed)
    decay = [p for n, p in model.named_parameters() if p.ndim == 2 and "embeddings" not in n]
    other = [p for n, p in model.named_parameters() if not (p.ndim == 2 and "embeddings" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                             {"params": other, "weight_decay": 0.0}], lr=lr, betas=(0.9, 0.95))
    model.train()

    curve: list[tuple[int, float]] = []

    def validate(step: int) -> None:
        model.eval()
        with torch.no_grad():
            curve.append((step, context_nll(model, *monitor, block)))
        model.train()

    def loss_at(step: int) -> torch.Tensor:
        if monitor is not None and eval_every and step % eval_every == 0:
            validate(step)
        x, y = (t.to(device) for t in random_blocks(train_ids, batch_size, block, generator=g))
        return F.cross_entropy(model(x).reshape(-1, model.cfg.vocab_size), y.reshape(-1))

    n_steps = steps if stop_after is None else min(steps, stop_after)
    losses = fit(model.parameters(), opt, loss_at, n_steps, lr_lambda=warmup_cosine(warmup, steps))
    if monitor is not None and eval_every:
        validate(n_steps)
    model.eval()
    return losses, curve


def make_text_mamba(stop_after: int | None = None, recipe: dict = RECIPE) -> dict:
    """Train :data:`RECIPE` on one CPU thread; returns the checkpoint dict (``state`` in float16,
    ``cfg``, ``recipe``, ``losses``, ``val_curve`` as (step, nll) rows, ``val_nll`` of the float16
    weights on the whole held-out text). ``stop_after`` stops early (no validation then)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(recipe["seed"])
        model = TinyMamba(recipe["cfg"])
        train, val = text_splits(recipe["val_fraction"])
        args = {k: recipe[k] for k in ("steps", "batch_size", "block", "lr", "warmup", "weight_decay",
                                       "seed", "eval_every")}
        segs = monitor_split(val, recipe["block"], recipe["burn_in"], recipe["monitor_every"])
        monitor = segs["monitor"] if stop_after is None else None
        losses, curve = train_byte_lm(model, train, stop_after=stop_after, monitor=monitor, **args)
        state = {k: v.detach().to(torch.float16) for k, v in model.state_dict().items()}
        val_nll = float("nan")
        if stop_after is None:
            model.load_state_dict({k: v.float() for k, v in state.items()})
            with torch.no_grad():
                val_nll = mean_nll(model, val, recipe["block"])
    finally:
        torch.set_num_threads(threads)
    return {"state": state, "cfg": asdict(recipe["cfg"]),
            "recipe": {k: v for k, v in recipe.items() if k != "cfg"},
            "losses": torch.tensor(losses), "val_curve": torch.tensor(curve, dtype=torch.float64).reshape(-1, 2),
            "val_nll": val_nll}


def text_mamba(device: torch.device | str = "cpu", seed: int = 0) -> tuple[TinyMamba, dict]:
    """The committed byte-level Mamba of training seed ``seed`` (eval mode, on ``device``) and its
    record (``losses`` per training step, ``val_nll`` in nats per byte at the time it was made,
    ``recipe``).

    Raises ``FileNotFoundError`` naming :data:`SCRIPT` when the checkpoint is missing.
    """
    path = CHECKPOINT if seed == 0 else checkpoint_path(seed)
    if not path.is_file():
        cmd = SCRIPT if seed == 0 else f"{SCRIPT} {seed}"
        raise FileNotFoundError(f"{path} is missing: make it with `{cmd}` (deterministic, "
                                "a few minutes on one CPU thread)")
    raw = path.read_bytes()
    if MANIFEST.is_file():
        check_sha256(path, json.loads(MANIFEST.read_text())["files"][path.name]["sha256"], data=raw)
    ckpt = torch.load(io.BytesIO(raw), map_location="cpu", weights_only=False)
    model = TinyMamba(MambaConfig(**ckpt["cfg"]))
    model.load_state_dict({k: v.float() for k, v in ckpt["state"].items()})
    info = {k: v for k, v in ckpt.items() if k != "state"}
    return model.to(device).eval(), info


HALF_CHECKPOINT = CHECKPOINT.with_name("text_mamba_half.pt")
"""Seed 0 trained for :data:`HALF_STEPS` (the plateau control). Its weights are neither pruned nor
committed; :data:`MANIFEST` keeps its sha256, final losses and validation curve."""


def half_recipe() -> dict:
    """Seed 0's recipe with :data:`HALF_STEPS` steps (the plateau control)."""
    return {**recipe_for(0), "steps": HALF_STEPS}


def write_manifest(seeds: tuple[int, ...] = SEEDS, half_path: Path = HALF_CHECKPOINT) -> dict:
    """Record the sha256, recipe, final validation loss and monitor curve's end of every committed
    checkpoint in :data:`MANIFEST` (run after training ``seeds`` and ``half``), with the plateau
    control's summary and validation curve (its weights are not committed: ``half_path`` may lie
    outside the package) and the plateau rule's outcome per seed (:func:`plateau_verdict`; seed 0
    with the doubling gain)."""
    files, plateau = {}, {}
    half = torch.load(half_path, map_location="cpu", weights_only=False)
    half_nll = float(half["val_curve"][-1, 1])
    for s in seeds:
        path = checkpoint_path(s)
        ckpt = torch.load(path, map_location="cpu", weights_only=False)
        files[path.name] = {"seed": s, "sha256": file_sha256(path), "bytes": path.stat().st_size,
                            "val_nll": ckpt["val_nll"], "monitor_nll": float(ckpt["val_curve"][-1, 1]),
                            "steps": len(ckpt["losses"])}
        plateau[str(s)] = plateau_verdict(ckpt["val_curve"], *((float(ckpt["val_curve"][-1, 1]), half_nll)
                                                                 if s == 0 else ()))
    control = {"seed": 0, "steps": len(half["losses"]), "sha256": file_sha256(half_path), "committed": False,
               "val_nll": half["val_nll"], "monitor_nll": half_nll,
               "val_curve": [[int(a), float(b)] for a, b in half["val_curve"].tolist()]}
    record = {"script": SCRIPT, "recipe": {k: (asdict(v) if k == "cfg" else v) for k, v in RECIPE.items()
                                           if k != "seed"},
              "seeds": list(seeds), "half_steps": HALF_STEPS, "plateau_rule": PLATEAU, "plateau": plateau,
              "half_control": control, "files": files}
    MANIFEST.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    return record


def main(seed: int | str = 0, out_dir: Path | None = None) -> None:
    """Write the checkpoint of training seed ``seed`` (the state in float16; ``"half"``: the plateau
    control) and print its validation loss; into ``out_dir`` instead of the package when given."""
    half = seed == "half"
    ckpt = make_text_mamba(recipe=half_recipe() if half else recipe_for(int(seed)))
    path = HALF_CHECKPOINT if half else checkpoint_path(int(seed))
    if out_dir is not None:
        path = Path(out_dir) / path.name
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(ckpt, path)
    print(f"wrote {path} ({path.stat().st_size / 1e6:.2f} MB): "
          f"val {ckpt['val_nll'] / math.log(2):.3f} bits/byte, monitor "
          f"{float(ckpt['val_curve'][-1, 1]) / math.log(2):.3f} after {len(ckpt['losses'])} steps", flush=True)


if __name__ == "__main__":
    import sys

    args = sys.argv[1:]
    if args and args[0] == "manifest":         # manifest [--half PATH] [seeds...]
        half_path = HALF_CHECKPOINT
        if args[1:2] == ["--half"]:
            half_path, args = Path(args[2]), args[2:]
        print(json.dumps(write_manifest(tuple(int(a) for a in args[1:]) or SEEDS, half_path), indent=1))
    else:
        out = None
        if args and args[0] == "--out":
            out, args = Path(args[1]), args[2:]
        for arg in args or ["0"]:
            main(arg if arg == "half" else int(arg), out)
