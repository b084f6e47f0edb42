"""The edges of the 64x64 baselines' tuning in the chapter ``graphs/bunn``: one learning rate past the edge of the
grid each model chose, and (optional parts) the runner-up on the evaluation seeds and one depth past the grid.

The 64x64 headroom study (:mod:`iclr25.graphs.bunn_headroom`) picks its best tuned baseline on a single tuning
seed, between two models 0.4 points apart there, and both are best at the deepest depth tried with a
learning-rate grid of two points. This script trains, with the same loop, seeds and dropout
(:func:`iclr25.graphs.bunn_headroom.run`), the parts named by ``--parts`` (the committed record lists the parts it
ran):

- ``runner_up`` (optional): the runner-up tuned baseline at its tuned depth and learning rate on every evaluation seed (the
  same graphs, splits and initialisation seeds as the other arms, so BuNN is compared with both top baselines
  seed by seed);
- ``lr_ext``: every model at its tuned depth and one learning rate beyond the edge of the grid it chose
  (``RECIPE["lr_down"]`` below the bottom, ``RECIPE["lr_up"]`` above the top), on the tuning seed;
- ``depth_up`` (optional): the models best at the deepest depth, at ``RECIPE["depth_up"]`` layers and both
  learning rates of the grid, on the tuning seed.

``python -m iclr25.graphs.bunn_edges [--parts lr_ext,runner_up,depth_up]`` (one thread) writes
``weights/bunn-edges.json``: the recipe, the parts run, the sha256 of the modules that train them and of the
headroom record they read, every run (validation and test ROC-AUC, curve, first losses, CPU seconds) and a
sha256 of the results. No model is kept.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from iclr25.common.digest import file_sha256, json_sha256
from iclr25.graphs import bunn_headroom

WEIGHTS = bunn_headroom.WEIGHTS
NAME = "bunn-edges"
HERE = bunn_headroom.HERE

#: one step beyond the headroom grid: the learning rate above its top, the depth after its extension
RECIPE: dict = dict(lr_down=1e-3, lr_up=3e-2, depth_up=32, parts=["runner_up", "lr_ext", "depth_up"])

#: the modules whose code determines the runs (their sha256 goes into the record)
CODE = ("bunn_edges.py",) + bunn_headroom.CODE


def code_sha256() -> dict[str, str]:
    """sha256 of every module in :data:`CODE`."""
    return {name: file_sha256(HERE / name) for name in CODE}


def load_record(path: Path | None = None) -> dict:
    """The committed record; checks that its results were not edited after the run (sha256 of the results)."""
    info = json.loads((path or WEIGHTS / f"{NAME}.json").read_text())
    digest = json_sha256(info["results"])
    if digest != info["sha256_results"]:
        raise RuntimeError(f"record sha256 {digest[:12]} differs from the recorded {info['sha256_results'][:12]}")
    return info


def _timed(name: str, depth: int, lr: float, seed: int) -> dict:
    c0 = time.process_time()
    r = dict(bunn_headroom.run(name, depth, lr, seed), cpu_seconds=time.process_time() - c0)
    print(f"{name}-{depth} lr {lr:g} seed {seed}: val {r['val']:.4f} test {r['test']:.4f} "
          f"({len(r['curve'])} evaluations, {r['cpu_seconds']:.0f} s)", flush=True)
    return r


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=WEIGHTS / f"{NAME}.json")
    parser.add_argument("--parts", default="lr_ext", help="comma-separated subset of RECIPE['parts']")
    args = parser.parse_args()
    parts = [p for p in RECIPE["parts"] if p in args.parts.split(",")]
    torch.set_num_threads(1)
    c_all, t_all = time.process_time(), time.time()
    hr = bunn_headroom.load_record()
    tuning, rec = hr["results"]["tuning"], hr["recipe"]
    val = {k: t["table"][f"{t['depth']},{t['lr']:g}"]["val"] for k, t in tuning.items()}
    ranked = sorted(val, key=val.get, reverse=True)
    results: dict = dict(parts=parts, headroom_sha256_results=hr["sha256_results"])
    if "runner_up" in parts:
        name = ranked[1]
        d, lr = tuning[name]["depth"], tuning[name]["lr"]
        results["runner_up"] = dict(model=name, depth=d, lr=lr,
                                    runs={str(s): _timed(name, d, lr, s) for s in rec["seeds"]})
    if "lr_ext" in parts:
        results["lr_ext"] = {}
        for name, t in tuning.items():
            lr = RECIPE["lr_up"] if t["lr"] == max(rec["lr_grid"]) else RECIPE["lr_down"]
            results["lr_ext"][name] = dict(depth=t["depth"], lr=lr, run=_timed(name, t["depth"], lr, rec["tune_seed"]))
    if "depth_up" in parts:
        deepest = max(rec["depth_grid"] + [rec["depth_extend"]])
        results["depth_up"] = {name: {f"{RECIPE['depth_up']},{lr:g}": _timed(name, RECIPE["depth_up"], lr,
                                                                              rec["tune_seed"])
                                      for lr in rec["lr_grid"]}
                               for name, t in tuning.items() if t["depth"] == deepest}
    info = dict(recipe=RECIPE, code_sha256=code_sha256(), results=results, sha256_results=json_sha256(results),
                torch=torch.__version__, cpu_seconds=time.process_time() - c_all, wall_seconds=time.time() - t_all)
    args.out.write_text(json.dumps(info, indent=1))
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
