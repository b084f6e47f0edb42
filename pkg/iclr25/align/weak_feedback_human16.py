"""The human student's epoch grid extended past its edge: 16 epochs at every beta, on the student tuning seeds.

The student grid (:func:`iclr25.align.weak_feedback.grid_cells`) puts the human condition's best cell on its largest
epoch count (8). ``python -m iclr25.align.weak_feedback_human16`` (about 2 CPU-minutes, one thread) trains the human
student for :data:`EXTRA_EPOCHS` epochs at every beta of :data:`~iclr25.align.weak_feedback.BETAS` on each of
:data:`~iclr25.align.weak_feedback.STUDENT_TUNING_SEEDS`, with the grid's data, reference and scoring, re-runs the
committed chosen human cell on the first tuning seed as a reproduction check, and writes the cells into the committed
record (``human16``: per tuning seed and beta the grid's fields; ``human16_rerun``: the re-run cell; its CPU seconds
and the sha256 of this file and of the code it calls).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

import iclr25.align.weak_feedback as WF
from iclr25.common.digest import file_sha256

EXTRA_EPOCHS = 16   #: the epoch column added past the grid's largest (8)


def code_sha256() -> dict[str, str]:
    """The sha256 of this file and of the code it calls."""
    here = Path(__file__).parent
    return {f: file_sha256(here / f) for f in ("weak_feedback_human16.py", "weak_feedback.py", "dpo.py")}


def cell_fields(r: dict) -> dict[str, float]:
    """The student grid's fields of one :func:`~iclr25.align.weak_feedback.student_eval` result."""
    return {"strict": float(r["sampled_strict"].mean()), "strict_named": float(r["sampled_strict_named"].mean()),
            "sampled": float(r["sampled"].mean()), "offsupport": r["offsupport"],
            "chosen": float(r["trace"]["chosen"][-1]), "chosen_mean": float(np.mean(r["trace"]["chosen"]))}


def human16(pre: dict, world, runs: dict[str, Any], verbose: bool = True) -> tuple[list[dict], dict]:
    """Per tuning seed ``{"seed", "cells": [{"beta", "epochs", **cell_fields}]}`` at EXTRA_EPOCHS, and the committed
    chosen human cell re-run on the first tuning seed."""
    out, rerun = [], {}
    ch = runs["student_chosen"]["human"]
    for s in WF.STUDENT_TUNING_SEEDS:
        d0, sref, data = WF.grid_setup(pre, world, s, runs["teacher_epochs"])
        cells = []
        for b in WF.BETAS:
            r = WF.student_eval(sref, world, d0, *data["human"], beta=b, epochs=EXTRA_EPOCHS)
            cells.append({"beta": b, "epochs": EXTRA_EPOCHS, **cell_fields(r)})
        out.append({"seed": s, "cells": cells})
        if not rerun:
            r = WF.student_eval(sref, world, d0, *data["human"], beta=ch["beta"], epochs=ch["epochs"])
            rerun = {"seed": s, "beta": ch["beta"], "epochs": ch["epochs"], **cell_fields(r)}
        if verbose:
            print("human16 seed", s, [round(c["strict_named"], 3) for c in cells], flush=True)
    return out, rerun


def main() -> None:
    torch.set_num_threads(1)
    t0 = time.process_time()
    pre = {m: WF.load_world_lm(m) for m in ("small", "base")}
    runs = WF.load_runs()
    rows, rerun = human16(pre, pre["small"][1], runs)
    cpu = time.process_time() - t0
    kept = {k: v for k, v in runs.items() if k not in ("recipe", "cpu_s", "sha256")}
    kept["human16"], kept["human16_rerun"], kept["human16_cpu_s"] = rows, rerun, round(cpu, 1)
    kept["human16_code_sha256"] = code_sha256()
    WF.finish(kept, [r["seed"] for r in runs["sweep"]], runs["cpu_s"] + cpu, WF.GRID_FILE)
    print("human 16 epochs, cpu s", round(cpu, 1))


if __name__ == "__main__":
    main()
