"""The controls of ``theory/zo-pog`` that remove one mechanism from ZO-PoG itself: ZO-PoG at its own chosen
cell (eta_alpha, eta_z) with one of the two steps set to 0, on the deciding studies' seeds.

:mod:`iclr25.blackbox.zo_pog_frozen` (eta_z = 0: only z removed) and :mod:`iclr25.blackbox.zo_pog_uniform`
(eta_alpha = 0: only the policy's learning removed) are this one procedure with another ``cell`` map:

* at 1000 queries, ZO-PoG's cell of ``zo-pog-budget-1000x.json`` mapped by ``cell``, on the 60 seeds of that study
  (:data:`iclr25.blackbox.zo_pog_budget2.SEEDS_BIG`, 200-259);
* at 300 queries, ZO-PoG's cell of ``zo-pog-budget.json`` mapped by ``cell``, on its 200 seeds (200-399).

Each run is :func:`iclr25.blackbox.zo_pog_budget2.run_arm` of ZO-PoG at the mapped cell, so the queries, the
random numbers drawn, the policy steps and the dev evaluations are ZO-PoG's own.
"""

from __future__ import annotations

import inspect
import json
import time
from typing import Callable

from tqdm.auto import tqdm

from iclr25.blackbox import methods, policy, zo
from iclr25.blackbox import zo_pog_budget as bud
from iclr25.blackbox import zo_pog_budget2 as b2
from iclr25.common.digest import bytes_sha256, record_sha256, strip_source

#: maps ZO-PoG's chosen cell [eta_alpha, eta_z] to the control's cell
Cell = Callable[[list[float]], tuple[float, float]]


def runs(arm: str, cell: Cell, point: list[float], seeds, budget: int) -> dict:
    """Per seed (key ``str(seed)``): :func:`iclr25.blackbox.zo_pog_budget2.run_arm` of ZO-PoG at ``cell(point)``."""
    c = cell(point)
    return {str(s): b2.run_arm("ZO-PoG", s, c, budget) for s in tqdm(seeds, desc=f"{arm}, {budget} queries")}


def code_sha256(arm: str, cell: Cell) -> str:
    """Fingerprint of the functions that make a control's record (the learners' modules in full, this module's
    functions, the cell map) and of the constants."""
    src = [strip_source(inspect.getsource(m)) for m in (methods, policy, zo)]
    src += [strip_source(inspect.getsource(f)) for f in (cell, runs, make, b2.run_arm, bud.setup)]
    consts = dict(ARM=arm, SB=b2.SEEDS_BIG, SE=bud.EVAL_SEEDS_B, BIG=b2.BIG, B=bud.BUDGET_B)
    return bytes_sha256(("\n".join(src) + json.dumps(consts, sort_keys=True, default=str)).encode())


def make(arm: str, cell: Cell, module: str) -> dict:
    """Both budgets' runs of the control; the record (``module`` is the script that re-makes it)."""
    t0 = time.process_time()
    ext, big = b2.load_ext(), bud.load()
    record = {"recipe": f"python -m {module} (one torch thread, one process)",
              "code_sha256": code_sha256(arm, cell), "ext_record_sha256": ext["sha256"],
              "budget_record_sha256": big["sha256"],
              "cells": {"1000": cell(ext["chosen"]["ZO-PoG"]), "300": cell(big["chosen"]["ZO-PoG"])},
              "runs": {"1000": runs(arm, cell, ext["chosen"]["ZO-PoG"], b2.SEEDS_BIG, b2.BIG),
                       "300": runs(arm, cell, big["chosen"]["ZO-PoG"], bud.EVAL_SEEDS_B, bud.BUDGET_B)},
              "cpu_s": 0.0}
    record["cpu_s"] = round(time.process_time() - t0, 1)
    record["sha256"] = record_sha256(record)
    return record
