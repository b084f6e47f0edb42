"""Vaccine, the RepNoise-style loss, clipped ascent and the pipeline's data: limits and identities."""

import numpy as np
import pytest
import torch

from iclr25.align.ascent import clipped_ascent_loss
from iclr25.align.booster import global_norm, trainable
from iclr25.align.harmful_finetuning import (AlignConfig, AttackConfig, attack_set, hft_data,
                                             method_grads, take, align)
from iclr25.align.repnoise import mmd_rbf
from iclr25.align import vaccine
from iclr25.align.vaccine import block_modules, vaccine_grad, vaccine_perturbation
from iclr25.lm import TinyLM, TinyLMConfig, answer_nll, build_world


@pytest.fixture(scope="module")
def setup():
    world = build_world(0)
    torch.manual_seed(0)
    model = TinyLM(TinyLMConfig(vocab_size=len(world.vocab), d_model=16, n_layers=2, n_heads=2, d_ff=32,
                                max_len=48)).double()
    data = hft_data(world, 3, n_reviews=20, n_test=10)
    return world, model, data


def _close(a, b, tol=1e-10):
    return float(global_norm([x - y for x, y in zip(a, b)])) <= tol * max(1.0, float(global_norm(b)))


def test_vaccine_rho_zero_is_sft_and_perturbation_has_norm_rho(setup):
    _, model, data = setup
    fb = take(data.align, range(8))
    f = lambda m: answer_nll(m, fb)  # noqa: E731
    g, _ = vaccine_grad(model, f, 0.0)
    assert _close(g, torch.autograd.grad(f(model), trainable(model)))
    e, _ = vaccine_perturbation(model, f, 0.7)
    assert float(global_norm(e)) == pytest.approx(0.7, rel=1e-6)
    g1, st = vaccine_grad(model, f, 0.7)
    assert st["f_perturbed"] > st["f"]  # an ascent step on the hidden states raises the loss


def test_vaccine_hooks_the_attention_outputs(setup):
    # the official hook: every layer's attention module; the whole block is the alternative, and it matters
    _, model, data = setup
    assert vaccine.HOOK == "attn"
    assert block_modules(model) == [b.attn for b in model.blocks] and block_modules(model, "block") == list(model.blocks)
    with pytest.raises(ValueError):
        block_modules(model, "mlp")
    f = lambda m: answer_nll(m, take(data.align, range(8)))  # noqa: E731
    g_attn, _ = vaccine_grad(model, f, 0.7)
    vaccine.HOOK = "block"
    try:
        g_block, _ = vaccine_grad(model, f, 0.7)
        e, _ = vaccine_perturbation(model, f, 0.7)
        assert float(global_norm(e)) == pytest.approx(0.7, rel=1e-6)
    finally:
        vaccine.HOOK = "attn"
    assert not _close(g_attn, g_block, tol=1e-6)


def test_sft_equals_booster_with_lambda_zero_and_ascent_above_cap(setup):
    _, model, data = setup
    fb, hb = take(data.align, range(8)), take(data.harmful, range(8))
    gen = torch.Generator().manual_seed(0)
    g_sft, _ = method_grads("sft", model, fb, hb, {}, gen)
    g_b, _ = method_grads("booster", model, fb, hb, {"lam": 0.0, "alpha": 0.1}, gen)
    assert _close(g_b, g_sft)
    h = float(answer_nll(model, hb).detach())
    g_a, _ = method_grads("ascent", model, fb, hb, {"gamma": 3.0, "cap": h / 2}, gen)  # h above cap
    assert _close(g_a, g_sft)
    with pytest.raises(ValueError):
        method_grads("nope", model, fb, hb, {}, gen)


def test_clipped_ascent_value():
    f, h = torch.tensor(1.0), torch.tensor(5.0)
    assert float(clipped_ascent_loss(f, h, 0.5, 4.0)) == pytest.approx(1.0 - 2.0)
    assert float(clipped_ascent_loss(f, torch.tensor(2.0), 0.5, 4.0)) == pytest.approx(0.0)


def test_mmd_zero_for_identical_samples_and_positive_otherwise():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(20, 5, generator=g, dtype=torch.float64)
    assert float(mmd_rbf(x, x)) == pytest.approx(0.0, abs=1e-12)
    assert float(mmd_rbf(x, x + 3.0)) > 0.1


def test_data_roles_disjoint_and_attack_set_paired(setup):
    world, _, data = setup
    roles = [set(v) for v in data.toxins.values()]
    assert sum(map(len, roles)) == len(set().union(*roles))
    cfg = AttackConfig(n=50)
    a1, a2 = attack_set(world, data, 0.2, cfg), attack_set(world, data, 0.2, cfg)
    assert a1 == a2  # the same for every method at a seed
    assert sum(e.kind != "sentiment" for e in a1) == 10
    assert all(e.meta["entity"] in data.toxins["attack"] for e in a1 if e.kind != "sentiment")
    assert AttackConfig(n=200, batch=10, epochs=2).steps == 40 and AttackConfig(n=55, batch=10, epochs=3).steps == 18


def test_align_missing_hyperparameters(setup):
    _, model, data = setup
    with pytest.raises(ValueError):
        align(model, data, "booster", {"lam": 1.0}, AlignConfig(steps=1))


def test_longer_attack_starts_as_the_1x_attack_and_evaluates_each_length(setup):
    import copy
    from iclr25.align.harmful_finetuning import attack
    world, model, data = setup
    cfg = AttackConfig(n=20, batch=10, epochs=1, lr=1e-3)
    m1, m4 = copy.deepcopy(model), copy.deepcopy(model)
    t1 = attack(m1, world, data, 0.2, cfg)
    t4 = attack(m4, world, data, 0.2, cfg, lengths=(1, 2, 4))
    assert t1["h_steps"] == list(range(cfg.steps + 1))
    assert t4["h_steps"] == t1["h_steps"] + [s for s in range(cfg.steps + 1, 4 * cfg.steps + 1) if s % 5 == 0]
    assert t4["h"][:cfg.steps + 1] == t1["h"]           # the 1x attack, then more of the same
    assert sorted(t4["evals"]) == [1, 2, 4] and t1["evals"] == {}
    assert t4["evals"][1]["h"] == pytest.approx(t1["h"][-1])


def test_warm_start_is_shared_sft_phase(setup):
    import copy
    from iclr25.align.harmful_finetuning import warm_start
    _, model, data = setup
    cfg = AlignConfig(steps=2, warm_steps=3, batch=4, harm_batch=4)
    a, b = copy.deepcopy(model), copy.deepcopy(model)
    align(a, data, "sft", {}, cfg)                      # warm start inside
    warm_start(b, data, cfg)
    align(b, data, "sft", {}, cfg, warm=False)          # the same, in two calls
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))
    c = copy.deepcopy(model)
    align(c, data, "sft", {}, AlignConfig(steps=2, batch=4, harm_batch=4))  # no warm start: differs
    assert not all(torch.equal(x, y) for x, y in zip(a.parameters(), c.parameters()))


def test_repnoise_mask_keeps_only_the_hazard_tokens(setup):
    world, _, data = setup
    full, kept = data.harmful, data.harmful_distinct
    assert torch.equal(full.ids, kept.ids) and bool((kept.mask <= full.mask).all())
    words = [[world.vocab.words[int(i)] for i, m in zip(row, mrow) if m] for row, mrow in zip(kept.ids, kept.mask)]
    assert all(len(w) == 3 and w[-1] == "heat" for w in words)  # the two hazard ingredients and "heat"
    assert not {"mix", "with", "then", "."} & {x for w in words for x in w}


def test_attack_trace_reuses_the_evaluations_without_changing_them(setup):
    import copy
    from iclr25.align.harmful_finetuning import attack
    world, model, data = setup
    cfg = AttackConfig(n=20, batch=4, epochs=1, lr=1e-3)   # 5 steps: the 2x end is on the h trace too
    tox = list(data.toxins["eval"])
    kw = dict(hs_every=1, lengths=(1, 2))
    full = attack(copy.deepcopy(model), world, data, 0.2, cfg, hs_toxins=tox[::-1], **kw)  # other order: recomputed
    lean = attack(copy.deepcopy(model), world, data, 0.2, cfg, hs_toxins=tox, hs_start=-1.0, trace_h=False, **kw)
    assert full["hs_steps"] == lean["hs_steps"] == list(range(2 * cfg.steps + 1))
    assert lean["hs"][0] == -1.0 and full["hs"][1:] == lean["hs"][1:]   # step 0 is the caller's; the rest agree
    assert [lean["evals"][k]["hs"] for k in (1, 2)] == [lean["hs"][k * cfg.steps] for k in (1, 2)]
    assert lean["h_steps"] == [0, cfg.steps, 2 * cfg.steps]              # h only where it is evaluated
    assert lean["h"] == [dict(zip(full["h_steps"], full["h"]))[s] for s in lean["h_steps"]]
    assert full["evals"] == lean["evals"]
