"""The size claim (W2) of the weak-feedback chapter at the chapter's ``|D_l|`` on the extra seeds.

``python -m iclr25.align.weak_feedback_w2`` (about 2 CPU-minutes, one thread) trains the ``small`` and
``base`` teachers on the human labels of the first :data:`~iclr25.align.weak_feedback.N_LABELED` pool
pairs of each of :data:`~iclr25.align.weak_feedback.W2_SEEDS`, with their pilot's epochs, and writes
:func:`~iclr25.align.weak_feedback.kind_accuracy` of their labels of D_u into the committed record
(``size_at_labeled``, its CPU seconds and the sha256 of this file), beside ``size_at_pool``
(the same seeds at ``|D_l|`` = ``N_POOL``). It lives in its own file so that the sha256 of the code
behind the committed students (``weak_feedback.py``, ``dpo.py``) is unchanged.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Sequence

import torch

import iclr25.align.weak_feedback as WF
from iclr25.common.digest import file_sha256


def size_at_labeled(pre: dict, world, seeds: Sequence[int], epochs: dict[str, float],
                    n: int = WF.N_LABELED, verbose: bool = True) -> list[dict[str, Any]]:
    """Per seed: ``{"seed", "teacher": {"small/n": kind_accuracy, "base/n": ...}}``, the teachers DPO'd
    on the human labels of the first ``n`` pool pairs exactly as :func:`~iclr25.align.weak_feedback.size_sweep`
    does (the same reference, scored on the whole pool)."""
    rows = []
    for s in seeds:
        d = WF.seed_data(world, s)
        row = {"seed": s, "teacher": {}}
        for name in ("small", "base"):
            ref = WF.teacher_reference(pre[name][0], world, d)
            row["teacher"][f"{name}/{n}"] = WF.kind_accuracy(
                WF.teacher_labels_on_u(ref, world, d, n, d.human_pool, epochs[name]), d.unlabeled)
        rows.append(row)
        if verbose:
            print("size at", n, "seed", s, {k: round(v["all"], 3) for k, v in row["teacher"].items()}, flush=True)
    return rows


def main() -> None:
    torch.set_num_threads(1)
    t0 = time.process_time()
    pre = {m: WF.load_world_lm(m) for m in ("small", "base")}
    runs = WF.load_runs()
    rows = size_at_labeled(pre, pre["small"][1], WF.W2_SEEDS, runs["teacher_epochs"])
    cpu = time.process_time() - t0
    kept = {k: v for k, v in runs.items() if k not in ("recipe", "cpu_s", "sha256")}
    kept["size_at_labeled"], kept["size_at_labeled_cpu_s"] = rows, round(cpu, 1)
    kept["size_at_labeled_code_sha256"] = file_sha256(Path(__file__))
    WF.finish(kept, [r["seed"] for r in runs["sweep"]], runs["cpu_s"] + cpu, WF.GRID_FILE)
    print("size at labeled, cpu s", round(cpu, 1))


if __name__ == "__main__":
    main()
