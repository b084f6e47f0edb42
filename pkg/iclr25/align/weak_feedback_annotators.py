"""Two more noise models for the weak-feedback chapter's label level: close calls and persistent misconceptions.

* :func:`close_call_labels`: the annotator follows the gold order wherever the two gold rewards differ by
  :data:`CLOSE_GAP` or more and flips a fair coin below: every error is a close call.
* :func:`misconception_labels`: the annotator holds one wrong belief about each of a random share of the
  persons, dishes and toxins (drawn until their pairs make up ``1 - TARGET`` of the calibration pairs) and
  prefers the worse response of *every* pair about them; elsewhere it follows the gold order. Its errors
  repeat on every pair of an entity, so no amount of labels averages them away.

``python -m iclr25.align.weak_feedback_annotators`` (about 1 CPU-minute, one thread) runs, per sweep seed, the
``small`` teacher (the records' epochs) on each annotator's labels of the first ``n`` pool pairs for ``n`` in
(:data:`~iclr25.align.weak_feedback.N_LABELED`, :data:`~iclr25.align.weak_feedback.N_POOL`), and writes
:func:`~iclr25.align.weak_feedback.kind_accuracy` of the annotator's, the teacher's and the prompt-type rule's
labels of D_u into the committed record (``annotators``, its CPU seconds and the sha256 of this file).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

import iclr25.align.weak_feedback as WF
from iclr25.common.digest import file_sha256

CLOSE_GAP = 2.0          #: the close-call annotator flips a coin where the gold rewards differ by less


def close_call_labels(pairs: Sequence, rng: np.random.Generator) -> np.ndarray:
    """Gold labels where the gold reward gap is at least :data:`CLOSE_GAP`, a fair coin below; (N,) ints."""
    r = np.array([[p.r1, p.r2] for p in pairs])
    coin = rng.integers(0, 2, len(pairs))
    return np.where(np.abs(r[:, 0] - r[:, 1]) >= CLOSE_GAP, WF.gold_labels(pairs), coin)


def misbelieved(calib: Sequence, rng: np.random.Generator, share: float = 1 - WF.TARGET) -> set:
    """(kind, entity) keys drawn in random order until the pairs about them reach ``share`` of ``calib``."""
    keys = sorted({(p.kind, p.entity) for p in calib})
    count = {k: 0 for k in keys}
    for p in calib:
        count[(p.kind, p.entity)] += 1
    out, n = set(), 0
    for i in rng.permutation(len(keys)):
        if n >= share * len(calib):
            break
        out.add(keys[i])
        n += count[keys[i]]
    return out


def misconception_labels(pairs: Sequence, wrong: set) -> np.ndarray:
    """Gold labels, reversed on every pair about an entity in ``wrong``; (N,) ints."""
    g = WF.gold_labels(pairs)
    flip = np.array([(p.kind, p.entity) in wrong for p in pairs])
    return np.where(flip, 1 - g, g)


def annotator_labels(d: WF.SeedData) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per annotator (``close-call``, ``misconception``): its labels of the pool and of D_u of seed ``d``."""
    rng = np.random.default_rng([d.seed, 23])
    wrong = misbelieved(d.pool[:WF.N_LABELED] + d.unlabeled, rng)
    return {"close-call": (close_call_labels(d.pool, rng), close_call_labels(d.unlabeled, rng)),
            "misconception": (misconception_labels(d.pool, wrong), misconception_labels(d.unlabeled, wrong))}


def annotator_sweep(pre: dict, world, seeds: Sequence[int], epochs: dict[str, float],
                    verbose: bool = True) -> list[dict[str, Any]]:
    """Per seed and annotator: the accuracy of its labels of D_u, of the ``small`` teacher DPO'd on its labels
    of the first ``n`` pool pairs and of the prompt-type rule on them (``weak-M/n``, ``rule/n``)."""
    rows = []
    for s in seeds:
        d = WF.seed_data(world, s)
        ref = WF.teacher_reference(pre["small"][0], world, d)
        row: dict[str, Any] = {"seed": s}
        for a, (lp, lu) in annotator_labels(d).items():
            row[a] = {"annotator": WF.kind_accuracy(lu, d.unlabeled)}
            for n in (WF.N_LABELED, WF.N_POOL):
                row[a][f"weak-M/{n}"] = WF.kind_accuracy(WF.teacher_labels_on_u(ref, world, d, n, lp, epochs["small"]),
                                                         d.unlabeled)
                row[a][f"rule/{n}"] = WF.kind_accuracy(WF.rule_labels(d.pool[:n], lp[:n], d.unlabeled, lu), d.unlabeled)
        rows.append(row)
        if verbose:
            print("annotators seed", s, {a: round(row[a]["weak-M/400"]["all"] - row[a]["annotator"]["all"], 3)
                                         for a in ("close-call", "misconception")}, flush=True)
    return rows


def main() -> None:
    torch.set_num_threads(1)
    t0 = time.process_time()
    pre = {"small": WF.load_world_lm("small")}
    runs = WF.load_runs()
    rows = annotator_sweep(pre, pre["small"][1], [r["seed"] for r in runs["sweep"]], runs["teacher_epochs"])
    cpu = time.process_time() - t0
    kept = {k: v for k, v in runs.items() if k not in ("recipe", "cpu_s", "sha256")}
    kept["annotators"], kept["annotators_cpu_s"] = rows, round(cpu, 1)
    kept["annotators_code_sha256"] = file_sha256(Path(__file__))
    WF.finish(kept, [r["seed"] for r in runs["sweep"]], runs["cpu_s"] + cpu, WF.GRID_FILE)
    print("annotators, cpu s", round(cpu, 1))


if __name__ == "__main__":
    main()
