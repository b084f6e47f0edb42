"""Benchmark: time every ``iclr25.compress`` kernel on square layers (1 torch thread, float32).

    python tests/benchmarks/bench_compress.py [sizes ...]        # default: 128 256 512

Prints the median wall time and the median CPU time (process time) of 5 runs per kernel, for a
layer ``W (d, d)`` with ``n = 8 d`` calibration tokens of correlated inputs. CPU time is the number
to compare on a shared machine: wall time is inflated by other processes.
"""

from __future__ import annotations

import statistics
import sys
import time

import torch

from iclr25.compress import (compensate, gptq_quantize, input_hessian, magnitude_mask,
                             rtn_quantize, sparsegpt_prune, wanda_mask)


def timed(fn, repeats: int = 5) -> tuple[float, float]:
    """Median wall and CPU seconds of ``fn()`` over ``repeats`` runs (after one warm-up)."""
    fn()
    wall, cpu = [], []
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    return statistics.median(wall), statistics.median(cpu)


def main(sizes: list[int]) -> None:
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, 1 thread, float32; median of 5 runs: wall ms / cpu ms")
    for d in sizes:
        g = torch.Generator().manual_seed(0)
        X = torch.randn(8 * d, d, generator=g) @ (torch.randn(d, d, generator=g) / d**0.5)
        W = torch.randn(d, d, generator=g)
        H = input_hessian(X)
        mask = wanda_mask(W, X, 0.5, "2:4")
        kernels = {
            "magnitude 50%": lambda: magnitude_mask(W, 0.5),
            "wanda 2:4": lambda: wanda_mask(W, X, 0.5, "2:4"),
            "input_hessian": lambda: input_hessian(X),
            "sparsegpt 50%": lambda: sparsegpt_prune(W, H, 0.5),
            "sparsegpt 2:4": lambda: sparsegpt_prune(W, H, 0.5, "2:4"),
            "sparsegpt c4n n=3": lambda: sparsegpt_prune(W, H, None, ("c4n", 3)),
            "sparsegpt fixed mask": lambda: sparsegpt_prune(W, H, None, mask=mask),
            "rtn 4-bit g32": lambda: rtn_quantize(W, 4, 32),
            "gptq 4-bit g32": lambda: gptq_quantize(W, H, 4, 32),
            "compensate groups of 4": lambda: compensate(W, H, mask, group_size=4),
            "compensate whole rows": lambda: compensate(W, H, mask),
        }
        for name, fn in kernels.items():
            wall, cpu = timed(fn, repeats=5 if d <= 512 else 2)
            print(f"d={d:5d}  {name:24s} {1e3 * wall:9.1f} {1e3 * cpu:9.1f}")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [128, 256, 512])
