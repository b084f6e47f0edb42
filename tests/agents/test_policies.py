"""The agents: the eps-agent against its closed form, the slips it makes, the behaviour-cloned
policy's probabilities and sampling, determinism."""

import numpy as np
import pytest

from iclr25.agents import (FEATURES, BCPolicy, NoisyPolicyAgent, PolicyAgent, RecordingPolicyAgent,
                           ToolEnv, error_opportunities, features, fit_bc, make_retail_db,
                           make_tasks, pass_curve, predicted_success, run_episode, run_trials,
                           sample_macro, scripted_users, slip_slots, softmax_proba)


@pytest.fixture(scope="module")
def world():
    db = make_retail_db(11, n_users=40)
    tasks, _ = make_tasks(db, 40, seed=12)
    return db, tasks


def test_noisy_agent_without_errors_is_the_policy_agent(world):
    db, tasks = world
    env = ToolEnv(db, tasks, user_factory=scripted_users(0.5, 0.5))
    a = run_trials(env, lambda: NoisyPolicyAgent(0.0, db), 2, seed=1)
    assert a.rewards.min() == 1.0


def test_always_slipping_agent_fails_exactly_where_it_can_slip(world):
    db, tasks = world
    env = ToolEnv(db, tasks, user_factory=scripted_users(0.0, 0.3))
    tr = run_trials(env, lambda: NoisyPolicyAgent(1.0, db), 2, seed=1)
    s = np.array([error_opportunities(t, db) for t in tasks])
    assert np.array_equal(tr.rewards[:, 0] == 1.0, s == 0)
    assert (s >= 1).mean() > 0.8


def test_slip_values_are_accepted_by_the_tools(world):
    from iclr25.agents import TOOLS, fresh_copy

    db, tasks = world
    for t in tasks:
        for gold in t.actions:
            for key, idx, alts in slip_slots(gold, db):
                for wrong in alts[:2]:
                    kw = {k: (list(v) if isinstance(v, list) else v) for k, v in gold.kwargs.items()}
                    if idx is None:
                        kw[key] = wrong
                    else:
                        kw[key][idx] = wrong
                    out = TOOLS[gold.name].fn(fresh_copy(db), **kw)
                    assert not out.startswith("Error"), (gold.name, key, out)


def test_noisy_agent_matches_its_closed_form(world):
    db, tasks = world
    eps, p_split, n = 0.15, 0.5, 24
    env = ToolEnv(db, tasks, user_factory=scripted_users(p_split, 0.3))
    tr = run_trials(env, lambda: NoisyPolicyAgent(eps, db), n, seed=5)
    p = np.array([predicted_success(t, db, eps, p_split) for t in tasks])
    rate = tr.counts / n
    # per task: binomial z-scores; overall: their mean and pass^k against mean p^k
    z = (rate - p) / np.sqrt(np.clip(p * (1 - p), 1e-9, None) / n)
    assert np.abs(z[(p > 0) & (p < 1)]).max() < 4.5
    assert abs(z[(p > 0) & (p < 1)].mean()) < 4 / np.sqrt(((p > 0) & (p < 1)).sum())
    hat = pass_curve(tr.counts, n)
    for k in (1, 2, 4, 8):
        assert hat[k - 1] == pytest.approx(np.mean(p**k), abs=0.05)


def test_noisy_agent_records_its_slips(world):
    db, tasks = world
    env = ToolEnv(db, tasks, user_factory=scripted_users(0.0, 0.0, False))
    tr = run_trials(env, lambda: NoisyPolicyAgent(0.5, db), 2, seed=3, collect=lambda a, ep: list(a.slips))
    for row_r, row_s in zip(tr.rewards, tr.extra):
        for r, slips in zip(row_r, row_s):
            fatal = [x for x in slips if x != "skipped 'anything else?'"]  # harmless: the user held nothing back
            assert (r == 1.0) == (not fatal)


def test_sample_macro_temperatures():
    rng = np.random.default_rng(0)
    proba = np.array([0.1, 0.6, 0.3])
    assert sample_macro(proba, 0.0, rng) == 1
    draws = np.array([sample_macro(proba, 1.0, rng) for _ in range(6000)])
    assert np.allclose(np.bincount(draws, minlength=3) / 6000, proba, atol=0.02)
    hot = np.array([sample_macro(proba, 1e6, rng) for _ in range(6000)])
    assert np.allclose(np.bincount(hot, minlength=3) / 6000, 1 / 3, atol=0.03)
    cold = np.array([sample_macro(proba, 0.05, rng) for _ in range(200)])
    assert (cold == 1).all()


@pytest.fixture(scope="module")
def bc(world):
    return _bc_model(world)


def _bc_model(world, n_traj=30):
    db, tasks = world
    env = ToolEnv(db, tasks, user_factory=scripted_users(0.3, 0.3))
    X, y = [], []
    for i in range(n_traj):
        ag = RecordingPolicyAgent()
        run_episode(env, ag, i % len(tasks), seed=(4, i))
        X += [f for f, _ in ag.trace]
        y += [m for _, m in ag.trace]
    return fit_bc(np.array(X), y), np.array(X)


def test_bc_probabilities_equal_sklearn(bc):
    model, X = bc
    for x in X[:50]:
        assert np.allclose(softmax_proba(model.coef_, model.intercept_, x),
                           model.predict_proba(x[None])[0], atol=1e-12)
    assert X.shape[1] == len(FEATURES) and set(np.unique(X)) <= {0.0, 1.0}


def test_bc_at_zero_temperature_with_a_deterministic_user_is_all_or_nothing(world, bc):
    db, tasks = world
    model, _ = bc
    env = ToolEnv(db, tasks, user_factory=scripted_users(0.0, 0.0, False))
    tr = run_trials(env, lambda: BCPolicy(model, 0.0), 3, seed=2)
    assert set(np.unique(tr.counts)) <= {0, 3}
    hot = run_trials(env, lambda: BCPolicy(model, 1.0), 3, seed=2)
    again = run_trials(env, lambda: BCPolicy(model, 1.0), 3, seed=2)
    assert np.array_equal(hot.rewards, again.rewards)


def test_features_are_binary_and_named():
    from iclr25.agents import Tracker

    s = Tracker()
    f = features(s)
    assert f.shape == (len(FEATURES),) and set(np.unique(f)) <= {0.0, 1.0}
    assert len({name for name, _ in FEATURES}) == len(FEATURES)
    assert not any("owner" in name or "belongs" in name for name, _ in FEATURES)


def test_predicted_success_is_a_product_of_survival_terms(world):
    db, tasks = world
    for t in tasks:
        s = error_opportunities(t, db)
        assert predicted_success(t, db, 0.0, 0.3) == 1.0
        assert predicted_success(t, db, 0.1, 0.0) == pytest.approx(0.9**s)
    assert PolicyAgent  # the rule agent is the eps = 0 case


def test_proposal_slips_with_a_careful_user_never_reach_the_database(world):
    """stage="propose": a wrong proposal is rejected by a careful user (q = 0) and the agent tries
    again, so no accepted wrong change exists; with q = 1 every wrong proposal is accepted."""
    db, tasks = world
    for q in (0.0, 1.0):
        env = ToolEnv(db, tasks, user_factory=scripted_users(0.0, 0.3, q=q))
        tr = run_trials(env, lambda: NoisyPolicyAgent(0.3, db, stage="propose"), 2, seed=3,
                        collect=lambda agent, ep: (ep.user_info["accepted_wrong"], ep.reward))
        accepted = [(a, r) for row in tr.extra for a, r in row]
        if q == 0.0:
            assert all(a == 0 for a, _ in accepted)
        else:
            assert sum(a > 0 for a, _ in accepted) > 5
            assert all(r == 0.0 for a, r in accepted if a > 0)  # the database check catches every one


def test_careless_user_closed_form(world):
    """pass^k of the proposal-slipping agent against a careless user matches the closed form."""
    db, tasks = world
    eps, q, n = 0.3, 0.5, 6
    env = ToolEnv(db, tasks, user_factory=scripted_users(0.3, 0.3, q=q))
    tr = run_trials(env, lambda: NoisyPolicyAgent(eps, db, stage="propose"), n, seed=5)
    p = np.array([predicted_success(t, db, eps, 0.3, stage="propose", q=q) for t in tasks])
    # per-task closed form vs measured mean, z over tasks (Binomial variance)
    meas, pred = tr.counts.mean() / n, p.mean()
    se = np.sqrt((p * (1 - p)).sum() / n) / len(tasks)
    assert abs(meas - pred) < 4 * se + 1e-9
    # q = 1 and q = 0 bracket it; with eps = 0 the agent never fails
    assert all(predicted_success(t, db, eps, 0.3, stage="propose", q=1.0)
               <= predicted_success(t, db, eps, 0.3, stage="propose", q=0.0) + 1e-12 for t in tasks)
    assert all(predicted_success(t, db, 0.0, 0.3, stage="propose", q=q) == 1.0 for t in tasks)


def test_wrong_price_never_contains_the_right_one():
    from iclr25.agents import wrong_price

    prod = {"variants": {"a": {"price": 5.0, "available": True}, "b": {"price": 15.0, "available": True},
                         "c": {"price": 105.0, "available": False}}}
    w = wrong_price(prod)  # every price contains "5.00": the fallback must still differ
    assert "5.00" not in f"{w:.2f}" and w != 5.0
    prod["variants"]["d"] = {"price": 7.25, "available": True}
    assert wrong_price(prod) == 7.25
