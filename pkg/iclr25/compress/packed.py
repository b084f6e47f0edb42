"""A packed storage format for C_4^n-sparse weights, its matrix-vector kernels (numba), and honest
timing helpers (median of repeated sweeps over a working set of several matrices).

Format. A C_4^n matrix ``W (out, in)`` keeps ``k = 4 - n`` weights in every group of 4 contiguous
inputs of every row. :func:`pack_c4n` stores

* ``vals  float32 (out, in/4 * k)``: the kept weights of each row, group after group, in column order;
* ``codes uint8   (out, in/4)``: one byte per group, the kept positions ``p_0 < ... < p_{k-1}`` in
  ``{0, 1, 2, 3}`` as 2-bit fields, ``code = sum_j p_j << 2 j``.

So a packed row costs ``in/4 * (4 k + 1)`` bytes against ``4 in`` dense: a memory-bound kernel can be
at most ``16 / (4 k + 1)`` times faster than a dense one that streams the same row (1.23x, 1.78x,
3.2x for n = 1, 2, 3; :func:`roofline_speedup`). ``y_i = sum_g sum_j vals[i, g k + j] x[4 g + p_j]``
reads ``x`` by gather: the kernel does ``k/4`` of the multiply-adds, and LLVM vectorises its group
loop with hardware gather instructions where the CPU has them (AVX2 / AVX-512; see the unit test that
reads the compiled kernel's assembly), but a gather is still slower than the contiguous vector loads
with which a dense BLAS GEMV streams ``x``.

>>> P = pack_c4n(W, mask)                 # W (out, in), mask a C_4^n keep-mask
>>> y = c4n_matvec(P, x)                  # == (W * mask) @ x, x (in,) float32 numpy
>>> Y = c4n_matmat(P, X)                  # X (in, b) -> (out, b)
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch
from torch import Tensor

try:  # numba compiles the kernels; without it they fall back to numpy (slow, for tests only)
    import numba
except ImportError:  # pragma: no cover - numba is a dependency of the package
    numba = None


@dataclass(frozen=True)
class PackedC4n:
    """A C_4^n matrix in packed form: ``vals (out, in/4 * k) float32``, ``codes (out, in/4) uint8``,
    the pattern's ``n`` and the dense ``shape (out, in)`` (numpy arrays, C-contiguous, on the CPU)."""

    vals: np.ndarray
    codes: np.ndarray
    n: int
    shape: tuple[int, int]

    @property
    def k(self) -> int:
        """Kept weights per group of 4."""
        return 4 - self.n

    @property
    def nbytes(self) -> int:
        """Bytes a kernel must read for the weights: values plus codes."""
        return self.vals.nbytes + self.codes.nbytes


def pack_c4n(W: Tensor, mask: Tensor) -> PackedC4n:
    """Pack ``W * mask`` (``W, mask (out, in)``, ``in % 4 == 0``) where ``mask`` keeps exactly the same
    number ``k`` in {1, 2, 3} of every group of 4 (a C_4^n mask with ``n = 4 - k``)."""
    out, inp = W.shape
    if mask.shape != W.shape or inp % 4:
        raise ValueError(f"W {tuple(W.shape)} and mask {tuple(mask.shape)} must match, with in % 4 == 0")
    groups = mask.detach().cpu().bool().reshape(out, inp // 4, 4)
    counts = groups.sum(-1)
    k = int(counts.flatten()[0])
    if not 1 <= k <= 3 or bool((counts != k).any()):
        raise ValueError("mask must keep the same number k in {1, 2, 3} of every group of 4 (C_4^n)")
    # kept positions of each group, ascending: stable sort puts kept (True) entries first, in order
    pos = torch.sort((~groups).to(torch.int8), dim=-1, stable=True).indices[..., :k]   # (out, G, k)
    vals = W.detach().cpu().float().reshape(out, inp // 4, 4).gather(-1, pos)
    shifts = 2 * torch.arange(k)
    codes = (pos << shifts).sum(-1).to(torch.uint8)
    return PackedC4n(np.ascontiguousarray(vals.reshape(out, -1).numpy()),
                     np.ascontiguousarray(codes.numpy()), 4 - k, (out, inp))


def unpack_c4n(P: PackedC4n) -> Tensor:
    """The dense ``(out, in)`` float32 matrix (zeros where pruned) that ``P`` stores."""
    out, inp = P.shape
    codes = torch.from_numpy(P.codes.astype(np.int64)).unsqueeze(-1)                    # (out, G, 1)
    pos = (codes >> (2 * torch.arange(P.k))) & 3                                         # (out, G, k)
    dense = torch.zeros(out, inp // 4, 4)
    dense.scatter_(-1, pos, torch.from_numpy(P.vals).reshape(out, inp // 4, P.k))
    return dense.reshape(out, inp)


def random_packed(out: int, inp: int, n: int, rng: np.random.Generator) -> PackedC4n:
    """A random C_4^n matrix already packed (random values, random kept positions): for timing, where
    the kernel's speed does not depend on which weights are kept. ``(out, inp)``, ``n`` in {1, 2, 3}."""
    from itertools import combinations

    k, G = 4 - n, inp // 4
    patterns = np.array([sum(p << (2 * j) for j, p in enumerate(kept))
                         for kept in combinations(range(4), k)], dtype=np.uint8)   # C(4, k) codes
    codes = patterns[rng.integers(0, len(patterns), (out, G))]
    vals = rng.standard_normal((out, G * k), dtype=np.float32)
    return PackedC4n(vals, np.ascontiguousarray(codes), n, (out, inp))


# ---------------------------------------------------------------- kernels (numba)

def _njit(fn: Callable) -> Callable:
    """Compile with numba (``fastmath``: the reductions may be reordered and vectorised; cached on
    disk), or leave ``fn`` as plain Python if numba is missing."""
    if numba is None:  # pragma: no cover
        return fn
    return numba.njit(fastmath=True, cache=True, nogil=True)(fn)


@_njit
def _c4n_matvec(vals, codes, x):  # pragma: no cover - compiled
    out, G = codes.shape
    k = vals.shape[1] // G
    y = np.empty(out, dtype=np.float32)
    for i in range(out):
        acc = np.float32(0.0)
        if k == 1:      # one branch per k: fixed trip counts, the k terms of a group written out
            for g in range(G):
                c = codes[i, g]
                acc += vals[i, g] * x[4 * g + (c & 3)]
        elif k == 2:
            for g in range(G):
                c = codes[i, g]
                acc += (vals[i, 2 * g] * x[4 * g + (c & 3)]
                        + vals[i, 2 * g + 1] * x[4 * g + ((c >> 2) & 3)])
        else:
            for g in range(G):
                c = codes[i, g]
                acc += (vals[i, 3 * g] * x[4 * g + (c & 3)]
                        + vals[i, 3 * g + 1] * x[4 * g + ((c >> 2) & 3)]
                        + vals[i, 3 * g + 2] * x[4 * g + ((c >> 4) & 3)])
        y[i] = acc
    return y


@_njit
def _c4n_matmat(vals, codes, X):  # pragma: no cover - compiled
    out, G = codes.shape
    k = vals.shape[1] // G
    b = X.shape[1]
    Y = np.zeros((out, b), dtype=np.float32)
    for i in range(out):
        for g in range(G):
            c = codes[i, g]
            for j in range(k):
                v = vals[i, g * k + j]
                r = 4 * g + ((c >> (2 * j)) & 3)
                for t in range(b):          # contiguous: vectorised over the batch
                    Y[i, t] += v * X[r, t]
    return Y


@_njit
def _dense_matvec(W, x):  # pragma: no cover - compiled
    out, inp = W.shape
    y = np.empty(out, dtype=np.float32)
    for i in range(out):
        acc = np.float32(0.0)
        for c in range(inp):
            acc += W[i, c] * x[c]
        y[i] = acc
    return y


@_njit
def _dense_matmat(W, X):  # pragma: no cover - compiled
    out, inp = W.shape
    b = X.shape[1]
    Y = np.zeros((out, b), dtype=np.float32)
    for i in range(out):
        for c in range(inp):
            v = W[i, c]
            for t in range(b):
                Y[i, t] += v * X[c, t]
    return Y


def c4n_matvec(P: PackedC4n, x: np.ndarray) -> np.ndarray:
    """``y = W x`` from the packed ``P`` (``W (out, in)``): ``x (in,) float32`` -> ``(out,) float32``,
    single-threaded; equals ``unpack_c4n(P) @ x`` up to float32 summation order."""
    return _c4n_matvec(P.vals, P.codes, np.ascontiguousarray(x, dtype=np.float32))


def c4n_matmat(P: PackedC4n, X: np.ndarray) -> np.ndarray:
    """``Y = W X`` from the packed ``P``: ``X (in, b) float32`` -> ``(out, b)``, single-threaded."""
    return _c4n_matmat(P.vals, P.codes, np.ascontiguousarray(X, dtype=np.float32))


def dense_loop_matvec(W: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``W x`` with the packed kernel's loop structure minus the gather (row by row; ``fastmath`` lets
    LLVM vectorise the reduction): the same-structure dense reference. ``W (out, in) float32``."""
    return _dense_matvec(W, np.ascontiguousarray(x, dtype=np.float32))


def dense_loop_matmat(W: np.ndarray, X: np.ndarray) -> np.ndarray:
    """``W X`` with the loop structure of :func:`c4n_matmat` minus the gather. ``X (in, b)``."""
    return _dense_matmat(W, np.ascontiguousarray(X, dtype=np.float32))


# ---------------------------------------------------------------- the roofline and timing

def roofline_speedup(n: int, code_bits_per_group: int = 8) -> float:
    """Upper bound on a memory-bound packed GEMV's speed-up over dense float32: the ratio of bytes
    read per group of 4 weights, ``16 / (4 k + code_bits / 8)`` with ``k = 4 - n`` kept values of 4
    bytes. Our format stores one byte per group (``code_bits_per_group=8``); the densest code for
    ``k`` positions takes ``2 k`` bits."""
    k = 4 - n
    return 16.0 / (4 * k + code_bits_per_group / 8)


def median_time(call: Callable[[int], object], n_items: int, repeats: int, warmup: int = 1) -> float:
    """Median over ``repeats`` sweeps of the time of one ``call(i)``, averaged over a sweep of
    ``i = 0 .. n_items - 1`` (a sweep cycles through a working set of ``n_items`` operands, so a set
    larger than the last-level cache measures memory bandwidth, not cache). Seconds per call."""
    for _ in range(warmup):
        for i in range(n_items):
            call(i)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for i in range(n_items):
            call(i)
        times.append((time.perf_counter() - t0) / n_items)
    return float(np.median(times))


def last_level_cache_bytes(default: int = 32 * 2**20) -> int:
    """Size of the CPU's last-level cache from ``/sys`` (Linux), ``default`` if it cannot be read."""
    from pathlib import Path

    sizes = []
    for f in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        txt = f.read_text().strip().upper()
        mult = {"K": 2**10, "M": 2**20, "G": 2**30}.get(txt[-1], 1)
        try:
            sizes.append(int(txt.rstrip("KMG")) * mult)
        except ValueError:
            continue
    return max(sizes) if sizes else default


def gemv_benchmark(shape: tuple[int, int], ns: Sequence[int], batch: int, working_set_bytes: int,
                   repeats: int, seed: int = 0) -> dict[str, dict[str, float]]:
    """Time dense BLAS (numpy, one thread), the same-structure dense loop and the packed C_4^n kernel
    for every ``n`` in ``ns``, at ``batch`` right-hand sides (1: GEMV, > 1: GEMM), cycling through
    as many ``shape`` matrices as fill ``working_set_bytes`` (dense float32).

    The kernels are timed **round-robin**: every one of the ``repeats`` rounds times one sweep of
    each kernel in turn, so a change of load on a shared machine hits all kernels alike. Returns
    ``{kernel: {"seconds": median per product, "bytes": weight bytes per product, "gbps":
    bytes / seconds / 1e9, "vs_blas": median over rounds of the BLAS sweep time over this kernel's
    sweep time in the same round, "vs_blas_iqr": (25th, 75th percentile) of those per-round ratios}}`` for kernels ``"blas"``, ``"dense loop"`` and ``"c4n n=..."``.
    Peak memory: the dense set plus one packed set per ``n``.
    """
    from threadpoolctl import threadpool_limits

    out, inp = shape
    rng = np.random.default_rng(seed)
    m = max(1, int(working_set_bytes // (4 * out * inp)))
    X = rng.standard_normal((inp, batch), dtype=np.float32)
    x = np.ascontiguousarray(X[:, 0]) if batch == 1 else X
    dense = [rng.standard_normal(shape, dtype=np.float32) for _ in range(m)]
    packed = {n: [random_packed(out, inp, n, rng) for _ in range(m)] for n in ns}
    loop = dense_loop_matvec if batch == 1 else dense_loop_matmat
    kernel = c4n_matvec if batch == 1 else c4n_matmat
    calls: dict[str, tuple[Callable[[int], object], int]] = {
        "blas": (lambda i: dense[i] @ x, dense[0].nbytes),
        "dense loop": (lambda i: loop(dense[i], x), dense[0].nbytes),
        **{f"c4n n={n}": ((lambda i, P=packed[n]: kernel(P[i], x)), packed[n][0].nbytes) for n in ns},
    }
    times: dict[str, list[float]] = {name: [] for name in calls}
    with threadpool_limits(limits=1):
        for call, _ in calls.values():  # warm-up (and numba compilation) outside the rounds
            for i in range(m):
                call(i)
        for _ in range(repeats):
            for name, (call, _) in calls.items():
                times[name].append(median_time(call, m, 1, warmup=0))
    blas = np.array(times["blas"])
    results = {}
    for name, (_, nbytes) in calls.items():
        t = np.array(times[name])
        sec = float(np.median(t))
        results[name] = {"seconds": sec, "bytes": float(nbytes), "gbps": nbytes / sec / 1e9,
                         "vs_blas": float(np.median(blas / t)),
                         "vs_blas_iqr": (float(np.percentile(blas / t, 25)), float(np.percentile(blas / t, 75)))}
    return results
