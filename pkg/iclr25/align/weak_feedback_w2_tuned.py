"""The size claim (W2) of the weak-feedback chapter on labels at ``|D_l|`` = ``N_LABELED`` with the teachers at the
teacher grid's best cells.

``python -m iclr25.align.weak_feedback_w2_tuned`` (about 4 CPU-minutes, one thread) trains the ``small`` and
``base`` teachers on the human labels of the first :data:`~iclr25.align.weak_feedback.N_LABELED` pool pairs of
each of the sweep's seeds and :data:`~iclr25.align.weak_feedback.W2_SEEDS`, each at its cell of the committed
teacher grid (``teacher_cells``, :mod:`iclr25.align.weak_feedback_teachers`), and writes
:func:`~iclr25.align.weak_feedback.kind_accuracy` of their labels of D_u into the committed record
(``size_tuned``, its CPU seconds and the sha256 of this file and of the code it calls).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Sequence

import torch

import iclr25.align.weak_feedback as WF
from iclr25.align.weak_feedback_teachers import teach
from iclr25.common.digest import file_sha256


def code_sha256() -> dict[str, str]:
    """The sha256 of this file and of the code it calls."""
    here = Path(__file__).parent
    return {f: file_sha256(here / f) for f in ("weak_feedback_w2_tuned.py", "weak_feedback_teachers.py",
                                               "weak_feedback.py", "dpo.py")}


def size_tuned(pre: dict, world, seeds: Sequence[int], cells: dict[str, dict], n: int = WF.N_LABELED,
               verbose: bool = True) -> list[dict[str, Any]]:
    """Per seed: ``{"seed", "teacher": {"small/n": kind_accuracy, "base/n": ...}}``, each teacher DPO'd on the
    human labels of the first ``n`` pool pairs at its ``cells`` entry (epochs and learning rate)."""
    rows = []
    for s in seeds:
        d = WF.seed_data(world, s)
        row = {"seed": s, "teacher": {}}
        for name in ("small", "base"):
            ref = WF.teacher_reference(pre[name][0], world, d, n_score=n)
            row["teacher"][f"{name}/{n}"] = WF.kind_accuracy(teach(ref, world, d, n, d.human_pool, cells[name]),
                                                             d.unlabeled)
        rows.append(row)
        if verbose:
            print("tuned size seed", s, {k: round(v["all"], 3) for k, v in row["teacher"].items()}, flush=True)
    return rows


def main() -> None:
    torch.set_num_threads(1)
    t0 = time.process_time()
    pre = {m: WF.load_world_lm(m) for m in ("small", "base")}
    runs = WF.load_runs()
    seeds = [r["seed"] for r in runs["sweep"]] + list(WF.W2_SEEDS)
    rows = size_tuned(pre, pre["small"][1], seeds, runs["teacher_cells"])
    cpu = time.process_time() - t0
    kept = {k: v for k, v in runs.items() if k not in ("recipe", "cpu_s", "sha256")}
    kept["size_tuned"], kept["size_tuned_cpu_s"] = rows, round(cpu, 1)
    kept["size_tuned_cells"], kept["size_tuned_code_sha256"] = runs["teacher_cells"], code_sha256()
    WF.finish(kept, [r["seed"] for r in runs["sweep"]], runs["cpu_s"] + cpu, WF.GRID_FILE)
    print("size tuned, cpu s", round(cpu, 1))


if __name__ == "__main__":
    main()
