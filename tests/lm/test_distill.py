"""Identities of MiniPLM's difference sampling, the KD baseline and the fact corpus."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from iclr25.lm import TinyLM, TinyLMConfig, next_token_loss, train_lm
from iclr25.lm.distill import (BOS_ID, answer_mask, difference_scores, document_nll, fact_corpus,
                               fact_documents, fact_table, kd_loss, kd_matched_steps,
                               non_embedding_params, steps_to_level, token_nll, top_fraction,
                               training_flops)


def test_top_fraction_keeps_exactly_the_top_alpha_in_corpus_order():
    g = torch.Generator().manual_seed(0)
    s = torch.randn(1001, generator=g)
    for alpha in (0.1, 0.25, 0.5, 0.999):
        keep = top_fraction(s, alpha)
        k = int(np.floor(alpha * 1001))
        assert len(keep) == k
        assert torch.all(keep[1:] > keep[:-1])                     # corpus order, no repeats
        # the oracle: numpy's argsort of -s, first k, sorted
        oracle = np.sort(np.argsort(-s.numpy(), kind="stable")[:k])
        assert np.array_equal(keep.numpy(), oracle)
        rest = torch.ones(1001, dtype=torch.bool)
        rest[keep] = False
        assert s[keep].min() >= s[rest].max()


def test_top_fraction_alpha_one_keeps_everything_and_ties_break_by_index():
    s = torch.tensor([1.0, 3.0, 3.0, 0.0, 3.0])
    assert torch.equal(top_fraction(s, 1.0), torch.arange(5))
    assert torch.equal(top_fraction(s, 0.4), torch.tensor([1, 2]))
    assert torch.equal(top_fraction(torch.zeros(10), 0.5), torch.arange(5))   # r = 0: the first half
    with pytest.raises(ValueError):
        top_fraction(s, 0.0)


def test_selection_invariant_to_monotone_maps_and_common_shifts():
    g = torch.Generator().manual_seed(1)
    nt, nr = torch.rand(500, generator=g) * 3, torch.rand(500, generator=g) * 3
    r = difference_scores(nt, nr)
    keep = top_fraction(r, 0.3)
    assert torch.equal(keep, top_fraction(torch.exp(2 * r) + 5, 0.3))
    assert torch.equal(keep, top_fraction(difference_scores(nt + 0.7, nr + 0.7), 0.3))
    assert torch.equal(keep, top_fraction(difference_scores(nt * 1.5, nr * 1.5), 0.3))  # log base


def test_difference_score_sign_and_equal_models():
    nt = torch.tensor([0.5, 2.0])
    nr = torch.tensor([1.5, 2.0])
    assert torch.equal(difference_scores(nt, nr), torch.tensor([1.0, 0.0]))   # teacher better: r > 0
    assert torch.equal(difference_scores(nr, nr), torch.zeros(2))


def _tiny(vocab=10, seed=0):
    torch.manual_seed(seed)
    return TinyLM(TinyLMConfig(vocab_size=vocab, d_model=16, n_layers=1, n_heads=2, d_ff=32, max_len=12))


def test_document_nll_is_the_mean_next_token_loss_per_document():
    m = _tiny()
    ids = torch.randint(1, 10, (7, 12), generator=torch.Generator().manual_seed(2))
    per_doc = document_nll(m, ids, batch_size=3)
    for i in range(7):
        ref = next_token_loss(m(ids[i:i + 1]), ids[i:i + 1], torch.ones(1, 12))
        assert per_doc[i].item() == pytest.approx(ref.item(), rel=1e-5)  # batched vs alone: float32 round-off
    assert token_nll(m, ids).shape == (7, 11)


def test_kd_loss_equals_ce_when_the_teacher_is_one_hot():
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(1, 10, (4, 12), generator=g)
    student = torch.randn(4, 12, 10, generator=g)
    onehot = torch.full((4, 12, 10), -1e4)
    onehot[:, :-1].scatter_(-1, ids[:, 1:, None], 0.0)   # the teacher puts all mass on the next token
    for beta in (0.0, 0.5, 1.0):
        assert kd_loss(student, onehot, ids, beta=beta).item() == pytest.approx(
            next_token_loss(student, ids).item(), rel=1e-5)


def test_kd_term_has_the_forward_kl_gradient():
    g = torch.Generator().manual_seed(4)
    ids = torch.randint(1, 10, (3, 12), generator=g)
    teacher = torch.randn(3, 12, 10, generator=g)
    s1 = torch.randn(3, 12, 10, generator=g, requires_grad=True)
    s2 = s1.detach().clone().requires_grad_(True)
    kd_loss(s1, teacher, ids, beta=1.0).backward()
    p = F.softmax(teacher[:, :-1], -1).reshape(-1, 10)
    kl = F.kl_div(F.log_softmax(s2[:, :-1], -1).reshape(-1, 10), p, reduction="batchmean")
    kl.backward()
    assert torch.allclose(s1.grad, s2.grad, atol=1e-6)
    # the values differ by the teacher's entropy, a constant
    ent = -(p * p.log()).sum(-1).mean()
    assert kd_loss(s1, teacher, ids, beta=1.0).item() == pytest.approx((kl + ent).item(), rel=1e-5)


def test_kd_matched_steps_equalise_training_flops():
    assert kd_matched_steps(300, 1000, 0) == 300
    assert kd_matched_steps(300, 1000, 3000) == 150
    s = kd_matched_steps(400, 25_000, 100_000)
    assert training_flops(s, 1, 25_000, 100_000) <= training_flops(400, 1, 25_000)
    assert training_flops(s + 1, 1, 25_000, 100_000) > training_flops(400, 1, 25_000)


def test_non_embedding_params_excludes_token_and_position_tables():
    m = _tiny()
    assert non_embedding_params(m) == m.n_params() - 10 * 16 - 12 * 16


def test_fact_documents_follow_their_knobs():
    table = fact_table(8, 0)
    rng = np.random.default_rng(0)
    ids = fact_documents(table, np.array([1.0, 0.0]), np.array([0.0, 0.0]), 50, rng)
    assert ids.shape == (2, 151) and torch.all(ids[:, 0] == BOS_ID)
    a, b, c = ids[0, 1::3] - 2, ids[0, 2::3] - 2, ids[0, 3::3] - 2      # all facts
    assert torch.all(a < 8) and torch.equal(c, table[a, b])
    a, b, c = ids[1, 1::3], ids[1, 2::3], ids[1, 3::3]                  # all copies
    assert torch.all(a >= 10) and torch.equal(c, b) and len(set(a.tolist())) == 1   # one marker
    noisy = fact_documents(table, np.array([1.0]), np.array([1.0]), 2000, rng)
    assert noisy[0, 1:].min() >= 2 and noisy.max() < 18
    assert 0.4 < (noisy[0, 1:] >= 10).float().mean() < 0.6              # uniform over both alphabets


def test_fact_corpus_is_seeded_and_answer_mask_marks_the_third_tokens():
    table = fact_table(8, 0)
    a, b = fact_corpus(50, table, seed=3), fact_corpus(50, table, seed=3)
    assert torch.equal(a.ids, b.ids) and np.array_equal(a.difficulty, b.difficulty)
    assert np.mean(a.corruption == 0) > 0.2 and a.corruption.max() <= 0.4
    sub = a.subset(torch.tensor([3, 1]))
    assert torch.equal(sub.ids[0], a.ids[3]) and sub.difficulty[1] == a.difficulty[1]
    assert answer_mask(a.ids)[0].nonzero().flatten().tolist() == list(range(3, a.ids.shape[1], 3))


def test_train_lm_loss_fn_default_is_next_token_loss():
    ids = torch.randint(1, 10, (4, 12), generator=torch.Generator().manual_seed(5))
    w = torch.ones(4, 12)
    m1, m2 = _tiny(seed=6), _tiny(seed=6)
    l1 = train_lm(m1, lambda s: (ids, w), 3, warmup=1)
    l2 = train_lm(m2, lambda s: (ids, w), 3, warmup=1, loss_fn=next_token_loss)
    assert l1 == l2


def test_pretrain_on_is_paired_by_seed_and_kd_with_beta_zero_is_plain_training():
    from iclr25.lm.distill import kd_loss_fn, pretrain_on

    table = fact_table(4, 0)
    corpus = fact_corpus(40, table, n_triples=3, seed=0)
    cfg = TinyLMConfig(vocab_size=corpus.vocab_size, d_model=16, n_layers=1, n_heads=2, d_ff=32, max_len=10)
    m1, l1 = pretrain_on(cfg, corpus.ids, 5, lr=1e-2, seed=3, batch_size=8)
    m2, l2 = pretrain_on(cfg, corpus.ids, 5, lr=1e-2, seed=3, batch_size=8)
    assert l1 == l2
    teacher = _tiny(vocab=corpus.vocab_size, seed=9)
    teacher.cfg  # noqa: B018 - a TinyLM with max_len 12 >= 10
    m3, l3 = pretrain_on(cfg, corpus.ids, 5, lr=1e-2, seed=3, batch_size=8, loss_fn=kd_loss_fn(teacher, 0.0))
    assert np.allclose(l1, l3, atol=1e-6)


def test_pretrain_on_checkpoints_do_not_change_the_run():
    from iclr25.lm.distill import pretrain_on

    corpus = fact_corpus(40, fact_table(4, 0), n_triples=3, seed=0)
    cfg = TinyLMConfig(vocab_size=corpus.vocab_size, d_model=16, n_layers=1, n_heads=2, d_ff=32, max_len=10)
    seen = []
    m1, l1 = pretrain_on(cfg, corpus.ids, 7, lr=1e-2, seed=3, batch_size=8, every=3,
                         on_checkpoint=lambda k, m: seen.append((k, float(token_nll(m, corpus.ids).mean()))))
    m2, l2 = pretrain_on(cfg, corpus.ids, 7, lr=1e-2, seed=3, batch_size=8)
    assert l1 == l2 and [k for k, _ in seen] == [3, 6]
    assert all(torch.equal(a, b) for a, b in zip(m1.state_dict().values(), m2.state_dict().values()))


def test_miniplm_runs_file_is_small_and_complete():
    from iclr25.lm import miniplm_runs as M

    assert M.RUNS_FILE.stat().st_size <= 1_500_000
    runs = M.load_runs()
    assert runs["recipe"]["eval_seeds"] == M.eval_seeds and runs["recipe"]["S"] == M.S
    for s in M.eval_seeds:
        for arm in ("no KD", "MiniPLM (r)", "teacher only", "vanilla KD (equal compute)"):
            r = runs["runs"][f"main/{arm}/{s}"]
            assert 0 < r["loss"] < 4 and 0 <= r["fact_acc"] <= 1 and len(r["per_bin"]) == 5
            assert r["curve"][-1][0] in (M.S, runs["recipe"]["S_kd"])
    assert len(runs["tuning"]) == len(M.lr_grid) + len(M.kd_lr_grid) * len(M.beta_grid)
    for s in M.eval_seeds:                 # the plateau budget's arms, read by the chapter
        for key in [f"plateau/{k}/{a}/{s}" for k in M.plateau_corpora for a in ("MiniPLM (r)", "teacher only")] + [
                f"plateau/clean/no KD/{s}", f"long/{M.plateau}/{s}"]:
            assert runs["runs"][key]["curve"][-1][0] == M.plateau
    assert set(runs["recipe"]["code_sha256"]) == {"distill.py", "model.py", "train.py", "miniplm_runs.py"}


def test_plateau_corpus_reads_each_kept_document_once():
    from types import SimpleNamespace

    from iclr25.lm import miniplm_runs as M

    env = SimpleNamespace(table=fact_table(M.n_keys, seed=0))
    clean, noisy = M.plateau_corpus(env, "clean"), M.plateau_corpus(env, "noisy")
    assert len(clean) == len(noisy) == int(M.plateau * M.batch / M.alpha)   # the top alpha fills plateau steps once
    assert clean.corruption.max() == 0 and 0.4 < (noisy.corruption > 0).mean() < 0.6
    assert not torch.equal(clean.ids[:100], noisy.ids[:100])


def test_full_scale_refuses_a_seed_the_committed_grid_was_not_made_with():
    from iclr25.lm import miniplm_runs as M

    M.check_seed("full", M.GRID_SEED)
    M.check_seed("ci", 7)                  # ci trains live: any seed
    with pytest.raises(ValueError, match=f"seed = {M.GRID_SEED}"):
        M.check_seed("full", 1)


def test_majority_answer_is_the_most_common_table_value():
    from iclr25.lm import miniplm_runs as M

    table = torch.tensor([[1, 1], [1, 0]])
    # <bos>, then one fact (keys 2..3) and one copy (symbols 4..5) per document
    ids = torch.tensor([[1, 2, 3, 3, 4, 5, 5], [1, 3, 3, 2, 4, 4, 4]])
    value, acc = M.majority_answer(table, ids)
    assert value == 1 and acc == 0.5         # answers: table[0,1] = 1 (token 3), table[1,1] = 0 (token 2)


def test_steps_to_level_interpolates_the_first_crossing():
    steps = np.arange(50, 1201, 50)
    loss = 2.0 - 0.5 * steps / 1200                    # linear: reaches 1.75 exactly at step 600
    curve = np.stack([steps, loss], 1)
    assert steps_to_level(curve, 1.75) == pytest.approx(600.0)
    assert steps_to_level(curve, 1.74) == pytest.approx(624.0)     # between the checkpoints 600 and 650
    bumpy = [[50, 2.0], [100, 1.5], [150, 1.9], [200, 1.4]]        # the first crossing counts, not the last
    assert steps_to_level(bumpy, 1.6) == pytest.approx(50 + 50 * 0.4 / 0.5)
    assert steps_to_level(curve, 1.0) == float("inf")               # never reached
    assert steps_to_level(curve, 2.5) == 50.0                        # starts below the level


def test_checkpoint_fact_match_equals_the_end_point_probe():
    """``evaluate(..., n, facts=True)`` (the checkpoints' fact probe) scores the same answer positions as
    the end-point evaluation: on all test documents the two agree, and on a prefix it is that prefix's share."""
    from types import SimpleNamespace

    from iclr25.lm import miniplm_runs as M
    from iclr25.lm.distill import pretrain_on

    table = fact_table(M.n_keys, seed=0)
    test = fact_corpus(40, table, n_triples=M.n_triples, seed=2, p_clean=1.0)
    cfg = M.lm_cfg(test.vocab_size, test.ids.shape[1], 16, 1, heads=2)
    model, _ = pretrain_on(cfg, test.ids, 30, lr=3e-2, seed=0, batch_size=8)
    bins = np.linspace(0, 1, 6)
    env = SimpleNamespace(test=test, device="cpu", bins=bins,
                          d_bin=np.clip(np.digitize(test.difficulty, bins) - 1, 0, 4))
    end = M.evaluate(model, env)
    at_all = M.evaluate(model, env, len(test), facts=True)
    assert at_all["fact_acc"] == pytest.approx(end["fact_acc"]) and at_all["loss"] == pytest.approx(end["loss"])
    assert M.evaluate(model, env, 10) == {"loss": pytest.approx(M.evaluate(model, env, 10, facts=True)["loss"])}
    assert 0 < end["fact_acc"] < 1


def test_miniplm_extra_runs_file_is_small_and_complete():
    from iclr25.lm import miniplm_runs as M

    if not M.EXTRA_FILE.exists():
        pytest.skip("the added runs are not written yet")
    assert M.EXTRA_FILE.stat().st_size <= 500_000
    ex = M.load_extra()
    for s in M.eval_seeds:
        for kind in M.plateau_corpora:
            c = ex["runs"][f"plateau/{kind}/reference only/{s}"]["curve"]
            assert c[-1][0] == M.plateau and len(c[0]) == 3
        for a in ("no KD", "MiniPLM (r)"):
            assert [ex["runs"][f"budget/{a}/{n}/{s}"]["curve"][-1][0] for n in M.budgets] == M.budgets
            assert len(ex["runs"][f"facts/{a}/{s}"]["curve"][0]) == 3
    assert set(ex["overlap_with_MiniPLM"]) == set(M.plateau_corpora)
