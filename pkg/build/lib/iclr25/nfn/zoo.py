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
    lr_sgd: tuple[float, ...] = (3e-3, 1e-2, 3e-2, 1e-1, 3e-1)
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


def sample_recipes(n: int, grid: ZooGrid, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """``n`` recipes drawn from ``grid``: ``{axis: (n,) array}`` with the optimizer as an index into
    ``grid.optimizer`` and ``lr`` drawn from ``lr_adaptive`` or ``lr_sgd`` by optimizer."""
    pick = lambda values: np.asarray(values, dtype=np.float64)[rng.integers(len(values), size=n)]
    opt = rng.integers(len(grid.optimizer), size=n)
    adaptive = np.isin(np.asarray(grid.optimizer)[opt], ("adam", "rmsprop"))
    lr_a, lr_s = pick(grid.lr_adaptive), pick(grid.lr_sgd)
    out = {"optimizer": opt, "lr": np.where(adaptive, lr_a, lr_s)}
    for name in ("init_std", "l2", "train_fraction", "dropout"):
        out[name] = pick(getattr(grid, name))
    return out


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
                dropout: torch.Tensor | None = None, generator: torch.Generator | None = None) -> torch.Tensor:
    """Logits ``(M, B, classes)`` of ``M`` zoo models on their batches ``x`` ``(M, B, T, patch_dim)``
    (or one batch ``(B, T, patch_dim)`` for all). ``dropout`` ``(M,)``: per-model rates applied after
    the attention and after the MLP of every block (the zoo's ``dropout1``/``dropout2``)."""
    if x.dim() == 3:
        x = x.expand(p["emb.W"].shape[0], *x.shape)
    h = torch.einsum("mbtp,mpd->mbtd", x, p["emb.W"]) + p["emb.b"][:, None, None] + pos

    def drop(z: torch.Tensor) -> torch.Tensor:
        if dropout is None:
            return z
        rate = dropout[:, None, None, None]
        keep = torch.rand(z.shape, generator=generator).to(z.device) >= rate
        return z * keep / (1 - rate)

    for l in range(n_blocks):
        w = {k: p[f"enc{l}.{k}"] for k in KEYS}
        a = drop(multi_head_attention(layer_norm(h), w))
        h = drop(mlp(layer_norm(a), w))
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


def train_zoo(cfg: ZooConfig, device: torch.device | str = "cpu", progress=None) -> dict:
    """Train the zoo. Returns a dict with

    - ``encoder``: ``{key: (n_ckpt, n_runs, n_blocks, ...)}`` float32 CPU tensors of the encoder
      weights at each checkpoint step (weight-space layout of :mod:`iclr25.nfn.block`);
    - ``accuracy``: ``(n_ckpt, n_runs)`` test accuracy at each checkpoint;
    - ``recipes``: the recipe of every run (:func:`sample_recipes`), ``steps``: the checkpoint steps.

    The update of every model is one formula with per-model constants: with ``g = grad + l2 * w``,
    ``m <- beta1 m + gain1 g``, ``v <- beta2 v + (1 - beta2) g^2``, and ``w <- w - lr_t m' / d``
    where Adam uses the bias-corrected ``m'`` and ``d = sqrt(v') + 1e-8``, RMSprop ``m' = g`` and
    ``d = sqrt(v) + 1e-8``, SGD with momentum 0.9 ``m' = m`` and ``d = 1``, SGD ``m' = g``, ``d = 1``
    (torch's ``Adam``, ``RMSprop(alpha=0.99)``, ``SGD(momentum=0.9)``, ``SGD``, each with coupled
    ``weight_decay=l2``).
    """
    device = torch.device(device)
    rng = np.random.default_rng(cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)
    tok, lab = digits_tokens(cfg.patch)
    order = torch.randperm(len(lab), generator=gen)
    n_test = len(lab) // 3
    test, pool = order[:n_test], order[n_test:]
    x_test, y_test = tok[test].to(device), lab[test].to(device)
    x_pool, y_pool = tok[pool].to(device), lab[pool].to(device)

    M = cfg.n_runs
    rec = sample_recipes(M, cfg.grid, rng)
    shapes = zoo_shapes(cfg, tok.shape[-1], 10)
    # truncated-normal init with the run's std for weights, zeros for biases (official init_weights)
    std = torch.tensor(rec["init_std"], dtype=torch.float32)
    params = {}
    for name, s in shapes.items():
        if len(s) > 1:
            tn = torch.nn.init.trunc_normal_(torch.empty(M, *s), std=1.0, a=-2.0, b=2.0, generator=gen)
            params[name] = tn * std.view(M, *([1] * len(s)))
        else:
            params[name] = torch.zeros(M, *s)
    params = {k: v.to(device).requires_grad_(True) for k, v in params.items()}
    leaves = list(params.values())
    # each run's training subset: the first train_fraction of its own shuffle of the pool
    n_pool = len(pool)
    perms = torch.argsort(torch.rand(M, n_pool, generator=gen), dim=1).to(device)
    n_train = torch.tensor(np.floor(rec["train_fraction"] * n_pool), dtype=torch.long, device=device)

    c = _optimizer_constants(rec["optimizer"], device)
    col = lambda a: torch.tensor(a, dtype=torch.float32, device=device)
    lr, l2, drop = col(rec["lr"]), col(rec["l2"]), col(rec["dropout"])
    state = [(torch.zeros_like(p), torch.zeros_like(p)) for p in leaves]
    pos = sinusoidal_positions(tok.shape[1], cfg.block.D).to(device)
    keep = set(cfg.checkpoint_steps())
    snaps, accs = [], []
    steps = range(cfg.steps) if progress is None else progress(range(cfg.steps), desc="zoo")
    for t in steps:
        u = torch.rand(M, cfg.batch, generator=gen).to(device)
        idx = torch.gather(perms, 1, (u * n_train[:, None]).long())
        logits = zoo_forward(params, x_pool[idx], cfg.n_blocks, pos, dropout=drop, generator=gen)
        # the sum over models of each model's mean cross-entropy: gradients stay per model
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 10), y_pool[idx].reshape(-1),
                                                 reduction="sum") / cfg.batch
        grads = torch.autograd.grad(loss, leaves)
        k = t + 1
        with torch.no_grad():
            for p, g, (m_buf, v_buf) in zip(leaves, grads, state):
                shape = (M,) + (1,) * (p.dim() - 1)
                cc = {n: v.view(shape) for n, v in c.items()}
                g = torch.nan_to_num(g, nan=0.0, posinf=0.0, neginf=0.0) + l2.view(shape) * p
                m_buf.mul_(cc["beta1"]).add_(cc["gain1"] * g)
                v_buf.mul_(cc["beta2"]).add_((1 - cc["beta2"]) * g * g)
                bc1 = torch.where(cc["adam"] > 0, 1 - cc["beta1"] ** k, 1.0)
                bc2 = torch.where(cc["adam"] > 0, 1 - cc["beta2"] ** k, 1.0)
                num = torch.where(cc["beta1"] > 0, m_buf / bc1, g)
                den = torch.where(cc["adaptive"] > 0, torch.sqrt(v_buf / bc2) + 1e-8, 1.0)
                p.sub_(lr.view(shape) * lr_schedule(t, cfg.steps) * num / den)
                p.nan_to_num_(nan=0.0, posinf=0.0, neginf=0.0)
        if k in keep:
            snap = {n: v.detach() for n, v in params.items()}
            accs.append(zoo_accuracy(snap, x_test, y_test, cfg.n_blocks, pos).cpu())
            snaps.append({key: torch.stack([snap[f"enc{l}.{key}"] for l in range(cfg.n_blocks)], 1).cpu().clone()
                          for key in KEYS})
    encoder = {key: torch.stack([s[key] for s in snaps]) for key in KEYS}
    return {"encoder": encoder, "accuracy": torch.stack(accs), "recipes": rec,
            "steps": sorted(keep), "n_test": n_test}
