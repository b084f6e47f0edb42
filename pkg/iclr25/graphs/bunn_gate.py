"""The discrimination arm of the Minesweeper gate of the chapter ``graphs/bunn``: Platonov et al.'s GCN on the
evaluation seeds of the 64x64 headroom study.

The 64x64 stand-in (:mod:`iclr25.graphs.bunn_headroom`) is fit to judge a Minesweeper claim only if tuned models
differ there by more than the seed noise. This script trains Platonov et al.'s GCN module (``"GCN"`` of
:data:`iclr25.graphs.bunn_headroom.MODELS`), at the depth and learning rate the headroom study tuned for it on the
tuning seed, on every evaluation seed of that study (the same graphs, splits and initialisation seeds as the best
tuned baseline, so the two are paired seed by seed). The chapter reads the paired 95 % interval of the best tuned
baseline minus this GCN; it is also the paper's "+9.2 over GCN" reference. The graph-blind MLP of the 32x32
record (its tuned learning rate and dropout, 2 layers) trains the same seeds, the floor of the competence check.

``python -m iclr25.graphs.bunn_gate`` (one thread, about two CPU minutes) writes ``weights/bunn-gate.json``:
the recipe, the sha256 of this file and of the training loop's modules, every run (validation and test ROC-AUC,
curve, first losses, CPU seconds), and a sha256 of the results. No model is kept.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from iclr25.common.digest import file_sha256, json_sha256
from iclr25.graphs import bunn_headroom
from iclr25.graphs.bunn_minesweeper import fit_minesweeper
from iclr25.graphs.synthetic import minesweeper_graph

WEIGHTS = bunn_headroom.WEIGHTS
NAME = "bunn-gate"
HERE = bunn_headroom.HERE

#: the arm: Platonov et al.'s GCN at the headroom study's tuned depth and learning rate, on its evaluation seeds
RECIPE: dict = dict(model="GCN", source="bunn-headroom", mlp=dict(layers=2, lr=0.1, dropout=0.4))

#: the modules whose code determines the runs (their sha256 goes into the record)
CODE = ("bunn_gate.py",) + bunn_headroom.CODE


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=WEIGHTS / f"{NAME}.json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    c_all, t_all = time.process_time(), time.time()
    hr = bunn_headroom.load_record()
    tuned = hr["results"]["tuning"][RECIPE["model"]]
    depth, lr, seeds = tuned["depth"], tuned["lr"], hr["recipe"]["seeds"]
    runs = {}
    for s in seeds:
        c0 = time.process_time()
        runs[str(s)] = dict(bunn_headroom.run(RECIPE["model"], depth, lr, s), cpu_seconds=time.process_time() - c0)
        print(f"{RECIPE['model']}-{depth} seed {s}: test {runs[str(s)]['test']:.4f} "
              f"({runs[str(s)]['cpu_seconds']:.0f} s)", flush=True)
    mlp = {}
    for s in seeds:
        c0 = time.process_time()
        data = minesweeper_graph(hr["recipe"]["grid"], hr["recipe"]["grid"], seed=s)
        res = fit_minesweeper("mlp", data, None, RECIPE["mlp"]["lr"], RECIPE["mlp"]["dropout"], s,
                              max_epochs=hr["recipe"]["max_epochs"], patience=hr["recipe"]["patience"],
                              layers=RECIPE["mlp"]["layers"])
        mlp[str(s)] = dict({k: res[k] for k in ("val", "test", "plateau")}, cpu_seconds=time.process_time() - c0)
        print(f"MLP seed {s}: test {mlp[str(s)]['test']:.4f}", flush=True)
    results = dict(model=RECIPE["model"], depth=depth, lr=lr, seeds=seeds, runs=runs, mlp=mlp,
                   headroom_sha256_results=hr["sha256_results"])
    info = dict(recipe=RECIPE, code_sha256=code_sha256(), results=results, sha256_results=json_sha256(results),
                torch=torch.__version__, cpu_seconds=time.process_time() - c_all, wall_seconds=time.time() - t_all)
    args.out.write_text(json.dumps(info, indent=1))
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
