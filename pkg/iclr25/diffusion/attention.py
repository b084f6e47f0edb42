"""Attention processors that let one image's attention read another image's keys and values.

A diffusers :class:`~diffusers.models.attention_processor.Attention` layer calls its *processor*
with the layer's input. :class:`RoutedAttnProcessor` computes the same thing as diffusers'
``AttnProcessor2_0`` (group norm, ``softmax(Q K^T / sqrt(d)) V``, output projection, residual),
except that it first asks a *controller* where the queries, keys and values come from and how hot
the softmax is. Controllers:

- :class:`AttentionRecorder` records every layer's normalised input (no change to the output);
- :class:`KVInjection` replaces the keys and values of chosen samples with those of a source image
  recorded earlier (the reference), and blends their queries with another recorded image's (the
  context): the attention-injection style-transfer baselines (StyleID, Cross-Image Attention);
- :class:`CrossFrameAttention` lets every frame of a clip attend to its own tokens and to those of
  an anchor frame: the training-free image-to-video trick.

Install with :func:`set_attention_controller`; :func:`reset_attention` restores diffusers' default.
"""

from __future__ import annotations

import math
from typing import Protocol

import torch
import torch.nn.functional as F
from diffusers.models.attention_processor import Attention, AttnProcessor2_0


class AttentionController(Protocol):
    """Decides, per attention layer, the query input ``(B, N, C)``, the key/value input
    ``(B, M, C)`` and the softmax temperature (a number or ``(B,)``), given the layer's normalised
    input ``h`` ``(B, N, C)``."""

    def route(self, name: str, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | float]:
        ...


class RoutedAttnProcessor:
    """``AttnProcessor2_0`` with queries, keys/values and temperature chosen by a controller.

    With the identity routing (``q = kv = h``, temperature 1) it computes exactly what
    ``AttnProcessor2_0`` computes. The temperature multiplies the logits: ``softmax(tau Q K^T /
    sqrt(d))``.
    """

    def __init__(self, name: str, controller: AttentionController) -> None:
        self.name, self.controller = name, controller

    def __call__(self, attn: Attention, hidden_states: torch.Tensor,
                 encoder_hidden_states: torch.Tensor | None = None,
                 attention_mask: torch.Tensor | None = None, temb: torch.Tensor | None = None,
                 *args, **kwargs) -> torch.Tensor:
        if encoder_hidden_states is not None or attention_mask is not None or attn.spatial_norm is not None:
            raise NotImplementedError("RoutedAttnProcessor handles plain self-attention only")
        residual = hidden_states
        batch, channels, height, width = hidden_states.shape
        h = hidden_states.view(batch, channels, height * width).transpose(1, 2)
        if attn.group_norm is not None:
            h = attn.group_norm(h.transpose(1, 2)).transpose(1, 2)
        q_in, kv_in, tau = self.controller.route(self.name, h)
        query, key, value = attn.to_q(q_in), attn.to_k(kv_in), attn.to_v(kv_in)
        head_dim = key.shape[-1] // attn.heads
        split = lambda t: t.view(batch, -1, attn.heads, head_dim).transpose(1, 2)  # noqa: E731
        query, key, value = split(query), split(key), split(value)
        if not isinstance(tau, (int, float)):
            query = query * tau.view(-1, 1, 1, 1).to(query)
        elif tau != 1:
            query = query * tau
        out = F.scaled_dot_product_attention(query, key, value, scale=1 / math.sqrt(head_dim))
        out = out.transpose(1, 2).reshape(batch, -1, attn.heads * head_dim)
        out = attn.to_out[1](attn.to_out[0](out))
        out = out.transpose(-1, -2).reshape(batch, channels, height, width)
        if attn.residual_connection:
            out = out + residual
        return out / attn.rescale_output_factor


def attention_probs(attn: Attention, h_query: torch.Tensor, h_key: torch.Tensor, tau: float = 1.0) -> torch.Tensor:
    """The attention weights of one diffusers attention layer ``attn`` when the normalised inputs
    ``h_query`` ``(B, N, C)`` give the queries and ``h_key`` ``(B, M, C)`` the keys (as recorded by
    :class:`AttentionRecorder`): ``softmax(tau to_q(h_q) to_k(h_k)^T / sqrt(d))`` per head,
    ``(B, heads, N, M)``. With ``h_query = h_key`` these are the weights the layer applies to its values
    (what :class:`RoutedAttnProcessor` computes with the identity routing)."""
    batch = h_query.shape[0]
    query, key = attn.to_q(h_query), attn.to_k(h_key)
    head_dim = key.shape[-1] // attn.heads
    split = lambda t: t.view(batch, -1, attn.heads, head_dim).transpose(1, 2)  # noqa: E731
    logits = tau * split(query) @ split(key).transpose(-1, -2) / math.sqrt(head_dim)
    return logits.softmax(dim=-1)


def attention_layers(model: torch.nn.Module) -> list[str]:
    """Names (as in ``model.named_modules()``) of the diffusers attention layers of ``model``."""
    return [name for name, m in model.named_modules() if isinstance(m, Attention)]


def set_attention_controller(model: torch.nn.Module, controller: AttentionController) -> None:
    """Route every attention layer of ``model`` through ``controller``."""
    for name in attention_layers(model):
        model.get_submodule(name).set_processor(RoutedAttnProcessor(name, controller))


def reset_attention(model: torch.nn.Module) -> None:
    """Back to diffusers' default processor (``AttnProcessor2_0``) in every attention layer."""
    for name in attention_layers(model):
        model.get_submodule(name).set_processor(AttnProcessor2_0())


class IdentityRouting:
    """Plain self-attention (queries, keys and values from the layer's own input)."""

    def route(self, name, h):
        return h, h, 1.0


class AttentionRecorder:
    """Records each layer's normalised input ``(B, N, C)`` in ``self.states[name]`` (detached),
    leaving the attention unchanged."""

    def __init__(self) -> None:
        self.states: dict[str, torch.Tensor] = {}

    def route(self, name, h):
        self.states[name] = h.detach()
        return h, h, 1.0


class KVInjection:
    """Keys and values from a source, queries blended with a query source, for chosen samples.

    ``kv_states[name]`` and ``q_states[name]`` are ``(B, N, C)`` normalised inputs of the same layer
    recorded (with :class:`AttentionRecorder`) from the source images (the reference) and the query
    images (the context), aligned with the batch this controller serves. For sample ``b`` and layer
    ``name`` in ``layers`` with ``active[b]``:

        Q = to_q((1 - gamma_b) h + gamma_b h_q),  K, V = to_k(h_kv), to_v(h_kv),  logits * tau_b ,

    (query preservation ``gamma`` as in StyleID; ``gamma = 1`` takes the queries from the context,
    as Cross-Image Attention does); other samples and layers attend to themselves. ``gamma``,
    ``tau`` and ``active`` are ``(B,)`` tensors; set ``active`` between steps to choose a timestep
    window. ``layers`` is ``None`` (every attention layer), a set of layer names (the same for every
    sample), or a dict from layer name to a ``(B,)`` boolean mask of the samples that inject there
    (a layer missing from the dict injects for none), so that one batch can hold several layer sets.
    """

    def __init__(self, kv_states: dict[str, torch.Tensor], q_states: dict[str, torch.Tensor],
                 gamma: torch.Tensor, tau: torch.Tensor, active: torch.Tensor,
                 layers: set[str] | dict[str, torch.Tensor] | None = None) -> None:
        self.kv_states, self.q_states = kv_states, q_states
        self.gamma, self.tau, self.active = gamma, tau, active
        self.layers = layers

    def route(self, name, h):
        if name not in self.kv_states:
            return h, h, 1.0
        active = self.active
        if isinstance(self.layers, dict):
            if name not in self.layers:
                return h, h, 1.0
            active = active & self.layers[name].to(active.device)
        elif self.layers is not None and name not in self.layers:
            return h, h, 1.0
        on = active.view(-1, 1, 1).to(h.dtype)
        gamma = self.gamma.view(-1, 1, 1).to(h) * on
        q_in = (1 - gamma) * h + gamma * self.q_states[name]
        kv_in = on * self.kv_states[name] + (1 - on) * h
        tau = 1 + (self.tau.to(h) - 1) * active.to(h)
        return q_in, kv_in, tau


class CrossFrameAttention:
    """Every frame attends to its own tokens and to those of the clip's anchor frame.

    The batch holds ``B / frames`` clips of ``frames`` consecutive frames each; the keys and values
    of frame ``f`` are its own tokens followed by the anchor frame's (``(B, 2N, C)``). With
    ``frames = 1`` the anchor is the frame itself and keys repeat, which leaves softmax attention
    unchanged.
    """

    def __init__(self, frames: int, anchor: int = 0) -> None:
        self.frames, self.anchor = frames, anchor

    def route(self, name, h):
        b, n, c = h.shape
        clips = h.view(b // self.frames, self.frames, n, c)
        anchor = clips[:, self.anchor:self.anchor + 1].expand(-1, self.frames, -1, -1).reshape(b, n, c)
        return h, torch.cat([h, anchor], dim=1), 1.0
