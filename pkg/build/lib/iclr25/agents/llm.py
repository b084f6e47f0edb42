"""Plugging a real LLM into the environment: a tool-calling agent and an LLM user, both written
against a ``complete`` callable so that no client library is imported here.

``complete(messages, tools)`` takes OpenAI-style chat messages (and tool schemas, or ``None``)
and returns the assistant message as a dict: ``{"role": "assistant", "content": ...,
"tool_calls": [{"id", "function": {"name", "arguments"}}]}``. With the ``openai`` client, for
example::

    client = openai.OpenAI()
    def complete(messages, tools):
        kw = {"tools": tools} if tools else {}
        msg = client.chat.completions.create(model="gpt-4o", messages=messages, temperature=0, **kw)
        return msg.choices[0].message.model_dump()

The agent follows tau-bench's tool-calling loop: the system message is the policy, the first user
message the user's opening; only the first tool call of a reply is executed; a tool's output comes
back as a ``tool`` message, a user's reply as a ``user`` message. The scripted user of
:mod:`iclr25.agents.user` understands dialogue acts, not free text, so an LLM agent talks to
:class:`LLMUser` (``ToolEnv(..., user_factory=llm_users(complete))``). Nothing here runs in the
book's tests with a real model; the unit tests drive it with a fake ``complete``.
"""

from __future__ import annotations

import json
from typing import Any, Callable

import numpy as np

from .core import RESPOND, Action, Task
from .retail import Data
from .user import STOP

Complete = Callable[[list[dict[str, Any]], list[dict[str, Any]] | None], dict[str, Any]]


def message_to_action(message: dict[str, Any]) -> Action:
    """The first tool call of an assistant message as an :class:`Action`, else ``respond`` with
    its text."""
    calls = message.get("tool_calls") or []
    if calls and calls[0].get("function"):
        fn = calls[0]["function"]
        args = fn.get("arguments") or "{}"
        return Action(fn["name"], json.loads(args) if isinstance(args, str) else dict(args))
    return Action(RESPOND, {"content": message.get("content") or ""})


class LLMAgent:
    """A tool-calling LLM agent with the interface :func:`~iclr25.agents.env.run_episode` drives."""

    def __init__(self, complete: Complete, wiki: str, tools_info: list[dict[str, Any]]) -> None:
        self.complete, self.wiki, self.tools_info = complete, wiki, tools_info

    def reset(self, observation: str, info: dict[str, Any], rng: np.random.Generator) -> None:
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": self.wiki},
                                               {"role": "user", "content": observation}]

    def act(self) -> Action:
        self.pending = dict(self.complete(self.messages, self.tools_info))
        return message_to_action(self.pending)

    def observe(self, action: Action, observation: str, info: dict[str, Any]) -> None:
        msg = self.pending
        if action.name == RESPOND:
            self.messages += [{**msg, "tool_calls": None} if msg.get("tool_calls") else msg,
                              {"role": "user", "content": observation}]
        else:
            call = msg["tool_calls"][0]
            self.messages += [{**msg, "tool_calls": [call]},
                              {"role": "tool", "tool_call_id": call.get("id", "call_0"),
                               "name": action.name, "content": observation}]


USER_RULES = """You play a customer talking to a customer-service agent.
Your goal: {instruction}
Rules: write one short message at a time, as the customer. Give only the information the agent
needs for the current step. Never invent ids or facts your goal does not contain; if asked for
something you do not know, say so. When your goal is met, or the agent cannot help, reply with
{stop} alone."""


class LLMUser:
    """A user simulated by an LLM prompted with the task's instruction (same interface as
    :class:`~iclr25.agents.user.ScriptedUser`; its acts carry no structure)."""

    def __init__(self, task: Task, complete: Complete) -> None:
        self.complete = complete
        self.messages = [{"role": "system", "content": USER_RULES.format(instruction=task.instruction,
                                                                         stop=STOP)}]

    def _reply(self) -> tuple[str, dict[str, Any]]:
        text = self.complete(self.messages, None).get("content") or ""
        self.messages.append({"role": "assistant", "content": text})
        return text, {"type": "stop" if STOP in text else "text"}

    def reset(self) -> tuple[str, dict[str, Any]]:
        self.messages.append({"role": "user", "content": "Hi! How can I help you today?"})
        return self._reply()

    def step(self, content: str, act: dict[str, Any] | None) -> tuple[str, dict[str, Any]]:
        self.messages.append({"role": "user", "content": content})
        return self._reply()


def llm_users(complete: Complete) -> Callable[[Task, Data, np.random.Generator], LLMUser]:
    """A user factory for :class:`~iclr25.agents.env.ToolEnv` that makes :class:`LLMUser`."""
    return lambda task, db, rng: LLMUser(task, complete)
