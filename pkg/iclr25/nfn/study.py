"""The seeded comparison behind the Transformer-NFN chapter's paper rows: ``python -m iclr25.nfn.study``.

Everything is fixed in :data:`PROTOCOL` before any run (the evaluation is pre-registered in code):

- the zoo the predictors see: the committed zoo without the runs whose weights carry the trainer's
  zero fingerprint (more than ``zero_share`` of the encoder weights exactly 0, where the trainer
  replaced non-finite entries), cut to a multiple of the fold count;
- 5-fold cross-fitting by run (test fold ``f``, validation fold ``f + 1``, training the rest);
- per neural method one learning rate from its grid, chosen on the validation tau averaged over the
  folds and over the *tuning* seeds (``tune_seeds``: 3 seeds apart from the evaluation seeds); the
  plateau is checked upward with the first tuning seed at the chosen rate: twice the epochs (with its
  own schedule) may gain at most ``plateau`` in mean validation tau over that seed's own value;
- the test predictions come from separate *evaluation* seeds (new initialisation and batch order);
- the trees (sized like the official XGBoost/LightGBM runs: depth 8, up to 300 rounds, feature
  subsampling) choose their number of rounds on the validation tau averaged over the folds and the
  tuning seeds and are refit with an evaluation seed;
- a paper row is decided by :func:`iclr25.nfn.metrics.seed_pooled_difference`
  (:func:`paper_verdict`).

The record (``weights/study.json``) holds the recipe, the run ids, every chosen learning rate and
curve, the plateau gains, the evaluation seeds' test predictions, fingerprints of the functions that
made it (:func:`iclr25.common.digest.strip_source`) and its sha256 (:func:`record_sha256`).
"""

from __future__ import annotations

import inspect
import json
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from iclr25.common.digest import bytes_sha256, load_record, record_sha256, strip_source
from iclr25.nfn import baselines, fit, layers, metrics
from iclr25.nfn.baselines import MLPRegressor, flatten_weights, stat_features
from iclr25.nfn.block import KEYS, BlockSpec
from iclr25.nfn.fit import fit_ensemble, select_mean
from iclr25.nfn.layers import TransformerNFN, invariant_features
from iclr25.nfn.metrics import kendall_tau, seed_pooled_difference

PATH = Path(__file__).parent / "weights" / "study.json"
RERUN = "python -m iclr25.nfn.study"
SPEC = BlockSpec(h=2, D=16, Dk=8, Dv=8, Da=32)
PROTOCOL: dict[str, Any] = {
    "seed": 0, "n_folds": 5, "zero_share": 1e-3, "tune_seed": 0, "tune_seeds": [0, 4, 5], "eval_seeds": [1, 2, 3],
    "nfn": {"channels": [10], "hidden": 16, "epochs": 20, "grid": [3e-5, 1e-4, 3e-4, 1e-3, 3e-3]},
    "mlp": {"hidden": 32, "epochs": 80, "grid": [1e-3, 3e-3, 1e-2, 3e-2]},
    "statnn": {"hidden": 32, "epochs": 60, "grid": [1e-3, 3e-3, 1e-2, 3e-2, 1e-1]},
    "gbm": {"learning_rate": 0.1, "max_iter": 300, "max_depth": 8, "min_samples_leaf": 10, "max_bins": 32,
            "max_features": 0.5},
    "controls": {"nfn_batch_grid": [1e-4, 3e-4, 1e-3, 3e-3], "nfn_wide_channels": [32]},
    "plateau": 0.02, "margin": 0.1, "level": 0.95,
}


def zero_share(W: dict[str, torch.Tensor]) -> np.ndarray:
    """Per run, the share of its encoder weights that are exactly 0 (``(n,)``)."""
    return (flatten_weights(W) == 0).float().mean(1).numpy()


def study_runs(W: dict[str, torch.Tensor], share: float, n_folds: int) -> np.ndarray:
    """The run ids the predictors see: those with at most ``share`` exact zeros, the first
    ``n_folds * k`` of them."""
    keep = np.flatnonzero(zero_share(W) <= share)
    return keep[: len(keep) // n_folds * n_folds]


def fold_indices(n: int, n_folds: int, seed: int) -> dict[str, np.ndarray]:
    """Cross-fitting positions ``(n_folds, n / n_folds)`` (training ``(n_folds, (n_folds - 2) n / n_folds)``):
    test fold ``f``, validation fold ``f + 1``, training the rest; the permutation is ``seed + 1``'s."""
    perm = np.random.default_rng(seed + 1).permutation(n).reshape(n_folds, -1)
    train = np.stack([np.concatenate([perm[(f + j) % n_folds] for j in range(2, n_folds)]) for f in range(n_folds)])
    return {"test": perm, "val": np.roll(perm, -1, 0), "train": train}


def take(X: Any, i: np.ndarray) -> Any:
    """Rows ``i`` (any shape of integer array) of a tensor or of every tensor of a dict."""
    return {k: v[torch.as_tensor(i)] for k, v in X.items()} if isinstance(X, dict) else X[torch.as_tensor(i)]


def train_predictor(make: Callable[[np.ndarray], torch.nn.Module], X: Any, acc: np.ndarray,
                    idx: dict[str, np.ndarray], lrs: list[float], epochs: int, seed: int) -> fit.Selection:
    """Every learning rate of ``lrs`` on every fold for a fixed epoch budget (last epoch kept),
    initialised under ``torch.manual_seed(seed)`` with batch order from ``seed``. ``make(train_ids)``
    builds a fresh predictor whose normalising constants come from those training runs."""
    torch.manual_seed(seed)
    data = {s: take(X, i) for s, i in idx.items()}
    tgt = {s: torch.tensor(acc[i], dtype=torch.float32) for s, i in idx.items()}
    return fit_ensemble(lambda s, k: make(idx["train"][s]), data, tgt, [dict(lr=lr, wd=0.0) for lr in lrs],
                        epochs=epochs, seed=seed, select_epoch=False, eval_every=epochs)


def study_neural(make: Callable[[np.ndarray], torch.nn.Module], X: Any, acc: np.ndarray,
                 idx: dict[str, np.ndarray], grid: list[float], epochs: int, eval_seeds: list[int],
                 tune_seeds: list[int], plateau_check: bool = True) -> dict[str, Any]:
    """Tune the learning rate on the validation tau averaged over the folds and over ``tune_seeds``
    (``lr_curve``; ``lr_curves`` holds each seed's fold mean), check the plateau at twice the epochs
    with the first tuning seed (gain over that seed's own value at the chosen rate), then train every
    evaluation seed at the chosen rate.
    Returns the record entry; ``pred`` is ``(seeds, n)`` in the order of ``idx["test"].reshape(-1)``."""
    t = time.process_time()
    curves = np.stack([select_mean(train_predictor(make, X, acc, idx, grid, epochs, s))[1] for s in tune_seeds])
    curve = curves.mean(0)
    k = int(np.argmax(curve))
    out: dict[str, Any] = {"grid": grid, "lr_curve": curve.round(4).tolist(), "lr_curves": curves.round(4).tolist(),
                           "tune_seeds": list(tune_seeds), "k": k, "lr": grid[k], "epochs": epochs}
    if plateau_check:       # what twice the epochs (own warm-up and cosine decay) gain over the budget
        sel = train_predictor(make, X, acc, idx, [grid[k]], 2 * epochs, tune_seeds[0])
        out["gain_double"] = round(float(np.mean(sel.val_tau[:, 0]) - curves[0, k]), 4)
    preds, val = [], []
    for s in eval_seeds:
        sel = train_predictor(make, X, acc, idx, [grid[k]], epochs, s)
        preds.append(sel.pred.reshape(-1).round(5).tolist())
        val.append(round(float(np.mean(sel.val_tau[:, 0])), 4))
    out.update(pred=preds, val_tau=val, eval_seeds=list(eval_seeds), cpu_s=round(time.process_time() - t, 1))
    return out


def study_gbm(X: np.ndarray, acc: np.ndarray, idx: dict[str, np.ndarray], cfg: dict[str, Any],
              eval_seed: int, tune_seeds: list[int]) -> dict[str, Any]:
    """Histogram gradient boosting sized like the official trees: the number of rounds (up to
    ``max_iter``) with the best validation tau averaged over the folds and over ``tune_seeds``
    (the seed draws the features of each split), then one refit per fold at that many rounds under
    ``eval_seed``."""
    from sklearn.ensemble import HistGradientBoostingRegressor

    t = time.process_time()
    make = lambda n, rs: HistGradientBoostingRegressor(
        max_iter=n, learning_rate=cfg["learning_rate"], max_depth=cfg["max_depth"],
        min_samples_leaf=cfg["min_samples_leaf"], max_bins=cfg["max_bins"], max_features=cfg["max_features"],
        early_stopping=False, random_state=rs)
    curves = []                                   # (tuning seed, fold) rows, one value per round
    for s in tune_seeds:
        for f in range(idx["test"].shape[0]):
            m = make(cfg["max_iter"], s).fit(X[idx["train"][f]], acc[idx["train"][f]])
            curves.append([kendall_tau(p, acc[idx["val"][f]]) for p in m.staged_predict(X[idx["val"][f]])])
    curve = np.nanmean(np.array(curves), 0)
    n_best = int(np.nanargmax(curve)) + 1
    pred = [make(n_best, eval_seed).fit(X[idx["train"][f]], acc[idx["train"][f]]).predict(X[idx["test"][f]])
            for f in range(idx["test"].shape[0])]
    return {"rounds": n_best, "max_iter": cfg["max_iter"], "val_at_rounds": round(float(curve[n_best - 1]), 4),
            "val_at_max": round(float(curve[-1]), 4), "pred": [np.concatenate(pred).round(5).tolist()],
            "eval_seeds": [eval_seed], "tune_seeds": list(tune_seeds), "cpu_s": round(time.process_time() - t, 1)}


def make_nfn(W: dict[str, torch.Tensor], channels: list[int], hidden: int, head: str = "layernorm"):
    """A ``make(train_ids)`` for :func:`train_predictor`: Transformer-NFN with slot scales from the training runs."""
    def make(train_ids):
        m = TransformerNFN(SPEC, 2, channels=tuple(channels), hidden=hidden, head=head)
        m.set_scales(take(W, train_ids))
        return m
    return make


def make_mlp(X: torch.Tensor, hidden: int):
    """A ``make(train_ids)``: :class:`MLPRegressor` standardised on the training runs."""
    def make(train_ids):
        m = MLPRegressor(X.shape[1], hidden)
        m.set_standardization(X[torch.as_tensor(train_ids)])
        return m
    return make


def paper_verdict(c: dict[str, float], gates: list[str]) -> tuple[bool | None, str | None]:
    """The pre-registered rule of a paper row: ``None`` with the reasons if a competence gate failed;
    else ``True`` if the seed-pooled interval of ``tau(NFN) - tau(baseline)`` lies above 0, ``False``
    if below, ``None`` ("the interval contains 0") otherwise."""
    if gates:
        return None, "; ".join(gates)
    if c["lo"] > 0:
        return True, None
    if c["hi"] < 0:
        return False, None
    return None, "the seed-pooled 95% interval contains 0"


FINGERPRINTED = (zero_share, study_runs, fold_indices, take, train_predictor, study_neural, study_gbm, make_nfn,
                 make_mlp, paper_verdict, fit.fit_ensemble, fit._schedule, fit.select_mean, layers.TransformerNFN,
                 layers.TransformerNFNEquivariant, layers.TransformerNFNInvariant, layers.invariant_features,
                 layers.hidden_unit_features, layers.output_unit_features, layers.masked_relu,
                 baselines.MLPRegressor, baselines.stat_features, baselines.tensor_stats, baselines.flatten_weights,
                 metrics.kendall_tau)


def _name(module: str, qualname: str) -> str:
    """``module.qualname``, with ``__main__`` (this file run as ``python -m``) read as this module."""
    return f"{'iclr25.nfn.study' if module == '__main__' else module}.{qualname}"


def fingerprints() -> dict[str, str]:
    """sha256 of the stripped source of every function or class that makes the record."""
    return {_name(o.__module__, o.__qualname__): bytes_sha256(strip_source(inspect.getsource(o)).encode())
            for o in FINGERPRINTED}


def stale_functions(record: dict[str, Any]) -> list[str]:
    """The functions whose source changed since ``record`` was made (or that it does not list)."""
    made = {_name(*k.rsplit(".", 1)) if k.startswith("__main__.") else k: v for k, v in record["fingerprints"].items()}
    return sorted(k for k, v in fingerprints().items() if made.get(k) != v)


def load_study() -> dict[str, Any]:
    """The committed record, refused if its content does not match its sha256."""
    return load_record(PATH, RERUN)


def main(only: list[str] | None = None) -> None:
    """Run the study with one thread and write :data:`PATH`. ``only``: re-run just these methods of
    the committed record under the current :data:`PROTOCOL` (a baseline that failed its competence
    checks gets a larger budget) and keep the others; the record then stores the current protocol."""
    from tqdm.auto import tqdm

    from iclr25.nfn.make_zoo import load_zoo

    torch.set_num_threads(1)
    P = PROTOCOL
    t0, w0 = time.process_time(), time.time()
    zoo = load_zoo()
    W_all = {k: torch.stack([zoo["params"][f"enc{l}.{k}"] for l in range(2)], 1).float() for k in KEYS}
    runs = study_runs(W_all, P["zero_share"], P["n_folds"])
    W = take(W_all, runs)
    acc = zoo["accuracy"][-1].numpy().astype(np.float64)[runs]
    idx = fold_indices(len(runs), P["n_folds"], P["seed"])
    order = idx["test"].reshape(-1)
    tss, es = P["tune_seeds"], P["eval_seeds"]
    n, m, st, c = P["nfn"], P["mlp"], P["statnn"], P["controls"]
    X_flat, X_stat = flatten_weights(W), stat_features(W)
    W_mlp_slots = {k: (torch.zeros_like(v) if k in ("WQ", "WK", "WV", "WO") else v) for k, v in W.items()}
    jobs = {
        "Transformer-NFN": lambda: study_neural(make_nfn(W, n["channels"], n["hidden"]), W, acc, idx, n["grid"],
                                                n["epochs"], es, tss),
        "MLP (flat weights)": lambda: study_neural(make_mlp(X_flat, m["hidden"]), X_flat, acc, idx, m["grid"],
                                                   m["epochs"], es, tss),
        "STATNN": lambda: study_neural(make_mlp(X_stat, st["hidden"]), X_stat, acc, idx, st["grid"],
                                       st["epochs"], es, tss),
        "GBM (flat weights)": lambda: study_gbm(X_flat.numpy(), acc, idx, P["gbm"], es[0], tss),
        "GBM on the NFN's pooled invariants": lambda: study_gbm(
            torch.cat([invariant_features({k: v[:, l, None] for k, v in W.items()}) for l in range(2)], -1).numpy(),
            acc, idx, P["gbm"], es[0], tss),
        "Transformer-NFN, batch-standardised head": lambda: study_neural(
            make_nfn(W, n["channels"], n["hidden"], head="batch"), W, acc, idx, c["nfn_batch_grid"], n["epochs"],
            es[:1], tss),
        # one-point grids at the NFN's chosen rate: nothing to choose, so one tuning seed for the validation tau
        "Transformer-NFN, MLP slots only": lambda: study_neural(
            make_nfn(W_mlp_slots, n["channels"], n["hidden"]), W_mlp_slots, acc, idx,
            [methods["Transformer-NFN"]["lr"]], n["epochs"], es[:1], tss[:1], plateau_check=False),
        "Transformer-NFN 1x32": lambda: study_neural(
            make_nfn(W, c["nfn_wide_channels"], n["hidden"]), W, acc, idx, [methods["Transformer-NFN"]["lr"]],
            n["epochs"], es[:1], tss[:1], plateau_check=False),
    }
    old = load_study() if only else None
    methods: dict[str, Any] = dict(old["methods"]) if old else {}
    todo = [k for k in jobs if not only or k in only]
    bar = tqdm(total=len(todo), desc="study")
    for name in todo:
        methods[name] = jobs[name]()
        print(name, {k: v for k, v in methods[name].items() if k != "pred"}, flush=True)
        bar.update()
    bar.close()
    cpu = round(time.process_time() - t0 + (old["cpu_s"] if old else 0), 1)
    record = {"protocol": P, "runs": runs.tolist(), "order": order.tolist(),
              "n_zero_fingerprint": int((zero_share(W_all) > P["zero_share"]).sum()),
              "methods": methods, "fingerprints": fingerprints(), "torch": torch.__version__,
              "cpu_s": cpu, "wall_s": round(time.time() - w0 + (old["wall_s"] if old else 0), 1),
              "rerun": (old.get("rerun", []) if old else []) + ([sorted(only)] if only else [])}
    record["sha256"] = record_sha256(record)
    PATH.write_text(json.dumps(record, separators=(",", ":")) + "\n")
    print(f"wrote {PATH} ({PATH.stat().st_size / 1e3:.0f} kB) in {record['cpu_s']:.0f} s CPU, sha256 {record['sha256'][:12]}")


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="re-run just these methods of the committed record")
    main(ap.parse_args().only)
