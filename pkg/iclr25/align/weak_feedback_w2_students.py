"""The size claim (W2) of the weak-feedback chapter on students at ``|D_l|`` = ``N_POOL``: the students of the
``base`` teacher trained on the whole pool, beside the committed ``weak-M 1600`` students.

``python -m iclr25.align.weak_feedback_w2_students`` (about 4 CPU-minutes, one thread) runs, per seed of
:data:`~iclr25.align.weak_feedback.STUDENT_EVAL_SEEDS`, the ``base`` teacher DPO'd on the human labels of the
whole pool (its epochs from the committed record, as every ``base`` teacher of the chapter), labels D_u with
it, and aligns the student on them exactly as :func:`~iclr25.align.weak_feedback.student_seed_run` aligns
``weak-M 1600`` (weak-M's chosen student cell). It writes ``grids/weak_feedback_w2_students.json``: the
condition ``weak-base 1600`` per seed (the summary of
:func:`~iclr25.align.weak_feedback_teachers.summary`, and the accuracy of its labels of the student's pairs),
the sha256 of what it took from the grid record and of the code. It lives in its own file so that the
sha256 of the code behind the other committed records is unchanged.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

import iclr25.align.weak_feedback as WF
from iclr25.align.weak_feedback_teachers import summary
from iclr25.common.digest import file_sha256, json_sha256

OUT = WF.GRID_FILE.parent / "weak_feedback_w2_students.json"
COND = "weak-base 1600"


def code_sha256() -> dict[str, str]:
    """The sha256 of this file and of the code it calls."""
    here = Path(__file__).parent
    return {f: file_sha256(here / f) for f in ("weak_feedback_w2_students.py", "weak_feedback_teachers.py",
                                               "weak_feedback.py", "dpo.py")}


def inputs(runs: dict[str, Any]) -> dict[str, Any]:
    """What it takes from the grid record: the base teacher's epochs and weak-M's student cell."""
    return {"base_epochs": runs["teacher_epochs"]["base"], "cell": runs["student_chosen"]["weak-M"]}


def base_student_seed(pre: dict, world, s: int, runs: dict[str, Any], n: int = WF.N_POOL,
                      n_student: int = WF.N_STUDENT) -> dict[str, Any]:
    """Seed ``s``: the student of the ``base`` teacher DPO'd on the human labels of the first ``n`` pool
    pairs (``n`` = N_LABELED gives the committed ``weak-base`` student)."""
    d = WF.seed_data(world, s)
    ref = WF.teacher_reference(pre["base"][0], world, d, n_score=max(n, WF.N_LABELED))
    lab = WF.teacher_labels_on_u(ref, world, d, n, d.human_pool, runs["teacher_epochs"]["base"])
    sref = WF.student_reference(pre["base"][0], world, d, n_student)
    data = WF.student_data(d, {COND: lab}, sref, n_student)
    kinds = np.array([WF.prompt_kind(world, p)[0] for p in d.eval_prompts])
    hp = runs["student_chosen"]["weak-M"]
    out = summary(WF.student_eval(sref, world, d, *data[COND], beta=hp["beta"], epochs=hp["epochs"],
                                  n_examples=WF.N_EXAMPLES), kinds)
    out["label_acc"] = WF.kind_accuracy(lab[:n_student], d.unlabeled[:n_student])
    return out


def load(path: Path = OUT) -> dict[str, Any]:
    """The committed record; checks its sha256."""
    return WF.load_students(path)


def main() -> None:
    torch.set_num_threads(1)
    t0 = time.process_time()
    pre = {"base": WF.load_world_lm("base")}
    world = pre["base"][1]
    runs = WF.load_runs()
    rows = []
    for s in WF.STUDENT_EVAL_SEEDS:
        rows.append({"seed": s, COND: base_student_seed(pre, world, s, runs)})
        print("seed", s, round(rows[-1][COND]["strict_named"], 3), round(time.process_time() - t0), flush=True)
    res = {"recipe": {**WF.recipe(list(WF.STUDENT_EVAL_SEEDS)), "conditions": [COND],
                      "inputs_sha256": json_sha256(inputs(runs)), "code_sha256": code_sha256()},
           "students": rows, "cpu_s": round(time.process_time() - t0, 1)}
    res["sha256"] = json_sha256({k: v for k, v in res.items() if k != "cpu_s"})
    OUT.write_text(json.dumps(res, indent=1) + "\n")
    print("cpu s", res["cpu_s"])


if __name__ == "__main__":
    main()
