"""The shared optimisation loop: same weights as the hand-written loop it replaced, and its schedule."""

import math

import torch

from iclr25.common.optim import fit, warmup_cosine


def _model_and_data(seed: int = 0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    return model, torch.randn(64, 5), torch.randn(64, 1)


def test_fit_is_bit_identical_to_the_hand_written_loop():
    steps, warmup = 12, 4
    model, x, y = _model_and_data()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine(warmup, steps))
    ref = []
    for s in range(steps):
        loss = ((model(x[s::4]) - y[s::4]) ** 2).mean() * 50
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        ref.append(float(loss.detach()))
    model2, _, _ = _model_and_data()
    opt2 = torch.optim.AdamW(model2.parameters(), lr=1e-2)
    got = fit(model2.parameters(), opt2, lambda s: ((model2(x[s::4]) - y[s::4]) ** 2).mean() * 50, steps,
              lr_lambda=warmup_cosine(warmup, steps))
    assert got == ref
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), model2.parameters()))


def test_clip_bounds_the_step_and_none_disables_it():
    w = torch.nn.Parameter(torch.tensor([100.0]))
    fit([w], torch.optim.SGD([w], lr=1.0), lambda _: (w ** 2).sum(), 1, clip=1.0)
    assert torch.allclose(w, torch.tensor([99.0]))          # gradient 200 clipped to norm 1
    v = torch.nn.Parameter(torch.tensor([100.0]))
    fit([v], torch.optim.SGD([v], lr=0.1), lambda _: (v ** 2).sum(), 1, clip=None)
    assert torch.allclose(v, torch.tensor([80.0]))          # 100 - 0.1 * 200


def test_warmup_cosine_schedule():
    f = warmup_cosine(10, 100)
    assert math.isclose(f(0), 0.1 * 0.5 * (1 + math.cos(0.0)))
    assert math.isclose(f(9), 0.5 * (1 + math.cos(math.pi * 9 / 100)))
    assert math.isclose(f(50), 0.5) and f(100) == 0.0 and f(150) == 0.0
