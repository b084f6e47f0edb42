"""RTN quantization: half-step error bound, idempotence, exactness on grid values, the grid's closed
forms, zero stays zero, at most 2^b levels per group; dtype, device and meta tensors."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from iclr25.compress import (QuantGrid, dequantize, quantization_step, quantize_codes, rtn_grid,
                             rtn_quantize)

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _rand(*shape, seed=0, dtype=torch.float64, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=dtype).to(device)


CONFIGS = st.tuples(st.integers(2, 8), st.sampled_from([None, 1, 2, 4, 8]), st.booleans())


@settings(max_examples=80, deadline=None)
@given(cfg=CONFIGS, rows=st.integers(1, 6), seed=st.integers(0, 999), shift=st.floats(-2, 2))
def test_error_at_most_half_a_step(cfg, rows, seed, shift):
    bits, group, sym = cfg
    W = _rand(rows, 16, seed=seed) + shift  # shifted: groups of one sign too
    grid = rtn_grid(W, bits, group, sym)
    Q = rtn_quantize(W, bits, group, sym)
    step = quantization_step(W, bits, group, sym)
    assert bool(((W - Q).abs() <= step / 2 * (1 + 1e-12)).all())
    assert torch.equal(step, grid.scale.repeat_interleave(grid.group_size, 1))


@settings(max_examples=80, deadline=None)
@given(cfg=CONFIGS, seed=st.integers(0, 999), shift=st.floats(-2, 2))
def test_idempotent(cfg, seed, shift):
    bits, group, sym = cfg
    W = _rand(4, 16, seed=seed) + shift
    Q = rtn_quantize(W, bits, group, sym)
    QQ = rtn_quantize(Q, bits, group, sym)
    # same codes; the refitted scale may differ from the first by round-off only
    assert torch.equal(quantize_codes(Q, rtn_grid(Q, bits, group, sym)),
                       quantize_codes(W, rtn_grid(W, bits, group, sym)))
    torch.testing.assert_close(QQ, Q, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("bits", [2, 3, 4, 8])
@pytest.mark.parametrize("sym", [False, True])
def test_exact_on_grid_values(bits, sym):
    """Weights already on a dyadic grid that spans each group's range come back bit for bit."""
    g = torch.Generator().manual_seed(bits)
    scale = 2.0**-3
    lo, hi = (-(2 ** (bits - 1) - 1), 2 ** (bits - 1) - 1) if sym else (0, 2**bits - 1)
    codes = torch.randint(lo, hi + 1, (6, 32), generator=g)
    codes.view(6, 4, 8)[..., 0], codes.view(6, 4, 8)[..., 1] = lo, hi  # every group spans the range
    zero = 0 if sym else 2 ** (bits - 1)
    W = (codes - zero).double() * scale
    assert torch.equal(rtn_quantize(W, bits, 8, sym), W)
    assert torch.equal(rtn_quantize(W.float(), bits, 8, sym), W.float())


def test_grid_closed_forms():
    W = torch.tensor([[-1.0, 0.5, 2.0, 0.25], [0.3, 0.6, 0.9, 1.2]], dtype=torch.float64)
    a = rtn_grid(W, 3, None, symmetric=False)
    # row 0: range [-1, 2]; row 1: range widened to contain 0, [0, 1.2]
    torch.testing.assert_close(a.scale[:, 0], torch.tensor([3.0 / 7, 1.2 / 7], dtype=torch.float64))
    torch.testing.assert_close(a.zero[:, 0], torch.tensor([2.0, 0.0], dtype=torch.float64))  # round(7/3)
    s = rtn_grid(W, 3, None, symmetric=True)
    torch.testing.assert_close(s.scale[:, 0], torch.tensor([2.0 / 3, 1.2 / 3], dtype=torch.float64))
    assert (s.qmin, s.qmax, a.qmin, a.qmax) == (-3, 3, 0, 7)
    assert torch.equal(s.zero, torch.zeros_like(s.zero))


@pytest.mark.parametrize("sym", [False, True])
def test_at_most_2_to_the_b_levels_per_group_and_codes_in_range(sym):
    W = _rand(8, 64, seed=1)
    for bits in [2, 3, 4]:
        grid = rtn_grid(W, bits, 16, sym)
        codes = quantize_codes(W, grid)
        assert codes.dtype == torch.int32
        assert int(codes.min()) >= grid.qmin and int(codes.max()) <= grid.qmax
        Q = rtn_quantize(W, bits, 16, sym).reshape(8, 4, 16)
        levels = max(len(torch.unique(Q[i, j])) for i in range(8) for j in range(4))
        assert levels <= 2**bits - (1 if sym else 0)


def test_asymmetric_step_halves_with_one_more_bit():
    W = _rand(5, 32, seed=2)
    for bits in [2, 3, 4, 5]:
        s_b, s_b1 = rtn_grid(W, bits, 8).scale, rtn_grid(W, bits + 1, 8).scale
        torch.testing.assert_close(s_b1, s_b * (2**bits - 1) / (2 ** (bits + 1) - 1))


@pytest.mark.parametrize("sym", [False, True])
def test_zero_stays_zero_and_zero_groups_survive(sym):
    W = _rand(6, 32, seed=3)
    W[W.abs() < 0.7] = 0.0  # a pruned weight
    W[0] = 0.0  # an all-zero row
    Q = rtn_quantize(W, 3, 8, sym)
    assert bool((Q[W == 0] == 0).all())
    assert torch.isfinite(Q).all()


def test_per_channel_is_one_group_per_row():
    W = _rand(4, 24, seed=4)
    assert torch.equal(rtn_quantize(W, 4), rtn_quantize(W, 4, 24))
    assert rtn_grid(W, 4).scale.shape == (4, 1)


def test_codes_and_dequantize_round_trip():
    W = _rand(3, 16, seed=5)
    grid = rtn_grid(W, 4, 4)
    assert isinstance(grid, QuantGrid) and grid.scale.shape == (3, 4)
    Q = dequantize(quantize_codes(W, grid), grid)
    assert torch.equal(quantize_codes(Q, grid), quantize_codes(W, grid))
    torch.testing.assert_close(Q, rtn_quantize(W, 4, 4))


def test_invalid_arguments():
    W = _rand(3, 16)
    with pytest.raises(ValueError):
        rtn_quantize(W, 4, 5)  # 5 does not divide 16
    with pytest.raises(ValueError):
        rtn_quantize(W, 1, None, symmetric=True)
    with pytest.raises(ValueError):
        rtn_quantize(W, 0)
    with pytest.raises(ValueError):
        rtn_quantize(W[0], 4)  # needs (out, in)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_dtype_is_kept(dtype):
    W = _rand(4, 16, seed=6).to(dtype)
    Q = rtn_quantize(W, 4, 8)
    assert Q.dtype == dtype
    step = quantization_step(W, 4, 8)
    assert bool(((W.float() - Q.float()).abs() <= step / 2 + 1e-2 * step).all())


@pytest.mark.parametrize("device", DEVICES)
def test_device_is_kept(device):
    W = _rand(4, 16, device=device, dtype=torch.float32)
    Q = rtn_quantize(W, 3, 4, symmetric=True)
    assert Q.device == W.device
    torch.testing.assert_close(Q.cpu(), rtn_quantize(W.cpu(), 3, 4, symmetric=True))


def test_meta_tensors_give_shapes():
    W = torch.empty(32, 64, device="meta")
    Q = rtn_quantize(W, 4, 16)
    assert Q.device.type == "meta" and Q.shape == W.shape and Q.dtype == W.dtype
    assert rtn_grid(W, 4, 16).scale.shape == (32, 4)
