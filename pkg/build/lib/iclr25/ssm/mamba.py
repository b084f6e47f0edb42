"""A tiny Mamba language model (Gu & Dao, 2023) in plain torch, laid out like ``transformers``'
``MambaForCausalLM`` (same parameter names and shapes, so its weights load there unchanged).

One mixer (:class:`MambaMixer`), for input ``u (b, l, d_model)``, ``d_inner = expand * d_model``::

    [x, z] = u W_in^T                              in_proj   (2 d_inner, d_model)   pruned
    x = SiLU(causal depthwise conv1d(x))           conv1d    (d_inner, 1, d_conv)    dense
    [dt, B, C] = x W_x^T                           x_proj    (R + 2 N, d_inner)     pruned
    delta = softplus(dt W_dt^T + b_dt)             dt_proj   (d_inner, R)           dense (R small)
    y = selective_scan(x, delta, A, B, C, D)       A = -exp(A_log) (d_inner, N), D (d_inner,)
    out = (y * SiLU(z)) W_out^T                    out_proj  (d_model, d_inner)     pruned

A residual block is ``u + mixer(RMSNorm(u))``; the model is embeddings, blocks, a final RMSNorm and
the output head tied to the embeddings. :meth:`TinyMamba.step` runs one token at a time from a
cached (conv window, SSM state) per block: the recurrent inference mode.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from iclr25.ssm.scan import selective_scan, selective_scan_step


@dataclass(frozen=True)
class MambaConfig:
    """Sizes of a :class:`TinyMamba`: ``vocab_size`` tokens, ``n_layers`` blocks of width ``d_model``,
    ``d_inner = expand * d_model`` channels with ``d_state`` states each, a causal conv of width
    ``d_conv`` and a low-rank step size of rank ``dt_rank`` (default ``ceil(d_model / 16)``)."""

    vocab_size: int = 256
    d_model: int = 64
    n_layers: int = 4
    d_state: int = 8
    expand: int = 2
    d_conv: int = 4
    dt_rank: int = 0
    dt_min: float = 1e-3
    dt_max: float = 1e-1
    eps: float = 1e-5

    def __post_init__(self) -> None:
        if self.dt_rank == 0:
            object.__setattr__(self, "dt_rank", math.ceil(self.d_model / 16))
        if min(self.vocab_size, self.d_model, self.n_layers, self.d_state, self.expand, self.d_conv,
               self.dt_rank) < 1:
            raise ValueError(f"all sizes must be positive: {asdict(self)}")

    @property
    def d_inner(self) -> int:
        return self.expand * self.d_model


class MambaMixer(nn.Module):
    """The selective-SSM mixer of one block (module docstring); ``scan`` picks the scan's mode."""

    def __init__(self, cfg: MambaConfig) -> None:
        super().__init__()
        di, N, R = cfg.d_inner, cfg.d_state, cfg.dt_rank
        self.cfg = cfg
        self.in_proj = nn.Linear(cfg.d_model, 2 * di, bias=False)
        self.conv1d = nn.Conv1d(di, di, cfg.d_conv, groups=di, padding=cfg.d_conv - 1)
        self.x_proj = nn.Linear(di, R + 2 * N, bias=False)
        self.dt_proj = nn.Linear(R, di)
        self.out_proj = nn.Linear(di, cfg.d_model, bias=False)
        # S4D-real initialisation A[c, s] = -(s + 1), D = 1; step sizes log-uniform in [dt_min, dt_max]
        self.A_log = nn.Parameter(torch.log(torch.arange(1, N + 1, dtype=torch.float32)).repeat(di, 1))
        self.D = nn.Parameter(torch.ones(di))
        with torch.no_grad():
            nn.init.uniform_(self.dt_proj.weight, -R ** -0.5, R ** -0.5)
            dt = torch.exp(torch.rand(di) * (math.log(cfg.dt_max) - math.log(cfg.dt_min))
                           + math.log(cfg.dt_min))
            self.dt_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # inverse softplus
        self.scan = "sequential"

    def _ssm_inputs(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """``x (..., d_inner)`` after the conv -> ``delta (..., d_inner)``, ``A (d_inner, N)``, ``B, C (..., N)``."""
        R, N = self.cfg.dt_rank, self.cfg.d_state
        dt, B, C = self.x_proj(x).split([R, N, N], dim=-1)
        return F.softplus(self.dt_proj(dt)), -torch.exp(self.A_log.float()), B, C

    def forward(self, u: Tensor) -> Tensor:
        """``u (b, l, d_model)`` -> ``(b, l, d_model)``."""
        l = u.shape[1]
        x, z = self.in_proj(u).chunk(2, dim=-1)
        x = F.silu(self.conv1d(x.transpose(1, 2))[..., :l].transpose(1, 2))
        delta, A, B, C = self._ssm_inputs(x)
        y, _ = selective_scan(x, delta, A, B, C, self.D, mode=self.scan)
        return self.out_proj(y * F.silu(z))

    def step(self, u: Tensor, cache: tuple[Tensor, Tensor]) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """One token ``u (b, d_model)`` with ``cache = (conv window (b, d_inner, d_conv), state
        (b, d_inner, N))`` -> ``(b, d_model)`` and the new cache."""
        window, h = cache
        x, z = self.in_proj(u).chunk(2, dim=-1)
        window = torch.cat([window[..., 1:], x.unsqueeze(-1)], dim=-1)
        x = F.silu((window * self.conv1d.weight[:, 0]).sum(-1) + self.conv1d.bias)
        delta, A, B, C = self._ssm_inputs(x)
        y, h = selective_scan_step(h, x, delta, A, B, C, self.D)
        return self.out_proj(y * F.silu(z)), (window, h)


class MambaBlock(nn.Module):
    """Pre-norm residual block ``u + mixer(RMSNorm(u))``."""

    def __init__(self, cfg: MambaConfig) -> None:
        super().__init__()
        self.norm = nn.RMSNorm(cfg.d_model, eps=cfg.eps)
        self.mixer = MambaMixer(cfg)

    def forward(self, u: Tensor) -> Tensor:
        return u + self.mixer(self.norm(u))

    def step(self, u: Tensor, cache: tuple[Tensor, Tensor]) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        y, cache = self.mixer.step(self.norm(u), cache)
        return u + y, cache


class TinyMamba(nn.Module):
    """A Mamba language model: ``model(ids (b, l)) -> logits (b, l, vocab)``, head tied to the embeddings."""

    def __init__(self, cfg: MambaConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embeddings = nn.Embedding(cfg.vocab_size, cfg.d_model)
        nn.init.normal_(self.embeddings.weight, std=0.02)
        self.layers = nn.ModuleList(MambaBlock(cfg) for _ in range(cfg.n_layers))
        self.norm_f = nn.RMSNorm(cfg.d_model, eps=cfg.eps)
        for block in self.layers:  # GPT-2 style: residual outputs scaled down with depth
            nn.init.kaiming_uniform_(block.mixer.out_proj.weight, a=math.sqrt(5))
            block.mixer.out_proj.weight.data /= math.sqrt(cfg.n_layers)

    def set_scan(self, mode: str) -> "TinyMamba":
        """Use ``mode`` (``"sequential"`` or ``"chunked"``) in every block's scan; returns the model."""
        if mode not in ("sequential", "chunked"):
            raise ValueError(f"unknown scan mode {mode!r}")
        for block in self.layers:
            block.mixer.scan = mode
        return self

    def forward(self, ids: Tensor) -> Tensor:
        h = self.embeddings(ids)
        for block in self.layers:
            h = block(h)
        return F.linear(self.norm_f(h), self.embeddings.weight)

    def empty_cache(self, batch: int) -> list[tuple[Tensor, Tensor]]:
        """Zero (conv window, SSM state) for every block, for :meth:`step`."""
        cfg, p = self.cfg, self.embeddings.weight
        return [(p.new_zeros(batch, cfg.d_inner, cfg.d_conv), p.new_zeros(batch, cfg.d_inner, cfg.d_state))
                for _ in self.layers]

    def step(self, ids: Tensor, cache: list[tuple[Tensor, Tensor]]) -> tuple[Tensor, list]:
        """One token per sequence, ``ids (b,)`` -> logits ``(b, vocab)`` and the new cache."""
        h, new = self.embeddings(ids), []
        for block, c in zip(self.layers, cache):
            h, c = block.step(h, c)
            new.append(c)
        return F.linear(self.norm_f(h), self.embeddings.weight), new

    def prunable(self) -> dict[str, nn.Linear]:
        """The linear layers a C_4^n pruner acts on, in forward order: ``in_proj``, ``x_proj``,
        ``out_proj`` of every block (``dt_proj`` has ``dt_rank`` inputs and stays dense)."""
        return {f"{i}.{name}": getattr(block.mixer, name) for i, block in enumerate(self.layers)
                for name in ("in_proj", "x_proj", "out_proj")}
