"""The BuNN arm of the 64x64 Minesweeper study of the chapter ``graphs/bunn``: the authors' Minesweeper
configuration, scaled down, trained on the stand-in on which the depth-tuned baselines passed the gate.

The authors' best Minesweeper BuNN (their README and ``scripts/best_runs.sh``: ``--model BUNN --num_layers 8
--num_gnn 8 --num_bundles 256 --hidden_dim 512 --max_degree 8 --tau 1 --orth_meth euler``) is a deep *local*
model: 8 layers whose heat kernel is the degree-8 Taylor series at a **fixed** time t = 1 (not learned), with
angle ("euler") frames from a graph network, width 512 in 256 two-dimensional bundles. Here the same layer,
:class:`iclr25.graphs.bundle.BuNNConv` with ``kernel="taylor"``, ``K = RECIPE["K"]`` and ``t = RECIPE["t"]``
frozen, angle frames from a ``RECIPE["phi_gnn"]``-layer SumGNN, in the ``sep`` block at the baselines' width 32
(8 bundles of dimension 2) and dropout 0.2, is tuned with the baselines' rule of
:mod:`iclr25.graphs.bunn_headroom` (its own ``depth_grid x lr_grid`` on the tuning seed, extended by
``depth_extend`` if the deepest depth is best), then, since the chosen learning rate is always an edge of a
two-point grid, at the chosen depth one learning rate beyond that edge (``lr_down`` or ``lr_up``, the step
:mod:`iclr25.graphs.bunn_edges` gives every baseline), and then trained on the same evaluation seeds (the same graphs,
splits and initialisation seeds as the baselines, so the differences are paired). The training loop is
:func:`iclr25.graphs.bunn_minesweeper.fit_minesweeper`'s rule: full-batch Adam on the binary cross-entropy,
validation every 10 epochs from epoch 50, stop when 10 evaluations in a row fail to gain 0.001 (or at 1000
epochs); the test ROC-AUC is read at the best validation epoch.

``python -m iclr25.graphs.bunn_deep`` (one thread) writes ``weights/bunn-deep.json``: the recipe, the sha256 of
the modules that train it, the tuning table, the evaluation runs (validation and test ROC-AUC, curve, first
losses, CPU seconds) and a sha256 of the results. No model is kept.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from sklearn.metrics import roc_auc_score

from iclr25.common.digest import file_sha256, json_sha256
from iclr25.graphs import bunn_headroom
from iclr25.graphs.bundle import NodeModel, normalized_adjacency
from iclr25.graphs.bunn_minesweeper import RECIPE as LOOP
from iclr25.graphs.synthetic import minesweeper_graph

WEIGHTS = bunn_headroom.WEIGHTS
NAME = "bunn-deep"
HERE = bunn_headroom.HERE
_HR = bunn_headroom.RECIPE

#: the layer (the authors' Minesweeper BuNN, scaled down) and the baselines' tuning rule and seeds
RECIPE: dict = dict(kernel="taylor", K=8, t=1.0, bundle_dim=2, num_bundles=8, orth="angle", phi_gnn=1,
                    block="sep", width=_HR["width"], dropout=_HR["dropout"], depth_grid=_HR["depth_grid"],
                    depth_extend=_HR["depth_extend"], lr_grid=_HR["lr_grid"], max_epochs=_HR["max_epochs"],
                    patience=_HR["patience"], grid=_HR["grid"], tune_seed=_HR["tune_seed"], seeds=_HR["seeds"],
                    lr_down=1e-3, lr_up=3e-2)

#: the modules whose code determines the runs (their sha256 goes into the record)
CODE = ("bunn_deep.py", "bunn_minesweeper.py", "bundle.py", "synthetic.py")


def code_sha256() -> dict[str, str]:
    """sha256 of every module in :data:`CODE`."""
    return {name: file_sha256(HERE / name) for name in CODE}


def make_model(depth: int, in_dim: int, dropout: float = RECIPE["dropout"]) -> NodeModel:
    """BuNN of ``depth`` layers: Taylor kernel of degree ``K`` at the fixed time ``t`` (``τ`` frozen)."""
    model = NodeModel("bunn", in_dim, RECIPE["width"], 1, layers=depth, block=RECIPE["block"], dropout=dropout,
                      bundle_dim=RECIPE["bundle_dim"], num_bundles=RECIPE["num_bundles"], kernel=RECIPE["kernel"],
                      K=RECIPE["K"], t_init=RECIPE["t"], t_param="relu", orth=RECIPE["orth"],
                      phi_gnn=RECIPE["phi_gnn"])
    for conv in model.convs:
        conv.tau.requires_grad_(False)  # t = 1 is a constant, as in the authors' BUNNModule
    return model


def run(depth: int, lr: float, seed: int, max_epochs: int = RECIPE["max_epochs"]) -> dict:
    """One run on the Minesweeper graph of ``seed`` (its own graph, split and initialisation).

    Returns a dict: ``val`` (best validation ROC-AUC), ``test`` (test ROC-AUC at that epoch), ``curve``
    (validation ROC-AUC per evaluation), ``plateau`` (stopped by patience, not by the cap), ``loss_head`` (the
    first training losses) and ``epochs``.
    """
    data = minesweeper_graph(RECIPE["grid"], RECIPE["grid"], seed=seed)
    torch.manual_seed(seed)
    model = make_model(depth, data.x.shape[1])
    adj = normalized_adjacency(data.edge_index, data.num_nodes)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr)
    y = data.y.float()
    best = dict(val=-1.0, test=0.0, curve=[], plateau=False, loss_head=[], epochs=0)
    stale, every = 0, LOOP["eval_every"]
    for epoch in range(max_epochs):
        model.train()
        opt.zero_grad()
        out = model(data.x, data.edge_index, adj=adj)[:, 0]
        loss = torch.nn.functional.binary_cross_entropy_with_logits(out[data.train_mask], y[data.train_mask])
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
    table: dict[str, dict] = {}
    depths = list(RECIPE["depth_grid"])
    while depths:
        for depth in depths:
            for lr in RECIPE["lr_grid"]:
                c0 = time.process_time()
                r = table[f"{depth},{lr:g}"] = dict(run(depth, lr, RECIPE["tune_seed"]),
                                                    cpu_seconds=time.process_time() - c0)
                print(f"BuNN depth {depth} lr {lr:g}: val {r['val']:.4f} ({r['epochs']} epochs, "
                      f"{r['cpu_seconds']:.0f} s)", flush=True)
        best_depth = int(max(table, key=lambda k: table[k]["val"]).split(",")[0])
        deepest = max(int(k.split(",")[0]) for k in table)
        depths = [RECIPE["depth_extend"]] if best_depth == deepest < RECIPE["depth_extend"] else []
    key = max(table, key=lambda k: table[k]["val"])
    depth, lr = int(key.split(",")[0]), float(key.split(",")[1])
    # one step beyond the edge of the learning-rate grid that was chosen, at the chosen depth
    lr_ext = RECIPE["lr_up"] if lr == max(RECIPE["lr_grid"]) else RECIPE["lr_down"]
    c0 = time.process_time()
    r = table[f"{depth},{lr_ext:g}"] = dict(run(depth, lr_ext, RECIPE["tune_seed"]), cpu_seconds=time.process_time() - c0)
    print(f"BuNN depth {depth} lr {lr_ext:g}: val {r['val']:.4f} ({r['epochs']} epochs, {r['cpu_seconds']:.0f} s)",
          flush=True)
    key = max(table, key=lambda k: table[k]["val"])
    depth, lr = int(key.split(",")[0]), float(key.split(",")[1])
    runs = {}
    for s in RECIPE["seeds"]:
        c0 = time.process_time()
        runs[str(s)] = dict(run(depth, lr, s), cpu_seconds=time.process_time() - c0)
        print(f"BuNN-{depth} seed {s}: test {runs[str(s)]['test']:.4f} ({runs[str(s)]['epochs']} epochs, "
              f"{runs[str(s)]['cpu_seconds']:.0f} s)", flush=True)
    results = dict(tuning=dict(table=table, depth=depth, lr=lr), runs=runs)
    info = dict(recipe=RECIPE, code_sha256=code_sha256(), results=results, sha256_results=json_sha256(results),
                torch=torch.__version__, cpu_seconds=time.process_time() - c_all, wall_seconds=time.time() - t_all)
    args.out.write_text(json.dumps(info, indent=1))
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
