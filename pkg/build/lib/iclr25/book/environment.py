"""The process environment that makes a chapter's run reproducible, and the CPU kernel selections.

Every ``python -m iclr25`` command calls :func:`apply_reproducible_env` first, so the Jupyter kernels
it starts inherit a fixed hash seed, fixed BLAS/OpenMP thread counts and no network lookups. Golden
notebooks are made and checked without a GPU (:func:`golden_env`), so they never depend on one.

Torch, oneDNN, MKL and OpenBLAS choose their compute kernels by CPU (AVX-512, AVX2, ...), so the last
bits of a float differ from one machine to the next. :func:`other_kernels_env` picks a selection
different from this machine's native one, which is what another CPU would compute: the test command
checks the golden notebooks under it.
"""

from __future__ import annotations

import os
import platform

#: Set for every run; a value already in the environment wins, except for the hash seed.
REPRODUCIBLE_DEFAULTS = {
    "OMP_NUM_THREADS": "2",
    "MKL_NUM_THREADS": "2",
    "OPENBLAS_NUM_THREADS": "2",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "PYDEVD_DISABLE_FILE_VALIDATION": "1",
}
FORCED = {"PYTHONHASHSEED": "0"}

#: What a machine without AVX-512 (or without AVX2) computes, per native torch capability.
_OTHER = {
    "AVX512": {"ATEN_CPU_CAPABILITY": "avx2", "OPENBLAS_CORETYPE": "Haswell",
               "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "AVX2": {"ATEN_CPU_CAPABILITY": "default", "OPENBLAS_CORETYPE": "Sandybridge",
             "MKL_ENABLE_INSTRUCTIONS": "AVX", "ONEDNN_MAX_CPU_ISA": "SSE41"},
}
_DEFAULT_OTHER = {"ATEN_CPU_CAPABILITY": "default", "OPENBLAS_CORETYPE": "Nehalem"}
KERNEL_VARS = ("ATEN_CPU_CAPABILITY", "OPENBLAS_CORETYPE", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA")


def reproducible_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with the reproducibility settings."""
    env = dict(os.environ if base is None else base)
    for k, v in REPRODUCIBLE_DEFAULTS.items():
        env.setdefault(k, v)
    env.update(FORCED)
    return env


def apply_reproducible_env() -> None:
    """Put the reproducibility settings into ``os.environ`` (inherited by kernels and tools)."""
    os.environ.update(reproducible_env())


def golden_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment in which golden notebooks are made and checked: reproducible, no GPU."""
    env = reproducible_env(base)
    env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def native_capability() -> str:
    """Torch's CPU kernel selection in this environment, as torch names it (``AVX512``, ``AVX2``,
    ``DEFAULT``, ...). An ``ATEN_CPU_CAPABILITY`` already set counts as the native one, so a test
    command run under ``ATEN_CPU_CAPABILITY=avx2`` checks the goldens one step further down."""
    import torch

    return str(torch.backends.cpu.get_cpu_capability()).upper()


def other_kernels_env(native: str | None = None) -> dict[str, str]:
    """Kernel-selection variables that make this machine compute as a different CPU would: one
    step down from the native torch capability (AVX-512 -> AVX2 -> default) for torch, oneDNN,
    MKL and OpenBLAS. On a machine that is not x86-64, torch's portable ``default`` kernels."""
    native = (native or native_capability()).upper()
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return {"ATEN_CPU_CAPABILITY": "default"}
    return dict(_OTHER.get(native, _DEFAULT_OTHER))


def describe(env: dict[str, str]) -> str:
    """``ATEN_CPU_CAPABILITY=avx2 OPENBLAS_CORETYPE=Haswell ...`` for the kernel variables in ``env``."""
    return " ".join(f"{k}={env[k]}" for k in KERNEL_VARS if k in env) or "native kernels"
