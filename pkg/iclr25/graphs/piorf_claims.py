"""The verdict rules of the chapter ``graphs/piorf``: one rule for every row whose arms differ only by added edges.

A row compares two simulators by the paired relative change of an error (``ch = (mean, lo, hi)``, negative when
the first arm is better) against a bar (a reduction of ``bar``). The rules here turn such a change into "holds"
(``True``), "NO" (``False``) or "undecided" (``None``), and say why:

* :func:`reach_ceiling`: an added edge at ``L`` blocks changes only the outputs of the nodes within ``L - 1`` hops of
  its ends (the *touched* nodes). If those nodes hold a share ``q`` of the squared error and an edge set changed
  their RMSE by the relative amount ``g`` (``g < 0``: lower), the whole-mesh RMSE changes by at most
  ``sqrt(1 - q + q (1 + g)^2) - 1``;
* :func:`edge_verdict`: a whole-mesh row between arms that differ only by added edges is judged only where the bar
  is reachable through the touched nodes of the arm that must gain (on some seed); otherwise it is undecided, with
  that reason, and never NO;
* :func:`attained_margin` and :func:`local_verdict`: a row about the touched nodes themselves is judged against
  the largest local reduction that reach at equal parameters is *shown* to attain there (a margin the stand-in can
  reward), not against a margin nothing attains;
* :func:`all_references`: a descriptive contrast read against several references holds only when it holds
  against every one of them.
"""

from __future__ import annotations

import numpy as np

from iclr25.common.stats import three_way

Change = tuple[float, float, float]


def share_from_ceiling(ceiling: np.ndarray) -> np.ndarray:
    """The touched nodes' share ``q`` of the squared error implied by an oracle ceiling ``c`` (the relative fall of
    the RMSE when their error is set to zero), for one frame: ``(1 - c)^2 = 1 - q``. Over frames it is
    approximate (the ceiling is a mean of per-frame ratios)."""
    c = np.asarray(ceiling, dtype=float)
    return 1 - (1 - c) ** 2


def reach_ceiling(share: np.ndarray, local_change: float) -> np.ndarray:
    """Per seed, the largest relative *reduction* of the whole-mesh RMSE that a change ``local_change`` (negative:
    lower) of the touched nodes' RMSE can give, when they hold the share ``share`` of the squared error."""
    q = np.asarray(share, dtype=float)
    if np.any((q < 0) | (q > 1)):
        raise ValueError("a share of the squared error lies in [0, 1]")
    return 1 - np.sqrt(1 - q + q * (1 + local_change) ** 2)


def edge_verdict(ch: Change, bar: float, gate: bool = True, ceiling: np.ndarray | None = None,
                 what: str = "") -> tuple[bool | None, str | None]:
    """The one verdict of a whole-mesh row whose arms differ only by added edges: ``(holds, reason)``.

    ``ceiling``: per seed the largest reduction reachable through the touched nodes (:func:`reach_ceiling`); when
    it is below ``bar`` on every seed the row is undecided (``what`` explains the ceiling in the reason). Without a
    ceiling (a quantity such as a rollout, where an edge's reach is not bounded by the touched nodes) the row is
    judged by its interval. ``gate``: the competence checks; a failed gate leaves the row undecided."""
    if not gate:
        return None, "competence check(s) do not hold"
    if ceiling is not None and float(np.max(ceiling)) < bar:
        return None, (f"the {bar:.0%} bar is out of reach through the nodes the edges act on: at most "
                      f"{float(np.max(ceiling)):.1%} (best seed){what}")
    holds = three_way(-ch[2], -ch[1], bar)
    if holds is None:
        return None, f"the interval ({ch[1]:+.1%} to {ch[2]:+.1%}) contains a {bar:.0%} reduction"
    return holds, None


def registered_verdict(ch: Change, bar: float, gate: bool = True) -> bool | None:
    """The plain three-way verdict (whole interval below ``-bar``: holds; above: NO), what a record registered."""
    return three_way(-ch[2], -ch[1], bar) if gate else None


def attained_margin(changes: list[Change]) -> float:
    """The largest reduction that any of ``changes`` (reach at equal parameters on the touched nodes) is shown to
    attain: ``max(-hi)`` over the changes whose whole interval lies below zero; 0 when none does."""
    shown = [-hi for _, _, hi in changes if hi < 0]
    return float(max(shown)) if shown else 0.0


def local_verdict(ch: Change, margin: float, gate: bool = True) -> tuple[bool | None, str | None]:
    """A row on the touched nodes against ``margin`` (:func:`attained_margin`): ``(holds, reason)``. With no
    attained margin (``margin <= 0``) nothing in the stand-in sets a bar, and the row is only reported."""
    if not gate:
        return None, "competence check(s) do not hold"
    if margin <= 0:
        return None, "reach at equal parameters is not shown to lower the error there: no attainable margin"
    holds = three_way(-ch[2], -ch[1], margin)
    if holds is None:
        return None, f"the interval ({ch[1]:+.1%} to {ch[2]:+.1%}) contains a {margin:.1%} reduction"
    return holds, None


def all_references(contrasts: list[Change], threshold: float = 0.0) -> bool | None:
    """A contrast read against several references: ``True`` when every interval lies above ``threshold``,
    ``False`` when one lies below it, ``None`` otherwise (a reading that holds against one reference only is not
    a finding)."""
    verdicts = [three_way(lo, hi, threshold) for _, lo, hi in contrasts]
    if any(v is False for v in verdicts):
        return False
    return True if verdicts and all(v is True for v in verdicts) else None


def control_reading(pays: dict[str, bool | None]) -> str:
    """The rewiring positive control's registered reading (:mod:`iclr25.graphs.piorf_control`).

    ``pays``: per arm (``virtual``, ``random10``, ``random30``, ``official10``, ``official30``) the verdict of
    "lowers the whole-mesh one-step RMSE by more than the bar" (``False``: ruled out). Returns
    ``"edges pay, PIORF's partners do not"`` when ``virtual`` or a ``random`` arm pays while PIORF at the same
    ratio (for ``virtual``: at either ratio) is ruled out; ``"no edge set pays"`` when every arm is ruled out;
    ``"unresolved"`` otherwise."""
    for r in ("10", "30"):
        if pays.get(f"random{r}") is True and pays.get(f"official{r}") is False:
            return "edges pay, PIORF's partners do not"
    if pays.get("virtual") is True and any(pays.get(f"official{r}") is False for r in ("10", "30")):
        return "edges pay, PIORF's partners do not"
    if pays and all(v is False for v in pays.values()):
        return "no edge set pays"
    return "unresolved"
