"""The TS-LIF chapter's models re-trained to a plateau: a patience of 15 epochs instead of the recipe's 5.

``python -m iclr25.snn.plateau`` (one torch thread; about 25 CPU-minutes for every stage) trains, each
model at its committed learning rate (the ablations at TS-LIF's, as in :mod:`iclr25.snn.runs`), in
this order, and writes the record after every model so that a stop keeps whole models:

1. with the recipe's missing inputs (trained, validated and later tested with 30 % of the inputs
   set to the window mean), on the evaluation seeds: TS-LIF, the ablations ``uncoupled``, ``−γ_s``,
   ``−S_d output``, the memoryless control;
2. on complete windows: the same three ablations, then TS-LIF and the memoryless control.

   TS-LIF and the memoryless control are trained with a patience of 30: the patience-15 model is the
   same run stopped earlier (training is deterministic), so one run gives both
   (:func:`~iclr25.snn.forecast.fit`'s ``snapshot_patience``), and the pair is the plateau check;
3. TC-LIF as its paper defines it (one spike train) with missing inputs, then on complete windows
   TC-LIF (both readouts), TC-LIF 1-train, gain-LIF and ``−S_d reset``, then gain-LIF and
   ``−S_d reset`` with missing inputs;
4. eight more seeds (8-15) with missing inputs for TS-LIF, ``−γ_s``, ``−S_d output``,
   ``uncoupled`` and TC-LIF 1-train: the mechanism rows' power.

``--cpu=SECONDS`` starts no new model after that much CPU time (default 1500). Weights go to
:data:`PLATEAU_NPZ` in float16 (the record keeps each run's float32 best validation MSE, so the
chapter can show the rounding moves nothing), the record (per-epoch losses, the code's and the
weights' sha256, CPU seconds) to :data:`PLATEAU_MANIFEST`.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from iclr25.common.digest import check_sha256, file_sha256

from .forecast import fit, predict
from .runs import RECIPE, WEIGHTS, build, flat, forecast_data, load_memoryless, load_runs

PLATEAU_NPZ, PLATEAU_MANIFEST = WEIGHTS / "ts-lif-plateau.npz", WEIGHTS / "ts-lif-plateau.json"
PATIENCE, LONG = 15, 30
MISS = RECIPE["missing"]
MORE_SEEDS = list(range(8, 16))
MECHANISM = ["uncoupled", "−γ_s", "−S_d output"]
#: (name, missing, patience, seeds) in training order; patience LONG runs also keep their patience-15 snapshot
STAGES = (
    [("TS-LIF", MISS, LONG, RECIPE["eval_seeds"])]
    + [(m, MISS, PATIENCE, RECIPE["eval_seeds"]) for m in MECHANISM]
    + [("memoryless", MISS, LONG, RECIPE["eval_seeds"])]
    + [(m, 0.0, PATIENCE, RECIPE["eval_seeds"]) for m in MECHANISM]
    + [("TS-LIF", 0.0, LONG, RECIPE["eval_seeds"]), ("memoryless", 0.0, LONG, RECIPE["eval_seeds"])]
    + [("TC-LIF 1-train", MISS, PATIENCE, RECIPE["eval_seeds"])]
    + [(m, 0.0, PATIENCE, RECIPE["eval_seeds"]) for m in ["TC-LIF", "TC-LIF 1-train", "gain-LIF", "−S_d reset"]]
    + [(m, MISS, PATIENCE, RECIPE["eval_seeds"]) for m in ["gain-LIF", "−S_d reset"]]
    + [(m, MISS, PATIENCE, MORE_SEEDS) for m in ["TS-LIF", "−γ_s", "−S_d output", "uncoupled", "TC-LIF 1-train"]]
)


def plateau_key(name: str, seed: int, missing: float, patience: int) -> str:
    """The name of a run in the ``.npz``."""
    return f"{name}|{seed}|{missing:g}|patience{patience}"


def rates() -> dict[str, float]:
    """Every model's committed learning rate (the ablations at TS-LIF's)."""
    manifest, _ = load_runs()
    lr = {x["name"]: x["lr"] for x in manifest["runs"] if x["role"] == "eval"}
    lr["memoryless"] = load_memoryless()[0]["lr"]
    return lr


def train_one(name: str, lr: float, seed: int, data: dict, missing: float, patience: int) -> tuple[dict, dict]:
    """One run: its record and its weights (float16 vectors of :func:`~iclr25.snn.runs.flat`) by key;
    a patience-``LONG`` run also gives the patience-15 model it passes through."""
    model = build(name, seed).to(data["Xtr"].device)
    t0 = time.process_time()
    res = fit(model, data["Xtr"], data["Ytr"], data["Xva"], data["Yva"], lr=lr, epochs=RECIPE["max_epochs"],
              batch_size=RECIPE["batch"], seed=seed, missing=missing, patience=patience,
              snapshot_patience=PATIENCE if patience > PATIENCE else None)
    val32 = lambda m: float(torch.mean((predict(m.eval(), data["Xva"], missing=missing, seed=seed + 1)  # noqa: E731
                                         - data["Yva"]) ** 2))
    rec = dict(name=name, lr=lr, seed=seed, missing=missing, patience=patience, val_mse=res.val_mse,
               train_mse=res.train_mse, best_epoch=res.best_epoch, epochs_run=len(res.val_mse),
               cpu_s=time.process_time() - t0)
    weights = {plateau_key(name, seed, missing, patience): flat(model).astype(np.float16)}
    rec["best_val_mse_f32"] = val32(model)
    if patience > PATIENCE:       # the patience-15 run it passed through (the whole run if that never stopped)
        sn = res.snapshot or dict(epochs_run=len(res.val_mse), best_epoch=res.best_epoch, state=model.state_dict())
        snap = build(name, seed)
        snap.load_state_dict(sn["state"])
        rec["snapshot"] = dict(patience=PATIENCE, epochs_run=sn["epochs_run"], best_epoch=sn["best_epoch"],
                               best_val_mse_f32=val32(snap))
        weights[plateau_key(name, seed, missing, PATIENCE)] = flat(snap).astype(np.float16)
    return rec, weights


def main() -> dict:  # pragma: no cover - the training run itself (about 25 CPU-minutes)
    torch.set_num_threads(1)
    cpu_cap = next((float(a.split("=", 1)[1]) for a in sys.argv if a.startswith("--cpu=")), 1500.0)
    data, t_start, lr = forecast_data(), time.process_time(), rates()
    runs, weights, done = [], {}, []

    def save() -> dict:
        np.savez_compressed(PLATEAU_NPZ, **weights)
        res = dict(recipe=RECIPE, patience=PATIENCE, long_patience=LONG, stages=[list(s[:3]) + [list(s[3])] for s in STAGES],
                   done=done, lr=lr, runs=runs, sha256=file_sha256(PLATEAU_NPZ), torch=torch.__version__,
                   code_sha256=file_sha256(Path(__file__)), cpu_s_total=time.process_time() - t_start)
        PLATEAU_MANIFEST.write_text(json.dumps(res, separators=(",", ":")))
        return res

    for name, missing, patience, seeds in STAGES:
        if time.process_time() - t_start > cpu_cap:
            print(f"stopped after {cpu_cap:.0f} CPU-s before {name} missing {missing:g} patience {patience}", flush=True)
            break
        for s in seeds:
            rec, w = train_one(name, lr[name], s, data, missing, patience)
            runs.append(rec)
            weights.update(w)
            print(f"{time.process_time() - t_start:6.0f}s {name:>12} miss {missing:g} patience {patience} seed {s}: "
                  f"best val {rec['val_mse'][rec['best_epoch']]:.4f} at {rec['best_epoch']} of {rec['epochs_run']} "
                  f"({rec['cpu_s']:.1f} s)", flush=True)
        done.append([name, missing, patience, list(seeds)])
        res = save()
    return res


def load_plateau() -> tuple[dict, dict[str, np.ndarray]]:
    """The plateau record and weights (sha256-checked; weights as float32 vectors)."""
    manifest = json.loads(PLATEAU_MANIFEST.read_text())
    check_sha256(PLATEAU_NPZ, manifest["sha256"])
    with np.load(PLATEAU_NPZ) as z:
        return manifest, {k: z[k].astype(np.float32) for k in z.files}


if __name__ == "__main__":  # pragma: no cover
    main()
