"""The only-z control of ``theory/zo-pog``: ZO-PoG at its own cell with eta_z = 0.

The paper's "removing the continuous part" ablation (ZO-PoG no continuous) is a different token
learner from ZO-PoG's discrete block: tuned on its own, it takes another eta_alpha, twice the policy
steps and twice the dev evaluations. The control that removes **only** z is ZO-PoG itself at its
chosen cell with eta_z = 0: the same queries (its ZO step still queries, and draws the same random
numbers), the same policy steps with the same eta_alpha, the same dev evaluations; z stays at 0. Fixed
here before its run:

* at 1000 queries, ZO-PoG's cell of ``zo-pog-budget-1000x.json`` with eta_z = 0, on the 60 seeds of
  that study (:data:`iclr25.blackbox.zo_pog_budget2.SEEDS_BIG`, 200-259);
* at 300 queries, ZO-PoG's cell of ``zo-pog-budget.json`` with eta_z = 0, on its 200 seeds (200-399).

Each run keeps its test accuracy by the paper's draw and at the mode, and its dev evaluations
(:func:`iclr25.blackbox.zo_pog_budget2.run_arm`). The chapter reads ZO-PoG minus this arm as what z
adds to ZO-PoG's own words, and this arm against dev-selected random prompts at its own number of
distinct dev evaluations as whether ZO-PoG's words are learned at all.

The procedure is :mod:`iclr25.blackbox.zo_pog_cell_control`.
``python -m iclr25.blackbox.zo_pog_frozen`` writes ``results/zo-pog-frozen.json`` (one process, one
torch thread) with the sha256 of its content and of the functions that made it.
"""

from __future__ import annotations

import json
from pathlib import Path

from iclr25.blackbox import zo_pog_cell_control as cc
from iclr25.common.digest import load_record

ARM = "ZO-PoG eta_z = 0"
RECORD = Path(__file__).parent / "results" / "zo-pog-frozen.json"


def frozen_cell(point: list[float]) -> tuple[float, float]:
    """ZO-PoG's cell (eta_alpha, eta_z) with eta_z set to 0."""
    return float(point[0]), 0.0


def code_sha256() -> str:
    """Fingerprint of the code that makes the record (:func:`iclr25.blackbox.zo_pog_cell_control.code_sha256`)."""
    return cc.code_sha256(ARM, frozen_cell)


def make() -> dict:
    """Both budgets' runs; the record."""
    return cc.make(ARM, frozen_cell, "iclr25.blackbox.zo_pog_frozen")


def load(path: Path = RECORD) -> dict:
    """The committed record, refused if its content does not match its sha256."""
    return load_record(path, "python -m iclr25.blackbox.zo_pog_frozen")


if __name__ == "__main__":
    rec = make()
    RECORD.write_text(json.dumps(rec, separators=(",", ":")) + "\n")
    print(rec["cells"], rec["cpu_s"], "s CPU")
