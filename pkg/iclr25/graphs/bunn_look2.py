"""The second and final look at the 64x64 Minesweeper comparison of the chapter ``graphs/bunn``: ten more
evaluation seeds for BuNN and the two baselines it is paired with.

The first look (evaluation seeds 0-9 of :mod:`iclr25.graphs.bunn_headroom`, :mod:`iclr25.graphs.bunn_gate` and
:mod:`iclr25.graphs.bunn_deep`) left the row "BuNN >= the best tuned baseline" undecided by 0.03 points at the
1-point margin. The design of the second look was fixed before any of its runs was read: the evaluation seeds
``RECIPE["seeds"]`` (10-19; each its own graph, split and initialisation, by the same rule as seeds 0-9) for
BuNN (:func:`iclr25.graphs.bunn_deep.run`), the best tuned baseline and Platonov et al.'s GCN
(:func:`iclr25.graphs.bunn_headroom.run`), every model at the depth and learning rate its record tuned; the
chapter then reads every Minesweeper paper row once on all 20 seeds, with each look's interval at the
Bonferroni level ``RECIPE["level"]`` (two looks, 2.5 % each), and that reading is the verdict. No further look.

``python -m iclr25.graphs.bunn_look2`` (one thread, about 13 CPU minutes) writes ``weights/bunn-look2.json``:
the recipe, the sha256 of the modules that train the runs and of the records whose tuning they read, every
run (validation and test ROC-AUC, curve, first losses, CPU seconds) and a sha256 of the results. No model is
kept.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from iclr25.common.digest import file_sha256, json_sha256
from iclr25.graphs import bunn_deep, bunn_gate, bunn_headroom

WEIGHTS = bunn_headroom.WEIGHTS
NAME = "bunn-look2"
HERE = bunn_headroom.HERE

#: the second look: its seeds, the arms (in the order they are trained) and the per-look interval level
RECIPE: dict = dict(seeds=list(range(10, 20)), arms=["BuNN", "best", "GCN"], looks=2, level=0.975)

#: the modules whose code determines the runs (their sha256 goes into the record)
CODE = ("bunn_look2.py", "bunn_deep.py") + bunn_headroom.CODE


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


def arms() -> dict[str, dict]:
    """Every arm's model, depth and learning rate, read from the records of the first look."""
    hr, deep, gate = bunn_headroom.load_record(), bunn_deep.load_record(), bunn_gate.load_record()
    best = hr["results"]["best"]
    t = hr["results"]["tuning"][best]
    return {"BuNN": dict(model="BuNN", depth=deep["results"]["tuning"]["depth"], lr=deep["results"]["tuning"]["lr"]),
            "best": dict(model=best, depth=t["depth"], lr=t["lr"]),
            "GCN": dict(model=gate["results"]["model"], depth=gate["results"]["depth"], lr=gate["results"]["lr"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=WEIGHTS / f"{NAME}.json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    c_all, t_all = time.process_time(), time.time()
    spec = arms()
    results: dict = dict(arms={}, sources={n: m.load_record()["sha256_results"] for n, m in
                                           (("bunn-headroom", bunn_headroom), ("bunn-deep", bunn_deep),
                                            ("bunn-gate", bunn_gate))})
    for arm in RECIPE["arms"]:
        a = spec[arm]
        runs = {}
        for s in RECIPE["seeds"]:
            c0 = time.process_time()
            r = (bunn_deep.run(a["depth"], a["lr"], s) if arm == "BuNN"
                 else bunn_headroom.run(a["model"], a["depth"], a["lr"], s))
            runs[str(s)] = dict({k: r[k] for k in ("val", "test", "curve", "plateau", "loss_head")},
                                cpu_seconds=time.process_time() - c0)
            print(f"{a['model']}-{a['depth']} seed {s}: test {r['test']:.4f} ({runs[str(s)]['cpu_seconds']:.0f} s)",
                  flush=True)
        results["arms"][arm] = dict(a, runs=runs)
    info = dict(recipe=RECIPE, code_sha256=code_sha256(), results=results, sha256_results=json_sha256(results),
                torch=torch.__version__, cpu_seconds=time.process_time() - c_all, wall_seconds=time.time() - t_all)
    args.out.write_text(json.dumps(info, indent=1))
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
