"""The teachers of the weak-feedback chapter tuned like its students, and every teacher-made record re-run with them.

``python -m iclr25.align.weak_feedback_teachers --stage grid`` trains each teacher (``tiny``,
``small``, ``base``) by DPO on the human labels of the first :data:`~iclr25.align.weak_feedback.N_LABELED`
pool pairs of each of :data:`TEACHER_TUNING_SEEDS` (none of them an evaluation seed of the chapter), over
:data:`GRID_EPOCHS` x :data:`GRID_LRS`, and records the accuracy of its labels of D_u (overall and per
prompt kind, :func:`~iclr25.align.weak_feedback.kind_accuracy`). Each teacher's cell is the one of
highest mean accuracy over the tuning seeds; where it lies on an edge the grid is extended past that
edge (:func:`extend`) until it is interior. That cell is used at every ``|D_l|``.

``--stage labels`` re-runs the label level with the tuned teachers: the ``|D_l|`` sweep on
:data:`~iclr25.align.weak_feedback.EVAL_SEEDS` (:func:`tuned_sweep`, the three teachers), ``small`` and
``base`` (and ``tiny`` at ``N_LABELED``) on :data:`~iclr25.align.weak_feedback.W2_SEEDS` at
``N_LABELED`` and ``N_POOL`` (:func:`tuned_size`), and the hotter Bradley-Terry annotator's teachers
(:func:`tuned_bt`). ``--stage students`` re-runs the students whose labels a teacher makes
(:data:`TUNED_CONDS`, plus ``weak-base 1600``) on :data:`~iclr25.align.weak_feedback.STUDENT_EVAL_SEEDS`
with the grid record's chosen student cells; the other students do not depend on a teacher and stay in
``grids/weak_feedback_students.json``. ``--merge`` writes the parts into ``grids/weak_feedback.json``
(keys ``teacher_grid``, ``teacher_cells``, ``tuned_*``) and ``grids/weak_feedback_students_tuned.json``,
each with its CPU seconds and the sha256 of this file and of the code it calls.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

import iclr25.align.weak_feedback as WF
from iclr25.align.dpo import weak_teacher_labels
from iclr25.common.digest import file_sha256, json_sha256

TEACHER_TUNING_SEEDS = (0, 9, 26)       #: the teacher grid's seeds (tuning only: not label or student evaluation seeds)
GRID_EPOCHS = (1, 2, 3, 4, 6, 10)
GRID_LRS = (1e-3, 2e-3, 4e-3)
TEACHERS = ("small", "base", "tiny")
TUNED_CONDS = ("weak-M", "weak-M 1600", "weak-S", "weak-base", "weak-base 1600", "weak-M BT")
TUNED_FILE = WF.GRID_FILE.parent / "weak_feedback_students_tuned.json"


def code_sha256() -> dict[str, str]:
    """The sha256 of this file and of the code it calls."""
    here = Path(__file__).parent
    return {f: file_sha256(here / f) for f in ("weak_feedback_teachers.py", "weak_feedback.py", "dpo.py")}


def teach(ref, world, d: WF.SeedData, n: int, labels: np.ndarray, cell: dict[str, float]) -> np.ndarray:
    """A teacher DPO'd (beta ``TEACHER["beta"]``, ``cell``'s epochs and lr) on the first ``n`` pool pairs
    with ``labels`` (N_POOL or n,); its labels of D_u (N_u,) (as :func:`~iclr25.align.weak_feedback.teacher_labels_on_u`)."""
    r = WF.Reference(ref.model, ref.labeled_logps[:n], ref.unlabeled_logps)
    out, _ = weak_teacher_labels(r, world.vocab, d.pool[:n], np.asarray(labels)[:n], d.unlabeled, epochs=cell["epochs"],
                                 lr=cell["lr"], beta=WF.TEACHER["beta"], seed=d.seed)
    return out


def extend(epochs: Sequence[float], lrs: Sequence[float], best: tuple[float, float]) -> tuple[list, list]:
    """The grid one step past each edge the best (epochs, lr) cell lies on (epochs: the smallest
    halved, the largest times 1.6; lr: halved or doubled); the grid unchanged if the cell is interior."""
    e, lr = best
    epochs, lrs = sorted(epochs), sorted(lrs)
    if e == epochs[0]:
        epochs = [e / 2, *epochs]
    elif e == epochs[-1]:
        epochs = [*epochs, e * 1.6]
    if lr == lrs[0]:
        lrs = [lr / 2, *lrs]
    elif lr == lrs[-1]:
        lrs = [*lrs, lr * 2]
    return epochs, lrs


def cell_key(lr: float, e: float) -> str:
    return f"{lr:g}/{e:g}"


def choose(cells: dict[str, list]) -> tuple[float, float]:
    """(epochs, lr) of the highest mean overall accuracy over the tuning seeds (the first in grid order on ties)."""
    best = max(cells, key=lambda k: np.mean([a["all"] for a in cells[k]]))
    lr, e = best.split("/")
    return float(e), float(lr)


def teacher_grid(pre: dict, world, name: str, n: int = WF.N_LABELED, seeds: Sequence[int] = TEACHER_TUNING_SEEDS,
                 verbose: bool = True) -> dict[str, Any]:
    """The grid of teacher ``name`` at ``|D_l|`` = ``n``: ``cells`` maps ``"lr/epochs"`` to the per-seed
    :func:`~iclr25.align.weak_feedback.kind_accuracy` of its labels of D_u, extended until the chosen
    cell is interior; ``epochs``, ``lr``: the choice."""
    data = [WF.seed_data(world, s) for s in seeds]
    refs = [WF.teacher_reference(pre[name][0], world, d, n_score=n) for d in data]
    cells: dict[str, list] = {}
    epochs, lrs = list(GRID_EPOCHS), list(GRID_LRS)
    for _ in range(4):
        for lr in lrs:
            for e in epochs:
                if cell_key(lr, e) not in cells:
                    cells[cell_key(lr, e)] = [WF.kind_accuracy(teach(r, world, d, n, d.human_pool, {"epochs": e, "lr": lr}),
                                                               d.unlabeled) for r, d in zip(refs, data)]
        best = choose(cells)
        grown = extend(epochs, lrs, best)
        if grown == (sorted(epochs), sorted(lrs)):
            break
        epochs, lrs = grown
    if verbose:
        print("teacher grid", name, n, {k: round(float(np.mean([a["all"] for a in v])), 3) for k, v in cells.items()},
              "chosen", best, flush=True)
    return {"cells": cells, "epochs": best[0], "lr": best[1], "grid_epochs": epochs, "grid_lrs": lrs}


def tuned_sweep(pre: dict, world, seeds: Sequence[int], cells: dict[str, dict], verbose: bool = True) -> list[dict]:
    """:func:`~iclr25.align.weak_feedback.size_sweep` with the three teachers at their tuned cells:
    per seed and ``name/n`` (n in :data:`~iclr25.align.weak_feedback.SIZES`) the accuracy of the labels
    of D_u, and their agreement with the human on same-mode pairs."""
    rows = []
    for s in seeds:
        d = WF.seed_data(world, s)
        same = WF.same_mode(d.unlabeled)
        row = {"seed": s, "teacher": {}}
        for name in TEACHERS:
            ref = WF.teacher_reference(pre[name][0], world, d)
            for n in WF.SIZES:
                lab = teach(ref, world, d, n, d.human_pool, cells[name])
                row["teacher"][f"{name}/{n}"] = {**WF.kind_accuracy(lab, d.unlabeled),
                                                 "agree_same": float((lab == d.human_u)[same].mean())}
        rows.append(row)
        if verbose:
            print("tuned sweep seed", s, {k: round(v["all"], 3) for k, v in row["teacher"].items()}, flush=True)
    return rows


def tuned_size(pre: dict, world, seeds: Sequence[int], cells: dict[str, dict], verbose: bool = True) -> list[dict]:
    """The size claim's extra seeds: per seed ``small`` and ``base`` at ``|D_l|`` = N_LABELED and
    N_POOL and ``tiny`` at N_LABELED (human labels, tuned cells), keyed ``name/n``."""
    rows = []
    for s in seeds:
        d = WF.seed_data(world, s)
        row = {"seed": s, "teacher": {}}
        for name in TEACHERS:
            ref = WF.teacher_reference(pre[name][0], world, d)
            for n in ((WF.N_LABELED,) if name == "tiny" else (WF.N_LABELED, WF.N_POOL)):
                row["teacher"][f"{name}/{n}"] = WF.kind_accuracy(teach(ref, world, d, n, d.human_pool, cells[name]),
                                                                 d.unlabeled)
        rows.append(row)
        if verbose:
            print("tuned size seed", s, {k: round(v["all"], 3) for k, v in row["teacher"].items()}, flush=True)
    return rows


def tuned_bt(pre: dict, world, seeds: Sequence[int], cells: dict[str, dict], verbose: bool = True) -> list[dict]:
    """:func:`~iclr25.align.weak_feedback.bt_sweep` with weak-M at its tuned cell."""
    rows = []
    for s in seeds:
        d = WF.seed_data(world, s)
        bt_pool, bt_u, tau = WF.bt_labels(d)
        ref = WF.teacher_reference(pre["small"][0], world, d)
        row = {"seed": s, "tau": tau, "annotator": WF.kind_accuracy(bt_u, d.unlabeled)}
        for n in (WF.N_LABELED, WF.N_POOL):
            row[f"weak-M/{n}"] = WF.kind_accuracy(teach(ref, world, d, n, bt_pool, cells["small"]), d.unlabeled)
            row[f"rule/{n}"] = WF.kind_accuracy(WF.rule_labels(d.pool[:n], bt_pool[:n], d.unlabeled, bt_u), d.unlabeled)
        rows.append(row)
        if verbose:
            print("tuned BT seed", s, round(tau, 3), flush=True)
    return rows


def summary(r: dict, kinds: np.ndarray) -> dict[str, Any]:
    """The per-student summary of :func:`~iclr25.align.weak_feedback.student_seed_run`."""
    K = WF.KINDS
    out = {"sampled": float(r["sampled"].mean()), "greedy": float(r["greedy"].mean()),
           **{f"sampled_{k}": float(r["sampled"][kinds == k].mean()) for k in K}, "modes": r["modes"],
           "sampled_strict": float(r["sampled_strict"].mean()), "greedy_strict": float(r["greedy_strict"].mean()),
           **{f"strict_{k}": float(r["sampled_strict"][kinds == k].mean()) for k in K},
           "offsupport": r["offsupport"], "offsupport_greedy": r["offsupport_greedy"], "examples": r["examples"],
           "bios_F": r["bios_F"], "bios_F_named": r["bios_F_named"],
           "strict_named": float(r["sampled_strict_named"].mean()),
           "strict_F_named": float(r["sampled_strict_named"][kinds == "F"].mean()),
           "strict_F_prefill": float(r["F_prefill_strict"].mean()), "F_declined": r["F_declined"]}
    out["chosen"], out["rejected"] = float(r["trace"]["chosen"][-1]), float(r["trace"]["rejected"][-1])
    return out


def tuned_student_seed(pre: dict, world, s: int, cells: dict[str, dict], chosen: dict[str, dict],
                       n_student: int = WF.N_STUDENT) -> dict[str, Any]:
    """One evaluation seed of the students whose labels a teacher makes (:data:`TUNED_CONDS`), the
    teachers at their tuned cells, each student at the cell :data:`~iclr25.align.weak_feedback.OWN_CELL`
    gives it (``weak-base 1600``: weak-M's), as :func:`~iclr25.align.weak_feedback.student_seed_run`."""
    d = WF.seed_data(world, s)
    refs = {n: WF.teacher_reference(pre[n][0], world, d) for n in TEACHERS}
    bt_pool, _, _ = WF.bt_labels(d)
    lab = {"weak-M": teach(refs["small"], world, d, WF.N_LABELED, d.human_pool, cells["small"]),
           "weak-M 1600": teach(refs["small"], world, d, WF.N_POOL, d.human_pool, cells["small"]),
           "weak-S": teach(refs["tiny"], world, d, WF.N_LABELED, d.human_pool, cells["tiny"]),
           "weak-base": teach(refs["base"], world, d, WF.N_LABELED, d.human_pool, cells["base"]),
           "weak-base 1600": teach(refs["base"], world, d, WF.N_POOL, d.human_pool, cells["base"]),
           "weak-M BT": teach(refs["small"], world, d, WF.N_LABELED, bt_pool, cells["small"])}
    sref = WF.student_reference(pre["base"][0], world, d, n_student)
    data = WF.student_data(d, lab, sref, n_student)
    kinds = np.array([WF.prompt_kind(world, p)[0] for p in d.eval_prompts])
    row: dict[str, Any] = {"seed": s}
    for c in TUNED_CONDS:
        hp = chosen[{"weak-base 1600": "weak-M"}.get(c, WF.OWN_CELL.get(c, c))]
        row[c] = summary(WF.student_eval(sref, world, d, *data[c], beta=hp["beta"], epochs=hp["epochs"],
                                         n_examples=WF.N_EXAMPLES), kinds)
        row[c]["label_acc"] = WF.kind_accuracy(lab[c][:n_student], d.unlabeled[:n_student])
    return row


def load_tuned(path: Path = TUNED_FILE) -> dict[str, Any]:
    """The committed tuned-teacher students; checks their sha256."""
    return WF.load_students(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stage", choices=["grid", "labels", "students"])
    ap.add_argument("--part", type=Path, help="the stage's part file (written as it goes)")
    ap.add_argument("--merge", type=Path, nargs="*", help="write these parts into the committed records")
    ap.add_argument("--seeds", type=int, nargs="*")
    args = ap.parse_args()
    if args.merge:
        runs = WF.load_runs()
        kept = {k: v for k, v in runs.items() if k not in ("recipe", "cpu_s", "sha256")}
        cpu = 0.0
        studs = []
        for f in args.merge:
            p = json.loads(f.read_text())
            if p["code_sha256"] != code_sha256():
                raise ValueError(f"{f}: made by other code")
            if p["stage"] == "grid":
                kept["teacher_grid"] = p["grid"]
                kept["teacher_cells"] = {n: {"epochs": g["epochs"], "lr": g["lr"]} for n, g in p["grid"].items()}
                kept["teacher_grid_seeds"] = list(TEACHER_TUNING_SEEDS)
            elif p["stage"] == "labels":
                if p["cells"] != kept["teacher_cells"]:
                    raise ValueError("the label part used other teacher cells")
                kept |= {k: p[k] for k in ("tuned_sweep", "tuned_size", "tuned_bt")}
            else:
                studs.append(p)
                continue
            kept[f"teacher_{p['stage']}_cpu_s"] = round(p["cpu_s"], 1)
            kept["teacher_code_sha256"] = p["code_sha256"]
            cpu += p["cpu_s"]
        WF.finish(kept, [r["seed"] for r in runs["sweep"]], runs["cpu_s"] + cpu, WF.GRID_FILE)
        if studs:
            runs = WF.load_runs()
            rows = sorted((r for p in studs for r in p["rows"]), key=lambda r: r["seed"])
            for p in studs:
                if p["inputs_sha256"] != json_sha256(tuned_inputs(runs)):
                    raise ValueError("the student part used other teacher cells or student choices")
            res = {"recipe": {**WF.recipe([r["seed"] for r in rows]), "conditions": list(TUNED_CONDS),
                              "teacher_cells": runs["teacher_cells"], "inputs_sha256": json_sha256(tuned_inputs(runs)),
                              "code_sha256": studs[0]["code_sha256"]},
                   "students": rows, "cpu_s": round(sum(p["cpu_s"] for p in studs), 1)}
            res["sha256"] = json_sha256({k: v for k, v in res.items() if k != "cpu_s"})
            TUNED_FILE.write_text(json.dumps(res, indent=1) + "\n")
        print("merged")
        return
    torch.set_num_threads(1)
    t0 = time.process_time()
    pre = {m: WF.load_world_lm(m) for m in TEACHERS}
    world = pre["small"][1]
    part: dict[str, Any] = {"stage": args.stage, "code_sha256": code_sha256()}

    def save() -> None:
        part["cpu_s"] = time.process_time() - t0
        args.part.write_text(json.dumps(part) + "\n")
    if args.stage == "grid":
        part["grid"] = {}
        for name in TEACHERS:
            part["grid"][name] = teacher_grid(pre, world, name)
            save()
    elif args.stage == "labels":
        runs = WF.load_runs()
        part["cells"] = cells = runs["teacher_cells"]
        part["tuned_size"] = tuned_size(pre, world, WF.W2_SEEDS, cells)
        save()
        part["tuned_sweep"] = tuned_sweep(pre, world, WF.EVAL_SEEDS, cells)
        save()
        part["tuned_bt"] = tuned_bt(pre, world, WF.EVAL_SEEDS, cells)
        save()
    else:
        runs = WF.load_runs()
        part["inputs_sha256"], part["rows"] = json_sha256(tuned_inputs(runs)), []
        for s in args.seeds or WF.STUDENT_EVAL_SEEDS:
            part["rows"].append(tuned_student_seed(pre, world, s, runs["teacher_cells"], runs["student_chosen"]))
            print("tuned students seed", s, {c: round(part["rows"][-1][c]["strict_named"], 3) for c in TUNED_CONDS},
                  round(time.process_time() - t0), flush=True)
            save()
    save()
    print(args.stage, "cpu s", round(part["cpu_s"], 1))


def tuned_inputs(runs: dict[str, Any]) -> dict[str, Any]:
    """What the tuned students take from the grid record: the teacher cells and the chosen student cells."""
    return {"teacher_cells": runs["teacher_cells"], "student_chosen": runs["student_chosen"]}


if __name__ == "__main__":
    main()
