"""Packed C_4^n format and kernels: exact round trip, products equal dense ones, roofline closed form."""

import numpy as np
import pytest
import torch

from iclr25.compress import c4n_mask, wanda_mask
from iclr25.compress.packed import (PackedC4n, c4n_matmat, c4n_matvec, dense_loop_matmat,
                                    dense_loop_matvec, gemv_benchmark, median_time, pack_c4n,
                                    random_packed, roofline_speedup, unpack_c4n)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_pack_unpack_round_trip_and_storage(n: int) -> None:
    g = torch.Generator().manual_seed(n)
    W = torch.randn(24, 40, generator=g)
    mask = c4n_mask(torch.rand(24, 40, generator=g), n)
    P = pack_c4n(W, mask)
    assert torch.equal(unpack_c4n(P), W * mask)
    assert P.vals.shape == (24, 10 * (4 - n)) and P.codes.shape == (24, 10) and P.codes.dtype == np.uint8
    assert P.nbytes == 24 * 10 * (4 * (4 - n) + 1)          # k float32 values + one code byte per group
    # codes hold the kept positions in ascending 2-bit fields
    first = [p for p in range(4) if mask[0, p]]
    assert int(P.codes[0, 0]) == sum(p << (2 * j) for j, p in enumerate(first))


@pytest.mark.parametrize("n", [1, 2, 3])
def test_kernels_equal_dense_products(n: int) -> None:
    g = torch.Generator().manual_seed(10 + n)
    W, X = torch.randn(33, 64, generator=g), torch.randn(500, 64, generator=g)
    mask = wanda_mask(W, X, None, ("c4n", n))
    P = pack_c4n(W, mask)
    dense = (W * mask).numpy()
    x = np.random.default_rng(n).standard_normal(64).astype(np.float32)
    Xb = np.random.default_rng(n).standard_normal((64, 7)).astype(np.float32)
    np.testing.assert_allclose(c4n_matvec(P, x), dense @ x, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(c4n_matmat(P, Xb), dense @ Xb, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(dense_loop_matvec(dense, x), dense @ x, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(dense_loop_matmat(dense, Xb), dense @ Xb, rtol=1e-4, atol=1e-4)


def test_pack_rejects_masks_that_are_not_c4n() -> None:
    W = torch.randn(4, 8)
    mask = c4n_mask(W.abs(), 2)
    mask[0, :4] = True                                         # one group keeps 4
    with pytest.raises(ValueError, match="C_4"):
        pack_c4n(W, mask)
    with pytest.raises(ValueError, match="C_4"):
        pack_c4n(W, torch.ones(4, 8, dtype=torch.bool))        # n = 0 is dense, not packed
    with pytest.raises(ValueError, match="in % 4"):
        pack_c4n(torch.randn(4, 6), torch.ones(4, 6, dtype=torch.bool))


@pytest.mark.parametrize("n", [1, 2, 3])
def test_random_packed_is_a_valid_c4n_matrix(n: int) -> None:
    P = random_packed(16, 32, n, np.random.default_rng(0))
    dense = unpack_c4n(P)
    nz = (dense != 0).reshape(16, 8, 4).sum(-1)
    assert bool((nz == 4 - n).all())
    assert torch.equal(unpack_c4n(pack_c4n(dense, dense != 0)), dense)


def test_roofline_is_the_byte_ratio() -> None:
    for n in (1, 2, 3):
        P = random_packed(8, 64, n, np.random.default_rng(n))
        assert roofline_speedup(n) == pytest.approx(8 * 64 * 4 / P.nbytes)
    assert roofline_speedup(2) == pytest.approx(16 / 9)
    assert roofline_speedup(3, code_bits_per_group=2) == pytest.approx(16 / 4.25)


def test_median_time_and_benchmark_report_consistent_bytes() -> None:
    calls = []
    t = median_time(lambda i: calls.append(i), n_items=3, repeats=4, warmup=1)
    assert t >= 0 and calls == [0, 1, 2] * 5
    res = gemv_benchmark((16, 32), ns=(1, 3), batch=1, working_set_bytes=4 * 16 * 32 * 2, repeats=2)
    assert set(res) == {"blas", "dense loop", "c4n n=1", "c4n n=3"}
    assert res["blas"]["bytes"] == 16 * 32 * 4
    assert res["c4n n=3"]["bytes"] == 16 * 8 * 5
    assert all(r["gbps"] > 0 for r in res.values())


def test_benchmark_ratios_are_per_round_and_blas_is_one() -> None:
    res = gemv_benchmark((16, 32), ns=(2,), batch=4, working_set_bytes=4 * 16 * 32 * 3, repeats=3)
    assert res["blas"]["vs_blas"] == 1.0
    assert all(r["vs_blas"] > 0 and r["seconds"] > 0 for r in res.values())


def test_the_package_kernel_compiled_for_k1_has_vector_gathers_where_the_cpu_has_them() -> None:
    # is the gather loop scalar? Compile the package's own kernel (its Python
    # source, without numba's on-disk cache) for a k = 1 input and look for vector gathers in its
    # assembly (only on CPUs that have them). The kernel branches on k at run time, so the assembly
    # holds all three branches; the test shows the compiled kernel gathers with vector instructions.
    import re

    numba = pytest.importorskip("numba")
    from iclr25.compress import packed

    flags = open("/proc/cpuinfo").read() if __import__("os").path.exists("/proc/cpuinfo") else ""
    if " avx2" not in flags:
        pytest.skip("no AVX2 gathers on this CPU")
    f = numba.njit(fastmath=True)(packed._c4n_matvec.py_func)
    vals, codes, x = np.ones((2, 2), np.float32), np.zeros((2, 2), np.uint8), np.ones(8, np.float32)
    assert np.allclose(f(vals, codes, x), packed._c4n_matvec(vals, codes, x))     # k = 1: G = 2, 1 kept
    ops = re.findall(r"^\s+(v\w+)\s", f.inspect_asm(f.signatures[0]), re.M)
    assert any("gather" in op for op in ops)
