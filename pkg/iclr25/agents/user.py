"""A scripted, stochastic user simulator: a state machine that plays a task's hidden goal.

tau-bench's user is an LLM prompted with the task instruction; it reveals what is needed one step
at a time, never invents ids, and sends ``###STOP###`` when its goal is met. This simulator keeps
those rules with dialogue acts instead of free text: the agent's message carries an act
(``{"type": "ask_payment"}``, ``{"type": "propose", "action": ...}``, ...), the user answers with
an act rendered to a sentence. Its randomness is the kind that makes repeated trials differ:

* ``p_split``: a user with several items mentions only the first; the rest come when the agent asks
  "anything else?", or after the agent reports the first change done (too late: modify and exchange
  can be called once);
* ``p_forget``: the user does not remember the order id ("the one with my Backpack");
* ``random_auth``: the user gives either their email or their name and zip code.

It says "yes" to a proposed change when the change matches its goal for the items it has
revealed, and otherwise says "no" and restates its request (twice; the third time it gives up).
A *careless* user (``q > 0``) says "yes" to a wrong proposal with probability ``q``: it believes
the change is what it asked for and ends the conversation satisfied. With
``p_split = p_forget = q = 0`` and ``random_auth=False`` it is deterministic.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .core import Action, Task, to_hashable
from .retail import Data
from .tasks import MULTI_ITEM, SOURCE_WORDS, gold_actions

STOP = "###STOP###"
#: How many wrong proposals the user corrects before it gives up and ends the conversation.
PATIENCE = 2


def canonical_action(action: Action | dict[str, Any] | None) -> Any:
    """An action in a form where item lists are compared as multisets of (old, new) pairs, so that
    two calls that change the database the same way compare equal."""
    if action is None:
        return None
    name, kw = (action.name, action.kwargs) if isinstance(action, Action) else (action["name"], action["kwargs"])
    kw = dict(kw)
    if "item_ids" in kw:
        olds, news = list(kw.pop("item_ids")), kw.pop("new_item_ids", None)
        kw["pairs"] = sorted(zip(olds, news)) if news is not None else sorted(olds)
    return name, to_hashable(kw)


def _opts(options: dict[str, str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in options.items())


class ScriptedUser:
    """Plays ``task``'s goal against an agent, with its own random stream ``rng``."""

    def __init__(self, task: Task, db: Data, rng: np.random.Generator, *, p_split: float = 0.3,
                 p_forget: float = 0.3, random_auth: bool = True, q: float = 0.0) -> None:
        self.task, self.db, self.rng, self.q = task, db, rng, q
        self.goal = task.goal
        items = self.goal.get("items", [])
        self.split = task.intent in MULTI_ITEM and len(items) >= 2 and rng.random() < p_split
        self.forget = task.intent not in ("info", "other_user") and rng.random() < p_forget
        self.auth = self.goal["auth"][int(rng.integers(2)) if random_auth else 0]
        self.revealed = 1 if self.split else len(items)
        self.fell_back: set[int] = set()  # items whose first choice the agent reported sold out
        self.refusals = 0  # proposals rejected so far; after PATIENCE the user gives up
        self.accepted_wrong = 0  # wrong proposals the (careless) user said "yes" to
        self.satisfied: bool | None = None  # set when the user stops: does it believe it got its goal?
        self.done = False

    def summary(self) -> dict[str, Any]:
        """What the user did and believes in this episode (kept by :func:`~iclr25.agents.env.run_episode`)."""
        return {"forget": self.forget, "split": self.split, "accepted_wrong": self.accepted_wrong,
                "refusals": self.refusals, "satisfied": self.satisfied}

    # ---- what the user says ------------------------------------------------------------------

    def _items(self, lo: int = 0, hi: int | None = None) -> list[dict[str, Any]]:
        """The items ``lo..hi`` as the user states them now (its fallback where it gave one)."""
        hi = self.revealed if hi is None else hi
        return [{"product": it["product"],
                 "want": (it["want"][1] if i in self.fell_back else it["want"][0]) if it["want"] else None}
                for i, it in enumerate(self.goal.get("items", [])) if lo <= i < hi]

    def _request(self) -> dict[str, Any]:
        g = self.goal
        act: dict[str, Any] = {"type": "request", "intent": "cancel" if g["intent"] == "other_user" else g["intent"]}
        if g["intent"] == "info":
            act["product"] = g["product"]
            return act
        act["order_id"] = None if self.forget else g["order_id"]
        act["describe"] = g["describe"]
        if g["intent"] in MULTI_ITEM:
            act["items"] = self._items()
        return act

    def _render(self, act: dict[str, Any]) -> str:
        t = act["type"]
        pick = lambda *xs: xs[int(self.rng.integers(len(xs)))]  # noqa: E731
        if t == "request":
            if act["intent"] == "info":
                return f"Hi! What is the lowest price of a {act['product']} you have in stock?"
            where = (f"order {act['order_id']}" if act["order_id"]
                     else f"my order with the {act['describe']} (I don't have the order id)")
            verb = {"cancel": "cancel", "modify_address": "change the shipping address of",
                    "modify_items": "change some items in", "return": "return some items from",
                    "exchange": "exchange some items from"}[act["intent"]]
            text = pick("Hi, ", "Hello! ", "") + f"I'd like to {verb} {where}."
            for it in act.get("items", []):
                text += (f" The {it['product']}" + (f", I want it in {_opts(it['want'])}." if it["want"] else "."))
            return text
        if t == "auth":
            if "email" in act:
                return f"Sure, my email is {act['email']}."
            return f"I'm {act['first_name']} {act['last_name']}, zip code {act['zip']}."
        if t == "order_id":
            return f"It's {act['order_id']}."
        if t == "no_order_id":
            return f"I don't remember it. It's the order with my {self.goal['describe']}."
        if t == "more_items":
            lead = "Oh, and also" if act.get("late") else "Yes, also"
            return lead + "".join(f" the {it['product']}" + (f" in {_opts(it['want'])}" if it["want"] else "")
                                  + ";" for it in act["items"])
        if t == "no_more_items":
            return pick("No, that's everything.", "That's all.")
        if t == "payment":
            return f"Please use my {SOURCE_WORDS[act['source']]}."
        if t == "reason":
            return f"It's {act['reason']}."
        if t == "address":
            a = act["address"]
            return f"The new address is {a['address1']}, {a['address2']}, {a['city']}, {a['state']} {a['zip']}."
        if t == "fallback":
            return f"Then I'll take it in {_opts(act['options'])}."
        if t == "yes":
            return pick("Yes, please go ahead.", "Yes.", "Yes, that's right.")
        if t == "no":
            return "No, that's not what I asked for. " + self._render({**self._request(), "type": "request"})
        if t == "stop":
            if act.get("satisfied", True):
                return pick("Thank you, that's all!", "Great, thanks.", "Perfect, thank you.") + f" {STOP}"
            return pick("Okay, never mind then.", "Fine, forget it.", "Okay, thanks anyway.") + f" {STOP}"
        return self._render(self._request())

    def _say(self, act: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        if act["type"] == "stop":
            self.done = True
            self.satisfied = bool(act.get("satisfied", True))
        return self._render(act), act

    # ---- the dialogue ------------------------------------------------------------------------

    def reset(self) -> tuple[str, dict[str, Any]]:
        """The user's first message and its act."""
        return self._say(self._request())

    def expected_change(self) -> Action | None:
        """The change the user wants for the items revealed so far (``None``: no change)."""
        g = self.goal
        if g["intent"] == "info":
            return None
        if g["intent"] == "other_user":
            return Action("cancel_pending_order", {"order_id": g["order_id"], "reason": g["reason"]})
        sub = {**g, "items": g["items"][: self.revealed]} if "items" in g else g
        return gold_actions(sub, self.db)[0]

    def step(self, content: str, act: dict[str, Any] | None) -> tuple[str, dict[str, Any]]:
        """Answer the agent's message ``content`` (with its act, if any) with a message and an act."""
        g = self.goal
        t = (act or {}).get("type")
        if t == "ask_auth":
            return self._say({"type": "auth", **self.auth})
        if t == "ask_order_id":
            if g["intent"] == "info":
                return self._say({**self._request(), "type": "repeat"})
            if self.forget:
                return self._say({"type": "no_order_id"})
            return self._say({"type": "order_id", "order_id": g["order_id"]})
        if t == "ask_more_items" and g["intent"] in MULTI_ITEM:
            n = len(g["items"])
            if self.revealed < n:
                rest = self._items(self.revealed, n)
                self.revealed = n
                return self._say({"type": "more_items", "items": rest})
            return self._say({"type": "no_more_items"})
        if t == "ask_payment" and "payment" in g:
            return self._say({"type": "payment", "source": g["payment"]})
        if t == "ask_reason" and "reason" in g:
            return self._say({"type": "reason", "reason": g["reason"]})
        if t == "ask_address" and "address" in g:
            return self._say({"type": "address", "address": g["address"]})
        if t == "inform_unavailable":
            for i, it in enumerate(g.get("items", [])[: self.revealed]):
                if (it["product"] == act.get("product") and it["want"] and it["want"][1]
                        and it["want"][0] == act.get("options") and i not in self.fell_back):
                    self.fell_back.add(i)
                    return self._say({"type": "fallback", "product": it["product"],
                                      "instead_of": it["want"][0], "options": it["want"][1]})
            return self._say({"type": "stop", "satisfied": False})  # its choice is sold out: gives up
        if t == "propose":
            ok = canonical_action(act.get("action")) == canonical_action(self.expected_change())
            if not ok and self.q > 0 and self.rng.random() < self.q:  # careless: misses the error
                self.accepted_wrong += 1
                ok = True
            if ok:
                return self._say({"type": "yes"})
            self.refusals += 1
            if self.refusals > PATIENCE:
                return self._say({"type": "stop", "satisfied": False})
            details = {k: g[k] for k in ("payment", "reason", "address") if k in g}
            return self._say({**self._request(), **details, "type": "no"})
        if t == "done":
            n = len(g.get("items", []))
            if g["intent"] in MULTI_ITEM and self.revealed < n:
                rest = self._items(self.revealed, n)
                self.revealed = n
                return self._say({"type": "more_items", "items": rest, "late": True})
            return self._say({"type": "stop"})
        if t == "answer":
            return self._say({"type": "stop"})
        if t == "deny":
            return self._say({"type": "stop", "satisfied": False})
        return self._say({**self._request(), "type": "repeat"})
