"""The size claim (W2) of the weak-feedback chapter on students at ``|D_l|`` = ``N_LABELED`` with the teachers at the
teacher grid's best cells.

``python -m iclr25.align.weak_feedback_w2_tuned_students`` (about 5 CPU-minutes, one thread) runs, per seed of
:data:`~iclr25.align.weak_feedback.STUDENT_EVAL_SEEDS`, the ``small`` and ``base`` teachers on the human labels of
the first :data:`~iclr25.align.weak_feedback.N_LABELED` pool pairs, each at its cell of the committed teacher grid,
and aligns the student on each teacher's labels of D_u exactly as
:func:`~iclr25.align.weak_feedback.student_seed_run` aligns ``weak-M`` and ``weak-base`` (weak-M's chosen student
cell). It writes ``grids/weak_feedback_w2_tuned_students.json``: the conditions ``weak-M tuned`` and ``weak-base
tuned`` per seed (:func:`~iclr25.align.weak_feedback_teachers.summary`, and the accuracy of the labels of the
student's pairs), the sha256 of the grid record's inputs and of the code.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

import iclr25.align.weak_feedback as WF
from iclr25.align.weak_feedback_teachers import summary, teach
from iclr25.common.digest import file_sha256, json_sha256

OUT = WF.GRID_FILE.parent / "weak_feedback_w2_tuned_students.json"
CONDS = {"weak-M tuned": "small", "weak-base tuned": "base"}


def code_sha256() -> dict[str, str]:
    """The sha256 of this file and of the code it calls."""
    here = Path(__file__).parent
    return {f: file_sha256(here / f) for f in ("weak_feedback_w2_tuned_students.py", "weak_feedback_teachers.py",
                                               "weak_feedback.py", "dpo.py")}


def inputs(runs: dict[str, Any]) -> dict[str, Any]:
    """What it takes from the grid record: the teachers' cells and weak-M's student cell."""
    return {"cells": {n: runs["teacher_cells"][n] for n in CONDS.values()}, "cell": runs["student_chosen"]["weak-M"]}


def tuned_student_seed(pre: dict, world, s: int, runs: dict[str, Any], n_student: int = WF.N_STUDENT) -> dict[str, Any]:
    """Seed ``s``: the students of the ``small`` and ``base`` teachers at their grid cells (``|D_l|`` = ``N_LABELED``)."""
    d = WF.seed_data(world, s)
    lab = {c: teach(WF.teacher_reference(pre[n][0], world, d, n_score=WF.N_LABELED), world, d, WF.N_LABELED,
                    d.human_pool, runs["teacher_cells"][n]) for c, n in CONDS.items()}
    sref = WF.student_reference(pre["base"][0], world, d, n_student)
    data = WF.student_data(d, lab, sref, n_student)
    kinds = np.array([WF.prompt_kind(world, p)[0] for p in d.eval_prompts])
    hp = runs["student_chosen"]["weak-M"]
    row: dict[str, Any] = {"seed": s}
    for c in CONDS:
        row[c] = summary(WF.student_eval(sref, world, d, *data[c], beta=hp["beta"], epochs=hp["epochs"],
                                         n_examples=WF.N_EXAMPLES), kinds)
        row[c]["label_acc"] = WF.kind_accuracy(lab[c][:n_student], d.unlabeled[:n_student])
    return row


def load(path: Path = OUT) -> dict[str, Any]:
    """The committed record; checks its sha256."""
    return WF.load_students(path)


def main() -> None:
    torch.set_num_threads(1)
    t0 = time.process_time()
    pre = {m: WF.load_world_lm(m) for m in ("small", "base")}
    world = pre["base"][1]
    runs = WF.load_runs()
    rows = []
    for s in WF.STUDENT_EVAL_SEEDS:
        rows.append(tuned_student_seed(pre, world, s, runs))
        print("seed", s, {c: round(rows[-1][c]["strict_named"], 3) for c in CONDS}, round(time.process_time() - t0),
              flush=True)
    res = {"recipe": {**WF.recipe(list(WF.STUDENT_EVAL_SEEDS)), "conditions": list(CONDS),
                      "inputs_sha256": json_sha256(inputs(runs)), "code_sha256": code_sha256()},
           "students": rows, "cpu_s": round(time.process_time() - t0, 1)}
    res["sha256"] = json_sha256({k: v for k, v in res.items() if k != "cpu_s"})
    OUT.write_text(json.dumps(res, indent=1) + "\n")
    print("cpu s", res["cpu_s"])


if __name__ == "__main__":
    main()
