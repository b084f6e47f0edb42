"""The verdict rules of the composable-interventions chapter, on summary cells.

A *cell* is a dict of one (editor or unlearner, compressor) pair's numbers over the paired seeds, as the
chapter builds them: means and standard errors of the loss beyond the unedited model's utility drop
(``h1_ef``/``h1_cf`` and ``*_se``: edit first, compress first), the per-run order sensitivity (``E_OS``,
``E_OS_se``), the signed difference of the two orders (``diff``, ``diff_se``), the success before the final
re-compression (``pre``) and compression's change against the intervention's own change where it acts
(``ratio_ef``, ``ratio_cf``). Every rule here is three-way: ``True`` (yes), ``False`` (no), ``None``
(undecided), and a ``None`` never becomes a yes or a no further up.

* :func:`three_way`: the interval mean ± 2 s.e. against a bar;
* :func:`verdict`: over compressors (or pairs), any yes is yes, all no is no, else undecided (the rule picks
  the most favourable compressor for a yes, so it is stated beside every row that uses it);
* :func:`gate`: a no stands only where compression's change is at least ``ratio_min`` of the intervention's;
* :func:`hinders_vote`: one compressor's vote on "compression hinders this editor" in one order, with the
  control that removes only the capacity loss (a yes counts only if the control, competent before the
  final re-compression, says yes too) and the ratio gate for a no;
* :func:`sensitive`, :func:`insensitive`: the order rows' per-cell rules (the control, where needed, confirms
  a compress-first loss);
* :func:`order_verdict`: "order matters" over the cells;
* :func:`paper_verdict`: a paper row's ``(holds, reason)`` given whether this run can decide at all.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from iclr25.common.stats import three_way_se

TOL = 1e-6          # every threshold carries it: 18/20 in float32 is 0.89999998
BAR = 0.15          # the editing rows' bar (drop, E_OS)
RATIO_MIN = 0.5     # a no needs compression's change >= half the intervention's, where it acts
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


def gate(vote: bool | None, ratio: float, ratio_min: float = RATIO_MIN, tol: float = TOL) -> bool | None:
    """A no vote stands only if ``ratio`` (compression's change against the intervention's) is at least
    ``ratio_min``; otherwise it becomes undecided. Yes and undecided pass unchanged."""
    return None if vote is False and not ratio >= ratio_min - tol else vote


def control_ok(control: Mapping | None, order: str, pre_min: float = PRE_MIN, tol: float = TOL) -> bool:
    """Whether a control cell confirms a yes in ``order`` (``"ef"``/``"cf"``): competent before the final
    re-compression (``pre >= pre_min``) and its own drop interval at or above the bar."""
    return bool(control is not None and control["pre"] >= pre_min - tol
                and three_way(control["h1_" + order], control["h1_" + order + "_se"]) is True)


def hinders_vote(cell: Mapping, order: str, control: Mapping | None = None, needs_control: bool = False,
                 ratio_min: float = RATIO_MIN) -> tuple[bool | None, str]:
    """One compressor's vote on "compression hinders the edit" in ``order`` and why: ``(vote, tag)`` with
    tag ``"yes"``, ``"no"``, ``"interval"`` (the interval contains the bar), ``"control"`` (a yes that the
    capacity-matched control does not confirm) or ``"ratio"`` (a no where the edit dwarfs compression)."""
    v = three_way(cell["h1_" + order], cell["h1_" + order + "_se"])
    if v is True and needs_control and not control_ok(control, order):
        return None, "control"
    if v is False and gate(v, cell["ratio_" + order], ratio_min) is None:
        return None, "ratio"
    return v, {True: "yes", False: "no", None: "interval"}[v]


def order_effect(cell: Mapping, bar: float = BAR, tol: float = TOL) -> bool:
    """``E_OS >= bar`` and the signed difference of the orders at least 3 s.e. from 0."""
    return bool(cell["E_OS"] >= bar - tol and abs(cell["diff"]) >= 3 * cell["diff_se"] - tol)


def sensitive(cell: Mapping, control: Mapping | None = None, needs_control: bool = False) -> bool:
    """An order effect (:func:`order_effect`). Where ``needs_control`` and the compress-first order is the
    worse one (``diff`` = edit first - compress first > 0), the effect is that order's loss, so the control
    must confirm it (:func:`control_ok` in the compress-first order); an effect the other way needs none."""
    if not order_effect(cell):
        return False
    return not needs_control or cell["diff"] <= 0 or control_ok(control, "cf")


def insensitive(cell: Mapping, ratio_min: float = RATIO_MIN) -> bool:
    """``E_OS`` surely below the bar (interval) where compression's change is at least ``ratio_min`` of the
    intervention's in both orders."""
    return bool(three_way(cell["E_OS"], cell["E_OS_se"]) is False
                and min(cell["ratio_ef"], cell["ratio_cf"]) >= ratio_min - TOL)


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
