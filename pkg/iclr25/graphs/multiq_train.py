"""Train the walk-profile regressors of the chapter ``graphs/multiq-maglap`` and commit them.

``python -m iclr25.graphs.multiq_train --work DIR`` is one worker (one thread): it takes the
next unclaimed training run (a lock file in ``DIR``) until none is left, so several workers share
the work (the JSON records each encoder's wall seconds, ``seconds_eval_seeds``); ``--merge --work DIR`` joins the runs into the committed
files. ``--names A B`` trains only those encoders; at ``--merge`` every encoder without runs in ``DIR``
keeps its committed runs (same recipe), so adding an encoder retrains only that encoder. For every encoder of :data:`ENCODERS` the script

1. tunes the learning rate on :data:`RECIPE` ``["lr_grid"]`` by the validation RMSE of one run
   of ``steps`` Adam steps on the tuning seed;
2. trains the tuning seed again at the chosen rate for ``steps // 2`` steps (its own cosine
   schedule) and records its validation RMSE: the plateau check (doubling the budget must not
   help much);
3. trains the evaluation seeds at the chosen rate for ``steps`` steps and keeps the models.

Models listed in :data:`ABLATION` (e.g. eigenpairs of ``A_q`` instead of ``L_q``) take the
rate of the Laplacian encoder they replace. Weights are stored in fp16 (xz-compressed) in
``iclr25/graphs/weights/multiq-maglap.pt.xz``, metadata (recipe, tuning tables, the first losses
of every run, validation RMSEs in fp32 and after fp16 rounding, seconds, sha256 of the weights)
in ``multiq-maglap.json``. The chapter loads them, evaluates them on its test graphs and re-runs
the first steps of a run to show the recipe reproduces.
"""

from __future__ import annotations

import argparse
import copy
import io
import json
import lzma
import os
import time
from pathlib import Path

import numpy as np
import torch
from torch_geometric.data import Data

from iclr25.common.digest import check_sha256, file_sha256
from iclr25.graphs.digraphs import random_digraphs
from iclr25.graphs.magnetic import (AddMagneticLaplacianPE, AddSVDPE, AddSymLaplacianPE,
                                    AddWalkProfileTarget, PairRegressor, predict_pairs, rmse,
                                    train_pair_regressor)

WEIGHTS = Path(__file__).parent / "weights"
NAME = "multiq-maglap"

#: everything that determines the committed models
RECIPE: dict = dict(length=4, qs=[0.1, 0.2, 0.3, 0.4, 0.5], k=32, n_train=1000, train_n=(12, 20),
                    min_train_nodes=4, n_val=60, eval_n=(24, 32), data_seed=0, val_seed=300,
                    steps=800, batch=16, lr_grid=[3e-3, 1e-2, 3e-2, 1e-1], seeds=[0, 1, 2, 3, 4],
                    tune_seed=100, n_loss_head=20)

#: display name: (encoder, number of potentials, PE view, model options). Options: ``k`` keeps the
#: ``k`` smallest eigenpairs of each potential (default ``RECIPE["k"]``), ``channels`` the number of
#: ``phi`` channels of the stable encoder (default 8). ``"Q=1, C=40"`` has as many pair features as
#: ``"Q=5"`` (2 x 40 = 2 x 5 x 8): the width-matched single-q control. ``steps`` overrides the
#: recipe's number of Adam steps (the naive encoder is still improving at 800 steps, so it gets 1600). ``"naive Q=5, k=8"`` keeps only
#: slots that most training graphs fill (n >= 8); ``"naive Q=5, k=32"`` has slots 21..32 that are zero on
#: every training graph (n <= 20) and filled on an evaluation graph up to its size (n = 21..31).
#: ``"Q=5, k=8"`` is the stable encoder on the same 8 smallest eigenpairs per potential as the naive one
#: (the official code gives both encoders the same ``pe_dim``).
ENCODERS: dict[str, tuple[str, int, str, dict]] = {
    "no PE": ("none", 1, "mq", {}),
    "Lap-PE": ("magnetic", 1, "lap", {}),
    "SVD-PE": ("svd", 1, "mq", {}),
    "naive Q=5, k=32": ("naive", 5, "mq", {}),
    "naive Q=5, k=8": ("naive", 5, "mq", {"k": 8, "steps": 1600}),
    "{0, 0.1}": ("magnetic", 2, "two", {}),
    "Q=1": ("magnetic", 1, "mq", {}),
    "Q=1, C=40": ("magnetic", 1, "mq", {"channels": 40}),
    "Q=2": ("magnetic", 2, "mq", {}),
    "Q=3": ("magnetic", 3, "mq", {}),
    "Q=4": ("magnetic", 4, "mq", {}),
    "Q=5": ("magnetic", 5, "mq", {}),
    "Q=5, k=8": ("magnetic", 5, "mq", {"k": 8}),
    "Q=5 aliased": ("magnetic", 5, "alias", {}),
}
#: the information control ``"Q=5 aliased"``: five potentials that all reduce to ``q = 0.1``
#: (``L_{0.4} = 2I - conj(L_{0.1})``, ``L_{0.6} = 2I - L_{0.1}``, ``L_{0.9} = conj(L_{0.1})``,
#: ``L_{1.1} = L_{0.1}``: real rank 2, :func:`~iclr25.graphs.magnetic.potential_rank`), read by the
#: same shared-``phi`` encoder as ``"Q=5"``: it keeps the parametrisation and removes the information.
ALIAS_QS = [0.1, 0.4, 0.6, 0.9, 1.1]
#: committed runs made under an earlier display name (same recipe, same code): new name -> old name
RENAMED = {"naive Q=5, k=32": "naive Q=5"}
#: the edge check: one tuning run a step below the grid, for encoders whose optimum is its lowest rate
EDGE_LR = 1e-3

#: ablation name: (encoder, number of potentials, PE view, model options, encoder whose learning rate
#: it takes); e.g. ``"adjacency Q=5": ("magnetic", 5, "adj", {}, "Q=5")`` trains on the eigenpairs of
#: ``A_q`` (the committed models hold none: an exercise of the chapter)
ABLATION: dict[str, tuple[str, int, str, dict, str]] = {}


def build_split(num: int, n_range: tuple[int, int], min_nodes: int, seed: int,
                views: tuple[str, ...] = ("mq", "lap", "two")) -> dict[str, list[Data]]:
    """Random DAGs with the walk-profile target and one list per PE view.

    Views: ``"mq"`` (Multi-q PE ``q = 0.1..0.5`` and the SVD PE), ``"lap"`` (``q = 0``),
    ``"two"`` (``q in {0, 0.1}``), ``"adj"`` (eigenpairs of ``A_q``, ``q = 0.1..0.5``),
    ``"alias"`` (:data:`ALIAS_QS`).
    """
    k, qs = RECIPE["k"], RECIPE["qs"]
    target, svd = AddWalkProfileTarget(RECIPE["length"]), AddSVDPE(k)
    pes = {"mq": AddMagneticLaplacianPE(qs, k), "lap": AddSymLaplacianPE(k),
           "two": AddMagneticLaplacianPE([0.0, 0.1], k),
           "adj": AddMagneticLaplacianPE(qs, k, matrix="adjacency"), "alias": AddMagneticLaplacianPE(ALIAS_QS, k)}
    out: dict[str, list[Data]] = {v: [] for v in views}
    for g in random_digraphs(num, n_range, True, np.random.default_rng(seed), min_nodes=min_nodes):
        g = svd(target(g))
        for v in views:
            out[v].append(pes[v](g.clone()))
    return out


def first_q(graphs: list[Data], nq: int, k: int | None = None) -> list[Data]:
    """Shallow copies that keep the first ``nq`` potentials of the PE (and its ``k`` smallest
    eigenpairs when ``k`` is given)."""
    out = []
    for g in graphs:
        h = copy.copy(g)
        h.pe_U, h.pe_lambda = g.pe_U[:, :nq, :k], g.pe_lambda[:, :nq, :k]
        out.append(h)
    return out


def view_of(split: dict[str, list[Data]], enc: str, nq: int, view: str, opts: dict | None = None) -> list[Data]:
    """The graphs an encoder reads: its PE view, cut to its number of potentials (and its ``k``)."""
    graphs = split[view]
    if enc in ("magnetic", "naive") and view in ("mq", "adj", "alias"):
        return first_q(graphs, nq, (opts or {}).get("k"))
    return graphs


def spec(name: str) -> tuple[str, int, str, dict]:
    """(encoder, number of potentials, PE view, model options) of an encoder or ablation."""
    return ABLATION[name][:4] if name in ABLATION else ENCODERS[name]


def new_model(enc: str, nq: int, seed: int, opts: dict | None = None) -> PairRegressor:
    """The pair regressor of an encoder, initialised from ``seed``."""
    opts = opts or {}
    torch.manual_seed(seed)
    return PairRegressor(enc, num_q=nq, k=opts.get("k", RECIPE["k"]), channels=opts.get("channels", 8),
                         out_dim=RECIPE["length"] + 1)


def to_fp16(model: PairRegressor) -> dict[str, torch.Tensor]:
    """The state dict with floating parameters in fp16 (buffers stay fp32)."""
    buffers = {n for n, _ in model.named_buffers()}
    return {n: (t.half() if n not in buffers and t.is_floating_point() else t).clone()
            for n, t in model.state_dict().items()}


def from_fp16(enc: str, nq: int, state: dict[str, torch.Tensor], opts: dict | None = None) -> PairRegressor:
    """A model from a stored (fp16) state dict, in fp32."""
    model = new_model(enc, nq, 0, opts)
    model.load_state_dict({n: t.float() for n, t in state.items()})
    return model


def jobs(names: list[str] | None = None) -> list[tuple[str, str, int | float]]:
    """Every training run of the recipe (of the encoders ``names``, default all, and the ablation)
    as ``(kind, name, lr or seed)``, in the order workers take them: the learning-rate grid of every
    encoder, then the half-budget runs and the evaluation seeds (which wait for their encoder's
    chosen rate), then the ablation."""
    r = RECIPE
    enc = [n for n in ENCODERS if names is None or n in names]
    out = [("tune", n, lr) for n in enc for lr in r["lr_grid"]]
    out += [("half", n, r["tune_seed"]) for n in enc]
    out += [("seed", n, s) for n in enc for s in r["seeds"]]
    out += [("seed", n, s) for n in ABLATION for s in r["seeds"]]
    return out


def _job_file(out: Path, job: tuple) -> Path:
    kind, name, arg = job
    return out / f"job-{kind}-{name.replace(' ', '_').replace('/', '_')}-{arg}.pt"


def _chosen_lr(out: Path, name: str) -> float | None:
    """The rate chosen for ``name`` once its whole grid has run, else ``None``."""
    if name in ABLATION:
        name = ABLATION[name][4]
    files = [_job_file(out, ("tune", name, lr)) for lr in RECIPE["lr_grid"]]
    if not all(f.exists() for f in files):
        return None
    tuning = {lr: torch.load(f)["val_rmse"] for lr, f in zip(RECIPE["lr_grid"], files)}
    return min(tuning, key=tuning.get)


def _do(job: tuple, lr: float, train: dict, val: dict) -> dict:
    kind, name, arg = job
    r = RECIPE
    enc, nq, view, opts = spec(name)
    tr, va = view_of(train, enc, nq, view, opts), view_of(val, enc, nq, view, opts)
    seed = arg if kind == "seed" else r["tune_seed"]
    steps = opts.get("steps", r["steps"])
    steps = steps // 2 if kind == "half" else steps
    m = new_model(enc, nq, seed, opts)
    t0 = time.time()
    losses = train_pair_regressor(m, tr, steps, r["batch"], lr, seed)
    res = dict(lr=lr, val_rmse=rmse(*predict_pairs(m, va)), loss_head=losses[:r["n_loss_head"]],
               loss_tail=float(np.mean(losses[-50:])), seconds=time.time() - t0)
    if kind == "seed":
        st = to_fp16(m)
        res.update(state=st, val_rmse_fp16=rmse(*predict_pairs(from_fp16(enc, nq, st, opts), va)))
    return res


def worker(out: Path, edge: list[str] | None = None, names: list[str] | None = None) -> None:
    """Take unclaimed runs (a lock file per run) until none is left; runs that need a chosen
    rate wait for it. With ``edge``, instead run the edge check of those encoders: one tuning run
    at :data:`EDGE_LR`, a step below the grid, which shows whether an optimum at the grid's lower
    edge is bracketed (the chosen rate stays the grid's)."""
    torch.set_num_threads(1)
    r = RECIPE
    t0 = time.time()
    views = ("mq", "lap", "two", *sorted({spec(n)[2] for n in [*ENCODERS, *ABLATION] if names is None or n in names}
                                         - {"mq", "lap", "two"}))
    train = build_split(r["n_train"], r["train_n"], r["min_train_nodes"], r["data_seed"], views)
    val = build_split(r["n_val"], r["eval_n"], r["train_n"][1] + 1, r["val_seed"], views)
    print(f"data in {time.time() - t0:.0f} s", flush=True)
    for name in edge or []:
        job = ("tune", name, EDGE_LR)
        res = _do(job, EDGE_LR, train, val)
        torch.save(res, _job_file(out, job))
        print(f"{job}: val {res['val_rmse']:.4f}, {res['seconds']:.0f} s", flush=True)
    while not edge:
        left = [j for j in jobs(names) if not _job_file(out, j).with_suffix(".lock").exists()]
        if not left:
            return
        for job in left:
            lr = job[2] if job[0] == "tune" else _chosen_lr(out, job[1])
            if lr is None:
                continue
            try:
                fd = os.open(_job_file(out, job).with_suffix(".lock"), os.O_CREAT | os.O_EXCL)
            except FileExistsError:
                continue
            os.close(fd)
            res = _do(job, lr, train, val)
            torch.save(res, _job_file(out, job))
            print(f"{job}: lr {lr:g}, val {res['val_rmse']:.4f}, {res['seconds']:.0f} s", flush=True)
            break
        else:
            time.sleep(10)


def merge(out: Path, committed: tuple[dict, dict] | None = None) -> tuple[dict, dict]:
    """The metadata and fp16 states of a finished set of runs.

    With ``committed`` (metadata and states of :func:`load_states`), an encoder without runs in
    ``out`` keeps its committed runs (under its old name, :data:`RENAMED`), provided the recipe is
    unchanged: only new encoders need training."""
    r = RECIPE
    meta, states = {}, {}
    old_info, old_states = committed or ({"encoders": {}}, {})
    for name in [*ENCODERS, *ABLATION]:
        enc, nq, view, opts = spec(name)
        old = name if name in old_info["encoders"] else RENAMED.get(name, name)
        if not _job_file(out, ("seed", name, r["seeds"][0])).exists() and old in old_info["encoders"]:
            if old_info["recipe"] != json.loads(json.dumps(r)):
                raise RuntimeError(f"{name}: the committed runs used another recipe")
            meta[name] = {**old_info["encoders"][old], "options": opts}
            states.update({f"{name}|{s}": old_states[f"{old}|{s}"] for s in r["seeds"]})
            print(f"{name}: committed runs kept")
            continue
        if name in ABLATION and not all(_job_file(out, ("seed", name, s)).exists() for s in r["seeds"]):
            print(f"{name}: not all runs finished, left out")
            continue
        tuning = half = None
        if name in ENCODERS:
            tuning = {str(lr): torch.load(_job_file(out, ("tune", name, lr)))["val_rmse"] for lr in r["lr_grid"]}
            half = torch.load(_job_file(out, ("half", name, r["tune_seed"])))["val_rmse"]
        edge_file = _job_file(out, ("tune", name, EDGE_LR))
        edge = torch.load(edge_file)["val_rmse"] if name in ENCODERS and edge_file.exists() else None
        runs, secs = {}, 0.0
        for s in r["seeds"]:
            res = torch.load(_job_file(out, ("seed", name, s)))
            states[f"{name}|{s}"] = res.pop("state")
            secs += res.pop("seconds")
            runs[str(s)] = res
        meta[name] = dict(encoder=enc, num_q=nq, view=view, options=opts, lr=_chosen_lr(out, name), tuning=tuning,
                          val_rmse_edge_check=edge, val_rmse_half_steps=half, runs=runs,
                          seconds_eval_seeds=secs)
    return meta, states


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, default=Path("multiq-maglap-runs"),
                        help="folder of the single runs (lock and result files)")
    parser.add_argument("--merge", action="store_true", help="join finished runs into the weights")
    parser.add_argument("--out", type=Path, default=WEIGHTS)
    parser.add_argument("--edge", nargs="*", default=None, help="run the edge check of these encoders")
    parser.add_argument("--names", nargs="*", default=None,
                        help="train only these encoders (the others keep their committed runs at --merge)")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    if args.merge:
        committed = load_states() if (args.out / f"{NAME}.pt.xz").exists() else None
        args.out.mkdir(parents=True, exist_ok=True)
        _save(args.out, *merge(args.work, committed))
    else:
        worker(args.work, args.edge, args.names)


def _save(out: Path, meta: dict, states: dict) -> None:
    path = out / f"{NAME}.pt.xz"
    buf = io.BytesIO()
    torch.save(states, buf)
    path.write_bytes(lzma.compress(buf.getvalue(), preset=9))
    digest = file_sha256(path)
    info = dict(recipe=RECIPE, encoders=meta, sha256=digest, bytes=path.stat().st_size,
                torch=torch.__version__)
    (out / f"{NAME}.json").write_text(json.dumps(info, indent=1) + "\n")
    print(f"saved {path} ({path.stat().st_size / 1e6:.2f} MB, sha256 {digest[:12]})")


def load_states(folder: Path = WEIGHTS) -> tuple[dict, dict]:
    """The committed metadata and fp16 state dicts ``{"name|seed": state}``; checks the sha256."""
    path = folder / f"{NAME}.pt.xz"
    info = json.loads((folder / f"{NAME}.json").read_text())
    raw = check_sha256(path, info["sha256"])
    return info, torch.load(io.BytesIO(lzma.decompress(raw)))


def load_models() -> tuple[dict, dict]:
    """The committed metadata and models ``{(name, seed): PairRegressor}``; checks the sha256."""
    info, states = load_states()
    models = {}
    for key, st in states.items():
        name, s = key.split("|")
        m = info["encoders"][name]
        models[name, int(s)] = from_fp16(m["encoder"], m["num_q"], st, m.get("options"))
    return info, models


if __name__ == "__main__":
    main()
