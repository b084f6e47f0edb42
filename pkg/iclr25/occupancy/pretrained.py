"""The committed world models of the PreWorld chapter (``weights/preworld-*.pt``): the stage-1
(2D-rendering) pre-trained models, the fine-tuning grid's validation curves
(``weights/preworld-tuning.json``) and the tuned, fine-tuned models at 10 % 3D labels.

>>> model, meta = load_pretrained("main-s0")      # WorldModel after stage 1, and its recipe and losses
>>> model, meta = load_finetuned("3D-only", 0)    # tuned 3D-only model of evaluation seed 0

Made by ``python -m iclr25.occupancy.pretrained`` (deterministic on one CPU thread): for each
variant of :data:`VARIANTS`, a :class:`~iclr25.occupancy.model.WorldModel` initialised with the
variant's seed and pre-trained with :func:`~iclr25.occupancy.train.pretrain` on the 2D labels of
the first ``pool`` sequences of ``build_data(RECIPE["pool"], RECIPE["data_seed"])`` (the tuning
variant on its own data). Pre-training does not depend on the 3D-label fraction, so these are
shared by every fine-tuning. Chapters never retrain them silently: a missing file, or one made
with another recipe, raises an error naming the script.

The same script then tunes stage 2 (fine-tuning; from scratch for the 3D-only baseline) on the
grid :data:`FT` (learning rates x step counts, the steps validated inside one run per learning
rate) on the tuning run's own data, initial weights and batches, selecting the mean of current and
future mIoU on validation sequences (:func:`tune`), and trains each regime's final models for the
evaluation seeds with the chosen recipe (:func:`train_final`); ``... pretrained ceiling`` makes the
100 %-label 3D-only model alone. ``python -m iclr25.occupancy.pretrained seeds 1 2`` makes the
stage-1 model (if missing) and both regimes' final models of added evaluation seeds only, from the
committed tuning, leaving every other file as it is. ``... pretrained widen [REGIME [LR ...]]``
tunes the extra learning rates :data:`EXT_LRS` into their own file, and ``... pretrained plateau``
runs the stage-1 plateau probe :data:`PLATEAU` (both one thread). Every run records its wall and
CPU seconds and the syntax-tree sha256 of the training code (:func:`code_sha`). Each evaluation
seed adds about 0.9 MB (its stage-1 model and two finals; a test bounds the folder).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch

from iclr25.common.digest import code_ast_sha256, file_sha256

from .model import WorldModel
from .train import Recipe, build_data, finetune, pretrain, scores_of, predict, selection_score
from .world import make_rig

SCRIPT = "python -m iclr25.occupancy.pretrained"
WEIGHTS = Path(__file__).resolve().parent / "weights"
RECIPE = dict(pool=160, data_seed=1, tune_data_seed=100, steps=2000, batch=8, rays=100, lr=3e-3)
"""Stage-1 recipe shared by all variants: the pre-training pool (sequences and data seed, and the
tuning run's data seed), steps, batch, labelled rays per sample and frame, learning rate. The 2000
steps are where the plateau probe (:data:`PLATEAU`) has its lowest validation loss."""
VARIANTS = {**{f"main-s{s}": dict(seed=s, data="main", pool=160, aux=True) for s in range(6)},
            "tune": dict(seed=100, data="tune", pool=160, aux=True)}
"""Every committed variant: initial-weight / batch seed, data set, number of pre-training sequences
(the first ``pool`` of the data), and whether the aux frames' rays are used (temporal supervision).
The controls' stage-1 variants are trained by :mod:`iclr25.occupancy.controls` with their own recipe."""


FT = dict(lrs=(1e-3, 3e-3, 1e-2), evals=(200, 400, 800, 1600, 3200), patience=2, batch=8, n_3d=16,
          n_val=64, val_seed=2, seeds=(0, 1, 2, 3, 4, 5), threads=1, flush_denormal=True, occ_loss="paper")
"""Stage-2 grid and final runs: learning rates, validated step counts (one run per learning rate;
a run stops early once ``patience`` consecutive validations fall below its best, the same rule for
both regimes), batch, labelled sequences (the first ``n_3d`` of the pool: 10 %), validation set
(``build_data(n_val, val_seed)``), evaluation seeds, torch threads of these runs, whether they
flush denormal floats to zero (speed only: a confident model's softmax makes probabilities below
1e-38, and denormal arithmetic made late steps 2-3x slower), and the occupancy loss of both
regimes (``"paper"``: the official code's focal + sem_scal + geo_scal,
:func:`~iclr25.occupancy.train.paper_occ_loss`). The evaluation seeds enter neither the tuning nor
any one file (each final depends on its own seed only), so the freshness checks compare the rest
(``_grid``): seeds can be added later without remaking the others."""


def _grid(ft: dict) -> dict:
    """``ft`` without its evaluation seeds, as JSON would store it: what a committed file must match."""
    return {k: v for k, v in _jsonable(ft).items() if k != "seeds"}
REGIMES = ("3D-only", "PreWorld")
CODE = ("train.py", "model.py", "render.py", "world.py")
"""The training code whose syntax-tree sha256 (docstrings left out) every committed run records."""


def code_sha() -> dict:
    """``{file: code_ast_sha256}`` of :data:`CODE` as the package holds them now."""
    here = Path(__file__).resolve().parent
    return {f: code_ast_sha256(here / f) for f in CODE}


def _val(ft: dict = FT) -> dict:
    return build_data(ft["n_val"], ft["val_seed"], make_rig())


def _start_model(regime: str, seed: int | None) -> WorldModel:
    """The initial model of a stage-2 run: random weights of ``seed`` (3D-only) or the committed
    stage-1 model (PreWorld; ``seed=None``: the tuning variant)."""
    if regime == "3D-only":
        torch.manual_seed(VARIANTS["tune"]["seed"] if seed is None else seed)
        return WorldModel(make_rig())
    return load_pretrained("tune" if seed is None else f"main-s{seed}")[0]


def _patient_run(model: WorldModel, d: dict, idx: torch.Tensor, lr: float, seed: int, ft: dict, val: dict,
                 steps: int, label: str, keep_best: bool = False) -> dict:
    """Stage 2 of ``model`` on the sequences ``idx`` of ``d``, validated on ``val`` at every step
    count of ``ft["evals"]`` and stopped once ``ft["patience"]`` consecutive validations fall below the
    best (the grid's one patience rule). Returns ``{"scores", "now", "future": {step: value},
    "losses": [...]}``; with ``keep_best`` the model ends in its best validated state."""
    out = {"scores": {}, "now": {}, "future": {}, "losses": []}
    best = {"score": -1.0, "bad": 0, "state": None}

    class Stop(Exception):
        pass

    def on_eval(step, m):
        pred, wp = predict(m, val, torch.device("cpu"))
        r = scores_of(pred, val, wp)
        out["scores"][step], out["now"][step], out["future"][step] = selection_score(r), r["miou_now"], r["miou_future"]
        print(f"  {label} step {step}: {out['scores'][step]:.2f}", flush=True)
        if out["scores"][step] > best["score"]:
            best.update(score=out["scores"][step], bad=0,
                        state={k: x.clone() for k, x in m.state_dict().items()} if keep_best else None)
        else:
            best["bad"] += 1
            if best["bad"] >= ft["patience"]:
                raise Stop

    try:
        finetune(model, d, idx, Recipe(lr=lr, steps=steps, batch=ft["batch"], occ_loss=ft["occ_loss"]), seed,
                 torch.device("cpu"), log=out["losses"], callback=(on_eval, ft["evals"]))
    except Stop:
        pass
    if best["state"] is not None:
        model.load_state_dict(best["state"])
    return out


def tune(regime: str, lr: float, ft: dict = FT, data: dict | None = None, val: dict | None = None,
         stop_after: int | None = None) -> dict:
    """One tuning run of ``regime`` at learning rate ``lr``: stage 2 on the tuning data's labelled
    sequences with the tuning seed, validated at every step count of ``ft["evals"]`` (stopping
    early by the patience rule of ``_patient_run``). Returns ``{"scores": {step: score}, "now":
    {...}, "future": {...}, "losses": [...]}``."""
    d = _data(VARIANTS["tune"]) if data is None else data
    return _patient_run(_start_model(regime, None), d, torch.arange(ft["n_3d"]), lr, VARIANTS["tune"]["seed"], ft,
                        _val(ft) if val is None else val, max(ft["evals"]) if stop_after is None else stop_after,
                        f"tune {regime} lr {lr:g}")


def chosen(regime: str, curves: dict) -> tuple[float, int]:
    """The grid point (lr, steps) with the best validation score of ``regime``."""
    pts = [(float(lr), int(st)) for lr, c in curves[regime].items() for st in c["scores"]]
    return max(pts, key=lambda p: curves[regime][str(p[0])]["scores"][str(p[1])])


def train_final(regime: str, seed: int, lr: float, steps: int, ft: dict = FT, data: dict | None = None,
                stop_after: int | None = None) -> tuple[WorldModel, list[float]]:
    """A final stage-2 model of ``regime`` for evaluation seed ``seed``: the chosen recipe on the
    labelled sequences of the main pool; returns the model and every step's loss."""
    d = _data(VARIANTS["main-s0"]) if data is None else data
    model = _start_model(regime, seed)
    log: list[float] = []
    finetune(model, d, torch.arange(ft["n_3d"]), Recipe(lr=lr, steps=steps if stop_after is None else stop_after,
                                                        batch=ft["batch"], occ_loss=ft["occ_loss"]),
             seed, torch.device("cpu"), log=log)
    return model, log


TUNING = WEIGHTS / "preworld-tuning.json"


def train_ceiling(lr: float, ft: dict = FT, data: dict | None = None, val: dict | None = None,
                  stop_after: int | None = None) -> tuple[WorldModel, dict, list[float]]:
    """The headroom reference: the 3D-only model with 3D labels on every sequence of the main pool
    (evaluation seed 0, learning rate ``lr``), validated on the grid's step counts with the same
    patience rule, best state kept. Returns the model, ``{step: score}`` and every step's loss."""
    d = _data(VARIANTS["main-s0"]) if data is None else data
    model = _start_model("3D-only", 0)
    out = _patient_run(model, d, torch.arange(len(d["occ"])), lr, 0, ft, _val(ft) if val is None else val,
                       max(ft["evals"]) if stop_after is None else stop_after, "ceiling", keep_best=True)
    return model, out["scores"], out["losses"]


def make_finetuned(ft: dict = FT, recipe: dict = RECIPE, what: str = "all", seeds: tuple | None = None) -> None:
    """Run the tuning grid (``what`` in ``"all", "tune"``) and save the curves to
    :data:`TUNING`; then (``"all", "final"``) train and save each regime's final models
    ``preworld-ft-{regime}-s{seed}.pt`` and the 100 %-label 3D-only model ``preworld-ft-ceiling-s0.pt``
    (:func:`train_ceiling`, learning rate of the tuned 3D-only model). With ``seeds`` (and ``what="final"``)
    only both regimes' final models of those evaluation seeds, from the committed tuning, and no ceiling."""
    prev = torch.get_num_threads()
    torch.set_num_threads(ft["threads"])
    if torch.set_flush_denormal(ft["flush_denormal"]) != ft["flush_denormal"]:
        raise RuntimeError("this CPU cannot flush denormals: the files would differ from the committed ones")
    try:
        _make_finetuned(ft, recipe, what, seeds)
    finally:                                     # leave no global state behind
        torch.set_flush_denormal(False)
        torch.set_num_threads(prev)


def _make_finetuned(ft: dict, recipe: dict, what: str, seeds: tuple | None = None) -> None:
    if what in ("all", "tune"):
        data, val = _data(VARIANTS["tune"], recipe), _val(ft)
        curves = {r: {} for r in REGIMES}
        if TUNING.is_file():                      # resume: keep the runs of an interrupted grid made the same way
            j = json.loads(TUNING.read_text())
            if _grid(j["ft"]) == _grid(ft) and j["recipe"] == dict(recipe) and j.get("start") == stage1_sha("tune"):
                curves.update(j["curves"])
        for regime in REGIMES:
            for lr in ft["lrs"]:
                if str(lr) in curves[regime]:
                    continue
                start, cpu = time.time(), time.process_time()
                c = tune(regime, lr, ft, data, val)
                c["seconds"], c["cpu_seconds"] = time.time() - start, time.process_time() - cpu
                curves[regime][str(lr)] = _compact(c)
                _write_tuning(curves, ft, recipe)
    if what in ("all", "final", "ceiling"):       # seed 0 of both regimes and the ceiling first (what ci needs)
        curves = load_tuning(ft, recipe)
        data, val = _data(VARIANTS["main-s0"], recipe), _val(ft)
        jobs = [(r, ft["seeds"][0]) for r in REGIMES] + [("ceiling", 0)] + [(r, s) for s in ft["seeds"][1:] for r in REGIMES]
        if seeds is not None:
            jobs = [(r, s) for s in seeds for r in REGIMES]
        if what == "ceiling":                     # the 100 %-label 3D-only model only
            jobs = [("ceiling", 0)]
        for regime, s in jobs:
            start, cpu = time.time(), time.process_time()
            if regime == "ceiling":
                lr = chosen("3D-only", curves)[0]
                model, scores, losses = train_ceiling(lr, ft, data, val)
                steps, extra = max(scores, key=scores.get), {"scores": {str(k): x for k, x in scores.items()}}
            else:
                lr, steps = chosen(regime, curves)
                (model, losses), extra = train_final(regime, s, lr, steps, ft, data), {}
            meta = {"ft": _jsonable(ft), "recipe": dict(recipe), "regime": regime, "seed": s, "lr": lr,
                    "steps": steps, "losses": losses, "seconds": time.time() - start,
                    "cpu_seconds": time.process_time() - cpu, "code": code_sha(), **extra,
                    "start": stage1_sha(f"main-s{s}") if regime == "PreWorld" else None}
            torch.save({"state_dict": model.state_dict(), "meta": meta}, WEIGHTS / f"preworld-ft-{regime}-s{s}.pt")
            print(f"final {regime} s{s} (lr {lr:g}, {steps} steps): {time.time() - start:.0f} s {extra}", flush=True)


LOSS_HEAD = 100
"""Steps whose every loss the tuning file keeps (the reproduction tests compare the first few)."""


def _compact(c: dict) -> dict:
    """A tuning run as :data:`TUNING` stores it: step keys as strings, and of its losses only the first
    :data:`LOSS_HEAD` (``"losses"``) and the means of every 50 steps (``"loss_means"``)."""
    out = {k: ({str(s): x for s, x in v.items()} if isinstance(v, dict) else v) for k, v in c.items()}
    ls = out.pop("losses")
    out["losses"], out["loss_means"] = ls[:LOSS_HEAD], [sum(ls[i:i + 50]) / len(ls[i:i + 50]) for i in range(0, len(ls), 50)]
    return out


def _write_tuning(curves: dict, ft: dict = FT, recipe: dict = RECIPE) -> None:
    TUNING.write_text(json.dumps({"ft": _grid(ft), "recipe": recipe, "start": stage1_sha("tune"),
                                  "code": code_sha(), "curves": curves}, indent=1))


EXT_LRS = (3e-4, 3e-2)
"""Learning rates that can widen the committed stage-2 grid (``python -m iclr25.occupancy.pretrained
widen [REGIME [LR ...]]``) when a regime's choice sits at an edge of :data:`FT`'s rates: each regime
is tuned there by the same routine, data, seed, validation set and patience rule, and the curves go
to their own file (:data:`TUNING_EXT`), so the committed choice and final models stay valid; the
chapter asks whether the chosen rate is an interior optimum of all the rates run."""
TUNING_EXT = WEIGHTS / "preworld-tuning-ext.json"


def widen_grid(lrs: tuple = EXT_LRS, ft: dict = FT, recipe: dict = RECIPE, regimes: tuple = REGIMES) -> None:
    """Tune ``regimes`` at the extra learning rates ``lrs`` (one thread, denormals flushed, as the
    committed grid) and write (or update) :data:`TUNING_EXT` after every run."""
    prev = torch.get_num_threads()
    torch.set_num_threads(ft["threads"])
    torch.set_flush_denormal(ft["flush_denormal"])
    try:
        data, val = _data(VARIANTS["tune"], recipe), _val(ft)
        for regime in regimes:
            for lr in lrs:
                start, cpu = time.time(), time.process_time()
                c = tune(regime, lr, ft, data, val)
                c["seconds"], c["cpu_seconds"] = time.time() - start, time.process_time() - cpu
                j = json.loads(TUNING_EXT.read_text()) if TUNING_EXT.is_file() else {"curves": {}}
                j["curves"].setdefault(regime, {})[str(lr)] = _compact(c)
                j.update(ft=_grid(ft), recipe=dict(recipe), start=stage1_sha("tune"))
                TUNING_EXT.write_text(json.dumps(j, indent=1))
    finally:
        torch.set_flush_denormal(False)
        torch.set_num_threads(prev)


def load_tuning_ext(ft: dict = FT, recipe: dict = RECIPE) -> dict:
    """The committed curves at :data:`EXT_LRS` (same layout as :func:`load_tuning`); refuses a
    missing or stale file."""
    if not TUNING_EXT.is_file():
        raise FileNotFoundError(f"no widened tuning grid at {TUNING_EXT}: make it with `{SCRIPT} widen`")
    j = json.loads(TUNING_EXT.read_text())
    if _grid(j["ft"]) != _grid(ft) or j["recipe"] != dict(recipe) or j.get("start") != stage1_sha("tune"):
        raise RuntimeError(f"{TUNING_EXT} is stale: regenerate it with `{SCRIPT} widen`")
    return j["curves"]


PLATEAU = dict(variant="tune", steps=3200, every=200, n_val=32)
"""The stage-1 plateau probe (``python -m iclr25.occupancy.pretrained plateau``): the tuning
variant (no evaluation seed) pre-trained with :data:`RECIPE` but for ``steps`` steps, its stage-1
loss measured every ``every`` steps on the first ``n_val`` validation sequences of :data:`FT`
(fixed rays, no gradients). Its first :data:`RECIPE` ``["steps"]`` steps are exactly the committed
tuning variant's run (the learning rate is constant, so the run does not depend on its length); the
curve tells where the validation loss is lowest, which sets the recipe's steps."""
PLATEAU_FILE = WEIGHTS / "preworld-stage1-plateau.json"


def stage1_plateau(probe: dict = PLATEAU, recipe: dict = RECIPE, ft: dict = FT) -> dict:
    """Run the plateau probe on one thread and write :data:`PLATEAU_FILE` (the validation curve, the
    50-step means of the training loss, the first 100 training losses, seconds)."""
    from .train import stage1_val_loss
    torch.set_num_threads(1)
    v, rig = VARIANTS[probe["variant"]], make_rig()
    val = build_data(probe["n_val"], ft["val_seed"], rig)
    torch.manual_seed(v["seed"])
    model = WorldModel(rig)
    rec = Recipe(lr=recipe["lr"], steps=probe["steps"], batch=recipe["batch"], rays=recipe["rays"], aux=v["aux"])
    curve, log, start = {}, [], time.time()

    def on_eval(step, m):
        curve[str(step)] = stage1_val_loss(m, val, rec, rig, torch.device("cpu"))
        print(f"  plateau probe step {step}: validation loss {curve[str(step)]:.4f} ({time.time() - start:.0f} s)",
              flush=True)
        PLATEAU_FILE.write_text(json.dumps({"probe": probe, "recipe": recipe, "val": curve, "losses": log[:LOSS_HEAD],
                                            "loss_means": [sum(log[i:i + 50]) / len(log[i:i + 50])
                                                           for i in range(0, len(log), 50)],
                                            "seconds": time.time() - start}, indent=1))

    on_eval(0, model)
    pretrain(model, _data(v, recipe), torch.arange(v["pool"]), rec, rig, v["seed"], torch.device("cpu"), log,
             callback=(on_eval, probe["every"]))
    return json.loads(PLATEAU_FILE.read_text())


def load_plateau(probe: dict = PLATEAU, recipe: dict = RECIPE) -> dict:
    """The committed plateau probe; refuses a missing or stale file naming the script."""
    if not PLATEAU_FILE.is_file():
        raise FileNotFoundError(f"no stage-1 plateau probe at {PLATEAU_FILE}: make it with `{SCRIPT} plateau`")
    j = json.loads(PLATEAU_FILE.read_text())
    same = lambda a: {k: v for k, v in a.items() if k != "steps"}         # the probe sets its own length
    if j["probe"] != dict(probe) or same(j["recipe"]) != same(dict(recipe)):
        raise RuntimeError(f"{PLATEAU_FILE} is stale: regenerate it with `{SCRIPT} plateau`")
    return j


def stage1_sha(name: str) -> str:
    """sha256 of the committed stage-1 file ``name`` (what a PreWorld fine-tuning started from)."""
    return file_sha256(WEIGHTS / f"preworld-{name}.pt")


def _jsonable(ft: dict) -> dict:
    return json.loads(json.dumps(ft))


def load_tuning(ft: dict = FT, recipe: dict = RECIPE) -> dict:
    """The committed validation curves ``{regime: {str(lr): {"scores": {str(step): score}, "now",
    "future", "seconds", "losses" (first steps), "loss_means" (of 50 steps)}}}``; refuses a missing
    or stale file (another grid, recipe, or tuning stage-1 model) naming the script."""
    if not TUNING.is_file():
        raise FileNotFoundError(f"no committed tuning curves at {TUNING}: make them with `{SCRIPT} finetuned`")
    j = json.loads(TUNING.read_text())
    if _grid(j["ft"]) != _grid(ft) or j["recipe"] != dict(recipe) or j.get("start") != stage1_sha("tune"):
        raise RuntimeError(f"{TUNING} was made with {j['ft']} / {j['recipe']}, the package now says {ft} / {recipe}: "
                           f"regenerate it with `{SCRIPT} finetuned`")
    return j["curves"]


def load_finetuned(regime: str, seed: int, device: torch.device | str = "cpu", ft: dict = FT,
                   recipe: dict = RECIPE, path: Path | None = None) -> tuple[WorldModel, dict]:
    """The committed final model of ``regime`` and evaluation seed ``seed`` (fine-tuned with the
    recipe the committed tuning curves choose) and its metadata; refuses a missing file, or one
    made with another grid, recipe, choice or (PreWorld) stage-1 starting model, naming the script."""
    path = Path(path) if path is not None else WEIGHTS / f"preworld-ft-{regime}-s{seed}.pt"
    if not path.is_file():
        raise FileNotFoundError(f"no committed fine-tuned model at {path}: make it with `{SCRIPT} finetuned`")
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    m = ckpt["meta"]
    lr, steps = chosen(regime if regime != "ceiling" else "3D-only", load_tuning(ft, recipe))
    if regime == "ceiling":
        steps = m["steps"]                                   # its own choice, on the same grid
    if regime == "PreWorld" and m.get("start") != stage1_sha(f"main-s{seed}"):
        raise RuntimeError(f"{path} was fine-tuned from another stage-1 model than the committed "
                           f"preworld-main-s{seed}.pt: regenerate it with `{SCRIPT} finetuned`")
    if _grid(m["ft"]) != _grid(ft) or m["recipe"] != dict(recipe) or (m["lr"], m["steps"]) != (lr, steps):
        raise RuntimeError(f"{path} was made with lr {m['lr']:g}, {m['steps']} steps under {m['ft']}; the committed "
                           f"tuning now chooses lr {lr:g}, {steps} steps under {ft}: regenerate it with "
                           f"`{SCRIPT} finetuned`")
    model = WorldModel(make_rig())
    model.load_state_dict(ckpt["state_dict"])
    return model.to(device), m


def _data(variant: dict, recipe: dict = RECIPE) -> dict:
    seed = recipe["data_seed"] if variant["data"] == "main" else recipe["tune_data_seed"]
    return build_data(recipe["pool"], seed, make_rig())


def train_variant(name: str, recipe: dict = RECIPE, stop_after: int | None = None,
                  data: dict | None = None) -> tuple[WorldModel, list[float]]:
    """Pre-train variant ``name`` from its initial weights (``stop_after`` ends early on the same
    schedule); returns the model and the loss of every step."""
    v = VARIANTS[name]
    torch.manual_seed(v["seed"])
    rig = make_rig()
    model = WorldModel(rig)
    d = _data(v, recipe) if data is None else data
    rec = Recipe(lr=recipe["lr"], steps=recipe["steps"] if stop_after is None else stop_after,
                 batch=recipe["batch"], rays=recipe["rays"], aux=v["aux"])
    log: list[float] = []
    pretrain(model, d, torch.arange(v["pool"]), rec, rig, v["seed"], torch.device("cpu"), log)
    return model, log


def make_checkpoints(recipe: dict = RECIPE, names: tuple | None = None) -> None:
    """Train every variant (or ``names``) on one CPU thread and save ``{"state_dict", "meta"}``
    to ``WEIGHTS / f"preworld-{name}.pt"``."""
    torch.set_num_threads(1)
    data = {k: build_data(recipe["pool"], recipe[s], make_rig())
            for k, s in (("main", "data_seed"), ("tune", "tune_data_seed"))}
    WEIGHTS.mkdir(parents=True, exist_ok=True)
    for name in names or tuple(VARIANTS):
        start, cpu = time.time(), time.process_time()
        model, losses = train_variant(name, recipe, data=data[VARIANTS[name]["data"]])
        ckpt = {"state_dict": model.state_dict(),
                "meta": {"recipe": dict(recipe), "variant": dict(VARIANTS[name]), "losses": losses,
                         "seconds": time.time() - start, "cpu_seconds": time.process_time() - cpu,
                         "code": code_sha()}}
        torch.save(ckpt, WEIGHTS / f"preworld-{name}.pt")
        print(f"{name}: {time.time() - start:.0f} s, loss first 50 {sum(losses[:50]) / 50:.3f}, "
              f"last 50 {sum(losses[-50:]) / 50:.3f}", flush=True)


def load_pretrained(name: str, device: torch.device | str = "cpu", recipe: dict = RECIPE,
                    path: Path | None = None) -> tuple[WorldModel, dict]:
    """The committed stage-1 model ``name`` (train mode, ready to fine-tune) on ``device`` and its
    metadata. Raises ``FileNotFoundError`` (no file) or ``RuntimeError`` (made with another recipe
    or variant), both naming ``python -m iclr25.occupancy.pretrained``."""
    path = Path(path) if path is not None else WEIGHTS / f"preworld-{name}.pt"
    if not path.is_file():
        raise FileNotFoundError(f"no committed pre-trained world model at {path}: make it with `{SCRIPT}` "
                                f"(chapters never retrain it silently)")
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    if ckpt["meta"]["recipe"] != dict(recipe) or ckpt["meta"]["variant"] != VARIANTS[name]:
        raise RuntimeError(f"{path} was made with {ckpt['meta']['recipe']} / {ckpt['meta']['variant']}, the "
                           f"package now says {recipe} / {VARIANTS[name]}: regenerate it with `{SCRIPT}`")
    model = WorldModel(make_rig())
    model.load_state_dict(ckpt["state_dict"])
    return model.to(device), ckpt["meta"]


if __name__ == "__main__":
    import sys
    args = sys.argv[1:]
    if not args:                                   # everything: stage 1, then the tuning grid and final models
        make_checkpoints()
        make_finetuned()
    elif args[0] in ("finetuned", "tune", "final", "ceiling"):
        make_finetuned(what={"finetuned": "all"}.get(args[0], args[0]))
    elif args[0] == "plateau":
        stage1_plateau()
    elif args[0] == "widen":                       # the two extra learning rates: widen REGIME [LR ...]
        widen_grid(tuple(map(float, args[2:])) or EXT_LRS, regimes=(args[1],) if len(args) > 1 else REGIMES)
    elif args[0] == "seeds":                       # added evaluation seeds: stage 1 and both regimes' finals, seed by seed
        for k in map(int, args[1:]):
            if not (WEIGHTS / f"preworld-main-s{k}.pt").is_file():
                make_checkpoints(names=(f"main-s{k}",))
            make_finetuned(what="final", seeds=(k,))
    else:
        make_checkpoints(names=tuple(args))
