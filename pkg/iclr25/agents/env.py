"""The tool-agent-user environment and its reward, with tau-bench's interface.

``env.reset(task_index)`` starts a conversation: a fresh copy of the database, a new user playing
the task; it returns the user's first message. ``env.step(action)`` either sends ``respond``'s
content to the user (the episode ends when the user writes ``###STOP###``) or calls a tool on
the episode's database (a terminal tool such as ``transfer_to_human_agents`` ends it). When the
episode ends the reward is computed the way tau-bench computes it:

1. replay the task's gold actions on a fresh copy of the database;
2. ``r_actions = 1`` iff the agent's final database equals the gold one (whole-database equality:
   here compared through the records that changed, :func:`iclr25.agents.core.changes`);
3. ``r_outputs = 1`` iff every required output string occurs (lower-cased, commas removed) in
   some message the agent sent; the reward is ``r_actions * r_outputs``.

Read-only calls never matter, nor does the path the conversation took; a missing write, or an
extra or wrong write that succeeds, does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import numpy as np

from .core import RESPOND, Action, Task, changes
from .retail import POLICY, TOOLS, Data, Tool, fresh_copy
from .tasks import replay
from .user import STOP, ScriptedUser

UserFactory = Callable[[Task, Data, np.random.Generator], Any]


def scripted_users(p_split: float = 0.3, p_forget: float = 0.3, random_auth: bool = True,
                   q: float = 0.0) -> UserFactory:
    """A factory of :class:`~iclr25.agents.user.ScriptedUser` with these behaviour rates (``q``: the
    chance that the user says "yes" to a wrong proposal)."""
    def make(task: Task, db: Data, rng: np.random.Generator) -> ScriptedUser:
        return ScriptedUser(task, db, rng, p_split=p_split, p_forget=p_forget, random_auth=random_auth, q=q)
    return make


def outputs_found(outputs: tuple[str, ...], replies: list[str]) -> bool:
    """tau-bench's output check: every output, lower-cased, is a substring of some reply
    (lower-cased, commas removed)."""
    texts = [r.lower().replace(",", "") for r in replies]
    return all(any(o.lower() in t for t in texts) for o in outputs)


class ToolEnv:
    """A tool-agent-user environment over a database ``db`` and its ``tasks``.

    ``tools`` maps names to :class:`~iclr25.agents.retail.Tool`; ``wiki`` is the policy text the
    agent reads; ``user_factory(task, db, rng)`` makes the user for an episode.
    """

    def __init__(self, db: Data, tasks: list[Task], *, tools: dict[str, Tool] = TOOLS,
                 wiki: str = POLICY, user_factory: UserFactory | None = None) -> None:
        self.db, self.tasks, self.tools, self.wiki = db, tasks, tools, wiki
        self.user_factory = user_factory or scripted_users()
        self._gold: dict[int, dict] = {}
        self.data: Data = fresh_copy(db)
        self.task: Task | None = None
        self.actions: list[Action] = []

    @property
    def tools_info(self) -> list[dict[str, Any]]:
        """The tools as OpenAI-style function schemas (what an LLM agent is given)."""
        return [t.schema() for t in self.tools.values()]

    def gold_changes(self, task_index: int) -> dict:
        """The records the task's gold actions change (cached per task)."""
        if task_index not in self._gold:
            data, _ = replay(self.db, self.tasks[task_index].actions)
            self._gold[task_index] = changes(data, self.db)
        return self._gold[task_index]

    def reset(self, task_index: int, seed: int | np.random.SeedSequence | None = None
              ) -> tuple[str, dict[str, Any]]:
        """Start task ``task_index`` with a user seeded by ``seed``: ``(first user message, info)``;
        ``info["act"]`` is the user's dialogue act."""
        self.task_index, self.task = task_index, self.tasks[task_index]
        self.data = fresh_copy(self.db)
        self.actions = []
        self.user = self.user_factory(self.task, self.db, np.random.default_rng(seed))
        text, act = self.user.reset()
        return text, {"source": "user", "act": act, "task": self.task}

    def step(self, action: Action) -> tuple[str, float, bool, dict[str, Any]]:
        """One agent action: ``(observation, reward, done, info)``; the reward is 0 until done."""
        self.actions.append(action)
        info: dict[str, Any] = {"source": action.name}
        done = False
        if action.name == RESPOND:
            obs, act = self.user.step(action.kwargs.get("content", ""), action.kwargs.get("act"))
            info.update(source="user", act=act)
            done = STOP in obs
        elif action.name in self.tools:
            try:
                obs = self.tools[action.name].fn(self.data, **action.kwargs)
            except Exception as err:  # noqa: BLE001 - a bad call is the agent's error, reported to it
                obs = f"Error: {err}"
            done = self.tools[action.name].terminal
        else:
            obs = f"Unknown action {action.name}"
        reward = 0.0
        if done:
            info["reward_info"] = self.calculate_reward()
            reward = info["reward_info"]["reward"]
        return obs, reward, done, info

    def calculate_reward(self) -> dict[str, float]:
        """``{"reward", "r_actions", "r_outputs"}`` of the episode so far (see the module doc)."""
        r_actions = float(changes(self.data, self.db) == self.gold_changes(self.task_index))
        replies = [a.kwargs.get("content", "") for a in self.actions if a.name == RESPOND]
        r_outputs = float(outputs_found(self.task.outputs, replies))
        return {"reward": r_actions * r_outputs, "r_actions": r_actions, "r_outputs": r_outputs}


def evaluate_actions(db: Data, task: Task, actions: list[Action]) -> dict[str, float]:
    """The reward of an action list replayed without a user: the tool calls run on a fresh copy of
    ``db``, ``respond`` contents count as the agent's replies."""
    data = fresh_copy(db)
    for a in actions:
        if a.name != RESPOND:
            try:
                TOOLS[a.name].fn(data, **a.kwargs)
            except Exception:  # noqa: BLE001 - as in an episode, a failing call changes nothing
                pass
    gold, _ = replay(db, task.actions)
    r_actions = float(changes(data, db) == changes(gold, db))
    r_outputs = float(outputs_found(task.outputs, [a.kwargs.get("content", "")
                                                   for a in actions if a.name == RESPOND]))
    return {"reward": r_actions * r_outputs, "r_actions": r_actions, "r_outputs": r_outputs}


class Agent(Protocol):
    """What :func:`run_episode` drives: ``reset`` with the first user message, then ``act`` and
    ``observe`` in turn (any LLM agent can be wrapped this way, see :mod:`iclr25.agents.llm`)."""

    def reset(self, observation: str, info: dict[str, Any], rng: np.random.Generator) -> None: ...

    def act(self) -> Action: ...

    def observe(self, action: Action, observation: str, info: dict[str, Any]) -> None: ...


@dataclass
class Episode:
    """One trial: reward parts, how it ended (``user_stop``, ``transfer``, ``max_steps``), the
    agent's actions, the transcript as ``(speaker, text)`` pairs, and what the user did and
    believed (its ``summary()``, if it has one; taken when the episode ends)."""

    reward: float
    r_actions: float
    r_outputs: float
    end: str
    actions: list[Action] = field(default_factory=list)
    transcript: list[tuple[str, str]] = field(default_factory=list)
    user_info: dict[str, Any] = field(default_factory=dict)


def run_episode(env: ToolEnv, agent: Agent, task_index: int, seed: int | tuple[int, ...] = 0,
                max_steps: int = 30, record: bool = False) -> Episode:
    """Run one conversation of at most ``max_steps`` agent actions (tau-bench's loop). The user's
    and the agent's random streams both derive from ``seed`` and never share draws. An episode cut
    off by ``max_steps`` earns reward 0, as in tau-bench."""
    ss = np.random.SeedSequence(seed)
    user_ss, agent_ss = ss.spawn(2)
    obs, info = env.reset(task_index, user_ss)
    agent.reset(obs, info, np.random.default_rng(agent_ss))
    transcript = [("user", obs)] if record else []
    reward_info = None
    end = "max_steps"
    for _ in range(max_steps):
        action = agent.act()
        obs, _, done, info = env.step(action)
        if record:
            if action.name == RESPOND:
                transcript += [("agent", action.kwargs.get("content", "")), ("user", obs)]
            else:
                transcript += [("tool call", f"{action.name}({_args(action.kwargs)})"),
                               ("tool", obs if len(obs) < 160 else obs[:157] + "...")]
        agent.observe(action, obs, info)
        if done:
            reward_info = info["reward_info"]
            end = "user_stop" if action.name == RESPOND else "transfer"
            break
    r = reward_info or {"reward": 0.0, "r_actions": 0.0, "r_outputs": 0.0}
    user_info = env.user.summary() if hasattr(env.user, "summary") else {}
    return Episode(r["reward"], r["r_actions"], r["r_outputs"], end, list(env.actions), transcript, user_info)


def _args(kwargs: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in kwargs.items())


@dataclass
class Trials:
    """Results of :func:`run_trials`: ``rewards`` (tasks, trials), ``ends`` (how each episode
    ended, same layout) and ``extra`` (what ``collect`` returned per episode, or ``None``)."""

    rewards: np.ndarray
    ends: list[list[str]]
    extra: list[list[Any]] | None = None

    @property
    def counts(self) -> np.ndarray:
        """Per-task success counts, shape (tasks,)."""
        return (np.abs(self.rewards - 1.0) <= 1e-6).sum(axis=1)


def concat_trials(parts: list[Trials]) -> Trials:
    """The trials of several task sets (e.g. several databases) as one, tasks stacked in order."""
    extra = None if any(p.extra is None for p in parts) else [row for p in parts for row in p.extra]
    return Trials(np.vstack([p.rewards for p in parts]), [row for p in parts for row in p.ends], extra)


def run_trials(env: ToolEnv, make_agent: Callable[[], Agent], n_trials: int,
               seed: int | tuple[int, ...] = 0,
               tasks: list[int] | None = None, max_steps: int = 30,
               collect: Callable[[Agent, Episode], Any] | None = None) -> Trials:
    """Run every task (or those in ``tasks``) ``n_trials`` times with a fresh agent each time;
    trial ``j`` of task ``t`` uses the seed ``(seed, t, j)`` (``(*seed, t, j)`` for a tuple), so two
    agents meet the same users.
    ``collect(agent, episode)``, if given, is kept for every episode."""
    idx = list(range(len(env.tasks))) if tasks is None else list(tasks)
    base = tuple(seed) if isinstance(seed, tuple) else (seed,)
    rewards = np.zeros((len(idx), n_trials))
    ends: list[list[str]] = []
    extra: list[list[Any]] | None = [] if collect else None
    for row, t in enumerate(idx):
        ends.append([])
        if extra is not None:
            extra.append([])
        for j in range(n_trials):
            agent = make_agent()
            ep = run_episode(env, agent, t, seed=(*base, t, j), max_steps=max_steps)
            rewards[row, j] = ep.reward
            ends[-1].append(ep.end)
            if extra is not None:
                extra[-1].append(collect(agent, ep))
    return Trials(rewards, ends, extra)
