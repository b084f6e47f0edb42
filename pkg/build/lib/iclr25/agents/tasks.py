"""Tasks for the mini retail domain: hidden user goals drawn from the database, the gold actions an
oracle derives from them, and the filter that keeps only tasks with a single correct end state.

A goal says what the user wants in the terms a customer would use: which order (its id, or "the
order with my Backpack"), which items (by product name), which new options (with a fallback if
the first choice is sold out), which payment method (by kind: credit card, PayPal, gift card),
which reason or address. The oracle resolves it against the database into the gold tool calls;
a task is kept only if the gold calls succeed and every reading of the description gives the same
end state.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from .core import Action, Task, changes
from .retail import CANCEL_REASONS, TOOLS, Data, _address, fresh_copy

#: Intents and how often the generator draws them.
INTENT_WEIGHTS = {"cancel": 0.15, "modify_items": 0.2, "return": 0.2, "exchange": 0.2,
                  "modify_address": 0.08, "info": 0.1, "other_user": 0.07}
#: Intents that act on several items of one order (the user may reveal them one at a time).
MULTI_ITEM = frozenset({"modify_items", "return", "exchange"})
#: The order status each intent needs.
NEEDS_STATUS = {"cancel": "pending", "modify_items": "pending", "modify_address": "pending",
                "return": "delivered", "exchange": "delivered", "other_user": "pending"}
SOURCE_WORDS = {"credit_card": "credit card", "paypal": "PayPal account", "gift_card": "gift card"}


def replay(base: Data, actions: tuple[Action, ...] | list[Action]) -> tuple[Data, list[str]]:
    """Run tool calls on a fresh copy of ``base``: the final database and each call's output."""
    data = fresh_copy(base)
    outs = [TOOLS[a.name].fn(data, **a.kwargs) for a in actions]
    return data, outs


def pm_of(user: dict[str, Any], source: str) -> str:
    """The id of the user's payment method of this kind (a user has at most one of each)."""
    return next(pid for pid, pm in user["payment_methods"].items() if pm["source"] == source)


def variant_with(product: dict[str, Any], options: dict[str, str]) -> str | None:
    """The item id of the product's variant with exactly these options, if any."""
    for iid, v in product["variants"].items():
        if v["options"] == options:
            return iid
    return None


def gold_actions(goal: dict[str, Any], db: Data, item_choice: list[int] | None = None,
                 order_id: str | None = None) -> tuple[Action, ...]:
    """The tool calls that fulfil ``goal`` on ``db``.

    ``item_choice`` picks which order line each described item means (default: the one the goal
    was drawn from), ``order_id`` which order (default: the goal's): the uniqueness filter tries
    every reading.
    """
    intent = goal["intent"]
    if intent in ("info", "other_user"):
        return ()
    oid = order_id or goal["order_id"]
    order = db["orders"].get(oid)
    user = db["users"][goal["user_id"]]
    if intent == "cancel":
        return (Action("cancel_pending_order", {"order_id": oid, "reason": goal["reason"]}),)
    if intent == "modify_address":
        return (Action("modify_pending_order_address", {"order_id": oid, **goal["address"]}),)
    lines = item_choice if item_choice is not None else [it["line"] for it in goal["items"]]
    item_ids = [order["items"][li]["item_id"] for li in lines]
    pm = pm_of(user, goal["payment"])
    if intent == "return":
        return (Action("return_delivered_order_items", {"order_id": oid, "item_ids": item_ids,
                                                        "payment_method_id": pm}),)
    new_ids = []
    for li, it in zip(lines, goal["items"]):
        product = db["products"][order["items"][li]["product_id"]]
        target = it["want"][0]
        iid = variant_with(product, target)
        if iid is None or not product["variants"][iid]["available"]:
            target = it["want"][1]
            iid = variant_with(product, target) if target else None
        new_ids.append(iid)
    name = "modify_pending_order_items" if intent == "modify_items" else "exchange_delivered_order_items"
    return (Action(name, {"order_id": oid, "item_ids": item_ids, "new_item_ids": new_ids,
                          "payment_method_id": pm}),)


def describe(goal: dict[str, Any], db: Data) -> str:
    """The goal in words, as an instruction for a (human or LLM) user."""
    user = db["users"][goal["user_id"]]
    name = f"{user['name']['first_name']} {user['name']['last_name']}"
    who = (f"You are {name} (email {user['email']}, zip code {user['address']['zip']}). ")
    oid = goal.get("order_id", "")
    if goal["intent"] == "info":
        return who + f"You want to know the lowest price of a {goal['product']} that is available now."
    if goal["intent"] == "other_user":
        return who + (f"You want to cancel order {oid}, which your partner placed, because it is "
                      f"{goal['reason']}.")
    what = {"cancel": "cancel", "modify_address": "change the shipping address of",
            "modify_items": "change items of", "return": "return items of",
            "exchange": "exchange items of"}[goal["intent"]]
    text = who + f"You want to {what} your order {oid} (the one with your {goal['describe']}). "
    if goal["intent"] == "cancel":
        text += f"The reason: it is {goal['reason']}. "
    if goal["intent"] == "modify_address":
        a = goal["address"]
        text += f"The new address is {a['address1']}, {a['address2']}, {a['city']}, {a['state']} {a['zip']}. "
    for it in goal.get("items", []):
        if it["want"] is None:
            text += f"You want to return the {it['product']}. "
        else:
            first, fallback = it["want"]
            text += f"For the {it['product']} you want {_opts(first)}"
            text += f"; if that is not available, {_opts(fallback)}. " if fallback else ". "
    if "payment" in goal:
        text += f"Use your {SOURCE_WORDS[goal['payment']]} for any payment or refund."
    return text


def cheapest_available(product: dict[str, Any]) -> float:
    """The lowest price among the product's available variants (the answer to an info task)."""
    return min(v["price"] for v in product["variants"].values() if v["available"])


def _opts(options: dict[str, str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in options.items())


def _draw_goal(db: Data, rng: np.random.Generator) -> dict[str, Any] | None:
    intents = list(INTENT_WEIGHTS)
    intent = intents[rng.choice(len(intents), p=np.array(list(INTENT_WEIGHTS.values())))]
    uids = list(db["users"])
    uid = uids[rng.integers(len(uids))]
    user = db["users"][uid]
    goal: dict[str, Any] = {"intent": intent, "user_id": uid,
                            "auth": [{"email": user["email"]},
                                     {"first_name": user["name"]["first_name"],
                                      "last_name": user["name"]["last_name"],
                                      "zip": user["address"]["zip"]}]}
    if rng.random() < 0.5:
        goal["auth"].reverse()
    if intent == "info":
        names = sorted(p["name"] for p in db["products"].values())
        goal["product"] = names[rng.integers(len(names))]
        return goal
    if intent == "other_user":
        others = [o for o in db["orders"].values() if o["status"] == "pending" and o["user_id"] != uid]
        order = others[rng.integers(len(others))]
        goal.update(order_id=order["order_id"], describe=order["items"][0]["name"],
                    reason=CANCEL_REASONS[rng.integers(2)])
        return goal
    mine = [db["orders"][o] for o in user["orders"] if db["orders"][o]["status"] == NEEDS_STATUS[intent]]
    if not mine:
        return None
    order = mine[rng.integers(len(mine))]
    goal["order_id"] = order["order_id"]
    if intent == "cancel":
        goal["reason"] = CANCEL_REASONS[rng.integers(2)]
    if intent == "modify_address":
        goal["address"] = _address(rng)
    if intent in MULTI_ITEM:
        n_lines = len(order["items"])
        m = int(rng.integers(1, min(3, n_lines) + 1))
        lines = sorted(int(i) for i in rng.choice(n_lines, size=m, replace=False))
        goal["items"] = []
        for li in lines:
            line = order["items"][li]
            want = None
            if intent != "return":
                product = db["products"][line["product_id"]]
                others = [v for v in product["variants"].values() if v["item_id"] != line["item_id"]]
                first = others[rng.integers(len(others))]
                fallback = None
                if not first["available"]:
                    avail = [v for v in others if v["available"] and v is not first]
                    if not avail:
                        return None
                    fallback = dict(avail[rng.integers(len(avail))]["options"])
                want = [dict(first["options"]), fallback]
            goal["items"].append({"line": li, "product": line["name"], "want": want})
        sources = sorted({pm["source"] for pm in user["payment_methods"].values()})
        if intent == "return":
            original = user["payment_methods"][order["payment_history"][0]["payment_method_id"]]["source"]
            sources = [s for s in sources if s in (original, "gift_card")]
        goal["payment"] = sources[rng.integers(len(sources))]
    first_line = goal["items"][0]["line"] if intent in MULTI_ITEM else int(rng.integers(len(order["items"])))
    goal["describe"] = order["items"][first_line]["name"]
    return goal


def readings(goal: dict[str, Any], db: Data) -> list[tuple[Action, ...]]:
    """Every set of gold calls consistent with the goal's words: any of the user's orders that
    holds the described product, any order lines with the described product names."""
    if goal["intent"] in ("info", "other_user"):
        return [()]
    user = db["users"][goal["user_id"]]
    out = []
    for oid in user["orders"]:
        order = db["orders"][oid]
        names = [it["name"] for it in order["items"]]
        if goal["describe"] not in names:
            continue
        if goal["intent"] not in MULTI_ITEM:
            out.append(gold_actions(goal, db, order_id=oid))
            continue
        options = [[li for li, n in enumerate(names) if n == it["product"]] for it in goal["items"]]
        if any(not o for o in options):
            continue
        for choice in _choices(options):
            if len(set(choice)) == len(choice):
                try:
                    out.append(gold_actions(goal, db, item_choice=list(choice), order_id=oid))
                except (KeyError, StopIteration):
                    continue
    return out


def _orders_described(goal: dict[str, Any], db: Data) -> int:
    """How many of the user's orders in the status the intent needs hold the described product."""
    user = db["users"][goal["user_id"]]
    return sum(db["orders"][o]["status"] == NEEDS_STATUS[goal["intent"]]
               and goal["describe"] in [it["name"] for it in db["orders"][o]["items"]]
               for o in user["orders"])


def _choices(options: list[list[int]]) -> list[tuple[int, ...]]:
    out: list[tuple[int, ...]] = [()]
    for opts in options:
        out = [prev + (o,) for prev in out for o in opts]
    return out


@dataclass
class TaskStats:
    """What the generator drew and discarded: ``drawn`` goals, ``no_goal`` (the user had no order
    in the needed status, or no available fallback), ``gold_fails`` (a gold call returned an
    error), ``ambiguous`` (the words admit several end states), ``kept``."""

    drawn: int = 0
    no_goal: int = 0
    gold_fails: int = 0
    ambiguous: int = 0
    kept: int = 0

    @property
    def ambiguous_share(self) -> float:
        """Share of well-formed goals (gold calls succeed) that had several valid end states."""
        return self.ambiguous / max(1, self.ambiguous + self.kept)


def make_tasks(db: Data, n: int, seed: int) -> tuple[list[Task], TaskStats]:
    """``n`` tasks with a unique correct end state, drawn from ``db`` (deterministic in ``seed``),
    and the generator's :class:`TaskStats`."""
    rng = np.random.default_rng(seed)
    stats = TaskStats()
    tasks: list[Task] = []
    while len(tasks) < n:
        stats.drawn += 1
        goal = _draw_goal(db, rng)
        if goal is None:
            stats.no_goal += 1
            continue
        actions = gold_actions(goal, db)
        _, outs = replay(db, actions)
        if any(o.startswith("Error") for o in outs):
            stats.gold_fails += 1
            continue
        if goal["intent"] not in ("info", "other_user") and _orders_described(goal, db) != 1:
            stats.ambiguous += 1  # "the order with my X" fits several orders
            continue
        ends = set()
        for alt in readings(goal, db):
            data, alt_outs = replay(db, alt)
            if not any(o.startswith("Error") for o in alt_outs):
                ends.add(tuple(sorted(changes(data, db).items(), key=lambda kv: kv[0])))
        if len(ends) != 1:
            stats.ambiguous += 1
            continue
        outputs: tuple[str, ...] = ()
        if goal["intent"] == "info":
            product = next(p for p in db["products"].values() if p["name"] == goal["product"])
            outputs = (f"{cheapest_available(product):.2f}",)
        stats.kept += 1
        tasks.append(Task(user_id=goal["user_id"], intent=goal["intent"], goal=goal,
                          instruction=describe(goal, db), actions=actions, outputs=outputs))
    return tasks, stats


def intent_counts(tasks: list[Task]) -> dict[str, int]:
    """How many tasks of each intent."""
    return dict(Counter(t.intent for t in tasks))
