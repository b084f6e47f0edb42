"""The retail domain, the environment and its reward: copy-on-write tools, the fast state
comparison against the full tau-bench hash, wrong side effects caught, read-only calls and item
order ignored, determinism under seeds."""

import json

import numpy as np
import pytest

from iclr25.agents import (RESPOND, TOOLS, WRITE_TOOLS, Action, PolicyAgent, ToolEnv, changes,
                           db_hash, evaluate_actions, fresh_copy, make_retail_db, make_tasks,
                           replay, run_episode, run_trials, scripted_users, to_hashable)
from iclr25.agents.tasks import MULTI_ITEM


@pytest.fixture(scope="module")
def world():
    db = make_retail_db(3, n_users=40)
    tasks, stats = make_tasks(db, 40, seed=4)
    return db, tasks, stats


def test_db_is_deterministic_in_seed():
    assert db_hash(make_retail_db(5, 20)) == db_hash(make_retail_db(5, 20))
    assert db_hash(make_retail_db(5, 20)) != db_hash(make_retail_db(6, 20))


def test_to_hashable_ignores_dict_order_but_not_list_order():
    a = {"x": 1, "y": [1, 2], "z": {"b": 2, "a": 1}}
    b = {"z": {"a": 1, "b": 2}, "y": [1, 2], "x": 1}
    assert to_hashable(a) == to_hashable(b) and db_hash(a) == db_hash(b)
    assert db_hash({**a, "y": [2, 1]}) != db_hash(a)
    assert to_hashable({3, 1, 2}) == (1, 2, 3)


def _random_call(name, db, rng):
    """A plausible call of a write tool (valid or not) on a random order."""
    order = list(db["orders"].values())[rng.integers(len(db["orders"]))]
    user = db["users"][order["user_id"]]
    pm = list(user["payment_methods"])[rng.integers(len(user["payment_methods"]))]
    items = [order["items"][0]["item_id"]]
    variants = list(db["products"][order["items"][0]["product_id"]]["variants"])
    new = [variants[rng.integers(len(variants))]]
    addr = {k: "x" for k in ("address1", "address2", "city", "state", "country", "zip")}
    return Action(name, {
        "cancel_pending_order": {"order_id": order["order_id"], "reason": "no longer needed"},
        "modify_pending_order_address": {"order_id": order["order_id"], **addr},
        "modify_pending_order_payment": {"order_id": order["order_id"], "payment_method_id": pm},
        "modify_pending_order_items": {"order_id": order["order_id"], "item_ids": items,
                                       "new_item_ids": new, "payment_method_id": pm},
        "return_delivered_order_items": {"order_id": order["order_id"], "item_ids": items,
                                         "payment_method_id": pm},
        "exchange_delivered_order_items": {"order_id": order["order_id"], "item_ids": items,
                                           "new_item_ids": new, "payment_method_id": pm},
        "modify_user_address": {"user_id": user["user_id"], **addr},
    }[name])


def test_tools_never_touch_the_base_and_changes_equal_full_hash():
    db = make_retail_db(8, n_users=12)
    base_hash = db_hash(db)
    rng = np.random.default_rng(0)
    seen = set()
    for trial in range(60):
        calls = []
        for _ in range(2):
            names = sorted(WRITE_TOOLS)
            calls.append([_random_call(names[rng.integers(len(names))], db, rng)
                          for _ in range(int(rng.integers(0, 3)))])
        if trial % 2:
            calls[1] = calls[0]  # the same writes, in the same order: equal states
        a, b = fresh_copy(db), fresh_copy(db)
        for data, cs in zip((a, b), calls):
            for c in cs:
                TOOLS[c.name].fn(data, **c.kwargs)
        same = db_hash(a) == db_hash(b)
        seen.add(same)
        assert (changes(a, db) == changes(b, db)) == same
    assert seen == {True, False}
    assert db_hash(db) == base_hash, "a tool changed the base database"


def test_failed_write_changes_nothing(world):
    db, _, _ = world
    delivered = next(o for o in db["orders"].values() if o["status"] == "delivered")
    data = fresh_copy(db)
    out = TOOLS["cancel_pending_order"].fn(data, order_id=delivered["order_id"], reason="no longer needed")
    assert out.startswith("Error") and changes(data, db) == {}
    out = TOOLS["cancel_pending_order"].fn(data, order_id="#W0", reason="no longer needed")
    assert out == "Error: order not found"


def test_cancel_refunds_gift_card_and_rounds(world):
    db, _, _ = world
    for o in db["orders"].values():
        user = db["users"][o["user_id"]]
        gift = [p for p in user["payment_methods"] if p.startswith("gift_card")]
        if o["status"] == "pending" and gift:
            break
    data = fresh_copy(db)
    data["orders"][o["order_id"]] = {**o, "payment_history": [
        {"transaction_type": "payment", "amount": 10.1, "payment_method_id": gift[0]}]}
    before = user["payment_methods"][gift[0]]["balance"]
    out = json.loads(TOOLS["cancel_pending_order"].fn(data, order_id=o["order_id"], reason="ordered by mistake"))
    assert out["status"] == "cancelled"
    assert data["users"][user["user_id"]]["payment_methods"][gift[0]]["balance"] == round(before + 10.1, 2)


def test_generator_keeps_unique_end_states_and_gold_succeeds(world):
    db, tasks, stats = world
    assert len(tasks) == 40 and stats.kept == 40
    assert stats.drawn == stats.no_goal + stats.gold_fails + stats.ambiguous + stats.kept
    for t in tasks:
        _, outs = replay(db, t.actions)
        assert not any(o.startswith("Error") for o in outs)
        assert (len(t.actions) == 0) == (t.intent in ("info", "other_user"))
        assert bool(t.outputs) == (t.intent == "info")


def test_reward_ignores_read_only_calls_and_item_order(world):
    db, tasks, _ = world
    t = next(t for t in tasks if t.intent in MULTI_ITEM and len(t.actions[0].kwargs["item_ids"]) >= 2)
    gold = t.actions[0]
    kw = dict(gold.kwargs)
    perm = list(range(len(kw["item_ids"])))[::-1]
    kw["item_ids"] = [kw["item_ids"][i] for i in perm]
    if "new_item_ids" in kw:
        kw["new_item_ids"] = [kw["new_item_ids"][i] for i in perm]
    reads = [Action("get_order_details", {"order_id": kw["order_id"]}),
             Action("list_all_product_types", {}), Action("get_user_details", {"user_id": t.user_id})]
    assert evaluate_actions(db, t, [gold])["reward"] == 1.0
    assert evaluate_actions(db, t, reads[::-1] + [Action(gold.name, kw)] + reads)["reward"] == 1.0


def test_reward_catches_wrong_side_effects_that_answers_miss(world):
    db, tasks, _ = world
    t = next(t for t in tasks if t.intent == "info")
    answer = Action(RESPOND, {"content": f"It is {t.outputs[0]} dollars."})
    assert evaluate_actions(db, t, [answer]) == {"reward": 1.0, "r_actions": 1.0, "r_outputs": 1.0}
    user = db["users"][t.user_id]
    extra = Action("modify_user_address", {"user_id": t.user_id, **{**user["address"], "zip": "00000"}})
    r = evaluate_actions(db, t, [answer, extra])
    assert r["r_outputs"] == 1.0 and r["reward"] == 0.0
    # and a write task: the wrong cancel reason is a different end state
    c = next(t for t in tasks if t.intent == "cancel")
    kw = dict(c.actions[0].kwargs)
    kw["reason"] = "ordered by mistake" if kw["reason"] == "no longer needed" else "no longer needed"
    assert evaluate_actions(db, c, [Action(c.actions[0].name, kw)])["reward"] == 0.0
    assert evaluate_actions(db, c, [])["reward"] == 0.0
    assert evaluate_actions(db, c, list(c.actions) * 2)["reward"] == 1.0  # second call fails: no change


def test_outputs_check_is_case_and_comma_insensitive(world):
    from iclr25.agents import outputs_found

    assert outputs_found(("1093.34",), ["The total is 1,093.34"])
    assert outputs_found(("Blue",), ["it is blue"])
    assert not outputs_found(("12.50",), ["it is 12.05"])
    assert outputs_found((), [])


def test_env_interface_and_episode_determinism(world):
    db, tasks, _ = world
    env = ToolEnv(db, tasks)
    assert {s["function"]["name"] for s in env.tools_info} == set(TOOLS)
    obs, info = env.reset(0, seed=1)
    assert isinstance(obs, str) and info["act"]["type"] == "request"
    obs, reward, done, info = env.step(Action("no_such_tool", {}))
    assert obs.startswith("Unknown action") and not done
    obs, reward, done, info = env.step(Action("get_order_details", {"order_id": 5}))
    assert obs.startswith("Error") or obs == "Error: order not found"
    obs, reward, done, info = env.step(Action("transfer_to_human_agents", {"summary": "s"}))
    assert done and "reward_info" in info
    a = run_trials(env, PolicyAgent, 3, seed=9)
    b = run_trials(env, PolicyAgent, 3, seed=9)
    assert np.array_equal(a.rewards, b.rewards) and a.ends == b.ends
    e1 = run_episode(env, PolicyAgent(), 2, seed=(1, 2), record=True)
    e2 = run_episode(env, PolicyAgent(), 2, seed=(1, 2), record=True)
    assert e1.transcript == e2.transcript


def test_policy_agent_solves_every_task_with_any_user(world):
    db, tasks, _ = world
    for users in (scripted_users(0.0, 0.0, False), scripted_users(0.6, 0.6, True)):
        env = ToolEnv(db, tasks, user_factory=users)
        tr = run_trials(env, PolicyAgent, 3, seed=2)
        assert tr.rewards.min() == 1.0
        assert {e for row in tr.ends for e in row} == {"user_stop"}


def test_max_steps_gives_zero_reward(world):
    db, tasks, _ = world
    env = ToolEnv(db, tasks)
    ep = run_episode(env, PolicyAgent(), 0, seed=0, max_steps=2)
    assert ep.end == "max_steps" and ep.reward == 0.0


def test_episode_keeps_the_users_summary_and_trials_concatenate(world):
    from iclr25.agents import concat_trials

    db, tasks, _ = world
    env = ToolEnv(db, tasks, user_factory=scripted_users(0.5, 0.5))
    write = next(i for i, t in enumerate(tasks) if t.intent in ("cancel", "return", "exchange"))
    ep = run_episode(env, PolicyAgent(), write, seed=(1, 2))
    assert set(ep.user_info) >= {"forget", "split", "accepted_wrong", "satisfied"}
    assert ep.user_info["satisfied"] is True and ep.reward == 1.0
    trap = next(i for i, t in enumerate(tasks) if t.intent == "other_user")
    ep = run_episode(env, PolicyAgent(), trap, seed=(1, 2))  # a right refusal leaves the user unsatisfied
    assert ep.user_info["satisfied"] is False and ep.reward == 1.0
    a = run_trials(env, PolicyAgent, 2, seed=(4, 0), tasks=[0, 1])
    b = run_trials(env, PolicyAgent, 2, seed=(4, 1), tasks=[2])
    ab = concat_trials([a, b])
    assert ab.rewards.shape == (3, 2) and len(ab.ends) == 3
    again = run_trials(env, PolicyAgent, 2, seed=(4, 0), tasks=[0, 1])  # tuple seeds are deterministic
    assert np.array_equal(again.rewards, a.rewards) and again.ends == a.ends
