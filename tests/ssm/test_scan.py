"""The selective scan: sequential recurrence, chunked closed form and one-step decoding agree."""

import pytest
import torch

from iclr25.ssm import (selective_scan, selective_scan_chunked, selective_scan_sequential,
                        selective_scan_step)


def _inputs(b=2, l=37, d=5, n=3, seed=0, dt_scale=1.0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=dtype)
    x, B, C = r(b, l, d), r(b, l, n), r(b, l, n)
    delta = torch.nn.functional.softplus(r(b, l, d)) * dt_scale
    A = -torch.exp(r(d, n))
    return x, delta, A, B, C, r(d)


def _naive(x, delta, A, B, C, D):
    """Double loop over the unrolled sum h_t = sum_s prod_{r=s+1..t} exp(delta_r A) delta_s B_s x_s."""
    b, l, d = x.shape
    y = torch.zeros_like(x)
    for t in range(l):
        h = torch.zeros(b, d, A.shape[1], dtype=x.dtype)
        for s in range(t + 1):
            decay = torch.exp(delta[:, s + 1:t + 1].sum(1).unsqueeze(-1) * A)
            h = h + decay * (delta[:, s] * x[:, s]).unsqueeze(-1) * B[:, s].unsqueeze(1)
        y[:, t] = torch.einsum("bdn,bn->bd", h, C[:, t]) + D * x[:, t]
    return y


def test_sequential_equals_the_unrolled_sum() -> None:
    args = _inputs(l=9)
    y, _ = selective_scan_sequential(*args)
    assert torch.allclose(y, _naive(*args), atol=1e-12)


@pytest.mark.parametrize("chunk", [1, 4, 16, 37, 64])
def test_chunked_equals_sequential_with_state(chunk: int) -> None:
    x, delta, A, B, C, D = _inputs()
    h0 = torch.randn(2, 5, 3, dtype=torch.float64)
    ys, hs = selective_scan_sequential(x, delta, A, B, C, D, h0)
    yc, hc = selective_scan_chunked(x, delta, A, B, C, D, h0, chunk=chunk)
    assert torch.allclose(ys, yc, atol=1e-11) and torch.allclose(hs, hc, atol=1e-11)


def test_chunked_is_stable_when_decays_underflow() -> None:
    # delta * A reaches -1e3 per step: exp(-S) of a naive cumulative form would overflow
    x, delta, A, B, C, D = _inputs(l=64, dt_scale=200.0, dtype=torch.float32)
    ys, _ = selective_scan_sequential(x, delta, A, B, C, D)
    yc, _ = selective_scan_chunked(x, delta, A, B, C, D, chunk=32)
    assert torch.isfinite(yc).all() and (ys - yc).abs().max() <= 1e-5 * ys.abs().max()


def test_chunks_compose_like_one_scan() -> None:
    x, delta, A, B, C, D = _inputs(l=20)
    y, h = selective_scan_sequential(x, delta, A, B, C, D)
    y1, h1 = selective_scan(x[:, :8], delta[:, :8], A, B[:, :8], C[:, :8], D, mode="chunked", chunk=3)
    y2, h2 = selective_scan(x[:, 8:], delta[:, 8:], A, B[:, 8:], C[:, 8:], D, h0=h1, mode="chunked")
    assert torch.allclose(torch.cat([y1, y2], 1), y, atol=1e-12) and torch.allclose(h2, h, atol=1e-12)


def test_step_by_step_decoding_equals_the_scan() -> None:
    x, delta, A, B, C, D = _inputs(l=12)
    y, h_last = selective_scan_sequential(x, delta, A, B, C, D)
    h = torch.zeros(2, 5, 3, dtype=torch.float64)
    for t in range(12):
        yt, h = selective_scan_step(h, x[:, t], delta[:, t], A, B[:, t], C[:, t], D)
        assert torch.allclose(yt, y[:, t], atol=1e-12)
    assert torch.allclose(h, h_last, atol=1e-12)


def test_gradients_agree_between_modes() -> None:
    args = [a.requires_grad_() for a in _inputs(l=10)]
    grads = []
    for mode in ("sequential", "chunked"):
        y, _ = selective_scan(*args, mode=mode, chunk=4)
        grads.append(torch.autograd.grad(y.square().sum(), args))
    for gs, gc in zip(*grads):
        assert torch.allclose(gs, gc, atol=1e-10)


def test_zero_step_keeps_the_state_and_ignores_the_input() -> None:
    x, delta, A, B, C, D = _inputs(l=6)
    h0 = torch.randn(2, 5, 3, dtype=torch.float64)
    y, h = selective_scan_sequential(x, torch.zeros_like(delta), A, B, C, None, h0)
    assert torch.equal(h, h0)
    assert torch.allclose(y, torch.einsum("bdn,bln->bld", h0, C), atol=1e-12)


def test_bad_shapes_and_mode_raise() -> None:
    x, delta, A, B, C, D = _inputs()
    with pytest.raises(ValueError, match="do not fit"):
        selective_scan_sequential(x, delta, A, B[:, :-1], C, D)
    with pytest.raises(ValueError, match="unknown scan mode"):
        selective_scan(x, delta, A, B, C, D, mode="parallel")
