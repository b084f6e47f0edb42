"""Devices: every sampling kernel returns its result on its inputs' device, in their dtype.

No GPU is needed to catch a tensor made on the wrong device. Each function runs twice:
on ``meta`` tensors (shapes only) while new tensors default to the CPU, and on CPU tensors while
new tensors default to ``meta``. A tensor made without ``device=`` then sits on the wrong device
in one of the two runs, and either the computation fails (mixed devices) or the result lands on
the wrong device; both fail the test, as a CUDA run would.
"""

import contextlib

import pytest
import torch

from iclr25.sampling import (IMQ, RBF, Linear, Matern52, gaussian_mixture_score, gaussian_score,
                             ksd, ksd_from_scores, logistic_posterior_score, sq_dists,
                             standard_gaussian_score, stein_kernel_matrix, svgd, svgd_direction,
                             svgd_step, ula)

KERNELS = [RBF(0.8), IMQ(1.0, -0.5), Matern52(1.2), Linear(1.0), Matern52(1.0) + Linear(1.0)]
SETUPS = ["meta-inputs", "meta-default"]


def _inputs_and_default(setup):
    """(device of the inputs, context that sets the default device to the *other* one)."""
    if setup == "meta-inputs":
        return torch.device("meta"), contextlib.nullcontext()
    return torch.device("cpu"), torch.device("meta")


def _targets(dev, dtype):
    mean = torch.zeros(3, dtype=dtype, device=dev)
    cov = torch.eye(3, dtype=dtype, device=dev)
    means = torch.ones(2, 3, dtype=dtype, device=dev)
    A = torch.ones(5, 3, dtype=dtype, device=dev)
    y = torch.ones(5, dtype=dtype, device=dev)
    return {"standard": standard_gaussian_score, "gaussian": gaussian_score(mean, cov),
            "mixture": gaussian_mixture_score(means, 0.7),
            "logistic": logistic_posterior_score(A, y, 1.5)}


def _check(out, dev, dtype):
    for t in out if isinstance(out, tuple) else (out,):
        assert t.device.type == dev.type, f"result on {t.device}, inputs on {dev}"
        assert t.dtype == dtype, f"result is {t.dtype}, inputs are {dtype}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("setup", SETUPS)
@pytest.mark.parametrize("kernel", KERNELS, ids=repr)
def test_kernels_stein_and_svgd_stay_on_the_input_device(kernel, setup, dtype):
    dev, default = _inputs_and_default(setup)
    X = torch.ones(2, 6, 3, dtype=dtype, device=dev)  # values do not matter on meta
    S = torch.ones_like(X)
    with default:
        _check(sq_dists(X, X), dev, dtype)
        _check(kernel.matrix(X, X), dev, dtype)
        _check(kernel.repulsion(X, X), dev, dtype)
        _check(stein_kernel_matrix(X, S, kernel), dev, dtype)
        _check(ksd_from_scores(X, S, kernel, "U"), dev, dtype)
        _check(svgd_direction(X, S, kernel), dev, dtype)
        _check(kernel.svgd_terms(X, S), dev, dtype)


@pytest.mark.parametrize("setup", SETUPS)
@pytest.mark.parametrize("target", ["standard", "gaussian", "mixture", "logistic"])
def test_targets_ksd_svgd_and_ula_stay_on_the_input_device(target, setup):
    dev, default = _inputs_and_default(setup)
    dtype = torch.float64
    with default:
        score = _targets(dev, dtype)[target]
        X = torch.ones(2, 6, 3, dtype=dtype, device=dev)
        _check(score(X), dev, dtype)
        _check(ksd(X, score, RBF()), dev, dtype)
        _check(svgd_step(X, score, RBF(), 0.1), dev, dtype)
        _check(svgd(X, score, RBF(), 0.1, n_steps=2), dev, dtype)
        _check(ula(X, score, 0.1, n_steps=2), dev, dtype)
        # a seeded CPU generator (what the chapter passes) must not pin the chains to the CPU
        _check(ula(X, score, 0.1, n_steps=2, generator=torch.Generator().manual_seed(0)), dev, dtype)


def test_ula_with_a_cpu_generator_gives_the_same_chains_on_any_device():
    # the noise is drawn on the generator's device, so the seed fixes the chains everywhere
    X0 = torch.randn(4, 3, 2, generator=torch.Generator().manual_seed(1))
    a = ula(X0, standard_gaussian_score, 0.1, 5, generator=torch.Generator().manual_seed(2))
    b = ula(X0.to("meta"), standard_gaussian_score, 0.1, 5, generator=torch.Generator().manual_seed(2))
    assert b.device.type == "meta" and b.shape == a.shape
    c = ula(X0, standard_gaussian_score, 0.1, 5, generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(a, c)


def test_ula_draws_its_noise_on_the_generators_device(monkeypatch):
    # torch.Generator("cpu") cannot fill a CUDA tensor: the noise must be drawn where the generator
    # lives and then moved (meta accepts either, so watch the calls instead)
    calls = []
    randn = torch.randn

    def spy(*args, **kwargs):
        calls.append((kwargs.get("device"), kwargs.get("generator")))
        return randn(*args, **kwargs)

    monkeypatch.setattr(torch, "randn", spy)
    g = torch.Generator().manual_seed(0)
    out = ula(torch.ones(3, 2, device="meta"), standard_gaussian_score, 0.1, 2, generator=g)
    assert out.device.type == "meta"
    assert calls and all(torch.device(dev) == g.device for dev, gen in calls if gen is g)
