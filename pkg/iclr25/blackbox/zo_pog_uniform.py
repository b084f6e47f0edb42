"""The control of ``theory/zo-pog`` that removes only the policy's learning: ZO-PoG at its own cell with
eta_alpha = 0.

"ZO-only" removes the whole discrete block: no policy, no Gumbel draws, no dev search over draws. The
control that removes **only the learning of words** is ZO-PoG itself at its chosen cell with
eta_alpha = 0: the same queries, z steps, Gumbel draws, sampling and dev evaluations, with the policy
left uniform. ZO-PoG minus this arm is what learning the policy adds; this arm minus ZO-only is what
the dev search over uniform draws adds. Fixed here before its run:

* at 1000 queries, ZO-PoG's cell of ``zo-pog-budget-1000x.json`` with eta_alpha = 0, on the 60 seeds
  of that study (:data:`iclr25.blackbox.zo_pog_budget2.SEEDS_BIG`, 200-259);
* at 300 queries, ZO-PoG's cell of ``zo-pog-budget.json`` with eta_alpha = 0, on its 200 seeds (200-399).

Each run keeps its test accuracy by the paper's draw (:func:`iclr25.blackbox.zo_pog_budget2.run_arm`).
Its mode is recorded but means nothing: a uniform policy's argmax is the first candidate at every
position.

``python -m iclr25.blackbox.zo_pog_uniform`` writes ``results/zo-pog-uniform.json`` (one process, one
torch thread) with the sha256 of its content and of the functions that made it.
"""

from __future__ import annotations

import inspect
import json
import time
from pathlib import Path

from tqdm.auto import tqdm

from iclr25.blackbox import methods, policy, zo
from iclr25.blackbox import zo_pog_budget as bud
from iclr25.blackbox import zo_pog_budget2 as b2
from iclr25.common.digest import bytes_sha256, load_record, record_sha256, strip_source

ARM = "ZO-PoG eta_alpha = 0"
RECORD = Path(__file__).parent / "results" / "zo-pog-uniform.json"


def uniform_cell(point: list[float]) -> tuple[float, float]:
    """ZO-PoG's cell (eta_alpha, eta_z) with eta_alpha set to 0."""
    return 0.0, float(point[1])


def runs(point: list[float], seeds, budget: int) -> dict:
    """Per seed: :func:`iclr25.blackbox.zo_pog_budget2.run_arm` of ZO-PoG at :func:`uniform_cell`."""
    cell = uniform_cell(point)
    return {str(s): b2.run_arm("ZO-PoG", s, cell, budget) for s in tqdm(seeds, desc=f"{ARM}, {budget} queries")}


def code_sha256() -> str:
    """The functions that make the record (the learners' modules in full), with the constants."""
    src = [strip_source(inspect.getsource(m)) for m in (methods, policy, zo)]
    src += [strip_source(inspect.getsource(f)) for f in (uniform_cell, runs, make, b2.run_arm, bud.setup)]
    consts = dict(ARM=ARM, SB=b2.SEEDS_BIG, SE=bud.EVAL_SEEDS_B, BIG=b2.BIG, B=bud.BUDGET_B)
    return bytes_sha256(("\n".join(src) + json.dumps(consts, sort_keys=True, default=str)).encode())


def make() -> dict:
    """Both budgets' runs; the record."""
    t0 = time.process_time()
    ext, big = b2.load_ext(), bud.load()
    record = {"recipe": "python -m iclr25.blackbox.zo_pog_uniform (one torch thread, one process)",
              "code_sha256": code_sha256(), "ext_record_sha256": ext["sha256"], "budget_record_sha256": big["sha256"],
              "cells": {"1000": uniform_cell(ext["chosen"]["ZO-PoG"]), "300": uniform_cell(big["chosen"]["ZO-PoG"])},
              "runs": {"1000": runs(ext["chosen"]["ZO-PoG"], b2.SEEDS_BIG, b2.BIG),
                       "300": runs(big["chosen"]["ZO-PoG"], bud.EVAL_SEEDS_B, bud.BUDGET_B)},
              "cpu_s": 0.0}
    record["cpu_s"] = round(time.process_time() - t0, 1)
    record["sha256"] = record_sha256(record)
    return record


def load(path: Path = RECORD) -> dict:
    """The committed record, refused if its content does not match its sha256."""
    return load_record(path, "python -m iclr25.blackbox.zo_pog_uniform")


if __name__ == "__main__":
    rec = make()
    RECORD.write_text(json.dumps(rec, separators=(",", ":")) + "\n")
    print(rec["cells"], rec["cpu_s"], "s CPU")
