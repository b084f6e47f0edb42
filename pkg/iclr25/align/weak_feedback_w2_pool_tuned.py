"""The size claim (W2) of the weak-feedback chapter on labels at ``|D_l|`` = ``N_POOL`` (1600) with the teachers at the
best cells of the ridge check at 1600 labels.

``python -m iclr25.align.weak_feedback_w2_pool_tuned`` (one thread) takes each teacher's best cell of the committed
ridge check (``ridge_1600``, :mod:`iclr25.align.weak_feedback_ridge`; highest mean accuracy over the tuning seeds,
:func:`~iclr25.align.weak_feedback_teachers.choose`), trains ``small`` and ``base`` there on the human labels of the
first ``N_POOL`` pool pairs of each of the sweep's seeds and :data:`~iclr25.align.weak_feedback.W2_SEEDS`
(:func:`~iclr25.align.weak_feedback_w2_tuned.size_tuned`), and writes the accuracy of their labels of D_u into the
committed record (``size_pool_tuned``, its cells, CPU seconds and the sha256 of this file and of the code it calls).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

import iclr25.align.weak_feedback as WF
from iclr25.align.weak_feedback_teachers import choose
from iclr25.align.weak_feedback_w2_tuned import size_tuned
from iclr25.common.digest import file_sha256


def code_sha256() -> dict[str, str]:
    """The sha256 of this file and of the code it calls."""
    here = Path(__file__).parent
    return {f: file_sha256(here / f) for f in ("weak_feedback_w2_pool_tuned.py", "weak_feedback_w2_tuned.py",
                                               "weak_feedback_teachers.py", "weak_feedback.py", "dpo.py")}


def ridge_cells(runs: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Each teacher's best cell of the ridge check at 1600 labels."""
    return {n: dict(zip(("epochs", "lr"), choose(c))) for n, c in runs["ridge_1600"].items()}


def main() -> None:
    torch.set_num_threads(1)
    t0 = time.process_time()
    pre = {m: WF.load_world_lm(m) for m in ("small", "base")}
    runs = WF.load_runs()
    cells = ridge_cells(runs)
    seeds = [r["seed"] for r in runs["sweep"]] + list(WF.W2_SEEDS)
    rows = size_tuned(pre, pre["small"][1], seeds, cells, n=WF.N_POOL)
    cpu = time.process_time() - t0
    kept = {k: v for k, v in runs.items() if k not in ("recipe", "cpu_s", "sha256")}
    kept["size_pool_tuned"], kept["size_pool_tuned_cpu_s"] = rows, round(cpu, 1)
    kept["size_pool_tuned_cells"], kept["size_pool_tuned_code_sha256"] = cells, code_sha256()
    WF.finish(kept, [r["seed"] for r in runs["sweep"]], runs["cpu_s"] + cpu, WF.GRID_FILE)
    print("size at the pool, ridge cells, cpu s", round(cpu, 1))


if __name__ == "__main__":
    main()
