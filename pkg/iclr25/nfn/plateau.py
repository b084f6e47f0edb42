"""Paired plateau check of the study's neural methods: twice the epochs against the budget, same initial weights.

For each method of the committed study record (:data:`iclr25.nfn.study.PATH`) and each of its tuning
seeds, the chosen setting ``(lr, wd)`` is trained on every fold for the record's epoch budget ``E`` and
for ``2E`` (own warm-up and cosine decay), both runs starting from the same initial weights and the same
mini-batch order: the weights the chosen member had in the tuning build that chose it
(:func:`paired_run` draws the whole build's initialisations in the build's order and keeps that member).
The gain is the fold-mean validation tau at ``2E`` minus the one at ``E``; the check, fixed here before
its runs, fails a method when the gain averaged over the tuning seeds exceeds the study's ``plateau``
(0.02). The between-seed sd is stored beside it. The ``E`` run is also compared with the value the study
recorded for the same member (``recorded``), which tests that the initialisation is the recorded one.

Run with ``python -m iclr25.nfn.plateau`` (one thread; about 7 CPU-minutes). Writes :data:`PATH`.
"""

from __future__ import annotations

import inspect
import json
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from iclr25.common.digest import bytes_sha256, load_record, record_sha256, strip_source
from iclr25.nfn import fit
from iclr25.nfn.study import take

PATH = Path(__file__).parent / "weights" / "plateau.json"
RERUN = "python -m iclr25.nfn.plateau"
METHODS = ["STATNN", "Transformer-NFN", "MLP (flat weights)", "MLP + group augmentation"]
"""The neural methods whose plateau the chapter's gates read (the paper's method, the neural paper
baselines, and the augmented MLP of the finding row)."""


def chosen_member(entry: dict[str, Any], base_decays: int) -> dict[str, Any]:
    """Where a study entry's chosen setting was trained during tuning: the build size ``K``, the member
    ``k`` in it, ``lr``, ``wd`` and the key of the recorded per-seed fold-mean validation tau.
    A chosen decay ``wd_k > 0`` is member ``wd_k`` of the ``base_decays``-point decay build (or member 0 of
    a one-point extension build); otherwise the chosen rate is member ``k`` of the learning-rate build."""
    j = entry.get("wd_k", 0)
    if j > 0:
        K, k = (base_decays, j) if j < base_decays else (1, 0)
        return {"K": K, "k": k, "lr": entry["lr"], "wd": entry["wd"], "curves": "wd_curves", "col": j}
    return {"K": len(entry["grid"]), "k": entry["k"], "lr": entry["lr"], "wd": 0.0, "curves": "lr_curves",
            "col": entry["k"]}


def paired_run(make: Callable[[np.ndarray], torch.nn.Module], X: Any, acc: np.ndarray, idx: dict[str, np.ndarray],
               member: dict[str, Any], epochs: int, seed: int, augment: Callable | None = None) -> float:
    """Train member ``member["k"]`` of a ``member["K"]``-point build under ``seed`` alone, at
    ``(lr, wd)``, for ``epochs``, and return its validation tau averaged over the folds. The
    initialisations of all ``S x K`` members are drawn in :func:`iclr25.nfn.fit.fit_ensemble`'s order
    after ``torch.manual_seed(seed)`` (as :func:`iclr25.nfn.study.train_predictor` does), so the member
    starts from the weights it had in that build, and the batch order comes from the same ``seed``."""
    torch.manual_seed(seed)
    S, K, k = len(idx["train"]), member["K"], member["k"]
    inits = [[make(idx["train"][s]) for _ in range(K)] for s in range(S)]
    data = {s: take(X, i) for s, i in idx.items()}
    tgt = {s: torch.tensor(acc[i], dtype=torch.float32) for s, i in idx.items()}
    sel = fit.fit_ensemble(lambda s, _: inits[s][k], data, tgt, [dict(lr=member["lr"], wd=member["wd"])],
                           epochs=epochs, seed=seed, select_epoch=False, eval_every=epochs, augment=augment)
    return float(np.mean(sel.val_tau[:, 0]))


def summarise(budget: list[float], double: list[float], plateau: float) -> dict[str, Any]:
    """Per-seed paired gains ``double - budget``, their mean and between-seed sd, and whether the mean
    stays at or below ``plateau`` (``passes``)."""
    g = np.asarray(double) - np.asarray(budget)
    sd = float(g.std(ddof=1)) if len(g) > 1 else float("nan")
    return {"gains": g.round(4).tolist(), "gain": round(float(g.mean()), 4), "sd": round(sd, 4),
            "passes": bool(g.mean() <= plateau)}


FINGERPRINTED = (chosen_member, paired_run, summarise, take, fit.fit_ensemble, fit._schedule)


def fingerprints() -> dict[str, str]:
    """sha256 of the stripped source of the functions that make this record."""
    return {f"{o.__module__.replace('__main__', 'iclr25.nfn.plateau')}.{o.__qualname__}":
            bytes_sha256(strip_source(inspect.getsource(o)).encode()) for o in FINGERPRINTED}


def load_plateau() -> dict[str, Any]:
    """The committed record, refused if its content does not match its sha256."""
    return load_record(PATH, RERUN)


def main() -> None:
    """Run the paired check on every method of :data:`METHODS` with one thread and write :data:`PATH`."""
    from tqdm.auto import tqdm

    from iclr25.nfn import baselines
    from iclr25.nfn.block import KEYS
    from iclr25.nfn.make_zoo import load_zoo
    from iclr25.nfn.study import (PROTOCOL, SPEC, fold_indices, load_study, make_aug_mlp, make_mlp, make_nfn,
                                  study_runs)

    torch.set_num_threads(1)
    t0 = time.process_time()
    P, study = PROTOCOL, load_study()
    zoo = load_zoo()
    W_all = {key: torch.stack([zoo["params"][f"enc{l}.{key}"] for l in range(2)], 1).float() for key in KEYS}
    runs = study_runs(W_all, P["zero_share"], P["n_folds"])
    assert runs.tolist() == study["runs"]
    W = take(W_all, runs)
    acc = zoo["accuracy"][-1].numpy().astype(np.float64)[runs]
    idx = fold_indices(len(runs), P["n_folds"], P["seed"])
    X_flat, X_stat = baselines.flatten_weights(W), baselines.stat_features(W)
    n, m, st, c = P["nfn"], P["mlp"], P["statnn"], P["controls"]
    make = {"Transformer-NFN": (make_nfn(W, n["channels"], n["hidden"]), W, None),
            "MLP (flat weights)": (make_mlp(X_flat, m["hidden"]), X_flat, None),
            "STATNN": (make_mlp(X_stat, st["hidden"]), X_stat, None),
            "MLP + group augmentation": (make_aug_mlp(W, m["hidden"]), W, baselines.group_augment(SPEC, c["aug_cond"]))}
    out: dict[str, Any] = {}
    jobs = [(name, s) for name in METHODS for s in study["methods"][name]["tune_seeds"]]
    bar = tqdm(total=len(jobs), desc="paired plateau")
    for name in METHODS:
        entry = study["methods"][name]
        mk, X, aug = make[name]
        member = chosen_member(entry, len(P["decay_grid"]))
        E, budget, double, recorded = entry["epochs"], [], [], []
        for i, s in enumerate(entry["tune_seeds"]):
            budget.append(round(paired_run(mk, X, acc, idx, member, E, s, aug), 4))
            double.append(round(paired_run(mk, X, acc, idx, member, 2 * E, s, aug), 4))
            recorded.append(entry[member["curves"]][i][member["col"]])
            bar.update()
        out[name] = {"member": member, "epochs": E, "tune_seeds": entry["tune_seeds"], "budget": budget,
                     "double": double, "recorded": recorded, **summarise(budget, double, P["plateau"])}
        print(name, out[name], flush=True)
    bar.close()
    record = {"plateau": P["plateau"], "study_sha256": study["sha256"], "methods": out,
              "fingerprints": fingerprints(), "torch": torch.__version__, "cpu_s": round(time.process_time() - t0, 1)}
    record["sha256"] = record_sha256(record)
    PATH.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {PATH} in {record['cpu_s']:.0f} s CPU, sha256 {record['sha256'][:12]}")


if __name__ == "__main__":
    main()
