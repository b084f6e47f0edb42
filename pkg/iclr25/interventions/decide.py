"""The verdict rules of the composable-interventions chapter, on summary cells.

A *cell* is a dict of one (editor or unlearner, compressor) pair's numbers over the paired seeds, as the
chapter builds them: means and standard errors of the loss beyond the unedited model's utility drop
(``h1_ef``/``h1_cf`` and ``*_se``: edit first, compress first), the per-run order sensitivity (``E_OS``,
``E_OS_se``), the signed difference of the two orders (``diff``, ``diff_se``), the success before the final
re-compression (``pre``) and compression's change against the intervention's own change where it acts
(``ratio_ef``, ``ratio_cf``, printed only). Every rule here is three-way: ``True`` (yes), ``False`` (no), ``None``
(undecided), and a ``None`` never becomes a yes or a no further up.

* :func:`three_way`: the interval mean ± 2 s.e. against a bar;
* :func:`verdict`: over compressors (or pairs), any yes is yes, all no is no, else undecided (the rule picks
  the most favourable compressor for a yes, so it is stated beside every row that uses it);
* :func:`hinders_vote`: one compressor's vote on "compression hinders this editor" in one order, on the
  paper's pipeline and measure alone;
* :func:`loss_beyond_control`: whether a loss exceeds a control's (e.g. capacity-matched mask-aware FT) by
  more than the bar, for the check rows that say what a loss is;
* :func:`sensitive`, :func:`insensitive`: the order rows' per-cell rules;
* :func:`order_verdict`: "order matters" over the cells;
* :func:`paper_verdict`: a paper row's ``(holds, reason)`` given whether this run can decide at all.
"""

from __future__ import annotations

from typing import Iterable, Mapping

import numpy as np

from iclr25.common.stats import three_way_se

TOL = 1e-6          # every threshold carries it: 18/20 in float32 is 0.89999998
BAR = 0.15          # the editing rows' bar (drop, E_OS)
RATIO_MIN = 0.5     # the smaller-edit MEMIT arm's pre-set rule (ratio at the keys); printed beside rows, never a veto
PRE_MIN = 0.9       # a control counts only if it makes the edit before the final re-compression
ORDERS = ("ef", "cf")


def three_way(mean: float, se: float, thr: float = BAR, tol: float = TOL) -> bool | None:
    """``True`` if ``mean - 2 se > thr``, ``False`` if ``mean + 2 se < thr``, else ``None`` (``tol`` on both)."""
    return three_way_se(mean, se, thr, tol=tol)


def verdict(votes: Iterable[bool | None]) -> bool | None:
    """Any yes -> ``True``; every vote no (and at least one vote) -> ``False``; otherwise ``None``."""
    vs = list(votes)
    if any(v is True for v in vs):
        return True
    return False if vs and all(v is False for v in vs) else None


def loss_beyond_control(cell: Mapping, control: Mapping | None, order: str, thr: float = BAR,
                        tol: float = TOL) -> bool | None:
    """Whether ``cell`` loses more than ``control`` in ``order`` (``"ef"``/``"cf"``) by more than ``thr``: the
    difference of their drops, ± 2 s.e. (independent standard errors combined), three-way against ``thr``.
    A check, not a veto: with a capacity-matched control it says how much of a loss capacity does not explain.
    ``None`` without a control."""
    if control is None:
        return None
    d = cell["h1_" + order] - control["h1_" + order]
    se = (cell["h1_" + order + "_se"] ** 2 + control["h1_" + order + "_se"] ** 2) ** 0.5
    return three_way(d, se, thr, tol)


def hinders_vote(cell: Mapping, order: str) -> tuple[bool | None, str]:
    """One compressor's vote on "compression hinders the edit" in ``order``, on the paper's pipeline and
    measure: ``(vote, tag)`` with tag ``"yes"``, ``"no"`` or ``"interval"`` (the interval contains the bar).
    Controls and ratios are printed beside the vote, they do not change it."""
    v = three_way(cell["h1_" + order], cell["h1_" + order + "_se"])
    return v, {True: "yes", False: "no", None: "interval"}[v]


def order_effect(cell: Mapping, bar: float = BAR, tol: float = TOL) -> bool:
    """``E_OS >= bar`` and the signed difference of the orders at least 3 s.e. from 0."""
    return bool(cell["E_OS"] >= bar - tol and abs(cell["diff"]) >= 3 * cell["diff_se"] - tol)


def sensitive(cell: Mapping) -> bool:
    """A cell is order-sensitive: :func:`order_effect`."""
    return order_effect(cell)


def insensitive(cell: Mapping) -> bool:
    """``E_OS`` surely below the bar (its interval)."""
    return bool(three_way(cell["E_OS"], cell["E_OS_se"]) is False)


def order_verdict(sens: Iterable[bool], insens: Iterable[bool]) -> bool | None:
    """"Order matters": yes if some cell is :func:`sensitive`, no if every cell is :func:`insensitive`
    (and there is at least one), else undecided."""
    sens, insens = list(sens), list(insens)
    if any(sens):
        return True
    return False if insens and all(insens) else None


def paper_verdict(holds: bool | None, why: str | None, decidable: bool, undecided: str | None) -> tuple[bool | None, str | None]:
    """A paper row's ``(holds, reason)``: where this run cannot decide (``decidable`` false) the row is
    undecided with ``undecided``; an undecided ``holds`` carries ``why``; a decided one no reason."""
    if not decidable:
        return None, undecided
    return holds, (why if holds is None else None)


# ------------------------------------------------------------------ unlearning x compression (strength record)

U_BAR = 0.1         # the unlearning rows' bar: a rise of forget accuracy (4-way multiple choice)
ROOM_MIN = 0.2      # a cell can show a rise only if compression alone leaves the knowledge this far above the unlearned level
U_ORDERS = {"first": "unlearn, then compress", "second": "compress, unlearn, compress"}


def _se(x) -> float:
    x = np.asarray(x, dtype=float)
    return float(x.std(ddof=1) / np.sqrt(len(x))) if len(x) > 1 else float("nan")


def unlearn_cells(rows: Iterable[Mapping]) -> dict[tuple, dict]:
    """Per ``(setting, comp, strength)``, the numbers of the rows of
    :mod:`iclr25.interventions.rmu_strength` paired *by seed* (every cell must hold the same seeds, once each, or
    ``ValueError``): means of ``alone``, ``control`` (the compressed unedited model's forget accuracy), ``first``,
    ``second``, ``pre``; the rises ``rise_first``/``rise_second`` (forget accuracy after the pipeline minus the
    unlearner alone's) with standard errors; ``room`` (control minus alone); ``E_OS``, ``diff`` and their standard
    errors; the ratios; ``hobby_drop`` (the unedited model's held-out hobby accuracy minus the unlearner's); ``n``."""
    groups: dict[tuple, dict] = {}
    for r in rows:
        g = groups.setdefault((r["setting"], r["comp"], r["strength"]), {})
        if r["seed"] in g:
            raise ValueError(f"seed {r['seed']} twice in cell {(r['setting'], r['comp'], r['strength'])}")
        g[r["seed"]] = r
    seeds = sorted(next(iter(groups.values()))) if groups else []
    out = {}
    for k, g in groups.items():
        if sorted(g) != seeds:
            raise ValueError(f"cell {k} has seeds {sorted(g)}, others {seeds}")
        a = {f: np.array([g[s][f] for s in seeds], dtype=float)
             for f in ("alone", "control", "first", "second", "pre", "ratio_first", "ratio_second", "hobby", "base_hobby")}
        os_ = np.abs(a["first"] - a["second"])
        out[k] = dict(n=len(seeds), seeds=seeds, **{f: float(a[f].mean()) for f in ("alone", "control", "first", "second", "pre",
                                                                                   "ratio_first", "ratio_second")},
                      rise_first=float((a["first"] - a["alone"]).mean()), rise_first_se=_se(a["first"] - a["alone"]),
                      rise_second=float((a["second"] - a["alone"]).mean()), rise_second_se=_se(a["second"] - a["alone"]),
                      room=float((a["control"] - a["alone"]).mean()), E_OS=float(os_.mean()), E_OS_se=_se(os_),
                      diff=float((a["first"] - a["second"]).mean()), diff_se=_se(a["first"] - a["second"]),
                      hobby_drop=float((a["base_hobby"] - a["hobby"]).mean()))
    return out


def unlearn_competent(cell: Mapping, forget_max: float = 0.40, drop_max: float = 0.1, tol: float = TOL) -> bool:
    """The chapter's unlearner competence rule on a cell's unlearner-alone numbers: mean forget accuracy at most
    ``forget_max`` (0.35 + 0.05 for 60 items) and at most ``drop_max`` of held-out hobby accuracy lost."""
    return bool(cell["alone"] <= forget_max + tol and cell["hobby_drop"] <= drop_max + tol)


def unlearn_vote(cell: Mapping, order: str, bar: float = U_BAR, room_min: float = ROOM_MIN,
                 tol: float = TOL) -> tuple[bool | None, str]:
    """One cell's vote on "compression hinders unlearning" in ``order`` (``"first"``/``"second"``): ``(None,
    "control")`` if compression alone leaves less than ``room_min`` of forget accuracy above the unlearned level
    (``room``: no rise could show), else the rise three-way against ``bar`` with tag ``"yes"``, ``"no"`` or
    ``"interval"``. The ratio is printed beside the vote; it never changes it."""
    if cell["room"] < room_min - tol:
        return None, "control"
    v = three_way(cell["rise_" + order], cell["rise_" + order + "_se"], bar, tol)
    return v, {True: "yes", False: "no", None: "interval"}[v]


# ------------------------------------------------------------------ editing x compression beyond the matched strength

TREND_BAR = 0.15    # the trend row's bar: edit success lost beyond the same-margin facts' loss
ORIG_MIN = 0.9      # a strength counts only if the compressed unedited model keeps the edited persons' original facts


def _by_seed(rows: Iterable[Mapping], what: str) -> dict:
    out: dict = {}
    for r in rows:
        if r["seed"] in out:
            raise ValueError(f"seed {r['seed']} twice in {what}")
        out[r["seed"]] = r
    return out


def trend_cells(rows: Iterable[Mapping], strengths: Mapping[str, list], editors: Iterable[str],
                orders: Iterable[str]) -> dict[tuple, dict]:
    """Per ``(editor, comp, strength, order)``, the rows of ``control_runs trend`` paired *by seed* (the editor
    alone, the composed model, the margin control and the compressed unedited model must hold the same seeds, once
    each, or ``ValueError``): ``n``, ``alone``, ``composed`` (mean edit success), ``margin_loss`` (1 - the
    same-margin facts' success), ``orig_fact`` (the compressed unedited model's original facts), ``ratio`` and the
    per-seed ``excess`` = (alone - composed) - margin loss, its mean and standard error."""
    rows = list(rows)
    pick = lambda e, c, st, o: _by_seed((r for r in rows if r["editor"] == e and r["comp"] == c  # noqa: E731
                                         and r["strength"] == st and r["order"] == o), f"{(e, c, st, o)}")
    out = {}
    for e in editors:
        alone = pick(e, "none", 0, "alone")
        for c, sts in strengths.items():
            for st in sts:
                base, ctl = pick("none", c, st, "compress only"), pick(e, c, st, "margin control")
                for o in orders:
                    comp = pick(e, c, st, o)
                    seeds = sorted(alone)
                    if not seeds or any(sorted(g) != seeds for g in (base, ctl, comp)):
                        raise ValueError(f"cell {(e, c, st, o)}: seeds differ")
                    a, m, k = (np.array([g[s]["success"] for s in seeds], dtype=float) for g in (alone, comp, ctl))
                    x = (a - m) - (1 - k)
                    out[e, c, st, o] = dict(n=len(seeds), seeds=seeds, alone=float(a.mean()), composed=float(m.mean()),
                                            margin_loss=float((1 - k).mean()), excess=float(x.mean()), excess_se=_se(x),
                                            orig_fact=float(np.mean([base[s]["orig_fact"] for s in seeds])),
                                            ratio=float(np.mean([comp[s]["ratio"] for s in seeds])))
    return out


def trend_votes(cells: Mapping[tuple, dict], strengths: Mapping[str, list], editors: Iterable[str],
                orders: Iterable[str], bar: float = TREND_BAR, orig_min: float = ORIG_MIN,
                tol: float = TOL) -> dict[tuple, tuple]:
    """Per ``(editor, comp, order)``: ``(vote, strength)`` at the strongest strength of ``strengths[comp]`` (the
    lists run from weaker to stronger) whose compressed unedited model keeps ``orig_fact >= orig_min``; the vote is
    :func:`three_way` of the excess against ``bar``. ``(None, None)`` where no strength keeps the original facts."""
    out = {}
    for e in editors:
        for c, sts in strengths.items():
            for o in orders:
                ok = [st for st in sts if cells[e, c, st, o]["orig_fact"] >= orig_min - tol]
                if not ok:
                    out[e, c, o] = (None, None)
                    continue
                x = cells[e, c, ok[-1], o]
                out[e, c, o] = (three_way(x["excess"], x["excess_se"], bar, tol), ok[-1])
    return out
