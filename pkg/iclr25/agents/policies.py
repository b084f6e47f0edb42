"""Agents that need no LLM: a policy-following rule agent, the same agent with an error rate eps,
and a behaviour-cloned policy sampled at a temperature.

All three share a :class:`Tracker` (what the agent has learned from the user and the tools so far)
and act through *macro-actions*: the policy picks one of :data:`MACROS` ("ask for the payment
method", "propose the change", "execute it", ...) and :func:`fill` turns it into a concrete
:class:`~iclr25.agents.core.Action` with arguments taken from the tracker. The rule agent picks
macros by the written policy (:func:`rule_macro`); the behaviour-cloned agent learns the choice
from the rule agent's conversations, from a feature vector that leaves out one thing the policy
needs (whether the order belongs to the authenticated user).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .core import RESPOND, Action
from .retail import CANCEL_REASONS, Data
from .tasks import MULTI_ITEM, NEEDS_STATUS, SOURCE_WORDS, cheapest_available

MACROS = ("ask_auth", "find_user", "get_user", "ask_order_id", "get_order", "list_products",
          "get_product", "inform_unavailable", "ask_more_items", "ask_detail", "propose", "execute",
          "report_done", "answer", "deny")
USER_ACTS = ("request", "auth", "order_id", "no_order_id", "more_items", "no_more_items", "payment",
             "reason", "address", "fallback", "yes", "no", "repeat")
SWAP_INTENTS = frozenset({"modify_items", "exchange"})
WRITE_FOR = {"cancel": "cancel_pending_order", "modify_address": "modify_pending_order_address",
             "modify_items": "modify_pending_order_items", "return": "return_delivered_order_items",
             "exchange": "exchange_delivered_order_items"}


@dataclass
class Tracker:
    """What the agent knows: the user's request and details, and what the tools returned."""

    intent: str | None = None
    info_product: str | None = None
    auth: dict[str, str] | None = None
    user_id: str | None = None
    user: dict[str, Any] | None = None
    order_id: str | None = None
    order: dict[str, Any] | None = None
    describe: str | None = None
    searching: bool = False
    search_seen: set[str] = field(default_factory=set)
    requests: list[dict[str, Any]] = field(default_factory=list)
    all_items: bool = False
    product_ids: dict[str, str] | None = None
    products: dict[str, dict[str, Any]] = field(default_factory=dict)
    informed: set[str] = field(default_factory=set)
    payment: str | None = None
    reason: str | None = None
    address: dict[str, str] | None = None
    proposal: Action | None = None
    confirmed: bool = False
    executed: int = 0
    write_failed: bool = False
    reported: bool = False
    answered: bool = False
    ignore_owner: bool = False
    new_work: bool = False
    last_user: str = "request"
    last_error: bool = False

    # ---- updates -----------------------------------------------------------------------------

    def hear(self, act: dict[str, Any]) -> None:
        """Update from a user act."""
        t = act.get("type", "repeat")
        self.last_user = t if t in USER_ACTS else "repeat"
        if t in ("request", "repeat", "no"):
            self.intent = self.intent or act.get("intent")
            self.info_product = self.info_product or act.get("product")
            self.describe = self.describe or act.get("describe")
            if act.get("order_id") and not self.order_id:
                self.order_id = act["order_id"]
            if "items" in act and (t == "no" or not self.requests):
                self.requests = [dict(it) for it in act["items"]]
            for key in ("payment", "reason", "address"):
                if act.get(key):
                    setattr(self, key, act[key])
            if t == "no":
                self.proposal, self.confirmed = None, False
        elif t == "auth":
            self.auth = {k: v for k, v in act.items() if k != "type"}
        elif t == "order_id":
            self.order_id = act["order_id"]
        elif t == "no_order_id":
            self.searching = True
        elif t == "more_items":
            if act.get("late"):
                self.requests = [dict(it) for it in act["items"]]
                self.proposal, self.confirmed, self.reported = None, False, False
                self.new_work = True
            else:
                self.requests += [dict(it) for it in act["items"]]
            self.all_items = True
        elif t == "no_more_items":
            self.all_items = True
        elif t == "payment":
            self.payment = act["source"]
        elif t == "reason":
            self.reason = act["reason"]
        elif t == "address":
            self.address = act["address"]
        elif t == "fallback":
            for it in self.requests:
                if it["product"] == act["product"] and it["want"] == act.get("instead_of"):
                    it["want"] = act["options"]
                    break
        elif t == "yes":
            self.confirmed = self.proposal is not None

    def see(self, action: Action, obs: str) -> None:
        """Update from a tool call and its output."""
        self.last_error = obs.startswith("Error") or obs.startswith("Unknown")
        name = action.name
        if self.last_error:
            if name in WRITE_FOR.values():
                self.write_failed = True
            return
        if name.startswith("find_user_id"):
            self.user_id = obs
        elif name == "get_user_details":
            self.user = json.loads(obs)
        elif name == "list_all_product_types":
            self.product_ids = json.loads(obs)
        elif name == "get_product_details":
            p = json.loads(obs)
            self.products[p["product_id"]] = p
        elif name == "get_order_details":
            o = json.loads(obs)
            if self.order_id is None and self.searching:
                self.search_seen.add(o["order_id"])
                names = [it["name"] for it in o["items"]]
                if self.describe in names and o["status"] == NEEDS_STATUS.get(self.intent or ""):
                    self.order_id, self.order = o["order_id"], o
            elif o["order_id"] == self.order_id:
                self.order = o
        elif name in WRITE_FOR.values():
            self.executed += 1
            self.order = json.loads(obs)
            self.proposal, self.confirmed, self.new_work = None, False, False

    # ---- derived facts -----------------------------------------------------------------------

    def pid_of(self, product_name: str) -> str | None:
        """The product id of a product in the order (or from the product list)."""
        for it in (self.order or {}).get("items", []):
            if it["name"] == product_name:
                return it["product_id"]
        return (self.product_ids or {}).get(product_name)

    def missing_products(self) -> list[str]:
        """Product ids whose details a swap needs and the agent has not fetched."""
        if self.intent not in SWAP_INTENTS:
            return []
        pids = [self.pid_of(it["product"]) for it in self.requests]
        return [p for p in pids if p is not None and p not in self.products]

    def unavailable(self) -> dict[str, Any] | None:
        """The first requested variant that is sold out (and not yet reported), if any."""
        if self.intent not in SWAP_INTENTS:
            return None
        for it in self.requests:
            pid = self.pid_of(it["product"])
            if pid not in self.products or it["want"] is None:
                continue
            iid = _variant(self.products[pid], it["want"])
            if (iid is None or not self.products[pid]["variants"][iid]["available"]):
                key = f"{it['product']}|{sorted(it['want'].items())}"
                if key not in self.informed:
                    return {"product": it["product"], "options": it["want"], "key": key}
        return None

    def missing_detail(self) -> str | None:
        """The detail the change still needs: ``payment``, ``reason`` or ``address``."""
        need = {"cancel": "reason", "modify_address": "address"}.get(self.intent or "",
                                                                    "payment" if self.intent in MULTI_ITEM else None)
        return need if need and getattr(self, need) is None else None

    def owned(self) -> bool:
        return self.order is not None and (self.order["user_id"] == self.user_id or self.ignore_owner)

    def status_ok(self) -> bool:
        return self.order is not None and self.order["status"] == NEEDS_STATUS.get(self.intent or "")


def _variant(product: dict[str, Any], options: dict[str, str]) -> str | None:
    for iid, v in product["variants"].items():
        if v["options"] == options:
            return iid
    return None


def planned_action(s: Tracker) -> Action | None:
    """The database change the tracker's request amounts to (``None`` if something is missing)."""
    if s.intent not in WRITE_FOR or s.order is None:
        return None
    name, oid = WRITE_FOR[s.intent], s.order["order_id"]
    if s.intent == "cancel":
        return Action(name, {"order_id": oid, "reason": s.reason}) if s.reason else None
    if s.intent == "modify_address":
        return Action(name, {"order_id": oid, **s.address}) if s.address else None
    if not s.requests or s.payment is None or s.user is None:
        return None
    pm = next((p for p, m in s.user["payment_methods"].items() if m["source"] == s.payment), None)
    lines, used = [], set()
    for it in s.requests:
        li = next((i for i, line in enumerate(s.order["items"])
                   if line["name"] == it["product"] and i not in used), None)
        if li is None:
            return None
        used.add(li)
        lines.append(s.order["items"][li])
    kw: dict[str, Any] = {"order_id": oid, "item_ids": [ln["item_id"] for ln in lines]}
    if s.intent in SWAP_INTENTS:
        new = []
        for ln, it in zip(lines, s.requests):
            prod = s.products.get(ln["product_id"])
            nid = _variant(prod, it["want"]) if prod and it["want"] else None
            if nid is None:
                return None
            new.append(nid)
        kw["new_item_ids"] = new
    kw["payment_method_id"] = pm
    return Action(name, kw) if pm else None


def rule_macro(s: Tracker) -> str:
    """The written policy as a decision list over the tracker."""
    if s.user_id is None:
        return "find_user" if s.auth else "ask_auth"
    if s.intent == "info":
        if s.product_ids is None:
            return "list_products"
        return "get_product" if s.product_ids.get(s.info_product) not in s.products else "answer"
    if s.user is None:
        return "get_user"
    if s.order_id is None:
        return "get_order" if s.searching else "ask_order_id"
    if s.order is None:
        return "get_order"
    if s.write_failed or not s.owned() or (not s.status_ok() and not s.executed):
        return "deny"
    if s.executed and not s.reported and not s.new_work:
        return "report_done"
    if s.intent in MULTI_ITEM and not s.all_items:
        return "ask_more_items"
    if s.missing_products():
        return "get_product"
    if s.unavailable():
        return "inform_unavailable"
    if s.missing_detail():
        return "ask_detail"
    if s.proposal is None or not s.confirmed:
        return "propose"
    return "execute"


def _say(content: str, act: dict[str, Any]) -> Action:
    return Action(RESPOND, {"content": content, "act": act})


CLARIFY = ("Could you tell me more about what you need?", {"type": "clarify"})


def fill(macro: str, s: Tracker) -> Action:
    """The concrete action of a macro in the tracker's state; a macro whose inputs are missing
    becomes a vague question to the user (as an agent that lost track would ask). Messages that
    commit the agent (a proposal, a sold-out notice, "done", an answer) are recorded in ``s``."""
    clarify = _say(*CLARIFY)
    if macro == "ask_auth":
        return _say("Could you give me your email, or your name and zip code?", {"type": "ask_auth"})
    if macro == "find_user":
        if not s.auth:
            return clarify
        if "email" in s.auth:
            return Action("find_user_id_by_email", {"email": s.auth["email"]})
        return Action("find_user_id_by_name_zip", dict(s.auth))
    if macro == "get_user":
        return Action("get_user_details", {"user_id": s.user_id}) if s.user_id else clarify
    if macro == "ask_order_id":
        return _say("What is the order id?", {"type": "ask_order_id"})
    if macro == "get_order":
        if s.order_id:
            return Action("get_order_details", {"order_id": s.order_id})
        if s.searching and s.user:
            rest = [o for o in s.user["orders"] if o not in s.search_seen]
            if rest:
                return Action("get_order_details", {"order_id": rest[0]})
        return clarify
    if macro == "list_products":
        return Action("list_all_product_types", {})
    if macro == "get_product":
        if s.intent == "info" and s.product_ids and s.info_product in s.product_ids:
            return Action("get_product_details", {"product_id": s.product_ids[s.info_product]})
        missing = s.missing_products()
        return Action("get_product_details", {"product_id": missing[0]}) if missing else clarify
    if macro == "inform_unavailable":
        u = s.unavailable()
        if not u:
            return clarify
        s.informed.add(u["key"])
        return _say(f"Sorry, the {u['product']} in {_words(u['options'])} is not available.",
                    {"type": "inform_unavailable", "product": u["product"], "options": u["options"]})
    if macro == "ask_more_items":
        return _say("Are there any other items you want to include? I can only do this once.",
                    {"type": "ask_more_items"})
    if macro == "ask_detail":
        need = s.missing_detail() or "payment"
        text = {"payment": "Which payment method should I use for the price difference or refund?",
                "reason": f"What is the reason: {CANCEL_REASONS[0]!r} or {CANCEL_REASONS[1]!r}?",
                "address": "What is the new address?"}[need]
        return _say(text, {"type": f"ask_{need}"})
    if macro in ("propose", "execute"):
        a = planned_action(s)
        if a is None:
            return clarify
        if macro == "execute":
            return a
        s.proposal, s.confirmed = a, False
        return _say(f"To confirm: {_summary(a, s)}. Shall I proceed (yes/no)?",
                    {"type": "propose", "action": {"name": a.name, "kwargs": a.kwargs}})
    if macro == "report_done":
        s.reported = True
        return _say("Done, your request has been processed.", {"type": "done"})
    if macro == "answer":
        pid = (s.product_ids or {}).get(s.info_product or "")
        if pid not in s.products:
            return clarify
        s.answered = True
        return _say(f"The lowest price of an available {s.info_product} is "
                    f"{cheapest_available(s.products[pid]):.2f} dollars.", {"type": "answer"})
    if macro == "deny":
        return _say("I'm sorry, I cannot help with that request.", {"type": "deny"})
    raise ValueError(f"unknown macro {macro!r}")


def _words(options: dict[str, str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in options.items())


def _summary(a: Action, s: Tracker) -> str:
    kw = a.kwargs
    text = f"{a.name.replace('_', ' ')} for order {kw['order_id']}"
    if "reason" in kw:
        text += f", reason '{kw['reason']}'"
    if "item_ids" in kw:
        text += f", items {', '.join(kw['item_ids'])}"
    if "new_item_ids" in kw:
        text += f" -> {', '.join(str(x) for x in kw['new_item_ids'])}"
    if "payment_method_id" in kw:
        text += f", using {kw['payment_method_id']}"
    if "address1" in kw:
        text += f", new address {kw['address1']}, {kw['city']}"
    return text


# ---- agents --------------------------------------------------------------------------------------


class TrackerAgent:
    """Base of the scripted agents: keeps a :class:`Tracker` and turns macros into actions."""

    def reset(self, observation: str, info: dict[str, Any], rng: np.random.Generator) -> None:
        self.s = Tracker()
        self.rng = rng
        self.s.hear(info.get("act") or {"type": "repeat"})
        self.trace: list[tuple[np.ndarray, str]] = []

    def choose(self) -> str:
        raise NotImplementedError

    def act(self) -> Action:
        macro = self.choose()
        self.last_macro = macro
        return fill(macro, self.s)

    def observe(self, action: Action, observation: str, info: dict[str, Any]) -> None:
        if action.name == RESPOND:
            self.s.hear(info.get("act") or {"type": "repeat"})
        else:
            self.s.see(action, observation)


class PolicyAgent(TrackerAgent):
    """Follows the written policy exactly: authenticate, look up, collect every item, ask for the
    details, propose, wait for "yes", make the single write, report."""

    def choose(self) -> str:
        return rule_macro(self.s)


def slip_slots(action: Action, db: Data) -> list[tuple[str, int | None, list[Any]]]:
    """The arguments of a write call that a slip could get wrong, as ``(key, index, wrong values
    the tool would still accept)``; ``index`` is the position in a list argument, or ``None``.

    Slots: the cancel reason; the zip code of a new address; each returned item (another line of
    the order); each new variant (another available variant of the product, not the old one); the
    payment method (another one the tool accepts). A slot with no wrong value is kept, empty.
    """
    kw = action.kwargs
    if action.name == "cancel_pending_order":
        return [("reason", None, [r for r in CANCEL_REASONS if r != kw["reason"]])]
    if action.name == "modify_pending_order_address":
        z = kw["zip"]
        return [("zip", None, [z[::-1] if z[::-1] != z else z[:-1] + str((int(z[-1]) + 1) % 10)])]
    order = db["orders"][kw["order_id"]]
    user = db["users"][order["user_id"]]
    pm = kw["payment_method_id"]
    if action.name == "return_delivered_order_items":
        lines = {ln["item_id"] for ln in order["items"]}
        slots = [("item_ids", i, sorted(lines - set(kw["item_ids"]))) for i in range(len(kw["item_ids"]))]
        original = order["payment_history"][0]["payment_method_id"]
        ok = {p for p in user["payment_methods"] if p == original or p.startswith("gift_card")}
        return slots + [("payment_method_id", None, sorted(ok - {pm}))]
    slots, diff = [], 0.0
    for i, (old, new) in enumerate(zip(kw["item_ids"], kw["new_item_ids"])):
        line = next((ln for ln in order["items"] if ln["item_id"] == old), None)
        if line is None:  # an item the episode changed earlier: not in the base order, no slip to draw
            slots.append(("new_item_ids", i, []))
            continue
        variants = db["products"][line["product_id"]]["variants"]
        slots.append(("new_item_ids", i, sorted(v for v, x in variants.items()
                                                if x["available"] and v not in (new, old))))
        diff += variants[new]["price"] - line["price"]
    ok = [p for p, m in user["payment_methods"].items()
          if p != pm and (m["source"] != "gift_card" or m["balance"] >= diff)]
    return slots + [("payment_method_id", None, sorted(ok))]


SLIP_NAMES = {
    ("cancel_pending_order", "reason"): "wrong argument: reason",
    ("modify_pending_order_address", "zip"): "wrong argument: address",
    ("return_delivered_order_items", "item_ids"): "wrong argument: item",
    ("return_delivered_order_items", "payment_method_id"): "wrong argument: payment",
    ("modify_pending_order_items", "new_item_ids"): "wrong argument: variant",
    ("modify_pending_order_items", "payment_method_id"): "wrong argument: payment",
    ("exchange_delivered_order_items", "new_item_ids"): "wrong argument: variant",
    ("exchange_delivered_order_items", "payment_method_id"): "wrong argument: payment",
}


def error_opportunities(task, db: Data) -> int:
    """``s_t``: the number of fatal single-slip opportunities of the eps-agent on ``task`` (slips
    in the gold write's arguments; a wrong answer for ``info``; complying for ``other_user``)."""
    if task.intent in ("info", "other_user"):
        return 1
    return sum(bool(alts) for _, _, alts in slip_slots(task.actions[0], db))


def predicted_success(task, db: Data, eps: float, p_split: float, *, stage: str = "execute",
                      q: float = 0.0) -> float:
    """The eps-agent's success probability on ``task``.

    ``stage="execute"`` (slips in the write call, after the user confirmed the right plan):
    ``(1 - eps)^{s_t} * (1 - eps * p_split)^{[the user can split its items]}`` (skipping the
    "anything else?" question is fatal only when the user held items back).

    ``stage="propose"`` (slips in the proposal the user is asked to confirm, against a user who
    says "yes" to a wrong proposal with probability ``q``): a proposal is right with probability
    ``a = (1 - eps)^{s_t}``; a wrong one is rejected with probability ``1 - q`` and the agent
    proposes again, up to ``PATIENCE + 1`` proposals, so the write succeeds with probability
    ``a * sum_{i <= PATIENCE} ((1 - a)(1 - q))^i``. A wrong answer (``info``) and complying with a
    request about another user's order (``other_user``) are not proposals the user can catch:
    there the first formula holds.
    """
    from .user import PATIENCE

    s_t = error_opportunities(task, db)
    can_split = task.intent in MULTI_ITEM and len(task.goal.get("items", [])) >= 2
    split = (1 - eps * p_split) ** can_split
    if stage == "execute" or task.intent in ("info", "other_user"):
        return (1 - eps) ** s_t * split
    if stage != "propose":
        raise ValueError(f"stage must be 'execute' or 'propose', got {stage!r}")
    a = (1 - eps) ** s_t
    r = (1 - a) * (1 - q)
    return a * sum(r**i for i in range(PATIENCE + 1)) * split


def wrong_price(product: dict[str, Any]) -> float:
    """A price that is not the right answer to "the lowest available price of ``product``" and
    whose text does not contain the right one: the lowest other variant price that qualifies, or,
    if every price contains the right one (e.g. 5.00 and 15.00), the right price plus 1.11 (plus
    1.11 again until it qualifies)."""
    right = f"{cheapest_available(product):.2f}"
    prices = sorted(p for p in {v["price"] for v in product["variants"].values()} if right not in f"{p:.2f}")
    if prices:
        return prices[0]
    x = float(right) + 1.11
    while right in f"{x:.2f}":
        x += 1.11
    return round(x, 2)


class NoisyPolicyAgent(PolicyAgent):
    """The rule agent that slips with probability ``eps`` at every decision that can go wrong:
    each argument of its write call (a near-duplicate variant, another item, another payment
    method, the other reason), skipping "anything else?" before a single-shot write, a wrong
    price in an answer, and complying with a request about another user's order.

    ``stage="execute"``: the argument slips happen when the call is made, after the user confirmed
    the right plan, so the user cannot catch them. ``stage="propose"``: they happen in the proposal
    the user is asked to confirm, and the agent then executes exactly what was confirmed; a user
    who reads the proposal says "no" and the agent proposes again (with fresh slips).
    """

    def __init__(self, eps: float, db: Data, stage: str = "execute") -> None:
        if stage not in ("execute", "propose"):
            raise ValueError(f"stage must be 'execute' or 'propose', got {stage!r}")
        self.eps, self.db, self.stage = eps, db, stage

    def reset(self, observation: str, info: dict[str, Any], rng: np.random.Generator) -> None:
        super().reset(observation, info, rng)
        self.slips: list[str] = []  # the errors made in this episode, in order

    def choose(self) -> str:
        macro = rule_macro(self.s)
        if macro == "ask_more_items" and self.rng.random() < self.eps:
            self.s.all_items = True  # skip: act as if every item were listed
            self.slips.append("skipped 'anything else?'")
            macro = rule_macro(self.s)
        if macro == "deny" and not self.s.owned() and not self.s.ignore_owner:
            if self.rng.random() < self.eps:
                self.s.ignore_owner = True  # help with another user's order
                self.slips.append("helped another user")
                macro = rule_macro(self.s)
        return macro

    def act(self) -> Action:
        macro = self.choose()
        action = fill(macro, self.s)
        if self.stage == "execute" and macro == "execute" and action.name != RESPOND:
            action = self._slip(action)
        if self.stage == "propose" and macro == "propose" and self.s.proposal is not None:
            wrong = self._slip(self.s.proposal)
            self.s.proposal = wrong
            action = _say(f"To confirm: {_summary(wrong, self.s)}. Shall I proceed (yes/no)?",
                          {"type": "propose", "action": {"name": wrong.name, "kwargs": wrong.kwargs}})
        if self.stage == "propose" and macro == "execute" and self.s.proposal is not None:
            action = self.s.proposal  # exactly what the user confirmed
        if macro == "answer" and action.name == RESPOND and self.rng.random() < self.eps:
            pid = self.s.product_ids[self.s.info_product]
            action = _say(f"The lowest price of an available {self.s.info_product} is "
                          f"{wrong_price(self.s.products[pid]):.2f} dollars.", {"type": "answer"})
            self.slips.append("wrong answer")
        return action

    def _slip(self, action: Action) -> Action:
        kw = {k: (list(v) if isinstance(v, list) else v) for k, v in action.kwargs.items()}
        for key, idx, alts in slip_slots(action, self.db):
            if alts and self.rng.random() < self.eps:
                wrong = alts[int(self.rng.integers(len(alts)))]
                self.slips.append(SLIP_NAMES[action.name, key])
                if idx is None:
                    kw[key] = wrong
                else:
                    kw[key][idx] = wrong
        return Action(action.name, kw)


# ---- behaviour cloning ---------------------------------------------------------------------------

FEATURES = (
    ("auth known", lambda s: s.auth is not None),
    ("user id known", lambda s: s.user_id is not None),
    ("profile fetched", lambda s: s.user is not None),
    *((f"intent {i}", (lambda i: lambda s: s.intent == i)(i))
      for i in ("info", "cancel", "modify_items", "return", "exchange", "modify_address")),
    ("product list fetched", lambda s: s.product_ids is not None),
    ("asked-for product fetched", lambda s: bool(s.product_ids) and s.product_ids.get(s.info_product) in s.products),
    ("order id known", lambda s: s.order_id is not None),
    ("searching for the order", lambda s: s.searching),
    ("order fetched", lambda s: s.order is not None),
    ("status allows the intent", lambda s: s.status_ok()),
    ("all items listed", lambda s: s.all_items),
    ("products to fetch", lambda s: bool(s.missing_products())),
    ("a choice is sold out", lambda s: s.unavailable() is not None),
    ("a detail is missing", lambda s: s.missing_detail() is not None),
    ("proposal made", lambda s: s.proposal is not None),
    ("user confirmed", lambda s: s.confirmed),
    ("change made", lambda s: s.executed > 0),
    ("more work after the change", lambda s: s.new_work),
    ("reported done", lambda s: s.reported),
    ("a write failed", lambda s: s.write_failed),
    ("last tool call failed", lambda s: s.last_error),
    *((f"user said {a}", (lambda a: lambda s: s.last_user == a)(a)) for a in USER_ACTS),
)
"""The behaviour-cloned agent's view of the tracker: named binary features. Whether the order
belongs to the authenticated user is deliberately absent (the policy trap it cannot see)."""


def features(s: Tracker) -> np.ndarray:
    """The feature vector of a tracker state, shape ``(len(FEATURES),)``, float 0/1."""
    return np.array([float(f(s)) for _, f in FEATURES])


class RecordingPolicyAgent(PolicyAgent):
    """The rule agent that records ``(features, macro)`` at every step: behaviour-cloning data."""

    def choose(self) -> str:
        macro = rule_macro(self.s)
        self.trace.append((features(self.s), macro))
        return macro


def sample_macro(proba: np.ndarray, temperature: float, rng: np.random.Generator) -> int:
    """Index drawn from ``proba ** (1 / T)`` renormalised; ``T = 0`` takes the argmax (lowest
    index among ties)."""
    if temperature <= 0:
        return int(np.argmax(proba))
    logits = np.log(np.clip(proba, 1e-300, None)) / temperature
    w = np.exp(logits - logits.max())
    return int(rng.choice(len(w), p=w / w.sum()))


def softmax_proba(W: np.ndarray, b: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Class probabilities ``softmax(W x + b)`` of a multinomial logistic model: ``W`` (classes, d),
    ``b`` (classes,), ``x`` (d,) -> (classes,). Equals scikit-learn's ``predict_proba``."""
    z = W @ x + b
    e = np.exp(z - z.max())
    return e / e.sum()


class BCPolicy(TrackerAgent):
    """A behaviour-cloned policy: a fitted multinomial logistic regression (``coef_``,
    ``intercept_``, ``classes_`` as in scikit-learn) applied to :func:`features` of the tracker,
    sampled at ``temperature`` (0: the most likely macro)."""

    def __init__(self, model: Any, temperature: float = 0.0) -> None:
        self.temperature = temperature
        self.W, self.b = np.asarray(model.coef_), np.asarray(model.intercept_)
        self.classes = list(model.classes_)
        if self.W.shape[0] != len(self.classes):
            raise ValueError("BCPolicy needs a multinomial model with one row of coef_ per class (3+ macros)")

    def choose(self) -> str:
        proba = softmax_proba(self.W, self.b, features(self.s))
        return self.classes[sample_macro(proba, self.temperature, self.rng)]


def fit_bc(X: np.ndarray, y: list[str], C: float = 1.0, seed: int = 0) -> Any:
    """Multinomial logistic regression (scikit-learn) from features ``X`` (n, d) to macros ``y``."""
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=C, max_iter=2000, random_state=seed).fit(X, y)
