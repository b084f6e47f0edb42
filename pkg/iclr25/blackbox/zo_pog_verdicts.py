"""How ``theory/zo-pog`` reads its paper rows from the committed records (pure functions, no runs).

A **study view** (:func:`view`) holds one budget's per-seed runs of the 128-dev shared-template
study, the template alone and the random-prompt draws of each seed; :func:`analyse` adds what the
rows need: competence against the template alone, the random-search bar of every policy learner at
its own number of dev evaluations, interior optima, headroom, ZO-PoG's paired gains (95% and
family-wise) and, where measured, the **room** above each arm (the white-box ceiling minus the arm).

Each row has **its own gate** (:data:`ROWS`, :func:`row_reasons`), one competence rule for every
arm: the arms it compares must beat the template alone by more than :data:`REF_MARGIN` points (95%
CI) and be tuned inside their grids. Beyond competence, a row whose claim is about ZO-PoG's words
needs **those words** to work, read on ZO-PoG itself:

* ``"discrete"`` (the Gumbel row): ZO-PoG at its own cell with eta_z = 0 (:data:`FZ`: the same
  queries, policy steps and dev evaluations, z frozen at 0) must beat the best on dev of as many
  random prompts as it makes distinct dev evaluations (95% CI above 0); where that arm is not run
  (the 4000-query study), the no-continuous ablation stands in and the reason names it;
* ``"words"`` (beats BBT, removing the discrete part): the same, and where the white-box comparison is
  measured, ZO-PoG's tokens must beat BBT's tokens once z is fitted with exact gradients (95% CI of the
  paired difference above 0): otherwise the words do not matter once z is fitted and the row cannot
  say whether choosing them helps;
* ``"continuous"`` (removing the continuous part): z must add to ZO-PoG's own words: ZO-PoG minus
  :data:`FZ` above 0 (95% CI) where measured, else ZO-only beats the template alone;
* ``"baseline"`` (beats BDPL): no gate beyond competence.

A row whose other arm learns tokens alone (the no-continuous ablation, BDPL) and does not beat its
own random-search bar is decided and carries that as a **caveat** (:func:`caveat`): the gain is then
what z adds to such tokens. A gated row is decided by the three-way rule on its family-wise interval
(holds above 0; fails when the gain cannot reach :data:`MIN_GAIN`). **Headroom** is read against the
white-box reference where it is measured (:func:`room_reason`): the 95% CI of the reference minus the
row's other arm must lie above :data:`MIN_GAIN` (where no reference is measured: best mean below
97%). A failure to show a gain (the interval reaches above 0 but not :data:`MIN_GAIN`) needs that room
to read NO, else the row is undecided; a **significant loss** (the whole interval below 0) reads NO
whatever the room (:func:`row_verdict`). The no-room reason is printed first among a row's reasons.

**k**, a learner's number of dev evaluations (:func:`distinct_evals`), counts distinct evaluations:
a run that ends exactly at the end of a pass re-scores its last prompt once more, and that repeat is
not counted.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from iclr25.blackbox.zo_pog_budget2 import best_of_k   # the one copy (the records' code fingerprint covers it)
from iclr25.common.stats import mean_interval, three_way

REF_MARGIN = 2.0                 # competence: points above the template alone (95% CI)
MIN_GAIN = 1.0                   # a row fails when its gain cannot reach this many points
N_ROWS = 6
FW = 1 - 0.05 / N_ROWS           # family-wise (Bonferroni) level of each shared-template row
NG = "ZO-PoG no Gumbel"
NC = "ZO-PoG no continuous"
BDPL_OFF = "BDPL official"
FZ = "ZO-PoG eta_z = 0"                      # ZO-PoG at its own cell with z frozen at 0: its own words alone
ARMS = ("ZO-PoG", NC, "ZO-only", "BDPL", "BBT", NG)
TOKEN_ONLY = (NC, "BDPL", BDPL_OFF, FZ)      # z = 0, like the random prompts: the bar is a check
POLICY = ("ZO-PoG", NC, "BDPL", NG, BDPL_OFF, FZ)
DRAW_ARMS = ("ZO-PoG", NC, FZ)               # deployed by the paper's Gumbel draw; their mode is kept apart
N_SAMPLES, STEPS_PER_PASS = 20, 2            # queries of one policy step (I); 32 training examples in minibatches of 16
Z_POLICY = ("ZO-PoG", NG, FZ)                # a policy step and a ZO step: 2 I queries per step


@dataclass(frozen=True)
class Row:
    """A paper row: its claim, the arm ZO-PoG is compared with, and the mechanism it names."""

    claim: str
    paper: str
    arm: str
    mechanism: str | None


PAPER_SAYS = "ZO-PoG beats BBT, BDPL, SSPT, manual prompt in nearly all settings"
ABLATION_SAYS = "removing either part hurts, on all backbones"
ROWS = (
    Row("ZO-PoG beats BBT at equal queries (shared template)", PAPER_SAYS, "BBT", "words"),
    Row("ZO-PoG beats BDPL at equal queries (shared template)", PAPER_SAYS, "BDPL", "baseline"),
    Row("ZO-PoG beats the manual prompt (shared template: the template alone)", PAPER_SAYS, "Manual", None),
    Row("removing the discrete part hurts (shared template)", ABLATION_SAYS, "ZO-only", "words"),
    Row("removing the continuous part hurts (shared template)", ABLATION_SAYS, NC, "continuous"),
    Row("Gumbel-softmax policy beats plain categorical (shared template)", "Gumbel-softmax sampling helps (ablation)",
        NG, "discrete"),
)


def paired(a, b, level: float = 0.95) -> tuple[float, float, float]:
    """Mean of the paired differences a - b and its two-sided ``level`` t-interval."""
    return mean_interval(np.asarray(a, float) - np.asarray(b, float), level)


def view(q: int, seeds, runs: dict, chosen: dict, grids: dict, alone: dict, draws: dict,
         ceiling: dict | None = None, arm_of: dict | None = None, words: dict | None = None) -> dict:
    """One budget of the study: ``runs[arm][str(seed)]`` summaries, chosen cells, grids (axis values),
    the template alone and the random draws per seed, and optionally each seed's ceiling (a subset of
    seeds may have one). ``arm_of`` maps a row's arm to the arm that stands for it at this budget
    (e.g. ``{"BDPL": "BDPL official"}``). ``words`` maps a seed to the white-box test accuracy on ZO-PoG's
    tokens minus that on BBT's tokens (points), where measured. ``runs`` may hold :data:`FZ` (not tuned:
    ZO-PoG's cell with eta_z = 0)."""
    return dict(q=q, seeds=list(seeds), runs=runs, chosen=chosen, grids=grids, alone=alone, draws=draws,
                ceiling=ceiling or {}, arm_of=arm_of or {}, words=words or {})


def distinct_evals(n_dev_evals: int, budget: int, queries_per_step: int, steps_per_pass: int = STEPS_PER_PASS) -> int:
    """Distinct dev evaluations of a run that recorded ``n_dev_evals``: a run whose budget ends exactly at the
    end of a pass has already scored its last prompt, and re-scores it once more at the end; that repeat is
    not a new evaluation."""
    return n_dev_evals - (budget % (queries_per_step * steps_per_pass) == 0)


def queries_per_step(m: str) -> int:
    """Queries of one step of policy learner ``m``: I, and 2 I when it also takes a ZO step on z."""
    return 2 * N_SAMPLES if m in Z_POLICY else N_SAMPLES


def vacc(v: dict, m: str, key: str = "acc") -> np.ndarray:
    """(seeds,) test accuracy (%) of arm ``m``: its own rule (``acc``), or ``mode``. Only the arms
    deployed by the draw keep a separate mode, and for them it must be in the record; for every other
    arm the own rule *is* the mode (or fixed tokens), so ``mode`` reads ``acc``."""
    if m == "Manual":
        return np.array([v["alone"][str(s)] for s in v["seeds"]], float)
    k = "acc" if key == "mode" and m not in DRAW_ARMS else key
    return np.array([v["runs"][m][str(s)][k] for s in v["seeds"]], float)


def late_gain(v: dict, m: str) -> float:
    """Mean gain of arm ``m``'s best-dev test accuracy from half the budget to the full budget."""
    q = v["q"]
    return float(np.mean([v["runs"][m][str(s)]["at"][str(q)] - v["runs"][m][str(s)]["at"][str(q // 2)]
                          for s in v["seeds"]]))


def analyse(v: dict) -> dict:
    """What the rows need, as a new dict (``v`` is not changed)."""
    out = dict(v)
    arms = [m for m in (*ARMS, BDPL_OFF) if m in v["runs"]]
    pol = [m for m in POLICY if m in v["runs"]]
    alone = vacc(v, "Manual")
    out["arms"] = arms
    out["k"] = {m: distinct_evals(int(np.median(vacc(v, m, "n_dev_evals"))), v["q"], queries_per_step(m)) for m in pol}
    out["rand"] = {m: np.array([best_of_k(v["draws"][str(s)], out["k"][m]) for s in v["seeds"]]) for m in pol}
    out["rand_gain"] = {m: paired(vacc(v, m), out["rand"][m]) for m in pol}
    out["learns"] = {m: out["rand_gain"][m][1] > 0 for m in TOKEN_ONLY if m in v["runs"]}
    out["over_alone"] = {m: paired(vacc(v, m), alone) for m in arms}
    out["best_mean"] = max(vacc(v, m).mean() for m in arms)
    out["interior"] = {m: all(0 < list(ax).index(x) < len(ax) - 1 for x, ax in zip(v["chosen"][m], v["grids"][m]))
                       for m in arms}
    out["late"] = {m: late_gain(v, m) for m in [*arms, *([FZ] if FZ in v["runs"] else [])]
                   if "at" in v["runs"][m][str(v["seeds"][0])]}
    others = [*[m for m in arms if m != "ZO-PoG"], "Manual"]
    zp, zp_mode = vacc(v, "ZO-PoG"), vacc(v, "ZO-PoG", "mode")
    out["words_arm"] = FZ if FZ in v["runs"] else NC
    if FZ in v["runs"]:
        out["only_z"] = paired(zp, vacc(v, FZ))
    if v["words"]:
        out["wb_words"] = mean_interval(np.array([v["words"][str(s)] for s in v["seeds"] if str(s) in v["words"]]))
    out["gain"] = {m: paired(zp, vacc(v, m), FW) for m in others}
    out["gain_mode"] = {m: paired(zp_mode, vacc(v, m, "mode"), FW) for m in others}
    out["gain95"] = {m: paired(zp, vacc(v, m)) for m in others}
    cs = [s for s in v["seeds"] if str(s) in v["ceiling"]]
    if cs:
        idx = [v["seeds"].index(s) for s in cs]
        ceil = np.array([v["ceiling"][str(s)] for s in cs], float)
        out["ceiling_seeds"] = cs
        out["room"] = {m: paired(ceil, vacc(v, m)[idx]) for m in [*arms, "Manual"]}
    return out


def ci(g) -> str:
    """``+m.m [+l.l, +h.h]``."""
    return f"{g[0]:+.1f} [{g[1]:+.1f}, {g[2]:+.1f}]"


def ci_side(lo: float, hi: float) -> str:
    """Where an interval of a paired difference lies: above 0, below 0 or contains 0."""
    return "above 0" if lo > 0 else "below 0" if hi < 0 else "contains 0"


def discrete_reason(a: dict) -> str:
    """What is measured when ZO-PoG's words (or the no-continuous stand-in) fail their bar."""
    m = a["words_arm"]
    k, g = a["k"][m], a["rand_gain"][m]
    late = a["late"].get(m)
    tail = "" if late is None else (f"; that arm {'is still gaining' if late > 0.5 else 'gains'} {late:+.1f} points from "
                                    f"{a['q'] // 2} to {a['q']} queries")
    who = ("ZO-PoG's own words (ZO-PoG with eta_z = 0) are" if m == FZ
           else "the discrete block run alone (no-continuous) is")
    return f"{who} not detectably better than the best on dev of {k} random prompts at {a['q']} queries ({ci(g)}){tail}"


def room_reason(a: dict, row: Row) -> str | None:
    """The instance-level headroom reason of ``row`` (None when there is room): against the white-box
    reference where it is measured (reference minus the row's other arm, 95% CI, not above
    :data:`MIN_GAIN`), else the best mean at or above 97%."""
    arm = a["arm_of"].get(row.arm, row.arm)
    if "room" in a:
        r = a["room"][arm]
        if r[1] <= MIN_GAIN:
            return (f"no measured room for a gain of {MIN_GAIN:g} point above {arm}: the white-box reference minus "
                    f"{arm} is {ci(r)} (95% CI, {len(a['ceiling_seeds'])} seeds)")
        return None
    if a["best_mean"] >= 97.0:
        return "no headroom (best mean >= 97%; no white-box reference at this budget)"
    return None


def gate_reasons(a: dict, row: Row) -> list[str]:
    """The gates of ``row`` that fail in the analysed view ``a``: competence, interior optima and the
    mechanism the row names (see the module docstring); headroom is :func:`room_reason`."""
    arm = a["arm_of"].get(row.arm, row.arm)
    why = []
    for d in dict.fromkeys(["ZO-PoG", *([arm] if arm != "Manual" else [])]):
        if a["over_alone"][d][1] <= REF_MARGIN:
            why.append(f"{d} does not beat the template alone by {REF_MARGIN:g} points")
        if not a["interior"][d]:
            why.append(f"{d}'s tuned optimum lies on its grid's edge")
    if row.mechanism in ("discrete", "words") and not a["learns"][a["words_arm"]]:
        why.append(discrete_reason(a))
    if row.mechanism == "words" and "wb_words" in a and a["wb_words"][1] <= 0:
        why.append(f"once z is fitted the words do not matter: with white-box z, ZO-PoG's tokens minus BBT's tokens is "
                   f"{ci(a['wb_words'])} (95% CI, {len(a['words'])} seeds)")
    if row.mechanism == "continuous":
        if "only_z" in a and a["only_z"][1] <= 0:
            why.append(f"z does not add to ZO-PoG's own words: ZO-PoG minus ZO-PoG with eta_z = 0 is {ci(a['only_z'])}")
        if "only_z" not in a and a["over_alone"]["ZO-only"][1] <= REF_MARGIN:
            why.append(f"z does not work: ZO-only does not beat the template alone by {REF_MARGIN:g} points")
    return why


def row_reasons(a: dict, row: Row) -> list[str]:
    """Everything that limits ``row`` in the analysed view ``a``: the no-room reason first, then the
    failed gates (empty when there is room and every gate passes)."""
    room = room_reason(a, row)
    return [*([room] if room else []), *gate_reasons(a, row)]


def decide(g, gates: list[str], room: str | None, room_measured: bool) -> tuple[bool | None, str | None]:
    """The shared decision on a family-wise interval ``g`` = (mean, lo, hi): undecided when a gate fails
    (the no-room reason printed first); a significant loss (``hi < 0``) reads NO whatever the room; a
    failure to show a gain reads NO only with measured room; above 0 holds."""
    if gates:
        return None, "; ".join([*([room] if room else []), *gates])
    holds = three_way(g[1], g[2], 0.0, fail_below=MIN_GAIN)
    if holds is None:
        return None, "; ".join([*([room] if room else []),
                                f"family-wise CI {ci(g)} contains 0 and a gain >= {MIN_GAIN:g} point"])
    if holds is False and g[2] >= 0:
        if room:
            return None, room
        if not room_measured:
            return None, "a NO that is not a loss needs room above the other arm, and no reference was measured here"
    return holds, None


def row_verdict(a: dict, row: Row) -> tuple[bool | None, str | None]:
    """(verdict, reason) of a shared-template row: :func:`decide` on ZO-PoG's family-wise gain over the
    row's arm, with :func:`gate_reasons` and :func:`room_reason`."""
    arm = a["arm_of"].get(row.arm, row.arm)
    return decide(a["gain"][arm], gate_reasons(a, row), room_reason(a, row), "room" in a)


def caveat(a: dict, row: Row) -> str | None:
    """The caveat of a row whose other arm learns tokens alone and does not beat its random-search bar
    (one rule for the BDPL row and the continuous-part row): the gain is what z adds to such tokens."""
    arm = a["arm_of"].get(row.arm, row.arm)
    if arm in TOKEN_ONLY and arm in a["learns"] and not a["learns"][arm]:
        return (f"{arm}, a learner of tokens alone, is not detectably better than the best on dev of {a['k'][arm]} "
                f"random prompts ({ci(a['rand_gain'][arm])}): the gain is what z adds to such tokens")
    return None


# --- the untouched-start study (no template): rows about learners of tokens -------------------------
FW_U = 1 - 0.05 / 3              # its three rows: Bonferroni over three
U_ROWS = (
    Row("ZO-PoG beats BDPL (untouched start, no template)", PAPER_SAYS, "BDPL", "baseline"),
    Row("removing the continuous part hurts (untouched start, no template)", ABLATION_SAYS, NC, "continuous"),
    Row("Gumbel-softmax policy beats plain categorical (untouched start, no template)",
        "Gumbel-softmax sampling helps (ablation)", NG, "discrete"),
)
U_KEY = {"ZO-PoG": "draw", NC: "draw"}        # the paper's rule: the draw where there is Gumbel noise


def dev_evals(queries_per_step: int, steps_per_pass: int, budget: int) -> int:
    """Distinct dev evaluations of a run: one after every full pass over the training set, and one at the
    end unless the budget ends exactly at the end of a pass (then the last prompt is already scored)."""
    return distinct_evals(budget // (queries_per_step * steps_per_pass) + 1, budget, queries_per_step, steps_per_pass)


def untouched(runs: dict, seeds, rand_dev: dict, rand_test: dict, k: dict, competent: dict) -> dict:
    """The untouched-start rows' inputs: per arm (paper's rule) accuracies, each token learner's gain over
    the best on dev of ``k[arm]`` committed random prompts (95% CI), ZO-PoG's gains (family-wise over
    three) and the room above each arm (ZO-PoG's tokens with white-box z, minus the arm).
    ``competent``: the study's competence verdict per arm."""
    acc = {m: np.array([runs[m][str(s)][U_KEY.get(m, "acc")] for s in seeds], float) for m in ("ZO-PoG", NC, "BDPL", NG)}
    draws = {str(s): {"dev": rand_dev[str(s)], "test": {str(i): t for i, t in enumerate(rand_test[str(s)])}}
             for s in seeds}
    rand = {m: np.array([best_of_k(draws[str(s)], k[m]) for s in seeds]) for m in k}
    rand_gain = {m: paired(acc[m], rand[m]) for m in k}
    wb = np.array([runs["ZO-PoG"][str(s)]["wb"] for s in seeds], float)
    return dict(q=None, acc=acc, k=k, rand=rand, rand_gain=rand_gain,
                learns={m: rand_gain[m][1] > 0 for m in (NC, "BDPL") if m in k}, competent=competent,
                gain={m: paired(acc["ZO-PoG"], acc[m], FW_U) for m in (NC, "BDPL", NG)},
                room={m: paired(wb, acc[m]) for m in (NC, "BDPL", NG)}, n=len(list(seeds)))


def u_row_verdict(u: dict, row: Row) -> tuple[bool | None, str | None]:
    """An untouched-start row, gated as the shared-template rows are: its arms competent (the study's
    rule), its mechanism working (``discrete``: the discrete block beats its random-search bar;
    ``continuous``: z works, ``u["competent"]["z"]``, the study's check that the optimisers of z improve
    on the hand-written words), then the three-way rule on the family-wise interval by :func:`decide` (a
    failure to show a gain reads NO only with room; a significant loss reads NO). BDPL failing its own
    random-search bar is a caveat (:func:`u_caveat`), as in the shared-template study."""
    why = [f"{m} fails the study's competence rule" for m in ("ZO-PoG", row.arm) if not u["competent"].get(m, True)]
    if row.mechanism == "discrete" and not u["learns"][NC]:
        why.append(f"the discrete block (no-continuous) is not detectably better than the best on dev of {u['k'][NC]} "
                   f"random prompts ({ci(u['rand_gain'][NC])})")
    if row.mechanism == "continuous" and not u["competent"].get("z", True):
        why.append("z does not work: the optimisers of z do not improve on the hand-written words")
    r = u["room"][row.arm]
    room = (f"no measured room for a gain of {MIN_GAIN:g} point above {row.arm}: ZO-PoG's tokens with white-box z "
            f"minus {row.arm} is {ci(r)} (95% CI)") if r[1] <= MIN_GAIN else None
    return decide(u["gain"][row.arm], why, room, True)


def u_caveat(u: dict, row: Row) -> str | None:
    """The caveat of an untouched-start row against BDPL when BDPL, a learner of tokens alone, does not beat
    its random-search bar (the rule of :func:`caveat`)."""
    if row.mechanism == "baseline" and not u["learns"]["BDPL"]:
        return (f"BDPL, a learner of tokens alone, is not detectably better than the best on dev of {u['k']['BDPL']} "
                f"random prompts ({ci(u['rand_gain']['BDPL'])}): the gain is what z adds to such tokens")
    return None
