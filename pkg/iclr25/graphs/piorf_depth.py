"""The deeper PIORF experiment of the chapter ``graphs/piorf``: simulators with ``RECIPE["blocks"]`` blocks.

With one block an added edge changes the inputs of its two end nodes only, and PIORF's few edges touch about 3 %
of the nodes: even a perfect prediction there cannot lower the whole-mesh RMSE by the paper rows' 5 % margin.
This script trains the chapter's simulators deeper, on the chapter's data (CylinderFlow-mini, the ``full`` scale's
trajectories and frames), so that what the new edges hear spreads over their neighbourhoods:

* the mesh alone, PIORF, random partners for PIORF's sources and FoSR-style edges, all with
  ``RECIPE["blocks"]`` blocks, and the reach control, the mesh alone with ``RECIPE["deep_blocks"]`` blocks;
* every method's learning rate is chosen from ``RECIPE["lrs"]`` on the tuning seed (validation one-step RMSE
  after ``RECIPE["tune_steps"]`` steps), the grid extended by a factor 2 beyond an edge where the best value
  lies (at most ``RECIPE["extend"]`` times), as in the chapter;
* the evaluation is read in two looks fixed in advance (``RECIPE["looks"]``: the first 5 seeds, then all 10);
  ``--add-seeds`` trains the seeds of ``RECIPE["seeds"]`` the record lacks, with the record's learning rates,
  and adds them to it (the record keeps the code sha256 of each look);
* each evaluation seed of ``RECIPE["seeds"]`` trains every method with the same frames and (same depth) the same
  initial weights. The learning rate decays exponentially to ``RECIPE["decay"]`` of its value over
  ``RECIPE["max_steps"]``; the validation one-step RMSE is read every ``RECIPE["check_every"]`` steps, and a run
  stops when it has not improved by ``RECIPE["min_gain"]`` (relative) for ``RECIPE["patience"]`` readings. The
  weights of the best reading are evaluated.

Evaluation is the chapter's: one-step velocity RMSE (x1e3, units of the inlet speed), the mean RMSE of 10-step
rollouts (PIORF's partners recomputed from the predicted velocity), one-step pressure RMSE, and, for the rows
PIORF vs the mesh alone and vs random partners, the oracle ceiling (how much a perfect prediction on the nodes
within ``blocks - 1`` hops of the added edges' ends would lower the baseline's RMSE) and the RMSE on those nodes.

``python -m iclr25.graphs.piorf_depth`` (one thread) writes ``weights/piorf-depth.json``: the recipe, the sha256
of the modules that determine the runs, the tuning tables, every run's validation curve and first training
losses, the per-seed metrics, and CPU seconds; :func:`load` checks its sha256. The chapter re-trains the first
steps of one evaluation run live (:func:`first_losses`) and compares them with the record.
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from pathlib import Path

import numpy as np
import torch

from iclr25.common.digest import file_sha256, load_record, record_sha256
from iclr25.graphs.curvature import node_curvature, ollivier_ricci
from iclr25.graphs.flow import cylinder_flow_dataset
from iclr25.graphs.mesh import FlowSimulator, NodeType, mesh_edge_features, triangles_to_edges
from iclr25.graphs.rewiring import fosr_edges, new_edges, piorf_partners, piorf_sources, random_partners

HERE = Path(__file__).parent
PATH = HERE / "weights" / "piorf-depth.json"
RERUN = "python -m iclr25.graphs.piorf_depth"

#: everything that determines the record (data: the chapter's ``full`` trajectories and frames)
RECIPE: dict = dict(
    data=dict(n_train=5, n_val=1, n_test=2, frames=50, every=100, spinup=1200, h_min=0.013, h_max=0.045, seed=0),
    ratio=0.03, rule="speed", latent=32, blocks=2, deep_blocks=4, methods=["none", "random", "piorf", "fosr", "deep"],
    lrs=[2e-3, 4e-3, 8e-3], extend=2, tune_steps=375, tune_seed=100, seeds=list(range(10)), looks=[5, 10],
    max_steps=3000, check_every=150, patience=4, min_gain=0.01, decay=0.05, noise=0.02,
    horizon=10, start_every=10, n_loss_head=10)

#: the modules whose code determines the runs
CODE = ("piorf_depth.py", "mesh.py", "rewiring.py", "curvature.py", "flow.py")


def code_sha256() -> dict[str, str]:
    """sha256 of every module in :data:`CODE`."""
    return {name: file_sha256(HERE / name) for name in CODE}


def load(path: Path = PATH) -> dict:
    """The committed record, refused if its content does not match its sha256."""
    return load_record(path, RERUN)


def trajectories(recipe: dict = RECIPE) -> list[dict]:
    """The chapter's data: one dict per trajectory with its mesh graph, PIORF's sources and FoSR's edges."""
    d = recipe["data"]
    data = cylinder_flow_dataset(d["n_train"] + d["n_val"] + d["n_test"], frames=d["frames"], every=d["every"],
                                 spinup=d["spinup"], h_min=d["h_min"], h_max=d["h_max"], seed=d["seed"])
    out = []
    for k, x in enumerate(data):
        n = len(x["pos"])
        pos = torch.as_tensor(x["pos"])
        ei = triangles_to_edges(torch.as_tensor(x["cells"]), n)
        gamma = node_curvature(ei, ollivier_ricci(ei, n), n)
        node_type = torch.as_tensor(x["node_type"])
        src = piorf_sources(gamma, recipe["ratio"], tiebreak=pos)
        out.append(dict(k=k, n=n, pos=pos, node_type=node_type, fluid=FlowSimulator.integrated(node_type),
                        u=torch.as_tensor(x["velocity"]), p=torch.as_tensor(x["pressure"]), edge_index=ei,
                        sources=src, fosr=fosr_edges(ei, n, len(src))))
    return out


def split(trajs: list[dict], recipe: dict = RECIPE) -> tuple[list[dict], list[dict], list[dict]]:
    """Training, validation and test trajectories."""
    a, b = recipe["data"]["n_train"], recipe["data"]["n_train"] + recipe["data"]["n_val"]
    return trajs[:a], trajs[a:b], trajs[b:]


def added(method: str, tr: dict, u: torch.Tensor, rand: list[torch.Tensor], rule: str = RECIPE["rule"]):
    """The edges a method adds to the mesh at one frame (both directions, none already in the mesh)."""
    ei, src = tr["edge_index"], tr["sources"]
    if method in ("none", "deep"):
        return ei[:, :0]
    if method == "random":
        return new_edges(ei, src, rand[tr["k"]], tr["n"])
    if method == "fosr":
        return new_edges(ei, tr["fosr"][0], tr["fosr"][1], tr["n"])
    return new_edges(ei, src, piorf_partners(u, src, rule, None, candidates=tr["fluid"]), tr["n"])


def rmse(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """RMSE x 1e3 over the nodes of each frame."""
    return ((a - b) ** 2).sum(-1).mean(-1).sqrt() * 1e3


def batched_step(sim, method, tr, U, rand):
    """One step for a batch of frames U [B, N, 2] of one mesh as one disjoint graph."""
    B, n = U.shape[0], tr["n"]
    ei = torch.cat([tr["edge_index"] + b * n for b in range(B)], dim=1)
    new = torch.cat([added(method, tr, U[b], rand) + b * n for b in range(B)], dim=1)
    nxt, p = sim.step(U.reshape(-1, 2), tr["node_type"].repeat(B), tr["pos"].repeat(B, 1), ei, new)
    return nxt.reshape(B, n, 2), p.reshape(B, n)


def one_step(sim, method, rand, split_):
    """Mean one-step velocity RMSE over a split."""
    return float(torch.cat([rmse(batched_step(sim, method, tr, tr["u"][:-1], rand)[0], tr["u"][1:])
                            for tr in split_]).mean())


def evaluate(sim, method, rand, test, recipe: dict = RECIPE) -> dict:
    """One-step velocity and pressure RMSE, the mean rollout RMSE, and per trajectory the one-step squared
    errors [T-1, N] of velocity and pressure."""
    H, T = recipe["horizon"], recipe["data"]["frames"]
    one, one_p, sq, roll = [], [], [], []
    for tr in test:
        u, p = batched_step(sim, method, tr, tr["u"][:-1], rand)
        one.append(rmse(u, tr["u"][1:]))
        one_p.append(rmse(p[..., None], tr["p"][1:, :, None]))
        sq.append((((u - tr["u"][1:]) ** 2).sum(-1), (p - tr["p"][1:]) ** 2))
        starts = torch.arange(0, T - 1 - H, recipe["start_every"])
        u, errs = tr["u"][starts], []
        for h in range(H):
            u, _ = batched_step(sim, method, tr, u, rand)
            errs.append(rmse(u, tr["u"][starts + h + 1]))
        roll.append(torch.stack(errs, 1))
    return dict(r1=float(torch.cat(one).mean()), rP=float(torch.cat(one_p).mean()),
                rH=float(torch.cat(roll).mean()), sq=sq)


def fit(method: str, seed: int, lr: float, trajs: list[dict], steps: int | None = None,
        recipe: dict = RECIPE, patience: bool = True, stop: int | None = None) -> tuple[FlowSimulator, list, dict]:
    """Train one simulator (the chapter's ``fit_simulator`` with a patience rule); returns the simulator at its
    best validation reading, its random partners (one draw per mesh) and a log (losses, validation curve).
    ``stop``: train only that many steps of the ``steps``-step schedule."""
    steps = steps or recipe["max_steps"]
    train, val, _ = split(trajs, recipe)
    T = recipe["data"]["frames"]
    g = torch.Generator().manual_seed(1000 + seed)  # frame order and random partners
    gen = torch.Generator().manual_seed(2000 + seed)  # training noise
    rand = [random_partners(t["sources"], t["n"], g, t["fluid"]) for t in trajs]
    torch.manual_seed(seed)
    blocks = recipe["deep_blocks"] if method == "deep" else recipe["blocks"]
    sim = FlowSimulator(recipe["latent"], blocks, layers=1)

    def noisy(tr, t):
        z = torch.randn(tr["u"][t].shape, generator=gen)
        return tr["u"][t] + recipe["noise"] * z * (tr["node_type"] == NodeType.NORMAL)[:, None]

    X, E, A, DV, P = [], [], [], [], []
    for tr in train:
        E.append(mesh_edge_features(tr["pos"], tr["edge_index"]))
        for t in range(0, T - 1, 3):
            u = noisy(tr, t)
            X.append(sim.node_features(u, tr["node_type"]))
            A.append(mesh_edge_features(tr["pos"], added(method, tr, u, rand)))
            DV.append((tr["u"][t + 1] - u)[sim.integrated(tr["node_type"])])
            P.append(tr["p"][t + 1][:, None])
    fits = [(sim.node_norm, X), (sim.edge_norm, E), (sim.dv_norm, DV), (sim.p_norm, P)]
    for norm, vals in fits + ([(sim.added_norm, A)] if method not in ("none", "deep") else []):
        norm.fit(torch.cat(vals))
    opt = torch.optim.Adam(sim.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=recipe["decay"] ** (1 / steps))
    losses, curve, best, best_state, stale = [], [], np.inf, None, 0
    for i in range(steps + 1):
        if patience and i > 0 and (i % recipe["check_every"] == 0 or i == steps):
            sim.eval()
            v = one_step(sim, method, rand, val)
            sim.train()
            curve.append((i, v))
            if v < best * (1 - recipe["min_gain"]):
                stale = 0
            else:
                stale += 1
            if v < best:
                best, best_state = v, copy.deepcopy(sim.state_dict())
            if stale >= recipe["patience"]:
                break
        if i == steps or i == stop:
            break
        k = int(torch.randint(len(train), (1,), generator=g))
        t = int(torch.randint(T - 1, (1,), generator=g))
        tr = train[k]
        u = noisy(tr, t)
        loss = sim.loss(u, tr["node_type"], tr["pos"], tr["edge_index"], tr["u"][t + 1], tr["p"][t + 1],
                        added(method, tr, u, rand))
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    if best_state is not None:
        sim.load_state_dict(best_state)
    return sim.eval(), rand, dict(losses=losses, curve=curve, steps=len(losses),
                                  stopped=len(losses) < steps)


def first_losses(record: dict, method: str, seed: int, trajs: list[dict] | None = None) -> list[float]:
    """The first ``n_loss_head`` training losses of one evaluation run, re-trained with the run's schedule (the
    chapter's live check that the record is what this code trains)."""
    recipe = record["recipe"]
    lr = record["results"]["lr"][method]
    _, _, log = fit(method, seed, lr, trajs or trajectories(recipe), recipe=recipe, patience=False,
                    stop=recipe["n_loss_head"])
    return log["losses"]


def hop_mask(edge_index: torch.Tensor, n: int, nodes: torch.Tensor, hops: int) -> torch.Tensor:
    """Boolean mask of the nodes within ``hops`` hops of ``nodes`` along ``edge_index``."""
    m = torch.zeros(n, dtype=torch.bool)
    m[nodes] = True
    for _ in range(hops):
        nxt = m.clone()
        nxt[edge_index[1][m[edge_index[0]]]] = True
        m = nxt
    return m


def touched(tr: dict, method: str, rand: list, hops: int, recipe: dict = RECIPE) -> torch.Tensor:
    """[T-1, N]: the nodes within ``hops`` mesh hops of the ends of PIORF's (and, for random, the random
    partners') added edges at each input frame: the only nodes whose outputs the added edges can change."""
    T = recipe["data"]["frames"]
    M = torch.zeros(T - 1, tr["n"], dtype=torch.bool)
    for f in range(T - 1):
        ends = [tr["sources"], piorf_partners(tr["u"][f], tr["sources"], recipe["rule"], None, candidates=tr["fluid"])]
        if method == "random":
            ends.append(rand[tr["k"]])
        M[f] = hop_mask(tr["edge_index"], tr["n"], torch.cat(ends), hops)
    return M


def touched_analysis(ev: dict, rand: dict, test: list[dict], recipe: dict = RECIPE) -> dict:
    """Per comparison (PIORF vs b): the touched share, the oracle ceiling of b's RMSE and both local RMSEs."""
    hops = recipe["blocks"] - 1
    out = {}
    for b, which in [("none", "1"), ("none", "P"), ("random", "1")]:
        j = 0 if which == "1" else 1
        full, oracle, loc_a, loc_b, share = [], [], [], [], []
        for i, tr in enumerate(test):
            M = touched(tr, b, rand[b], hops, recipe)
            eb, ea = ev[b]["sq"][i][j], ev["piorf"]["sq"][i][j]
            full.append(eb.mean(1).sqrt())
            oracle.append((eb * ~M).mean(1).sqrt())
            loc_b.append(((eb * M).sum(1) / M.sum(1)).sqrt())
            loc_a.append(((ea * M).sum(1) / M.sum(1)).sqrt())
            share.append(M.float().mean())
        f = float(torch.cat(full).mean())
        out[f"piorf,{b},{which}"] = dict(ceiling=1 - float(torch.cat(oracle).mean()) / f,
                                         local_piorf=float(torch.cat(loc_a).mean()) * 1e3,
                                         local_base=float(torch.cat(loc_b).mean()) * 1e3,
                                         touched=float(torch.stack(share).mean()))
    return out


def tune(method: str, trajs: list[dict], recipe: dict = RECIPE) -> tuple[float, dict]:
    """The chapter's learning-rate rule on the tuning seed: best validation one-step RMSE, grid extended at an edge."""
    _, val, _ = split(trajs, recipe)
    table: dict[float, float] = {}
    grid = list(recipe["lrs"])
    r = dict(recipe, max_steps=recipe["tune_steps"])
    while grid:
        for lr in grid:
            sim, rand, _ = fit(method, recipe["tune_seed"], lr, trajs, recipe=r, patience=False)
            table[lr] = one_step(sim, method, rand, val)
            print(f"  tune {method} lr {lr:g}: {table[lr]:.2f}", flush=True)
        best, tried = min(table, key=table.get), sorted(table)
        grid = ([] if len(table) >= len(recipe["lrs"]) + recipe["extend"] else
                [best / 2] if best == tried[0] else [best * 2] if best == tried[-1] else [])
    return min(table, key=table.get), {f"{k:g}": v for k, v in sorted(table.items())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=PATH)
    parser.add_argument("--time", action="store_true", help="time 50 steps per depth and exit")
    parser.add_argument("--add-seeds", action="store_true",
                        help="train the seeds of RECIPE['seeds'] missing from the record (its learning rates) and add them")
    args = parser.parse_args()
    torch.set_num_threads(1)
    c_all, t_all = time.process_time(), time.time()
    trajs = trajectories()
    _, _, test = split(trajs)
    print(f"data ready: {time.process_time() - c_all:.1f} cpu s", flush=True)
    if args.time:
        for m in ["none", "piorf", "deep"]:
            c0 = time.process_time()
            fit(m, 0, 4e-3, trajs, steps=50, patience=False)
            print(f"{m}: {(time.process_time() - c0) / 50 * 1000:.1f} cpu ms/step", flush=True)
        return
    old = load(args.out) if args.add_seeds else None
    if old is not None:  # the second look: same data, learning rates and stopping rule, more seeds
        lr, tuning, runs = old["results"]["lr"], old["results"]["tuning"], dict(old["results"]["runs"])
        seeds = [s for s in RECIPE["seeds"] if f"none,{s}" not in runs]
    else:
        lr, tuning, runs, seeds = {}, {}, {}, RECIPE["seeds"]
        for m in RECIPE["methods"]:
            c0 = time.process_time()
            lr[m], tuning[m] = tune(m, trajs)
            print(f"{m}: lr {lr[m]:g} ({time.process_time() - c0:.0f} cpu s)", flush=True)
    for s in seeds:
        ev, rands = {}, {}
        for m in RECIPE["methods"]:
            c0 = time.process_time()
            sim, rands[m], log = fit(m, s, lr[m], trajs)
            ev[m] = evaluate(sim, m, rands[m], test)
            runs[f"{m},{s}"] = dict(r1=ev[m]["r1"], rH=ev[m]["rH"], rP=ev[m]["rP"], curve=log["curve"],
                                    steps=log["steps"], stopped=log["stopped"],
                                    loss_head=log["losses"][:RECIPE["n_loss_head"]],
                                    cpu_seconds=time.process_time() - c0)
            print(f"seed {s} {m}: RMSE-1 {ev[m]['r1']:.2f} RMSE-H {ev[m]['rH']:.2f} P {ev[m]['rP']:.1f} "
                  f"({log['steps']} steps, {time.process_time() - c0:.0f} cpu s)", flush=True)
        for key, v in touched_analysis(ev, rands, test).items():
            runs[f"touched:{key},{s}"] = v
    persist = float(torch.cat([rmse(t["u"][:-1], t["u"][1:]) for t in test]).mean())
    results = dict(lr=lr, tuning=tuning, runs=runs, persistence=persist)
    looks = [dict(seeds=seeds, code_sha256=code_sha256(), cpu_s=time.process_time() - c_all,
                  wall_s=time.time() - t_all)]
    if old is not None:
        first = dict(seeds=[s for s in RECIPE["seeds"] if s not in seeds], code_sha256=old["code_sha256"],
                     cpu_s=old["cpu_s"], wall_s=old["wall_s"])
        looks = old.get("looks", [first]) + looks
    rec = dict(recipe=RECIPE, code_sha256=code_sha256(), torch=torch.__version__, results=results,
               cpu_s=sum(x["cpu_s"] for x in looks), wall_s=sum(x["wall_s"] for x in looks), looks=looks)
    rec["sha256"] = record_sha256(rec)
    args.out.write_text(json.dumps(rec, indent=1))
    print(f"saved {args.out} ({rec['cpu_s']:.0f} cpu s)")


if __name__ == "__main__":
    main()
