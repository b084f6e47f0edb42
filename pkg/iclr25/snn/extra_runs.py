"""Two supplements to the committed TS-LIF record, trained by the recipe of :mod:`iclr25.snn.runs`.

``python -m iclr25.snn.extra_runs`` (about 5 CPU-minutes, one torch thread) trains

* the mechanism controls under missing inputs: the ablations ``uncoupled``, ``−γ_s`` and
  ``−S_d output`` trained, validated (and later tested) with the recipe's missing inputs, at TS-LIF's
  learning rate, on the evaluation seeds, as the record's TS-LIF, LIF and gain-LIF missing runs are;
* the pair that carries the clean verdict, TS-LIF and the memoryless control, re-trained with a
  patience of 15 epochs instead of 5 (each at its committed learning rate) on the evaluation seeds.

Weights go to :data:`EXTRA_NPZ` (float32, :func:`~iclr25.snn.runs.flat`), the record (per-epoch
losses, the code's and the weights' sha256, CPU seconds) to :data:`EXTRA_MANIFEST`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import torch

from iclr25.common.digest import check_sha256, file_sha256

from .runs import RECIPE, WEIGHTS, forecast_data, key, load_memoryless, load_runs, train

EXTRA_NPZ, EXTRA_MANIFEST = WEIGHTS / "ts-lif-extra.npz", WEIGHTS / "ts-lif-extra.json"
MISSING_ABLATIONS = ["uncoupled", "−γ_s", "−S_d output"]
LONG_PATIENCE = 15


def patience_key(name: str, seed: int) -> str:
    """The name of a patience-15 run in the ``.npz``."""
    return f"{name}|{seed}|0|patience{LONG_PATIENCE}"


def main() -> dict:  # pragma: no cover - the training run itself (about 5 CPU-minutes)
    torch.set_num_threads(1)
    r, data, t_start = RECIPE, forecast_data(), time.process_time()
    manifest, _ = load_runs()
    lr_ts = next(x["lr"] for x in manifest["runs"] if x["name"] == "TS-LIF" and x["role"] == "eval")
    lr_ml = load_memoryless()[0]["lr"]
    runs, weights = [], {}
    for name in MISSING_ABLATIONS:
        for s in r["eval_seeds"]:
            model, rec = train(name, lr_ts, s, data, missing=r["missing"])
            runs.append(dict(rec, role="eval", params=[]))
            weights[key(name, s, r["missing"])] = np.concatenate(
                [v.detach().double().numpy().ravel() for v in model.state_dict().values()]).astype(np.float32)
            print(f"{time.process_time() - t_start:6.0f}s {name} missing seed {s}: {rec['epochs_run']} epochs", flush=True)
    for name, lr in [("TS-LIF", lr_ts), ("memoryless", lr_ml)]:
        for s in r["eval_seeds"]:
            model, rec = train(name, lr, s, data, patience=LONG_PATIENCE)
            runs.append(dict(rec, role="patience", patience=LONG_PATIENCE, params=[]))
            weights[patience_key(name, s)] = np.concatenate(
                [v.detach().double().numpy().ravel() for v in model.state_dict().values()]).astype(np.float32)
            print(f"{time.process_time() - t_start:6.0f}s {name} patience {LONG_PATIENCE} seed {s}: "
                  f"{rec['epochs_run']} epochs", flush=True)
    np.savez_compressed(EXTRA_NPZ, **weights)
    res = dict(recipe=r, missing_ablations=MISSING_ABLATIONS, lr_ts=lr_ts, lr_ml=lr_ml, long_patience=LONG_PATIENCE,
               runs=runs, sha256=file_sha256(EXTRA_NPZ), torch=torch.__version__,
               code_sha256=file_sha256(Path(__file__)), cpu_s_total=time.process_time() - t_start)
    EXTRA_MANIFEST.write_text(json.dumps(res, separators=(",", ":")))
    return res


def load_extra() -> tuple[dict, dict[str, np.ndarray]]:
    """The supplement's committed record and weights (sha256-checked)."""
    manifest = json.loads(EXTRA_MANIFEST.read_text())
    check_sha256(EXTRA_NPZ, manifest["sha256"])
    with np.load(EXTRA_NPZ) as z:
        return manifest, {k: z[k] for k in z.files}


if __name__ == "__main__":  # pragma: no cover
    main()
