"""A small transformer zoo: many tiny vision transformers trained at once on scikit-learn's digits.

Each model is the Small Transformer Zoo's architecture at a tiny size: the 8x8 digits cut into
patches (by default the 8 rows: 8 tokens of 8 pixels; ``ZooConfig.patch``) embedded linearly with fixed sinusoidal positions, ``L`` encoder
blocks of :func:`iclr25.nfn.block.attention_block` (no residual, non-affine LayerNorm), a final
LayerNorm, the mean over tokens and a two-layer classifier head. Every model gets its own recipe
(optimizer, learning rate, init std, L2 penalty, train fraction, dropout), as in the official
sweep, and all models train *together*: every weight has a leading model axis, one autograd pass
serves all of them, and a hand-written optimizer applies each model's own update rule and
learning rate to its slice of every (model-batched) parameter tensor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch

from iclr25.nfn.block import KEYS, BlockSpec, layer_norm, mlp, multi_head_attention

OPTIMIZERS = ("adam", "rmsprop", "sgd_momentum", "sgd")
"""The update rules of the zoo's grid (those of the official sweep)."""


@dataclass(frozen=True)
class ZooGrid:
    """The hyper-parameter grid a run's recipe is drawn from (uniformly, each axis independently).
    As in the official sweeps, the adaptive optimizers (Adam, RMSprop) and plain/momentum SGD
    draw their learning rate from different ranges."""

    optimizer: tuple[str, ...] = OPTIMIZERS
    lr_adaptive: tuple[float, ...] = (3e-4, 1e-3, 3e-3, 1e-2, 3e-2)
    lr_sgd: tuple[float, ...] = (1e-2, 3e-2, 1e-1, 3e-1)
    init_std: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5)
    l2: tuple[float, ...] = (1e-8, 1e-6, 1e-4, 1e-2)
    train_fraction: tuple[float, ...] = (1.0, 0.9, 0.8, 0.7)
    dropout: tuple[float, ...] = (0.0, 0.05, 0.1, 0.15, 0.2)

    def axes(self) -> dict[str, tuple]:
        """The grid as ``{name: values}``."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class ZooConfig:
    """Sizes of the zoo: ``n_runs`` models of ``n_blocks`` blocks of ``block`` size, trained for
    ``steps`` steps of ``batch`` examples (linear warm-up over the first tenth, then cosine decay,
    as the official schedule), with checkpoints kept at ``checkpoints`` (steps)."""

    n_runs: int = 100
    steps: int = 100
    batch: int = 32
    n_blocks: int = 2
    block: BlockSpec = field(default_factory=BlockSpec)
    checkpoints: tuple[int, ...] = ()
    grid: ZooGrid = field(default_factory=ZooGrid)
    patch: tuple[int, int] = (1, 8)
    seed: int = 0

    def checkpoint_steps(self) -> tuple[int, ...]:
        """The steps at which weights are kept (default: the last one only)."""
        return self.checkpoints or (self.steps,)


def digits_tokens(patch: tuple[int, int] = (1, 8)) -> tuple[torch.Tensor, torch.Tensor]:
    """scikit-learn's 1797 bundled 8x8 digits as token sequences of ``patch``-shaped pixel patches
    (default: the 8 rows, 8 tokens of 8 pixels), standardised to mean 0 and variance 1 over the
    whole set: ``(1797, T, patch_h * patch_w)`` and the labels ``(1797,)``."""
    from sklearn.datasets import load_digits

    data = load_digits()
    img = torch.tensor(data.images, dtype=torch.float32)
    img = (img - img.mean()) / img.std()
    (ph, pw), n = patch, img.shape[0]
    tok = img.reshape(n, 8 // ph, ph, 8 // pw, pw).permute(0, 1, 3, 2, 4).reshape(n, -1, ph * pw)
    return tok, torch.tensor(data.target, dtype=torch.long)


def sinusoidal_positions(n: int, dim: int) -> torch.Tensor:
    """The fixed sinusoidal position table ``(n, dim)`` of the zoo's embedding."""
    pos = torch.arange(n, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    pe = torch.zeros(n, dim)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * freq), torch.cos(pos * freq)
    return pe


def sample_recipes(n: int, grid: ZooGrid, *, seed: int = 0,
                   runs: Sequence[int] | None = None) -> dict[str, np.ndarray]:
    """Recipes drawn from ``grid``: ``{axis: (n,) array}`` with the optimizer as an index into
    ``grid.optimizer`` and ``lr`` drawn from ``lr_adaptive`` or ``lr_sgd`` by optimizer. Run ``r``'s
    recipe comes from its own generator ``default_rng([seed, r])`` (``runs``: which run indices,
    default ``range(n)``), so a run's recipe does not depend on which other runs are drawn."""
    runs = list(range(n)) if runs is None else list(runs)
    opts = np.asarray(grid.optimizer)
    out: dict[str, list] = {k: [] for k in ("optimizer", "lr", "init_std", "l2", "train_fraction", "dropout")}
    for r in runs:
        g = np.random.default_rng([seed, r])
        o = int(g.integers(len(opts)))
        lrs = grid.lr_adaptive if opts[o] in ("adam", "rmsprop") else grid.lr_sgd
        out["optimizer"].append(o)
        out["lr"].append(float(lrs[g.integers(len(lrs))]))
        for name in ("init_std", "l2", "train_fraction", "dropout"):
            vals = getattr(grid, name)
            out[name].append(float(vals[g.integers(len(vals))]))
    return {k: np.asarray(v, dtype=np.int64 if k == "optimizer" else np.float64) for k, v in out.items()}


class RunStreams:
    """One torch generator per run, seeded by ``(seed, run)``: every random number a run uses
    (its init, its training subset, its mini-batches, its dropout masks) comes from its own
    generator, in the same order whichever runs are trained with it, so any subset of the zoo can
    be retrained exactly."""

    def __init__(self, seed: int, runs: Sequence[int]):
        self.gens = [torch.Generator().manual_seed(seed * 1_000_003 + r) for r in runs]

    def uniform(self, *shape: int) -> torch.Tensor:
        """``(n_runs, *shape)`` uniforms in ``[0, 1)``, each run's row from its own generator."""
        return torch.stack([torch.rand(*shape, generator=g) for g in self.gens])

    def normal(self, *shape: int) -> torch.Tensor:
        """``(n_runs, *shape)`` standard normals truncated to ``[-2, 2]``, each run's from its own generator."""
        return torch.stack([torch.nn.init.trunc_normal_(torch.empty(*shape), a=-2.0, b=2.0, generator=g)
                            for g in self.gens])


def zoo_shapes(cfg: ZooConfig, patch_dim: int, n_classes: int) -> dict[str, tuple[int, ...]]:
    """The shape (without the model axis) of every weight of a zoo model, encoder blocks as
    ``"enc{l}.{key}"``."""
    D = cfg.block.D
    shapes = {"emb.W": (patch_dim, D), "emb.b": (D,)}
    for l in range(cfg.n_blocks):
        shapes.update({f"enc{l}.{k}": s for k, s in cfg.block.shapes().items()})
    shapes.update({"cls.W1": (D, D), "cls.b1": (D,), "cls.W2": (D, n_classes), "cls.b2": (n_classes,)})
    return shapes


def zoo_forward(p: dict[str, torch.Tensor], x: torch.Tensor, n_blocks: int, pos: torch.Tensor,
                dropout: torch.Tensor | None = None, masks: torch.Tensor | None = None) -> torch.Tensor:
    """Logits ``(M, B, classes)`` of ``M`` zoo models on their batches ``x`` ``(M, B, T, patch_dim)``
    (or one batch ``(B, T, patch_dim)`` for all). ``dropout`` ``(M,)``: per-model rates applied after
    the attention and after the MLP of every block (the zoo's ``dropout1``/``dropout2``); ``masks``
    ``(M, 2 n_blocks, B, T, D)``: uniforms, a unit is kept where its uniform is ``>=`` the rate."""
    if x.dim() == 3:
        x = x.expand(p["emb.W"].shape[0], *x.shape)
    h = torch.einsum("mbtp,mpd->mbtd", x, p["emb.W"]) + p["emb.b"][:, None, None] + pos

    def drop(z: torch.Tensor, site: int) -> torch.Tensor:
        if dropout is None:
            return z
        rate = dropout[:, None, None, None]
        keep = masks[:, site] >= rate
        return z * keep / (1 - rate)

    for l in range(n_blocks):
        w = {k: p[f"enc{l}.{k}"] for k in KEYS}
        a = drop(multi_head_attention(layer_norm(h), w), 2 * l)
        h = drop(mlp(layer_norm(a), w), 2 * l + 1)
    z = layer_norm(h).mean(-2)
    z = torch.relu(torch.einsum("mbd,mde->mbe", z, p["cls.W1"]) + p["cls.b1"][:, None])
    return torch.einsum("mbd,mdc->mbc", z, p["cls.W2"]) + p["cls.b2"][:, None]


def _optimizer_constants(opt: np.ndarray, device: torch.device) -> dict[str, torch.Tensor]:
    """Per-model constants of the unified update (see :func:`train_zoo`)."""
    names = np.asarray(OPTIMIZERS)[opt]  # indices into OPTIMIZERS (ZooGrid.optimizer keeps its order)
    col = lambda vals: torch.tensor([vals[n] for n in names], dtype=torch.float32, device=device)
    return {"beta1": col({"adam": 0.9, "rmsprop": 0.0, "sgd_momentum": 0.9, "sgd": 0.0}),
            "gain1": col({"adam": 0.1, "rmsprop": 1.0, "sgd_momentum": 1.0, "sgd": 1.0}),
            "beta2": col({"adam": 0.999, "rmsprop": 0.99, "sgd_momentum": 0.0, "sgd": 0.0}),
            "adam": col({"adam": 1.0, "rmsprop": 0.0, "sgd_momentum": 0.0, "sgd": 0.0}),
            "adaptive": col({"adam": 1.0, "rmsprop": 1.0, "sgd_momentum": 0.0, "sgd": 0.0})}


def lr_schedule(step: int, steps: int) -> float:
    """Linear warm-up over the first tenth of training, then cosine decay to zero (``step`` from 0)."""
    warm = max(1, steps // 10)
    if step < warm:
        return (step + 1) / warm
    return 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, steps - warm)))


def lr_share_after(start: int, steps: int) -> float:
    """The share of the summed learning-rate multiplier of :func:`lr_schedule` that falls on the
    steps ``start, ..., steps - 1``: how much training a run still gets after step ``start``."""
    rates = [lr_schedule(t, steps) for t in range(steps)]
    return float(sum(rates[start:]) / sum(rates))


@torch.no_grad()
def zoo_accuracy(p: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor, n_blocks: int,
                 pos: torch.Tensor, chunk: int = 64) -> torch.Tensor:
    """Test accuracy ``(M,)`` of every model on ``(x, y)``, ``chunk`` models at a time."""
    M = next(iter(p.values())).shape[0]
    acc = []
    for i in range(0, M, chunk):
        sub = {k: v[i:i + chunk] for k, v in p.items()}
        logits = zoo_forward(sub, x, n_blocks, pos)
        acc.append((logits.argmax(-1) == y).float().mean(-1))
    return torch.cat(acc)


def train_zoo(cfg: ZooConfig, device: torch.device | str = "cpu", progress=None,
              runs: Sequence[int] | None = None, keep_all: bool = False) -> dict:
    """Train the zoo (or only the runs ``runs`` of it: run ``r`` is trained exactly as in the whole
    zoo, since its recipe and every random number it uses are keyed by ``(cfg.seed, r)``). Returns a dict with

    - ``encoder``: ``{key: (n_ckpt, n_runs, n_blocks, ...)}`` float32 CPU tensors of the encoder
      weights at each checkpoint step (weight-space layout of :mod:`iclr25.nfn.block`);
    - ``params`` (``keep_all=True``): every weight of every model at the last step, ``{name: (n_runs, ...)}``;
    - ``accuracy``: ``(n_ckpt, n_runs)`` test accuracy at each checkpoint; ``loss``: ``(n_runs,)``
      the training loss averaged over the last tenth of the steps;
    - ``recipes``: the recipe of every run (:func:`sample_recipes`), ``steps``: the checkpoint steps;
    - ``nonfinite``: ``(n_runs,)`` how many gradient or weight entries of each run were inf/nan and were
      set to 0 (a diverged run: its weights then hold exact zeros that no trained model has).

    The update of every model is one formula with per-model constants: with ``g = grad + l2 * w``,
    ``m <- beta1 m + gain1 g``, ``v <- beta2 v + (1 - beta2) g^2``, and ``w <- w - lr_t m' / d``
    where Adam uses the bias-corrected ``m'`` and ``d = sqrt(v') + 1e-8``, RMSprop ``m' = g`` and
    ``d = sqrt(v) + 1e-8``, SGD with momentum 0.9 ``m' = m`` and ``d = 1``, SGD ``m' = g``, ``d = 1``
    (torch's ``Adam``, ``RMSprop(alpha=0.99)``, ``SGD(momentum=0.9)``, ``SGD``, each with coupled
    ``weight_decay=l2``).
    """
    device = torch.device(device)
    runs = list(range(cfg.n_runs)) if runs is None else list(runs)
    gen = torch.Generator().manual_seed(cfg.seed)
    tok, lab = digits_tokens(cfg.patch)
    order = torch.randperm(len(lab), generator=gen)          # the zoo's test / training-pool split
    n_test = len(lab) // 3
    test, pool = order[:n_test], order[n_test:]
    x_test, y_test = tok[test].to(device), lab[test].to(device)
    x_pool, y_pool = tok[pool].to(device), lab[pool].to(device)

    M = len(runs)
    streams = RunStreams(cfg.seed, runs)
    rec = sample_recipes(M, cfg.grid, seed=cfg.seed, runs=runs)
    shapes = zoo_shapes(cfg, tok.shape[-1], 10)
    # truncated-normal init with the run's std for weights, zeros for biases (official init_weights)
    std = torch.tensor(rec["init_std"], dtype=torch.float32, device=device)
    params = {}
    for j, (name, s) in enumerate(shapes.items()):
        if len(s) > 1:
            params[name] = streams.normal(*s).to(device) * std.view(M, *([1] * len(s)))
        else:
            params[name] = torch.zeros(M, *s, device=device)
    params = {k: v.to(device).requires_grad_(True) for k, v in params.items()}
    leaves = list(params.values())
    # each run's training subset: the first train_fraction of its own shuffle of the pool
    n_pool = len(pool)
    perms = torch.argsort(streams.uniform(n_pool), dim=1).to(device)
    n_train = torch.tensor(np.floor(rec["train_fraction"] * n_pool), dtype=torch.long, device=device)

    c = _optimizer_constants(rec["optimizer"], device)
    col = lambda a: torch.tensor(a, dtype=torch.float32, device=device)
    lr, l2, drop = col(rec["lr"]), col(rec["l2"]), col(rec["dropout"])
    state = [(torch.zeros_like(p), torch.zeros_like(p)) for p in leaves]
    pos = sinusoidal_positions(tok.shape[1], cfg.block.D).to(device)
    keep = set(cfg.checkpoint_steps())
    # a diverged run's gradients or weights become inf/nan; they are set to 0 (so the batched
    # training goes on), and every entry so zeroed is counted per run in ``out["nonfinite"]``
    nonfinite = torch.zeros(M, dtype=torch.long, device=device)
    snaps, accs = [], []
    loss_tail = torch.zeros(M, device=device)
    tail_from = cfg.steps - max(1, cfg.steps // 10)
    steps = range(cfg.steps) if progress is None else progress(range(cfg.steps), desc="zoo")
    for t in steps:
        n_mask = 2 * cfg.n_blocks * cfg.batch * tok.shape[1] * cfg.block.D
        u = streams.uniform(cfg.batch + n_mask).to(device)
        idx = torch.gather(perms, 1, (u[:, :cfg.batch] * n_train[:, None]).long())
        masks = u[:, cfg.batch:].reshape(M, 2 * cfg.n_blocks, cfg.batch, tok.shape[1], cfg.block.D)
        logits = zoo_forward(params, x_pool[idx], cfg.n_blocks, pos, dropout=drop, masks=masks)
        per_model = torch.nn.functional.cross_entropy(logits.reshape(-1, 10), y_pool[idx].reshape(-1),
                                                      reduction="none").reshape(M, -1).mean(1)
        # the sum over models of each model's mean cross-entropy: gradients stay per model
        grads = torch.autograd.grad(per_model.sum(), leaves)
        if t >= tail_from:
            loss_tail += per_model.detach() / (cfg.steps - tail_from)
        k = t + 1
        with torch.no_grad():
            for p, g, (m_buf, v_buf) in zip(leaves, grads, state):
                shape = (M,) + (1,) * (p.dim() - 1)
                cc = {n: v.view(shape) for n, v in c.items()}
                nonfinite += (~torch.isfinite(g)).reshape(M, -1).sum(1)
                g = torch.nan_to_num(g, nan=0.0, posinf=0.0, neginf=0.0) + l2.view(shape) * p
                m_buf.mul_(cc["beta1"]).add_(cc["gain1"] * g)
                v_buf.mul_(cc["beta2"]).add_((1 - cc["beta2"]) * g * g)
                bc1 = torch.where(cc["adam"] > 0, 1 - cc["beta1"] ** k, 1.0)
                bc2 = torch.where(cc["adam"] > 0, 1 - cc["beta2"] ** k, 1.0)
                num = torch.where(cc["beta1"] > 0, m_buf / bc1, g)
                den = torch.where(cc["adaptive"] > 0, torch.sqrt(v_buf / bc2) + 1e-8, 1.0)
                p.sub_(lr.view(shape) * lr_schedule(t, cfg.steps) * num / den)
                nonfinite += (~torch.isfinite(p)).reshape(M, -1).sum(1)
                p.nan_to_num_(nan=0.0, posinf=0.0, neginf=0.0)
        if k in keep:
            snap = {n: v.detach() for n, v in params.items()}
            accs.append(zoo_accuracy(snap, x_test, y_test, cfg.n_blocks, pos).cpu())
            snaps.append({key: torch.stack([snap[f"enc{l}.{key}"] for l in range(cfg.n_blocks)], 1).cpu().clone()
                          for key in KEYS})
    encoder = {key: torch.stack([s[key] for s in snaps]) for key in KEYS}
    out = {"encoder": encoder, "accuracy": torch.stack(accs), "recipes": rec, "loss": loss_tail.cpu(),
           "steps": sorted(keep), "n_test": n_test, "runs": runs, "nonfinite": nonfinite.cpu()}
    if keep_all:
        out["params"] = {n: v.detach().cpu().clone() for n, v in params.items()}
    return out


def zoo_test_accuracy(params: dict[str, torch.Tensor], cfg: ZooConfig, device: torch.device | str = "cpu") -> torch.Tensor:
    """Test accuracy ``(n,)`` of zoo models given all their weights ``{name: (n, ...)}`` (e.g.
    loaded from the committed fp16 zoo), on the zoo's test digits."""
    gen = torch.Generator().manual_seed(cfg.seed)
    tok, lab = digits_tokens(cfg.patch)
    order = torch.randperm(len(lab), generator=gen)
    test = order[:len(lab) // 3]
    pos = sinusoidal_positions(tok.shape[1], cfg.block.D).to(device)
    p = {k: v.to(device=device, dtype=torch.float32) for k, v in params.items()}
    return zoo_accuracy(p, tok[test].to(device), lab[test].to(device), cfg.n_blocks, pos).cpu()


def permute_stream(params: dict[str, torch.Tensor], block: int, perm: torch.Tensor, sign: float = 1.0
                   ) -> dict[str, torch.Tensor]:
    """A symmetry of the zoo model outside the paper's group: permute (by ``perm``) and multiply by
    ``sign`` (+1 or -1) the stream coordinates between encoder block ``block`` and the next one.
    Block ``block``'s output is ``Y = ... WB + bB``; the next block reads it only through a
    non-affine LayerNorm, with ``LN(sign * Y P) = sign * LN(Y) P``. So the columns of ``WB`` and
    ``bB`` are permuted and signed, and the rows of the next block's ``WQ, WK`` permuted (the sign
    cancels in ``QK``), those of its ``WV`` permuted and signed. ``params``: ``{name: (M, ...)}``."""
    out = dict(params)
    a, b = f"enc{block}.", f"enc{block + 1}."
    out[a + "WB"] = sign * params[a + "WB"][..., perm]
    out[a + "bB"] = sign * params[a + "bB"][..., perm]
    for k, s in (("WQ", 1.0), ("WK", 1.0), ("WV", sign)):
        out[b + k] = s * params[b + k][..., perm, :]
    return out
