"""Minesweeper runs of the chapter ``graphs/bunn``: the training loop, and the script that tunes and
evaluates every model and commits the results.

``python -m iclr25.graphs.bunn_minesweeper`` (one thread, about fifteen CPU minutes; ``--models`` and
``--out`` split the work over processes, ``--merge`` joins their files, ``--resume LOG`` reuses the tuning
runs an interrupted process logged, at the precision of the log) does, for every model of
:data:`MODELS` on a ``RECIPE["grid"]``-square Minesweeper graph (Platonov et al.'s recipe,
:func:`iclr25.graphs.synthetic.minesweeper_graph`):

1. tunes the learning rate and the dropout on the grid ``RECIPE["lr_grid"] x RECIPE["dropout_grid"]``
   (both BuNNs at ``t0 = RECIPE["t0_default"]``; then, at the chosen pair, the centre ``t0`` of their
   initial diffusion times on ``RECIPE["t_grid"]``)
   by the best validation ROC-AUC of one run on the tuning seed (its own graph, split and
   initialisation);
2. trains each evaluation seed of ``RECIPE["seeds"]`` (a new graph, split and initialisation) at the
   chosen values until the validation plateau, and records its test ROC-AUC at the best validation
   epoch, the epochs it took, whether it stopped at the plateau, its first losses and BuNN's learned times
   (at the best epoch).

No model is kept: the record, ``weights/bunn-minesweeper.json``, holds the recipe, the tuning table, the
per-seed results and seconds. The chapter loads it and re-runs some evaluation seeds live with
:func:`fit_minesweeper` to show that the record reproduces.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from sklearn.metrics import roc_auc_score
from torch_geometric.data import Data

from iclr25.common.digest import json_sha256
from iclr25.graphs.bundle import NodeModel, laplacian_eigh
from iclr25.graphs.synthetic import minesweeper_graph

WEIGHTS = Path(__file__).parent / "weights"
NAME = "bunn-minesweeper"

#: display name -> NodeModel kind (all in ``block="sep"``: "GCN" is GCNConv with the ego concatenation, which the
#: chapter calls GCN-sep; the record keeps the key "GCN")
MODELS: dict[str, str] = {"MLP": "mlp", "GCN": "gcn", "GraphSAGE": "sage",
                          "BuNN, trivial bundle": "bunn-identity", "BuNN": "bunn"}

#: everything that determines the record. BuNN's kernel is the exact spectral one (all eigenpairs of the
#: 1024-node Laplacian), its times are t = exp(τ) with their own learning rate ``t_lr``, and they start from a
#: spread of one decade around ``t0``, which is tuned on ``t_grid``
RECIPE: dict = dict(grid=32, width=32, layers=2, max_epochs=400, warmup=50, patience=5, eval_every=10, min_gain=1e-3,
                    lr_grid=[1e-3, 3e-3, 1e-2, 3e-2, 1e-1], dropout_grid=[0.0, 0.2, 0.4, 0.6],
                    t_grid=[0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0], t0_default=1.0, t_spread=1.0, t_lr=0.05,
                    kernel="spectral", tune_seed=100, seeds=list(range(10)), n_loss_head=5)


def t_init(t0: float, num_bundles: int = 8) -> list[float]:
    """Initial times of the bundles: log-spaced over ``RECIPE["t_spread"]`` decades centred on ``t0``."""
    half = RECIPE["t_spread"] / 2
    return (t0 * 10.0 ** np.linspace(-half, half, num_bundles)).tolist()


def bunn_kwargs(t0: float = RECIPE["t0_default"]) -> dict:
    """BuNN's layer settings: 8 two-dimensional bundles with angle frames from a one-layer SumGNN, the exact
    spectral heat kernel and learned times ``t = exp(τ)`` starting at :func:`t_init` ``(t0)``."""
    return dict(bundle_dim=2, num_bundles=8, kernel="spectral", orth="angle", t_param="log",
                t_init=t_init(t0), phi_gnn=1)


def minesweeper_data(seed: int, grid: int = RECIPE["grid"], device: str | torch.device = "cpu"
                     ) -> tuple[Data, tuple[torch.Tensor, torch.Tensor]]:
    """The Minesweeper graph of one seed and all eigenpairs of its normalised Laplacian, on ``device``."""
    data = minesweeper_graph(grid, grid, seed=seed)
    lam, phi = laplacian_eigh(data.edge_index, data.num_nodes, dtype=torch.float32)
    return data.to(device), (lam.to(device), phi.to(device))


def fit_minesweeper(kind: str, data: Data, eig: tuple[torch.Tensor, torch.Tensor], lr: float, dropout: float,
                    seed: int, t0: float = RECIPE["t0_default"], max_epochs: int = RECIPE["max_epochs"],
                    patience: int = RECIPE["patience"], layers: int = 2, block: str = "sep") -> dict:
    """Full-batch Adam on the binary cross-entropy until the validation ROC-AUC (every 10 epochs from epoch
    ``RECIPE["warmup"]`` on) has not gained 0.001 for ``patience`` evaluations, or ``max_epochs``.

    The first epochs are not evaluated: near the initialisation the validation ROC-AUC is noise, and a lucky
    early value would otherwise stop a run that is about to learn (and be selected as its best epoch).
    BuNN's log-times ``τ`` get their own learning rate ``RECIPE["t_lr"]``; ``t0`` sets their start.

    Returns a dict: ``val`` (best validation ROC-AUC), ``test`` (test ROC-AUC at that epoch), ``prob``
    (probabilities at that epoch), ``curve`` (validation ROC-AUC per evaluation), ``plateau`` (stopped by
    patience, not by the cap), ``loss_head`` (the first training losses) and, for BuNN, ``t`` (the learned
    times at the best epoch, every layer).
    """
    torch.manual_seed(seed)
    model = NodeModel(kind, data.x.shape[1], RECIPE["width"], 1, layers=layers, block=block,
                      dropout=dropout, **(bunn_kwargs(t0) if "bunn" in kind else {})).to(data.x.device)
    taus = [p for name, p in model.named_parameters() if name.endswith(".tau")]
    rest = [p for name, p in model.named_parameters() if not name.endswith(".tau")]
    opt = torch.optim.Adam([dict(params=rest, lr=lr)] + ([dict(params=taus, lr=RECIPE["t_lr"])] if taus else []))
    y = data.y.float()
    y_cpu, masks = data.y.cpu(), {m: data[m].cpu() for m in ("val_mask", "test_mask")}
    best = dict(val=-1.0, test=0.0, prob=None, curve=[], plateau=False, loss_head=[])
    stale, every = 0, RECIPE["eval_every"]

    def times() -> list[float]:
        return np.concatenate([conv.diffusion_time().detach().cpu().numpy() for conv in model.convs]).tolist()

    for epoch in range(max_epochs):
        model.train()
        opt.zero_grad()
        out = model(data.x, data.edge_index, eig=eig)[:, 0]
        loss = torch.nn.functional.binary_cross_entropy_with_logits(out[data.train_mask], y[data.train_mask])
        loss.backward()
        opt.step()
        if epoch < RECIPE["n_loss_head"]:
            best["loss_head"].append(loss.item())
        if (epoch + 1) % every == 0 and epoch + 1 >= RECIPE["warmup"]:
            model.eval()
            with torch.no_grad():
                prob = torch.sigmoid(model(data.x, data.edge_index, eig=eig)[:, 0]).cpu().numpy()
            val = float(roc_auc_score(y_cpu[masks["val_mask"]], prob[masks["val_mask"]]))
            best["curve"].append(val)
            stale = 0 if val > best["val"] + RECIPE["min_gain"] else stale + 1
            if val > best["val"]:
                test = float(roc_auc_score(y_cpu[masks["test_mask"]], prob[masks["test_mask"]]))
                best.update(val=val, prob=prob, test=test)
                if taus:
                    best["t"] = times()
            if stale >= patience:
                best["plateau"] = True
                break
    if taus and "t" not in best:
        best["t"] = times()
    return best


def _summary(res: dict) -> dict:
    """The JSON-able part of a run."""
    return {k: res[k] for k in ("val", "test", "curve", "plateau", "loss_head", "t") if k in res}


def load_record(path: Path | None = None) -> dict:
    """The committed record; checks that its results were not edited after the run (sha256 of the results)."""
    info = json.loads((path or WEIGHTS / f"{NAME}.json").read_text())
    digest = json_sha256(info["results"])
    if digest != info["sha256_results"]:
        raise RuntimeError(f"record sha256 {digest[:12]} differs from the recorded {info['sha256_results'][:12]}")
    return info


def _logged(log: Path) -> dict[str, float]:
    """The tuning lines ``"<name> lr <lr> dropout <p>: val <v>"`` of a log."""
    out = {}
    for line in (log.read_text().splitlines() if log.exists() else []):
        if " dropout " in line and ": val " in line:
            head, val = line.rsplit(": val ", 1)
            out[head] = float(val)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=WEIGHTS / f"{NAME}.json")
    parser.add_argument("--models", default=";".join(MODELS), help="names separated by semicolons")
    parser.add_argument("--merge", type=Path, nargs="*", help="join the results of partial runs into --out")
    parser.add_argument("--resume", type=Path, nargs="*", default=[],
                        help="logs of interrupted runs: their tuning lines are reused (the runs are deterministic)")
    parser.add_argument("--tune-only", default="", help="learning rates (comma-separated) to tune and log, then stop")
    parser.add_argument("--eval-seeds", default="", help="evaluation seeds (comma-separated) this process trains")
    args = parser.parse_args()
    done: dict[str, float] = {}
    if args.merge:
        parts = [json.loads(p.read_text()) for p in args.merge]
        results = {}
        for part in parts:  # the evaluation seeds of one model may come from several processes
            for name, r in part["results"].items():
                if name in results:
                    if (r["lr"], r["dropout"], r.get("t0"), r["tuning"]) != (
                            results[name]["lr"], results[name]["dropout"], results[name].get("t0"),
                            results[name]["tuning"]):
                        raise ValueError(f"{name}: the parts disagree on the tuning")
                    results[name]["runs"].update(r["runs"])
                    results[name]["cpu_seconds"] += r["cpu_seconds"]
                else:
                    results[name] = r
        results = {name: dict(results[name], runs=dict(sorted(results[name]["runs"].items())))
                   for name in MODELS if name in results}
        info = dict(recipe=RECIPE, results=results,
                    sha256_results=json_sha256(results),
                    torch=torch.__version__, wall_seconds=max(p["wall_seconds"] for p in parts))
        args.out.write_text(json.dumps(info, indent=1))
        print(f"saved {args.out}")
        return
    torch.set_num_threads(1)
    names = args.models.split(";")
    tune = minesweeper_data(RECIPE["tune_seed"])
    results: dict = {}
    t_all = time.time()
    for name in names:
        c0 = time.process_time()
        table = {}
        only = [float(v) for v in args.tune_only.split(",") if v]
        t_grid = RECIPE["t_grid"] if "bunn" in MODELS[name] else [None]
        t_first = None if t_grid == [None] else RECIPE["t0_default"]

        def tune_at(lr: float, dp: float, t0: float | None) -> None:
            head = f"{name} lr {lr:g} dropout {dp:g}" + ("" if t0 is None else f" t0 {t0:g}")
            key = f"{lr:g},{dp:g}" + ("" if t0 is None else f",{t0:g}")
            for log in args.resume:  # re-read: a helper process may be filling it
                done.update(_logged(log))
            if key not in table:
                table[key] = done[head] if head in done else fit_minesweeper(
                    MODELS[name], *tune, lr, dp, RECIPE["tune_seed"], **({} if t0 is None else dict(t0=t0)))["val"]
            print(f"{head}: val {table[key]!r}", flush=True)

        # stage 1: learning rate x dropout (BuNN at t0_default); stage 2 (BuNN): t0 at the chosen pair
        for lr in only or RECIPE["lr_grid"]:
            for dp in RECIPE["dropout_grid"]:
                tune_at(lr, dp, t_first)
        if t_first is not None and not only:
            lr1, dp1 = (float(v) for v in max(table, key=table.get).split(",")[:2])
            for t0 in t_grid:
                tune_at(lr1, dp1, t0)
        if only:
            continue
        best = [float(v) for v in max(table, key=table.get).split(",")]
        lr, dp, extra = best[0], best[1], ({} if len(best) == 2 else dict(t0=best[2]))
        runs = {}
        for s in [int(v) for v in args.eval_seeds.split(",") if v] or RECIPE["seeds"]:
            runs[str(s)] = _summary(fit_minesweeper(MODELS[name], *minesweeper_data(s), lr, dp, s, **extra))
            print(f"{name} seed {s}: test {runs[str(s)]['test']:.4f}", flush=True)
        results[name] = dict(kind=MODELS[name], tuning=table, lr=lr, dropout=dp, **extra, runs=runs,
                             cpu_seconds=time.process_time() - c0)
    info = dict(recipe=RECIPE, results=results,
                sha256_results=json_sha256(results),
                torch=torch.__version__, wall_seconds=time.time() - t_all)
    args.out.write_text(json.dumps(info, indent=1))
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
