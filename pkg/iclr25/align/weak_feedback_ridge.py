"""A ridge check of the weak-feedback teachers at ``|D_l|`` = ``N_POOL`` (1600 labels) on the tuning seeds.

The teacher grid (:mod:`iclr25.align.weak_feedback_teachers`) is run at ``|D_l|`` = ``N_LABELED`` only. Its
accuracy is flat along a ridge where fewer epochs go with a larger learning rate, so at 1600 labels
``python -m iclr25.align.weak_feedback_ridge`` (about 4 CPU-minutes, one thread) trains ``small`` and ``base`` on
the human labels of the first ``N_POOL`` pool pairs of each of
:data:`~iclr25.align.weak_feedback_teachers.TEACHER_TUNING_SEEDS` at the records' cell (``teacher_epochs`` at
``TEACHER["lr"]``) and at the cells of :data:`RIDGE` along that ridge, and writes the
:func:`~iclr25.align.weak_feedback.kind_accuracy` of their labels of D_u into the committed record
(``ridge_1600``: per teacher, ``"lr/epochs"`` to the per-seed accuracies; its CPU seconds and the sha256 of this
file and of the code it calls).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

import iclr25.align.weak_feedback as WF
from iclr25.align.weak_feedback_teachers import TEACHER_TUNING_SEEDS, cell_key, teach
from iclr25.common.digest import file_sha256

RIDGE = ((2.0, 2e-3), (4.0, 1e-3), (6.0, 1e-3), (10.0, 5e-4))   #: (epochs, lr) cells along the 400-label ridge


def code_sha256() -> dict[str, str]:
    """The sha256 of this file and of the code it calls."""
    here = Path(__file__).parent
    return {f: file_sha256(here / f) for f in ("weak_feedback_ridge.py", "weak_feedback_teachers.py",
                                               "weak_feedback.py", "dpo.py")}


def cells_of(runs: dict[str, Any], name: str) -> list[tuple[float, float]]:
    """The records' cell of teacher ``name`` followed by the :data:`RIDGE` cells (without repeats)."""
    rec = (float(runs["teacher_epochs"][name]), float(WF.TEACHER["lr"]))
    return [rec, *[c for c in RIDGE if c != rec]]


def ridge(pre: dict, world, runs: dict[str, Any], n: int = WF.N_POOL, verbose: bool = True) -> dict[str, dict]:
    """Per teacher (``small``, ``base``): ``"lr/epochs"`` -> per tuning seed kind_accuracy of its labels of D_u."""
    out: dict[str, dict] = {name: {} for name in ("small", "base")}
    for s in TEACHER_TUNING_SEEDS:
        d = WF.seed_data(world, s)
        for name in out:
            ref = WF.teacher_reference(pre[name][0], world, d, n_score=n)
            for e, lr in cells_of(runs, name):
                acc = WF.kind_accuracy(teach(ref, world, d, n, d.human_pool, {"epochs": e, "lr": lr}), d.unlabeled)
                out[name].setdefault(cell_key(lr, e), []).append(acc)
        if verbose:
            print("ridge seed", s, {n_: {k: round(v[-1]["all"], 3) for k, v in c.items()} for n_, c in out.items()},
                  flush=True)
    return out


def main() -> None:
    torch.set_num_threads(1)
    t0 = time.process_time()
    pre = {m: WF.load_world_lm(m) for m in ("small", "base")}
    runs = WF.load_runs()
    res = ridge(pre, pre["small"][1], runs)
    cpu = time.process_time() - t0
    kept = {k: v for k, v in runs.items() if k not in ("recipe", "cpu_s", "sha256")}
    kept["ridge_1600"], kept["ridge_1600_cpu_s"] = res, round(cpu, 1)
    kept["ridge_1600_seeds"], kept["ridge_1600_code_sha256"] = list(TEACHER_TUNING_SEEDS), code_sha256()
    WF.finish(kept, [r["seed"] for r in runs["sweep"]], runs["cpu_s"] + cpu, WF.GRID_FILE)
    print("ridge 1600, cpu s", round(cpu, 1))


if __name__ == "__main__":
    main()
