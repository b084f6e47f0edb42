"""The fixed-length, pre-registered two-block PIORF evaluation of the chapter ``graphs/piorf``.

The committed two-block run (:mod:`iclr25.graphs.piorf_depth`) stops each run by a patience rule, which adds
stopping noise to every paired difference. This script re-runs the same comparison with every run on the full
fixed schedule and no early stopping, on evaluation seeds no earlier run has used.

Pre-registration (fixed in :data:`RECIPE` and this docstring before any of these runs was made):

* data, model, schedule: those of ``piorf_depth.RECIPE`` (the chapter's ``full`` trajectories and frames,
  latent 32, ``blocks`` = 2, reach control ``deep_blocks`` = 4); every run trains all ``max_steps`` = 3000 steps
  with the learning rate decaying to ``decay`` of its value, and the weights after the last step are evaluated
  (the validation one-step RMSE is still read every ``check_every`` steps, only to show the plateau);
* learning rates: those the committed tuning of ``piorf_depth`` chose (:data:`LR`); the one new arm, moving
  random hubs, is tuned by the same rule on the same tuning seed;
* evaluation seeds 10-19, one look, paired 95 % Student-t intervals of the per-seed relative change;
* the gate (competence): the reach control (mesh alone, 4 blocks vs 2) lowers one-step RMSE by more than
  ``bar`` = 5 % (its whole interval below -5 %), every simulator beats persistence by 5 %, and the validation
  RMSE falls by less than 5 % over the last quarter (mean over seeds);
* the rows it decides, each against the same 5 % bar (holds: interval below -5 %; fails: the interval rules a
  5 % reduction out; undecided otherwise, or when the gate fails): PIORF vs the mesh alone (RMSE-1, RMSE-10,
  pressure RMSE-1), PIORF vs FoSR-style edges (RMSE-1), PIORF vs random partners (RMSE-1); our variant row:
  PIORF vs moving random hubs (RMSE-1).

The arms (all with the same frames and, at the same depth, the same initial weights per seed): the mesh alone,
random partners for PIORF's sources (one draw per mesh), PIORF, FoSR-style edges, the reach control, and
**moving random hubs**: at every graph PIORF would build, PIORF's partners are computed and each distinct hub is
replaced by a fluid node drawn at random, fresh at every call. The sources then join one or two hubs that move
every step, exactly the structure of PIORF's edges, with the velocity's choice of hub taken away.

``python -m iclr25.graphs.piorf_fixed`` (one thread) writes ``weights/piorf-fixed.json``: the recipe, the
fingerprint (:func:`iclr25.common.digest.strip_source`) of the functions that make the runs, the learning rates,
every run's validation curve, first training losses and metrics, and CPU seconds; :func:`load` checks its sha256.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path

import numpy as np
import torch

from iclr25.common.digest import load_record, record_sha256, strip_source
from iclr25.graphs import piorf_depth as D
from iclr25.graphs.mesh import FlowSimulator, NodeType, mesh_edge_features
from iclr25.graphs.rewiring import new_edges, piorf_partners, random_partners

HERE = Path(__file__).parent
PATH = HERE / "weights" / "piorf-fixed.json"
RERUN = "python -m iclr25.graphs.piorf_fixed"

#: the pre-registered evaluation (the data, model and schedule of ``piorf_depth.RECIPE``)
RECIPE: dict = dict(
    {k: v for k, v in D.RECIPE.items() if k not in ("seeds", "looks", "methods", "patience", "min_gain")},
    methods=["none", "random", "piorf", "fosr", "deep", "moving", "projection", "matched"], matched_latent=24,
    seeds=list(range(10, 20)), level=0.95, bar=0.05, check_every=300)

#: learning rates of the committed tuning (``piorf_depth``'s record); ``moving`` is tuned here
LR: dict = {"none": 4e-3, "random": 2e-3, "piorf": 4e-3, "fosr": 4e-3, "deep": 4e-3}


def load(path: Path = PATH) -> dict:
    """The committed record, refused if its content does not match its sha256."""
    return load_record(path, RERUN)


def moving_hubs(u: torch.Tensor, tr: dict, gen: torch.Generator, rule: str = RECIPE["rule"]) -> torch.Tensor:
    """Partners of PIORF's sources with PIORF's hub structure but random hubs: each distinct partner PIORF would
    choose from ``u`` is replaced by a distinct fluid node drawn from ``gen``."""
    p = piorf_partners(u, tr["sources"], rule, None, candidates=tr["fluid"])
    hubs, inv = torch.unique(p, return_inverse=True)
    fluid = tr["fluid"].nonzero().flatten()
    pick = fluid[torch.randperm(len(fluid), generator=gen)[:len(hubs)]]
    return pick[inv]


def projection_weight(seed: int) -> torch.Tensor:
    """The official code's projection for one evaluation seed: a random direction in the velocity plane (its
    untrained linear layer; ``argmax |f_j - f_s|`` does not depend on the projection's length)."""
    return torch.randn(2, generator=torch.Generator().manual_seed(6000 + seed), dtype=torch.float64)


def context(seed: int, offset: int) -> dict:
    """What the arms beyond ``piorf_depth``'s need at one seed: the generator of the moving hubs (seeded
    ``offset + seed``: training, validation and test draw from their own) and the projection."""
    return dict(gen=torch.Generator().manual_seed(offset + seed), w=projection_weight(seed))


def added(method: str, tr: dict, u: torch.Tensor, rand: list, ctx: dict) -> torch.Tensor:
    """The edges a method adds at one frame: ``moving`` (hubs drawn with ``ctx["gen"]``) and ``projection``
    (PIORF with the official code's partner rule, projection ``ctx["w"]``) here; ``matched`` adds none; the
    others as in ``piorf_depth.added``."""
    if method == "moving":
        return new_edges(tr["edge_index"], tr["sources"], moving_hubs(u, tr, ctx["gen"]), tr["n"])
    if method == "projection":
        p = piorf_partners(u, tr["sources"], "projection", ctx["w"], candidates=tr["fluid"])
        return new_edges(tr["edge_index"], tr["sources"], p, tr["n"])
    return D.added("none" if method == "matched" else method, tr, u, rand)


def batched_step(sim, method, tr, U, rand, ctx):
    """One step for a batch of frames U [B, N, 2] of one mesh as one disjoint graph."""
    B, n = U.shape[0], tr["n"]
    ei = torch.cat([tr["edge_index"] + b * n for b in range(B)], dim=1)
    new = torch.cat([added(method, tr, U[b], rand, ctx) + b * n for b in range(B)], dim=1)
    nxt, p = sim.step(U.reshape(-1, 2), tr["node_type"].repeat(B), tr["pos"].repeat(B, 1), ei, new)
    return nxt.reshape(B, n, 2), p.reshape(B, n)


def one_step(sim, method, rand, split_, ctx):
    """Mean one-step velocity RMSE over a split."""
    return float(torch.cat([D.rmse(batched_step(sim, method, tr, tr["u"][:-1], rand, ctx)[0], tr["u"][1:])
                            for tr in split_]).mean())


def evaluate(sim, method, rand, test, ctx, recipe: dict = RECIPE) -> dict:
    """``piorf_depth.evaluate`` with the moving hubs: one-step velocity and pressure RMSE, the mean rollout RMSE,
    and per trajectory the one-step squared errors [T-1, N] of velocity and pressure."""
    H, T = recipe["horizon"], recipe["data"]["frames"]
    one, one_p, sq, roll = [], [], [], []
    for tr in test:
        u, p = batched_step(sim, method, tr, tr["u"][:-1], rand, ctx)
        one.append(D.rmse(u, tr["u"][1:]))
        one_p.append(D.rmse(p[..., None], tr["p"][1:, :, None]))
        sq.append((((u - tr["u"][1:]) ** 2).sum(-1), (p - tr["p"][1:]) ** 2))
        starts = torch.arange(0, T - 1 - H, recipe["start_every"])
        u, errs = tr["u"][starts], []
        for h in range(H):
            u, _ = batched_step(sim, method, tr, u, rand, ctx)
            errs.append(D.rmse(u, tr["u"][starts + h + 1]))
        roll.append(torch.stack(errs, 1))
    return dict(r1=float(torch.cat(one).mean()), rP=float(torch.cat(one_p).mean()),
                rH=float(torch.cat(roll).mean()), sq=sq)


def fit(method: str, seed: int, lr: float, trajs: list[dict], recipe: dict = RECIPE, steps: int | None = None,
        curve: bool = True, stop: int | None = None) -> tuple[FlowSimulator, list, dict]:
    """Train one simulator on the full fixed schedule (``piorf_depth.fit`` without the patience rule: the same
    frames, noise, initial weights and losses) and return it after its last step, its random partners (one draw
    per mesh) and a log (losses, validation curve read every ``check_every`` steps when ``curve``).
    ``stop``: train only that many steps of the ``steps``-step schedule."""
    steps = steps or recipe["max_steps"]
    train, val, _ = D.split(trajs, recipe)
    T = recipe["data"]["frames"]
    g = torch.Generator().manual_seed(1000 + seed)  # frame order and random partners
    gen = torch.Generator().manual_seed(2000 + seed)  # training noise
    hub = context(seed, 3000)  # moving hubs while training
    rand = [random_partners(t["sources"], t["n"], g, t["fluid"]) for t in trajs]
    torch.manual_seed(seed)
    blocks = recipe["deep_blocks"] if method in ("deep", "matched") else recipe["blocks"]
    sim = FlowSimulator(recipe["matched_latent"] if method == "matched" else recipe["latent"], blocks, layers=1)

    def noisy(tr, t):
        z = torch.randn(tr["u"][t].shape, generator=gen)
        return tr["u"][t] + recipe["noise"] * z * (tr["node_type"] == NodeType.NORMAL)[:, None]

    X, E, A, DV, P = [], [], [], [], []
    for tr in train:
        E.append(mesh_edge_features(tr["pos"], tr["edge_index"]))
        for t in range(0, T - 1, 3):
            u = noisy(tr, t)
            X.append(sim.node_features(u, tr["node_type"]))
            A.append(mesh_edge_features(tr["pos"], added(method, tr, u, rand, hub)))
            DV.append((tr["u"][t + 1] - u)[sim.integrated(tr["node_type"])])
            P.append(tr["p"][t + 1][:, None])
    fits = [(sim.node_norm, X), (sim.edge_norm, E), (sim.dv_norm, DV), (sim.p_norm, P)]
    for norm, vals in fits + ([(sim.added_norm, A)] if method not in ("none", "deep", "matched") else []):
        norm.fit(torch.cat(vals))
    opt = torch.optim.Adam(sim.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=recipe["decay"] ** (1 / steps))
    losses, readings = [], []
    for i in range(steps + 1):
        if curve and i > 0 and (i % recipe["check_every"] == 0 or i == steps):
            sim.eval()
            readings.append((i, one_step(sim, method, rand, val, context(seed, 5000))))
            sim.train()
        if i == steps or i == stop:
            break
        k = int(torch.randint(len(train), (1,), generator=g))
        t = int(torch.randint(T - 1, (1,), generator=g))
        tr = train[k]
        u = noisy(tr, t)
        loss = sim.loss(u, tr["node_type"], tr["pos"], tr["edge_index"], tr["u"][t + 1], tr["p"][t + 1],
                        added(method, tr, u, rand, hub))
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    return sim.eval(), rand, dict(losses=losses, curve=readings, steps=len(losses))


def late_drop(curve: list, frac: float = 0.25, end: str = "last") -> float:
    """Relative fall of the validation error over the last ``frac`` of a run: ``1 - v_end / v((1 - frac) T)``.

    ``curve`` holds the readings ``(step, value)``; ``T`` is the step of the last reading. There may be no reading
    at ``(1 - frac) T`` (every 300 steps of 3000 puts none at 2250), so the value there is linearly interpolated
    between the readings on either side. ``v_end`` is the last reading (``end="last"``: the weights a fixed
    schedule evaluates) or the lowest reading (``end="best"``: the weights a patience rule keeps)."""
    steps = np.array([st for st, _ in curve], dtype=float)
    vals = np.array([v for _, v in curve], dtype=float)
    start = float(np.interp((1 - frac) * steps[-1], steps, vals))
    v_end = vals[-1] if end == "last" else vals.min()
    return float(1 - v_end / start)


def first_losses(record: dict, method: str, seed: int, trajs: list[dict] | None = None) -> list[float]:
    """The first ``n_loss_head`` training losses of one evaluation run, re-trained (the chapter's live check)."""
    recipe = record["recipe"]
    _, _, log = fit(method, seed, record["results"]["lr"][method], trajs or D.trajectories(recipe), recipe=recipe,
                    curve=False, stop=recipe["n_loss_head"])
    return log["losses"]


def tune(method: str, trajs: list[dict], recipe: dict = RECIPE) -> tuple[float, dict]:
    """``piorf_depth.tune`` (best validation one-step RMSE on the tuning seed, grid extended at an edge) with
    this module's training."""
    _, val, _ = D.split(trajs, recipe)
    table: dict[float, float] = {}
    grid = list(recipe["lrs"])
    while grid:
        for lr in grid:
            sim, rand, _ = fit(method, recipe["tune_seed"], lr, trajs, recipe, steps=recipe["tune_steps"], curve=False)
            table[lr] = one_step(sim, method, rand, val, context(recipe["tune_seed"], 5000))
            print(f"  tune {method} lr {lr:g}: {table[lr]:.2f}", flush=True)
        best, tried = min(table, key=table.get), sorted(table)
        grid = ([] if len(table) >= len(recipe["lrs"]) + recipe["extend"] else
                [best / 2] if best == tried[0] else [best * 2] if best == tried[-1] else [])
    return min(table, key=table.get), {f"{k:g}": v for k, v in sorted(table.items())}


#: the functions whose code makes the record (fingerprinted without docstrings and comments)
FUNCS = (moving_hubs, projection_weight, context, added, batched_step, one_step, evaluate, fit, tune, D.added, D.rmse, D.split,
         D.trajectories, D.touched, D.touched_analysis, D.hop_mask)


def code_fingerprint() -> str:
    """sha256 of the stripped source of :data:`FUNCS` and of the modules the simulator and data come from."""
    import inspect

    from iclr25.graphs import curvature, flow, mesh, rewiring
    parts = [strip_source(inspect.getsource(f)) for f in FUNCS]
    parts += [strip_source(inspect.getsource(m)) for m in (mesh, rewiring, curvature, flow)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=PATH)
    parser.add_argument("--methods", nargs="+", default=RECIPE["methods"], choices=RECIPE["methods"],
                        help="the arms to train; arms already in the record at --out are added to it")
    args = parser.parse_args()
    torch.set_num_threads(1)
    c_all, t_all = time.process_time(), time.time()
    trajs = D.trajectories(RECIPE)
    _, _, test = D.split(trajs, RECIPE)
    old = load(args.out) if args.out.exists() else None
    if old is not None:  # the same pre-registered evaluation, trained in parts: the record gains arms
        assert old["recipe"] == json.loads(json.dumps(RECIPE)) and old["code"] == code_fingerprint()
        res = old["results"]
        lr, tuning, runs = res["lr"], res["tuning"], dict(res["runs"])
    else:
        lr, tuning, runs = dict(LR), {}, {}
    methods = [m for m in RECIPE["methods"] if m in args.methods and f"{m},{RECIPE['seeds'][0]}" not in runs]
    for m in methods:
        if m not in lr:
            c0 = time.process_time()
            lr[m], tuning[m] = tune(m, trajs)
            print(f"{m}: lr {lr[m]:g} ({time.process_time() - c0:.0f} cpu s)", flush=True)
    for s in RECIPE["seeds"]:
        ev, rands = {}, {}
        for m in methods:
            c0 = time.process_time()
            sim, rands[m], log = fit(m, s, lr[m], trajs)
            ev[m] = evaluate(sim, m, rands[m], test, context(s, 4000))
            runs[f"{m},{s}"] = dict(r1=ev[m]["r1"], rH=ev[m]["rH"], rP=ev[m]["rP"], curve=log["curve"],
                                    steps=log["steps"], loss_head=log["losses"][:RECIPE["n_loss_head"]],
                                    cpu_seconds=time.process_time() - c0)
            print(f"seed {s} {m}: RMSE-1 {ev[m]['r1']:.2f} RMSE-H {ev[m]['rH']:.2f} P {ev[m]['rP']:.1f} "
                  f"({log['steps']} steps, {time.process_time() - c0:.0f} cpu s)", flush=True)
        if {"none", "piorf", "random"} <= set(ev):
            for key, v in D.touched_analysis(ev, rands, test, RECIPE).items():
                runs[f"touched:{key},{s}"] = v
        # progress after every seed (not the record): what a stopped job leaves
        args.out.with_suffix(".partial.json").write_text(json.dumps(dict(lr=lr, runs=runs)))
    persist = float(torch.cat([D.rmse(t["u"][:-1], t["u"][1:]) for t in test]).mean())
    parts = (old["parts"] if old else []) + [dict(methods=methods, cpu_s=time.process_time() - c_all,
                                                   wall_s=time.time() - t_all)]
    rec = dict(recipe=RECIPE, code=code_fingerprint(), torch=torch.__version__,
               results=dict(lr=lr, tuning=tuning, runs=runs, persistence=persist), parts=parts,
               cpu_s=sum(p["cpu_s"] for p in parts), wall_s=sum(p["wall_s"] for p in parts))
    rec["sha256"] = record_sha256(rec)
    args.out.write_text(json.dumps(rec, indent=1))
    args.out.with_suffix(".partial.json").unlink(missing_ok=True)
    print(f"saved {args.out} ({rec['cpu_s']:.0f} cpu s)")


if __name__ == "__main__":
    main()
