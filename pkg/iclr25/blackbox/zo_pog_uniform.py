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

The procedure is :mod:`iclr25.blackbox.zo_pog_cell_control`.
``python -m iclr25.blackbox.zo_pog_uniform`` writes ``results/zo-pog-uniform.json`` (one process, one
torch thread) with the sha256 of its content and of the functions that made it.
"""

from __future__ import annotations

import json
from pathlib import Path

from iclr25.blackbox import zo_pog_cell_control as cc
from iclr25.common.digest import load_record

ARM = "ZO-PoG eta_alpha = 0"
RECORD = Path(__file__).parent / "results" / "zo-pog-uniform.json"


def uniform_cell(point: list[float]) -> tuple[float, float]:
    """ZO-PoG's cell (eta_alpha, eta_z) with eta_alpha set to 0."""
    return 0.0, float(point[1])


def code_sha256() -> str:
    """Fingerprint of the code that makes the record (:func:`iclr25.blackbox.zo_pog_cell_control.code_sha256`)."""
    return cc.code_sha256(ARM, uniform_cell)


def make() -> dict:
    """Both budgets' runs; the record."""
    return cc.make(ARM, uniform_cell, "iclr25.blackbox.zo_pog_uniform")


def load(path: Path = RECORD) -> dict:
    """The committed record, refused if its content does not match its sha256."""
    return load_record(path, "python -m iclr25.blackbox.zo_pog_uniform")


if __name__ == "__main__":
    rec = make()
    RECORD.write_text(json.dumps(rec, separators=(",", ":")) + "\n")
    print(rec["cells"], rec["cpu_s"], "s CPU")
