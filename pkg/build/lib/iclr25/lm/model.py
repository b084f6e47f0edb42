"""A tiny causal (GPT-style) transformer language model.

Pre-LayerNorm blocks, learned absolute positions, tied input/output embeddings. The forward
pass takes token ids *or* input embeddings, plus an optional additive offset on the input
embeddings: the hook a continuous (soft) prompt needs, and the reason later chapters can edit,
prune or distil the same model.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class TinyLMConfig:
    """Sizes of a :class:`TinyLM`.

    ``vocab_size`` words, ``max_len`` positions, ``n_layers`` blocks of width ``d_model`` with
    ``n_heads`` heads and an MLP of width ``d_ff``.
    """

    vocab_size: int
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int = 256
    max_len: int = 48
    dropout: float = 0.0

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} must be divisible by n_heads={self.n_heads}")
        if min(self.vocab_size, self.d_model, self.n_layers, self.n_heads, self.d_ff, self.max_len) < 1:
            raise ValueError(f"all sizes must be positive: {asdict(self)}")


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention where position t attends to positions <= t."""

    def __init__(self, cfg: TinyLMConfig) -> None:
        super().__init__()
        self.n_heads = cfg.n_heads
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.dropout = cfg.dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, T, D) -> (B, T, D)."""
        B, T, D = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, D // self.n_heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.dropout if self.training else 0.0)
        return self.proj(y.transpose(1, 2).reshape(B, T, D))


class Block(nn.Module):
    """Pre-LN transformer block: x + attn(LN x), then x + MLP(LN x)."""

    def __init__(self, cfg: TinyLMConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = nn.Sequential(nn.Linear(cfg.d_model, cfg.d_ff), nn.GELU(),
                                 nn.Linear(cfg.d_ff, cfg.d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyLM(nn.Module):
    """A tiny causal language model: ``logits = TinyLM(cfg)(ids)`` with shape (B, T, vocab)."""

    def __init__(self, cfg: TinyLMConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos = nn.Embedding(cfg.max_len, cfg.d_model)
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layers)])
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.apply(self._init)

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, 0.0, 0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        """Token embeddings E[ids]: (B, T) -> (B, T, D)."""
        return self.tok(ids)

    def forward(self, ids: torch.Tensor | None = None, *, inputs_embeds: torch.Tensor | None = None,
                embed_offset: torch.Tensor | None = None,
                return_hidden: bool = False) -> torch.Tensor | tuple[torch.Tensor, list[torch.Tensor]]:
        """Next-token logits.

        Parameters
        ----------
        ids : LongTensor (B, T), optional
            Token ids; give exactly one of ``ids`` and ``inputs_embeds``.
        inputs_embeds : FloatTensor (B, T, D), optional
            Token embeddings to use instead of ``E[ids]``.
        embed_offset : FloatTensor broadcastable to (B, T, D), optional
            Added to the token embeddings (e.g. a continuous prompt on the prompt positions).
        return_hidden : bool
            Also return the residual stream after the embedding and after each block.

        Returns
        -------
        logits : FloatTensor (B, T, vocab)
            ``logits[b, t]`` scores token t+1 given tokens <= t.
        hidden : list of (B, T, D) tensors, only if ``return_hidden``.
        """
        if (ids is None) == (inputs_embeds is None):
            raise ValueError("give exactly one of ids and inputs_embeds")
        x = self.embed(ids) if inputs_embeds is None else inputs_embeds
        if embed_offset is not None:
            x = x + embed_offset
        T = x.shape[1]
        if T > self.cfg.max_len:
            raise ValueError(f"sequence length {T} exceeds max_len={self.cfg.max_len}")
        x = x + self.pos(torch.arange(T, device=x.device))
        hidden = [x]
        for block in self.blocks:
            x = block(x)
            hidden.append(x)
        logits = self.ln_f(x) @ self.tok.weight.T
        return (logits, hidden) if return_hidden else logits

    def logits_at(self, ids: torch.Tensor, positions: torch.Tensor, *,
                  embed_offset: torch.Tensor | None = None) -> torch.Tensor:
        """Next-token logits at one position per row: ``forward(ids)[b, positions[b]]``, cheaper.

        Causality makes everything after ``positions[b]`` irrelevant, and the last block is only
        needed at that position: its keys and values come from every earlier position, but its
        attention output, MLP, final norm and vocabulary projection are computed for one token
        per row (about 40% of the work of :meth:`forward` for short sequences).

        Parameters
        ----------
        ids : LongTensor (B, T); positions : LongTensor (B,), on the same device.
        embed_offset : FloatTensor broadcastable to (B, T, D), optional, as in :meth:`forward`.

        Returns
        -------
        FloatTensor (B, vocab).
        """
        B, T = ids.shape
        x = self.embed(ids)
        if embed_offset is not None:
            x = x + embed_offset
        if T > self.cfg.max_len:
            raise ValueError(f"sequence length {T} exceeds max_len={self.cfg.max_len}")
        x = x + self.pos(torch.arange(T, device=x.device))
        for block in self.blocks[:-1]:
            x = block(x)
        last = self.blocks[-1]
        rows = torch.arange(B, device=x.device)
        H, D = last.attn.n_heads, self.cfg.d_model
        q, k, v = last.attn.qkv(last.ln1(x)).view(B, T, 3, H, D // H).permute(2, 0, 3, 1, 4)
        q = q[rows, :, positions][:, :, None]                           # (B, H, 1, D/H)
        visible = torch.arange(T, device=x.device)[None, :] <= positions[:, None]  # (B, T)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=visible[:, None, None, :])
        h = x[rows, positions] + last.attn.proj(y.reshape(B, D))
        h = h + last.mlp(last.ln2(h))
        return self.ln_f(h) @ self.tok.weight.T

    def n_params(self) -> int:
        """Number of parameters (tied embeddings counted once)."""
        return sum(p.numel() for p in self.parameters())
