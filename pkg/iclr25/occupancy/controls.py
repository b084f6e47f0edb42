"""The committed control experiments of the PreWorld chapter: ten seeds of each control, and both
regimes at 100 % 3D labels (the paper's setting), made by ``python -m iclr25.occupancy.controls``
(one CPU thread, deterministic) because they do not fit in the chapter's budget.

The controls keep their own, older recipe (:data:`CTRL_RECIPE`, :data:`CTRL_FT`): every stage-1
model of theirs is trained here for 800 steps (short of the validation plateau the main models'
2000 steps reach) and fine-tuned with the ENet-weighted cross-entropy (not the official loss of the
main models). Remaking them at the main recipe costs about three CPU-minutes per seed times ten
seeds; until then the chapter reads them as undecided, and says why.

**Controls** (:data:`CTRL`, results in ``weights/preworld-controls.json``). For each seed, six
stage-2 runs with PreWorld's tuned learning rate and the controls' common short budget
(:func:`ctrl_recipe`), each evaluated on the chapter's test set: the main stage-1 model
(``reference``); stage 1 with the aux frames' rays but those whose 2D label is a car or pedestrian
dropped (``masked aux``, :data:`STAGE1`); stage 1 with the current frame's rays only
(``current-frame rays``); stage 1 on the 16 labelled sequences only (``16 pre-training seqs``); and
the main stage-1 model fine-tuned without the waypoint loss, with (``no waypoint loss``) and without
(``no ego state``, zeroed in fine-tuning and at test) the ego state. The stage-1 models that are
not committed (:data:`STAGE1`) are trained here with the committed recipe; their losses and the
sha256 of their weights are recorded. What is stored per run is the confusion matrices on the test
set (current frame, camera-invisible current voxels, each future frame), separately for the
sequences with ego speed 0 and those with speed > 0, and the first fine-tuning losses: the chapter
computes every score from them and re-runs one run live.

**100 % 3D labels** (``weights/preworld-ft100-PreWorld-s0.pt``, fp16): PreWorld of seed 0 fine-tuned
with every pool sequence labelled, by the recipe of the committed 100 %-label 3D-only model
(``preworld-ft-ceiling-s0.pt``): its own tuned learning rate, the grid's step counts validated with
the patience rule, best state kept (:func:`train_pw100`).
"""

from __future__ import annotations

import io
import json
import sys
import time
from pathlib import Path

import torch

from iclr25.common.digest import bytes_sha256

from . import pretrained as pt
from .model import WorldModel
from .train import Recipe, build_data, finetune, predict, pretrain
from .metrics import occ_confusion
from .world import CURRENT, N_CLASSES, make_rig

CTRL = dict(seeds=tuple(range(10)), n_test=64, test_seed=3, threads=1)
"""Control seeds (initial weights, batches, stage-1 seed), test set ``build_data(n_test, test_seed)``
(the chapter's at ``full``)."""
CTRL_RECIPE = {**pt.RECIPE, "steps": 800}
"""The controls' stage-1 recipe: the main recipe with 800 steps (the main models use 2000)."""
CTRL_FT = dict(lr=3e-3, steps=200, occ_loss="enet")
"""The controls' common stage-2 recipe: learning rate, steps (the short budget) and occupancy loss."""
STAGE1 = {**{f"maskaux-s{s}": dict(seed=s, data="main", pool=160, aux=True, mask_movers=True) for s in range(10)},
          **{f"main-s{s}": dict(seed=s, data="main", pool=160, aux=True) for s in range(10)},
          **{f"noaux-s{s}": dict(seed=s, data="main", pool=160, aux=False) for s in range(10)},
          **{f"pool16-s{s}": dict(seed=s, data="main", pool=16, aux=True) for s in range(10)}}
"""Every stage-1 variant of the controls, trained here with :data:`CTRL_RECIPE` (none is committed;
the losses and weight sha256 of those the committed file used are recorded in it)."""
ARMS = ("reference", "masked aux", "current-frame rays", "no waypoint loss", "no ego state", "16 pre-training seqs")
START = {"reference": "main", "masked aux": "maskaux", "current-frame rays": "noaux", "16 pre-training seqs": "pool16",
         "no waypoint loss": "main", "no ego state": "main"}
RESULTS = pt.WEIGHTS / "preworld-controls.json"

LOSS_HEAD = 20


def ctrl_recipe() -> tuple[float, int]:
    """The controls' stage-2 learning rate and steps (:data:`CTRL_FT`)."""
    return CTRL_FT["lr"], CTRL_FT["steps"]


def no_state(d: dict) -> dict:
    """``d`` with the ego state replaced by zeros."""
    return {**d, "state": torch.zeros_like(d["state"])}


def no_wp(d: dict) -> dict:
    """``d`` with the waypoint targets set to zero (no ego-trajectory loss)."""
    return {**d, "traj": torch.zeros_like(d["traj"])}


def state_sha(model: torch.nn.Module) -> str:
    buf = io.BytesIO()
    torch.save({k: v.contiguous() for k, v in model.state_dict().items()}, buf)
    return bytes_sha256(buf.getvalue())


def train_stage1(name: str, stop_after: int | None = None, data: dict | None = None,
                 recipe: dict = CTRL_RECIPE) -> tuple[WorldModel, list[float]]:
    """Stage 1 of the variant ``name`` of :data:`STAGE1` (the controls' recipe)."""
    v = STAGE1[name]
    torch.manual_seed(v["seed"])
    rig = make_rig()
    model = WorldModel(rig)
    d = pt._data(v, recipe) if data is None else data
    rec = Recipe(lr=recipe["lr"], steps=recipe["steps"] if stop_after is None else stop_after, batch=recipe["batch"],
                 rays=recipe["rays"], aux=v["aux"], mask_movers=v.get("mask_movers", False))
    log: list[float] = []
    pretrain(model, d, torch.arange(v["pool"]), rec, rig, v["seed"], torch.device("cpu"), log)
    return model, log


def confusions(model: WorldModel, test: dict, zero_state: bool = False) -> dict:
    """Confusion matrices (lists) of ``model`` on ``test``: ``{group: {"now", "invisible", "f1", ...}}``
    for the groups ``"still"`` (ego speed 0) and ``"moving"`` (speed > 0)."""
    pred, _ = predict(model, no_state(test) if zero_state else test, torch.device("cpu"))
    occ = test["occ"][:, CURRENT:]
    out = {}
    for group, sel in (("still", test["speed"] == 0), ("moving", test["speed"] > 0)):
        h = {"now": occ_confusion(pred[sel, 0], occ[sel, 0], N_CLASSES),
             "invisible": occ_confusion(pred[sel, 0], occ[sel, 0], N_CLASSES, ~test["visible"][sel])}
        for f in range(1, pred.shape[1]):
            h[f"f{f}"] = occ_confusion(pred[sel, f], occ[sel, f], N_CLASSES)
        out[group] = {k: v.long().tolist() for k, v in h.items()}
    return out


def run_arm(arm: str, start: WorldModel, seed: int, data: dict, stop_after: int | None = None
            ) -> tuple[WorldModel, list[float]]:
    """Stage 2 of one control arm from the stage-1 model ``start`` (the controls' recipe)."""
    lr, steps = ctrl_recipe()
    d = no_wp(data) if arm in ("no waypoint loss", "no ego state") else data
    if arm == "no ego state":
        d = no_state(d)
    log: list[float] = []
    finetune(start, d, torch.arange(pt.FT["n_3d"]), Recipe(lr=lr, steps=steps if stop_after is None else stop_after,
                                                          batch=pt.FT["batch"], occ_loss=CTRL_FT["occ_loss"]),
             seed, torch.device("cpu"), log=log)
    return start, log


def stage1_model(arm: str, seed: int, data: dict, record: dict) -> WorldModel:
    name = f"{START[arm]}-s{seed}"
    if name in STAGE1:
        if name not in record:
            t, c = time.time(), time.process_time()
            model, losses = train_stage1(name, data=data)
            record[name] = {"losses": losses, "sha256": state_sha(model), "seconds": time.time() - t,
                            "cpu_seconds": time.process_time() - c,
                            "variant": STAGE1[name], "recipe": dict(CTRL_RECIPE)}
            record[name]["_model"] = model
        return _copy(record[name]["_model"])
    raise KeyError(name)


def _copy(model: WorldModel) -> WorldModel:
    m = WorldModel(make_rig())
    m.load_state_dict(model.state_dict())
    return m


def load_controls() -> dict:
    """The committed control results ``{"ctrl", "recipe", "lr", "steps", "stage1": {name: {...}},
    "runs": {arm: {str(seed): {"hists", "losses", "seconds"}}}}``; refuses a missing or stale file."""
    if not RESULTS.is_file():
        raise FileNotFoundError(f"no committed control results at {RESULTS}: make them with "
                                "`python -m iclr25.occupancy.controls controls`")
    j = json.loads(RESULTS.read_text())
    lr, steps = ctrl_recipe()
    if j["recipe"] != dict(CTRL_RECIPE) or (j["lr"], j["steps"]) != (lr, steps) or j["ctrl"]["n_test"] != CTRL["n_test"]:
        raise RuntimeError(f"{RESULTS} is stale: regenerate it with `python -m iclr25.occupancy.controls controls`")
    return j


def make_controls(seeds: tuple = CTRL["seeds"], out=RESULTS, arms: tuple = ARMS) -> None:
    """Run every control arm for ``seeds`` and merge the results into ``out`` (:data:`RESULTS`;
    parallel runs write their own files, merged by :func:`merge`; ``arms`` a subset of :data:`ARMS`)."""
    torch.set_num_threads(CTRL["threads"])
    torch.set_flush_denormal(True)
    data = pt._data(pt.VARIANTS["main-s0"])
    test = build_data(CTRL["n_test"], CTRL["test_seed"], make_rig())
    lr, steps = ctrl_recipe()
    j = json.loads(out.read_text()) if out.is_file() else {}
    j.update(ctrl={k: v for k, v in CTRL.items() if k != "seeds"}, recipe=dict(CTRL_RECIPE), lr=lr, steps=steps)
    j.setdefault("stage1", {})
    j.setdefault("runs", {a: {} for a in ARMS})
    for s in seeds:
        record: dict = {}
        for arm in arms:
            t, c = time.time(), time.process_time()
            model, log = run_arm(arm, stage1_model(arm, s, data, record), s, data)
            j["runs"][arm][str(s)] = {"hists": confusions(model, test, zero_state=arm == "no ego state"),
                                      "losses": log[:LOSS_HEAD], "seconds": time.time() - t,
                                      "cpu_seconds": time.process_time() - c}
            print(f"seed {s} {arm}: {time.time() - t:.0f} s", flush=True)
        for name, r in record.items():
            j["stage1"][name] = {k: v for k, v in r.items() if k != "_model"}
        out.write_text(json.dumps(j))               # after each seed: a seed is all or nothing


def merge(parts: list) -> None:
    """Merge the result files ``parts`` of parallel :func:`make_controls` runs into :data:`RESULTS`."""
    j = json.loads(RESULTS.read_text()) if RESULTS.is_file() else None
    for p in parts:
        q = json.loads(Path(p).read_text())
        if j is None:
            j = q
            continue
        assert {k: q[k] for k in ("ctrl", "recipe", "lr", "steps")} == {k: j[k] for k in ("ctrl", "recipe", "lr", "steps")}
        j["stage1"].update(q["stage1"])
        for arm, runs in q["runs"].items():
            j["runs"].setdefault(arm, {}).update(runs)
    RESULTS.write_text(json.dumps(j))


# --- 100 % 3D labels ------------------------------------------------------------------------------

PW100 = pt.WEIGHTS / "preworld-ft100-PreWorld-s0.pt"


def train_pw100(seed: int = 0, data: dict | None = None, val: dict | None = None, stop_after: int | None = None
                ) -> tuple[WorldModel, dict, list[float]]:
    """PreWorld with 3D labels on every sequence of the main pool: the committed stage-1 model of
    ``seed`` fine-tuned with PreWorld's tuned learning rate, validated on the grid's step counts
    with the patience rule, best state kept: the same recipe as the 100 %-label 3D-only model
    (:func:`~iclr25.occupancy.pretrained.train_ceiling`, which uses the 3D-only model's tuned rate)."""
    d = pt._data(pt.VARIANTS["main-s0"]) if data is None else data
    lr = pt.chosen("PreWorld", pt.load_tuning())[0]
    model = pt.load_pretrained(f"main-s{seed}")[0]
    out = pt._patient_run(model, d, torch.arange(len(d["occ"])), lr, seed, pt.FT, pt._val() if val is None else val,
                          max(pt.FT["evals"]) if stop_after is None else stop_after, "PreWorld 100 %", keep_best=True)
    return model, out["scores"], out["losses"]


PW100_STEPS = 800
"""The longest budget of the 100 %-label PreWorld run (a quarter of the 3D-only reference's 3200:
what one CPU thread could give it here), validated at the grid's step counts up to it."""


def make_pw100(seed: int = 0) -> None:
    torch.set_num_threads(1)
    torch.set_flush_denormal(True)
    t = time.time()
    model, scores, losses = train_pw100(seed, stop_after=PW100_STEPS)
    meta = {"ft": pt._jsonable(pt.FT), "recipe": dict(pt.RECIPE), "regime": "PreWorld 100 %", "seed": seed,
            "lr": pt.chosen("PreWorld", pt.load_tuning())[0], "steps": max(scores, key=scores.get),
            "scores": {str(k): v for k, v in scores.items()}, "losses": losses, "seconds": time.time() - t,
            "max_steps": PW100_STEPS,
            "start": pt.stage1_sha(f"main-s{seed}")}
    torch.save({"state_dict": {k: v.half() for k, v in model.state_dict().items()}, "meta": meta}, PW100)


def load_pw100(device: torch.device | str = "cpu") -> tuple[WorldModel, dict]:
    """The committed PreWorld model at 100 % 3D labels (seed 0; stored in fp16, loaded as fp32) and its metadata."""
    if not PW100.is_file():
        raise FileNotFoundError(f"no committed model at {PW100}: make it with `python -m iclr25.occupancy.controls pw100`")
    ckpt = torch.load(PW100, map_location="cpu", weights_only=True)
    m = ckpt["meta"]
    if (pt._grid(m["ft"]) != pt._grid(pt.FT) or m["lr"] != pt.chosen("PreWorld", pt.load_tuning())[0]
            or m["start"] != pt.stage1_sha("main-s0") or m["max_steps"] != PW100_STEPS):
        raise RuntimeError(f"{PW100} is stale: regenerate it with `python -m iclr25.occupancy.controls pw100`")
    model = WorldModel(make_rig())
    model.load_state_dict({k: v.float() for k, v in ckpt["state_dict"].items()})
    return model.to(device), m


if __name__ == "__main__":
    what = sys.argv[1]
    rest = [int(a) for a in sys.argv[2:] if a.isdigit()]
    if what == "controls":             # controls SEED... [--out FILE]
        out = Path(sys.argv[sys.argv.index("--out") + 1]) if "--out" in sys.argv else RESULTS
        arms = tuple(sys.argv[sys.argv.index("--arms") + 1].split(",")) if "--arms" in sys.argv else ARMS
        make_controls(tuple(rest) or CTRL["seeds"], out, arms)
    elif what == "merge":
        merge(sys.argv[2:])
    elif what == "pw100":
        make_pw100()
