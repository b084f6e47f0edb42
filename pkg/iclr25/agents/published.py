"""tau-bench's published results: the leaderboard numbers and a table derived from gpt-4o's airline
trajectories.

The official repository (``sierra-research/tau-bench``, MIT licence, copyright (c) 2024 Sierra)
ships ``historical_trajectories/gpt-4o-airline.json``: 50 airline test tasks x 4 trials of the
tool-calling gpt-4o agent, each with its reward and full conversation. This module turns that file
into a small table, one row per trial, and nothing else of it is kept::

    task, trial, reward, r_actions, r_outputs, end, agent_turns, writes, last_user,
    gold_writes, write_class, push_cue, agent_done

``end`` says how the episode ended: ``user_stop`` (the simulated user sent ``###STOP###``),
``transfer`` (the agent called ``transfer_to_human_agents``) or ``max_steps`` (the agent's 30
steps ran out). ``agent_turns`` counts the agent's messages, ``writes`` its calls of tools that
change the database, ``last_user`` is the user's final message when it stopped (at most 100
characters, ``###STOP###`` removed). ``gold_writes`` counts the write calls among the task's gold
actions, ``write_class`` compares the agent's successful write calls with them (see
:func:`write_class`), and ``push_cue`` is 1 when the user's hidden instruction tells it to insist or
push (words such as "insist", "persuade", "do not accept"), the tasks where a user may talk the agent
into a change the policy forbids. ``agent_done`` is 1 when one of the agent's messages
reports a completed change ("successfully", "has been cancelled", ...).

Twenty randomly drawn failed trials that the user ended were also read and labelled, twice (the
second reading without the first label) and the disagreements settled; those labels are the second committed
file, ``data/tau_bench_stop_labels.csv`` (see :data:`STOP_LABELS`). A seeded sample of 30 failed and
30 successful trials, labelled the same way, is the third (:data:`READ_LABELS`). The fourth,
``data/tau_bench_blind_labels.csv``, is a reward-blind reading of all 200 trials in one shuffled stream with one
label set, its disagreements with the reward settled with the gold (:func:`load_blind_labels`,
:func:`blind_transcript`). The fifth, ``data/tau_bench_adjudication.csv``, is an independent blind adjudication of
the trials where that reading and the reward disagree, mixed with decoys (:func:`load_adjudication`).

Regenerate the committed table with (the path is a clone or bare mirror of the repository)::

    python -m iclr25.agents.published --repo /path/to/tau-bench [--out FILE]
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import re
import subprocess
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import Any

#: The commit of sierra-research/tau-bench the table is derived from.
SOURCE_COMMIT = "59a200c6d575d595120f1cb70fea53cef0632f6b"
#: The trajectory file inside that commit.
SOURCE_PATH = "historical_trajectories/gpt-4o-airline.json"
#: The committed table (package data) and the licence notice that travels with it.
TABLE_FILE = "data/tau_bench_gpt4o_airline.csv"
LICENSE_FILE = "data/LICENSE-tau-bench.txt"
#: Airline tools that change the database.
AIRLINE_WRITE_TOOLS = frozenset({"book_reservation", "cancel_reservation", "send_certificate",
                                 "update_reservation_baggages", "update_reservation_flights",
                                 "update_reservation_passengers"})
COLUMNS = ("task", "trial", "reward", "r_actions", "r_outputs", "end", "agent_turns", "writes",
           "last_user", "gold_writes", "write_class", "push_cue", "agent_done")
#: Reader labels of stopped failures (task, trial, label, note), written by a language-model reader.
LABELS_FILE = "data/tau_bench_stop_labels.csv"
#: What the labels mean: why a failed trial ended with the user's ###STOP###.
STOP_LABELS = {
    "believes_success": "the user leaves as if its request was handled (the agent made changes it accepted)",
    "gave_up": "the user knowingly leaves without the change (nothing done, will come back or go elsewhere)",
    "asked_violation": "the user pushed for a change the policy forbids, and the agent made it",
    "user_error": "the user simulator broke its instruction (stopped too early, changed the goal)",
}
#: Words in an agent message that report a completed change.
DONE_WORDS = re.compile(r"successfully|has been (cancel|updat|book|upgrad|chang|process|issu|add)"
                        r"|have been (cancel|updat|book|upgrad|chang|process|issu|add)|is now (book|confirm)", re.I)
#: Words in a hidden instruction that tell the user to push for what it wants.
PUSH_WORDS = re.compile(r"insist|persist|persuade|convince|push|argue|demand|(do not|don't) accept", re.I)

#: The repository's leaderboard (README, tool-calling agents, 4 trials): pass^1..4.
LEADERBOARD = {
    ("airline", "gpt-4o"): (0.420, 0.273, 0.220, 0.200),
    ("airline", "claude-3-5-sonnet-20241022"): (0.460, 0.326, 0.263, 0.225),
    ("airline", "claude-3-5-sonnet-20240620"): (0.360, 0.224, 0.169, 0.139),
    ("airline", "gpt-4o-mini"): (0.225, 0.140, 0.110, 0.100),
    ("retail", "gpt-4o"): (0.604, 0.491, 0.430, 0.383),
    ("retail", "claude-3-5-sonnet-20241022"): (0.692, 0.576, 0.509, 0.462),
    ("retail", "claude-3-5-sonnet-20240620"): (0.626, 0.506, 0.435, 0.387),
}
#: The README's rows that are "??" (mistral-large-2407 in both domains, gpt-4o-mini in retail) are left out.
#: Test-set sizes of the two domains.
N_TASKS = {"airline": 50, "retail": 115}
#: The README leaderboard's prompting baselines (gpt-4o, airline, 4 trials): pass^1..4 (README.md,
#: "Leaderboard"); their retail rows are "??". They were added in commit 5ac82a0 (2024-09-05, "Add rerun
#: gpt metrics") together with the tool-calling gpt-4o row of :data:`TC_CONTEMPORARY`; commit 888a1e8
#: (2024-10-07, "Update gpt4o results") later replaced only that tool-calling row by the one in
#: :data:`LEADERBOARD` (the run whose trajectories are released), and Act/ReAct were not re-run.
PROMPTING = {
    ("airline", "Act"): (0.365, 0.217, 0.160, 0.140),
    ("airline", "ReAct"): (0.325, 0.233, 0.185, 0.160),
}
#: The tool-calling gpt-4o airline row published with :data:`PROMPTING` (README @ 5ac82a0 .. 888a1e8^).
TC_CONTEMPORARY = {("airline", "gpt-4o"): (0.380, 0.237, 0.185, 0.160)}

#: Airline tasks that the later tau2/tau3-bench revision corrected, by tau-bench test index (0..49).
#: Source: sierra-research/tau2-bench @ a2c024725189 (CHANGELOG.md last changed in fc0055dc4e0a),
#: "Airline task fixes", which names the tasks by
#: tau2's own ids; tau2 reorders the 50 tasks, so each id was matched to a tau-bench index by the user
#: id in the instruction and the gold actions of tau2's first commit of ``tasks.json`` (37199f3), where
#: several are still identical to tau-bench's ``tasks_test.py``. Keys: tau2 id -> tau-bench index.
TAU2_WRONG_GOLD = {2: 46, 7: 34, 9: 27, 27: 16, 37: 26, 38: 45, 44: 33}
"""The CHANGELOG's "incorrect expected actions": the gold actions themselves were wrong."""
TAU2_OTHER_FIXES = {5: 37, 12: 14, 15: 6, 16: 7, 18: 2, 19: 1, 21: 3, 25: 11, 30: 20, 36: 48, 39: 28,
                    14: 8, 34: 24, 42: 30, 13: 13, 29: 19, 32: 22, 45: 35, 43: 31, 23: 9, 33: 23, 35: 25}
"""The other fixes (ambiguous instructions, impossible constraints, policy loopholes, data); tau2 15
and 16 are tau-bench 6 and 7 in some order, which does not matter for a set."""
WRONG_GOLD_TASKS = frozenset(TAU2_WRONG_GOLD.values())
REVISED_TASKS = WRONG_GOLD_TASKS | frozenset(TAU2_OTHER_FIXES.values())

HEADER = f"""\
# Derived from sierra-research/tau-bench @ {SOURCE_COMMIT[:12]}, {SOURCE_PATH}
# (gpt-4o tool-calling agent, airline domain, 50 tasks x 4 trials). Copyright (c) 2024 Sierra,
# MIT licence: see LICENSE-tau-bench.txt beside this file. Made by iclr25.agents.published.
"""


def _end(traj: list[dict[str, Any]]) -> str:
    last = traj[-1]
    if last["role"] == "user" and "###STOP###" in (last.get("content") or ""):
        return "user_stop"
    if any(m["role"] == "tool" and m.get("name") == "transfer_to_human_agents" for m in traj):
        return "transfer"
    return "max_steps"


def _flag(info: dict[str, Any] | None, key: str) -> str:
    """``"1"``/``"0"`` from the trial's reward info, ``""`` where it does not say."""
    if not info or key not in info:
        return ""
    return str(int(float(info[key])))


def _agent_writes(traj: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """The agent's write calls that the environment executed (tool reply not an error), with arguments."""
    args = {}
    for m in traj:
        for tc in (m.get("tool_calls") or []) if m["role"] == "assistant" else []:
            if "id" in tc and "function" in tc:
                args[tc["id"]] = json.loads(tc["function"].get("arguments") or "{}")
    return [(m["name"], args.get(m.get("tool_call_id"), {})) for m in traj
            if m["role"] == "tool" and m.get("name") in AIRLINE_WRITE_TOOLS
            and not (m.get("content") or "").startswith("Error")]


def write_class(agent: list[tuple[str, dict]], gold: list[tuple[str, dict]]) -> str:
    """How the agent's executed writes differ from the gold writes (multisets of name + arguments).

    ``same`` (identical), ``no_write`` (the agent changed nothing, gold changes something),
    ``partial`` (a strict part of the gold writes, nothing else), ``wrong_args`` (only tools the
    gold also calls, with other arguments), ``extra_write`` (a tool the gold does not call: a wrong
    decision, or a change the policy forbids), ``none`` (neither writes).
    """
    key = lambda n, k: n + json.dumps(k, sort_keys=True)  # noqa: E731
    ca, cg = Counter(key(*a) for a in agent), Counter(key(*g) for g in gold)
    if ca == cg:
        return "same" if gold else "none"
    if not agent:
        return "no_write"
    if not ca - cg:
        return "partial"
    if {n for n, _ in agent} <= {n for n, _ in gold}:
        return "wrong_args"
    return "extra_write"


def derive_rows(trajectories: list[dict[str, Any]]) -> list[dict[str, str]]:
    """One row per trial (sorted by task, then trial) from the parsed trajectory file."""
    rows = []
    for r in trajectories:
        traj = r["traj"]
        end = _end(traj)
        info = (r["info"].get("reward_info") or {}).get("info")
        task = r["info"].get("task") or {}
        said = [m.get("content") or "" for m in traj if m["role"] == "assistant" and m.get("content")]
        gold = [(a["name"], a.get("kwargs") or {}) for a in task.get("actions") or []
                if a["name"] in AIRLINE_WRITE_TOOLS]
        last_user = ""
        if end == "user_stop":
            text = traj[-1]["content"].replace("###STOP###", " ")
            last_user = " ".join(text.split())[:100]
        rows.append(dict(
            task=str(r["task_id"]), trial=str(r["trial"]), reward=str(int(r["reward"])),
            r_actions=_flag(info, "r_actions"), r_outputs=_flag(info, "r_outputs"), end=end,
            agent_turns=str(sum(m["role"] == "assistant" for m in traj)),
            writes=str(sum(m["role"] == "tool" and m.get("name") in AIRLINE_WRITE_TOOLS
                           for m in traj)),
            last_user=last_user,
            gold_writes=str(len(gold)),
            write_class=write_class(_agent_writes(traj), gold),
            push_cue=str(int(bool(PUSH_WORDS.search(task.get("instruction") or "")))),
            agent_done=str(int(any(DONE_WORDS.search(m) for m in said)))))
    return sorted(rows, key=lambda row: (int(row["task"]), int(row["trial"])))


def read_source(repo: str | Path, commit: str = SOURCE_COMMIT) -> list[dict[str, Any]]:
    """The trajectory file of ``commit`` from a clone or bare mirror of the repository (via git)."""
    repo = Path(repo)
    git_dir = repo / ".git" if (repo / ".git").exists() else repo
    out = subprocess.run(["git", f"--git-dir={git_dir}", "show", f"{commit}:{SOURCE_PATH}"],
                         check=True, capture_output=True)
    return json.loads(out.stdout)


def to_csv(rows: list[dict[str, str]]) -> str:
    """The table as CSV text, with the attribution header."""
    buf = io.StringIO()
    buf.write(HEADER)
    w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def table_text() -> str:
    """The committed CSV, as text."""
    return resources.files("iclr25.agents").joinpath(TABLE_FILE).read_text(encoding="utf-8")


def load_airline_table() -> list[dict[str, Any]]:
    """The committed table, typed: ints for counts and flags (``None`` where empty)."""
    lines = [ln for ln in table_text().splitlines() if not ln.startswith("#")]
    out = []
    for row in csv.DictReader(lines):
        typed: dict[str, Any] = dict(row)
        for key in ("task", "trial", "reward", "agent_turns", "writes", "gold_writes", "push_cue", "agent_done"):
            typed[key] = int(row[key])
        for key in ("r_actions", "r_outputs"):
            typed[key] = int(row[key]) if row[key] != "" else None
        out.append(typed)
    return out


def cue_label(row: dict[str, Any]) -> str:
    """An automatic label of a failed trial the user ended, from the table's columns alone.

    ``gave_up`` when the agent executed no write although the gold writes something (the user leaves
    knowing nothing changed); ``asked_violation`` when the agent wrote although the gold writes
    nothing, or the user's instruction tells it to push; ``believes_success`` otherwise (the agent
    made changes the user accepted, or answered and was thanked). ``user_error`` needs a reader.
    """
    if row["write_class"] == "no_write":
        return "gave_up"
    if row["write_class"] not in ("none", "same") and (row["gold_writes"] == 0 or row["push_cue"] == 1):
        return "asked_violation"
    return "believes_success"


def load_stop_labels() -> list[dict[str, Any]]:
    """The labels of 20 random failed trials that the user ended (task, trial, label, note, label_first,
    label_second): ``label`` is final, the other two are the two readings it settles."""
    text = resources.files("iclr25.agents").joinpath(LABELS_FILE).read_text(encoding="utf-8")
    rows = list(csv.DictReader([ln for ln in text.splitlines() if not ln.startswith("#")]))
    return [{**r, "task": int(r["task"]), "trial": int(r["trial"])} for r in rows]


READ_LABELS_FILE = "data/tau_bench_read_labels.csv"
#: The reader's categories of a failed trial (the paper's three kinds first) and of a successful one.
READ_LABELS = {
    "wrong_args": "wrong arguments or information in a write (paper: wrong arguments / wrong info)",
    "wrong_decision": "a write the policy forbids, a wrong action, or refusing a legitimate request (paper)",
    "partial": "part of a compound request left undone (paper: partial resolution)",
    "user_error": "the simulated user broke its instruction",
    "gold_error": "the gold actions, not the agent, are at odds with the instruction or policy",
    "ok": "the agent handled the conversation correctly",
    "spurious": "a success the reader judges mishandled (the check passed anyway)",
}
PAPER_KINDS = ("wrong_args", "wrong_decision", "partial")
READ_SEED, READ_N = 2026, 30


def read_sample(rows: list[dict[str, Any]], seed: int = READ_SEED, n: int = READ_N) -> list[tuple[int, int]]:
    """The (task, trial) pairs the reader labelled: ``n`` failed trials, then ``n`` successful ones,
    each drawn without replacement by ``numpy.random.default_rng(seed)`` from the table order."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out = []
    for want in (0, 1):
        pool = [(r["task"], r["trial"]) for r in rows if r["reward"] == want]
        out += [pool[i] for i in sorted(rng.choice(len(pool), n, replace=False))]
    return out


def cohen_kappa(a: list[str], b: list[str]) -> float:
    """Cohen's kappa of two label sequences: (p_o - p_e) / (1 - p_e), with p_e from the marginals."""
    n = len(a)
    p_o = sum(x == y for x, y in zip(a, b)) / n
    ca, cb = Counter(a), Counter(b)
    p_e = sum(ca[k] * cb[k] for k in set(a) | set(b)) / n**2
    return (p_o - p_e) / (1 - p_e) if p_e < 1 else 1.0


def reader_ok(label: str) -> int:
    """The reader's verdict that a label implies: 1 when the agent handled the conversation correctly."""
    return int(label in ("gold_error", "user_error", "ok"))


def load_read_labels() -> list[dict[str, Any]]:
    """The reader's labels of the sampled trials (task, trial, reward, label, reader_ok, note,
    label_first, label_second): ``label`` is final, the other two are the two readings it settles."""
    text = resources.files("iclr25.agents").joinpath(READ_LABELS_FILE).read_text(encoding="utf-8")
    rows = list(csv.DictReader([ln for ln in text.splitlines() if not ln.startswith("#")]))
    return [{**r, "task": int(r["task"]), "trial": int(r["trial"]), "reward": int(r["reward"]),
             "reader_ok": int(r["reader_ok"])} for r in rows]


#: The reward-blind reading of all 200 trials (one shuffled stream, one label set; see the file's header).
BLIND_LABELS_FILE = "data/tau_bench_blind_labels.csv"
#: Its label set: the paper's three failure kinds, the simulated user's error, and a correct handling.
BLIND_SET = ("ok", "wrong_args", "wrong_decision", "partial", "user_error")


def load_blind_labels() -> list[dict[str, Any]]:
    """The reward-blind reading (order, task, trial, label_blind, label, note), in table order: ``label_blind`` is
    the reader's label from the conversation alone, ``label`` the gold-informed settlement where the reader's
    verdict and the reward disagree (elsewhere equal to ``label_blind``). ``order`` is the trial's place in the
    shuffled reading stream."""
    text = resources.files("iclr25.agents").joinpath(BLIND_LABELS_FILE).read_text(encoding="utf-8")
    rows = list(csv.DictReader([ln for ln in text.splitlines() if not ln.startswith("#")]))
    return [{**r, "task": int(r["task"]), "trial": int(r["trial"]), "order": int(r["order"])} for r in rows]


#: The independent blind adjudication of the reward-vs-reader disputes (plus decoys; see the file's header).
ADJUDICATION_FILE = "data/tau_bench_adjudication.csv"


#: The seed and the number of decoys of the adjudication stream.
ADJUDICATION_SEED, ADJUDICATION_DECOYS = 2031, 13


def adjudication_sample(seed: int = ADJUDICATION_SEED, decoys: int = ADJUDICATION_DECOYS) -> list[tuple[int, int]]:
    """The (task, trial) of each packet of the adjudication stream, in packet order: every trial where the reward and
    the verdict of ``label_blind`` disagree, plus ``decoys`` drawn from the agreements, shuffled together."""
    import numpy as np

    reward = {(r["task"], r["trial"]): int(r["reward"]) for r in load_airline_table()}
    blind = {(r["task"], r["trial"]): reader_ok(r["label_blind"]) for r in load_blind_labels()}
    keys = sorted(blind)
    dis = [k for k in keys if blind[k] != reward[k]]
    agree = [k for k in keys if blind[k] == reward[k]]
    rng = np.random.default_rng(seed)
    chosen = dis + [agree[i] for i in sorted(rng.choice(len(agree), decoys, replace=False))]
    return [chosen[int(i)] for i in rng.permutation(len(chosen))]


#: The seed and the per-stratum size of the stratified sample of the agreements adjudicated after the disputes.
AGREEMENT_SEED, AGREEMENT_PER_STRATUM = 2032, 30


def agreement_sample(seed: int = AGREEMENT_SEED, per_stratum: int = AGREEMENT_PER_STRATUM
                     ) -> list[tuple[int, int, int, float]]:
    """A stratified random sample of the agreements (reward = the verdict of ``label_blind``) that the first
    adjudication stream did not draw as decoys: ``per_stratum`` trials drawn without replacement from the agreements
    the reward passes and as many from those it fails, shuffled together. Returns (task, trial, stratum, weight) in
    packet order; stratum = the reward (1 pass, 0 fail), weight = stratum size / sample size (the number of
    not-yet-adjudicated agreements each sampled trial stands for)."""
    import numpy as np

    reward = {(r["task"], r["trial"]): int(r["reward"]) for r in load_airline_table()}
    blind = {(r["task"], r["trial"]): reader_ok(r["label_blind"]) for r in load_blind_labels()}
    done = set(adjudication_sample())
    rng = np.random.default_rng(seed)
    chosen = []
    for s in (1, 0):
        pool = [k for k in sorted(blind) if blind[k] == reward[k] == s and k not in done]
        w = len(pool) / min(per_stratum, len(pool))
        chosen += [(*pool[int(i)], s, w) for i in sorted(rng.choice(len(pool), min(per_stratum, len(pool)), replace=False))]
    return [chosen[int(i)] for i in rng.permutation(len(chosen))]


def load_adjudication() -> list[dict[str, Any]]:
    """The blind adjudication (task, trial, packet, label, no_trace, contaminated, reason), in table order: every trial
    where the reward and the reader's ``label_blind`` verdict disagree, and decoys where they agree, each read from the
    task's instruction and the conversation alone by a fresh reader (:mod:`scripts/tau_bench_adjudication_packets`)."""
    text = resources.files("iclr25.agents").joinpath(ADJUDICATION_FILE).read_text(encoding="utf-8")
    rows = list(csv.DictReader([ln for ln in text.splitlines() if not ln.startswith("#")]))
    return [{**r, "task": int(r["task"]), "trial": int(r["trial"]), "packet": int(r["packet"]),
             "no_trace": int(r["no_trace"]), "contaminated": int(r["contaminated"])} for r in rows]


#: The blind adjudication of the stratified sample of agreements (see the file's header).
AGREEMENTS_FILE = "data/tau_bench_adjudication_agreements.csv"
#: The second, independent blind adjudicator's labels of every adjudicated packet, if it finished.
SECOND_FILE = "data/tau_bench_adjudication_second.csv"


def _read_rows(name: str) -> list[dict[str, str]]:
    path = resources.files("iclr25.agents").joinpath(name)
    if not path.is_file():
        return []
    text = path.read_text(encoding="utf-8")
    return list(csv.DictReader([ln for ln in text.splitlines() if not ln.startswith("#")]))


def load_agreement_adjudication() -> list[dict[str, Any]]:
    """The blind labels of the stratified agreement sample (task, trial, packet, stratum, weight, label, no_trace,
    reason), in table order; ``weight`` is the number of not-yet-adjudicated agreements of its stratum (the reward's
    pass / fail) each sampled trial stands for."""
    return [{**r, "task": int(r["task"]), "trial": int(r["trial"]), "packet": int(r["packet"]),
             "stratum": int(r["stratum"]), "weight": float(r["weight"]), "no_trace": int(r["no_trace"])}
            for r in _read_rows(AGREEMENTS_FILE)]


def load_second_adjudication() -> list[dict[str, Any]]:
    """The second adjudicator's verdicts (task, trial, strict, lenient as 0/1, reason), or [] if there are none."""
    return [{**r, "task": int(r["task"]), "trial": int(r["trial"]), "strict": int(r["strict"]),
             "lenient": int(r["lenient"])} for r in _read_rows(SECOND_FILE)]


def handled(label: str, no_trace: int, mode: str) -> int:
    """The verdict of an adjudication label: 1 when the trial is handled under ``mode`` ("strict": the label is ok or
    user_error; "lenient": also a failure that left the database where the task needs it, ``no_trace`` = 1)."""
    if mode not in ("strict", "lenient"):
        raise ValueError(f"mode must be 'strict' or 'lenient', got {mode!r}")
    return int(reader_ok(label) or (mode == "lenient" and int(no_trace) == 1))


def ci95(draws) -> tuple[float, float]:
    """The 95 % percentile interval (2.5th and 97.5th percentiles) of bootstrap ``draws``."""
    import numpy as np

    return tuple(float(x) for x in np.percentile(draws, [2.5, 97.5]))


def score_judges(truth, judges: dict[str, Any], groups, n_boot: int, seed: int, weights=None,
                 reference: str = "database reward") -> dict[str, tuple[float, float, float]]:
    """Each judge's weighted accuracy against ``truth`` and the reference judge's lead over it.

    ``judges`` maps a name to a boolean verdict per trial (it must contain ``reference``); ``weights`` (default 1)
    are sampling weights (the trials of a stratum a labelled trial stands for). Returns, per judge other than the
    reference, (judge accuracy, lower, upper) where (lower, upper) is the 95 % interval of reference accuracy minus
    judge accuracy with whole tasks (``groups``) resampled, each judge on its own stream ``seed + i``; and for the
    reference itself (accuracy, lower, upper) of its own accuracy."""
    import numpy as np

    truth = np.asarray(truth, bool)
    w = np.ones(len(truth)) if weights is None else np.asarray(weights, float)
    right = {nm: (np.asarray(v, bool) == truth).astype(float) for nm, v in judges.items()}
    acc = {nm: float((r * w).sum() / w.sum()) for nm, r in right.items()}
    out = {reference: (acc[reference], *ci95(cluster_bootstrap(right[reference] * w, w, groups, n_boot,
                                                                   np.random.default_rng(seed))))}
    for i, nm in enumerate(n for n in judges if n != reference):
        b = cluster_bootstrap((right[reference] - right[nm]) * w, w, groups, n_boot, np.random.default_rng(seed + 1 + i))
        out[nm] = (acc[nm], *ci95(b))
    return out


def blind_transcript(traj: list[dict[str, Any]], msg: int = 380, reply: int = 480, search: int = 220) -> str:
    """A trial condensed the way the gold-blind reading saw it: the user's and agent's messages, the agent's tool
    calls with arguments and the tool replies (cut to ``msg`` / ``reply`` / ``search`` characters); no system
    prompt, instruction, gold, write diff or reward."""
    def cut(x: Any, n: int) -> str:
        x = " ".join(str(x).split())
        return x if len(x) <= n else x[:n] + "..."

    lines = []
    for m in traj:
        if m["role"] == "user":
            lines.append("U: " + cut(m.get("content") or "", 600))
        elif m["role"] == "assistant":
            if m.get("content"):
                lines.append("A: " + cut(m["content"], msg))
            lines += [f"A> {tc['function']['name']}({cut(tc['function'].get('arguments') or '', 400)})"
                      for tc in m.get("tool_calls") or []]
        elif m["role"] == "tool":
            c = m.get("content") or ""
            try:
                c = json.dumps(json.loads(c), separators=(",", ":"))
            except ValueError:
                pass
            lines.append(f"T[{m.get('name')}]: " + cut(c, search if str(m.get("name")).startswith("search") else reply))
    return "\n".join(lines)


def cluster_bootstrap(num, den, groups, n_boot: int, rng):
    """Replicates of sum(num) / sum(den) when whole groups (tasks) are resampled with replacement: the trials
    of one task stay together, so their correlation widens the interval as it should."""
    import numpy as np

    num, den, groups = np.asarray(num, float), np.asarray(den, float), np.asarray(groups)
    keys = np.unique(groups)
    pos = np.searchsorted(keys, groups)
    gn = np.bincount(pos, weights=num, minlength=len(keys))
    gd = np.bincount(pos, weights=den, minlength=len(keys))
    draw = rng.integers(0, len(keys), size=(n_boot, len(keys)))
    return gn[draw].sum(1) / np.maximum(gd[draw].sum(1), 1e-12)


def cross_fit_rule(rules: dict[str, Any], rows: list[dict[str, Any]], target, groups, n_folds: int = 5,
                   deal: int | None = None, hits: dict[str, Any] | None = None, weights=None):
    """Out-of-fold predictions of the best rule: the groups (tasks) are dealt into ``n_folds`` folds (in sorted
    order, or in the order of ``numpy.random.default_rng(deal).permutation`` when ``deal`` is given); for each
    fold the rule that agrees most often with ``target`` on the other folds predicts it (agreements counted with
    ``weights``, by default 1 each). ``hits`` may hold the rules' verdicts on ``rows`` already computed. Returns
    (predictions, the rule chosen for each fold)."""
    import numpy as np

    target, groups = np.asarray(target, bool), np.asarray(groups)
    keys = np.unique(groups)
    place = np.arange(len(keys)) if deal is None else np.random.default_rng(deal).permutation(len(keys))
    fold = place[np.searchsorted(keys, groups)] % n_folds
    if hits is None:
        hits = {name: np.array([bool(f(r)) for r in rows]) for name, f in rules.items()}
    names = list(hits)
    H = np.array([hits[nm] for nm in names])
    w = np.ones(len(target)) if weights is None else np.asarray(weights, float)
    pred, chosen = np.zeros(len(target), bool), []
    for k in range(n_folds):
        tr = fold != k
        best = names[int(np.argmax(((H == target) & tr) @ w))]   # first in order on ties
        pred[~tr] = hits[best][~tr]
        chosen.append(best)
    return pred, chosen


# --- judges that read only the conversation ---------------------------------------------------

def judge_literals() -> dict[str, Any]:
    """Yes/no facts a judge can read off a table row's conversation (no gold, no reward), by name."""
    out: dict[str, Any] = {f"end = {e}": (lambda r, e=e: r["end"] == e) for e in ("user_stop", "transfer", "max_steps")}
    out["agent reported a change"] = lambda r: r["agent_done"] == 1
    out["user's last words thank"] = lambda r: "thank" in r["last_user"].lower()
    out["agent wrote"] = lambda r: r["writes"] > 0
    for t in (1, 2, 3):
        out[f"writes <= {t}"] = lambda r, t=t: r["writes"] <= t
    for t in (8, 12, 16, 20):
        out[f"agent turns <= {t}"] = lambda r, t=t: r["agent_turns"] <= t
    return out


def two_condition_rules(lits: dict[str, Any]) -> dict[str, Any]:
    """Every literal, its negation, and every conjunction of two of those (n + n + C(2n, 2) rules)."""
    rules = dict(lits)
    rules |= {f"not ({name})": (lambda r, f=f: not f(r)) for name, f in lits.items()}
    base = list(rules.items())
    rules |= {f"{a} and {b}": (lambda r, f=f, g=g: f(r) and g(r))
              for i, (a, f) in enumerate(base) for b, g in base[i + 1:]}
    return rules


def label_verdict(intervals: dict[str, tuple[float, float]]) -> bool | None:
    """From (lower, upper) intervals of reward-minus-judge agreement, one per judge: False when some
    judge beats the reward beyond noise, True when the reward beats every judge, else None."""
    from iclr25.common.stats import three_way

    vs = [three_way(lo, hi, 0.0) for lo, hi in intervals.values()]
    if any(v is False for v in vs):
        return False
    return True if all(vs) else None


def nearest_histogram(pass_hat, n_tasks: int):
    """The integer histogram of ``n_tasks`` tasks over 0..n successes that reproduces pass^1..n to 3
    decimals, or else the largest-remainder rounding of the real inverse transform. Returns
    ``(histogram, exact)``."""
    import numpy as np

    from iclr25.agents.passk import histogram_from_pass_hat, integer_histograms

    hs = integer_histograms(np.array(pass_hat), n_tasks)
    if hs:
        return hs[0], True
    x = np.clip(histogram_from_pass_hat(np.array(pass_hat), n_tasks), 0, None)
    x = x * n_tasks / x.sum()
    h = np.floor(x).astype(int)
    h[np.argsort(h - x)[: n_tasks - h.sum()]] += 1
    return h, False


def main(argv: list[str] | None = None) -> None:
    """Write the derived table from a local copy of the repository."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repo", required=True, help="clone or bare mirror of sierra-research/tau-bench")
    p.add_argument("--out", default=str(Path(__file__).parent / TABLE_FILE))
    args = p.parse_args(argv)
    text = to_csv(derive_rows(read_source(args.repo)))
    Path(args.out).write_text(text, encoding="utf-8")
    print(f"wrote {args.out} ({len(text)} bytes)")


if __name__ == "__main__":
    main()
