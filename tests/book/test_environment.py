"""The reproducible environment and the 'other CPU' kernel selection."""

from iclr25.book.environment import (describe, golden_env, other_kernels_env, reproducible_env)


def test_reproducible_env_fixes_hash_seed_and_keeps_user_threads() -> None:
    env = reproducible_env({"PYTHONHASHSEED": "123", "OMP_NUM_THREADS": "1"})
    assert env["PYTHONHASHSEED"] == "0" and env["OMP_NUM_THREADS"] == "1"
    assert env["HF_HUB_OFFLINE"] == "1" and env["MKL_NUM_THREADS"] == "2"


def test_golden_env_hides_the_gpu() -> None:
    assert golden_env({})["CUDA_VISIBLE_DEVICES"] == ""


def test_other_kernels_step_down_from_native() -> None:
    import platform

    if platform.machine().lower() not in ("x86_64", "amd64"):
        assert other_kernels_env("DEFAULT") == {"ATEN_CPU_CAPABILITY": "default"}
        return
    assert other_kernels_env("AVX512")["ATEN_CPU_CAPABILITY"] == "avx2"
    assert other_kernels_env("AVX2")["ATEN_CPU_CAPABILITY"] == "default"
    assert other_kernels_env("DEFAULT")["ATEN_CPU_CAPABILITY"] == "default"
    assert describe(other_kernels_env("AVX512")).startswith("ATEN_CPU_CAPABILITY=avx2 OPENBLAS_CORETYPE=Haswell")
    assert describe({}) == "native kernels"
