"""InterLCM's kernels: schedule, consistency function, the LQ-as-intermediate sampler, degradations,
metrics, and the committed face models (their script reproduces their first training steps)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from iclr25.diffusion.consistency import (alpha_bar, consistency_fn, ddim_step, lcm_sample, lcm_scheduler,
                                          make_cond_unet, predict_x0, pseudo_huber, renoise)
from iclr25.diffusion.degrade import Degradation, degrade, degrade_batch, gaussian_kernel
from iclr25.diffusion.facegen import faces as face_set
from iclr25.diffusion.restore import Eigenfaces, Restorer, frechet, interlcm_restore, psnr, ssim


@pytest.fixture(scope="module")
def unet():
    return make_cond_unet(16, (16, 32), seed=0).eval().requires_grad_(False)


def test_scaled_linear_schedule_and_lcm_timesteps() -> None:
    s = lcm_scheduler(4)
    assert s.timesteps.tolist() == [999, 759, 499, 259]
    ab = alpha_bar(torch.tensor([259, 499, 759]))
    assert torch.allclose(ab, torch.tensor([0.659, 0.2777, 0.0522]), atol=1e-3)
    betas = torch.linspace(0.00085 ** 0.5, 0.012 ** 0.5, 1000, dtype=torch.float32) ** 2
    assert torch.allclose(alpha_bar(torch.arange(1000)), torch.cumprod(1 - betas, 0))
    assert alpha_bar(torch.tensor([-1])).item() == 1.0


def test_boundary_condition_is_exact(unet) -> None:
    x = torch.randn(3, 1, 16, 16)
    assert torch.equal(consistency_fn(unet, x, torch.zeros(3, dtype=torch.long)), x)
    c_skip, c_out = lcm_scheduler().get_scalings_for_boundary_condition_discrete(torch.tensor([259.0, 999.0]))
    assert c_skip.max() < 1e-5 and (c_out - 1).abs().max() < 1e-5


def test_predict_x0_inverts_the_forward_process() -> None:
    x0, eps, t = torch.randn(4, 1, 8, 8), torch.randn(4, 1, 8, 8), torch.tensor([10, 200, 500, 999])
    ab = alpha_bar(t).view(-1, 1, 1, 1)
    assert torch.allclose(predict_x0(eps, ab.sqrt() * x0 + (1 - ab).sqrt() * eps, t), x0, atol=1e-3)
    # a DDIM step with the true noise stays on the same deterministic trajectory
    x_prev = ddim_step(eps, ab.sqrt() * x0 + (1 - ab).sqrt() * eps, t, t - 20)
    abp = alpha_bar(t - 20).view(-1, 1, 1, 1)
    assert torch.allclose(x_prev, abp.sqrt() * x0 + (1 - abp).sqrt() * eps, atol=1e-4)


def test_renoise_has_the_forward_marginal() -> None:
    x0 = torch.full((20000, 1, 1, 1), 0.7)
    xt = renoise(x0, 499, torch.Generator().manual_seed(0))
    ab = alpha_bar(torch.tensor(499)).item()
    assert abs(xt.mean().item() - ab ** 0.5 * 0.7) < 0.02 and abs(xt.var().item() - (1 - ab)) < 0.02


def test_lq_as_intermediate_equals_lcm_loop_with_first_output_replaced(unet) -> None:
    """With the LCM's own step-0 output as the 'low-quality image', InterLCM's loop is diffusers'
    multistep LCM loop, bit for bit (same generator)."""
    g = torch.Generator().manual_seed(3)
    full = lcm_sample(unet, (2, 1, 16, 16), 4, generator=g)
    g = torch.Generator().manual_seed(3)
    from diffusers.utils.torch_utils import randn_tensor

    sched = lcm_scheduler(4)
    x = randn_tensor((2, 1, 16, 16), generator=g)
    t0 = sched.timesteps[0]
    eps = unet(x, torch.full((2,), int(t0)), encoder_hidden_states=torch.zeros(2, 4, 32)).sample
    _, denoised0 = sched.step(eps, t0, x, generator=torch.Generator(), return_dict=False)
    with torch.no_grad():
        ours = interlcm_restore(unet, None, denoised0, start=1, num_steps=4, generator=g)
    assert torch.equal(ours, full)


def test_restorer_starts_as_the_frozen_model(unet) -> None:
    r = Restorer(unet, seed=0)
    x, lq, t = torch.randn(2, 1, 16, 16), torch.randn(2, 1, 16, 16), torch.tensor([500, 500])
    with torch.no_grad():
        ref = unet(x, t, encoder_hidden_states=torch.zeros(2, 4, 32)).sample
        assert torch.allclose(r.eps(unet, x, t, lq), ref, atol=1e-6)


def test_gradients_flow_through_the_sampler_into_the_encoders_only(unet) -> None:
    r = Restorer(unet, seed=0)
    lq = torch.randn(2, 1, 16, 16)
    out = interlcm_restore(unet, r, lq, start=1, generator=torch.Generator().manual_seed(0))
    out.sum().backward()
    assert all(p.grad is None for p in unet.parameters())
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in r.parameters())


def test_degradation_identity_and_determinism() -> None:
    faces = face_set(4, "test", 16)[0]
    assert torch.allclose(gaussian_kernel(1.0).sum(), torch.tensor(1.0))
    # no blur, no resize, no noise, best JPEG: only 8-bit JPEG rounding remains
    mild = degrade(faces[0], Degradation(sigma=1e-3, r=1.0, noise=0.0, jpeg=100), np.random.default_rng(0))
    assert (mild - faces[0]).abs().max() < 0.05
    a = degrade_batch(faces, np.random.default_rng(5), "severe")
    b = degrade_batch(faces, np.random.default_rng(5), "severe")
    assert torch.equal(a, b) and psnr(a, faces).mean() < psnr(mild[None], faces[:1]).mean()


def test_mild_and_severe_split_every_training_range_in_two() -> None:
    from iclr25.diffusion.degrade import SEVERITY

    tr, mild, sev = SEVERITY["train"], SEVERITY["mild"], SEVERITY["severe"]
    assert tr["r"] == (1.0, 4.0)                         # the design's downsampling range, up to 4 x
    for k in tr:
        lo, hi = tr[k]
        a, b = (mild, sev) if k != "jpeg" else (sev, mild)   # a low JPEG quality is the severe half
        assert a[k][0] == lo and b[k][1] == hi
        assert abs(a[k][1] - (lo + hi) / 2) <= 0.5 and abs(b[k][0] - (lo + hi) / 2) <= 0.5
        assert a[k][1] <= b[k][0]


def test_metrics_agree_with_skimage() -> None:
    from skimage.metrics import peak_signal_noise_ratio

    g = torch.Generator().manual_seed(0)
    a, b = torch.rand(3, 1, 16, 16, generator=g) * 2 - 1, torch.rand(3, 1, 16, 16, generator=g) * 2 - 1
    ref = [peak_signal_noise_ratio(x.numpy(), y.numpy(), data_range=2.0) for x, y in zip(a, b)]
    assert np.allclose(psnr(a, b).numpy(), ref, atol=1e-4)
    assert np.allclose(ssim(a, a), 1.0)


def test_eigenface_identity_is_scale_invariant_and_maximal_on_itself() -> None:
    faces = face_set(75, "reference", 16)[0]
    e = Eigenfaces(faces[:70], k=16)
    x = faces[70:75]
    assert np.allclose(e.cos(x, x), 1.0)
    centred = torch.from_numpy(e.pca.mean_).float().view(1, 1, 16, 16)
    assert np.allclose(e.cos(x, centred + 2 * (x - centred)), 1.0, atol=1e-6)


def test_pseudo_huber_is_zero_at_equality_and_linear_far_away() -> None:
    a = torch.zeros(10)
    # sqrt(c^2) - c is 0 up to float32 round-off of c = 1e-3 (one ulp under ATen's default kernels)
    assert abs(pseudo_huber(a, a).item()) <= 8 * torch.finfo(torch.float32).eps * 1e-3
    # far away: |a - b| - c + c^2 / (2 |a - b|), to float32 round-off at 5 (the old bar, |d - 5| < c,
    # sat 1e-7 from the true value)
    assert pseudo_huber(a, a + 5.0).item() == pytest.approx(math.sqrt(25.0 + 1e-6) - 1e-3, rel=1e-5)


def test_diffusion_restore_starts_at_the_grid_timestep(unet) -> None:
    """From ``t_start`` on the 50-step grid the sampler makes one call per grid step at or below it;
    from noise it makes all 50."""
    from iclr25.diffusion.restore import diffusion_restore

    seen = []
    h = unet.register_forward_pre_hook(lambda mod, args: seen.append(int(args[1].reshape(-1)[0])))
    lq = torch.zeros(1, 1, 16, 16)
    with torch.no_grad():
        diffusion_restore(unet, None, lq, 50, t_start=259, generator=torch.Generator().manual_seed(0))
        n_start = len(seen)
        seen.clear()
        diffusion_restore(unet, None, lq, 50, generator=torch.Generator().manual_seed(0))
    h.remove()
    assert n_start == 13 and len(seen) == 50 and seen[0] == 999 and seen[-1] == 19


def test_train_restorer_schedule_and_validation_hook_leave_training_unchanged() -> None:
    """A validation hook that draws from its own generator does not change the run (same losses), the
    cosine schedule ends at lr 0, and the hook sees every step before it is taken."""
    from iclr25.diffusion.restore import train_restorer

    def run(hook):
        torch.manual_seed(0)
        w = torch.nn.Parameter(torch.randn(4))
        pairs = lambda n, g: (torch.randn(n, 4, generator=g), torch.randn(n, 4, generator=g))
        loss = lambda hq, lq, g: ((lq * w - hq) ** 2).mean()
        return train_restorer(loss, [w], pairs, 6, 3, 1e-2, seed=1, warmup=2, on_step=hook), w.detach().clone()

    seen = []
    plain, w_plain = run(None)
    hooked, w_hooked = run(lambda s: seen.append((s, float(torch.randn(3, generator=torch.Generator().manual_seed(s)).sum()))))
    assert plain == hooked and torch.equal(w_plain, w_hooked)
    assert [s for s, _ in seen] == list(range(6))
    from iclr25.common.optim import warmup_cosine
    f = warmup_cosine(2, 6)
    assert abs(f(0) - 0.5) < 1e-12 and abs(f(1) - 0.5 * (1 + np.cos(np.pi / 6))) < 1e-12 and abs(f(6)) < 1e-12


def _exact_moments(n: int, mean: np.ndarray, sd: np.ndarray, seed: int) -> np.ndarray:
    """``n`` samples whose sample mean is ``mean`` and sample covariance ``diag(sd^2)`` exactly."""
    x = np.random.default_rng(seed).standard_normal((n, len(mean)))
    x -= x.mean(0)
    x = x @ np.linalg.inv(np.linalg.cholesky(np.cov(x, rowvar=False))).T      # whitened: sample cov = I
    return mean + x * sd


def test_frechet_distance_matches_the_closed_form_for_diagonal_gaussians() -> None:
    # for diagonal covariances FD = |m_a - m_b|^2 + sum_i (s_a,i - s_b,i)^2
    ma, sa = np.array([0.0, 1.0, -2.0]), np.array([1.0, 2.0, 0.5])
    mb, sb = np.array([1.0, 1.0, 0.0]), np.array([3.0, 1.0, 0.5])
    a, b = _exact_moments(200, ma, sa, 0), _exact_moments(300, mb, sb, 1)
    closed = ((ma - mb) ** 2).sum() + ((sa - sb) ** 2).sum()
    assert abs(frechet(a, b) - closed) < 1e-8
    assert abs(frechet(a, a)) < 1e-8 and abs(frechet(a, b) - frechet(b, a)) < 1e-8
