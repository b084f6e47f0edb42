"""The ``small`` teacher at 1600 labels at the best cell of the extended ridge, on the size claim's 24 seeds.

The extended ridge (``ridge_1600`` with ``ridge_1600_ext``, :mod:`iclr25.align.weak_feedback_ridge_ext`) can move
``small``'s best cell at ``|D_l|`` = ``N_POOL`` away from the one ``size_pool_tuned``
(:mod:`iclr25.align.weak_feedback_w2_pool_tuned`) used. ``python -m iclr25.align.weak_feedback_w2_pool_small`` (about
2 CPU-minutes, one thread) trains ``small`` at the extended ridge's best cell on the human labels of the first
``N_POOL`` pool pairs of each of the sweep's seeds and :data:`~iclr25.align.weak_feedback.W2_SEEDS` and writes the
accuracy of its labels of D_u into the committed record (``size_pool_small``: per seed ``{"seed", "teacher":
{"small/1600": kind_accuracy}}``; its cell, CPU seconds and the sha256 of this file and of the code it calls).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

import iclr25.align.weak_feedback as WF
from iclr25.align.weak_feedback_teachers import choose, teach
from iclr25.common.digest import file_sha256


def code_sha256() -> dict[str, str]:
    """The sha256 of this file and of the code it calls."""
    here = Path(__file__).parent
    return {f: file_sha256(here / f) for f in ("weak_feedback_w2_pool_small.py", "weak_feedback_teachers.py",
                                               "weak_feedback.py", "dpo.py")}


def ext_cell(runs: dict[str, Any]) -> dict[str, float]:
    """``small``'s best cell over the ridge check and its extension at 1600 labels."""
    return dict(zip(("epochs", "lr"), choose({**runs["ridge_1600"]["small"], **runs["ridge_1600_ext"]["small"]})))


def main() -> None:
    torch.set_num_threads(1)
    t0 = time.process_time()
    model, world = WF.load_world_lm("small")
    runs = WF.load_runs()
    cell, n = ext_cell(runs), WF.N_POOL
    rows = []
    for s in [r["seed"] for r in runs["sweep"]] + list(WF.W2_SEEDS):
        d = WF.seed_data(world, s)
        ref = WF.teacher_reference(model, world, d, n_score=n)
        rows.append({"seed": s, "teacher": {f"small/{n}": WF.kind_accuracy(teach(ref, world, d, n, d.human_pool, cell),
                                                                           d.unlabeled)}})
        print("small at the extended ridge's cell, seed", s, round(rows[-1]["teacher"][f"small/{n}"]["all"], 3), flush=True)
    cpu = time.process_time() - t0
    kept = {k: v for k, v in runs.items() if k not in ("recipe", "cpu_s", "sha256")}
    kept["size_pool_small"], kept["size_pool_small_cell"], kept["size_pool_small_cpu_s"] = rows, cell, round(cpu, 1)
    kept["size_pool_small_code_sha256"] = code_sha256()
    WF.finish(kept, [r["seed"] for r in runs["sweep"]], runs["cpu_s"] + cpu, WF.GRID_FILE)
    print("small at the extended ridge's cell, cpu s", round(cpu, 1))


if __name__ == "__main__":
    main()
