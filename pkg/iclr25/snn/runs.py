"""The trained models of the TS-LIF chapter: the recipe, the script that trains them to a plateau,
and the loader the chapter uses.

Training every neuron to a plateau on validation (Adam, early stopping with a patience), with the
learning rate tuned on three seeds and eight evaluation seeds, takes about ten minutes of CPU
time, more than the chapter's budget. ``python -m iclr25.snn.runs`` does it once (one thread) and writes

* ``weights/ts-lif-runs.npz``: the weights of every evaluation run (float32, one flat vector per run);
* ``weights/ts-lif-runs.json``: the recipe, every run's learning rate, seed, per-epoch training and
  validation MSE, best epoch, epochs run, CPU seconds, the two-compartment parameters after every
  epoch, and the sha256 of the ``.npz``.

``--resume`` continues an interrupted run; ``--extend`` continues a record written with a lower
epoch cap: runs that stopped by their patience are kept (training is deterministic on one machine,
so a higher cap changes nothing for them), runs that hit the old cap are trained again from scratch
and their first epochs are compared with the old record (``history`` in the manifest), and
evaluation runs at a learning rate the tuning no longer chooses are dropped and re-trained.

The chapter loads both (:func:`load_runs`, :func:`load_model`), checks the hash, computes every test
metric from the loaded weights, and re-trains a few epochs live to show they reproduce the record.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from iclr25.common.digest import check_sha256, file_sha256

from .data import chronological_split, make_windows, standardize, synthetic_multiscale, vic_elec
from .forecast import SpikeForecaster, fit
from .neurons import LIF, PLIF, TCLIF, TSLIF, GainLIF, Memoryless, TwoCompartment

WEIGHTS = Path(__file__).parent / "weights"
NPZ, MANIFEST = WEIGHTS / "ts-lif-runs.npz", WEIGHTS / "ts-lif-runs.json"
REACH = WEIGHTS / "ts-lif-reach.json"
ML_NPZ, ML_MANIFEST = WEIGHTS / "ts-lif-memoryless.npz", WEIGHTS / "ts-lif-memoryless.json"

RECIPE = dict(
    # the paper's Electricity stand-in: Victoria's hourly demand (vic_elec), one channel; a window of two
    # days holds the daily lag the seasonal naive forecast repeats, and weekends and weather break it
    dataset="vic_elec", window=48, horizon=24, stride=16, hidden=32, batch=64,
    max_epochs=150, patience=5, lrs=[3e-3, 1e-2, 3e-2], tune_seeds=[100, 101, 102],
    # a model whose best rate is at an end of its grid gets the next rate of the ladder, until interior
    lr_ladder=[1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1],
    eval_seeds=[0, 1, 2, 3, 4, 5, 6, 7], missing=0.3,
    tuned=["TS-LIF", "LIF", "gain-LIF", "PLIF", "TC-LIF 1-train", "TC-LIF"],   # each picks its own lr
    ablations=["−γ_s", "−S_d output", "−S_d reset", "uncoupled"],     # at TS-LIF's lr
    gru_lr=1e-2, gru_seeds=[0, 1, 2],                                  # the reference, not tuned
    missing_models=["TS-LIF", "LIF", "gain-LIF"],   # also trained (and validated) with missing inputs
)

#: Every recurrence of the chapter: name -> neuron factory ``hidden -> Neuron`` (``None``: the GRU).
NEURONS = {
    "LIF": lambda h: LIF(),
    "PLIF": lambda h: PLIF(),
    "gain-LIF": GainLIF,
    "memoryless": Memoryless,                      # no neuron: O = kappa * I, the competence bar
    "TC-LIF": lambda h: TCLIF(h),                  # TS-LIF's two-train readout (equal readout bits)
    "TC-LIF 1-train": lambda h: TCLIF(),           # the paper's TC-LIF: the somatic spike train only
    "TS-LIF": TSLIF,
    "uncoupled": lambda h: TwoCompartment(h, coupled=False),
    "−γ_s": lambda h: TwoCompartment(h, soma_input=False),
    "−κ_d": lambda h: TwoCompartment(h, dendritic_spikes=False),
    "−S_d output": lambda h: TwoCompartment(h, dendritic_output=False),
    "−S_d reset": lambda h: TwoCompartment(h, dendritic_reset=False),
    "GRU": None,
}


#: The order in which the evaluation runs are trained.
PRIORITY = ["TS-LIF", "LIF", "gain-LIF", "GRU", "PLIF", "TC-LIF", "−S_d output", "−γ_s", "−S_d reset",
            "uncoupled", "TC-LIF 1-train"]


def forecast_data(recipe: dict = RECIPE, device: str | torch.device = "cpu") -> dict:
    """The data set the chapter's models are trained on (``recipe["dataset"]``): ``"vic_elec"``,
    Victoria's hourly electricity demand (one channel), or ``"synthetic"``, the multi-scale signal of
    :func:`~iclr25.snn.data.synthetic_multiscale` (``n_channels``, ``length``, ``data_seed``).
    Windows split 60/20/20 in time, the series standardised with training statistics. Tensors
    ``Xtr, Ytr, Xva, Yva, Xte`` on ``device``, numpy ``X, Y`` (all windows), slices ``tr, va, te``,
    the ``series`` (and ``time`` for vic_elec, ``periods`` for the synthetic signal)."""
    r = recipe
    extra: dict = {}
    if r.get("dataset", "synthetic") == "vic_elec":
        elec = vic_elec("hourly")
        series, extra["time"] = elec["demand"][:, None].astype(np.float32), elec["time"]
    else:
        series, extra["periods"] = synthetic_multiscale(r["n_channels"], r["length"], r["data_seed"])
    n = len(make_windows(series, r["window"], r["horizon"], r["stride"])[0])
    tr, va, te = chronological_split(n)
    series_z, mu, sd = standardize(series, fit_until=tr.stop * r["stride"] + r["window"])
    X, Y = make_windows(series_z, r["window"], r["horizon"], r["stride"])
    t = lambda a: torch.tensor(a, device=device)   # noqa: E731
    return dict(series=series, series_z=series_z, X=X, Y=Y, tr=tr, va=va, te=te, **extra,
                Xtr=t(X[tr]), Ytr=t(Y[tr]), Xva=t(X[va]), Yva=t(Y[va]), Xte=t(X[te]))


def build(name: str, seed: int, hidden: int = RECIPE["hidden"], horizon: int = RECIPE["horizon"],
          neuron=None) -> nn.Module:
    """A fresh forecaster with recurrence ``name`` (or the factory ``neuron``, ``hidden -> Neuron``),
    initialised from torch seed ``seed`` (the shared layers start identical for every neuron at one seed)."""
    torch.manual_seed(seed)
    return SpikeForecaster(neuron or NEURONS[name], hidden, horizon, recurrence="gru" if name == "GRU" else "spiking")


def train(name: str, lr: float, seed: int, data: dict, *, missing: float = 0.0, epochs: int | None = None,
          patience: int | None = RECIPE["patience"], recipe: dict = RECIPE,
          neuron=None) -> tuple[nn.Module, dict]:
    """Train one model with the recipe (early stopping with ``patience`` on validation MSE, at most
    ``epochs``; ``recipe["hidden"]`` neurons, or the factory ``neuron``); returns the model (best
    epoch's weights) and its record."""
    model = build(name, seed, recipe["hidden"], recipe["horizon"], neuron).to(data["Xtr"].device)
    params = []

    def log(m: nn.Module) -> None:
        if isinstance(getattr(m, "neuron", None), TwoCompartment):
            params.append(m.neuron.linear_params())

    t0 = time.process_time()
    res = fit(model, data["Xtr"], data["Ytr"], data["Xva"], data["Yva"], lr=lr,
              epochs=epochs or recipe["max_epochs"], batch_size=recipe["batch"], seed=seed,
              missing=missing, after_epoch=log, patience=patience)
    rec = dict(name=name, lr=lr, seed=seed, missing=missing, val_mse=res.val_mse, train_mse=res.train_mse,
               best_epoch=res.best_epoch, epochs_run=len(res.val_mse), cpu_s=time.process_time() - t0,
               params=params)
    return model, rec


def key(name: str, seed: int, missing: float = 0.0) -> str:
    """The name of a run in the ``.npz``."""
    return f"{name}|{seed}|{missing:g}"


def flat(model: nn.Module) -> np.ndarray:
    """Every tensor of the state dict, in order, as one float32 vector."""
    return np.concatenate([v.detach().cpu().double().numpy().ravel() for v in model.state_dict().values()]
                          ).astype(np.float32)


def unflat(model: nn.Module, vec: np.ndarray) -> nn.Module:
    """Load a vector written by :func:`flat` into ``model`` (same architecture)."""
    sd, i = model.state_dict(), 0
    for k, v in sd.items():
        n = v.numel()
        sd[k] = torch.tensor(vec[i:i + n], dtype=torch.float32).reshape(v.shape).to(v.dtype)
        i += n
    assert i == len(vec), "weight vector does not fit the model"
    model.load_state_dict(sd)
    return model




def load_runs() -> tuple[dict, dict[str, np.ndarray]]:
    """The committed manifest and weights; raises if the weights' sha256 is not the recorded one."""
    manifest = json.loads(MANIFEST.read_text())
    check_sha256(NPZ, manifest["sha256"])
    with np.load(NPZ) as z:
        weights = {k: z[k] for k in z.files}
    return manifest, weights


def load_model(name: str, seed: int, weights: dict[str, np.ndarray], missing: float = 0.0,
               device: str | torch.device = "cpu") -> nn.Module:
    """A committed evaluation model, in evaluation mode."""
    return unflat(build(name, seed), weights[key(name, seed, missing)]).to(device).eval()


def deadline_after(hhmm: str, now: float | None = None) -> float:
    """The first moment at or after ``now`` (epoch seconds; default: the present) whose UTC clock
    reads ``hhmm`` ("HH:MM"), as epoch seconds: a deadline past midnight is the next day's."""
    now = time.time() if now is None else now
    h, m = (int(v) for v in hhmm.split(":"))
    day = now - now % 86400                       # UTC midnight today (epoch time has no leap seconds)
    t = day + 3600 * h + 60 * m
    return t if t >= now - now % 60 else t + 86400


#: How far the baselines' reach was extended (``--reach``): LIF's fixed leak tuned on validation at the
#: recipe's size, then twice the neurons and twice the training windows (stride 8) for LIF, PLIF and
#: TS-LIF alike, the baselines' learning rate tuned again at that size; tuning seeds only (no weights
#: kept, nothing selected on test).
REACH_RECIPE = dict(lr=1e-2, seeds=[100, 101, 102], lif_betas=[0.5, 0.8, 0.9, 0.95, 0.99],
                    wide=dict(hidden=64, stride=8), wide_models=["LIF", "PLIF", "TS-LIF"],
                    wide_lrs=[3e-3, 1e-2, 3e-2])   # for LIF and PLIF (widened until interior); TS-LIF keeps its rate


def reach() -> dict:  # pragma: no cover - a training run (about 4 CPU-minutes)
    """Train the reach variants of :data:`REACH_RECIPE`; per run the validation and test R^2 over all
    horizon steps and seasonal naive's on the same windows (its period picked on the training windows)."""
    from .forecast import seasonal_naive
    from .metrics import r2_score

    rr, out, t_start = REACH_RECIPE, [], time.process_time()

    def naive_r2(data: dict, part: str, recipe: dict) -> float:
        X, Y, tr = data["X"], data["Y"], data["tr"]
        per = min(range(2, recipe["window"] + 1),
                  key=lambda q: np.mean((seasonal_naive(X[tr], recipe["horizon"], q) - Y[tr]) ** 2))
        sl = data[part]
        return r2_score(Y[sl], seasonal_naive(X[sl], recipe["horizon"], per))

    def one(variant: str, name: str, neuron, recipe: dict, data: dict, lr: float = rr["lr"], **extra) -> None:
        for s in rr["seeds"]:
            model, rec = train(name, lr, s, data, recipe=recipe, neuron=neuron)
            model.eval()
            with torch.no_grad():
                val, test = (r2_score(data["Y"][data[p]], model(torch.tensor(data["X"][data[p]])))
                             for p in ("va", "te"))
            out.append(dict(variant=variant, name=name, seed=s, lr=lr, **extra, val_r2=val, test_r2=test,
                            naive_val_r2=naive_r2(data, "va", recipe), naive_test_r2=naive_r2(data, "te", recipe),
                            epochs_run=rec["epochs_run"], best_epoch=rec["best_epoch"], cpu_s=rec["cpu_s"]))
            print(f"{time.process_time() - t_start:6.0f}s {variant:>6} {name:>6} lr {lr:g} {extra} seed {s}: "
                  f"val {val:.3f} test {test:.3f} ({rec['epochs_run']} epochs)", flush=True)

    data = forecast_data(RECIPE)
    for b in rr["lif_betas"]:                        # the recipe's size: LIF's leak as a hyperparameter
        one("recipe", "LIF", lambda h, b=b: LIF(beta=b), RECIPE, data, beta=b)
    val = {b: np.mean([x["val_r2"] for x in out if x.get("beta") == b]) for b in rr["lif_betas"]}
    beta = max(val, key=val.get)                      # picked on validation
    wide = dict(RECIPE, **rr["wide"])
    data = forecast_data(wide)
    ladder = RECIPE["lr_ladder"]
    for name in rr["wide_models"]:
        variants = [(None, None)] + ([(lambda h: LIF(beta=beta), beta)] if name == "LIF" and beta != 0.99 else [])
        for neuron, b in variants:
            extra = {} if b is None else dict(beta=b)
            if name == "TS-LIF":                      # the method keeps its tuned rate
                one("wide", name, neuron, wide, data, **extra)
                continue
            grid, done = list(rr["wide_lrs"]), set()
            while True:                               # widen the grid until the validation optimum is interior
                for lr in grid:
                    if lr not in done:
                        one("wide", name, neuron, wide, data, lr=lr, **extra)
                        done.add(lr)
                val = {lr: np.mean([x["val_r2"] for x in out if x["variant"] == "wide" and x["name"] == name
                                    and x.get("beta") == b and x["lr"] == lr]) for lr in grid}
                top, i = max(grid, key=val.get), ladder.index(max(grid, key=val.get))
                if top == grid[0] and i > 0:
                    grid.insert(0, ladder[i - 1])
                elif top == grid[-1] and i < len(ladder) - 1:
                    grid.append(ladder[i + 1])
                else:
                    break
    res = dict(recipe=rr, base=RECIPE, beta_by_val=beta, runs=out, torch=torch.__version__,
               code_sha256=file_sha256(Path(__file__)), cpu_s_total=time.process_time() - t_start)
    REACH.write_text(json.dumps(res, separators=(",", ":")))
    return res


def memoryless() -> dict:  # pragma: no cover - a training run (about 1 CPU-minute)
    """The memoryless control trained with the recipe: its learning rate tuned on the tuning seeds
    (the grid widened along the ladder until the optimum is interior), then the evaluation seeds, on
    complete windows and with the recipe's missing inputs;
    weights to :data:`ML_NPZ`, record (with the code's and the weights' sha256) to :data:`ML_MANIFEST`."""
    r, data, t_start = RECIPE, forecast_data(), time.process_time()
    runs, weights, grid, ladder = [], {}, list(r["lrs"]), r["lr_ladder"]
    while True:
        for lr in grid:
            for s in r["tune_seeds"]:
                if not any(x["lr"] == lr and x["seed"] == s for x in runs):
                    _, rec = train("memoryless", lr, s, data)
                    runs.append(dict(rec, role="tune"))
        val = {lr: np.mean([min(x["val_mse"]) for x in runs if x["lr"] == lr]) for lr in grid}
        b = min(grid, key=val.get)
        i = ladder.index(b)
        if b == grid[0] and i > 0:
            grid.insert(0, ladder[i - 1])
        elif b == grid[-1] and i < len(ladder) - 1:
            grid.append(ladder[i + 1])
        else:
            break
    for s in r["eval_seeds"]:
        model, rec = train("memoryless", b, s, data)
        runs.append(dict(rec, role="eval"))
        weights[key("memoryless", s)] = flat(model)
        print(f"{time.process_time() - t_start:6.0f}s memoryless lr {b:g} seed {s}: {rec['epochs_run']} epochs", flush=True)
    for s in r["eval_seeds"]:                         # trained (and validated) with missing inputs, as the others
        model, rec = train("memoryless", b, s, data, missing=r["missing"])
        runs.append(dict(rec, role="eval"))
        weights[key("memoryless", s, r["missing"])] = flat(model)
    np.savez_compressed(ML_NPZ, **weights)
    res = dict(recipe=r, lr=b, grid=grid, runs=runs, sha256=file_sha256(ML_NPZ), torch=torch.__version__,
               code_sha256=file_sha256(Path(__file__)), cpu_s_total=time.process_time() - t_start)
    ML_MANIFEST.write_text(json.dumps(res, separators=(",", ":")))
    return res


def load_memoryless() -> tuple[dict, dict[str, np.ndarray]]:
    """The memoryless control's committed record and weights (sha256-checked)."""
    manifest = json.loads(ML_MANIFEST.read_text())
    check_sha256(ML_NPZ, manifest["sha256"])
    with np.load(ML_NPZ) as z:
        return manifest, {k: z[k] for k in z.files}


def main() -> None:  # pragma: no cover - the training run itself (about 10 CPU-minutes)
    import sys

    torch.set_num_threads(1)
    if "--memoryless" in sys.argv:
        res = memoryless()
        print(f"done: {res['cpu_s_total']:.0f} CPU-s, lr {res['lr']:g}")
        return
    if "--reach" in sys.argv:
        res = reach()
        print(f"done: {res['cpu_s_total']:.0f} CPU-s, LIF leak by validation {res['beta_by_val']}")
        return
    r, data = RECIPE, forecast_data()
    t_start = time.process_time()
    runs, weights, cpu_before, history = [], {}, 0.0, []
    redo = {}                       # --extend: runs of the old record that stopped at its cap, retrained
    if ("--resume" in sys.argv or "--extend" in sys.argv) and MANIFEST.exists():  # keep finished runs
        old = json.loads(MANIFEST.read_text())
        runs, cpu_before, history = old["runs"], old["cpu_s_total"], old.get("history", [])
        with np.load(NPZ) as z:
            weights = {k: z[k] for k in z.files}
        if "--extend" in sys.argv:
            # A run that stopped by its patience is the same under a higher cap (training is
            # deterministic on one machine); a run that hit the old cap is trained again from scratch
            # with the new one, and its first epochs must reproduce the old record.
            cap = old["recipe"]["max_epochs"]
            hit = lambda x: x["epochs_run"] >= cap and x["epochs_run"] - 1 - x["best_epoch"] < r["patience"]  # noqa: E731
            redo = {(x["role"], x["name"], x["lr"], x["seed"], x["missing"]): x for x in runs if hit(x)}
            runs = [x for x in runs if not hit(x)]
            history = history + [dict(old_cap=cap, new_cap=r["max_epochs"], retrained=len(redo), prefix_dev=[])]

    best: dict[str, float] = {}

    def prune() -> None:
        """Drop evaluation runs at a rate that is no longer the tuned one (the selection moved)."""
        stale = [x for x in runs if x["role"] == "eval" and x["name"] in best and x["lr"] != best[x["name"]]]
        for x in stale:
            runs.remove(x)
            k = key(x["name"], x["seed"], x["missing"])
            if not any(y["role"] == "eval" and key(y["name"], y["seed"], y["missing"]) == k for y in runs):
                weights.pop(k, None)
        if stale:
            print(f"dropped {len(stale)} evaluation runs at a learning rate no longer chosen", flush=True)

    def save() -> None:
        prune()
        WEIGHTS.mkdir(exist_ok=True)
        np.savez_compressed(NPZ, **weights)
        MANIFEST.write_text(json.dumps(dict(recipe=r, runs=runs, sha256=file_sha256(NPZ), torch=torch.__version__,
                                            cpu_s_total=cpu_before + time.process_time() - t_start,
                                            history=history), separators=(",", ":")))

    until = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--until=")), None)  # HH:MM UTC
    deadline = until and deadline_after(until)

    def go(name, lr, seed, missing=0.0, keep=False):
        if deadline and time.time() >= deadline:
            save()
            print(f"stopped at the deadline {until} UTC before {name} seed {seed}", flush=True)
            raise SystemExit(0)
        role = "eval" if keep else "tune"
        if any((x["role"], x["name"], x["lr"], x["seed"], x["missing"]) == (role, name, lr, seed, missing)
               for x in runs):
            return
        model, rec = train(name, lr, seed, data, missing=missing)
        rec["role"] = "eval" if keep else "tune"
        runs.append(rec)
        prev = redo.get((role, name, lr, seed, missing))
        if prev is not None:          # the epochs the old record has must be reproduced exactly
            n = len(prev["val_mse"])
            dev = float(np.max(np.abs(np.array(rec["val_mse"][:n]) - prev["val_mse"])))
            history[-1]["prefix_dev"].append(dict(role=role, name=name, lr=lr, seed=seed, old_epochs=n,
                                                  new_epochs=rec["epochs_run"], max_abs_dev=dev))
            print(f"   extended from {n} epochs: first {n} validation MSEs differ by at most {dev:.1e}", flush=True)
        if keep:
            weights[key(name, seed, missing)] = flat(model)
        print(f"{time.process_time() - t_start:7.0f}s {name:>12} lr {lr:g} seed {seed} miss {missing:g}: "
              f"best val {rec['val_mse'][rec['best_epoch']]:.4f} at epoch {rec['best_epoch']} of "
              f"{rec['epochs_run']} ({rec['cpu_s']:.1f} s)", flush=True)

    ladder = r["lr_ladder"]
    for name in r["tuned"]:
        grid = list(r["lrs"])
        while True:
            for lr in grid:
                for s in r["tune_seeds"]:
                    go(name, lr, s)
            val = {lr: np.mean([min(x["val_mse"]) for x in runs
                                if x["role"] == "tune" and x["name"] == name and x["lr"] == lr])
                   for lr in grid}
            b = min(grid, key=val.get)
            i = ladder.index(b)
            if b == grid[0] and i > 0:                      # optimum at the low end: widen downwards
                grid.insert(0, ladder[i - 1])
            elif b == grid[-1] and i < len(ladder) - 1:     # at the high end: widen upwards
                grid.append(ladder[i + 1])
            else:
                break
        best[name] = b
    for name in r["ablations"]:
        best[name] = best["TS-LIF"]
    best["GRU"] = r["gru_lr"]
    save()
    # evaluation, the most decisive models first (an interrupted run keeps whole models, in this order)
    for name in PRIORITY:
        seeds = r["gru_seeds"] if name == "GRU" else r["eval_seeds"]
        for s in seeds:
            go(name, best[name], s, keep=True)
        save()
    for name in r["missing_models"]:
        for s in r["eval_seeds"]:
            go(name, best[name], s, missing=r["missing"], keep=True)
        save()
    print(f"done: {time.process_time() - t_start:.0f} CPU-s, {NPZ.stat().st_size / 1e6:.2f} MB")


if __name__ == "__main__":  # pragma: no cover
    main()
