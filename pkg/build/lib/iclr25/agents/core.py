"""The types every part of the agents package shares: actions, tasks, and the canonical form and
hash of a database state (the heart of tau-bench's reward)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

#: The name of the action that sends a message to the user instead of calling a tool.
RESPOND = "respond"


@dataclass(frozen=True)
class Action:
    """One agent step: a tool call ``name(**kwargs)``, or ``respond`` with ``kwargs["content"]``
    (a message to the user; scripted agents add a structured ``kwargs["act"]``)."""

    name: str
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Task:
    """A task: the user it concerns, their hidden goal, and how success is judged.

    ``intent``: what the user wants (``cancel``, ``modify_items``, ``return``, ``exchange``,
    ``modify_address``, ``info``, or the policy trap ``other_user``); ``goal``: the structured
    hidden goal the scripted user plays; ``instruction``: the same goal in words (what an LLM user
    would be prompted with); ``actions``: the gold database-changing tool calls; ``outputs``:
    strings one of the agent's messages must contain.
    """

    user_id: str
    intent: str
    goal: dict[str, Any]
    instruction: str
    actions: tuple[Action, ...]
    outputs: tuple[str, ...] = ()


def to_hashable(obj: Any) -> Any:
    """A canonical, hashable form of a JSON-like value: dicts become tuples of key-sorted pairs,
    lists become tuples, sets become sorted tuples (so dict insertion order never matters, list
    order does)."""
    if isinstance(obj, dict):
        return tuple((k, to_hashable(v)) for k, v in sorted(obj.items()))
    if isinstance(obj, list | tuple):
        return tuple(to_hashable(v) for v in obj)
    if isinstance(obj, set | frozenset):
        return tuple(sorted(to_hashable(v) for v in obj))
    return obj


def db_hash(data: dict[str, Any]) -> str:
    """SHA-256 of the canonical form of a whole database (tau-bench's state hash)."""
    return hashlib.sha256(str(to_hashable(data)).encode("utf-8")).hexdigest()


def changes(data: dict[str, dict[str, Any]], base: dict[str, dict[str, Any]]) -> dict[tuple[str, str], Any]:
    """The records of ``data`` whose value differs from ``base``'s, as ``{(table, key): canonical
    value}`` (a deleted record maps to ``None``).

    ``data`` must be an episode copy of ``base`` (:func:`iclr25.agents.retail.fresh_copy`):
    records an episode never wrote are the base's own objects and are skipped without a look, so
    this is cheap. Two episode copies of one base are equal as whole databases exactly when their
    ``changes`` are equal.
    """
    out: dict[tuple[str, str], Any] = {}
    for table, records in data.items():
        base_records = base[table]
        for key, rec in records.items():
            if key not in base_records:
                out[table, key] = to_hashable(rec)
            elif rec is not base_records[key]:
                value = to_hashable(rec)
                if value != to_hashable(base_records[key]):
                    out[table, key] = value
        for key in base_records.keys() - records.keys():
            out[table, key] = None
    return out
