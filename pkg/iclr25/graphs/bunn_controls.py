"""Controls and the authors' frame network for the 64x64 Minesweeper study of the chapter ``graphs/bunn``.

Three parts, each its own record under ``weights/`` (``--part``):

- ``controls`` (``bunn-controls.json``): on the committed evaluation seeds 0-19 (both looks), two arms that the
  study's BuNN (:mod:`iclr25.graphs.bunn_deep`: Taylor ``K = 8``, ``t = 1`` frozen, SumGNN angle frames, ``sep``
  block, its tuned depth and learning rate) is paired with seed by seed:

  * *the trivial bundle*: the same model with every frame the identity (``NodeModel("bunn-identity")``, so the
    frame network is gone and nothing else changes: depth, width, kernel, time, block, learning rate, loop); BuNN
    minus it is the effect of the bundle alone;
  * *GCN-sep-4*: GCN with the ego/aggregate concatenation at BuNN's depth (``bunn_headroom.MODELS["GCN-sep"]``),
    at the learning rate the headroom grid chose for it at that depth, a baseline matched in depth and block.

- ``tune`` (``bunn-authors-tune.json``): the study's BuNN with the authors' kind of frame network and optimiser:
  each BuNN layer gets its own stack of ``RECIPE["phi_blocks"]`` pre-LayerNorm GraphSAGE blocks
  (:class:`SAGEFrames`; the authors' code stacks 8 at width 512, here at the model's width 32) in place of the
  one-layer SumGNN, trained with AdamW (PyTorch's default weight decay 0.01) as the authors do. Its learning rate
  is tuned on the tuning seed over ``RECIPE["lr_grid"]``, which starts at the authors' 3e-5; if the best
  validation ROC-AUC sits at an edge of the grid, the grid is extended one step (x ``RECIPE["lr_step"]``) past
  that edge until the best is interior (at most ``RECIPE["max_extend"]`` steps).
- ``eval`` (``bunn-authors-eval.json``): that model at its tuned learning rate on the pre-registered evaluation
  seeds of :data:`EVAL` (fixed in this file before any of its runs), paired with the committed arms of the study
  and read as :data:`EVAL` states.
- ``eval2`` (``bunn-authors-eval2.json``): the pre-registered second and last look, :data:`EVAL2` (fixed in this
  file before any of its runs): the same model on the remaining evaluation seeds 8-19, read with look 1 on all
  twenty paired seeds at 97.5 %.

Every run uses the study's loop (:func:`fit`, the same as :func:`iclr25.graphs.bunn_deep.run` with the model and
optimiser as arguments): full batch, validation ROC-AUC every 10 epochs from epoch 50, stop when 10 evaluations
in a row gain less than 0.001 or at 1000 epochs, test ROC-AUC at the best validation epoch.

``python -m iclr25.graphs.bunn_controls --part controls|tune|eval|eval2`` (one thread) writes the record: the recipe,
a sha256 of the source (docstrings and comments stripped) of every function that makes it
(:func:`code_fingerprint`), every run (validation and test ROC-AUC, curve, epochs, first losses, CPU seconds),
and a sha256 of the record (:func:`iclr25.common.digest.record_sha256`). No model is kept.
"""

from __future__ import annotations

import argparse
import inspect
import json
import time
from pathlib import Path
from typing import Callable

import torch
from sklearn.metrics import roc_auc_score
from torch import Tensor, nn
from tqdm.auto import tqdm

from iclr25.common.digest import bytes_sha256, load_record, record_sha256, strip_source
from iclr25.graphs import bunn_deep, bunn_headroom
from iclr25.graphs.bundle import BuNNConv, NodeModel, SumGNN, normalized_adjacency
from iclr25.graphs.bunn_minesweeper import RECIPE as LOOP
from iclr25.graphs.synthetic import minesweeper_graph

WEIGHTS = bunn_headroom.WEIGHTS
_DEEP = bunn_deep.RECIPE

#: the controls' seeds (both committed looks) and the authors'-frames arm's tuning rule
RECIPE: dict = dict(control_seeds=list(range(20)), gcn_sep="GCN-sep", phi_blocks=2, optimizer="AdamW",
                    weight_decay=0.01, lr_grid=[3e-5, 1e-4, 3e-4, 1e-3], lr_step=3.0, max_extend=2,
                    tune_seed=_DEEP["tune_seed"], max_epochs=_DEEP["max_epochs"], patience=_DEEP["patience"])

#: the pre-registered evaluation of the authors'-frames arm, fixed before any of its runs: its seeds (the first eight
#: evaluation seeds of the committed looks, on which this arm never ran and every other arm of the study did, so that
#: it is paired with all of them seed by seed; eight, at about 90 CPU seconds a run, is what the session's CPU time
#: allowed), the arms this part trains, one look, the interval (paired t, two-sided
#: ``level``) and the rows: ``a - b`` (``b`` read from the committed records, :func:`eval_arms`) holds if the
#: interval's lower end is above ``bar``, fails if its upper end is below it, and is undecided otherwise
EVAL: dict = dict(seeds=list(range(8)), arms=["BuNN, authors' frames"], looks=1, level=0.95,
                  rows=[dict(a="BuNN, authors' frames", b="GraphSAGE-16", bar=-0.01,
                             question="non-inferior to the best tuned baseline (1-point margin)"),
                        dict(a="BuNN, authors' frames", b="GCN", bar=0.0, question="beats Platonov et al.'s GCN"),
                        dict(a="BuNN, authors' frames", b="BuNN", bar=0.0,
                             question="the authors' kind of frame network and optimiser beat the one-layer SumGNN "
                                      "and Adam")])

#: the pre-registered second and last look of the authors'-frames arm, fixed in this file before any of its runs
#: (look 1, :data:`EVAL`, was planned as the only look, read at 95 % on seeds 0-7, and left the row against
#: GraphSAGE-16 undecided). Look 2 trains the arm on the remaining committed evaluation seeds 8-19 (every comparator
#: is already trained on all twenty) and reads the same rows and bars on all twenty paired seeds (``read_seeds``)
#: with a two-sided 97.5 % paired t interval; with look 1's 95 %, the overall error of the two looks is at most
#: 0.05 + 0.025. There is no third look. The authors'-frames BuNN is the paper's method (the authors' kind of frame
#: network and optimiser), so its look-2 result carries the chapter's paper rows ``paper_rows`` (the ``b`` of the
#: rows: "BuNN >= best tuned baseline" against GraphSAGE-16 with the 1-point margin, "BuNN beats GCN" against
#: Platonov et al.'s GCN); the study's SumGNN BuNN-4 is reported beside it as a labelled variant, and the row
#: against it stays a check
EVAL2: dict = dict(seeds=list(range(8, 20)), read_seeds=list(range(20)), arms=list(EVAL["arms"]), look=2, looks=2,
                   level=0.975, first_look=dict(seeds=list(EVAL["seeds"]), level=EVAL["level"]),
                   rows=[dict(r) for r in EVAL["rows"]], paper_rows=["GraphSAGE-16", "GCN"],
                   variant="BuNN")

PARTS = {"controls": "bunn-controls", "tune": "bunn-authors-tune", "eval": "bunn-authors-eval",
         "eval2": "bunn-authors-eval2"}


class SAGEFrames(SumGNN):
    """A frame network of ``blocks`` pre-LayerNorm GraphSAGE blocks (Platonov et al.'s residual block,
    ``h ← h + FF([LN(h), mean_{u~v} LN(h)_u])`` with ``FF = Linear(2C, C) → GELU → Linear(C, C)``), between an input
    and an output ``Linear``: the kind of network the authors' code gives every BuNN layer for its frames.

    It is a :class:`iclr25.graphs.bundle.SumGNN` in interface (``forward(x, edge_index)``, ``self[-1]`` the output
    layer), so :class:`iclr25.graphs.bundle.BuNNConv` passes it the graph.
    """

    def __init__(self, in_dim: int, hidden: int, out_dim: int, blocks: int = 2) -> None:
        nn.Module.__init__(self)
        self.inp = nn.Linear(in_dim, hidden)
        self.norms = nn.ModuleList(nn.LayerNorm(hidden) for _ in range(blocks))
        self.ffs = nn.ModuleList(nn.Sequential(nn.Linear(2 * hidden, hidden), nn.GELU(), nn.Linear(hidden, hidden))
                                 for _ in range(blocks))
        self.out = nn.Linear(hidden, out_dim)

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        h = self.inp(x)
        src, dst = edge_index
        deg = torch.zeros(x.shape[0], 1, dtype=x.dtype, device=x.device).index_add_(
            0, dst, torch.ones(dst.shape[0], 1, dtype=x.dtype, device=x.device)).clamp(min=1)
        for norm, ff in zip(self.norms, self.ffs):
            z = norm(h)
            mean = torch.zeros_like(z).index_add_(0, dst, z[src]) / deg
            h = h + ff(torch.cat([z, mean], -1))
        return self.out(h)


def make_trivial(depth: int, in_dim: int) -> NodeModel:
    """The study's BuNN (:func:`iclr25.graphs.bunn_deep.make_model`) with every frame the identity."""
    r = _DEEP
    model = NodeModel("bunn-identity", in_dim, r["width"], 1, layers=depth, block=r["block"], dropout=r["dropout"],
                      bundle_dim=r["bundle_dim"], num_bundles=r["num_bundles"], kernel=r["kernel"], K=r["K"],
                      t_init=r["t"], t_param="relu", orth=r["orth"], phi_gnn=r["phi_gnn"])
    for conv in model.convs:
        conv.tau.requires_grad_(False)
    return model


def make_authors(depth: int, in_dim: int, blocks: int = RECIPE["phi_blocks"]) -> NodeModel:
    """The study's BuNN with a :class:`SAGEFrames` of ``blocks`` blocks as every layer's frame network (its output
    layer initialised as BuNNConv initialises its own: zero weights, unit-normal bias)."""
    model = bunn_deep.make_model(depth, in_dim)
    for conv in model.convs:
        assert isinstance(conv, BuNNConv) and conv.phi is not None
        out_dim = conv.phi[-1].out_features
        conv.phi = SAGEFrames(_DEEP["width"], 32, out_dim, blocks)
        nn.init.zeros_(conv.phi[-1].weight)
        nn.init.normal_(conv.phi[-1].bias, std=1.0)
    return model


def fit(make: Callable[[int], nn.Module], lr: float, seed: int, optimizer: str = "Adam", weight_decay: float = 0.0,
        max_epochs: int = RECIPE["max_epochs"]) -> dict:
    """One run on the 64x64 Minesweeper graph of ``seed`` with the loop of :func:`iclr25.graphs.bunn_deep.run`;
    ``make(in_dim)`` builds the model after ``torch.manual_seed(seed)``. Returns ``val``, ``test``, ``curve``,
    ``plateau``, ``loss_head`` and ``epochs`` as that function does."""
    data = minesweeper_graph(_DEEP["grid"], _DEEP["grid"], seed=seed)
    torch.manual_seed(seed)
    model = make(data.x.shape[1])
    adj = normalized_adjacency(data.edge_index, data.num_nodes)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = (torch.optim.Adam(params, lr=lr) if optimizer == "Adam"
           else torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay))
    y = data.y.float()
    best = dict(val=-1.0, test=0.0, curve=[], plateau=False, loss_head=[], epochs=0)
    stale, every = 0, LOOP["eval_every"]
    for epoch in range(max_epochs):
        model.train()
        opt.zero_grad()
        out = model(data.x, data.edge_index, adj=adj)[:, 0]
        loss = nn.functional.binary_cross_entropy_with_logits(out[data.train_mask], y[data.train_mask])
        loss.backward()
        opt.step()
        best["epochs"] = epoch + 1
        if epoch < LOOP["n_loss_head"]:
            best["loss_head"].append(loss.item())
        if (epoch + 1) % every == 0 and epoch + 1 >= LOOP["warmup"]:
            model.eval()
            with torch.no_grad():
                prob = torch.sigmoid(model(data.x, data.edge_index, adj=adj)[:, 0]).numpy()
            val = float(roc_auc_score(data.y[data.val_mask], prob[data.val_mask]))
            best["curve"].append(val)
            stale = 0 if val > best["val"] + LOOP["min_gain"] else stale + 1
            if val > best["val"]:
                best.update(val=val, test=float(roc_auc_score(data.y[data.test_mask], prob[data.test_mask])))
            if stale >= RECIPE["patience"]:
                best["plateau"] = True
                break
    return best


def tuned_lr(table: dict[str, dict]) -> float:
    """The learning rate of the best validation ROC-AUC in a tuning table keyed by ``f"{lr:g}"``."""
    return float(max(table, key=lambda k: table[k]["val"]))


def next_lr(table: dict[str, dict]) -> float | None:
    """The learning rate the tuning rule tries next: one step past the edge of the tried grid when the best sits
    at that edge, else ``None`` (the optimum is interior)."""
    lrs = sorted(float(k) for k in table)
    best = tuned_lr(table)
    if best == lrs[-1]:
        return best * RECIPE["lr_step"]
    if best == lrs[0]:
        return best / RECIPE["lr_step"]
    return None


def control_arms() -> dict[str, dict]:
    """The controls' depth and learning rate: BuNN's tuned ones for the trivial bundle; GCN-sep at BuNN's depth
    and the learning rate the headroom grid chose for GCN-sep at that depth."""
    deep = bunn_deep.load_record()["results"]["tuning"]
    table = bunn_headroom.load_record()["results"]["tuning"][RECIPE["gcn_sep"]]["table"]
    at_depth = {k: v for k, v in table.items() if int(k.split(",")[0]) == deep["depth"]}
    key = max(at_depth, key=lambda k: at_depth[k]["val"])
    return {"BuNN, trivial bundle": dict(depth=deep["depth"], lr=deep["lr"]),
            f"{RECIPE['gcn_sep']}-{deep['depth']}": dict(depth=deep["depth"], lr=float(key.split(",")[1]))}


def run_arm(arm: str, depth: int, lr: float, seed: int) -> dict:
    """One run of a named arm: the study's BuNN, its trivial bundle, BuNN with the authors' frames (AdamW),
    or a baseline of :data:`iclr25.graphs.bunn_headroom.MODELS` (``"GCN"``, ``"GCN-sep"``, ``"GraphSAGE"``,
    optionally suffixed ``-<depth>``)."""
    if arm == "BuNN":
        return bunn_deep.run(depth, lr, seed)
    if arm == "BuNN, trivial bundle":
        return fit(lambda d: make_trivial(depth, d), lr, seed)
    if arm == "BuNN, authors' frames":
        return fit(lambda d: make_authors(depth, d), lr, seed, RECIPE["optimizer"], RECIPE["weight_decay"])
    name = arm.rsplit("-", 1)[0] if arm.rsplit("-", 1)[-1].isdigit() else arm
    return bunn_headroom.run(name, depth, lr, seed)


def eval_arms() -> dict[str, dict]:
    """The depth and learning rate of every arm of :data:`EVAL`, read from the committed records: the
    authors'-frames BuNN as tuned (``tune`` part), the study's BuNN as :mod:`iclr25.graphs.bunn_deep` tuned it, the
    best tuned baseline as :mod:`iclr25.graphs.bunn_headroom` tuned it (named ``<model>-<depth>``) and Platonov et
    al.'s GCN as :mod:`iclr25.graphs.bunn_gate` trained it."""
    from iclr25.graphs import bunn_gate
    tune, deep = record("tune"), bunn_deep.load_record()["results"]["tuning"]
    hr, gate = bunn_headroom.load_record()["results"], bunn_gate.load_record()["results"]
    best = hr["tuning"][hr["best"]]
    return {"BuNN, authors' frames": dict(depth=tune["depth"], lr=tune["lr"]),
            f"{hr['best']}-{best['depth']}": dict(depth=best["depth"], lr=best["lr"]),
            "BuNN": dict(depth=deep["depth"], lr=deep["lr"]), "GCN": dict(depth=gate["depth"], lr=gate["lr"])}


#: the functions whose code makes each part's record (their stripped source is fingerprinted); the arms' shared
#: code (the layers, the graph, the baselines' and BuNN's runs) is in every part
_SHARED: tuple = (fit, run_arm, bunn_deep.make_model, bunn_deep.run, bunn_headroom.run, NodeModel, BuNNConv, SumGNN,
                  normalized_adjacency, minesweeper_graph)
FINGERPRINTED: dict[str, tuple] = {"controls": _SHARED + (make_trivial, control_arms),
                                   "tune": _SHARED + (SAGEFrames, make_authors, tuned_lr, next_lr),
                                   "eval": _SHARED + (SAGEFrames, make_authors, make_trivial, eval_arms),
                                   "eval2": _SHARED + (SAGEFrames, make_authors, eval_arms)}


def code_fingerprint(part: str) -> dict[str, str]:
    """sha256 of the stripped source (:func:`iclr25.common.digest.strip_source`) of every object that makes the
    record of ``part`` (:data:`FINGERPRINTED`), keyed by module and name. A committed record stores it; its test
    checks that every entry still matches the code."""
    return {f"{_module(o)}.{o.__qualname__}": bytes_sha256(strip_source(inspect.getsource(o)).encode())
            for o in FINGERPRINTED[part]}


def _module(obj: object) -> str:
    """The importable module name of ``obj`` (this file's objects are ``__main__`` when it runs as a script)."""
    return __spec__.name if obj.__module__ == "__main__" and __spec__ is not None else obj.__module__  # type: ignore


def fingerprint_ok(info: dict, part: str) -> bool:
    """Whether every object that makes the record of ``part`` has the source fingerprint the record ``info`` stores
    (a record written by ``python -m`` names this module's objects ``__main__.<name>``)."""
    stored = {k.replace("__main__.", f"{__name__ if __name__ != '__main__' else __spec__.name}."): v
              for k, v in info["code"].items()}
    return all(stored.get(k) == v for k, v in code_fingerprint(part).items())


def record(part: str) -> dict:
    """The committed record of ``part`` (refused if its content differs from its sha256)."""
    return load_record(WEIGHTS / f"{PARTS[part]}.json", f"python -m iclr25.graphs.bunn_controls --part {part}")


def _timed(arm: str, depth: int, lr: float, seed: int) -> dict:
    c0 = time.process_time()
    r = dict(run_arm(arm, depth, lr, seed), cpu_seconds=time.process_time() - c0)
    print(f"{arm} depth {depth} lr {lr:g} seed {seed}: val {r['val']:.4f} test {r['test']:.4f} "
          f"({r['epochs'] if 'epochs' in r else len(r['curve'])} epochs/evals, plateau {r['plateau']}, "
          f"{r['cpu_seconds']:.0f} s)", flush=True)
    return r


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--part", choices=list(PARTS), required=True)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    out = args.out or WEIGHTS / f"{PARTS[args.part]}.json"
    torch.set_num_threads(1)
    c_all = time.process_time()
    depth = bunn_deep.load_record()["results"]["tuning"]["depth"]
    info: dict = dict(part=args.part, recipe=RECIPE, code=code_fingerprint(args.part), torch=torch.__version__,
                      sources={"bunn-deep": bunn_deep.load_record()["sha256_results"],
                               "bunn-headroom": bunn_headroom.load_record()["sha256_results"]})
    if args.part == "controls":
        arms = control_arms()
        info["arms"] = {arm: dict(a, runs={str(s): _timed(arm, a["depth"], a["lr"], s)
                                           for s in RECIPE["control_seeds"]}) for arm, a in arms.items()}
    elif args.part == "tune":
        arm, table = "BuNN, authors' frames", {}
        lrs, steps = list(RECIPE["lr_grid"]), 0
        while lrs:
            for lr in lrs:
                table[f"{lr:g}"] = _timed(arm, depth, lr, RECIPE["tune_seed"])
            nxt = next_lr(table)
            lrs = [nxt] if nxt is not None and steps < RECIPE["max_extend"] else []
            steps += 1
        info.update(arm=arm, depth=depth, table=table, lr=tuned_lr(table), interior=next_lr(table) is None)
    else:
        spec, plan = eval_arms(), EVAL if args.part == "eval" else EVAL2
        info["eval"] = plan
        info["sources"]["bunn-authors-tune"] = record("tune")["sha256"]
        if args.part == "eval2":
            info["sources"]["bunn-authors-eval"] = record("eval")["sha256"]
        runs: dict[str, dict] = {arm: {} for arm in plan["arms"]}
        for s in tqdm(plan["seeds"], desc=args.part):  # seed by seed, every arm
            for arm in plan["arms"]:
                runs[arm][str(s)] = _timed(arm, spec[arm]["depth"], spec[arm]["lr"], s)
        info["arms"] = {arm: dict(spec[arm], runs=runs[arm]) for arm in plan["arms"]}
    info["cpu_s"] = time.process_time() - c_all
    info["sha256"] = record_sha256(info)
    out.write_text(json.dumps(info, indent=1))
    print(f"saved {out}")


if __name__ == "__main__":
    main()
