"""A mini retail domain in the shape of tau-retail: a procedural database, the tools that read and
write it, and the policy the agent must follow.

Written from scratch after the benchmark's description (no data or code of tau-bench). The
database is a dict of three tables, each a dict of records keyed by id::

    users[user_id]   = {user_id, name: {first_name, last_name}, email, address, payment_methods, orders}
    products[pid]    = {product_id, name, variants: {item_id: {item_id, options, available, price}}}
    orders[order_id] = {order_id, user_id, address, items, status, payment_history}

A tool is a function ``tool(data, **kwargs) -> str`` returning JSON or ``"Error: ..."``. Writing
tools check every hard constraint first and only then change the records they touch, and they
change them **copy-on-write** (:func:`writable`): the record is replaced by a deep copy in the
episode's table, so the base database an episode started from is never modified and an episode's
changes are exactly the records that are no longer the base's objects (see
:mod:`iclr25.agents.env`).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

Data = dict[str, dict[str, Any]]

PRODUCT_TYPES: dict[str, dict[str, list[str]]] = {
    "T-Shirt": {"color": ["black", "blue", "red", "green", "white"], "size": ["S", "M", "L", "XL"]},
    "Water Bottle": {"capacity": ["500ml", "750ml", "1000ml"], "material": ["steel", "glass", "plastic"],
                     "color": ["black", "blue", "green"]},
    "Backpack": {"color": ["black", "grey", "navy", "green"], "size": ["small", "medium", "large"]},
    "Desk Lamp": {"color": ["black", "white", "silver"], "brightness": ["low", "medium", "high"]},
    "Running Shoes": {"size": ["7", "8", "9", "10", "11"], "color": ["black", "white", "red"]},
    "Headphones": {"type": ["in-ear", "on-ear", "over-ear"], "connectivity": ["wired", "wireless"],
                   "color": ["black", "white", "blue"]},
    "Jigsaw Puzzle": {"pieces": ["500", "1000", "1500", "2000"], "theme": ["animals", "art", "city"]},
    "Wall Clock": {"diameter": ["10 inches", "12 inches", "14 inches"], "style": ["modern", "rustic", "retro"]},
}
FIRST_NAMES = ["Ava", "Liam", "Mia", "Noah", "Emma", "Omar", "Yara", "Ivan", "Lena", "Raj", "Sofia",
               "Mateo", "Chloe", "Kenji", "Amara", "Lucas", "Nora", "Hugo", "Isla", "Ethan", "Zoe",
               "Arjun", "Maya", "Leo", "Fatima", "Daniel", "Aisha", "Felix", "Ines", "Yusuf"]
LAST_NAMES = ["Garcia", "Smith", "Kim", "Rossi", "Novak", "Patel", "Silva", "Khan", "Moreau", "Sato",
              "Brown", "Lopez", "Muller", "Ivanova", "Nguyen", "Hansen", "Cohen", "Okafor", "Ali",
              "Santos", "Wright", "Jensen", "Costa", "Dubois", "Gupta", "Lee", "Ahmed", "Fischer"]
CITIES = [("Austin", "TX"), ("Denver", "CO"), ("Seattle", "WA"), ("Boston", "MA"), ("Chicago", "IL"),
          ("Phoenix", "AZ"), ("Portland", "OR"), ("Atlanta", "GA"), ("Columbus", "OH"), ("Fresno", "CA")]
STREETS = ["Maple", "Oak", "Cedar", "Pine", "Elm", "Lake", "Hill", "River", "Park", "Sunset"]
ORDER_STATUSES = ("pending", "processed", "delivered", "cancelled")
CANCEL_REASONS = ("no longer needed", "ordered by mistake")
PAYMENT_SOURCES = ("credit_card", "paypal", "gift_card")


# ---- the database ------------------------------------------------------------------------------


def _digits(rng: np.random.Generator, n: int) -> str:
    return "".join(str(d) for d in rng.integers(0, 10, size=n))


def _address(rng: np.random.Generator) -> dict[str, str]:
    city, state = CITIES[rng.integers(len(CITIES))]
    return {"address1": f"{rng.integers(10, 999)} {STREETS[rng.integers(len(STREETS))]} Street",
            "address2": f"Suite {rng.integers(100, 999)}", "city": city, "country": "USA",
            "state": state, "zip": _digits(rng, 5)}


def _products(rng: np.random.Generator) -> dict[str, dict[str, Any]]:
    products, used = {}, set()
    for name, options in PRODUCT_TYPES.items():
        pid = _digits(rng, 10)
        grid = [dict(zip(options, combo)) for combo in _grid(list(options.values()))]
        n_var = int(rng.integers(6, min(12, len(grid)) + 1))
        chosen = rng.choice(len(grid), size=n_var, replace=False)
        base = float(rng.uniform(15, 250))
        variants = {}
        for g in sorted(chosen):
            item_id = _digits(rng, 10)
            while item_id in used:
                item_id = _digits(rng, 10)
            used.add(item_id)
            variants[item_id] = {"item_id": item_id, "options": grid[g],
                                 "available": bool(rng.random() < 0.7),
                                 "price": round(base * float(rng.uniform(0.85, 1.15)), 2)}
        products[pid] = {"product_id": pid, "name": name, "variants": variants}
    return products


def _grid(values: list[list[str]]) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = [()]
    for vals in values:
        out = [prev + (v,) for prev in out for v in vals]
    return out


def make_retail_db(seed: int, n_users: int = 60, orders_per_user: tuple[int, int] = (2, 4)) -> Data:
    """A procedural retail database: ``n_users`` users with 1-3 payment methods (at most one of
    each source; a gift card has a balance) and ``orders_per_user`` (inclusive range) orders of
    1-4 items over 8 product types with 6-12 variants each. Deterministic in ``seed``."""
    rng = np.random.default_rng(seed)
    products = _products(rng)
    pids = list(products)
    users, orders = {}, {}
    for _ in range(n_users):
        first, last = FIRST_NAMES[rng.integers(len(FIRST_NAMES))], LAST_NAMES[rng.integers(len(LAST_NAMES))]
        uid = f"{first.lower()}_{last.lower()}_{_digits(rng, 4)}"
        while uid in users:
            uid = f"{first.lower()}_{last.lower()}_{_digits(rng, 4)}"
        sources = ["credit_card" if rng.random() < 0.75 else "paypal"]
        if sources[0] == "credit_card" and rng.random() < 0.3:
            sources.append("paypal")
        if rng.random() < 0.6:
            sources.append("gift_card")
        pms = {}
        for src in sources:
            pm_id = f"{src}_{_digits(rng, 7)}"
            pm: dict[str, Any] = {"source": src, "id": pm_id}
            if src == "credit_card":
                pm["last_four"] = _digits(rng, 4)
            if src == "gift_card":
                pm["balance"] = round(float(rng.uniform(50, 400)), 2)
            pms[pm_id] = pm
        address = _address(rng)
        user = {"user_id": uid, "name": {"first_name": first, "last_name": last},
                "email": f"{first.lower()}.{last.lower()}{rng.integers(10, 99)}@example.com",
                "address": address, "payment_methods": pms, "orders": []}
        for _ in range(int(rng.integers(orders_per_user[0], orders_per_user[1] + 1))):
            oid = f"#W{_digits(rng, 7)}"
            while oid in orders:
                oid = f"#W{_digits(rng, 7)}"
            items = []
            for pi in rng.choice(len(pids), size=int(rng.integers(1, 5)), replace=True):
                variants = list(products[pids[pi]]["variants"].values())
                v = variants[rng.integers(len(variants))]
                items.append({"name": products[pids[pi]]["name"], "product_id": pids[pi],
                              "item_id": v["item_id"], "price": v["price"],
                              "options": dict(v["options"])})
            payer = [p for p in pms if not p.startswith("gift_card")][0]
            status = ORDER_STATUSES[rng.choice(4, p=[0.35, 0.1, 0.45, 0.1])]
            orders[oid] = {"order_id": oid, "user_id": uid, "address": dict(address), "items": items,
                           "status": status,
                           "payment_history": [{"transaction_type": "payment",
                                                "amount": round(sum(i["price"] for i in items), 2),
                                                "payment_method_id": payer}]}
            user["orders"].append(oid)
        users[uid] = user
    return {"users": users, "products": products, "orders": orders}


def fresh_copy(base: Data) -> Data:
    """An episode's database: new table dicts holding the base's record objects (cheap). Tools
    replace a record by a copy before changing it (:func:`writable`), so ``base`` stays intact."""
    return {table: dict(records) for table, records in base.items()}


def writable(data: Data, table: str, key: str) -> dict[str, Any]:
    """The record ``data[table][key]``, made safe to change: replaced in the episode's table by a
    deep copy, which is returned (copy-on-write; copying a record twice is harmless)."""
    rec = copy.deepcopy(data[table][key])
    data[table][key] = rec
    return rec


# ---- the tools ---------------------------------------------------------------------------------


def _dump(obj: Any) -> str:
    return json.dumps(obj)


def find_user_id_by_email(data: Data, email: str) -> str:
    """Find a user id by email."""
    for uid, u in data["users"].items():
        if u["email"].lower() == str(email).lower():
            return uid
    return "Error: user not found"


def find_user_id_by_name_zip(data: Data, first_name: str, last_name: str, zip: str) -> str:  # noqa: A002
    """Find a user id by first name, last name and zip code."""
    for uid, u in data["users"].items():
        if (u["name"]["first_name"].lower() == str(first_name).lower()
                and u["name"]["last_name"].lower() == str(last_name).lower()
                and u["address"]["zip"] == str(zip)):
            return uid
    return "Error: user not found"


def get_user_details(data: Data, user_id: str) -> str:
    """The user's profile: name, email, address, payment methods and order ids."""
    if user_id not in data["users"]:
        return "Error: user not found"
    return _dump(data["users"][user_id])


def get_order_details(data: Data, order_id: str) -> str:
    """An order: its user, address, items, status and payment history."""
    if order_id not in data["orders"]:
        return "Error: order not found"
    return _dump(data["orders"][order_id])


def get_product_details(data: Data, product_id: str) -> str:
    """A product type with all its variant items (options, availability, price)."""
    if product_id not in data["products"]:
        return "Error: product not found"
    return _dump(data["products"][product_id])


def list_all_product_types(data: Data) -> str:
    """Product names mapped to product ids."""
    return _dump(dict(sorted((p["name"], pid) for pid, p in data["products"].items())))


def _refund_gift_card(data: Data, user_id: str, pm_id: str, amount: float) -> None:
    user = writable(data, "users", user_id)
    pm = user["payment_methods"][pm_id]
    pm["balance"] = round(pm["balance"] + amount, 2)


def cancel_pending_order(data: Data, order_id: str, reason: str) -> str:
    """Cancel a pending order; refund every payment to its method (a gift card at once)."""
    if order_id not in data["orders"]:
        return "Error: order not found"
    if data["orders"][order_id]["status"] != "pending":
        return "Error: non-pending order cannot be cancelled"
    if reason not in CANCEL_REASONS:
        return "Error: invalid reason"
    order = writable(data, "orders", order_id)
    refunds = [{"transaction_type": "refund", "amount": p["amount"],
                "payment_method_id": p["payment_method_id"]} for p in order["payment_history"]]
    for r in refunds:
        if r["payment_method_id"].startswith("gift_card"):
            _refund_gift_card(data, order["user_id"], r["payment_method_id"], r["amount"])
    order["status"] = "cancelled"
    order["cancel_reason"] = reason
    order["payment_history"].extend(refunds)
    return _dump(order)


def modify_pending_order_address(data: Data, order_id: str, address1: str, address2: str, city: str,
                                 state: str, country: str, zip: str) -> str:  # noqa: A002
    """Change the shipping address of a pending order."""
    if order_id not in data["orders"]:
        return "Error: order not found"
    if data["orders"][order_id]["status"] != "pending":
        return "Error: non-pending order cannot be modified"
    order = writable(data, "orders", order_id)
    order["address"] = {"address1": address1, "address2": address2, "city": city,
                        "country": country, "state": state, "zip": zip}
    return _dump(order)


def modify_pending_order_payment(data: Data, order_id: str, payment_method_id: str) -> str:
    """Pay a pending order with another single payment method (a gift card must cover it)."""
    if order_id not in data["orders"]:
        return "Error: order not found"
    order0 = data["orders"][order_id]
    if order0["status"] != "pending":
        return "Error: non-pending order cannot be modified"
    pms = data["users"][order0["user_id"]]["payment_methods"]
    if payment_method_id not in pms:
        return "Error: payment method not found"
    history = order0["payment_history"]
    if len(history) > 1 or history[0]["transaction_type"] != "payment":
        return "Error: there should be exactly one payment for a pending order"
    if history[0]["payment_method_id"] == payment_method_id:
        return "Error: the new payment method should be different from the current one"
    amount = history[0]["amount"]
    if pms[payment_method_id]["source"] == "gift_card" and pms[payment_method_id]["balance"] < amount:
        return "Error: insufficient gift card balance to pay for the order"
    order = writable(data, "orders", order_id)
    order["payment_history"].extend([
        {"transaction_type": "payment", "amount": amount, "payment_method_id": payment_method_id},
        {"transaction_type": "refund", "amount": amount, "payment_method_id": history[0]["payment_method_id"]}])
    if pms[payment_method_id]["source"] == "gift_card":
        _refund_gift_card(data, order["user_id"], payment_method_id, -amount)
    if history[0]["payment_method_id"].startswith("gift_card"):
        _refund_gift_card(data, order["user_id"], history[0]["payment_method_id"], amount)
    return _dump(order)


def _check_swap(data: Data, order: dict[str, Any], item_ids: list[str],
                new_item_ids: list[str]) -> str | float:
    """Validate an item swap; return the price difference (new - old) or an error string."""
    have = [it["item_id"] for it in order["items"]]
    for iid in item_ids:
        if item_ids.count(iid) > have.count(iid):
            return f"Error: {iid} not found"
    if len(item_ids) != len(new_item_ids):
        return "Error: the number of items to be exchanged should match"
    diff = 0.0
    for iid, nid in zip(item_ids, new_item_ids):
        item = next(it for it in order["items"] if it["item_id"] == iid)
        variants = data["products"][item["product_id"]]["variants"]
        if nid not in variants or not variants[nid]["available"]:
            return f"Error: new item {nid} not found or available"
        diff += variants[nid]["price"] - item["price"]
    return round(diff, 2)


def _check_payer(data: Data, user_id: str, pm_id: str, amount: float) -> str | None:
    pms = data["users"][user_id]["payment_methods"]
    if pm_id not in pms:
        return "Error: payment method not found"
    if pms[pm_id]["source"] == "gift_card" and pms[pm_id]["balance"] < amount:
        return "Error: insufficient gift card balance to pay for the price difference"
    return None


def _priced_swap(data: Data, order_id: str, status: str, action: str, item_ids: list[str],
                 new_item_ids: list[str], payment_method_id: str) -> float | str:
    """The checks an item swap (modify or exchange) shares: the order exists and has ``status``,
    the swap is valid and the payer can cover it. Returns the price difference, or the error."""
    if order_id not in data["orders"]:
        return "Error: order not found"
    order0 = data["orders"][order_id]
    if order0["status"] != status:
        return f"Error: non-{status} order cannot be {action}"
    diff = _check_swap(data, order0, list(item_ids), list(new_item_ids))
    if isinstance(diff, str):
        return diff
    return _check_payer(data, order0["user_id"], payment_method_id, diff) or diff


def modify_pending_order_items(data: Data, order_id: str, item_ids: list[str], new_item_ids: list[str],
                               payment_method_id: str) -> str:
    """Swap items of a pending order for other available variants of the same products (once:
    the status becomes ``pending (item modified)``); the price difference is paid or refunded."""
    diff = _priced_swap(data, order_id, "pending", "modified", item_ids, new_item_ids, payment_method_id)
    if isinstance(diff, str):
        return diff
    order = writable(data, "orders", order_id)
    order["payment_history"].append({"transaction_type": "payment" if diff > 0 else "refund",
                                     "amount": abs(diff), "payment_method_id": payment_method_id})
    if payment_method_id.startswith("gift_card"):
        _refund_gift_card(data, order["user_id"], payment_method_id, -diff)
    for iid, nid in zip(item_ids, new_item_ids):
        item = next(it for it in order["items"] if it["item_id"] == iid)
        variant = data["products"][item["product_id"]]["variants"][nid]
        item.update(item_id=nid, price=variant["price"], options=dict(variant["options"]))
    order["status"] = "pending (item modified)"
    return _dump(order)


def return_delivered_order_items(data: Data, order_id: str, item_ids: list[str],
                                 payment_method_id: str) -> str:
    """Request the return of items of a delivered order; the refund goes to the original payment
    method or to a gift card. The status becomes ``return requested``."""
    if order_id not in data["orders"]:
        return "Error: order not found"
    order0 = data["orders"][order_id]
    if order0["status"] != "delivered":
        return "Error: non-delivered order cannot be returned"
    if payment_method_id not in data["users"][order0["user_id"]]["payment_methods"]:
        return "Error: payment method not found"
    if (not payment_method_id.startswith("gift_card")
            and payment_method_id != order0["payment_history"][0]["payment_method_id"]):
        return "Error: payment method should be either the original payment method or a gift card"
    have = [it["item_id"] for it in order0["items"]]
    if any(list(item_ids).count(i) > have.count(i) for i in item_ids):
        return "Error: some item not found"
    order = writable(data, "orders", order_id)
    order["status"] = "return requested"
    order["return_items"] = sorted(item_ids)
    order["return_payment_method_id"] = payment_method_id
    return _dump(order)


def exchange_delivered_order_items(data: Data, order_id: str, item_ids: list[str],
                                   new_item_ids: list[str], payment_method_id: str) -> str:
    """Request the exchange of items of a delivered order for other available variants of the same
    products (once: the status becomes ``exchange requested``)."""
    diff = _priced_swap(data, order_id, "delivered", "exchanged", item_ids, new_item_ids, payment_method_id)
    if isinstance(diff, str):
        return diff
    order = writable(data, "orders", order_id)
    order["status"] = "exchange requested"
    order["exchange_items"] = sorted(item_ids)
    order["exchange_new_items"] = sorted(new_item_ids)
    order["exchange_payment_method_id"] = payment_method_id
    order["exchange_price_difference"] = diff
    return _dump(order)


def modify_user_address(data: Data, user_id: str, address1: str, address2: str, city: str, state: str,
                        country: str, zip: str) -> str:  # noqa: A002
    """Change a user's default address."""
    if user_id not in data["users"]:
        return "Error: user not found"
    user = writable(data, "users", user_id)
    user["address"] = {"address1": address1, "address2": address2, "city": city,
                       "country": country, "state": state, "zip": zip}
    return _dump(user)


def think(data: Data, thought: str) -> str:
    """A scratchpad: changes nothing, returns nothing."""
    return ""


def transfer_to_human_agents(data: Data, summary: str) -> str:
    """Hand the conversation to a human agent (ends the episode)."""
    return "Transfer successful"


@dataclass(frozen=True)
class Tool:
    """A tool: the function, whether it writes, whether it ends the episode, its parameters
    (name -> JSON type) and its description."""

    fn: Callable[..., str]
    writes: bool
    params: dict[str, str]
    terminal: bool = False

    @property
    def name(self) -> str:
        return self.fn.__name__

    def schema(self) -> dict[str, Any]:
        """The OpenAI-style function schema an LLM agent is given (``env.tools_info``)."""
        props = {p: ({"type": "array", "items": {"type": "string"}} if t == "array" else {"type": t})
                 for p, t in self.params.items()}
        return {"type": "function", "function": {
            "name": self.name, "description": (self.fn.__doc__ or "").strip(),
            "parameters": {"type": "object", "properties": props, "required": list(self.params)}}}


_ADDRESS = {k: "string" for k in ("address1", "address2", "city", "state", "country", "zip")}
TOOLS: dict[str, Tool] = {t.name: t for t in [
    Tool(find_user_id_by_email, False, {"email": "string"}),
    Tool(find_user_id_by_name_zip, False, {"first_name": "string", "last_name": "string", "zip": "string"}),
    Tool(get_user_details, False, {"user_id": "string"}),
    Tool(get_order_details, False, {"order_id": "string"}),
    Tool(get_product_details, False, {"product_id": "string"}),
    Tool(list_all_product_types, False, {}),
    Tool(cancel_pending_order, True, {"order_id": "string", "reason": "string"}),
    Tool(modify_pending_order_address, True, {"order_id": "string", **_ADDRESS}),
    Tool(modify_pending_order_payment, True, {"order_id": "string", "payment_method_id": "string"}),
    Tool(modify_pending_order_items, True, {"order_id": "string", "item_ids": "array",
                                            "new_item_ids": "array", "payment_method_id": "string"}),
    Tool(return_delivered_order_items, True, {"order_id": "string", "item_ids": "array",
                                              "payment_method_id": "string"}),
    Tool(exchange_delivered_order_items, True, {"order_id": "string", "item_ids": "array",
                                                "new_item_ids": "array", "payment_method_id": "string"}),
    Tool(modify_user_address, True, {"user_id": "string", **_ADDRESS}),
    Tool(think, False, {"thought": "string"}),
    Tool(transfer_to_human_agents, False, {"summary": "string"}, terminal=True),
]}
WRITE_TOOLS = frozenset(name for name, t in TOOLS.items() if t.writes)

POLICY = """\
# Retail agent policy (mini domain)

You help users cancel or modify pending orders, return or exchange delivered orders, change
their default address, and answer questions about their orders and our products.

- Authenticate the user first: find their user id by email, or by name and zip code, even if
  they tell you their user id.
- Help one user per conversation; deny any request about another user's orders.
- Before any action that changes the database (cancel, modify, return, exchange), list the
  details and obtain an explicit "yes" from the user.
- Make at most one tool call at a time, and never call a tool and reply to the user in the same
  turn. Do not make up information the user or the tools did not give you.
- Modify-items and exchange can be called only once per order: ask the user whether they have
  listed every item before you call them.
- A pending order can be cancelled (reason "no longer needed" or "ordered by mistake"), get a
  new address, payment method, or item options (an available variant of the same product).
- A delivered order can be returned (refund to the original payment method or a gift card) or
  exchanged for available variants of the same products (the user pays or receives the price
  difference with a payment method of their choice; a gift card must cover it).
- Transfer to a human agent only if the request cannot be handled with your tools.
"""
