"""Edit-friendly DDPM inversion and the scheduler identities it rests on."""

import pytest
import torch

from iclr25.diffusion.inversion import (alpha_bar, ddim_invert, ddim_sample, ddpm_invert,
                                        posterior_mean, prev_timestep, sample_with_noises,
                                        step_sigma)
from iclr25.diffusion.unet import inversion_schedule, make_tiny_unet, train_schedule


@pytest.fixture(scope="module")
def unet():
    return make_tiny_unet(8, channels=(8, 16), attention=(False, True), norm_groups=4, seed=0).eval()


def images(n=2, res=8, seed=0):
    return torch.rand(n, 3, res, res, generator=torch.Generator().manual_seed(seed)) * 2 - 1


def test_schedules_agree_with_each_other():
    # the sampler walks the training schedule: same alpha_bar at every timestep
    assert torch.allclose(inversion_schedule(10).alphas_cumprod, train_schedule().alphas_cumprod)


@pytest.mark.parametrize("steps", [5, 20])
def test_trailing_schedule_covers_the_chain_with_positive_sigmas(steps):
    sched = inversion_schedule(steps)
    ts = [int(t) for t in sched.timesteps]
    assert ts[0] == 999 and ts == sorted(ts, reverse=True) and len(ts) == steps
    assert prev_timestep(sched, ts[-1]) < 0                # the last step lands on the final alpha
    assert float(sched.final_alpha_cumprod) == pytest.approx(float(sched.alphas_cumprod[0]))
    assert all(step_sigma(sched, t) > 0 for t in ts)       # no 0/0 noise map anywhere


def test_step_is_mean_plus_sigma_times_noise():
    # diffusers' eta = 1 step is mu + sigma z with our closed-form sigma (the DDPM posterior std)
    sched = inversion_schedule(10)
    x, eps, z = images(seed=1), images(seed=2), images(seed=3)
    for t in [int(t) for t in sched.timesteps]:
        mu = posterior_mean(sched, eps, t, x)
        full = sched.step(eps, t, x, eta=1.0, variance_noise=z).prev_sample
        assert torch.allclose(full - mu, step_sigma(sched, t) * z, atol=1e-5)
        # and mu is the DDPM posterior mean written with x0_hat
        a_t, a_p = alpha_bar(sched, t), alpha_bar(sched, prev_timestep(sched, t))
        x0 = (x - (1 - a_t).sqrt() * eps) / a_t.sqrt()
        s2 = step_sigma(sched, t) ** 2
        assert torch.allclose(mu, a_p.sqrt() * x0 + (1 - a_p - s2).sqrt() * eps, atol=1e-5)


def test_ddpm_inversion_reconstructs_exactly(unet):
    sched = inversion_schedule(12)
    x0 = images()
    xs, zs = ddpm_invert(unet, sched, x0, torch.Generator().manual_seed(0))
    assert xs.shape == (13, *x0.shape) and zs.shape == (12, *x0.shape)
    assert torch.equal(xs[-1], x0)
    out = sample_with_noises(unet, sched, xs[0], zs)
    # float32: round-off amplified by 1 / sqrt(abar) at the noisiest steps stays far below 1e-3
    assert (out - x0).abs().max() < 1e-3


def test_ddpm_inversion_is_exact_for_any_noise_prediction():
    # the identity does not depend on the model: a model-free eps_fn reconstructs too
    sched = inversion_schedule(8)
    x0 = images(seed=5)
    eps_fn = lambda x, t, i: torch.tanh(x) * (i + 1) / 8          # noqa: E731
    xs, zs = ddpm_invert(None, sched, x0, torch.Generator().manual_seed(1), eps_fn=eps_fn)
    assert (sample_with_noises(None, sched, xs[0], zs, eps_fn=eps_fn) - x0).abs().max() < 1e-4


def test_fresh_noise_breaks_the_reconstruction(unet):
    sched = inversion_schedule(8)
    x0 = images()
    xs, zs = ddpm_invert(unet, sched, x0, torch.Generator().manual_seed(0))
    other = torch.randn(zs.shape, generator=torch.Generator().manual_seed(9))
    assert (sample_with_noises(unet, sched, xs[0], other) - x0).abs().max() > 0.1


def test_ddim_round_trip_is_exact_when_eps_is_constant_along_the_path():
    # for data concentrated on one image m the exact eps is (x_t - sqrt(abar_t) m) / sqrt(1 - abar_t),
    # constant along every ODE path, and DDIM inversion followed by DDIM sampling is exact (for a
    # network it is not: the chapter's figure)
    sched = inversion_schedule(10)
    m = images(n=1, seed=6)

    class PointMassEps(torch.nn.Module):
        def forward(self, x, t):
            a = sched.alphas_cumprod[int(t)].double()
            return type("Out", (), {"sample": (x - a.sqrt() * m.double()) / (1 - a).sqrt()})()

    xT = ddim_invert(PointMassEps(), sched, m.double())
    # (the scheduler keeps alpha_bar in float32, hence 1e-6 rather than round-off of float64)
    assert (ddim_sample(PointMassEps(), sched, xT) - m.double()).abs().max() < 1e-6


def test_results_stay_on_the_input_dtype_and_device(unet):
    sched = inversion_schedule(4)
    x0 = images().double()
    u = make_tiny_unet(8, channels=(8, 16), attention=(False, True), norm_groups=4, seed=0).double().eval()
    xs, zs = ddpm_invert(u, sched, x0, torch.Generator().manual_seed(0))
    assert xs.dtype == zs.dtype == torch.float64 and xs.device == x0.device
    assert (sample_with_noises(u, sched, xs[0], zs) - x0).abs().max() < 1e-10
