"""The committed tiny face models of the InterLCM chapter (``weights/faces-*.pt``).

>>> models = load_face_models()     # teacher, LCM, restorers (eval mode) and their training logs

Made by ``python -m iclr25.diffusion.faces_pretrained`` (deterministic on one CPU thread), in three
stages, each model its own float16 file under 2 MB, all on procedural faces
(:mod:`~iclr25.diffusion.facegen`: every training face a fresh identity, so nothing can be memorised):

1. ``faces-teacher.pt``: a :func:`~iclr25.diffusion.consistency.make_cond_unet` epsilon-predictor
   on the ``scaled_linear`` schedule;
2. ``faces-lcm.pt``: its consistency distillation (:func:`~iclr25.diffusion.consistency.consistency_distill`),
   1200 steps (its self-consistency error along teacher ODE trajectories, at most half the teacher's when
   fully distilled, is checked by the chapter);
3. ``faces-<kind>.pt``: the trained restorers of the chapter, every one on the same stream of degraded
   training pairs and seed: the regression U-Net (``regression``), InterLCM (``interlcm``: LQ as the state at
   ``t = 759``, 3 LCM steps), the from-noise control (``fromnoise``: same encoders, losses and steps, 4 LCM
   steps from pure noise), the DiffBIR-style diffusion restorer (``diffusion``: the regression U-Net as its
   first-stage pre-cleaner, then the same encoders on the teacher conditioned on the pre-cleaned image,
   epsilon loss, as many network passes); and InterLCM trained with the LQ at a later state
   (:data:`LATER_KINDS`: ``interlcm-499``: 2 LCM steps, ``interlcm-259``: 1 step; the paper trains its 1-step
   model separately too), as many steps as InterLCM, for the chapter's fidelity-quality trade-off row.

Every restorer is continued by a second cosine cycle (``RECIPE["restorer"]["more_of"]``, equal passes for all);
``python -m iclr25.diffusion.faces_pretrained <kind>`` resumes from a committed first-cycle file and runs only the
second cycle. The diffusion restorer's recipe includes its pre-cleaner's (the regression U-Net's), so it is
retrained whenever that changes.

Every restorer's validation curve (PSNR gain over the input on the validation faces) is logged in its
file's ``meta["curve"]`` (mean) and ``meta["curve_cases"]`` (per case), over both cycles.

Chapters never retrain silently: a missing file, or one made with another recipe, raises an error
naming the script.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from iclr25.diffusion.consistency import consistency_distill, make_cond_unet, train_teacher
from iclr25.diffusion.degrade import SEVERITY, degrade_batch
from iclr25.diffusion.facegen import face_stream, faces
from iclr25.diffusion.restore import (PerceptualLoss, Restorer, diffusion_restore, eps_loss, interlcm_restore, psnr,
                                      regress, regression_unet, train_restorer)

SCRIPT = "python -m iclr25.diffusion.faces_pretrained"
WEIGHTS = Path(__file__).resolve().parent / "weights"
KINDS = ("regression", "interlcm", "fromnoise", "diffusion")
"""The committed trained restorers (see the module docstring)."""
LATER_KINDS = ("interlcm-499", "interlcm-259")
"""InterLCM's encoders trained with the low-quality image placed at a later LCM state (:data:`STARTS`), as the
paper trains its 1-step model separately (``python -m iclr25.diffusion.faces_pretrained interlcm-499 interlcm-259``;
committed, loaded by default)."""
STARTS = {"interlcm-499": 2, "interlcm-259": 3}
"""The LCM step index at which the later-start InterLCM variants place the low-quality image (4-step
schedule ``[999, 759, 499, 259]``: 2 and 1 network calls)."""
FILES = {"teacher": "faces-teacher.pt", "lcm": "faces-lcm.pt", **{k: f"faces-{k}.pt" for k in KINDS + LATER_KINDS}}
RECIPE = dict(res=16, channels=(16, 32), data="procedural", init_seed=0, data_seed=0,
              teacher=dict(steps=1000, batch_size=32, lr=2e-3, warmup=50),
              lcm=dict(steps=1200, batch_size=32, lr=1e-3, skip=20, ema=0.95),
              restorer=dict(steps=400, batch_size=16, lr=2e-3, warmup=20, eval_every=25, perceptual=1.0, start=1,
                            num_steps=4, n_val=20, passes=dict(interlcm=4, fromnoise=5, diffusion=1, regression=2),
                            degradation=SEVERITY["train"], lr_of=dict(diffusion=1e-3),
                            more_of={"interlcm": 150, "fromnoise": 150, "regression": 150, "diffusion": 150,
                                     "interlcm-499": 150, "interlcm-259": 150},
                            more=dict(lr_frac=0.25, warmup=10, seed_offset=3)))
"""The recipe: image size, U-Net widths, seeds, and each stage's steps, batch and learning rate.
``restorer.passes`` counts U-Net-sized forward-backward passes per training step (the perceptual loss
is one); the diffusion restorer and the regression U-Net get as many passes as InterLCM
(``steps * 4 / passes`` steps), the from-noise control as many *steps* (so more passes). Every restorer
has the same schedule in passes: ``lr`` after a warm-up of ``warmup`` InterLCM-equivalent steps, cosine
decay to 0 at the end; its validation PSNR (:func:`validation_psnr`) is logged every ``eval_every``
InterLCM-equivalent steps (the curve the budget was chosen from). ``restorer.lr_of`` overrides ``lr`` per
kind: the diffusion restorer's rate, half of InterLCM's and not tuned (the ``m4-grid`` sub-command trains the grid
:data:`M4_GRID`; no grid is committed). ``restorer.degradation`` records the
training degradation ranges (:data:`~iclr25.diffusion.degrade.SEVERITY`), so restorers trained on other
ranges are refused as stale.

``restorer.more_of`` continues the named restorers past the ``steps`` budget by a second cosine cycle of that many
InterLCM-equivalent steps (a warm restart): fresh Adam state, peak rate ``more.lr_frac`` times the kind's rate after
``more.warmup`` steps, cosine to 0, fresh training pairs (training generator seed ``data_seed + more.seed_offset``);
the validation curve goes on every ``eval_every`` steps to ``steps + more_of[kind]``, the kind's whole budget
(:func:`budget_of`). The first cycle is exactly the run without it, so the script resumes from a committed file of
the first cycle's recipe (:func:`base_recipe`) when one is there."""

M4_GRID = (3e-4, 1e-3, 4e-3)
"""The diffusion restorer's learning-rate grid for the ``m4-grid`` sub-command, each run
with the same budget in passes and validation curve as the committed restorers; the rate kept in
``RECIPE["restorer"]["lr_of"]["diffusion"]`` is the one with the highest :func:`late_mean` of its curve."""
GRID_JSON = "faces-diffusion-grid.json"


def late_mean(curve, lo: float = 0.75, hi: float = 1.0) -> float:
    """Mean validation gain of ``curve`` (``[(step, gain), ...]``) over the points with ``lo <= step / last step <= hi``
    (default: the last quarter of the budget, the selection window of :data:`M4_GRID`)."""
    c = np.asarray(curve, dtype=float)
    frac = c[:, 0] / c[-1, 0]
    return float(c[(frac >= lo - 1e-9) & (frac <= hi + 1e-9), 1].mean())


def grid_log() -> dict:
    """The committed learning-rate grid of the diffusion restorer (``weights/faces-diffusion-grid.json``, written by
    the ``m4-grid`` sub-command): ``{lr: {"curve", "late_mean", "seconds", "loss_first_last"}}``, rates ascending."""
    import json

    path = WEIGHTS / GRID_JSON
    if not path.is_file():
        raise FileNotFoundError(f"no committed learning-rate grid at {path}: make it with `{SCRIPT} m4-grid`")
    return {v["lr"]: v for v in json.loads(path.read_text()).values()}


def more_for(kind: str, recipe: dict = RECIPE) -> int:
    """InterLCM-equivalent steps of the second cosine cycle of restorer ``kind`` (``restorer.more_of``, 0 if none)."""
    return recipe["restorer"].get("more_of", {}).get(kind, 0)


def budget_of(kind: str, recipe: dict = RECIPE) -> int:
    """The whole training budget of restorer ``kind`` in InterLCM-equivalent steps: ``steps`` plus its second cycle."""
    return recipe["restorer"]["steps"] + more_for(kind, recipe)


def base_recipe(kind: str, recipe: dict = RECIPE) -> dict:
    """``recipe`` without the second cycle of ``kind`` (the recipe of its first cycle)."""
    r = recipe["restorer"]
    return {**recipe, "restorer": {**r, "more_of": {k: v for k, v in r.get("more_of", {}).items() if k != kind}}}


def lr_for(kind: str, recipe: dict = RECIPE) -> float:
    """The peak learning rate of restorer ``kind``: ``restorer.lr_of[kind]`` if set, else ``restorer.lr``."""
    r = recipe["restorer"]
    return r.get("lr_of", {}).get(kind, r["lr"])


def reference_faces(n: int = 2000, res: int = 16) -> torch.Tensor:
    """``n`` faces of the fixed ``reference`` identities (:mod:`~iclr25.diffusion.facegen`): the distribution the
    quality metric compares with, and what the eigenface identity proxy is fitted on (never a test identity)."""
    return faces(n, "reference", res)[0]


def face_source(res: int = 16, seed: int = 0):
    """``source(n, g)``: ``n`` faces of fresh procedural identities drawn from ``g`` (``seed`` unused: the
    training stream is set by the training generator)."""
    return face_stream(res)


def pair_source(res: int = 16, seed: int = 0):
    """``pairs(n, g)``: ``(hq, lq)`` batches, fresh procedural faces and their random degradations
    (the numpy degradation seed drawn from ``g``)."""
    src = face_source(res, seed)

    def pairs(n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        hq = src(n, g)
        rng = np.random.default_rng(int(torch.randint(0, 2 ** 31 - 1, (1,), generator=g)))
        return hq, degrade_batch(hq, rng, "train")
    return pairs


def _save(name: str, state: dict, meta: dict, path: Path | None = None) -> None:
    path = WEIGHTS / FILES[name] if path is None else Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"state_dict": {k: v.half() for k, v in state.items()}, "meta": meta}, path)


def _make_restorer(kind: str, recipe: dict, path: Path | None = None) -> dict:
    """Train restorer ``kind`` on the committed teacher and LCM and save it (to ``path``, default its committed
    file) with its recipe, losses, validation curve and seconds; returns that metadata."""
    needs_lcm = kind not in ("diffusion", "regression")
    m = load_face_models(recipe, ("teacher", "lcm") if needs_lcm else ("teacher",))
    t0, curve, first = time.time(), [], None
    committed = WEIGHTS / FILES[kind]
    if more_for(kind, recipe) and committed.is_file():
        ck = torch.load(committed, map_location="cpu", weights_only=True)
        if repr(ck["meta"]["recipe"]) == repr(stage_recipe(kind, base_recipe(kind, recipe))):
            first = ck          # the first cycle is committed: resume from it (the same run, not repeated)
    model, losses = fit_restorer(kind, m["teacher"], m.get("lcm"), recipe, curve=curve, first=first)
    seconds = time.time() - t0 + (first["meta"]["seconds"] if first is not None else 0.0)
    meta = {"recipe": stage_recipe(kind, recipe), "losses": losses, "curve": [c[:2] for c in curve],
            "curve_cases": [c[2] for c in curve], "seconds": seconds}
    _save(kind, model.state_dict(), meta, path)
    return meta


def _load(name: str, recipe: dict) -> dict:
    path = WEIGHTS / FILES[name]
    if not path.is_file():
        raise FileNotFoundError(f"no committed {name} model at {path}: make it with `{SCRIPT}` "
                                f"(chapters never retrain it silently)")
    ck = torch.load(path, map_location="cpu", weights_only=True)
    if repr(ck["meta"]["recipe"]) != repr(stage_recipe(name, recipe)):
        raise RuntimeError(f"{path} was made with another recipe: regenerate it with `{SCRIPT}`")
    return ck


def stage_recipe(name: str, recipe: dict = RECIPE) -> dict:
    """The part of ``recipe`` that stage ``name`` (``teacher``, ``lcm`` or a restorer kind) depends on."""
    keep = {"teacher": ("teacher",), "lcm": ("teacher", "lcm"), "regression": ("teacher", "restorer"),
            "diffusion": ("teacher", "restorer")}.get(name, ("teacher", "lcm", "restorer"))
    out = {k: v for k, v in recipe.items() if not isinstance(v, dict) or k in keep}
    if "restorer" in out:      # a restorer depends on its own rate and second cycle only (folded in)
        r = {k: v for k, v in out["restorer"].items() if k not in ("lr_of", "more_of", "more")}
        out["restorer"] = {**r, "lr": lr_for(name, recipe)} if name in KINDS + LATER_KINDS else r
        if more_for(name, recipe):
            out["restorer"]["more"] = {"steps": more_for(name, recipe), **recipe["restorer"]["more"]}
        if name == "diffusion":    # conditioned on the regression U-Net's output: depends on how it was trained
            out["restorer"]["precleaner"] = stage_recipe("regression", recipe)["restorer"]
    return _plain(out)


def _plain(obj):
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return obj


def fit_teacher(recipe: dict = RECIPE, stop_after: int | None = None, progress=None):
    """Stage 1: the teacher (eval mode) and its losses."""
    unet = make_cond_unet(recipe["res"], recipe["channels"], seed=recipe["init_seed"])
    torch.manual_seed(recipe["init_seed"])
    r = recipe["teacher"]
    losses = train_teacher(unet, face_source(recipe["res"], recipe["data_seed"]), r["steps"], r["batch_size"],
                           r["lr"], r["warmup"], seed=recipe["data_seed"], stop_after=stop_after, progress=progress)
    return unet.eval().requires_grad_(False), losses


def fit_lcm(teacher, recipe: dict = RECIPE, stop_after: int | None = None, progress=None):
    """Stage 2: the LCM distilled from ``teacher`` and its losses."""
    r = recipe["lcm"]
    return consistency_distill(teacher, face_source(recipe["res"], recipe["data_seed"]), r["steps"], r["batch_size"],
                               r["lr"], r["skip"], r["ema"], seed=recipe["data_seed"] + 1, stop_after=stop_after,
                               progress=progress)


def restorer_losses(kind: str, teacher, lcm, recipe: dict = RECIPE):
    """The trainable module and the loss ``(hq, lq, g) -> loss`` of the restorer ``kind``
    (``interlcm``, ``fromnoise``, ``diffusion``, ``regression``)."""
    r = recipe["restorer"]
    perc = PerceptualLoss(teacher)

    def recon(out, hq):
        return F.l1_loss(out, hq) + r["perceptual"] * perc(out, hq)

    if kind == "regression":
        model = regression_unet(recipe["res"], recipe["channels"], seed=recipe["init_seed"])
        return model, lambda hq, lq, g: recon(regress(model, lq), hq)
    base = teacher if kind == "diffusion" else lcm
    model = Restorer(base, seed=recipe["init_seed"])
    if kind == "diffusion":           # DiffBIR: the ControlNet sees the pre-cleaned image
        return model, lambda hq, lq, g: eps_loss(teacher, model, hq, precleaned(lq, recipe), g)
    start = start_of(kind, recipe)
    return model, lambda hq, lq, g: recon(interlcm_restore(lcm, model, lq, start, r["num_steps"], g), hq)


def start_of(kind: str, recipe: dict = RECIPE) -> int:
    """The LCM step index at which restorer ``kind`` places the low-quality image (0: from pure noise)."""
    return STARTS.get(kind, recipe["restorer"]["start"] if kind == "interlcm" else 0)


def restorer_steps(kind: str, recipe: dict = RECIPE) -> int:
    """Training steps of ``kind``: equal passes to InterLCM, except the from-noise control and the later-start
    InterLCM variants (equal steps)."""
    return _per_kind(recipe["restorer"]["steps"], kind, recipe)


def restorer_total_steps(kind: str, recipe: dict = RECIPE) -> int:
    """Training steps of ``kind`` over both cosine cycles (the length of its logged losses)."""
    return restorer_steps(kind, recipe) + _per_kind(more_for(kind, recipe), kind, recipe)


def _per_kind(n: int, kind: str, recipe: dict) -> int:
    """``n`` InterLCM steps in steps of ``kind`` (equal passes; the from-noise control: equal steps)."""
    r = recipe["restorer"]
    if kind == "fromnoise" or kind.startswith("interlcm"):
        return n
    return n * r["passes"]["interlcm"] // r["passes"][kind]


def validation_pairs(res: int = 16, n: int = 20) -> tuple[torch.Tensor, torch.Tensor]:
    """``(hq, lq)`` ``(2 n, 1, res, res)``: the ``n`` validation identities, each degraded once ``mild`` and once
    ``severe`` (numpy seed 2000, as the chapter's validation set)."""
    val = faces(n, "val", res)[0]
    rng = np.random.default_rng(2000)
    return torch.cat([val, val]), torch.cat([degrade_batch(val, rng, "mild"), degrade_batch(val, rng, "severe")])


@torch.no_grad()
def restore(kind: str, model, lq: torch.Tensor, teacher, lcm, recipe: dict = RECIPE,
            generator: torch.Generator | None = None) -> torch.Tensor:
    """The restoration of ``lq`` ``(B, 1, H, W)`` by the trained restorer ``model`` of ``kind`` with its own
    sampler: InterLCM from step :func:`start_of` (3, 2 or 1 LCM calls), the from-noise control (4 LCM calls from noise),
    the diffusion restorer (50 DDIM steps from noise), the regression U-Net (one call)."""
    r = recipe["restorer"]
    if kind == "regression":
        return regress(model, lq)
    if kind == "diffusion":
        return diffusion_restore(teacher, model, precleaned(lq, recipe), 50, None, generator)
    return interlcm_restore(lcm, model, lq, start_of(kind, recipe), r["num_steps"], generator)


def validation_gains(kind: str, model, teacher, lcm, recipe: dict = RECIPE) -> np.ndarray:
    """Per-case PSNR gain over the degraded input (dB) of ``model`` on :func:`validation_pairs` (sampler noise
    seed 3000)."""
    hq, lq = validation_pairs(recipe["res"], recipe["restorer"]["n_val"])
    out = restore(kind, model, lq, teacher, lcm, recipe, torch.Generator().manual_seed(3000))
    return (psnr(out, hq) - psnr(lq, hq)).cpu().numpy()


def validation_psnr(kind: str, model, teacher, lcm, recipe: dict = RECIPE) -> float:
    """Mean PSNR gain over the degraded input (dB) of ``model`` on :func:`validation_pairs` (sampler noise seed 3000)."""
    return float(validation_gains(kind, model, teacher, lcm, recipe).mean())


_PRECLEANER: dict = {}


def precleaned(lq: torch.Tensor, recipe: dict = RECIPE) -> torch.Tensor:
    """DiffBIR's first stage: ``lq`` cleaned by the committed regression U-Net (the diffusion restorer's condition)."""
    key = repr(stage_recipe("regression", recipe))
    if key not in _PRECLEANER:
        _PRECLEANER[key] = load_face_models(recipe, ("regression",))["regression"]
    model = _PRECLEANER[key].to(lq.device)
    with torch.no_grad():
        return regress(model, lq)


def fit_restorer(kind: str, teacher, lcm, recipe: dict = RECIPE, stop_after: int | None = None, progress=None,
                 curve: list | None = None, first: dict | None = None):
    """Stage 3: train the restorer ``kind`` on the same degraded pairs; returns it (eval) and its losses.
    With a list ``curve``, appends ``(interlcm_equivalent_step, validation_psnr, per_case_gains)`` every
    ``eval_every`` InterLCM-equivalent steps and at the end (the training itself is unchanged). A kind with a
    second cycle (``restorer.more_of``) runs it after the first (not with ``stop_after``); ``first``, a saved
    checkpoint of the first cycle (``{"state_dict", "meta"}``), replaces running that cycle."""
    r = recipe["restorer"]
    model, loss_fn = restorer_losses(kind, teacher, lcm, recipe)
    every, n = _per_kind(r["eval_every"], kind, recipe), restorer_steps(kind, recipe)

    def logger(offset: int, skip0: bool):
        def on_step(s: int) -> None:
            if curve is not None and s % every == 0 and not (skip0 and s == 0):
                gains = validation_gains(kind, model, teacher, lcm, recipe)
                curve.append((offset + s * r["eval_every"] // every, float(gains.mean()),
                              [round(float(v), 4) for v in gains]))
        return on_step

    def log_end(step: int) -> None:
        if curve is not None and stop_after is None:
            gains = validation_gains(kind, model, teacher, lcm, recipe)
            curve.append((step, float(gains.mean()), [round(float(v), 4) for v in gains]))

    if first is None:
        losses = train_restorer(loss_fn, model.parameters(), pair_source(recipe["res"], recipe["data_seed"]),
                                n, r["batch_size"], lr_for(kind, recipe), seed=recipe["data_seed"] + 2,
                                stop_after=stop_after, progress=progress, warmup=_per_kind(r["warmup"], kind, recipe),
                                on_step=logger(0, False))
        log_end(r["steps"])
    else:
        model.load_state_dict({k: v.float() for k, v in first["state_dict"].items()})
        losses = list(first["meta"]["losses"])
        if curve is not None:
            curve.extend(zip(first["meta"]["curve"], first["meta"]["curve_cases"]))
            curve[:] = [(c[0][0], c[0][1], c[1]) for c in curve]
    more = more_for(kind, recipe)
    if more and stop_after is None:
        m = r["more"]
        model.train()
        losses += train_restorer(loss_fn, model.parameters(), pair_source(recipe["res"], recipe["data_seed"]),
                                 _per_kind(more, kind, recipe), r["batch_size"], m["lr_frac"] * lr_for(kind, recipe),
                                 seed=recipe["data_seed"] + m["seed_offset"], progress=progress,
                                 warmup=_per_kind(m["warmup"], kind, recipe), on_step=logger(r["steps"], True))
        log_end(r["steps"] + more)
    return model.eval().requires_grad_(False), losses


def make_checkpoints(recipe: dict = RECIPE, stages=("teacher", "lcm") + KINDS + LATER_KINDS) -> None:
    """Run the stages on one CPU thread and save their files (later stages load the earlier ones;
    the restorers are independent of each other)."""
    torch.set_num_threads(1)
    if "teacher" in stages:
        t0 = time.time()
        teacher, losses = fit_teacher(recipe)
        _save("teacher", teacher.state_dict(), {"recipe": stage_recipe("teacher", recipe), "losses": losses,
                                                  "seconds": time.time() - t0})
        print(f"teacher {time.time() - t0:.0f} s, loss {np.mean(losses[:50]):.3f} -> {np.mean(losses[-50:]):.3f}", flush=True)
    if "lcm" in stages:
        t0 = time.time()
        teacher = load_face_models(recipe, ("teacher",))["teacher"]
        lcm, losses = fit_lcm(teacher, recipe)
        _save("lcm", lcm.state_dict(), {"recipe": stage_recipe("lcm", recipe), "losses": losses, "seconds": time.time() - t0})
        print(f"lcm {time.time() - t0:.0f} s, loss {np.mean(losses[:30]):.4f} -> {np.mean(losses[-30:]):.4f}", flush=True)
    for kind in KINDS + LATER_KINDS:
        if kind in stages:
            meta = _make_restorer(kind, recipe)
            losses = meta["losses"]
            print(f"{kind} {meta['seconds']:.0f} s, loss {np.mean(losses[:20]):.4f} -> {np.mean(losses[-20:]):.4f}, "
                  f"validation PSNR gain " + " ".join(f"{s}:{v:+.2f}" for s, v in meta["curve"]), flush=True)


def with_lr(kind: str, lr: float, recipe: dict = RECIPE) -> dict:
    """``recipe`` with restorer ``kind`` trained at peak learning rate ``lr``."""
    r = recipe["restorer"]
    return {**recipe, "restorer": {**r, "lr_of": {**r.get("lr_of", {}), kind: lr}}}


def m4_grid(lrs=M4_GRID, recipe: dict = RECIPE, out: Path | None = None) -> dict:
    """Train the diffusion restorer at every rate of ``lrs`` (one CPU thread), save each run's file under
    ``out`` (default ``_build/faces-grid/`` of the working directory; a run whose file exists is not repeated;
    the rate of the committed file is read from it) and write every run's validation curve to
    ``weights/faces-diffusion-grid.json``; returns ``{lr: curve}``."""
    import json
    import shutil

    torch.set_num_threads(1)
    out = Path(out) if out is not None else Path.cwd() / "_build" / "faces-grid"
    out.mkdir(parents=True, exist_ok=True)
    path = WEIGHTS / GRID_JSON
    log = json.loads(path.read_text()) if path.is_file() else {}
    for lr in lrs:
        rec, f = with_lr("diffusion", lr, recipe), out / f"faces-diffusion-lr{lr:g}.pt"
        committed = WEIGHTS / FILES["diffusion"]
        if not f.is_file() and committed.is_file() and repr(torch.load(committed, weights_only=True)["meta"]["recipe"]) \
                == repr(stage_recipe("diffusion", rec)):
            shutil.copy(committed, f)
        if not f.is_file():
            _make_restorer("diffusion", rec, f)
        meta = torch.load(f, weights_only=True)["meta"]
        log[f"{lr:g}"] = {"lr": lr, "curve": meta["curve"], "late_mean": late_mean(meta["curve"]),
                          "seconds": meta["seconds"],
                          "loss_first_last": [float(np.mean(meta["losses"][:100])), float(np.mean(meta["losses"][-100:]))]}
        path.write_text(json.dumps(dict(sorted(log.items(), key=lambda kv: kv[1]["lr"])), indent=1))
        print(f"diffusion lr {lr:g}: {meta['seconds']:.0f} s, last-quarter validation gain {late_mean(meta['curve']):+.3f}, "
              + " ".join(f"{s}:{v:+.2f}" for s, v in meta["curve"]), flush=True)
    return {v["lr"]: v["curve"] for v in log.values()}


def load_face_models(recipe: dict = RECIPE, which=("teacher", "lcm") + KINDS + LATER_KINDS,
                     device: torch.device | str = "cpu") -> dict:
    """The committed models (float32, eval mode, gradients off) on ``device``: ``teacher``, ``lcm``
    and the restorers of :data:`KINDS` and :data:`LATER_KINDS` named in ``which``; ``meta`` holds each file's training log."""
    out: dict = {"meta": {}}
    for name in ("teacher", "lcm"):
        if name in which or any(k in which for k in KINDS + LATER_KINDS
                                if name == "teacher" or k not in ("diffusion", "regression")):
            ck = _load(name, recipe)
            unet = make_cond_unet(recipe["res"], recipe["channels"], seed=recipe["init_seed"])
            unet.load_state_dict({k: v.float() for k, v in ck["state_dict"].items()})
            out[name], out["meta"][name] = unet.to(device).eval().requires_grad_(False), ck["meta"]
    for kind in KINDS + LATER_KINDS:
        if kind in which:
            ck = _load(kind, recipe)
            model = (regression_unet(recipe["res"], recipe["channels"], seed=recipe["init_seed"]) if kind == "regression"
                     else Restorer(out["teacher"] if kind == "diffusion" else out["lcm"], seed=recipe["init_seed"]))
            model.load_state_dict({k: v.float() for k, v in ck["state_dict"].items()})
            out[kind], out["meta"][kind] = model.to(device).eval().requires_grad_(False), ck["meta"]
    return out


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["m4-grid"]:     # python -m iclr25.diffusion.faces_pretrained m4-grid [lr ...]
        m4_grid(tuple(float(a) for a in sys.argv[2:]) or M4_GRID)
    else:
        make_checkpoints(stages=tuple(sys.argv[1:]) or ("teacher", "lcm") + KINDS + LATER_KINDS)
