"""More evaluation seeds for the size claim (W2) on students at ``|D_l|`` = ``N_LABELED``, teachers at the grid's cells.

``python -m iclr25.align.weak_feedback_w2_more_students`` (about 5 CPU-minutes, one thread) runs
:func:`~iclr25.align.weak_feedback_w2_tuned_students.tuned_student_seed` (the students of ``small`` and ``base``,
each teacher at its cell of the committed teacher grid, aligned at weak-M's chosen student cell) on
:data:`MORE_SEEDS`, 16 seeds that are neither a tuning seed nor one of
:data:`~iclr25.align.weak_feedback.STUDENT_EVAL_SEEDS`, and writes ``grids/weak_feedback_w2_more_students.json``
in the format of ``grids/weak_feedback_w2_tuned_students.json`` (the sha256 of the grid record's inputs and of the
code). Only the two tuned conditions are run on these seeds, so they widen the W2 student rows, not the W1 ones.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import torch

import iclr25.align.weak_feedback as WF
import iclr25.align.weak_feedback_w2_tuned_students as W2T
from iclr25.align.weak_feedback_teachers import TEACHER_TUNING_SEEDS
from iclr25.common.digest import file_sha256, json_sha256

OUT = WF.GRID_FILE.parent / "weak_feedback_w2_more_students.json"
MORE_SEEDS = (*range(18, 26), *range(27, 35))   #: 26 is a teacher tuning seed
assert not set(MORE_SEEDS) & {*WF.STUDENT_EVAL_SEEDS, *WF.STUDENT_TUNING_SEEDS, *TEACHER_TUNING_SEEDS}


def code_sha256() -> dict[str, str]:
    """The sha256 of this file and of the code it calls."""
    here = Path(__file__).parent
    return {f: file_sha256(here / f) for f in ("weak_feedback_w2_more_students.py", "weak_feedback_w2_tuned_students.py",
                                               "weak_feedback_teachers.py", "weak_feedback.py", "dpo.py")}


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
    for s in MORE_SEEDS:
        rows.append(W2T.tuned_student_seed(pre, world, s, runs))
        print("seed", s, {c: round(rows[-1][c]["strict_named"], 3) for c in W2T.CONDS},
              round(time.process_time() - t0), flush=True)
    res = {"recipe": {**WF.recipe(list(MORE_SEEDS)), "conditions": list(W2T.CONDS),
                      "inputs_sha256": json_sha256(W2T.inputs(runs)), "code_sha256": code_sha256()},
           "students": rows, "cpu_s": round(time.process_time() - t0, 1)}
    res["sha256"] = json_sha256({k: v for k, v in res.items() if k != "cpu_s"})
    OUT.write_text(json.dumps(res, indent=1) + "\n")
    print("cpu s", res["cpu_s"])


if __name__ == "__main__":
    main()
