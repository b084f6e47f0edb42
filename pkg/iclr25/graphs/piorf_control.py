"""Can added edges pay in this stand-in at all? The rewiring positive control of the chapter ``graphs/piorf``.

At two blocks every edge arm of the fixed-length records (:mod:`iclr25.graphs.piorf_arms`,
:mod:`iclr25.graphs.piorf_reach`) is within a percent of the mesh alone: PIORF as published, random partners for
its sources, moving random hubs and FoSR-style edges alike. That cannot tell "the velocity's choice of partners
does not matter" from "no set of about a dozen edges can matter at two blocks". This record adds edge sets that
are much larger than PIORF's, at the same depth, so that the stand-in shows whether *edges* can lower the error.

Pre-registration (fixed in :data:`ARMS`, :data:`RECIPE` and this docstring before any of these runs was made):

* everything as ``piorf_fixed.RECIPE``: data, 2 blocks at width 32, the 3000-step schedule without early
  stopping, evaluation seeds 10-19 (the same frames, noise and initial weights per seed as every arm of the
  earlier records), one look, paired 95 % Student-t intervals of the per-seed relative change against ``none``;
* the arms, all at learning rate 4e-3 (no tuning), every added edge sent through the mesh edges' normaliser and
  encoder (as PIORF's official code does):

  - ``none``: the mesh alone (re-trained with ``piorf_fixed``'s simulator: its whole-mesh errors must be the
    reach record's);
  - ``virtual``: a virtual global node (its own node type, index 7, unused by the mesh; at the centroid of the
    fluid nodes; velocity 0, pressure the frame's mean) joined in both directions to every fluid node;
  - ``official10``, ``official30``: PIORF as published (the projection rule of ``piorf_fixed``, one direction per
    seed) with the sources the ``ratio`` = 10 % and 30 % of nodes of lowest Ollivier-Ricci node curvature;
  - ``random10``, ``random30``: a uniformly random fluid partner for each of the same sources (one draw per mesh,
    the generator of ``piorf_fixed.fit``);

* the whole-mesh errors are read on the mesh's nodes only (the virtual node is left out of every mean);
* the rows (bar 5 %, the chapter's): **an arm pays** when the interval of its one-step velocity RMSE change
  against ``none`` lies below -5 %; it is **ruled out** when the interval lies above -5 %; undecided otherwise.
  **The partner choice** at each ratio: ``official`` vs ``random`` at the same ratio, same bar;
* the reading (generated in the chapter from these rows): if ``virtual`` or a ``random`` arm pays and PIORF at
  the same ratio (for ``virtual``: at either ratio) is ruled out from paying, the stand-in rewards edges and the
  mechanism negative is decisive about PIORF's partner choice; if every arm is ruled out from paying, the
  stand-in cannot reward rewiring by the bar at two blocks; otherwise it is unresolved;
* per-node errors (defect 5 of the review): for every run and for each edge structure of the ``official`` and
  ``random`` arms, the one-step RMSE (velocity and pressure) on its sources, its hubs (the partners that are not
  sources, per frame), the ring (one mesh hop around them) and the rest of the mesh; reported as paired changes
  against ``none`` on the same nodes, descriptive, with no bar;
* order of the runs: seed by seed, every arm in :data:`ORDER` for seed 10, then seed 11, ...; the record is
  written after every run; no run starts after the registered cut-off :data:`CUTOFF` (UTC); a row is read on the
  seeds that have all its arms, and a row with fewer than ``min_seeds`` = 5 such seeds is undecided.

``python -m iclr25.graphs.piorf_control`` (one thread) writes ``weights/piorf-control.json``; :func:`load` checks
its sha256. Runs are ``piorf_arms.fit`` (which is ``piorf_fixed.fit``) and ``piorf_fixed.evaluate``.
"""

from __future__ import annotations

import argparse
import datetime as dt
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
from iclr25.graphs.curvature import node_curvature, ollivier_ricci
from iclr25.graphs.rewiring import piorf_partners, piorf_sources, random_partners

HERE = Path(__file__).parent
PATH = HERE / "weights" / "piorf-control.json"
RERUN = "python -m iclr25.graphs.piorf_control"

#: the pre-registered arms: name -> (``piorf_fixed`` method, learning rate, source ratio or None, virtual node)
ARMS: dict[str, tuple[str, float, float | None, bool]] = {
    "none": ("none", 4e-3, None, False), "virtual": ("none", 4e-3, None, True),
    "official10": ("projection", 4e-3, 0.10, False), "random10": ("random", 4e-3, 0.10, False),
    "official30": ("projection", 4e-3, 0.30, False), "random30": ("random", 4e-3, 0.30, False)}

#: the run order within each seed
ORDER: tuple[str, ...] = ("none", "virtual", "official30", "random30", "official10", "random10")

#: the edge structures whose sources, hubs and rings every run is read on
STRUCTURES: tuple[str, ...] = ("official10", "random10", "official30", "random30")

#: the node type of the virtual node (one-hot index 7: no mesh node has it)
VIRTUAL_TYPE = 7

#: no run starts after this time (UTC), fixed before the start
CUTOFF = "2026-12-07T00:33:00+00:00"

RECIPE: dict = dict(F.RECIPE, methods=list(ARMS), arms={k: list(v) for k, v in ARMS.items()}, order=list(ORDER),
                    structures=list(STRUCTURES), virtual_type=VIRTUAL_TYPE, min_seeds=5, cutoff=CUTOFF)


def load(path: Path = PATH) -> dict:
    """The committed record, refused if its content does not match its sha256."""
    return load_record(path, RERUN)


def with_ratios(trajs: list[dict], ratios: list[float]) -> dict[float, list[dict]]:
    """Per ratio, copies of the trajectories whose PIORF sources are the ``ratio`` share of nodes of lowest
    Ollivier-Ricci node curvature (``piorf_depth.trajectories``'s rule at another ratio)."""
    gammas = [node_curvature(t["edge_index"], ollivier_ricci(t["edge_index"], t["n"]), t["n"]) for t in trajs]
    return {r: [dict(t, sources=piorf_sources(g, r, tiebreak=t["pos"])) for t, g in zip(trajs, gammas)]
            for r in ratios}


def with_virtual(tr: dict, node_type: int = VIRTUAL_TYPE) -> dict:
    """A copy of one trajectory with a virtual node (index ``n``): its own node type, at the centroid of the fluid
    nodes, velocity 0 and the frame's mean pressure, joined in both directions to every fluid node by edges that
    are part of the mesh's edge set (so they share its normaliser and encoder)."""
    n, fluid = tr["n"], tr["fluid"]
    f = fluid.nonzero().flatten()
    v = torch.full_like(f, n)
    T = len(tr["u"])
    return dict(tr, n=n + 1, pos=torch.cat([tr["pos"], tr["pos"][fluid].mean(0, keepdim=True)]),
                node_type=torch.cat([tr["node_type"], tr["node_type"].new_tensor([node_type])]),
                fluid=torch.cat([fluid, fluid.new_zeros(1)]),
                u=torch.cat([tr["u"], tr["u"].new_zeros(T, 1, 2)], 1),
                p=torch.cat([tr["p"], tr["p"].mean(1, keepdim=True)], 1),
                edge_index=torch.cat([tr["edge_index"], torch.stack([f, v]), torch.stack([v, f])], 1))


def random_draw(trajs: list[dict], seed: int) -> list[torch.Tensor]:
    """The random partners ``piorf_fixed.fit`` draws at ``seed`` for these trajectories' sources."""
    g = torch.Generator().manual_seed(1000 + seed)
    return [random_partners(t["sources"], t["n"], g, t["fluid"]) for t in trajs]


def node_classes(tr: dict, method: str, seed: int, rand: list, frame: int) -> torch.Tensor:
    """[N] class of every mesh node for one edge structure at one input frame: 0 source, 1 hub (a partner that is
    not a source), 2 ring (one mesh hop around a source or hub), 3 the rest."""
    src = tr["sources"]
    if method == "projection":
        hub = piorf_partners(tr["u"][frame], src, "projection", F.projection_weight(seed), candidates=tr["fluid"])
    else:
        hub = rand[tr["k"]]
    c = torch.full((tr["n"],), 3, dtype=torch.long)
    c[D.hop_mask(tr["edge_index"], tr["n"], torch.cat([src, hub]), 1)] = 2
    c[hub] = 1
    c[src] = 0
    return c


def class_metrics(sq: list, classes: list[torch.Tensor]) -> dict[str, list[float]]:
    """One-step RMSE x1e3 (``1`` velocity, ``P`` pressure) per node class (sources, hubs, ring, rest), means over
    frames, from per-trajectory squared errors ``sq`` ([T-1, N] each) and classes ``classes`` ([T-1, N] each)."""
    out = {}
    for j, q in enumerate("1P"):
        vals = []
        for k in range(4):
            r = torch.cat([((e[j] * (C == k)).sum(1) / (C == k).sum(1).clamp_min(1)).sqrt()
                           for e, C in zip(sq, classes)])
            vals.append(float(r.mean()) * 1e3)
        out[q] = vals
    return out


def whole_mesh(ev_parts: list[dict], sq: list, n_mesh: list[int]) -> dict[str, float]:
    """Whole-mesh one-step velocity and pressure RMSE x1e3 on the mesh's nodes (``n_mesh`` per trajectory) from
    the squared errors, and the rollout RMSE of ``piorf_fixed.evaluate`` per trajectory rescaled to the mesh's
    nodes (an added node's rollout error is exactly 0: it is never integrated and its target velocity is 0)."""
    r1 = torch.cat([e[0][:, :n].mean(1).sqrt() * 1e3 for e, n in zip(sq, n_mesh)]).mean()
    rP = torch.cat([e[1][:, :n].mean(1).sqrt() * 1e3 for e, n in zip(sq, n_mesh)]).mean()
    rH = sum(p["rH"] * (len(e[0][0]) / n) ** 0.5 for p, e, n in zip(ev_parts, sq, n_mesh)) / len(ev_parts)
    return dict(r1=float(r1), rP=float(rP), rH=float(rH))


def run(arm: str, seed: int, trajs: list[dict], by_ratio: dict, recipe: dict = RECIPE) -> dict:
    """Train and evaluate one arm at one seed: whole-mesh metrics, per-class metrics for every structure, log."""
    method, lr, ratio, virtual = recipe["arms"][arm]
    r = dict(recipe, arms={arm: [method, lr, method != "none"]})  # added edges shared; none: the mesh's own
    data = [with_virtual(t) for t in trajs] if virtual else by_ratio[ratio] if ratio else trajs
    sim, rand, log = A.fit(arm, seed, data, r, curve=True)
    _, _, test = D.split(data, recipe)
    _, _, test0 = D.split(trajs, recipe)
    parts = [F.evaluate(sim, method, rand, [tr], F.context(seed, 4000), recipe=r) for tr in test]
    sq = [p["sq"][0] for p in parts]
    out = whole_mesh(parts, sq, [t["n"] for t in test0])
    sq_mesh = [(e[0][:, :t["n"]], e[1][:, :t["n"]]) for e, t in zip(sq, test0)]
    split = {}
    for s in recipe["structures"]:
        m, _, ratio_s, _ = recipe["arms"][s]
        rs = by_ratio[ratio_s]
        rand_s = random_draw(rs, seed)
        if s == arm and method == "random":
            assert all(torch.equal(a, b) for a, b in zip(rand_s, rand)), "the random draw differs from fit's"
        _, _, test_s = D.split(rs, recipe)
        classes = [torch.stack([node_classes(tr, m, seed, rand_s, f) for f in range(len(tr["u"]) - 1)])
                   for tr in test_s]
        split[s] = class_metrics(sq_mesh, classes)
        split[s]["count"] = [float(torch.stack([(C == k).float().mean() for C in classes]).mean())
                             for k in range(4)]
    return dict(out, split=split, curve=log["curve"], steps=log["steps"],
                loss_head=log["losses"][:recipe["n_loss_head"]])


def code_fingerprint() -> str:
    """``piorf_arms``'s fingerprint together with the stripped source of this script's run."""
    parts = [A.code_fingerprint()] + [strip_source(inspect.getsource(f)) for f in
                                      (with_ratios, with_virtual, random_draw, node_classes, class_metrics,
                                       whole_mesh, run, main)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=PATH)
    args = parser.parse_args()
    torch.set_num_threads(1)
    t_all = time.time()
    trajs = D.trajectories(RECIPE)
    by_ratio = with_ratios(trajs, sorted({a[2] for a in ARMS.values() if a[2]}))
    old = load(args.out) if args.out.exists() else None
    if old is not None:  # the same pre-registered evaluation, resumed
        assert old["recipe"] == json.loads(json.dumps(RECIPE)) and old["code"] == code_fingerprint()
    runs, cpu = (dict(old["results"]["runs"]), old["cpu_s"]) if old else ({}, 0.0)
    cutoff = dt.datetime.fromisoformat(CUTOFF)
    for s in RECIPE["seeds"]:
        for arm in RECIPE["order"]:
            if f"{arm},{s}" in runs:
                continue
            if dt.datetime.now(dt.timezone.utc) >= cutoff:
                print(f"cut-off {CUTOFF} reached: stopped before {arm} at seed {s}", flush=True)
                return
            c0 = time.process_time()
            runs[f"{arm},{s}"] = res = run(arm, s, trajs, by_ratio)
            res["cpu_seconds"] = time.process_time() - c0
            cpu += res["cpu_seconds"]
            rec = dict(recipe=RECIPE, code=code_fingerprint(), torch=torch.__version__, results=dict(runs=runs),
                       cpu_s=cpu)
            rec["sha256"] = record_sha256(rec)
            args.out.write_text(json.dumps(rec, indent=1))  # after every run: a stopped job leaves a record
            print(f"seed {s} {arm}: RMSE-1 {res['r1']:.4f} RMSE-H {res['rH']:.3f} P {res['rP']:.2f} "
                  f"({res['cpu_seconds']:.0f} cpu s, {cpu:.0f} in all, {time.time() - t_all:.0f} s wall)",
                  flush=True)


if __name__ == "__main__":
    main()
