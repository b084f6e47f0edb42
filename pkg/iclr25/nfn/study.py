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
    "mlp": {"hidden": 32, "epochs": 80, "grid": [1e-3, 3e-3, 1e-2, 3e-2, 1e-1]},
    "statnn": {"hidden": 32, "epochs": 60, "grid": [1e-3, 3e-3, 1e-2, 3e-2, 1e-1]},
    "gbm": {"learning_rate": 0.1, "max_iter": 300, "max_depth": 8, "min_samples_leaf": 10, "max_bins": 32,
            "max_features": 0.5},
    "controls": {"nfn_batch_grid": [1e-4, 3e-4, 1e-3, 3e-3], "nfn_wide_channels": [32], "aug_cond": 2.0},
    # weight decay, tuned after the learning rate at the chosen rate by the same rule: the decay per step
    # at peak rate, lr * wd (decoupled), so one grid shrinks every method's weights from not at all to
    # strongly whatever its rate and step count (wd = decay / lr)
    # (0 is the grid's natural lower end; if the largest decay is chosen, the grid grows by a decade,
    # at most decay_extend times, until the choice is interior)
    "decay_grid": [0.0, 1e-4, 1e-3, 1e-2], "decay_extend": 2,
    # learning curve: each fold's training runs cut to their first fraction (nested), the chosen setting,
    # the epochs scaled by 1 / fraction so that every point takes the same number of gradient steps
    "curve_fractions": [0.25, 0.5],
    # a paper row whose gap the learning curve projects to reverse within this many doublings of the
    # training runs (32x: about 10^4 runs, the order of the paper's zoo) is undecided (regime_gate)
    "horizon_doublings": 5,
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
                    idx: dict[str, np.ndarray], lrs: list[float], epochs: int, seed: int, wds: list[float] | None = None,
                    augment: Callable | None = None) -> fit.Selection:
    """Every learning rate of ``lrs`` (with decoupled weight decay ``wds``, 0 by default) on every fold
    for a fixed epoch budget (last epoch kept), initialised under ``torch.manual_seed(seed)`` with batch
    order from ``seed``; ``augment`` acts on every training mini-batch. ``make(train_ids)`` builds a fresh
    predictor whose normalising constants come from those training runs."""
    torch.manual_seed(seed)
    data = {s: take(X, i) for s, i in idx.items()}
    tgt = {s: torch.tensor(acc[i], dtype=torch.float32) for s, i in idx.items()}
    wds = [0.0] * len(lrs) if wds is None else wds
    return fit_ensemble(lambda s, k: make(idx["train"][s]), data, tgt, [dict(lr=lr, wd=wd) for lr, wd in zip(lrs, wds)],
                        epochs=epochs, seed=seed, select_epoch=False, eval_every=epochs, augment=augment)


def study_neural(make: Callable[[np.ndarray], torch.nn.Module], X: Any, acc: np.ndarray,
                 idx: dict[str, np.ndarray], grid: list[float], epochs: int, eval_seeds: list[int],
                 tune_seeds: list[int], plateau_check: bool = True, augment: Callable | None = None) -> dict[str, Any]:
    """Tune the learning rate on the validation tau averaged over the folds and over ``tune_seeds``
    (``lr_curve``; ``lr_curves`` holds each seed's fold mean), check the plateau at twice the epochs
    with the first tuning seed (gain over that seed's own value at the chosen rate; the two runs start
    from different initial weights, so the chapter's gate reads the paired check of
    :mod:`iclr25.nfn.plateau` instead), then train every
    evaluation seed at the chosen rate.
    Returns the record entry; ``pred`` is ``(seeds, n)`` in the order of ``idx["test"].reshape(-1)``."""
    t = time.process_time()
    curves = np.stack([select_mean(train_predictor(make, X, acc, idx, grid, epochs, s, augment=augment))[1]
                       for s in tune_seeds])
    curve = curves.mean(0)
    k = int(np.argmax(curve))
    out: dict[str, Any] = {"grid": grid, "lr_curve": curve.round(4).tolist(), "lr_curves": curves.round(4).tolist(),
                           "tune_seeds": list(tune_seeds), "k": k, "lr": grid[k], "epochs": epochs}
    if plateau_check:       # what twice the epochs (own warm-up and cosine decay) gain over the budget
        sel = train_predictor(make, X, acc, idx, [grid[k]], 2 * epochs, tune_seeds[0], augment=augment)
        out["gain_double"] = round(float(np.mean(sel.val_tau[:, 0]) - curves[0, k]), 4)
    preds, val = [], []
    for s in eval_seeds:
        sel = train_predictor(make, X, acc, idx, [grid[k]], epochs, s, augment=augment)
        preds.append(sel.pred.reshape(-1).round(5).tolist())
        val.append(round(float(np.mean(sel.val_tau[:, 0])), 4))
    out.update(pred=preds, val_tau=val, eval_seeds=list(eval_seeds), cpu_s=round(time.process_time() - t, 1))
    return out


def make_gbm(cfg: dict[str, Any], rounds: int, seed: int):
    """A histogram gradient-boosting regressor sized by ``cfg`` with ``rounds`` rounds; ``seed`` draws the
    features of each split."""
    from sklearn.ensemble import HistGradientBoostingRegressor

    return HistGradientBoostingRegressor(
        max_iter=rounds, learning_rate=cfg["learning_rate"], max_depth=cfg["max_depth"],
        min_samples_leaf=cfg["min_samples_leaf"], max_bins=cfg["max_bins"], max_features=cfg["max_features"],
        early_stopping=False, random_state=seed)


def study_gbm(X: np.ndarray, acc: np.ndarray, idx: dict[str, np.ndarray], cfg: dict[str, Any],
              eval_seeds: list[int], tune_seeds: list[int]) -> dict[str, Any]:
    """Histogram gradient boosting sized like the official trees: the number of rounds (up to
    ``max_iter``) with the best validation tau averaged over the folds and over ``tune_seeds``
    (the seed draws the features of each split), then one refit per fold and evaluation seed at that
    many rounds (``pred`` ``(len(eval_seeds), n)``)."""
    t = time.process_time()
    make = lambda n, rs: make_gbm(cfg, n, rs)
    curves = []                                   # (tuning seed, fold) rows, one value per round
    for s in tune_seeds:
        for f in range(idx["test"].shape[0]):
            m = make(cfg["max_iter"], s).fit(X[idx["train"][f]], acc[idx["train"][f]])
            curves.append([kendall_tau(p, acc[idx["val"][f]]) for p in m.staged_predict(X[idx["val"][f]])])
    curve = np.nanmean(np.array(curves), 0)
    n_best = int(np.nanargmax(curve)) + 1
    pred = [np.concatenate([make(n_best, s).fit(X[idx["train"][f]], acc[idx["train"][f]]).predict(X[idx["test"][f]])
                            for f in range(idx["test"].shape[0])]).round(5).tolist() for s in eval_seeds]
    return {"rounds": n_best, "max_iter": cfg["max_iter"], "val_at_rounds": round(float(curve[n_best - 1]), 4),
            "val_at_max": round(float(curve[-1]), 4), "pred": pred,
            "eval_seeds": list(eval_seeds), "tune_seeds": list(tune_seeds), "cpu_s": round(time.process_time() - t, 1)}


def study_decay(make: Callable[[np.ndarray], torch.nn.Module], X: Any, acc: np.ndarray, idx: dict[str, np.ndarray],
                entry: dict[str, Any], decay_grid: list[float], extend: int = 0, plateau_check: bool = True,
                augment: Callable | None = None) -> dict[str, Any]:
    """The weight-decay step after :func:`study_neural`'s learning rate: at the chosen rate ``lr``, every
    decay per step of ``decay_grid`` (``wd = decay / lr``; ``decay_grid[0]`` must be 0, retrained here
    beside the others: the learning-rate step's own value at ``lr`` was the best of its grid, so it is
    biased upward, and each member here starts from other initial weights than the one there) with each of
    the entry's tuning seeds; the decay with the best
    validation tau averaged over the folds and the seeds is chosen (the first on a tie); while that is
    the largest decay, the grid grows by ten times it (at most ``extend`` times). If it is not 0,
    the plateau is checked again and every evaluation seed is re-trained at ``(lr, wd)``; the learning-rate
    step's predictions are kept as ``pred_no_decay``. Returns the updated entry."""
    assert decay_grid[0] == 0.0
    t = time.process_time()
    lr, epochs, tss = entry["lr"], entry["epochs"], entry["tune_seeds"]
    decays = list(decay_grid)
    wd_of = lambda ds: [d / lr for d in ds]
    curves = np.zeros((len(tss), 0))
    new = decays
    for _ in range(extend + 1):
        cols = np.stack([select_mean(train_predictor(make, X, acc, idx, [lr] * len(new), epochs, s, wd_of(new),
                                                     augment))[1] for s in tss])
        curves = np.concatenate([curves, cols], 1)
        curve = curves.mean(0)
        j = int(np.argmax(curve))
        if j < len(decays) - 1 or len(decays) - len(decay_grid) >= extend:
            break
        new = [decays[-1] * 10]
        decays += new
    wds = wd_of(decays)
    out = {**entry, "decay_grid": decays, "wd_curve": curve.round(4).tolist(),
           "wd_curves": curves.round(4).tolist(), "wd_k": j, "wd": wds[j]}
    if j > 0:
        if plateau_check:
            sel = train_predictor(make, X, acc, idx, [lr], 2 * epochs, tss[0], [wds[j]], augment)
            out["gain_double_no_decay"] = entry.get("gain_double")
            out["gain_double"] = round(float(np.mean(sel.val_tau[:, 0]) - curves[0, j]), 4)
        preds, val = [], []
        for s in entry["eval_seeds"]:
            sel = train_predictor(make, X, acc, idx, [lr], epochs, s, [wds[j]], augment)
            preds.append(sel.pred.reshape(-1).round(5).tolist())
            val.append(round(float(np.mean(sel.val_tau[:, 0])), 4))
        out.update(pred_no_decay=entry["pred"], val_tau_no_decay=entry["val_tau"], pred=preds, val_tau=val)
    out["cpu_s"] = round(entry["cpu_s"] + time.process_time() - t, 1)
    return out


def subsample_train(idx: dict[str, np.ndarray], fraction: float) -> dict[str, np.ndarray]:
    """The folds with each fold's training runs cut to their first ``fraction`` (nested: a smaller
    fraction's runs are among a larger one's); validation and test folds unchanged."""
    return {**idx, "train": idx["train"][:, : int(round(idx["train"].shape[1] * fraction))]}


def learning_curve(make: Callable[[np.ndarray], torch.nn.Module], X: Any, acc: np.ndarray,
                   idx: dict[str, np.ndarray], entry: dict[str, Any], fractions: list[float],
                   augment: Callable | None = None) -> dict[str, Any]:
    """A neural method at its chosen ``(lr, wd)`` trained on each ``fraction`` of the training runs
    (:func:`subsample_train`) with every evaluation seed, for ``epochs / fraction`` epochs (about the
    same number of gradient steps as the full set). ``pred`` ``(fractions, seeds, n)`` in the record's
    out-of-fold order; the full set's point is the entry's own ``pred``."""
    t = time.process_time()
    preds = [[train_predictor(make, X, acc, subsample_train(idx, f), [entry["lr"]], int(round(entry["epochs"] / f)),
                              s, [entry.get("wd", 0.0)], augment).pred.reshape(-1).round(5).tolist()
              for s in entry["eval_seeds"]] for f in fractions]
    return {"fractions": list(fractions), "n_train": [int(round(idx["train"].shape[1] * f)) for f in fractions],
            "pred": preds, "cpu_s": round(time.process_time() - t, 1)}


def learning_curve_gbm(X: np.ndarray, acc: np.ndarray, idx: dict[str, np.ndarray], cfg: dict[str, Any],
                       entry: dict[str, Any], fractions: list[float]) -> dict[str, Any]:
    """The trees at their chosen number of rounds refit on each ``fraction`` of the training runs with
    every evaluation seed (``pred`` ``(fractions, seeds, n)``)."""
    t = time.process_time()
    preds = []
    for f in fractions:
        sub = subsample_train(idx, f)
        preds.append([np.concatenate([make_gbm(cfg, entry["rounds"], s).fit(X[sub["train"][i]], acc[sub["train"][i]])
                                      .predict(X[sub["test"][i]]) for i in range(sub["test"].shape[0])])
                      .round(5).tolist() for s in entry["eval_seeds"]])
    return {"fractions": list(fractions), "n_train": [int(round(idx["train"].shape[1] * f)) for f in fractions],
            "pred": preds, "cpu_s": round(time.process_time() - t, 1)}


def make_nfn(W: dict[str, torch.Tensor], channels: list[int], hidden: int, head: str = "layernorm"):
    """A ``make(train_ids)`` for :func:`train_predictor`: Transformer-NFN with slot scales from the training runs."""
    def make(train_ids):
        m = TransformerNFN(SPEC, 2, channels=tuple(channels), hidden=hidden, head=head)
        m.set_scales(take(W, train_ids))
        return m
    return make


class Standardize(torch.nn.Module):
    """``(x - mean) / std`` with fixed per-feature ``mean`` and ``std`` (buffers): the same map for every model."""

    def __init__(self, mean: torch.Tensor, std: torch.Tensor):
        super().__init__()
        self.register_buffer("mean", mean.clone())
        self.register_buffer("std", std.clamp_min(1e-6).clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.std


def make_nfn_train_standardised(W: dict[str, torch.Tensor], channels: list[int], hidden: int):
    """A ``make(train_ids)``: Transformer-NFN whose per-sample LayerNorm is replaced by a fixed
    standardisation of each invariant feature with the mean and sd over the *training* runs at
    initialisation (:class:`Standardize`). Every model then goes through the same affine map, in
    training and at evaluation, so the head sees each model's feature scale relative to the others'
    and no prediction depends on which other runs are evaluated with it."""
    def make(train_ids):
        m = TransformerNFN(SPEC, 2, channels=tuple(channels), hidden=hidden)
        m.set_scales(take(W, train_ids))
        seen = []
        hook = m.head[0].register_forward_hook(lambda mod, inp, out: seen.append(inp[0]))
        with torch.no_grad():
            m(take(W, train_ids))
        hook.remove()
        m.head[0] = Standardize(seen[0].mean(0), seen[0].std(0))
        return m
    return make


def make_aug_mlp(W: dict[str, torch.Tensor], hidden: int):
    """A ``make(train_ids)``: the flat-weights MLP on a weight dict (so that :func:`group_augment` can act
    on its mini-batches), standardised on the training runs."""
    def make(train_ids):
        m = baselines.FlatWeightsMLP(SPEC.n_params() * 2, hidden)
        m.mlp.set_standardization(flatten_weights(take(W, train_ids)))
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


def pooled_tau(pred: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Seed-pooled tau of one method's predictions ``pred`` ``(seeds, n)``: the mean over seeds and its
    standard error (test runs, :func:`iclr25.nfn.metrics.tau_difference`, plus the spread between seeds)."""
    per = [metrics.tau_difference(p, p, y) for p in np.atleast_2d(pred)]
    t = np.array([q["tau1"] for q in per])
    return float(t.mean()), float(np.sqrt(np.mean([q["se1"] ** 2 for q in per]) + (t.var(ddof=1) if len(t) > 1 else 0)))


def gates(name: str, record: dict[str, Any], y: np.ndarray, paired: dict[str, Any] | None = None) -> list[str]:
    """The competence failures of one record method (the pre-registered checks a paper row needs):
    learning rate at a grid edge; weight decay at the top of its grid (0, no decay, is the grid's natural
    lower end); twice the epochs gain more than ``plateau``; trees' rounds at the cap; seed-pooled tau
    lower 95% bound at or below ``margin``. ``y``: the labels in the record's out-of-fold order.
    ``paired``: the paired plateau record (:mod:`iclr25.nfn.plateau`); for a method it holds, its gain
    averaged over the tuning seeds replaces the record's one-seed ``gain_double``."""
    m, P, out = record["methods"][name], record["protocol"], []
    if paired is not None and name in paired["methods"]:
        m = {**m, "gain_double": paired["methods"][name]["gain"]}
    if "grid" in m and len(m["grid"]) > 1 and not fit.interior(m["k"], len(m["grid"])):
        out.append(f"{name}: lr at a grid edge")
    if "decay_grid" in m and m["wd_k"] == len(m["decay_grid"]) - 1:
        out.append(f"{name}: weight decay at the top of its grid")
    if m.get("gain_double", 0.0) > P["plateau"]:
        out.append(f"{name}: twice the epochs gain {m['gain_double']:+.3f}"
                   + (" (paired, mean of the tuning seeds)" if paired is not None and name in paired["methods"] else ""))
    if "rounds" in m and m["rounds"] >= m["max_iter"]:
        out.append(f"{name}: rounds at the cap")
    mu, se = pooled_tau(np.asarray(m["pred"]), y)
    if mu - 1.96 * se <= P["margin"]:
        out.append(f"{name}: tau lower bound <= {P['margin']}")
    return out


def gap_trend(record: dict[str, Any], a: str, b: str, y: np.ndarray) -> dict[str, Any]:
    """How ``tau(a) - tau(b)`` changes with the number of training runs, from the record's learning
    curves of ``a`` and ``b`` (same fractions, same evaluation seeds) and their full-set predictions:
    ``gaps`` per training-set size (seed-pooled, :func:`iclr25.nfn.metrics.seed_pooled_difference`),
    ``n_train`` and ``per_doubling``: the change of the gap from the smallest to the whole training
    set divided by the doublings between them (:func:`iclr25.nfn.metrics.seed_pooled_contrast`)."""
    ca, cb = record["learning_curve"][f"learning curve: {a}"], record["learning_curve"][f"learning curve: {b}"]
    assert ca["n_train"] == cb["n_train"]
    full = len(record["runs"]) // record["protocol"]["n_folds"] * (record["protocol"]["n_folds"] - 2)
    pa = [np.asarray(p) for p in ca["pred"]] + [np.asarray(record["methods"][a]["pred"])]
    pb = [np.asarray(p) for p in cb["pred"]] + [np.asarray(record["methods"][b]["pred"])]
    n_train = ca["n_train"] + [full]
    doublings = float(np.log2(full / n_train[0]))
    trend = metrics.seed_pooled_contrast(np.stack([pa[-1], pb[-1], pa[0], pb[0]]), np.array([1, -1, -1, 1]) / doublings, y)
    return {"n_train": n_train, "gaps": [metrics.seed_pooled_difference(x, z, y) for x, z in zip(pa, pb)],
            "per_doubling": trend}


def regime_gate(gap: dict[str, float], trend: dict[str, float], horizon: float) -> str | None:
    """The pre-registered small-zoo rule of a paper row: if the gap ``tau(NFN) - tau(baseline)`` moves
    toward the other sign as the training runs double (``trend``'s 95% interval excludes 0 on that
    side) fast enough that a straight line in log2(runs) reaches 0 within ``horizon`` doublings, the
    row is undecided, with this reason; else ``None``."""
    toward = trend["lo"] > 0 if gap["diff"] < 0 else trend["hi"] < 0
    if toward and gap["diff"] * (gap["diff"] + horizon * trend["diff"]) <= 0:
        return (f"the gap moves by {trend['diff']:+.3f} per doubling of the training runs and would reverse within "
                f"{horizon:g} doublings")
    return None


def detectable(se: float, level: float = 0.95, power: float = 0.8) -> float:
    """The smallest true difference a two-sided test at ``level`` detects with probability ``power``,
    given the difference's standard error ``se``: ``(z_{level} + z_{power}) se`` (about 2.8 se)."""
    from statistics import NormalDist

    z = NormalDist().inv_cdf
    return float((z(0.5 + level / 2) + z(power)) * se)


PAPER_BASELINES = {"MLP (flat weights)": "MLP", "STATNN": "STATNN", "GBM (flat weights)": "HistGBM"}
"""The paper's baselines (record names) and their short names."""


def paper_rows(record: dict[str, Any], y: np.ndarray, paired: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """The pre-registered decision of every paper row ``Transformer-NFN beats b`` from the record: the
    seed-pooled difference ``c`` (:func:`iclr25.nfn.metrics.seed_pooled_difference`), the competence
    gates of both methods (:func:`gates`), the small-zoo rule where the record has both methods'
    learning curves (:func:`gap_trend`, :func:`regime_gate`), the verdict (:func:`paper_verdict`:
    ``holds``, ``reason``) and the smallest difference the row could detect (:func:`detectable`).
    ``paired``: the paired plateau record, passed on to :func:`gates`."""
    nfn, out = "Transformer-NFN", {}
    pred = lambda n: np.asarray(record["methods"][n]["pred"])
    for b in PAPER_BASELINES:
        c = metrics.seed_pooled_difference(pred(nfn), pred(b), y)
        reasons, trend = gates(nfn, record, y, paired) + gates(b, record, y, paired), None
        if f"learning curve: {b}" in record.get("learning_curve", {}):
            trend = gap_trend(record, nfn, b, y)
            r = regime_gate(c, trend["per_doubling"], record["protocol"]["horizon_doublings"])
            reasons += [r] if r else []
        holds, reason = paper_verdict(c, reasons)
        out[b] = {"c": c, "holds": holds, "reason": reason, "trend": trend, "detectable": detectable(c["se"])}
    return out


def diverged_estimate(curves: np.ndarray, n_folds: int, fill: float = -2.0) -> np.ndarray:
    """How many folds of each point of per-seed tuning curves ``curves`` ``(seeds, K)`` diverged, estimated
    from the fold means (the record keeps no per-fold values; a diverged fit counts as ``fill``): per seed,
    the folds it takes to pull the best finite neighbour's value (the point's left neighbour, or the right
    one at the grid's left end) down to the point's value, rounded and clipped to ``[0, n_folds]``.
    Returns ``(K,)`` totals over the seeds; a point below -1, impossible for a tau, always counts."""
    c = np.asarray(curves, dtype=float)
    nb = np.concatenate([c[:, 1:2], c[:, :-1]], 1)
    k = np.clip(np.rint(n_folds * (nb - c) / (nb - fill)), 0, n_folds)
    k = np.where(c < -1, np.maximum(k, 1), k)
    return k.sum(0).astype(int)


FINGERPRINTED = (zero_share, study_runs, fold_indices, take, train_predictor, study_neural, make_gbm, study_gbm,
                 study_decay, subsample_train, learning_curve, learning_curve_gbm, make_nfn, Standardize,
                 make_nfn_train_standardised, make_aug_mlp, make_mlp, paper_verdict, fit.fit_ensemble, fit._schedule, fit.select_mean, layers.TransformerNFN,
                 layers.TransformerNFNEquivariant, layers.TransformerNFNInvariant, layers.invariant_features,
                 layers.hidden_unit_features, layers.output_unit_features, layers.masked_relu,
                 baselines.MLPRegressor, baselines.FlatWeightsMLP, baselines.group_augment, baselines.stat_features, baselines.tensor_stats, baselines.flatten_weights,
                 metrics.kendall_tau)


def _name(module: str, qualname: str) -> str:
    """``module.qualname``, with ``__main__`` (this file run as ``python -m``) read as this module."""
    return f"{'iclr25.nfn.study' if module == '__main__' else module}.{qualname}"


def fingerprints() -> dict[str, str]:
    """sha256 of the stripped source of every function or class that makes the record."""
    return {_name(o.__module__, o.__qualname__): bytes_sha256(strip_source(inspect.getsource(o)).encode())
            for o in FINGERPRINTED}


def stale_functions(record: dict[str, Any]) -> list[str]:
    """The functions whose source changed since ``record`` was made (or that it does not list), as
    ``"method: function"`` for the fingerprints each method stores of the code that made it (its own
    entry's ``fingerprints``, else the record's)."""
    now = fingerprints()
    fix = lambda k: _name(*k.rsplit(".", 1)) if k.startswith("__main__.") else k
    out = set()
    for part in ("methods", "learning_curve"):
        for name, m in record.get(part, {}).items():
            made = {fix(k): v for k, v in m.get("fingerprints", record["fingerprints"]).items()}
            out |= {f"{name}: {k}" for k, v in made.items() if now.get(k) != v}
    return sorted(out)


def load_study() -> dict[str, Any]:
    """The committed record, refused if its content does not match its sha256."""
    return load_record(PATH, RERUN)


CURVES = {"learning curve: Transformer-NFN": "Transformer-NFN", "learning curve: STATNN": "STATNN",
          "learning curve: GBM on the NFN's pooled invariants": "GBM on the NFN's pooled invariants"}
"""Learning-curve jobs and the record method whose chosen setting each one re-trains on fewer runs."""
REPLACES = {"Transformer-NFN, training-standardised head": "Transformer-NFN, batch-standardised head"}
"""Jobs whose entry takes the place of an older control (removed from the record when the job runs)."""


def main(only: list[str] | None = None, keep_lr: list[str] | None = None, proof: str | None = None) -> None:
    """Run the study with one thread and write :data:`PATH`. ``only``: re-run just these jobs of the
    committed record under the current :data:`PROTOCOL` and keep the others (each entry stores the
    fingerprints of the code that made it; the record lists every partial re-run in ``rerun``).
    ``keep_lr``: for these neural methods take the learning-rate step from the committed record and
    run only the weight-decay step. ``proof``: a method re-run in this pass whose learning-rate step
    must reproduce the committed one exactly (tuning curves and test predictions); if it does, the
    carried-over entries are re-stamped with the current fingerprints (the evidence is stored in
    ``restamped``), else the run stops without writing."""
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
    tss, es, dg, fr = P["tune_seeds"], P["eval_seeds"], P["decay_grid"], P["curve_fractions"]
    n, m, st, c = P["nfn"], P["mlp"], P["statnn"], P["controls"]
    X_flat, X_stat = flatten_weights(W), stat_features(W)
    X_inv = torch.cat([invariant_features({k: v[:, l, None] for k, v in W.items()}) for l in range(2)], -1).numpy()
    W_mlp_slots = {k: (torch.zeros_like(v) if k in ("WQ", "WK", "WV", "WO") else v) for k, v in W.items()}
    old = load_study() if only else None
    methods: dict[str, Any] = dict(old["methods"]) if old else {}
    curves_rec: dict[str, Any] = dict(old.get("learning_curve", {})) if old else {}
    make = {"Transformer-NFN": (make_nfn(W, n["channels"], n["hidden"]), W),
            "MLP (flat weights)": (make_mlp(X_flat, m["hidden"]), X_flat),
            "STATNN": (make_mlp(X_stat, st["hidden"]), X_stat)}
    lr_steps: dict[str, Any] = {}

    def tuned(name: str, cfg: dict[str, Any]) -> dict[str, Any]:
        """Learning rate (or the committed one, ``keep_lr``), then weight decay."""
        mk, X = make[name]
        step = methods[name] if name in (keep_lr or []) else study_neural(mk, X, acc, idx, cfg["grid"], cfg["epochs"],
                                                                         es, tss)
        lr_steps[name] = step
        return study_decay(mk, X, acc, idx, step, dg, P["decay_extend"])

    def curve(name: str) -> dict[str, Any]:
        base = methods[CURVES[name]]
        if "rounds" in base:
            return learning_curve_gbm(X_inv, acc, idx, P["gbm"], base, fr)
        mk, X = make[CURVES[name]]
        return learning_curve(mk, X, acc, idx, base, fr)

    jobs = {
        "Transformer-NFN": lambda: tuned("Transformer-NFN", n),
        "MLP (flat weights)": lambda: tuned("MLP (flat weights)", m),
        "STATNN": lambda: tuned("STATNN", st),
        "GBM (flat weights)": lambda: study_gbm(X_flat.numpy(), acc, idx, P["gbm"], es, tss),
        "GBM on the NFN's pooled invariants": lambda: study_gbm(X_inv, acc, idx, P["gbm"], es, tss),
        "Transformer-NFN, training-standardised head": lambda: study_neural(
            make_nfn_train_standardised(W, n["channels"], n["hidden"]), W, acc, idx, c["nfn_batch_grid"],
            n["epochs"], es, tss),
        # one-point grids at the NFN's chosen rate: nothing to choose, so one tuning seed for the validation tau
        "Transformer-NFN, MLP slots only": lambda: study_neural(
            make_nfn(W_mlp_slots, n["channels"], n["hidden"]), W_mlp_slots, acc, idx,
            [methods["Transformer-NFN"]["lr"]], n["epochs"], es[:1], tss[:1], plateau_check=False),
        "Transformer-NFN 1x32": lambda: study_neural(
            make_nfn(W, c["nfn_wide_channels"], n["hidden"]), W, acc, idx, [methods["Transformer-NFN"]["lr"]],
            n["epochs"], es[:1], tss[:1], plateau_check=False),
        # the flat MLP's grid and epochs, trained on group-augmented mini-batches
        "MLP + group augmentation": lambda: study_neural(
            make_aug_mlp(W, m["hidden"]), W, acc, idx, m["grid"], m["epochs"], es, tss,
            augment=baselines.group_augment(SPEC, c["aug_cond"])),
        **{k: (lambda k=k: curve(k)) for k in CURVES},
    }
    todo = [k for k in jobs if not only or k in only]
    assert not only or len(todo) == len(only), f"unknown jobs: {set(only) - set(jobs)}"
    todo = sorted(todo, key=lambda k: k != proof)                   # the proof first: stop early if it fails
    fp = fingerprints()
    for name, entry in [*methods.items(), *curves_rec.items()]:      # entries made before per-entry fingerprints
        entry.setdefault("fingerprints", old["fingerprints"])
    bar = tqdm(total=len(todo), desc="study")
    for name in todo:
        entry = {**jobs[name](), "fingerprints": fp}
        (curves_rec if name in CURVES else methods)[name] = entry
        methods.pop(REPLACES.get(name, ""), None)
        if name == proof:
            new, was = lr_steps[proof], old["methods"][proof]
            if not (new["lr_curves"] == was["lr_curves"] and new["pred"] == was["pred"] and new["k"] == was["k"]):
                raise SystemExit(f"{proof}: the learning-rate step differs from the committed one; nothing written")
        print(name, {k: v for k, v in entry.items() if k not in ("pred", "pred_no_decay", "fingerprints")}, flush=True)
        bar.update()
    bar.close()
    restamped = list(old.get("restamped", [])) if old else []
    if proof:
        moved = sorted(k for part in (methods, curves_rec) for k, e in part.items()
                       if k not in todo and e["fingerprints"] != fp)
        for part in (methods, curves_rec):
            for k in moved:
                if k in part:
                    part[k]["fingerprints"] = fp
        restamped.append({"entries": moved, "evidence": f"{proof} re-run with the current code reproduces its committed "
                          "tuning curves and test predictions exactly", "changed": sorted(
                              k for k in fp if old["fingerprints"].get(k) not in (None, fp[k]))})
    cpu = round(time.process_time() - t0 + (old["cpu_s"] if old else 0), 1)
    record = {"protocol": P, "runs": runs.tolist(), "order": order.tolist(),
              "n_zero_fingerprint": int((zero_share(W_all) > P["zero_share"]).sum()),
              "methods": methods, "learning_curve": curves_rec, "fingerprints": fp, "torch": torch.__version__,
              "cpu_s": cpu, "wall_s": round(time.time() - w0 + (old["wall_s"] if old else 0), 1),
              "rerun": (old.get("rerun", []) if old else []) + ([sorted(only)] if only else []),
              "restamped": restamped}
    record["sha256"] = record_sha256(record)
    PATH.write_text(json.dumps(record, separators=(",", ":")) + "\n")
    print(f"wrote {PATH} ({PATH.stat().st_size / 1e3:.0f} kB) in {record['cpu_s']:.0f} s CPU, sha256 {record['sha256'][:12]}")


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="re-run just these jobs of the committed record")
    ap.add_argument("--keep-lr", nargs="*", help="neural methods whose learning-rate step is kept from the record")
    ap.add_argument("--proof", help="a re-run method whose learning-rate step must equal the committed one")
    a = ap.parse_args()
    main(a.only, a.keep_lr, a.proof)
