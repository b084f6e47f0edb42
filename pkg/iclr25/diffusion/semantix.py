"""Semantix's energies (our concrete instantiation) and the correspondences they use.

Semantix (He et al., ICLR 2025) steers the sampling of a context image with the gradient of an
energy made of three terms: **style feature guidance** (the output's diffusion features at every
location should look like the reference's features at the *semantically corresponding* location),
**spatial feature guidance** (the output's features should keep the context's layout) and a
**semantic distance** regulariser. The paper has no public code and we could not read its
equations, so the formulas here are a reconstruction in the style of the energy-guided editing work
it builds on (DragonDiffusion, DiffEditor); each is documented as such.

Features are ``(B, N, C)`` token tensors (:func:`iclr25.diffusion.features.to_tokens`) of one or
more U-Net layers at a common resolution; a correspondence is an index ``(B, N)`` into the
reference's tokens. Energies return one value per sample ``(B,)``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def centred_unit(f: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Tokens ``(B, N, C)`` centred per image and channel (the mean over locations removed), then
    scaled to unit norm per location: the normalised features ``phi_hat`` used for matching."""
    f = f - f.mean(dim=1, keepdim=True)
    return f / (f.norm(dim=-1, keepdim=True) + eps)


def joint_features(layers: list[torch.Tensor]) -> torch.Tensor:
    """Several layers' tokens ``[(B, N, C_l)]`` as one ``(B, N, sum C_l)`` descriptor: each layer
    :func:`centred_unit` and weighted ``1 / sqrt(L)``, so the result has unit norm per location."""
    return torch.cat([centred_unit(f) for f in layers], dim=-1) / math.sqrt(len(layers))


def grid_positions(size: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """Pixel-centre coordinates ``(size^2, 2)`` in ``[0, 1]`` of a ``size x size`` grid, row-major
    ``(row, column)`` like :func:`~iclr25.diffusion.features.to_tokens`."""
    c = (torch.arange(size, dtype=torch.float32, device=device) + 0.5) / size
    return torch.cartesian_prod(c, c)


def position_codes(size: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """Sinusoidal position codes ``p_i`` ``(size^2, 4)`` with
    ``<p_i, p_j> = (cos(pi dy) + cos(pi dx)) / 2``: 1 at the same place, falling with distance."""
    pos = math.pi * grid_positions(size, device)
    return torch.cat([pos.cos(), pos.sin()], dim=-1)[:, [0, 2, 1, 3]] / math.sqrt(2)


def semantic_match(f_query: torch.Tensor, f_key: torch.Tensor, pos_weight: float = 0.0) -> torch.Tensor:
    """Semantic correspondence ``m(i) = argmax_j <phi_q_i, phi_k_j> + pos_weight <p_i, p_j>``.

    ``f_query`` ``(B, N, C)`` and ``f_key`` ``(B, M, C)`` are normalised descriptors
    (:func:`joint_features`); position codes need ``N = M = size^2``. Returns ``(B, N)`` indices
    into the key tokens. (Ties go to the lowest index, as ``argmax`` breaks them.)
    """
    sim = f_query @ f_key.transpose(1, 2)
    if pos_weight:
        size = math.isqrt(f_query.shape[1])
        p = position_codes(size, f_query.device)
        sim = sim + pos_weight * (p @ p.T)
    return sim.argmax(dim=-1)


def identity_match(batch: int, n: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """The position control: every location matches the same location, ``(B, N)``."""
    return torch.arange(n, device=device).expand(batch, n)


def nearest_match(d_query: torch.Tensor, d_key: torch.Tensor) -> torch.Tensor:
    """Nearest neighbour in Euclidean distance: ``d_query`` ``(B, N, D)``, ``d_key`` ``(B, M, D)``
    -> ``(B, N)``. With colours as descriptors: the nearest-colour control."""
    return torch.cdist(d_query, d_key).argmin(dim=-1)


def oracle_match(labels_query: torch.Tensor, labels_key: torch.Tensor,
                 purity_key: torch.Tensor | None = None) -> torch.Tensor:
    """The oracle correspondence: for each query location, a key location of the *same* ground-truth
    class at the same relative place within that class's bounding box (a part-to-part match: the
    object's top left to the object's top left), among the key's *pure* locations of that class
    (``purity_key >= 0.99``, the fraction of the block's pixels of its class) where it has any; where
    the key lacks the class, the same location. ``labels_*`` ``(B, size, size)`` integer class maps,
    ``purity_key`` ``(B, size, size)`` or None (all pure) -> ``(B, size^2)``.

    A class one token high or wide has a degenerate box along that axis; its coordinate there is 0.
    (Matching to the *nearest* location of the class instead sends a small object to a few blocks on
    the edge of the key's object, mixed with the next class: a worse colour target than a learned match.)"""
    b, size, _ = labels_query.shape
    pos = grid_positions(size, labels_query.device)
    out = torch.arange(size * size, device=labels_query.device).repeat(b, 1)
    lq, lk = labels_query.flatten(1), labels_key.flatten(1)
    pure = (purity_key.flatten(1) >= 0.99) if purity_key is not None else torch.ones_like(lk, dtype=torch.bool)

    def box_coords(p: torch.Tensor) -> torch.Tensor:
        lo, hi = p.min(0).values, p.max(0).values
        return (p - lo) / (hi - lo).clamp(min=1e-6)

    for i in range(b):
        for c in lq[i].unique().tolist():
            mq, mk = lq[i] == c, lk[i] == c
            if not mk.any():
                continue
            if (mk & pure[i]).any():
                mk = mk & pure[i]
            keys = mk.nonzero()[:, 0]
            d = torch.cdist(box_coords(pos[mq]), box_coords(pos[mk]))
            out[i, mq] = keys[d.argmin(-1)]
    return out


def match_accuracy(idx: torch.Tensor, labels_query: torch.Tensor, labels_key: torch.Tensor,
                   n_classes: int = 3) -> torch.Tensor:
    """Fraction of query locations of each class matched to a key location of the same class:
    ``(B, n_classes)`` (NaN where the query has no such class). ``idx`` ``(B, N)``, labels
    ``(B, N)``."""
    hit = (labels_key.gather(1, idx) == labels_query).float()
    out = torch.full((idx.shape[0], n_classes), float("nan"), device=idx.device)
    for c in range(n_classes):
        mask = (labels_query == c).float()
        n = mask.sum(1)
        out[:, c] = torch.where(n > 0, (hit * mask).sum(1) / n.clamp(min=1), out[:, c])
    return out


def gather_tokens(f: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``f[b, idx[b, i]]``: tokens ``(B, M, C)`` rearranged by a correspondence ``(B, N)`` to
    ``(B, N, C)``."""
    return f.gather(1, idx.unsqueeze(-1).expand(-1, -1, f.shape[-1]))


def style_energy(f_out: torch.Tensor, f_ref: torch.Tensor, idx: torch.Tensor, centre: str = "reference") -> torch.Tensor:
    """Style feature guidance ``(B,)``: each output token is pulled towards the direction of the reference
    token it corresponds to. ``centre="none"`` is the raw cosine ``E_sty = (1/N) sum_i [1 - cos(phi_o_i,
    phi_r_m(i))]`` (zero set of each term: the open ray ``{k phi_r_m(i), k > 0}``). ``"reference"`` (the
    default) centres both sides on the *same* vector, the reference's mean token ``mu_r`` (per image and
    channel): ``1 - cos(phi_o_i - mu_r, phi_r_m(i) - mu_r)``, zero on the ray ``{mu_r + k (phi_r_m(i) - mu_r)}``,
    which removes the component every decoder token shares (it makes raw cosines 0.9 and more between any
    two tokens). ``"per-image"`` centres each side on its own image's mean token (the mean over the tokens).
    ``f_out`` ``(B, N, C)``, ``f_ref`` ``(B, M, C)``, ``idx`` ``(B, N)``."""
    partner = gather_tokens(f_ref, idx)
    if centre == "reference":
        mu = f_ref.mean(1, keepdim=True)
        a, b = f_out - mu, partner - mu
    elif centre == "per-image":
        a, b = f_out - f_out.mean(1, keepdim=True), partner - f_ref.mean(1, keepdim=True)
    elif centre == "none":
        a, b = f_out, partner
    else:
        raise ValueError(f"unknown centring {centre!r}")
    return (1 - F.cosine_similarity(a, b, dim=-1)).mean(1)


def instance_normalised(f: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """Tokens ``(B, N, C)`` normalised per image and channel over the locations (zero mean, unit
    standard deviation): what is left is where each channel is high or low, the layout."""
    return (f - f.mean(1, keepdim=True)) / (f.std(1, keepdim=True) + eps)


def spatial_energy(f_out: torch.Tensor, f_ctx: torch.Tensor) -> torch.Tensor:
    """Spatial feature guidance, ``E_spa = (1/N) sum_i [1 - cos(psi_o_i, psi_c_i)]`` ``(B,)`` with
    ``psi`` the instance-normalised features (:func:`instance_normalised`): the output keeps the
    context's layout at every location."""
    return (1 - F.cosine_similarity(instance_normalised(f_out), instance_normalised(f_ctx), dim=-1)).mean(1)


def affinities(f: torch.Tensor, f_ref: torch.Tensor, temperature: float) -> torch.Tensor:
    """``S_i(x) = softmax_j(<phi_hat_i(x), phi_hat_r_j> / temperature)``: ``(B, N, M)`` log-probabilities
    of each token's semantic relation to the reference's tokens."""
    return F.log_softmax(centred_unit(f) @ centred_unit(f_ref).transpose(1, 2) / temperature, dim=-1)


def semantic_distance_energy(f_out: torch.Tensor, f_ctx: torch.Tensor, f_ref: torch.Tensor,
                             temperature: float = 0.1) -> torch.Tensor:
    """Semantic distance regulariser, ``E_sem = (1/N) sum_i KL(S_i(x_c) || S_i(x_o))`` ``(B,)``: the
    output keeps the context's semantic relation to the reference, so pulling styles cannot change
    what a region is (our reading of the paper's third term; see :func:`affinities`)."""
    log_c = affinities(f_ctx, f_ref, temperature)
    log_o = affinities(f_out, f_ref, temperature)
    return (log_c.exp() * (log_c - log_o)).sum(-1).mean(1)


def global_style_energy(f_out: torch.Tensor, f_ref: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """The global-statistics baseline (AdaIN / StyleID-like feature statistics): squared
    differences of the per-channel means and standard deviations of output and reference tokens,
    relative to the reference's overall spread, ``(B,)``. No correspondence: every location is
    pulled towards the reference's *average* style."""
    scale = f_ref.std(dim=(1, 2)).pow(2).unsqueeze(1) + eps
    dm = (f_out.mean(1) - f_ref.mean(1)).pow(2) / scale
    ds = (f_out.std(1) - f_ref.std(1)).pow(2) / scale
    return (dm + ds).mean(1)


def colour_style_energy(c_out: torch.Tensor, c_ref: torch.Tensor, idx: torch.Tensor,
                        token_weight: torch.Tensor | None = None) -> torch.Tensor:
    """The colour level of style feature guidance (our addition), ``E_col = (1/N) sum_i ||c_o_i -
    c_r_m(i)||^2`` ``(B,)``: the predicted clean image's mean colour ``c_o_i`` on token ``i`` pulled
    towards the reference's colour at its semantic partner ``m(i)``, the image itself taken as the
    finest "feature" level. ``c_out`` ``(B, N, 3)``, ``c_ref`` ``(B, M, 3)``, ``idx`` ``(B, N)``;
    ``token_weight`` ``(B, N)`` (default 1) weighs the tokens of the mean (a diagnostic: restrict the term
    to some tokens; the sum is still divided by ``N``, not by the weights' sum)."""
    r = (c_out - gather_tokens(c_ref, idx)).pow(2).sum(-1)
    return r.mean(1) if token_weight is None else (r * token_weight).mean(1)
