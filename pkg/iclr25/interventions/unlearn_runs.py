"""The composable-interventions chapter's unlearning setup and its tuning grids, run once and committed.

:func:`unlearning_data` draws what every unlearner sees for one seed: 120 forget sentences (the
toxins' recipes) and a retain set of 120 benign sentences (person facts of the four common
relations, dish recipes) plus 120 hobby sentences of *half* of the persons. The hobby relation is
the one the utility metric reads; a retain set that never shows it leaves it unprotected, so the
retain set covers it, and the utility an unlearner keeps is measured on the other half of the
persons, whose hobbies never appear in any retain text (:func:`heldout_hobby`).

The grids (:data:`GRIDS`: GA over learning rate and steps, 16 + 9 settings; GD over learning rate, steps and retain
weight, 24 + 18 + 5 + 1; RMU over the steered layer, the steering coefficient and the learning rate) take a few CPU
minutes at the tuning seed, more than the chapter's budget, so ``python -m
iclr25.interventions.unlearn_runs`` runs them and writes
``iclr25/interventions/results/unlearn-tuning.json`` (recipe, seed, torch version, every setting's forget accuracy
and held-out hobby accuracy, sha256 of the results); the chapter loads it, checks the digest, and
re-runs the chosen RMU setting live to show it matches (:func:`tune_run` is the one function both use).
"""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from iclr25.common.digest import json_sha256
from iclr25.interventions.compose import compose, Intervention
from iclr25.interventions.metrics import forget_accuracy
from iclr25.interventions.unlearning import block_output, gradient_ascent, gradient_difference, rmu, text_batch
from iclr25.lm.evaluate import next_token_accuracy
from iclr25.lm.probes import fact_queries, mc_hazard_items
from iclr25.lm.splits import forget_texts, retain_texts
from iclr25.lm.world import DECLARATIVE_TEMPLATE, EDIT_TEMPLATE, RARE_RELATIONS, fact_sentence

RUNS_FILE = Path(__file__).resolve().parent / "results" / "unlearn-tuning.json"
SCRIPT = "python -m iclr25.interventions.unlearn_runs"
TUNE_SEED = 1000                 # the chapter's tune_seed at seed 0; evaluation seeds are 0, 1, 2, ...
FORGET_TARGET = 0.35             # forget accuracy (4-way multiple choice, chance 0.25) to reach
N_FORGET, N_RETAIN, N_HOBBY = 120, 120, 120
GRIDS = {
    # a coarse product, then a finer product around where the forget accuracy first reaches the target
    "GA": [dict(lr=lr, steps=st) for lr, st in itertools.product([3e-4, 1e-3, 3e-3, 1e-2], [10, 30, 60, 120])]
    + [dict(lr=lr, steps=st) for lr, st in itertools.product([5e-4, 1e-3, 2e-3], [40, 50, 80])
       if (lr, st) != (1e-3, 60)],
    "GD": [dict(lr=lr, steps=st, rw=rw) for lr, st, rw in itertools.product([1e-3, 3e-3, 1e-2, 3e-2], [20, 60], [1.0, 3.0, 10.0])]
    + [dict(lr=lr, steps=st, rw=1.0) for lr, st in itertools.product([1e-3, 1.5e-3, 2e-3, 3e-3], [40, 60, 80, 100, 120])
       if st != 60 or lr not in (1e-3, 3e-3)]
    + [dict(lr=lr, steps=st, rw=1.0) for lr, st in [(5e-4, 120), (5e-4, 160), (7e-4, 120), (7e-4, 160), (1e-3, 160)]]
    + [dict(lr=1e-3, steps=120, rw=0.3)],
    "RMU": [dict(layer=l, c=c, lr=lr, alpha=10.0, steps=60)
            for l, c, lr in itertools.product([0, 1], [100.0, 200.0, 400.0, 800.0], [3e-2, 6e-2, 1.2e-1])],
}
KNOBS = {"GA": ("lr", "steps"), "GD": ("lr", "steps", "rw"), "RMU": ("layer", "c", "lr")}
# RMU with its update bounded like the edits': small learning rates (the paper's is 5e-5 over a few hundred steps;
# with Adam each step moves a weight by about lr, so lr x steps sets the update's size), and a selection that accepts
# only settings whose update is at most REL_CAP times the matrix (stated before the run: the editors' cap)
CAPPED_KEY = "RMU capped"
REL_CAP = 0.7                    # max over changed W of ||dW||_F / ||W||_F
CAPPED_GRID = ([dict(layer=l, c=400.0, lr=lr, alpha=10.0, steps=st)
                for l, lr, st in itertools.product([0, 1], [3e-4, 1e-3, 2e-3, 3e-3, 6e-3], [30, 60, 120])]
               + [dict(layer=1, c=400.0, lr=lr, alpha=a, steps=60) for lr, a in itertools.product([1e-3, 2e-3, 3e-3], [3.0, 30.0])]
               # refined where the forget accuracy approaches the target under the cap: smaller steps, more of them
               + [dict(layer=1, c=400.0, lr=lr, alpha=10.0, steps=st) for lr, st in [(5e-4, 60), (5e-4, 120), (5e-4, 240), (3e-4, 240)]]
               # the best within the cap sat at the smallest lr and the most steps: one step further, and a larger c there
               + [dict(layer=1, c=400.0, lr=2e-4, alpha=10.0, steps=360), dict(layer=1, c=400.0, lr=1.5e-4, alpha=10.0, steps=480)]
               + [dict(layer=1, c=800.0, lr=lr, alpha=10.0, steps=st) for lr, st in [(3e-4, 240), (5e-4, 120)]]
               # RMU on W_in and W_out of the blocks up to the steered layer, every Adam step projected back into the
               # cap's ball (``max_rel``): steered layer x learning rate x steps at c = 400, then c around the middle
               + [dict(layer=l, c=400.0, lr=lr, alpha=10.0, steps=st, weights="mlp", max_rel=REL_CAP)
                  for l, lr, st in itertools.product([0, 1], [1e-3, 2e-3, 4e-3], [60, 120, 240])]
               + [dict(layer=1, c=c, lr=2e-3, alpha=10.0, steps=120, weights="mlp", max_rel=REL_CAP) for c in (200.0, 800.0)]
               # the best sat at the largest learning rate and the most steps: one step beyond each
               + [dict(layer=1, c=400.0, lr=lr, alpha=10.0, steps=st, weights="mlp", max_rel=REL_CAP)
                  for lr, st in [(8e-3, 240), (4e-3, 480)]])
KNOBS[CAPPED_KEY] = ("layer", "c", "lr", "steps", "alpha", "weights")


def unlearning_data(world, s: int) -> SimpleNamespace:
    """Seed ``s``'s forget batch ``F``, retain batch ``R`` (benign facts and recipes plus the hobby
    facts of ``retain_persons``), ``heldout_persons`` (the other half) and the hazard items."""
    rng = np.random.default_rng([s, 11])
    ft, rt = forget_texts(world), retain_texts(world)
    persons = list(world.persons)
    perm = rng.permutation(len(persons))
    half = len(persons) // 2
    keep = [persons[i] for i in sorted(perm[:half])]
    held = [persons[i] for i in sorted(perm[half:])]
    hob = [fact_sentence(p, r, t, world.fact(p, r)) for p in keep for r in RARE_RELATIONS
           for t in (EDIT_TEMPLATE, DECLARATIVE_TEMPLATE)]
    F = text_batch(world.vocab, [ft[i] for i in rng.choice(len(ft), N_FORGET, replace=False)])
    R = text_batch(world.vocab, [rt[i] for i in rng.choice(len(rt), N_RETAIN, replace=False)]
                   + [hob[i] for i in rng.choice(len(hob), N_HOBBY, replace=False)])
    return SimpleNamespace(F=F, R=R, retain_persons=keep, heldout_persons=held,
                           hazard=mc_hazard_items(world, np.random.default_rng([s, 4])))


def heldout_hobby(model, world, persons) -> float:
    """Hobby-fact accuracy (arg-max over the vocabulary) on ``persons``."""
    return next_token_accuracy(model, world.vocab, fact_queries(world, persons, RARE_RELATIONS, EDIT_TEMPLATE))


def make_unlearner(name: str, hp: dict, data: SimpleNamespace, s: int) -> Intervention:
    """GA, GD or RMU with settings ``hp`` on seed ``s``'s data, as an :class:`Intervention`."""
    F, R = data.F, data.R
    if name == "GA":
        fn = lambda m: gradient_ascent(m, F, steps=hp["steps"], lr=hp["lr"])  # noqa: E731
    elif name == "GD":
        fn = lambda m: gradient_difference(m, F, R, steps=hp["steps"], lr=hp["lr"], retain_weight=hp["rw"])  # noqa: E731
    elif name == "RMU":
        fn = lambda m: rmu(m, F, R, layer=hp["layer"], coeff=hp["c"], alpha=hp["alpha"],  # noqa: E731
                           steps=hp["steps"], lr=hp["lr"], seed=s, max_rel=hp.get("max_rel"),
                           weights=hp.get("weights", "out"))
    else:
        raise ValueError(f"unknown unlearner {name!r}")
    return Intervention(name, "unlearn", fn)


def tune_run(base, world, name: str, hp: dict, s: int = TUNE_SEED) -> dict:
    """One setting on seed ``s``: forget accuracy and held-out hobby accuracy (also the base's)."""
    data = unlearning_data(world, s)
    m = compose(base, [make_unlearner(name, hp, data, s)])
    out = dict(forget=forget_accuracy(m, world, data.hazard), hobby=heldout_hobby(m, world, data.heldout_persons))
    if name == "RMU":
        out["rel"] = update_ratio(base, m)
    return out


def update_ratio(base, model) -> float:
    """The largest ``||W' - W||_F / ||W||_F`` over the weight matrices that differ (0 if none)."""
    with torch.no_grad():
        rel = [float((p1 - p0).norm() / p0.norm()) for p0, p1 in zip(base.parameters(), model.parameters())
               if p0.dim() == 2 and not torch.equal(p0, p1)]
    return max(rel, default=0.0)


def choose(rows: list[dict], target: float = FORGET_TARGET, tol: float = 1e-6, cap: float | None = None) -> dict:
    """The selection rule: among the settings that reach ``forget <= target``, the highest held-out
    hobby accuracy (then the lower forget accuracy); if none does, the lowest forget accuracy. With a
    ``cap``, only the settings whose update ratio ``rel`` is at most ``cap`` are considered."""
    if cap is not None:
        rows = [r for r in rows if r["rel"] <= cap + tol]
    ok = [r for r in rows if r["forget"] <= target + tol]
    if ok:
        return max(ok, key=lambda r: (r["hobby"], -r["forget"]))
    return min(rows, key=lambda r: (r["forget"], -r["hobby"]))


def interior(name: str, hp: dict) -> dict[str, str]:
    """Where the chosen value of each knob sits along its own axis *at the chosen point* (the grid's settings
    that agree with ``hp`` on every other knob): "interior", "low edge" or "high edge" (with how many values
    that axis has there), or "N values tried" where the axis has fewer than three there (with the number of
    values the whole grid tries, if larger). For the capped RMU grid, among the settings that change the
    same weights as ``hp``."""
    out = {}
    grid = CAPPED_GRID if name == CAPPED_KEY else GRIDS[name]
    if name == CAPPED_KEY:     # the settings of the same kind (which weights RMU changes) as the chosen one
        grid = [g for g in grid if g.get("weights", "out") == hp.get("weights", "out")]
    for k in KNOBS[name]:
        axis = [g for g in grid if all(g.get(j, "out") == hp.get(j, "out") for j in KNOBS[name] if j != k)]
        vals = sorted({g.get(k, "out") for g in axis})
        n_all = len({g.get(k, "out") for g in grid})
        if len(vals) < 3:
            out[k] = (f"{len(vals)} value{'s' if len(vals) != 1 else ''} tried"
                      + (f" here ({n_all} in the grid)" if n_all > len(vals) else ""))
        else:
            v = hp.get(k, "out")
            out[k] = ("low edge" if v == vals[0] else "high edge" if v == vals[-1] else "interior") + f" of {len(vals)}"
    return out


PAIRS_FILE = Path(__file__).resolve().parent / "results" / "unlearn-pairs.json"
PAIR_SEEDS = 4                   # evaluation seeds 0 .. PAIR_SEEDS - 1 (unlearning x compression and editing x unlearning)
EDIT_PAIR_SEEDS = 12             # editing x unlearning (MEMIT x RMU) alone runs on seeds PAIR_SEEDS .. EDIT_PAIR_SEEDS - 1 too
PAIR_UNLEARNERS = ("RMU",)       # GA and GD fail their competence rows on the evaluation seeds: no compositions
U_COMPS = ("wanda", "rtn")
STAR = {"wanda": 0.5, "rtn": 3}  # the chapter's matched strengths (the chapter checks them)


@torch.no_grad()
def forget_ratio(before, unlearned, final, F, layer: int) -> float:
    """``||h(final) - h(unlearned)||_F / ||h(unlearned) - h(before)||_F``, ``h`` the residual stream after block
    ``layer`` (RMU's steered layer) on the real tokens of the forget batch ``F``: what the last compression
    changes where the unlearner acts, against what the unlearner changed there (the editing rows' ratio at
    the keys, for an unlearner)."""
    keep = F.mask.bool()
    h0, hu, hf = (block_output(m, F.ids.to(next(m.parameters()).device), layer)[keep].double()
                  for m in (before, unlearned, final))
    return float((hf - hu).norm() / (hu - h0).norm().clamp_min(1e-12))


def seed_pairs(base, world, name: str, hp: dict, s: int, star: dict, memit_hp: dict, alone=None,
               comps: tuple[str, ...] = U_COMPS, edit: bool = True) -> list[dict]:
    """Seed ``s``'s compositions of unlearner ``name`` (settings ``hp``): unlearn → compress against
    compress → unlearn → compress (forget accuracy) for each of ``comps`` at ``star``, and (``edit``)
    MEMIT → unlearn against unlearn → MEMIT (edit success). Each forget row also carries the unlearner
    alone's held-out hobby accuracy and the unedited model's (``hobby``, ``base_hobby``) and, for RMU,
    :func:`forget_ratio` at the steered layer in each order (``ratio_first``, ``ratio_second``).
    ``alone``: the unlearned model, if at hand."""
    from iclr25.interventions import sweep_runs
    from iclr25.interventions.compose import compressor

    device = next(base.parameters()).device
    d = unlearning_data(world, s)
    U = make_unlearner(name, hp, d, s)
    ua = alone if alone is not None else compose(base, [U])
    ids, mask = sweep_runs.calibration(world, s, device)
    fa = forget_accuracy(ua, world, d.hazard)
    hob, hob0 = heldout_hobby(ua, world, d.heldout_persons), heldout_hobby(base, world, d.heldout_persons)
    rows = []
    for c in comps:
        C = compressor(c, star[c], ids, calib_mask=ids != world.vocab.pad_id)
        cb = compose(base, [C])
        cu = compose(cb, [U])
        a, b = compose(ua, [C]), compose(cu, [C])                      # b: compose(base, [C, U])
        ratios = (dict(ratio_first=forget_ratio(base, ua, a, d.F, hp["layer"]),
                       ratio_second=forget_ratio(cb, cu, b, d.F, hp["layer"])) if name == "RMU" else {})
        rows.append(dict(A=name, B=c, seed=s, metric="forget", alone=fa, hobby=hob, base_hobby=hob0,
                         first=forget_accuracy(a, world, d.hazard), second=forget_accuracy(b, world, d.hazard), **ratios))
    if edit:
        rows.append(_edit_row(base, world, name, U, ua, s, ids, mask, memit_hp))
    return [{k: (float(v) if isinstance(v, float) else v) for k, v in r.items()} for r in rows]


def _edit_row(base, world, name: str, U, ua, s: int, ids, mask, memit_hp: dict) -> dict:
    """MEMIT → unlearn against unlearn → MEMIT on seed ``s`` (edit success; ``ua``: the unlearned model)."""
    from iclr25.interventions import sweep_runs
    from iclr25.interventions.metrics import edit_metrics
    from iclr25.lm import edit_split

    split = edit_split(world, sweep_runs.N_EDITS, s)
    E = sweep_runs.editor("MEMIT", world.vocab, split, ids, mask, memit_hp)
    eu, ue = compose(base, [E, U]), compose(ua, [E])
    return dict(A="MEMIT", B=name, seed=s, metric="edit",
                alone=edit_metrics(compose(base, [E]), base, world, split)["success"],
                first=edit_metrics(eu, base, world, split)["success"],
                second=edit_metrics(ue, base, world, split)["success"])


def meets_targets(row: dict, base_hobby: float, tol: float = 1e-6) -> bool:
    """Both targets at the tuning seed: forget accuracy at most :data:`FORGET_TARGET` and at most 0.1
    of the held-out hobby accuracy lost."""
    return bool(row["forget"] <= FORGET_TARGET + tol and base_hobby - row["hobby"] <= 0.1 + tol)


def tuned_ok(runs: dict, name: str, tol: float = 1e-6) -> bool:
    """Whether ``name``'s chosen setting (from :func:`choices`) meets both targets at the tuning seed."""
    capped = load_capped() if name == "RMU" and CAPPED_FILE.exists() else None
    return meets_targets(choices(runs, capped)[name], runs["results"]["base"]["hobby"], tol)


def choices(runs: dict, capped: dict | None = None) -> dict[str, dict]:
    """The setting each unlearner is composed with: the selection rule on its grid; for RMU, the
    capped grid's choice (update at most :data:`REL_CAP` times the matrix) whenever that meets both
    targets, else the uncapped grid's."""
    out = {name: choose(rows) for name, rows in runs["results"].items() if name != "base"}
    if capped is not None:
        best = choose(capped["rows"], cap=capped["recipe"]["rel_cap"])
        if meets_targets(best, runs["results"]["base"]["hobby"]):
            out["RMU"] = best
    return out


def load_pairs() -> dict:
    """The committed unlearning compositions, digest checked."""
    runs = json.loads(PAIRS_FILE.read_text())
    if json_sha256(runs["rows"]) != runs["rows_sha256"]:
        raise ValueError(f"{PAIRS_FILE.name}: rows do not match their sha256; re-run `{SCRIPT} --pairs`")
    return runs


def main_pairs(n_seeds: int = PAIR_SEEDS, n_edit_seeds: int = EDIT_PAIR_SEEDS) -> None:
    """The compositions of each of :data:`PAIR_UNLEARNERS` whose chosen setting meets its targets at the
    tuning seed, on seeds ``0 .. n_seeds - 1``, and its editing composition alone on seeds ``n_seeds ..
    n_edit_seeds - 1``, written to :data:`PAIRS_FILE`. A row already in the file for the same settings is
    taken from it (the runs are deterministic)."""
    from iclr25.common import start
    from iclr25.interventions import sweep_runs
    from iclr25.lm import load_world_lm

    device = start("full", 0, threads=1)
    base, world = load_world_lm("base", device=device)
    runs, capped = load_runs(), load_capped()
    chosen = choices(runs, capped)
    names = [u for u in PAIR_UNLEARNERS if meets_targets(chosen[u], runs["results"]["base"]["hobby"])]
    hps = {u: chosen[u]["hp"] for u in names}
    memit_hp = sweep_runs.RECIPE["edit_choice"]["MEMIT"]
    old = load_pairs() if PAIRS_FILE.exists() else dict(rows=[], recipe={})
    same = old["recipe"].get("star") == STAR and old["recipe"].get("memit") == memit_hp
    t0 = time.process_time()
    rows, reused = [], False
    for u in names:
        for s in range(max(n_seeds, n_edit_seeds)):
            # runs are deterministic: a row already committed for the same unlearner setting is taken from the file
            prev = [r for r in old["rows"] if r["seed"] == s and u in (r["A"], r["B"])] \
                if same and old["recipe"]["unlearners"].get(u) == hps[u] else []
            p_edit = [r for r in prev if r["metric"] == "edit"]
            p_forget = [r for r in prev if r["metric"] == "forget" and "hobby" in r and (u != "RMU" or "ratio_first" in r)]
            need_forget = s < n_seeds and len(p_forget) < len(U_COMPS)
            need_edit = s < n_edit_seeds and not p_edit
            new = seed_pairs(base, world, u, hps[u], s, STAR, memit_hp, comps=U_COMPS if need_forget else (),
                             edit=need_edit) if need_forget or need_edit else []
            keep = [r for r in new if r["metric"] == "forget"] or (p_forget if s < n_seeds else [])
            keep += [r for r in new if r["metric"] == "edit"] or (p_edit if s < n_edit_seeds else [])
            reused = reused or len(keep) > len(new)
            rows += keep
            print(f"{u} seed {s}: {len(new)} rows run, {len(keep) - len(new)} from the file "
                  f"({time.process_time() - t0:.0f} cpu s)", flush=True)
    out = {"recipe": {"unlearners": hps, "seeds": list(range(n_seeds)), "edit_seeds": list(range(n_edit_seeds)),
                      "star": STAR, "memit": memit_hp,
                      "compressors": list(U_COMPS), "grid_sha256": runs["results_sha256"],
                      "capped_sha256": capped["rows_sha256"], "threads": 1,
                      "torch": torch.__version__, "script": SCRIPT + " --pairs",
                      "cpu_s": round(time.process_time() - t0 + (old["recipe"].get("cpu_s", 0.0) if reused else 0.0), 1)},
           "rows": rows, "rows_sha256": json_sha256(rows)}
    PAIRS_FILE.write_text(json.dumps(out, indent=0, sort_keys=True))
    print(f"wrote {PAIRS_FILE} ({PAIRS_FILE.stat().st_size / 1e3:.1f} kB)")


def load_runs() -> dict:
    """The committed tuning results, digest checked."""
    runs = json.loads(RUNS_FILE.read_text())
    if json_sha256(runs["results"]) != runs["results_sha256"]:
        raise ValueError(f"{RUNS_FILE.name}: results do not match their sha256; re-run `{SCRIPT}`")
    return runs


def main(fresh: bool = False) -> None:
    """Run every grid setting (``fresh=False``: settings already in the committed file, identical
    and deterministic, are taken from it, so a grown grid runs only its new settings)."""
    from iclr25.common import start
    from iclr25.lm import load_world_lm

    device = start("full", 0, threads=1)
    base, world = load_world_lm("base", device=device)
    data = unlearning_data(world, TUNE_SEED)
    results = {"base": dict(forget=forget_accuracy(base, world, data.hazard),
                            hobby=heldout_hobby(base, world, data.heldout_persons))}
    old = {} if fresh or not RUNS_FILE.exists() else json.loads(RUNS_FILE.read_text())["results"]
    done = {(k, json.dumps(r["hp"], sort_keys=True)): r for k, rows in old.items() if k != "base" for r in rows}
    t0 = time.process_time()
    for name, grid in GRIDS.items():
        rows = []
        for hp in grid:
            prev = done.get((name, json.dumps(hp, sort_keys=True)))
            r = dict(forget=prev["forget"], hobby=prev["hobby"]) if prev else tune_run(base, world, name, hp)
            rows.append(dict(hp=hp, **r))
            print(f"{name} {hp}: forget {r['forget']:.2f}, held-out hobby {r['hobby']:.3f}", flush=True)
        results[name] = rows
    out = {"recipe": {"tune_seed": TUNE_SEED, "grids": GRIDS, "forget_target": FORGET_TARGET,
                      "n_forget": N_FORGET, "n_retain": N_RETAIN, "n_hobby": N_HOBBY,
                      "model": "load_world_lm('base')", "threads": 1, "optimizer": "Adam, full batch",
                      "torch": torch.__version__, "script": SCRIPT,
                      "cpu_s_last_run": round(time.process_time() - t0, 1)},
           "results": results, "results_sha256": json_sha256(results)}
    RUNS_FILE.write_text(json.dumps(out, indent=0, sort_keys=True))
    print(f"wrote {RUNS_FILE} ({RUNS_FILE.stat().st_size / 1e3:.1f} kB)")


CAPPED_FILE = Path(__file__).resolve().parent / "results" / "unlearn-rmu-capped.json"


def load_capped() -> dict:
    """The committed capped-RMU grid, digest checked."""
    runs = json.loads(CAPPED_FILE.read_text())
    if json_sha256(runs["rows"]) != runs["rows_sha256"]:
        raise ValueError(f"{CAPPED_FILE.name}: rows do not match their sha256; re-run `{SCRIPT} --capped`")
    return runs


def main_capped() -> None:
    """Run :data:`CAPPED_GRID` at the tuning seed (settings already in the committed file are taken
    from it: runs are deterministic) and write :data:`CAPPED_FILE` with each setting's update ratio."""
    from iclr25.common import start
    from iclr25.lm import load_world_lm

    device = start("full", 0, threads=1)
    base, world = load_world_lm("base", device=device)
    old = load_capped() if CAPPED_FILE.exists() else dict(rows=[], recipe={})
    done = {json.dumps(r["hp"], sort_keys=True): r for r in old["rows"]}
    t0 = time.process_time()
    rows = []
    for hp in CAPPED_GRID:
        prev = done.get(json.dumps(hp, sort_keys=True))
        r = {k: v for k, v in prev.items() if k != "hp"} if prev else tune_run(base, world, "RMU", hp)
        rows.append(dict(hp=hp, **r))
        print(f"RMU {hp}: forget {r['forget']:.2f}, held-out hobby {r['hobby']:.3f}, update {r['rel']:.2f}x", flush=True)
    cpu = round(time.process_time() - t0, 1)
    out = {"recipe": {"tune_seed": TUNE_SEED, "grid": CAPPED_GRID, "rel_cap": REL_CAP, "forget_target": FORGET_TARGET,
                      "selection": "forget <= target and rel <= rel_cap, then the highest held-out hobby",
                      "threads": 1, "torch": torch.__version__, "script": SCRIPT + " --capped",
                      "cpu_s_last_run": cpu, "cpu_s_total": round(old["recipe"].get("cpu_s_total", 0.0) + cpu, 1)},
           "rows": rows, "rows_sha256": json_sha256(rows)}
    CAPPED_FILE.write_text(json.dumps(out, indent=0, sort_keys=True))
    print(f"wrote {CAPPED_FILE} ({CAPPED_FILE.stat().st_size / 1e3:.1f} kB)")


ALONE_FILE = Path(__file__).resolve().parent / "results" / "unlearn-alone.json"
ALONE_UNLEARNERS = ("GA", "GD")  # RMU alone comes with its committed compositions (PAIRS_FILE)
ALONE_SEEDS = 2                  # evaluation seeds 0, 1; one for a setting that already misses a target at tuning


def alone_row(base, world, name: str, hp: dict, s: int) -> dict:
    """Unlearner ``name`` alone on evaluation seed ``s``: forget accuracy, held-out hobby accuracy, the
    retain persons' hobby accuracy, and the unedited model's two hobby accuracies."""
    d = unlearning_data(world, s)
    m = compose(base, [make_unlearner(name, hp, d, s)])
    return dict(name=name, seed=s, forget=forget_accuracy(m, world, d.hazard),
                hobby=heldout_hobby(m, world, d.heldout_persons), kept=heldout_hobby(m, world, d.retain_persons),
                base_hobby=heldout_hobby(base, world, d.heldout_persons), base_kept=heldout_hobby(base, world, d.retain_persons))


def load_alone() -> dict:
    """The committed unlearners-alone rows, digest checked."""
    runs = json.loads(ALONE_FILE.read_text())
    if json_sha256(runs["rows"]) != runs["rows_sha256"]:
        raise ValueError(f"{ALONE_FILE.name}: rows do not match their sha256; re-run `{SCRIPT} --alone`")
    return runs


def main_alone() -> None:
    """Each of :data:`ALONE_UNLEARNERS` alone at its chosen setting on the evaluation seeds (two, or one
    when the setting misses a target at the tuning seed), written to :data:`ALONE_FILE`."""
    from iclr25.common import start
    from iclr25.lm import load_world_lm

    device = start("full", 0, threads=1)
    base, world = load_world_lm("base", device=device)
    runs, capped = load_runs(), load_capped()
    chosen = choices(runs, capped)
    t0 = time.process_time()
    rows, seeds = [], {}
    for u in ALONE_UNLEARNERS:
        seeds[u] = list(range(ALONE_SEEDS if meets_targets(chosen[u], runs["results"]["base"]["hobby"]) else 1))
        for s in seeds[u]:
            rows.append({k: (float(v) if isinstance(v, float) else v) for k, v in alone_row(base, world, u, chosen[u]["hp"], s).items()})
            print(f"{u} seed {s} done ({time.process_time() - t0:.0f} cpu s)", flush=True)
    out = {"recipe": {"unlearners": {u: chosen[u]["hp"] for u in ALONE_UNLEARNERS}, "seeds": seeds,
                      "grid_sha256": runs["results_sha256"], "threads": 1, "torch": torch.__version__,
                      "script": SCRIPT + " --alone", "cpu_s": round(time.process_time() - t0, 1)},
           "rows": rows, "rows_sha256": json_sha256(rows)}
    ALONE_FILE.write_text(json.dumps(out, indent=0, sort_keys=True))
    print(f"wrote {ALONE_FILE} ({ALONE_FILE.stat().st_size / 1e3:.1f} kB)")


if __name__ == "__main__":
    import sys
    if "--alone" in sys.argv:
        main_alone()
    elif "--pairs" in sys.argv:       # --pairs [n_seeds [n_edit_seeds]]
        nums = [int(a) for a in sys.argv[sys.argv.index("--pairs") + 1:] if a.isdigit()]
        main_pairs(*nums)
    elif "--capped" in sys.argv:
        main_capped()
    else:
        main(fresh="--fresh" in sys.argv)
