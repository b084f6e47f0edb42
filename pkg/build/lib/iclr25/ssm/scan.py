"""The selective scan of Mamba (Gu & Dao, 2023): a diagonal linear recurrence whose step size, input
and output maps depend on the token.

For every channel ``c`` (of ``d``) and state ``s`` (of ``n``), with ``A = -exp(A_log) < 0``::

    h_t[c, s] = exp(delta_t[c] A[c, s]) h_{t-1}[c, s] + delta_t[c] B_t[s] x_t[c]      (1)
    y_t[c]    = sum_s C_t[s] h_t[c, s] + D[c] x_t[c]                                  (2)

(the zero-order hold for ``A`` and the Euler step ``delta B`` for ``B``, as in Mamba's reference
``selective_scan_ref``). Unrolling (1) from a state ``h_0`` gives, with the log-decays
``S_t = sum_{r <= t} delta_r A`` (so ``S_t - S_s <= 0`` for ``s <= t``)::

    h_t = exp(S_t) h_0 + sum_{s <= t} exp(S_t - S_s) delta_s B_s x_s                 (3)

Three ways to compute (1)-(2), which agree to round-off:

* :func:`selective_scan_sequential`: the recurrence (1), one step per token;
* :func:`selective_scan_chunked`: (3) inside chunks of ``chunk`` tokens, all positions at once (a
  ``(chunk x chunk)`` lower-triangular decay matrix of *differences* ``S_t - S_s``, which never
  overflow), and (1) between chunks, carrying the state;
* :func:`selective_scan_step`: one token with a cached state (recurrent inference).

Shapes: batch ``b``, length ``l``, channels ``d``, states ``n``. ``x, delta (b, l, d)``,
``A (d, n)``, ``B, C (b, l, n)``, ``D (d,)``, states ``h (b, d, n)``.
"""

from __future__ import annotations

import torch
from torch import Tensor


def _check(x: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor) -> None:
    b, l, d = x.shape
    if delta.shape != x.shape or A.shape[0] != d or B.shape != (b, l, A.shape[1]) or B.shape != C.shape:
        raise ValueError(f"shapes x {tuple(x.shape)}, delta {tuple(delta.shape)}, A {tuple(A.shape)}, "
                         f"B {tuple(B.shape)}, C {tuple(C.shape)} do not fit (b, l, d), (d, n), (b, l, n)")


def _zero_state(x: Tensor, A: Tensor) -> Tensor:
    return x.new_zeros(x.shape[0], x.shape[2], A.shape[1])


def selective_scan_sequential(x: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor,
                              D: Tensor | None = None, h0: Tensor | None = None, tile: int = 16
                              ) -> tuple[Tensor, Tensor]:
    """The recurrence (1)-(2) token by token. Returns ``y (b, l, d)`` and the last state ``(b, d, n)``.

    The ``(b, tile, d, n)`` decays and drives are made ``tile`` tokens at a time, so they stay in
    cache (the result does not depend on ``tile``).
    """
    _check(x, delta, A, B, C)
    h = _zero_state(x, A) if h0 is None else h0
    ys = []
    for t0 in range(0, x.shape[1], tile):
        d_, x_, B_ = delta[:, t0:t0 + tile], x[:, t0:t0 + tile], B[:, t0:t0 + tile]
        decay = torch.exp(d_.unsqueeze(-1) * A)                      # (b, tile, d, n) = exp(delta A)
        drive = (d_ * x_).unsqueeze(-1) * B_.unsqueeze(2)            # (b, tile, d, n) = delta B x
        hs = []
        for decay_t, drive_t in zip(decay.unbind(1), drive.unbind(1)):  # unbind: cheap backward
            h = torch.addcmul(drive_t, decay_t, h)                   # (1): exp(delta A) h + delta B x
            hs.append(h)
        ys.append(torch.einsum("bldn,bln->bld", torch.stack(hs, dim=1), C[:, t0:t0 + tile]))  # (2)
    y = torch.cat(ys, dim=1)
    return (y if D is None else y + D * x), h


def selective_scan_chunked(x: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor,
                           D: Tensor | None = None, h0: Tensor | None = None, chunk: int = 16
                           ) -> tuple[Tensor, Tensor]:
    """The closed form (3) inside chunks of ``chunk`` tokens, the recurrence between chunks.

    Inside a chunk, ``y_t = sum_{s <= t} C_t . (exp(S_t - S_s) delta_s B_s x_s) + C_t . (exp(S_t) h_0)``
    with ``S`` the within-chunk cumulative log-decay: exponents are differences ``S_t - S_s <= 0``
    (masked to ``-inf`` above the diagonal), so nothing overflows however long the sequence. Memory
    per chunk: ``b * chunk^2 * d * n`` numbers. Returns ``y (b, l, d)`` and the last state ``(b, d, n)``.
    """
    _check(x, delta, A, B, C)
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    h = _zero_state(x, A) if h0 is None else h0
    ys = []
    for t0 in range(0, x.shape[1], chunk):
        xs, ds, Bs, Cs = (v[:, t0:t0 + chunk] for v in (x, delta, B, C))
        q = xs.shape[1]
        S = torch.cumsum(ds.unsqueeze(-1) * A, dim=1)                  # (b, q, d, n), <= 0
        u = (ds * xs).unsqueeze(-1) * Bs.unsqueeze(2)                  # (b, q, d, n) = delta B x
        causal = torch.ones(q, q, dtype=torch.bool, device=x.device).tril()
        diff = S.unsqueeze(2) - S.unsqueeze(1)                         # (b, t, s, d, n) = S_t - S_s
        L = torch.exp(diff.masked_fill(~causal[None, :, :, None, None], float("-inf")))
        hs = (L * u.unsqueeze(1)).sum(2) + torch.exp(S) * h.unsqueeze(1)  # (3): h_t for every t
        y = torch.einsum("btdn,btn->btd", hs, Cs)
        h = hs[:, -1]
        ys.append(y)
    y = torch.cat(ys, dim=1)
    return (y if D is None else y + D * x), h


def selective_scan(x: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Tensor | None = None,
                   h0: Tensor | None = None, mode: str = "sequential", chunk: int = 16
                   ) -> tuple[Tensor, Tensor]:
    """:func:`selective_scan_sequential` (``mode="sequential"``) or :func:`selective_scan_chunked`
    (``mode="chunked"``); same arguments and results."""
    if mode == "sequential":
        return selective_scan_sequential(x, delta, A, B, C, D, h0)
    if mode == "chunked":
        return selective_scan_chunked(x, delta, A, B, C, D, h0, chunk)
    raise ValueError(f"unknown scan mode {mode!r}; use 'sequential' or 'chunked'")


def selective_scan_step(h: Tensor, x: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor,
                        D: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """One token of (1)-(2) from the cached state ``h (b, d, n)``: ``x, delta (b, d)``, ``B, C (b, n)``.

    Returns ``y (b, d)`` and the new state ``(b, d, n)``.
    """
    h = torch.exp(delta.unsqueeze(-1) * A) * h + (delta * x).unsqueeze(-1) * B.unsqueeze(1)
    y = torch.einsum("bdn,bn->bd", h, C)
    return (y if D is None else y + D * x), h
