"""TS-LIF at the reach study's wider size, kept for the memory-horizon probe.

``python -m iclr25.snn.wide_probe`` (about half a CPU-minute, one torch thread) trains TS-LIF with
twice the neurons and twice the training windows (:data:`~iclr25.snn.runs.REACH_RECIPE`'s ``wide``
size: H = 64, a window every 8 hours) at the reach study's rate on its three tuning seeds, as
``python -m iclr25.snn.runs --reach`` does, and keeps the weights (which the reach record does not)
so that the chapter can run the memory probe on them. Weights go to :data:`WIDE_NPZ` (float32), the
record (per-epoch losses, the code's and the weights' sha256, CPU seconds) to :data:`WIDE_MANIFEST`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import torch

from iclr25.common.digest import check_sha256, file_sha256

from .runs import RECIPE, REACH_RECIPE, WEIGHTS, flat, forecast_data, key, train

WIDE_NPZ, WIDE_MANIFEST = WEIGHTS / "ts-lif-wide.npz", WEIGHTS / "ts-lif-wide.json"
WIDE = dict(RECIPE, **REACH_RECIPE["wide"])


def main() -> dict:  # pragma: no cover - the training run itself (about half a CPU-minute)
    torch.set_num_threads(1)
    data, t_start, runs, weights = forecast_data(WIDE), time.process_time(), [], {}
    for s in REACH_RECIPE["seeds"]:
        model, rec = train("TS-LIF", REACH_RECIPE["lr"], s, data, recipe=WIDE)
        runs.append(dict(rec, role="wide", params=[]))
        weights[key("TS-LIF", s)] = flat(model)
        print(f"{time.process_time() - t_start:6.0f}s TS-LIF wide seed {s}: {rec['epochs_run']} epochs", flush=True)
    np.savez_compressed(WIDE_NPZ, **weights)
    res = dict(recipe=WIDE, runs=runs, sha256=file_sha256(WIDE_NPZ), torch=torch.__version__,
               code_sha256=file_sha256(Path(__file__)), cpu_s_total=time.process_time() - t_start)
    WIDE_MANIFEST.write_text(json.dumps(res, separators=(",", ":")))
    return res


def load_wide() -> tuple[dict, dict[str, np.ndarray]]:
    """The wide TS-LIF record and weights (sha256-checked)."""
    manifest = json.loads(WIDE_MANIFEST.read_text())
    check_sha256(WIDE_NPZ, manifest["sha256"])
    with np.load(WIDE_NPZ) as z:
        return manifest, {k: z[k] for k in z.files}


if __name__ == "__main__":  # pragma: no cover
    main()
