"""Read, write and probe the inside of a :class:`~iclr25.lm.model.TinyLM`.

What knowledge editing (ROME, MEMIT), pruning (magnitude, Wanda, SparseGPT), unlearning (RMU) and
perturbation-aware alignment (Vaccine) need, without changing the model's code:

* one block's MLP ``m(x) = W_out GELU(W_in LN(x) + b_in) + b_out``: :func:`get_mlp_weights`,
  :func:`set_mlp_weights`; its *keys* ``k = GELU(W_in LN(x) + b_in)`` (the input of ``W_out``,
  ``d_ff``-dimensional): :func:`mlp_keys`, and their second moment :func:`key_covariance`
  ``C = K^T K / n`` (ROME's statistics);
* the inputs ``X`` (n, in_features) of any linear layer, the calibration data of Wanda and
  SparseGPT (``H = X^T X``): :func:`linear_inputs`, :func:`transformer_linears`;
* the attention pattern of a block, ``softmax(Q K^T / sqrt(d_head))`` with the causal mask:
  :func:`attention_probs` (what attention-aware pruning approximates);
* additive interventions while the model runs: :func:`add_to_mlp_output` (ROME's ``v*``
  optimisation adds ``delta`` at the subject position) and :func:`add_to_block_output` (a
  residual-stream perturbation, as in Vaccine). The residual stream itself is
  ``model(ids, return_hidden=True)[1]`` (``hidden[l + 1]`` is the output of block ``l``).

Everything works on the model's device; ``ids`` may live anywhere.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import torch
from torch import nn

from iclr25.lm.model import TinyLM


def _check_layer(model: TinyLM, layer: int) -> int:
    n = len(model.blocks)
    if not -n <= layer < n:
        raise ValueError(f"layer {layer} out of range for a model with {n} blocks")
    return layer % n


def mlp_in(model: TinyLM, layer: int) -> nn.Linear:
    """The first MLP linear map ``W_in`` of block ``layer`` (d_model -> d_ff)."""
    return model.blocks[_check_layer(model, layer)].mlp[0]


def mlp_out(model: TinyLM, layer: int) -> nn.Linear:
    """The second MLP linear map ``W_out`` of block ``layer`` (d_ff -> d_model): the matrix ROME
    and MEMIT edit."""
    return model.blocks[_check_layer(model, layer)].mlp[2]


@dataclass(frozen=True)
class MLPWeights:
    """Copies of one block's MLP parameters: ``W_in`` (d_ff, d), ``b_in`` (d_ff,), ``W_out``
    (d, d_ff), ``b_out`` (d,) (``nn.Linear`` layout: ``y = W x + b``)."""

    W_in: torch.Tensor
    b_in: torch.Tensor
    W_out: torch.Tensor
    b_out: torch.Tensor


def get_mlp_weights(model: TinyLM, layer: int) -> MLPWeights:
    """Detached copies of block ``layer``'s MLP weights (on the model's device)."""
    a, b = mlp_in(model, layer), mlp_out(model, layer)
    return MLPWeights(a.weight.detach().clone(), a.bias.detach().clone(),
                      b.weight.detach().clone(), b.bias.detach().clone())


@torch.no_grad()
def set_mlp_weights(model: TinyLM, layer: int, weights: MLPWeights | None = None, *,
                    W_in: torch.Tensor | None = None, b_in: torch.Tensor | None = None,
                    W_out: torch.Tensor | None = None, b_out: torch.Tensor | None = None) -> None:
    """Overwrite block ``layer``'s MLP weights in place (all of ``weights``, or any of the named
    ones); shapes must match, values are copied to the model's device and dtype."""
    if weights is not None:
        W_in, b_in, W_out, b_out = (W_in if W_in is not None else weights.W_in,
                                    b_in if b_in is not None else weights.b_in,
                                    W_out if W_out is not None else weights.W_out,
                                    b_out if b_out is not None else weights.b_out)
    a, b = mlp_in(model, layer), mlp_out(model, layer)
    for param, value in ((a.weight, W_in), (a.bias, b_in), (b.weight, W_out), (b.bias, b_out)):
        if value is not None:
            if value.shape != param.shape:
                raise ValueError(f"shape {tuple(value.shape)} does not match {tuple(param.shape)}")
            param.copy_(value)


def transformer_linears(model: TinyLM) -> dict[str, nn.Linear]:
    """Every ``nn.Linear`` inside the transformer blocks, by qualified name
    (``"blocks.0.attn.qkv"``, ``"blocks.0.attn.proj"``, ``"blocks.0.mlp.0"``, ``"blocks.0.mlp.2"``,
    ...): what compression acts on (embeddings and the tied unembedding are left alone)."""
    return {name: m for name, m in model.named_modules()
            if name.startswith("blocks.") and isinstance(m, nn.Linear)}


def _positions(ids: torch.Tensor, mask: torch.Tensor | None, pad_id: int) -> torch.Tensor:
    """Boolean (B, T) selection: ``mask != 0`` if given, else the non-pad tokens."""
    return (ids != pad_id) if mask is None else (mask != 0)


def capture_inputs(model: TinyLM, modules: dict[str, nn.Module], ids: torch.Tensor) -> dict[str, torch.Tensor]:
    """Run ``model(ids)`` once and return the input of each module in ``modules`` (by name),
    shape (B, T, in_features). Differentiable when called with gradients enabled."""
    got: dict[str, torch.Tensor] = {}
    handles = [m.register_forward_pre_hook(lambda _m, args, name=name: got.__setitem__(name, args[0]))
               for name, m in modules.items()]
    try:
        model(ids.to(next(model.parameters()).device))
    finally:
        for h in handles:
            h.remove()
    return got


def mlp_keys(model: TinyLM, ids: torch.Tensor, layer: int) -> torch.Tensor:
    """The MLP keys of block ``layer``, ``k = GELU(W_in LN(x) + b_in)``, at every position:
    (B, T, d_ff). Differentiable when called with gradients enabled."""
    return capture_inputs(model, {"k": mlp_out(model, layer)}, ids)["k"]


@torch.no_grad()
def linear_inputs(model: TinyLM, ids: torch.Tensor, module: nn.Linear | str,
                  mask: torch.Tensor | None = None, *, pad_id: int = 0,
                  batch_size: int = 256) -> torch.Tensor:
    """Inputs ``X`` (n, in_features) of a linear layer (a module or its name in
    :func:`transformer_linears`) at the selected token positions (``mask != 0``, default every
    non-pad token), in row-major (sequence, position) order: Wanda's and SparseGPT's calibration
    data."""
    if isinstance(module, str):
        linears = transformer_linears(model)
        if module not in linears:
            raise ValueError(f"{module!r} is not a transformer linear; valid: {', '.join(linears)}")
        module = linears[module]
    rows = []
    for i in range(0, ids.shape[0], batch_size):
        x = capture_inputs(model, {"x": module}, ids[i:i + batch_size])["x"]
        sel = _positions(ids[i:i + batch_size], None if mask is None else mask[i:i + batch_size], pad_id)
        rows.append(x[sel.to(x.device)])
    return torch.cat(rows)


@torch.no_grad()
def key_covariance(model: TinyLM, ids: torch.Tensor, layer: int, mask: torch.Tensor | None = None,
                   *, pad_id: int = 0, batch_size: int = 256) -> torch.Tensor:
    """ROME's key statistics ``C = K^T K / n`` (uncentred second moment, float64) of block
    ``layer``'s MLP keys over the selected token positions (default every non-pad token):
    (d_ff, d_ff)."""
    K = linear_inputs(model, ids, mlp_out(model, layer), mask, pad_id=pad_id, batch_size=batch_size)
    K = K.double()
    return K.T @ K / K.shape[0]


def attention_probs(model: TinyLM, ids: torch.Tensor, layer: int) -> torch.Tensor:
    """Causal attention probabilities of block ``layer``: (B, n_heads, T, T), rows sum to 1 and
    entries above the diagonal are 0. Computed from the block's input exactly as the model does
    (``Q, K`` from ``attn.qkv`` applied to ``LN1(x)``). Differentiable."""
    attn = model.blocks[_check_layer(model, layer)].attn
    x = capture_inputs(model, {"x": attn.qkv}, ids)["x"]
    B, T, D = x.shape
    H = attn.n_heads
    q, k, _ = attn.qkv(x).view(B, T, 3, H, D // H).permute(2, 0, 3, 1, 4)
    scores = q @ k.transpose(-1, -2) / (D // H) ** 0.5
    causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
    return torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)


@contextmanager
def add_to_mlp_output(model: TinyLM, layer: int, delta: torch.Tensor,
                      positions: torch.Tensor | int) -> Iterator[None]:
    """While active, add ``delta`` to block ``layer``'s MLP output at one position per sequence.

    ``delta`` (d,) or (B, d); ``positions`` an int or LongTensor (B,) (e.g. the subject's last
    token, :func:`iclr25.lm.data.token_position`). Gradients flow into ``delta``: this is ROME's
    ``v* = W_out k* + delta`` optimisation.
    """
    mlp = model.blocks[_check_layer(model, layer)].mlp

    def hook(_m: nn.Module, _args: tuple, out: torch.Tensor) -> torch.Tensor:
        B = out.shape[0]
        pos = torch.as_tensor(positions, device=out.device).long()
        pos = pos.expand(B) if pos.dim() == 0 else pos
        d = delta.to(out.device, out.dtype).expand(B, -1)
        onehot = torch.zeros(B, out.shape[1], 1, device=out.device, dtype=out.dtype)
        onehot[torch.arange(B, device=out.device), pos] = 1.0
        return out + onehot * d[:, None, :]

    handle = mlp.register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()


@contextmanager
def add_to_block_output(model: TinyLM, layer: int, delta: torch.Tensor) -> Iterator[None]:
    """While active, add ``delta`` (broadcastable to (B, T, d)) to the output of block ``layer``
    (the residual stream after it). Gradients flow into ``delta``."""
    block = model.blocks[_check_layer(model, layer)]
    handle = block.register_forward_hook(lambda _m, _a, out: out + delta.to(out.device, out.dtype))
    try:
        yield
    finally:
        handle.remove()
