"""Style transfer by steering the sampling of an inverted context image: Semantix and its baselines.

Every method here starts from the edit-friendly inversion of the context (its trajectory ``xs_c``
and noise maps ``zs_c``, :func:`~iclr25.diffusion.inversion.ddpm_invert`) and re-samples it with the
context's noise maps, so that a method that changes nothing returns the context exactly. They differ
in what changes the noise prediction along the way:

- :func:`guided_transfer`: the gradient of an energy of the U-Net's features (Semantix's three terms,
  or the global feature-statistics energy), :func:`transfer_energy`;
- :func:`kv_injection_transfer`: the output's self-attention reads the reference's keys and values
  (StyleID / Cross-Image-Attention-like injection);

and two baselines that need no sampler: :func:`reinhard_transfer` (global colour statistics) and
:func:`sdedit` (re-noise the context and denoise it with fresh noise, no reference).

Feature maps are read at the layers ``names`` and resized to ``size x size`` tokens
(:func:`~iclr25.diffusion.features.to_tokens`); a list of per-layer ``(B, N, C_l)`` token tensors is
a *feature set*.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import torch
from diffusers import DDIMScheduler, UNet2DModel

from iclr25.diffusion.attention import (AttentionRecorder, KVInjection, attention_probs, reset_attention,
                                        set_attention_controller)
from iclr25.diffusion.features import FeatureHook, to_tokens
from iclr25.diffusion.guidance import block_rms, energy_and_gradient, low_passed, normalised
from iclr25.diffusion.inversion import alpha_bar, unet_eps
from iclr25.diffusion.semantix import (colour_style_energy, global_style_energy, joint_features,
                                       semantic_distance_energy, spatial_energy, style_energy)

FeatureSet = list[torch.Tensor]
"""Per-layer tokens ``[(B, N, C_l)]`` at a common resolution."""


def layer_tokens(feats: dict[str, torch.Tensor], names: Sequence[str], size: int) -> FeatureSet:
    """The hooked feature maps ``feats[name]`` ``(B, C_l, H_l, W_l)`` of ``names`` as tokens
    ``(B, size^2, C_l)`` each."""
    return [to_tokens(feats[n], size) for n in names]


@torch.no_grad()
def trajectory_features(unet: UNet2DModel, sched: DDIMScheduler, xs: torch.Tensor, names: Sequence[str],
                        size: int, steps: int | None = None) -> list[FeatureSet]:
    """The features of the first ``steps`` (default all) points of a trajectory ``xs``
    ``(S + 1, B, C, H, W)``: element ``i`` is the feature set of ``unet(xs[i], t_i)``."""
    out = []
    for i, t in enumerate(list(sched.timesteps)[:steps]):
        with FeatureHook(unet, names) as feats:
            unet(xs[i], int(t))
        out.append([f.detach() for f in layer_tokens(feats, names, size)])
    return out


@torch.no_grad()
def matching_descriptors(unet: UNet2DModel, x0: torch.Tensor, t: int, names: Sequence[str], size: int,
                         g: torch.Generator) -> torch.Tensor:
    """Descriptors for semantic correspondence: the :func:`~iclr25.diffusion.semantix.joint_features`
    of ``unet`` at ``x_t = sqrt(abar_t) x0 + sqrt(1 - abar_t) eps`` (noise from the CPU generator
    ``g``), ``(B, size^2, sum C_l)`` with unit norm per location. ``x0`` ``(B, C, H, W)``."""
    with FeatureHook(unet, names) as feats:
        unet(noised(x0, t, g), t)
    return joint_features(layer_tokens(feats, names, size))


def noised(x0: torch.Tensor, t: int, g: torch.Generator) -> torch.Tensor:
    """``x_t = sqrt(abar_t) x0 + sqrt(1 - abar_t) eps`` of the training schedule, noise from the CPU
    generator ``g``; ``x0`` ``(B, C, H, W)``."""
    a = alpha_bar_train(t)
    eps = torch.randn(x0.shape, generator=g).to(x0)
    return a.sqrt() * x0 + (1 - a).sqrt() * eps


@torch.no_grad()
def attention_weights(unet: UNet2DModel, x_query: torch.Tensor, x_key: torch.Tensor, t: int, size: int,
                      g_query: torch.Generator, g_key: torch.Generator) -> dict[str, torch.Tensor]:
    """Cross-image attention weights of every attention layer of ``unet``: the softmax of the query
    image's queries against the key image's keys, i.e. the weights with which key/value injection
    (:func:`kv_injection_transfer`) mixes the key image's values at a layer it injects (a soft
    mixture, not one partner). Both images ``(B, C, H, W)`` are :func:`noised` to
    ``t`` (noise from ``g_query``, ``g_key``, as in :func:`matching_descriptors`), every layer's
    normalised input is recorded, and the query image's queries attend to the key image's keys
    (:func:`~iclr25.diffusion.attention.attention_probs`, temperature 1, heads averaged). Returns
    ``{layer name: (B, size^2, size^2)}``: a layer with ``s^2`` tokens (``s`` dividing ``size``) gives
    each query token its ``(size/s)^2`` block's row and spreads each key token's weight equally over
    its block, so every row still sums to 1."""
    states = []
    try:
        for x, g in ((x_query, g_query), (x_key, g_key)):
            rec = AttentionRecorder()
            set_attention_controller(unet, rec)
            unet(noised(x, t, g), t)
            states.append(rec.states)
    finally:
        reset_attention(unet)
    out = {}
    for name, h_q in states[0].items():
        p = attention_probs(unet.get_submodule(name), h_q, states[1][name]).mean(1)     # (B, s^2, s^2)
        b, s = p.shape[0], math.isqrt(p.shape[1])
        r = size // s
        if r * s != size:
            raise ValueError(f"layer {name}: {s} x {s} tokens do not divide {size}")
        p = p.view(b, s, s, s * s).repeat_interleave(r, 1).repeat_interleave(r, 2).reshape(b, size * size, s, s)
        out[name] = p.repeat_interleave(r, 2).repeat_interleave(r, 3).reshape(b, size * size, size * size) / r ** 2
    return out


def attention_match(weights: dict[str, torch.Tensor], layers: Sequence[str], pos_weight: float = 0.0) -> torch.Tensor:
    """Correspondence from attention: ``m(i) = argmax_j a_ij / max_j a_ij + pos_weight <p_i, p_j>`` with ``a`` the
    :func:`attention_weights` summed over ``layers`` (each row scaled to a maximum of 1, so that the
    position prior of :func:`~iclr25.diffusion.semantix.semantic_match` has the same weight against it as
    against a cosine), ``(B, size^2)`` indices into the key image's tokens (within a coarse layer's block,
    ties go to the lowest index unless the position term breaks them)."""
    a = sum(weights[n] for n in layers)
    if not pos_weight:
        return a.argmax(dim=-1)
    from iclr25.diffusion.semantix import position_codes

    p = position_codes(math.isqrt(a.shape[-1]), a.device)
    return (a / a.amax(-1, keepdim=True) + pos_weight * (p @ p.T)).argmax(dim=-1)


def alpha_bar_train(t: int) -> torch.Tensor:
    """``abar_t`` of the training schedule (:func:`~iclr25.diffusion.unet.train_schedule`)."""
    from iclr25.diffusion.unet import train_schedule

    return train_schedule().alphas_cumprod[int(t)]


@dataclass
class EnergyWeights:
    """Per-sample weights ``(B,)`` of the energy terms (:func:`transfer_energy`): ``style``
    (Semantix's style feature guidance), ``spatial`` (spatial feature guidance), ``semantic``
    (semantic-distance regulariser), ``global_style`` (the global feature-statistics baseline),
    ``colour`` (the colour level of style guidance, :func:`~iclr25.diffusion.semantix.colour_style_energy`)
    ``global_colour`` (its global counterpart: the colour statistics of the whole image), ``raw_style``
    (the style term with the raw, uncentred cosine, a control) and ``centred_style`` (the style term with
    the reference-centred cosine, a control)."""

    style: torch.Tensor
    spatial: torch.Tensor
    semantic: torch.Tensor
    global_style: torch.Tensor
    colour: torch.Tensor
    global_colour: torch.Tensor
    raw_style: torch.Tensor
    centred_style: torch.Tensor

    @staticmethod
    def stack(rows: Sequence[dict], device: torch.device | str = "cpu") -> "EnergyWeights":
        """Weights from one dict per sample (missing keys are 0)."""
        col = lambda k: torch.tensor([float(r.get(k, 0.0)) for r in rows], device=device)  # noqa: E731
        return EnergyWeights(col("style"), col("spatial"), col("semantic"), col("global_style"), col("colour"),
                             col("global_colour"), col("raw_style"), col("centred_style"))


def transfer_energy(f_out: FeatureSet, f_ctx: FeatureSet, f_ref: FeatureSet, idx: torch.Tensor,
                    w: EnergyWeights, temperature: float = 0.1, centre: str = "reference") -> torch.Tensor:
    """The energy of each output ``(B,)``, averaged over layers ``l``:

    ``E = w_sty E_sty(phi_o, phi_r, m) + w_raw E_sty,raw + w_spa E_spa(phi_o, phi_c) + w_sem E_sem(phi_o, phi_c, phi_r)
    + w_glob E_glob(phi_o, phi_r)`` (:mod:`iclr25.diffusion.semantix`). ``idx`` ``(B, N)`` is the
    correspondence ``m`` from context to reference tokens; terms with zero weight everywhere are
    skipped. ``centre`` is the centring of ``E_sty`` (:func:`~iclr25.diffusion.semantix.style_energy`)."""
    total = torch.zeros(idx.shape[0], device=idx.device)
    for fo, fc, fr in zip(f_out, f_ctx, f_ref):
        if w.style.any():
            total = total + w.style * style_energy(fo, fr, idx, centre)
        if w.raw_style.any():
            total = total + w.raw_style * style_energy(fo, fr, idx, centre="none")
        if w.centred_style.any():
            total = total + w.centred_style * style_energy(fo, fr, idx, centre="reference")
        if w.spatial.any():
            total = total + w.spatial * spatial_energy(fo, fc)
        if w.semantic.any():
            total = total + w.semantic * semantic_distance_energy(fo, fc, fr, temperature)
        if w.global_style.any():
            total = total + w.global_style * global_style_energy(fo, fr)
    return total / len(f_out)


def colour_energy(c_out: torch.Tensor, c_ref: torch.Tensor, idx: torch.Tensor, w: EnergyWeights,
                  token_weight: torch.Tensor | None = None) -> torch.Tensor:
    """The colour terms ``w_col E_col(c_o, c_r, m) + w_gcol E_glob(c_o, c_r)`` ``(B,)`` of token colours
    ``c_out`` ``(B, N, 3)`` and ``c_ref`` ``(B, M, 3)`` (:func:`token_colours`); terms with zero weight
    everywhere are skipped. ``token_weight`` ``(B, N)`` weighs the tokens of ``E_col`` (default 1)."""
    total = torch.zeros(idx.shape[0], device=idx.device)
    if w.colour.any():
        total = total + w.colour * colour_style_energy(c_out, c_ref, idx, token_weight)
    if w.global_colour.any():
        total = total + w.global_colour * global_style_energy(c_out, c_ref)
    return total


def token_colours(x: torch.Tensor, size: int) -> torch.Tensor:
    """Mean colour of each of ``size x size`` blocks of images ``x`` ``(B, C, H, W)``, as tokens
    ``(B, size^2, C)`` (row-major, like :func:`~iclr25.diffusion.features.to_tokens`)."""
    return torch.nn.functional.adaptive_avg_pool2d(x, size).flatten(2).transpose(1, 2)


@torch.no_grad()
def trajectory_colours(unet: UNet2DModel, sched: DDIMScheduler, xs: torch.Tensor, size: int) -> list[torch.Tensor]:
    """The :func:`token_colours` ``(B, size^2, C)`` of the predicted clean image
    ``x0_hat = (x_t - sqrt(1 - abar_t) eps_theta(x_t, t)) / sqrt(abar_t)`` at every point ``xs[i]`` of a
    trajectory ``(S + 1, B, C, H, W)`` but the last (the colour counterpart of :func:`trajectory_features`)."""
    out = []
    for i, t in enumerate(sched.timesteps):
        a = float(alpha_bar(sched, int(t)))
        x0 = (xs[i] - (1 - a) ** 0.5 * unet(xs[i], int(t)).sample) / a ** 0.5
        out.append(token_colours(x0, size))
    return out


def x0_scale(sched: DDIMScheduler, t: int) -> float:
    """``sqrt(abar_t / (1 - abar_t))``: adding ``c * x0_scale(t) * d`` to the noise prediction moves the
    predicted clean image ``x0_hat = (x_t - sqrt(1 - abar_t) eps) / sqrt(abar_t)`` by ``-c d``, the
    same amount at every noise level."""
    a = float(alpha_bar(sched, t))
    return (a / (1 - a)) ** 0.5


def guided_transfer(unet: UNet2DModel, sched: DDIMScheduler, xs_ctx: torch.Tensor, zs_ctx: torch.Tensor,
                    ctx_feats: list[FeatureSet], ref_feats: list[FeatureSet], idx: torch.Tensor,
                    weights: EnergyWeights, eta: torch.Tensor, guide_from: int | torch.Tensor, names: Sequence[str],
                    size: int, ref_colours: list[torch.Tensor] | None = None, smooth: int | torch.Tensor = 1,
                    colour_token_weight: torch.Tensor | None = None, n_grad: int | torch.Tensor = 1,
                    progress: Callable | None = None, floor: float | torch.Tensor = 1e-3, block: int = 0,
                    centre: str = "reference", stats: dict | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Energy-guided re-sampling of inverted contexts (the Semantix sampler).

    From ``xs_ctx[0]`` (the context's inverted start, ``(B, C, H, W)``), the first ``guide_from`` steps
    (a number, or ``(B,)``: one per sample) are plain and every later step (the low-noise end, where
    edits survive) uses the guided noise
    prediction ``eps + eta_b * x0_scale(t) * normalised(smoothed(grad E_b))`` (:func:`x0_scale`;
    :func:`~iclr25.diffusion.guidance.normalised`): a block whose smoothed gradient's RMS reaches ``floor``
    moves the predicted clean image by ``eta_b`` RMS per step, a block below it by ``eta_b * rms / floor``
    (a plain gradient step, the tilted-score step with temperature
    ``eta_b * sqrt(abar_t) / (floor * (1 - abar_t))``), with ``E`` the :func:`transfer_energy` of the
    output's features against the context's and reference's features *at the same step*
    (``ctx_feats[i]``, ``ref_feats[i]``, from their inverted trajectories), plus the :func:`colour_energy`
    of the output's predicted clean image ``x0_hat`` against the reference's at the same step,
    ``ref_colours[i]`` ``(B, M, 3)`` (:func:`trajectory_colours`; needed when a colour weight is non-zero;
    ``colour_token_weight`` ``(B, N)`` optionally weighs its tokens). ``smooth`` is the low-pass width, a
    number or ``(B,)`` integers. ``n_grad`` (a number or ``(B,)`` integers) is the number of gradient
    steps per guided timestep: the first ``n_grad - 1`` move ``x_t`` itself by
    ``-sqrt(1 - abar_t) eta_b x0_scale(t) g_hat`` (the same move of ``x0_hat`` as the guided noise
    prediction makes), each with the gradient at the point reached, and the last is the guided step.
    ``floor`` and ``block`` set the normalisation (:func:`~iclr25.diffusion.guidance.normalised`: per
    sample, or per ``block x block`` region of pixels); ``floor`` is a number, ``(B,)`` (one per sample) or
    ``(S, B)`` (one per sampling step and sample, e.g. tied to the gradient's scale at each step).
    ``stats``, a dict, receives per guided step ``"capped"`` ``(B,)`` (the share of blocks whose RMS
    reaches the floor, i.e. that move by the full ``eta``) and ``"median"`` ``(B,)`` (the median block
    RMS of the low-passed gradient; with ``eta = 0`` the trajectory is the context's, so this measures
    the gradient's scale along it). Every step uses the context's noise map ``zs_ctx[i]``, so ``eta = 0``
    returns the context. Returns the outputs ``(B, C, H, W)`` and the energies of the steps from the
    earliest guided one, ``(S - min(guide_from), B)``."""
    energies = []
    colour = bool(weights.colour.any() or weights.global_colour.any())
    hooked = list(names) + (["conv_out"] if colour else [])

    def energy_at(i, t):
        a = float(alpha_bar(sched, t))

        def energy(feats, x):
            e = transfer_energy(layer_tokens(feats, names, size), ctx_feats[i], ref_feats[i], idx, weights,
                                centre=centre)
            if colour:   # x0_hat from the noise prediction (the U-Net's last layer, conv_out)
                x0 = (x - (1 - a) ** 0.5 * feats["conv_out"]) / a ** 0.5
                e = e + colour_energy(token_colours(x0, size), ref_colours[i], idx, weights, colour_token_weight)
            return e
        return energy

    plain = unet_eps(unet)
    b = xs_ctx.shape[1]
    start = torch.as_tensor(guide_from, device=xs_ctx.device).expand(b)
    inner = torch.as_tensor(n_grad, device=xs_ctx.device).expand(b)
    x = xs_ctx[0]
    floor = torch.as_tensor(floor, dtype=x.dtype, device=x.device)
    floors_at = (lambda i: floor[i]) if floor.dim() == 2 else (lambda i: floor.expand(b))  # noqa: E731
    steps = list(enumerate(sched.timesteps))
    for i, t in (progress(steps) if progress else steps):
        t = int(t)
        if i < int(start.min()):
            eps = plain(x, t, i)
        else:
            scale = eta * x0_scale(sched, t) * (i >= start).to(x.dtype)
            shift = (1 - float(alpha_bar(sched, t))) ** 0.5
            for k in range(int(inner.max())):          # n_grad - 1 extra gradient steps on x_t itself, then the step
                eps, e, g = energy_and_gradient(unet, x, t, energy_at(i, t), hooked)
                g = low_passed(g, smooth)
                direction = normalised(g, floors_at(i), block)
                if k < int(inner.max()) - 1:
                    move = (scale * (inner > k + 1).to(x.dtype)).view(-1, 1, 1, 1)
                    x = (x - shift * move * direction).detach()
            eps = eps + scale.view(-1, 1, 1, 1) * direction
            if stats is not None:
                rms = block_rms(g, block or g.shape[-1]).flatten(1)
                stats.setdefault("capped", []).append((rms >= floors_at(i).view(-1, 1)).float().mean(1))
                stats.setdefault("median", []).append(rms.median(1).values)
            energies.append(e)
        x = sched.step(eps.detach(), t, x, eta=1.0, variance_noise=zs_ctx[i]).prev_sample
    return x.detach(), torch.stack(energies) if energies else torch.zeros(0, b)


@torch.no_grad()
def kv_injection_transfer(unet: UNet2DModel, sched: DDIMScheduler, xs_ctx: torch.Tensor, zs_ctx: torch.Tensor,
                          xs_ref: torch.Tensor, gamma: torch.Tensor, tau: torch.Tensor,
                          window: torch.Tensor, layers: set[str] | dict[str, torch.Tensor] | None = None,
                          window_start: torch.Tensor | None = None, copies: int = 1) -> torch.Tensor:
    """Attention key/value injection (StyleID / Cross-Image-Attention-like) on the inverted context.

    At step ``i`` the reference's and the context's trajectories ``xs_ref[i]``, ``xs_ctx[i]`` are run
    to record every attention layer's input; then the output is run with its keys and values taken
    from the reference, its queries blended with the context's (``gamma`` ``(B,)``) and the logits
    scaled by ``tau`` ``(B,)`` (:class:`~iclr25.diffusion.attention.KVInjection`), for the samples with
    ``window_start_b <= i < window_b`` (``(B,)`` each, in steps; ``window_start`` default 0, the noisy
    end, so a late window is ``(S - k, S)``), at every attention layer or only at ``layers`` (names,
    or per-sample masks, see ``KVInjection``); the step uses the context's noise map. With
    ``copies = k`` the trajectories and noise maps hold ``n`` pairs and the output batch is ``B = k n``
    (``k`` settings of the same pairs, settings major): the two recording passes run once on the ``n``
    pairs, not ``k`` times. Returns ``(B, C, H, W)``."""
    x = xs_ctx[0].repeat(copies, 1, 1, 1)
    try:
        for i, t in enumerate(sched.timesteps):
            t = int(t)
            rec_ref, rec_ctx = AttentionRecorder(), AttentionRecorder()
            set_attention_controller(unet, rec_ref)
            unet(xs_ref[i], t)
            set_attention_controller(unet, rec_ctx)
            unet(xs_ctx[i], t)
            active = (i < window).to(x.device)
            if window_start is not None:
                active = active & (i >= window_start).to(x.device)
            states_ref, states_ctx = ({k: v.repeat(copies, 1, 1) for k, v in rec.states.items()}
                                      for rec in (rec_ref, rec_ctx))
            set_attention_controller(unet, KVInjection(states_ref, states_ctx, gamma, tau, active, layers))
            eps = unet(x, t).sample
            x = sched.step(eps, t, x, eta=1.0, variance_noise=zs_ctx[i].repeat(copies, 1, 1, 1)).prev_sample
    finally:
        reset_attention(unet)
    return x


def reinhard_transfer(content: torch.Tensor, style: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Global colour transfer (Reinhard et al. 2001, in RGB): every channel of each ``content`` image
    shifted and scaled to the mean and standard deviation of that channel of the ``style`` image
    (``(B, C, H, W)`` both), then clipped to ``[-1, 1]``. No notion of regions."""
    mc, sc = content.mean((2, 3), keepdim=True), content.std((2, 3), keepdim=True)
    ms, ss = style.mean((2, 3), keepdim=True), style.std((2, 3), keepdim=True)
    return ((content - mc) / (sc + eps) * ss + ms).clamp(-1, 1)


@torch.no_grad()
def sdedit(unet: UNet2DModel, sched: DDIMScheduler, x0: torch.Tensor, start: int,
           g: torch.Generator) -> torch.Tensor:
    """SDEdit (Meng et al. 2022) of images ``x0`` ``(B, C, H, W)``: noise them to the timestep of step
    ``start`` of ``sched`` with fresh noise and sample the remaining stochastic (``eta = 1``) steps with
    fresh noise (all from the CPU generator ``g``). No reference: the edit it makes is the model's."""
    ts = [int(t) for t in sched.timesteps]
    a = alpha_bar(sched, ts[start]).to(x0)
    x = a.sqrt() * x0 + (1 - a).sqrt() * torch.randn(x0.shape, generator=g).to(x0)
    for t in ts[start:]:
        z = torch.randn(x0.shape, generator=g).to(x0)
        x = sched.step(unet(x, t).sample, t, x, eta=1.0, variance_noise=z).prev_sample
    return x
