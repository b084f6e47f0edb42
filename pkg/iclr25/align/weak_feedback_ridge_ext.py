"""The 1600-label ridge check of the ``small`` teacher extended past its end (fewer steps).

The ridge check (:mod:`iclr25.align.weak_feedback_ridge`) finds ``small``'s best cell at 1600 labels at the ridge's
end, its fewest epochs (2 at 2e-3). ``python -m iclr25.align.weak_feedback_ridge_ext`` (about 1 CPU-minute, one
thread) trains ``small`` on the human labels of the first ``N_POOL`` pool pairs of each of
:data:`~iclr25.align.weak_feedback_teachers.TEACHER_TUNING_SEEDS` at the cells of :data:`EXTRA` (fewer steps, or the
same steps at a smaller learning rate) and writes their :func:`~iclr25.align.weak_feedback.kind_accuracy` on D_u
into the committed record (``ridge_1600_ext``: ``"lr/epochs"`` to the per-seed accuracies, for ``small``; its CPU
seconds and the sha256 of this file and of the code it calls), to be read beside ``ridge_1600``.
"""
from __future__ import annotations

import time
from pathlib import Path

import torch

import iclr25.align.weak_feedback as WF
from iclr25.align.weak_feedback_teachers import TEACHER_TUNING_SEEDS, cell_key, teach
from iclr25.common.digest import file_sha256

EXTRA = ((1.0, 2e-3), (1.0, 4e-3), (2.0, 1e-3), (1.0, 1e-3), (2.0, 5e-4), (3.0, 1e-3))   #: (epochs, lr) cells past the ridge's end


def code_sha256() -> dict[str, str]:
    """The sha256 of this file and of the code it calls."""
    here = Path(__file__).parent
    return {f: file_sha256(here / f) for f in ("weak_feedback_ridge_ext.py", "weak_feedback_teachers.py",
                                               "weak_feedback.py", "dpo.py")}


def ridge_ext(model, world, n: int = WF.N_POOL, verbose: bool = True) -> dict[str, list]:
    """``"lr/epochs"`` -> per tuning seed kind_accuracy of ``small``'s labels of D_u at each cell of EXTRA."""
    out: dict[str, list] = {}
    for s in TEACHER_TUNING_SEEDS:
        d = WF.seed_data(world, s)
        ref = WF.teacher_reference(model, world, d, n_score=n)
        for e, lr in EXTRA:
            acc = WF.kind_accuracy(teach(ref, world, d, n, d.human_pool, {"epochs": e, "lr": lr}), d.unlabeled)
            out.setdefault(cell_key(lr, e), []).append(acc)
        if verbose:
            print("ridge ext seed", s, {k: round(v[-1]["all"], 3) for k, v in out.items()}, flush=True)
    return out


def main() -> None:
    torch.set_num_threads(1)
    t0 = time.process_time()
    model, world = WF.load_world_lm("small")
    runs = WF.load_runs()
    res = ridge_ext(model, world)
    cpu = time.process_time() - t0
    kept = {k: v for k, v in runs.items() if k not in ("recipe", "cpu_s", "sha256")}
    kept["ridge_1600_ext"], kept["ridge_1600_ext_cpu_s"] = {"small": res}, round(cpu, 1)
    kept["ridge_1600_ext_code_sha256"] = code_sha256()
    WF.finish(kept, [r["seed"] for r in runs["sweep"]], runs["cpu_s"] + cpu, WF.GRID_FILE)
    print("ridge 1600 ext, cpu s", round(cpu, 1))


if __name__ == "__main__":
    main()
