"""Paired comparisons of pruning arms across trained models, and the verdict rule of the C4n chapter.

An experiment prunes several *models* (training seeds), possibly with several calibration draws
each. Calibration draws of one model are not independent evidence about the method: they share the
model. So the unit of replication is the model: :func:`per_model` averages the within-model paired
gaps, and :func:`paired_gap` treats the per-model means as ``k`` independent draws (a one-sample
t-interval with ``k - 1`` degrees of freedom, quantile from :func:`scipy.stats.t.ppf`, via :func:`iclr25.common.stats.t_interval`).

:func:`decide` turns a gap into a verdict, the same rule at every scale (a small scale only has less
power, so it leaves more rows undecided, never flips one by construction):

* **held** when the lower end of the two-sided 95 % interval of the mean benefit is above ``delta``
  (the benefit is shown to be at least the margin);
* **not held** when the upper end is below ``delta`` (the benefit, if any, is smaller than the
  margin; this includes a benefit that is decisively negative);
* **undecided** otherwise, with the reason; this includes an interval above 0 that straddles
  ``delta`` (a benefit, but not shown to be as large as the margin).

The margin is used the same way in both directions: an interval wholly above it is a yes, wholly
below it a no, and an interval that contains it decides nothing.

:func:`decision_level` picks the level at which a study's rows are decided (the highest sparsity at
which the best arm keeps a given share of the dense model's gain), :func:`changed_share` measures
how much of a model two allocations assign differently, and :func:`acting_models` is the per-model
gate: a level counts only where enough models' allocations change enough of the model.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

import numpy as np

from iclr25.common.stats import LEVEL, t_interval  # noqa: F401 - re-exported


def per_model(gaps: Mapping[tuple[Hashable, Hashable], float]) -> dict[Hashable, float]:
    """Average gaps keyed by ``(model, calibration seed)`` within each model: ``{model: mean gap}``
    (models in first-seen order)."""
    out: dict[Hashable, list[float]] = {}
    for (m, _), g in gaps.items():
        out.setdefault(m, []).append(float(g))
    return {m: float(np.mean(v)) for m, v in out.items()}


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
    """What a paired gap shows, in words: ``"better by > delta"`` (95 % interval above ``delta``),
    ``"worse"`` (interval below 0), ``"benefit < delta"`` (interval below ``delta`` but not below 0),
    ``"better, size not decided"`` (interval above 0 but containing ``delta``) or ``"not decisive"``
    (interval contains 0 and ``delta``)."""
    if g["lo"] > delta:
        return f"better by > {delta}"
    if g["hi"] < 0:
        return "worse"
    if g["hi"] < delta:
        return f"benefit < {delta}"
    if g["lo"] > 0:
        return f"better, not shown > {delta}"
    return "not decisive"


def decide(g: dict, delta: float) -> tuple[bool | None, str | None]:
    """A row's verdict from a paired gap (see the module docstring): ``(True, None)`` when the
    interval lies above ``delta``, ``(False, None)`` when it lies below ``delta``, otherwise
    ``(None, reason)``."""
    if g["k"] < 2:
        return None, f"{g['k']} model(s): no interval"
    if g["lo"] > delta:
        return True, None
    if g["hi"] < delta:
        return False, None
    if g["lo"] > 0:
        return None, (f"the 95 % interval of the mean benefit over {g['k']} models lies above 0 but "
                      f"contains the margin {delta}")
    return None, (f"the 95 % interval of the mean benefit over {g['k']} models contains 0 and reaches "
                  f"above the margin {delta}")


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


def changed_share(a: Mapping[str, int], b: Mapping[str, int], sizes: Mapping[str, int]) -> float:
    """Share of the prunable weights that lie in layers to which allocations ``a`` and ``b`` give a
    different ``n`` (0 when they are the same allocation, 1 when they differ on every layer)."""
    total = sum(sizes.values())
    return sum(sizes[name] for name in a if a[name] != b[name]) / total


def decision_level(kept: Mapping[float, float], bar: float = 0.8) -> tuple[float, bool]:
    """The level at which a study's rows are decided: the highest level (e.g. mean ``n``) at which the
    best arm keeps at least ``bar`` of the dense model's gain (``kept[level]``). Returns ``(level,
    True)``, or ``(lowest level, False)`` when no level reaches the bar."""
    ok = [lv for lv, k in kept.items() if k >= bar]
    return (max(ok), True) if ok else (min(kept), False)


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


def acting_models(shares: Mapping[Hashable, float], min_share: float,
                  min_models: int = 3) -> tuple[list[Hashable], float]:
    """The per-model gate of a mechanism at one level: the units whose share (``shares[unit]``, e.g.
    the share of the weights an allocation moves) is at least ``min_share``, and their mean share.
    A level counts only where at least ``min_models`` units act (a t-interval over fewer than three
    models has at most one degree of freedom, ``t = 12.7``, and decides only when two numbers
    coincide): with fewer, returns ``([], 0.0)``, so :func:`gated` treats the level as not acting."""
    keep = [u for u, s in shares.items() if s >= min_share]
    if len(keep) < min_models:
        return [], 0.0
    return keep, float(np.mean([shares[u] for u in keep]))
