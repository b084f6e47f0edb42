"""Tests of iclr25.blackbox: ZO estimator moments, score-function identity, simplex projection,
CMA-ES, the query-counting black box and its gradient discipline."""

import itertools

import numpy as np
import pytest
import torch

from iclr25.blackbox import (CMAES, BlackBoxLM, BudgetExceeded, CategoricalPromptPolicy,
                             PromptTuningConfig, encode_task, pg_gradient, pmi_candidates,
                             project_simplex, prompted_logits, random_projection, run_bbt, run_bdpl,
                             run_zo_pog, zo_directions, zo_gradient, zo_variance_gaussian)
from iclr25.lm import TinyLM, TinyLMConfig, few_shot_split, toy_vocab


def _quadratic(d, seed=0):
    g = torch.Generator().manual_seed(seed)
    M = torch.randn(d, d, generator=g, dtype=torch.float64)
    H = M @ M.T / d + torch.eye(d, dtype=torch.float64)
    b = torch.randn(d, generator=g, dtype=torch.float64)
    f = lambda Z: 0.5 * ((Z @ H) * Z).sum(-1) + Z @ b  # noqa: E731
    return f, H, b


@pytest.mark.parametrize("q", [1, 8])
def test_zo_gaussian_unbiased_with_theoretical_variance(q):
    d, N = 20, 4000
    f, H, b = _quadratic(d)
    z = torch.randn(d, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    grad = H @ z + b
    gen = torch.Generator().manual_seed(2)
    G = torch.stack([zo_gradient(f, z, 0.1, q, generator=gen) for _ in range(N)])
    err = ((G - grad) ** 2).sum(1)
    var_theory = zo_variance_gaussian(float(grad @ grad), d, q)
    assert abs(err.mean() / var_theory - 1) < 0.1
    # mean within 3 standard errors (squared-norm form: E||mean - g||^2 = var/N)
    assert float(((G.mean(0) - grad) ** 2).sum()) < 3 * var_theory / N


def test_zo_sphere_and_forward_difference_are_unbiased_on_quadratic():
    d, N = 10, 6000
    f, H, b = _quadratic(d, 3)
    z = torch.ones(d, dtype=torch.float64)
    grad = H @ z + b
    gen = torch.Generator().manual_seed(0)
    for kw in ({"dist": "sphere"}, {"two_point": False}):
        G = torch.stack([zo_gradient(f, z, 0.05, 4, generator=gen, **kw) for _ in range(N)])
        se = G.std(0) / N ** 0.5
        assert bool((((G.mean(0) - grad).abs()) < 4 * se).all()), kw
    with pytest.raises(ValueError, match="valid"):
        zo_gradient(f, z, 0.1, 2, dist="cauchy")


def test_score_function_identity_exact_by_enumeration():
    n, V, I = 2, 5, 8
    gen = torch.Generator().manual_seed(0)
    pol = CategoricalPromptPolicy(n, V, tau=0.7, gumbel=True, generator=gen)
    pol.alpha = torch.rand(n, V, generator=gen, dtype=torch.float64) + 0.1
    pol.redraw()
    table = torch.randn(V, V, generator=gen, dtype=torch.float64)
    # exact gradient of E_j L(j) through p = softmax((log a + g)/tau) with the drawn g fixed
    g_noise = torch.log(pol.probs) * pol.tau - torch.log(pol.alpha)
    a = pol.alpha.clone().requires_grad_(True)
    p = torch.softmax((torch.log(a) + g_noise) / pol.tau, -1)
    assert torch.allclose(p, pol.probs)
    exact = sum(p[0, i] * p[1, j] * table[i, j] for i, j in itertools.product(range(V), range(V)))
    (true,) = torch.autograd.grad(exact, a)
    ests = []
    for _ in range(4000):
        J = pol.sample(I)
        ests.append(pg_gradient(table[J[:, 0], J[:, 1]], pol.score(J)))
    ests = torch.stack(ests)
    se = ests.std(0) / len(ests) ** 0.5
    assert bool(((ests.mean(0) - true).abs() < 4 * se + 1e-9).all())


def test_baseline_reduces_variance_when_losses_are_offset():
    gen = torch.Generator().manual_seed(1)
    pol = CategoricalPromptPolicy(2, 4, gumbel=False, generator=gen)
    losses_tab = 5.0 + torch.rand(4, 4, generator=gen, dtype=torch.float64)
    var = {}
    for base in (True, False):
        ests = torch.stack([pg_gradient(losses_tab[J[:, 0], J[:, 1]], pol.score(J), baseline=base)
                            for J in (pol.sample(10) for _ in range(1000))])
        var[base] = float(ests.var(0).sum())
    assert var[True] < 0.1 * var[False]


def test_project_simplex_properties():
    v = torch.randn(50, 7, dtype=torch.float64) * 3
    p = project_simplex(v)
    assert torch.allclose(p.sum(-1), torch.ones(50, dtype=torch.float64)) and bool((p >= 0).all())
    q = torch.softmax(torch.randn(5, 7, dtype=torch.float64), -1)
    assert torch.allclose(project_simplex(q), q)  # points of the simplex are fixed
    # optimality: projection is closer than random simplex points
    r = torch.softmax(torch.randn(50, 7, dtype=torch.float64), -1)
    assert bool(((v - p).norm(dim=-1) <= (v - r).norm(dim=-1) + 1e-12).all())


def test_cmaes_minimises_rotated_ellipsoid():
    rng = np.random.default_rng(0)
    Q, _ = np.linalg.qr(rng.standard_normal((8, 8)))
    H = Q @ np.diag(np.logspace(0, 3, 8)) @ Q.T
    es = CMAES(np.ones(8) * 3, 1.0, popsize=12, seed=0)
    for _ in range(400):
        X = es.ask()
        es.tell(X, np.einsum("ki,ij,kj->k", X, H, X))
    assert float(es.mean @ H @ es.mean) < 1e-8


def test_pmi_candidates_rank_label_words():
    texts = [["good", "x"], ["good", "y"], ["bad", "x"], ["bad", "y"], ["good", "z"]]
    labels = [1, 1, 0, 0, 1]
    assert set(pmi_candidates(texts, labels, 2)) == {"good", "bad"}


def test_random_projection_scale():
    A = random_projection(4, 48, 50, 0.1, alpha=100, generator=torch.Generator().manual_seed(0))
    assert A.shape == (192, 50)
    assert abs(float(A.std()) - 100 * 0.1 / 50 ** 0.5) < 0.05


def _bb(budget, task="sentiment"):
    torch.manual_seed(0)
    v = toy_vocab()
    m = TinyLM(TinyLMConfig(vocab_size=len(v), d_model=16, d_ff=32, n_heads=2))
    sp = few_shot_split(task, 4, 12, seed=0)
    enc = {k: encode_task(v, x) for k, x in sp.items()}
    return m, v, BlackBoxLM(m, v, task, budget), enc


def test_blackbox_counts_queries_and_enforces_budget():
    m, v, bb, enc = _bb(5)
    prompts = torch.tensor([v.encode("tell sentiment now please")] * 3)
    losses, logits = bb.query(prompts, None, enc["train"])
    assert bb.n_queries == 3 and losses.shape == (3, 8) and logits.shape == (3, 8, 2)
    assert torch.allclose(losses[0], losses[1])  # same prompt, same losses
    with pytest.raises(BudgetExceeded):
        bb.query(prompts, None, enc["train"])
    assert bb.n_queries == 3  # a refused request costs nothing
    bb.evaluate(prompts[0], None, enc["test"])
    assert bb.n_queries == 3  # dev/test scoring is not charged


def test_blackbox_offset_per_example_matches_separate_calls():
    m, v, bb, enc = _bb(10)
    p = torch.tensor([v.encode("tell sentiment now please")])
    off = torch.randn(1, 8, 4, 16)
    joint, _ = bb.query(p, off, enc["train"])
    sub = enc["train"].subset(torch.tensor([2]))
    single, _ = bb.query(p, off[:, 2], sub)
    assert torch.allclose(joint[0, 2], single[0, 0], atol=1e-5)


@pytest.mark.parametrize("method", ["zo_pog", "bdpl", "bbt"])
def test_methods_spend_exactly_the_budget_and_never_touch_gradients(method):
    m, v, bb, enc = _bb(120)
    cands = torch.tensor(v.encode("tell sentiment topic now please the what is"))
    A = random_projection(4, 16, 6, bb.embedding_std, generator=torch.Generator().manual_seed(0))
    cfg = PromptTuningConfig(batch_size=8, n_samples=6, popsize=6)
    args = (bb, enc["train"], enc["dev"], enc["test"], cands, 4)
    r = {"zo_pog": lambda: run_zo_pog(*args, A, cfg), "bdpl": lambda: run_bdpl(*args, cfg),
         "bbt": lambda: run_bbt(*args, A, cfg)}[method]()
    assert r.queries == bb.n_queries <= 120 and bb.n_queries > 120 - 12
    assert all(p.grad is None and not p.requires_grad for p in m.parameters())
    assert not hasattr(bb, "parameters")
    assert 0 <= r.test_acc <= 1 and r.curve[-1][0] == bb.n_queries


# --- devices: every kernel keeps its result on its input's device (meta tensors stand in for a GPU:
# an operation that mixes a meta tensor with a CPU one raises, as cuda + cpu would) ---------------

def test_prompted_logits_stays_on_the_model_device_and_matches_the_black_box():
    m, v, bb, enc = _bb(10)
    batch = enc["train"]
    verb = torch.tensor(v.encode(["bad", "good"]))
    prompts = torch.tensor([v.encode("tell sentiment now please")] * 2)
    off = torch.randn(2, 4, 16)
    with torch.no_grad():
        direct = prompted_logits(m, v.bos_id, prompts, off, batch.body, batch.lengths, verb)
    _, via_bb = bb.query(prompts, off, batch)
    assert torch.allclose(direct, via_bb, atol=1e-6)
    meta = TinyLM(m.cfg).to("meta")
    out = prompted_logits(meta, v.bos_id, prompts.to("meta"), off.to("meta"), batch.body.to("meta"),
                          batch.lengths.to("meta"), verb.to("meta"))
    assert out.device.type == "meta" and out.shape == (2, len(batch), 2)
    out = prompted_logits(meta, v.bos_id, prompts.to("meta"), None, batch.body.to("meta"),
                          batch.lengths.to("meta"), verb.to("meta"))
    assert out.device.type == "meta"


def test_prompted_logits_gradient_matches_finite_differences():
    m, v, _, enc = _bb(0)
    batch = enc["train"].subset(torch.arange(3))
    verb = torch.tensor(v.encode(["bad", "good"]))
    prompt = torch.tensor([v.encode("tell sentiment now please")])
    off = (0.1 * torch.randn(1, 4, 16, dtype=torch.float64)).requires_grad_(True)
    m64 = TinyLM(m.cfg).double()
    m64.load_state_dict(m.state_dict())
    f = lambda o: prompted_logits(m64, v.bos_id, prompt, o, batch.body, batch.lengths, verb)[0, :, 1].sum()  # noqa: E731
    (g,) = torch.autograd.grad(f(off), off)
    e = torch.zeros_like(off)
    e[0, 2, 5] = 1e-6
    with torch.no_grad():
        fd = (f(off + e) - f(off - e)) / 2e-6
    assert abs(float(g[0, 2, 5]) - float(fd)) < 1e-6 * max(1.0, abs(float(fd)))


def test_estimators_return_on_the_input_device():
    z = torch.zeros(5, device="meta")
    cpu_gen = torch.Generator().manual_seed(0)  # a CPU generator must still work for a non-CPU z
    g = zo_gradient(lambda P: P.sum(-1), z, 0.1, 3, generator=cpu_gen)
    assert g.device.type == "meta" and g.shape == (5,)
    assert zo_directions(4, 5, generator=cpu_gen, device="meta").device.type == "meta"
    assert pg_gradient(torch.zeros(4, device="meta"), torch.zeros(4, 2, 3, device="meta")).device.type == "meta"
    assert project_simplex(torch.zeros(2, 3, device="meta")).device.type == "meta"


def test_black_box_moves_inputs_to_its_device_and_returns_cpu():
    m, v, bb, enc = _bb(3)
    losses, logits = bb.query(torch.tensor([v.encode("tell sentiment now please")]), None, enc["train"])
    assert losses.device.type == "cpu" and logits.device.type == "cpu"


# --- deployment rules and the Gumbel-max trick -------------------------------------------------

def test_gumbel_argmax_is_a_draw_from_alpha_and_mode_is_its_argmax():
    gen = torch.Generator().manual_seed(0)
    pol = CategoricalPromptPolicy(1, 4, tau=0.5, gumbel=True, generator=gen)
    pol.alpha = torch.tensor([[0.1, 0.2, 0.3, 0.4]], dtype=torch.float64)
    counts = torch.zeros(4)
    N = 20000
    for _ in range(N):
        pol.redraw()
        counts[pol.argmax()[0]] += 1
    target = pol.alpha[0] / pol.alpha[0].sum()
    se = (target * (1 - target) / N).sqrt()
    assert bool(((counts / N - target.float()).abs() < 4 * se.float()).all())  # whatever tau
    assert pol.mode().tolist() == [3]
    quiet = CategoricalPromptPolicy(2, 3, gumbel=False, generator=gen)
    quiet.alpha = torch.rand(2, 3, generator=gen, dtype=torch.float64)
    quiet.redraw()
    assert torch.equal(quiet.argmax(), quiet.mode())


def test_runs_report_each_deployment_rule():
    m, v, bb, enc = _bb(16)
    cands = torch.tensor(v.encode("tell sentiment topic now please the what is"))
    A = random_projection(4, 16, 6, bb.embedding_std, generator=torch.Generator().manual_seed(0))
    cfg = PromptTuningConfig(batch_size=8, n_samples=4, popsize=4)
    args = (enc["train"], enc["dev"], enc["test"], cands, 4)
    fresh = lambda: BlackBoxLM(m, v, "sentiment", 16)  # noqa: E731
    assert list(run_zo_pog(fresh(), *args, A, cfg).selections) == ["draw", "mode"]
    assert list(run_zo_pog(fresh(), *args, A, cfg, gumbel=False).selections) == ["mode"]
    r = run_zo_pog(fresh(), *args, A, cfg, discrete=False)
    assert list(r.selections) == ["fixed"] and r.test_acc == r.selections["fixed"].test_acc
    assert list(run_bdpl(fresh(), *args, cfg).selections) == ["mode"]
    assert list(run_bbt(fresh(), *args, A, cfg).selections) == ["fixed"]


def test_bbt_with_a_given_prompt_deploys_it_and_only_it_changes():
    m, v, _, enc = _bb(0)
    cands = torch.tensor(v.encode("tell sentiment topic now please the what is"))
    A = random_projection(4, 16, 6, 0.1, generator=torch.Generator().manual_seed(0))
    cfg = PromptTuningConfig(batch_size=8, n_samples=4, popsize=4)
    args = (enc["train"], enc["dev"], enc["test"], cands, 4, A, cfg)
    manual = torch.tensor(v.encode("what is the sentiment"))
    r = run_bbt(BlackBoxLM(m, v, "sentiment", 24), *args, seed=3, prompt=manual)
    assert torch.equal(r.prompt, manual) and r.queries == 24
    r_rand = run_bbt(BlackBoxLM(m, v, "sentiment", 24), *args, seed=3)
    assert not torch.equal(r_rand.prompt, manual)
    assert set(r_rand.prompt.tolist()) <= set(cands.tolist())
    with pytest.raises(ValueError):
        run_bbt(BlackBoxLM(m, v, "sentiment", 24), *args, prompt=manual[:3])


def test_cmaes_accepts_numpy_and_returns_float64_cpu():
    es = CMAES(np.zeros(3), 0.5, popsize=4, seed=1)
    X = es.ask()
    assert X.dtype == torch.float64 and X.device.type == "cpu" and X.shape == (4, 3)
    es.tell(X.numpy(), np.arange(4.0))
    assert es.mean.shape == (3,)


def test_zo_only_accepts_a_fixed_prompt():
    """ZO-only on a hand-written prompt keeps those tokens; the prompt needs discrete=False."""
    m, v, _, enc = _bb(0)
    cands = torch.tensor(v.encode("tell sentiment topic now please the what is"))
    A = random_projection(4, 16, 6, 0.1, generator=torch.Generator().manual_seed(0))
    cfg = PromptTuningConfig(batch_size=8, n_samples=4)
    args = (enc["train"], enc["dev"], enc["test"], cands, 4, A, cfg)
    manual = torch.tensor(v.encode("what is the sentiment"))
    r = run_zo_pog(BlackBoxLM(m, v, "sentiment", 24), *args, seed=3, discrete=False, prompt=manual)
    assert torch.equal(r.prompt, manual) and r.queries == 24 and r.z is not None
    r_rand = run_zo_pog(BlackBoxLM(m, v, "sentiment", 24), *args, seed=3, discrete=False)
    assert not torch.equal(r_rand.prompt, manual)
    with pytest.raises(ValueError):
        run_zo_pog(BlackBoxLM(m, v, "sentiment", 24), *args, discrete=False, prompt=manual[:3])
    with pytest.raises(ValueError):
        run_zo_pog(BlackBoxLM(m, v, "sentiment", 24), *args, prompt=manual)


def test_template_is_a_fixed_part_of_every_input_after_the_prompt():
    """encode_task(template=...) puts the template words before each sentence (outside the learnable
    positions), and a query with the template equals one whose prompt ends in the same words."""
    m, v, bb, _ = _bb(10)
    sp = few_shot_split("sentiment", 4, 12, seed=0)
    plain, templ = encode_task(v, sp["test"]), encode_task(v, sp["test"], ("sentiment",))
    assert torch.equal(templ.lengths, plain.lengths + 1)
    assert (templ.body[:, 0] == v.encode(["sentiment"])[0]).all()
    _, with_t = bb.query(torch.tensor([v.encode("please tell me now")]), None, templ)
    _, in_prompt = bb.query(torch.tensor([v.encode("please tell me now sentiment")]), None, plain)
    assert torch.allclose(with_t, in_prompt, atol=1e-5)


def test_fixed_token_methods_score_their_start_on_dev():
    """BBT and ZO-only put the start (z = 0) into their dev selection before the first query."""
    m, v, _, enc = _bb(0)
    cands = torch.tensor(v.encode("tell please the what is now me"))
    A = random_projection(4, 16, 6, 0.1, generator=torch.Generator().manual_seed(0))
    cfg = PromptTuningConfig(batch_size=8, n_samples=4, popsize=4)
    args = (enc["train"], enc["dev"], enc["test"], cands, 4, A, cfg)
    for r in (run_bbt(BlackBoxLM(m, v, "sentiment", 8), *args, seed=1),
              run_zo_pog(BlackBoxLM(m, v, "sentiment", 8), *args, seed=1, discrete=False)):
        assert r.curve[0][0] == 0


def test_tuning_record_is_refused_when_edited(tmp_path):
    """The committed tuning record loads, and an edited copy is refused by its sha256."""
    import json
    from iclr25.blackbox import zo_pog_study as study
    rec = study.load_tuning()
    assert set(rec["chosen"]) == set(study.GRIDS) and rec["budget"] == study.BUDGET
    rec["chosen"]["BBT"] = [123.0]
    bad = tmp_path / "t.json"
    bad.write_text(json.dumps(rec))
    with pytest.raises(ValueError):
        study.load_tuning(bad)


def test_evaluation_record_matches_the_tuning_and_is_refused_when_edited(tmp_path):
    """The committed evaluation record was made with the committed tuning, covers every method on
    every evaluation seed, and an edited copy is refused by its sha256."""
    import json
    from iclr25.blackbox import zo_pog_study as study
    tun, ev = study.load_tuning(), study.load_eval()
    assert ev["tuning_sha256"] == tun["sha256"] and ev["code_sha256"] == tun["code_sha256"]
    assert set(ev["runs"]) == set(study.EVAL_METHODS) | {"Manual"}
    assert all(set(r) == {str(s) for s in ev["seeds"]} for r in ev["runs"].values())
    ev["runs"]["ZO-PoG"]["0"]["acc"] = 100.0
    bad = tmp_path / "e.json"
    bad.write_text(json.dumps(ev))
    with pytest.raises(ValueError):
        study.load_eval(bad)


def test_code_sha256_changes_with_a_constant():
    """The code hash recorded with the committed runs covers the study's constants."""
    from iclr25.blackbox import zo_pog_study as study
    before = study.code_sha256()
    old = study.MU
    try:
        study.MU = old * 2
        assert study.code_sha256() != before
    finally:
        study.MU = old
    assert study.code_sha256() == before


def test_committed_records_were_made_by_the_current_code():
    """A record made by other code is stale: the chapter's verdicts read it, so the code that
    determines a run (hashed by ``code_sha256``) must be the code that made both records."""
    from iclr25.blackbox import zo_pog_study as study
    now = study.code_sha256()
    assert study.load_tuning()["code_sha256"] == now, "re-run python -m iclr25.blackbox.zo_pog_study tune"
    assert study.load_eval()["code_sha256"] == now, "re-run python -m iclr25.blackbox.zo_pog_study evaluate"


def test_manual_start_tokens_are_the_first_draw_of_bbt_and_zo_only(monkeypatch):
    """The untouched start that the chapter's Manual summary rebuilds (its competence reference and
    the cue lottery) is the fixed-token draw of run_bbt and of ZO-only (run_zo_pog, discrete=False):
    live on two seeds, and in the committed evaluation on every seed."""
    from iclr25.blackbox import zo_pog_study as study
    monkeypatch.setattr(study, "whitebox_z", lambda *a, **k: 0.0)   # not needed here, and slow
    lm, vocab = study.model_and_vocab()
    cfg = PromptTuningConfig(batch_size=16, n_samples=4, popsize=4)
    for s in (0, 7):
        enc, cands, A = study.setup(s)
        start = study.summarize("Manual", s, None)["start_prompt"]
        args = (enc["train"], enc["dev"], enc["test"], cands, study.N_POS, A, cfg)
        r_bbt = run_bbt(BlackBoxLM(lm, vocab, study.TASK, 8), *args, seed=s)
        r_zo = run_zo_pog(BlackBoxLM(lm, vocab, study.TASK, 8), *args, seed=s, discrete=False)
        assert vocab.decode(r_bbt.prompt) == vocab.decode(r_zo.prompt) == start, (s, start)
    runs = study.load_eval()["runs"]
    for s in study.load_eval()["seeds"]:
        assert runs["BBT"][str(s)]["prompt"] == runs["ZO-only"][str(s)]["prompt"] \
            == runs["Manual"][str(s)]["start_prompt"], s


def test_random_prompt_record_is_current_and_refused_when_edited(tmp_path):
    """The committed random-prompt reference was made by the current code, covers every evaluation
    seed with N_RANDOM accuracies, matches a live re-score of one seed, and an edited copy is refused."""
    import json
    from iclr25.blackbox import zo_pog_random as zr, zo_pog_study as study
    rec = zr.load()
    assert rec["code_sha256"] == zr.code_sha256(), "re-run python -m iclr25.blackbox.zo_pog_random"
    assert rec["seeds"] == list(study.EVAL_SEEDS)
    assert all(len(rec["test_acc"][str(s)]) == zr.N_RANDOM for s in study.EVAL_SEEDS)
    live = zr.seed_accuracies(3)
    assert max(abs(a - b) for a, b in zip(live, rec["test_acc"]["3"])) <= 1.0
    rec["test_acc"]["0"][0] = 100.0
    bad = tmp_path / "r.json"
    bad.write_text(json.dumps(rec))
    with pytest.raises(ValueError):
        zr.load(bad)


def test_random_prompts_are_candidates_and_deterministic():
    """Random prompts are drawn from the seed's candidates only, reproducibly, and differ across seeds."""
    from iclr25.blackbox import zo_pog_random as zr, zo_pog_study as study
    _, cands, _ = study.setup(5)
    p = zr.random_prompts(5)
    assert p.shape == (zr.N_RANDOM, study.N_POS)
    assert set(p.flatten().tolist()) <= set(cands.tolist())
    assert torch.equal(p, zr.random_prompts(5)) and not torch.equal(p, zr.random_prompts(6))


def test_code_hash_ignores_docstrings_and_comments_but_not_code():
    """The random-prompt record's code hash strips docstrings and comments (cut from the raw text at the positions ast reports), so a
    documentation edit keeps the record valid, while a change of what the code does changes it."""
    from iclr25.common.digest import strip_source as _strip
    a = 'def f(x):\n    """Doc."""\n    return x + 1  # note\n'
    b = 'def f(x):\n    """Other doc, longer."""\n    # a comment\n    return x + 1\n'
    c = 'def f(x):\n    """Doc."""\n    return x + 2\n'
    assert _strip(a) == _strip(b) != _strip(c)
    assert _strip('def g():\n    """Only a docstring."""\n') == _strip("def g():\n    pass\n")


def test_template_record_is_current_and_refused_when_edited(tmp_path):
    """The committed shared-template study was made by the current code, covers every method and
    evaluation seed, its untouched start re-scores live, and an edited copy is refused."""
    import json
    from iclr25.blackbox import zo_pog_study as study, zo_pog_template as zt
    rec = zt.load()
    assert rec["code_sha256"] == zt.code_sha256(), "re-run python -m iclr25.blackbox.zo_pog_template"
    assert set(rec["runs"]) == set(zt.METHODS) | {"reference"}
    assert all(set(r) == {str(s) for s in study.EVAL_SEEDS} for r in rec["runs"].values())
    live = zt.summarize("reference", 4, None)
    assert abs(live["start"] - rec["runs"]["reference"]["4"]["start"]) <= 1.0
    rec["runs"]["BBT"]["0"]["acc"] = 100.0
    bad = tmp_path / "t.json"
    bad.write_text(json.dumps(rec))
    with pytest.raises(ValueError):
        zt.load(bad)


def test_template_setting_shares_the_template_and_admits_polar_adjectives():
    """In the template study every encoded input holds the hand-written template before the sentence,
    and the PMI candidates may be polar adjectives (excluded in the main study)."""
    from iclr25.blackbox import zo_pog_study as study, zo_pog_template as zt
    from iclr25.lm.language import NEGATIVE, POSITIVE
    lm, vocab = study.model_and_vocab()
    enc, cands, _ = zt.setup(0)
    tpl = vocab.encode(list(zt.TEMPLATE_T))
    assert all(enc["test"].body[i, :len(tpl)].tolist() == tpl for i in range(5))
    words = set(vocab.decode(cands).split())
    assert words & (set(POSITIVE) | set(NEGATIVE))
    assert not set(vocab.decode(study.setup(0)[1]).split()) & (set(POSITIVE) | set(NEGATIVE))


def test_budget_record_is_current_and_refused_when_edited(tmp_path):
    """The committed small-budget study was made by the current code, covers every method, control and
    pre-registered seed, spends at most its budget without a gradient leak, its references re-score
    live, and an edited copy is refused."""
    import json
    from iclr25.blackbox import zo_pog_budget as zb
    rec = zb.load()
    assert rec["code_sha256"] == zb.code_sha256(), "re-run python -m iclr25.blackbox.zo_pog_budget"
    assert set(rec["runs"]) == set(zb.METHODS_B) | set(zb.CONTROLS_B) | {"reference"}
    assert all(set(r) == {str(s) for s in zb.EVAL_SEEDS_B} for r in rec["runs"].values())
    assert not set(zb.TUNE_SEEDS_B) & set(zb.EVAL_SEEDS_B)
    runs = [o for m, r in rec["runs"].items() if m != "reference" for o in r.values()]
    assert all(o["queries"] <= zb.BUDGET_B and not o["leak"] for o in runs)
    s = zb.EVAL_SEEDS_B[2]
    live = zb.summarize("reference", s, None)
    ref = rec["runs"]["reference"][str(s)]
    assert abs(live["template"] - ref["template"]) <= 1.0
    assert all(abs(live["best_of"][k] - ref["best_of"][k]) <= 1.0 for k in ref["best_of"])
    rec["runs"]["BBT"][str(s)]["acc"] = 100.0
    bad = tmp_path / "b.json"
    bad.write_text(json.dumps(rec))
    with pytest.raises(ValueError):
        zb.load(bad)


def test_budget_setup_keeps_the_template_study_and_enlarges_only_the_dev_set():
    """The small-budget study shares the template study's candidates, projection, training shots and
    test set per seed; its dev set holds DEV_K examples per class (more than the template study's); a
    control runs at ZO-PoG's cell."""
    from iclr25.blackbox import zo_pog_budget as zb, zo_pog_template as zt
    enc, cands, A = zb.setup(1)
    enc_t, cands_t, A_t = zt.setup(1)
    assert torch.equal(cands, cands_t) and torch.equal(A, A_t)
    for part in ("train", "test"):
        assert torch.equal(enc[part].body, enc_t[part].body) and torch.equal(enc[part].labels, enc_t[part].labels)
    assert len(enc["dev"]) == 2 * zb.DEV_K and int(enc["dev"].labels.sum()) == zb.DEV_K
    assert len(enc_t["dev"]) < len(enc["dev"])
    assert zb.point_of("ZO-PoG no Gumbel", {"ZO-PoG": [1.0, 0.1]}) == (1.0, 0.1)


class _LinearBox:
    """A stand-in black box whose loss on example e is c_e + <W_e, offset>: linear in z, a different
    gradient and a very different constant per example; it records the offset of its last evaluation."""

    def __init__(self, budget: int, W: torch.Tensor, c: torch.Tensor) -> None:
        self.budget, self.W, self.c, self.n_queries = budget, W, c, 0
        self.embed_dim = W.shape[-1]
        self.last_offset = None

    def query(self, prompts, offs, batch):
        m = prompts.shape[0]
        if self.n_queries + m > self.budget:
            raise BudgetExceeded("fake")
        self.n_queries += m
        ids = batch.body[:, 0]
        if offs.dim() == 3:   # one offset for every example
            offs = offs[:, None].expand(m, len(ids), *offs.shape[1:])
        return self.c[ids][None] + (offs * self.W[ids][None]).sum((-1, -2)), None

    def evaluate(self, prompt, off, data):
        self.last_offset = off
        return 0.5


@pytest.mark.parametrize("discrete", [False, True])
def test_zo_step_inside_run_zo_pog_pairs_each_direction_with_one_example(discrete):
    """Inside run_zo_pog the +mu and -mu points of direction r are scored on the same example r mod B:
    on a per-example linear loss the two-point difference is then exact and the constants c_e cancel, so
    one step gives z = -g with E g = the mean over examples of A^T vec(W_e). A mismatch of directions,
    signs or examples would leave terms (c_e - c_e')/(2 mu) ~ 10^4 in g or move its mean."""
    from iclr25.blackbox.api import EncodedTask
    n_pos, D, d, B, I = 2, 3, 4, 4, 2
    gen = torch.Generator().manual_seed(0)
    W = torch.randn(B, n_pos, D, generator=gen)
    c = 100.0 * torch.arange(B, dtype=torch.float32)
    A = torch.randn(n_pos * D, d, generator=gen)
    data = EncodedTask(torch.arange(B)[:, None], torch.ones(B, dtype=torch.long), torch.zeros(B, dtype=torch.long))
    cfg = PromptTuningConfig(batch_size=B, n_samples=I, lr_z=1.0, mu=1e-2, lr_alpha=0.0)
    target = (A.T @ W.reshape(B, -1).T).mean(1)   # mean over examples of the gradient in z
    gs = []
    for s in range(400):
        bb = _LinearBox(2 * I if discrete else I, W, c)
        run_zo_pog(bb, data, data, data, torch.arange(5), n_pos, A, cfg, seed=s, discrete=discrete)
        z = torch.linalg.lstsq(A, bb.last_offset.reshape(-1, 1)).solution[:, 0]
        gs.append(-z)
    G = torch.stack(gs)
    assert G.abs().max() < 50 * target.abs().max() + 50, "a constant c_e leaked into the ZO estimate"
    se = G.std(0) / len(gs) ** 0.5
    assert torch.all((G.mean(0) - target).abs() < 4 * se + 1e-3), (G.mean(0), target, se)


def test_best_of_k_reads_the_leading_draws_and_matches_the_budget_reference():
    """best_of_k picks the first draw with the best dev score among the first k (the draws kept on test are
    exactly those that lead all earlier ones on dev), and agrees with the 300-query study's best-of-k."""
    from iclr25.blackbox import zo_pog_budget as zb, zo_pog_budget2 as z2
    draws = {"dev": [50.0, 60.0, 60.0, 55.0, 70.0], "test": {"0": 1.0, "1": 2.0, "4": 3.0}}
    assert [z2.best_of_k(draws, k) for k in (1, 2, 3, 4, 5)] == [1.0, 2.0, 2.0, 2.0, 3.0]
    s = zb.EVAL_SEEDS_B[3]
    live = z2.reference_draws(s)
    assert set(live["test"]) == {str(i) for i in range(len(live["dev"])) if all(live["dev"][i] > d for d in live["dev"][:i])}
    ref = zb.load()["runs"]["reference"][str(s)]["best_of"]
    assert all(abs(z2.best_of_k(live, int(k)) - v) <= 1.0 for k, v in ref.items())


def test_big_grid_is_the_optimum_and_its_neighbours():
    """The 1000-query grid holds each 300-query optimum with its neighbours; past an axis end the end step repeats."""
    from iclr25.blackbox import zo_pog_budget2 as z2
    assert z2.neighbours(0.3, (0.01, 0.1, 0.3, 1.0)) == (0.1, 0.3, 1.0)
    assert z2.neighbours(1.0, (0.1, 0.3, 1.0)) == (0.3, 1.0, round(1 / 0.3, 6))
    assert z2.neighbours(0.1, (0.1, 0.3, 1.0)) == (round(0.01 / 0.3, 6), 0.1, 0.3)
    g = z2.big_grid({"ZO-PoG": [3.0, 0.3], "ZO-PoG no continuous": [0.3], "ZO-only": [0.3], "BDPL": [0.3],
                     "BBT": [0.1], z2.NO_GUMBEL: [3.0, 0.3]})
    assert g["ZO-PoG"] == ((1.0, 3.0, 10.0), (0.1, 0.3, 1.0)) and g["BBT"] == ((0.03, 0.1, 0.3),)


def test_polar_mass_of_a_uniform_policy_is_the_share_of_adjectives():
    """A uniform policy puts on the positive (negative) adjectives the share of candidates that are such."""
    from iclr25.blackbox import zo_pog_budget as zb, zo_pog_budget2 as z2
    from iclr25.lm.language import NEGATIVE, POSITIVE
    _, cands, _ = zb.setup(zb.EVAL_SEEDS_B[0])
    _, vocab = z2.study.model_and_vocab()
    words = [vocab.decode(torch.tensor([int(c)])).strip() for c in cands]
    pos, neg = z2.polar_mass(torch.full((4, len(cands)), 1 / len(cands)), cands)
    assert pos == pytest.approx(np.mean([w in POSITIVE for w in words])) and pos > 0
    assert neg == pytest.approx(np.mean([w in NEGATIVE for w in words])) and neg > 0
    one = torch.zeros(4, len(cands))
    one[:, [w in NEGATIVE for w in words].index(True)] = 1.0
    assert z2.polar_mass(one, cands) == (0.0, 1.0)


def test_budget_control_records_are_current_and_refused_when_edited(tmp_path):
    """The controls and the 1000-query records were made by the current code from the committed 300-query
    record, cover their pre-registered seeds and arms, stay within their budgets without a gradient leak,
    the re-runs reproduce the 300-query record, and an edited copy is refused."""
    import json
    from iclr25.blackbox import zo_pog_budget as zb, zo_pog_budget2 as z2
    bud, chk, big = zb.load(), z2.load_checks(), z2.load_big()
    assert chk["code_sha256"] == z2.code_sha256() == big["code_sha256"], "re-run python -m iclr25.blackbox.zo_pog_budget2"
    assert chk["budget_record_sha256"] == bud["sha256"] and big["checks_record_sha256"] == chk["sha256"]
    assert set(chk["reference_draws"]) == {str(s) for s in zb.EVAL_SEEDS_B}
    assert set(big["runs"]) == set(z2.BIG_ARMS) and all(set(r) == {str(s) for s in z2.SEEDS_BIG} for r in big["runs"].values())
    assert not set(z2.TUNE_SEEDS_BIG) & set(z2.SEEDS_BIG)
    assert all(o["queries"] <= z2.BIG and not o["leak"] for r in big["runs"].values() for o in r.values())
    assert all(o["queries"] <= z2.HALF and not o["leak"] for r in chk["half_runs"].values() for o in r.values())
    assert all(chk["rerun"][m][str(s)]["acc"] == bud["runs"][m][str(s)]["acc"] for m in chk["rerun"] for s in z2.MASS_SEEDS)
    chk["no_gumbel"][str(zb.EVAL_SEEDS_B[0])]["acc"] = 100.0
    bad = tmp_path / "c.json"
    bad.write_text(json.dumps(chk))
    with pytest.raises(ValueError):
        z2.load_checks(bad)


def test_extended_grids_record_is_current_and_its_grids_grow_only_past_an_edge():
    """The extended 1000-query grids were made by the current code from the committed 1000-query record;
    a grid grew only where the original choice sat on its edge; every arm whose choice moved was evaluated
    again on every pre-registered seed."""
    from iclr25.blackbox import zo_pog_budget2 as z2
    big, ext = z2.load_big(), z2.load_ext()
    assert ext["code_sha256"] == z2.ext_code_sha256() and ext["big_record_sha256"] == big["sha256"]
    for m in z2.BIG_ARMS:
        if ext["grids"][m] != big["grids"][m]:
            assert z2.extend_grid(big["chosen"][m], big["grids"][m]) is not None
        assert (m in ext["runs"]) == (ext["chosen"][m] != big["chosen"][m])
    assert all(set(r) == {str(s) for s in z2.SEEDS_BIG} for r in ext["runs"].values())
    assert z2.extend_grid([3.0, 0.3], [[1.0, 3.0, 10.0], [0.1, 0.3, 1.0]]) is None
    assert z2.extend_grid([10.0], [[1.0, 3.0, 10.0]]) == [[1.0, 3.0, 10.0, round(100 / 3, 6)]]
