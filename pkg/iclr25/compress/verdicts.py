"""Paired comparisons of pruning arms across trained models, and the verdict rule of the C4n chapter.

An experiment prunes several *models* (training seeds), possibly with several calibration draws
each. Calibration draws of one model are not independent evidence about the method: they share the
model. So the unit of replication is the model: :func:`per_model` averages the within-model paired
gaps, and :func:`paired_gap` treats the per-model means as ``k`` independent draws (a one-sample
t-interval with ``k - 1`` degrees of freedom, quantile from :func:`scipy.stats.t.ppf`).

:func:`decide` turns a gap into a verdict, the same rule at every scale (a small scale only has less
power, so it leaves more rows undecided, never flips one by construction):

* **held** when the lower end of the two-sided 95 % interval of the mean benefit is above 0;
* **not held** when the upper end is below ``delta`` (the benefit, if any, is smaller than ``delta``:
  an equivalence bound; this includes a benefit that is decisively negative);
* **undecided** otherwise, with the reason.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

import numpy as np
from scipy import stats

LEVEL = 0.95
"""Two-sided confidence level of the intervals."""


def per_model(gaps: Mapping[tuple[Hashable, Hashable], float]) -> dict[Hashable, float]:
    """Average gaps keyed by ``(model, calibration seed)`` within each model: ``{model: mean gap}``
    (models in first-seen order)."""
    out: dict[Hashable, list[float]] = {}
    for (m, _), g in gaps.items():
        out.setdefault(m, []).append(float(g))
    return {m: float(np.mean(v)) for m, v in out.items()}


def t_interval(values: Sequence[float], level: float = LEVEL) -> tuple[float, float]:
    """Two-sided ``level`` Student-t interval of the mean of ``values`` (``(-inf, inf)`` for fewer
    than two values, and the mean twice when all values are equal)."""
    v = np.asarray(values, dtype=float)
    k = len(v)
    if k < 2:
        return -np.inf, np.inf
    half = float(stats.t.ppf(0.5 + level / 2, df=k - 1)) * v.std(ddof=1) / np.sqrt(k)
    return float(v.mean() - half), float(v.mean() + half)


def paired_gap(worse: Mapping[tuple, float], better: Mapping[tuple, float],
               units: Sequence[tuple] | None = None) -> dict:
    """The benefit of arm ``better`` over arm ``worse``: per unit ``worse[u] - better[u]`` (lower is
    better, e.g. bits per byte), averaged within each model, then summarised over models: ``mean``,
    ``sd``, ``min``, ``max`` of the per-model gaps, ``k`` models, the 95 % t-interval ``lo``, ``hi``,
    and the per-model gaps ``per_model``. ``units`` restricts the comparison (default: the keys of
    ``better``)."""
    units = list(better) if units is None else list(units)
    gm = per_model({u: worse[u] - better[u] for u in units})
    g = np.array(list(gm.values()), dtype=float)
    k = len(g)
    lo, hi = t_interval(g)
    return dict(mean=float(g.mean()) if k else 0.0, sd=float(g.std(ddof=1)) if k > 1 else float("inf"),
                min=float(g.min()) if k else 0.0, max=float(g.max()) if k else 0.0, k=k, lo=lo, hi=hi,
                per_model=gm)


def status(g: dict, delta: float) -> str:
    """What a paired gap shows, in words: ``"better"`` (95 % interval above 0), ``"worse"`` (interval
    below 0), ``"benefit < delta"`` (interval below ``delta`` but not below 0) or ``"not decisive"``."""
    if g["lo"] > 0:
        return "better"
    if g["hi"] < 0:
        return "worse"
    if g["hi"] < delta:
        return f"benefit < {delta}"
    return "not decisive"


def decide(g: dict, delta: float) -> tuple[bool | None, str | None]:
    """A paper row's verdict from a paired gap (see the module docstring): ``(True, None)``,
    ``(False, None)`` or ``(None, reason)``."""
    st = status(g, delta)
    if st == "better":
        return True, None
    if st != "not decisive":
        return False, None
    return None, (f"the 95 % interval of the mean benefit over {g['k']} models contains 0 and reaches "
                  f"above {delta}" if g["k"] > 1 else f"{g['k']} model: no interval")


def all_held(verdicts: Sequence[tuple[bool | None, str | None]]) -> tuple[bool | None, str | None]:
    """A row that needs every comparison to hold (e.g. "beats all baselines"): held if all are held,
    not held if any is not held, otherwise undecided with the first undecided comparison's reason."""
    if all(h is True for h, _ in verdicts):
        return True, None
    if any(h is False for h, _ in verdicts):
        return False, None
    return None, next(why for h, why in verdicts if h is None)


def moved_share(ns: Mapping[str, int], n: int, sizes: Mapping[str, int]) -> float:
    """Share of the prunable weights that lie in layers whose ``n`` in allocation ``ns`` differs from
    the uniform level ``n`` (how much of the model a mixed allocation actually changes)."""
    total = sum(sizes.values())
    return sum(sizes[name] for name, k in ns.items() if k != n) / total


def gated(decisions: Mapping[Hashable, tuple[bool | None, str | None]], shares: Mapping[Hashable, float],
          min_share: float) -> tuple[bool | None, str | None, list]:
    """A row judged only at the levels where the mechanism acts (``shares[level] >= min_share``):
    held if it holds at every such level, not held if it is not held at every such level, otherwise
    undecided; undecided with a reason when it acts at no level. Returns ``(holds, reason, levels)``."""
    acting = [lv for lv in decisions if shares[lv] >= min_share]
    if not acting:
        return None, (f"the allocation changes fewer than {min_share:.0%} of the prunable weights at every "
                      "level: mixed and uniform are nearly the same model"), acting
    hs = [decisions[lv] for lv in acting]
    if all(h is True for h, _ in hs):
        return True, None, acting
    if all(h is False for h, _ in hs):
        return False, None, acting
    return None, next((why for h, why in hs if h is None), "the acting levels disagree"), acting
