"""Does this stand-in reward reach where PIORF's edges act? The reach record of the chapter ``graphs/piorf``.

The fixed-length records (:mod:`iclr25.graphs.piorf_fixed`, :mod:`iclr25.graphs.piorf_wide`,
:mod:`iclr25.graphs.piorf_arms`) find that PIORF as its official code builds it does not lower the one-step error
of a 2-block simulator by 5 %. Whether that says anything about PIORF's edges depends on whether the task rewards
reach *on the nodes those edges can change*; the records hold per-node errors only for the mesh alone, the
chapter's variant and random partners. And their two equal-parameter arms (4 blocks at width 24; 2 blocks at width
43) train at 2e-3, the rate a 375-step tuning chose, while the full schedule reversed that choice wherever both
rates were run.

Pre-registration (fixed in :data:`ARMS`, :data:`RECIPE` and this docstring before any of these runs was made):

* everything as ``piorf_fixed.RECIPE``: data, the 3000-step schedule without early stopping, evaluation seeds
  10-19 (the same frames, noise, random partners and initial weights per seed as every arm of those records),
  one look, paired 95 % Student-t intervals over seeds;
* the arms, all at learning rate 4e-3 (no tuning): ``none`` (the mesh alone, 2 blocks), ``deep`` (4 blocks),
  ``official`` (PIORF as published: the projection rule, edges shared with the mesh's, ``piorf_arms``),
  ``random4`` (random partners), ``matched4`` (4 blocks at width 24) and ``wide4`` (2 blocks at width 43).
  The first four re-train runs already in the records (same code, same seeds: their whole-mesh errors must be
  the records' to the last digit); ``matched4`` and ``wide4`` are new;
* the touched nodes (per seed and test frame): the nodes within ``blocks - 1`` = 1 mesh hop of PIORF-as-published's
  sources and the partners its projection (that seed's direction) picks from the frame's velocity; for the
  comparison with ``random4`` also those of the random partners. Per run the record keeps the one-step RMSE
  (velocity and pressure) on the touched nodes and with the touched nodes' error set to zero (the oracle ceiling);
* the decision rule (LOCAL = 10 %, the chapter's local margin): with ``c_deep`` the paired relative change of the
  touched-node velocity RMSE of ``deep`` against ``none`` and ``c_off`` that of ``official`` against ``none``:

  - **reach pays where PIORF acts** when the whole interval of ``c_deep`` lies below -LOCAL; then, if the
    interval of ``c_off`` rules a LOCAL reduction out, the paper rows' NOs are decisive about PIORF's edges;
  - **reach does not pay there** when the interval of ``c_deep`` rules a LOCAL reduction out; then the paper rows
    are undecided, with that reason (the task cannot reward any edge that acts only there);
  - otherwise (``c_deep``'s interval contains -LOCAL) the paper rows are undecided: the task's capacity to
    reward reach there is not resolved;

* also reported (labelled checks, not paper rows): reach at equal parameters at equal rates, ``matched4`` vs
  ``none`` and ``deep`` vs ``wide4`` (whole mesh and touched nodes, bar 5 %); PIORF-as-published vs ``random4`` on
  the touched nodes (bar LOCAL); every arm beats persistence by 5 %, and ``matched4`` and ``wide4`` pass
  ``piorf_fixed``'s plateau gate (validation RMSE falls by less than 5 % over the last quarter, mean over seeds);
* order of the runs: first ``none``, ``deep``, ``official`` for every seed, then ``random4``, ``matched4``,
  ``wide4`` for every seed. The record is written after every run; the job is stopped, whatever the results, at a
  wall-clock cut-off fixed before the start (21:40 UTC on the day of the run); a row is read on the seeds that
  have all its arms, and a row with fewer than 5 such seeds is undecided.

``python -m iclr25.graphs.piorf_reach`` (one thread) writes ``weights/piorf-reach.json``; :func:`load` checks its
sha256.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import time
from pathlib import Path

import torch

from iclr25.common.digest import load_record, record_sha256, strip_source
from iclr25.graphs import piorf_arms as A
from iclr25.graphs import piorf_depth as D
from iclr25.graphs import piorf_fixed as F
from iclr25.graphs.rewiring import piorf_partners

HERE = Path(__file__).parent
PATH = HERE / "weights" / "piorf-reach.json"
RERUN = "python -m iclr25.graphs.piorf_reach"

#: the pre-registered arms: name -> (``piorf_fixed`` method, learning rate, added edges shared, latent width)
ARMS: dict[str, tuple[str, float, bool, int]] = {
    "none": ("none", 4e-3, False, 32), "deep": ("deep", 4e-3, False, 32),
    "official": ("projection", 4e-3, True, 32), "random4": ("random", 4e-3, False, 32),
    "matched4": ("matched", 4e-3, False, 32), "wide4": ("none", 4e-3, False, 43)}

#: the run order: the decision's arms first, then the rest
ORDER: tuple[tuple[str, ...], ...] = (("none", "deep", "official"), ("random4", "matched4", "wide4"))

#: arms already in the committed records (re-trained for their per-node errors; the curve is not re-read)
RERUNS = ("none", "deep", "official", "random4")

#: ``piorf_fixed``'s recipe with these arms and the local margin of the decision rule
RECIPE: dict = dict(F.RECIPE, methods=list(ARMS), arms={k: list(v) for k, v in ARMS.items()}, local=0.10,
                    min_seeds=5, order=[list(o) for o in ORDER])


def load(path: Path = PATH) -> dict:
    """The committed record, refused if its content does not match its sha256."""
    return load_record(path, RERUN)


def arm_recipe(arm: str, recipe: dict = RECIPE) -> dict:
    """The recipe one arm trains with: ``piorf_arms``'s arm table entry and the arm's latent width."""
    method, lr, shared, latent = recipe["arms"][arm]
    return dict(recipe, latent=latent, arms={arm: [method, lr, shared]})


def touched_mask(tr: dict, seed: int, rand: list, hops: int, with_random: bool,
                 frames: int | None = None) -> torch.Tensor:
    """[T-1, N]: the nodes within ``hops`` mesh hops of PIORF-as-published's sources and of the partners its
    projection (``piorf_fixed.projection_weight(seed)``) picks from each input frame's velocity; with
    ``with_random`` also of the random partners ``rand`` of that mesh."""
    T = frames or len(tr["u"])
    w = F.projection_weight(seed)
    M = torch.zeros(T - 1, tr["n"], dtype=torch.bool)
    for f in range(T - 1):
        ends = [tr["sources"], piorf_partners(tr["u"][f], tr["sources"], "projection", w, candidates=tr["fluid"])]
        if with_random:
            ends.append(rand[tr["k"]])
        M[f] = D.hop_mask(tr["edge_index"], tr["n"], torch.cat(ends), hops)
    return M


def node_metrics(sq: list, masks: dict[str, list[torch.Tensor]]) -> dict[str, float]:
    """From one run's per-node one-step squared errors ``sq`` (per test trajectory: velocity and pressure,
    [T-1, N]) and touched masks per set: for each set and quantity (``1`` velocity, ``P`` pressure) the RMSE x1e3
    on the touched nodes (``local``) and with their error set to zero (``oracle``), means over frames."""
    out = {}
    for name, Ms in masks.items():
        for j, q in enumerate("1P"):
            loc = torch.cat([((e[j] * M).sum(1) / M.sum(1)).sqrt() for e, M in zip(sq, Ms)])
            orc = torch.cat([(e[j] * ~M).mean(1).sqrt() for e, M in zip(sq, Ms)])
            out[f"local_{name}_{q}"] = float(loc.mean()) * 1e3
            out[f"oracle_{name}_{q}"] = float(orc.mean()) * 1e3
    out["share"] = float(torch.stack([M.float().mean() for M in masks["off"]]).mean())
    return out


def run(arm: str, seed: int, trajs: list[dict], test: list[dict], recipe: dict = RECIPE) -> dict:
    """Train and evaluate one arm at one seed; the whole-mesh metrics, the touched-node metrics and the log."""
    r = arm_recipe(arm, recipe)
    sim, rand, log = A.fit(arm, seed, trajs, r, curve=arm not in RERUNS)
    ev = F.evaluate(sim, r["arms"][arm][0], rand, test, F.context(seed, 4000), recipe=r)
    hops = recipe["blocks"] - 1
    masks = {"off": [touched_mask(tr, seed, rand, hops, False) for tr in test],
             "offr": [touched_mask(tr, seed, rand, hops, True) for tr in test]}
    return dict(r1=ev["r1"], rH=ev["rH"], rP=ev["rP"], **node_metrics(ev["sq"], masks), curve=log["curve"],
                steps=log["steps"], loss_head=log["losses"][:recipe["n_loss_head"]])


def code_fingerprint() -> str:
    """``piorf_arms``'s fingerprint together with the stripped source of this script's run."""
    parts = [A.code_fingerprint()] + [strip_source(inspect.getsource(f)) for f in
                                      (arm_recipe, touched_mask, node_metrics, run, main)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=PATH)
    args = parser.parse_args()
    torch.set_num_threads(1)
    t_all = time.time()
    trajs = D.trajectories(RECIPE)
    _, _, test = D.split(trajs, RECIPE)
    old = load(args.out) if args.out.exists() else None
    if old is not None:  # the same pre-registered evaluation, resumed
        assert old["recipe"] == json.loads(json.dumps(RECIPE)) and old["code"] == code_fingerprint()
    runs, cpu = (dict(old["results"]["runs"]), old["cpu_s"]) if old else ({}, 0.0)
    persist = float(torch.cat([D.rmse(t["u"][:-1], t["u"][1:]) for t in test]).mean())
    for group in RECIPE["order"]:
        for s in RECIPE["seeds"]:
            for arm in group:
                if f"{arm},{s}" in runs:
                    continue
                c0 = time.process_time()
                runs[f"{arm},{s}"] = res = run(arm, s, trajs, test)
                res["cpu_seconds"] = time.process_time() - c0
                cpu += res["cpu_seconds"]
                rec = dict(recipe=RECIPE, code=code_fingerprint(), torch=torch.__version__,
                           results=dict(runs=runs, persistence=persist), cpu_s=cpu)
                rec["sha256"] = record_sha256(rec)
                args.out.write_text(json.dumps(rec, indent=1))  # after every run: a stopped job leaves a record
                print(f"seed {s} {arm}: RMSE-1 {res['r1']:.4f} touched {res['local_off_1']:.2f} "
                      f"({res['cpu_seconds']:.0f} cpu s, {cpu:.0f} in all, {time.time() - t_all:.0f} s wall)",
                      flush=True)


if __name__ == "__main__":
    main()
