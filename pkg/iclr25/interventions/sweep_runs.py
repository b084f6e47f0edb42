"""The composable-interventions chapter's editing × compression sweep: one seed's rows, and a
committed cache of many seeds.

One *seed* is one set of 10 counterfactual edits, the calibration documents and the multiple-choice
distractors. :func:`seed_rows` runs, for that seed, every editor alone, then each editor with every
compressor and strength in both orders (edit → compress; compress → edit → compress), the two
controls (the edited persons' original facts under the same compression of the unedited model, and
pre-trained hobby facts matched to each edit's margin), and the unedited model compressed. The
paper rows need many paired seeds (10 binary edits per seed), more than the chapter's time budget
holds, so ``python -m iclr25.interventions.sweep_runs`` runs :data:`N_SEEDS` seeds at the settings
in :data:`RECIPE` (the chapter's tuned editors and matched strengths) and writes
``iclr25/interventions/results/edit-sweep.json`` (recipe, seeds, torch version, cpu seconds, every
row, sha256 of the rows). The chapter re-tunes live, checks that its settings equal the recipe,
re-runs the first seeds live with this same function and checks that they match, then uses all
cached seeds.
"""

from __future__ import annotations

import inspect
import json
import time
from pathlib import Path

import numpy as np
import torch

from iclr25.common.digest import bytes_sha256, json_sha256, strip_source
from iclr25.interventions.compose import Intervention, compose, compressor, prune_model_, quantize_model_
from iclr25.interventions.editing import ft_edit, memit_edit, rome_edit, target_deltas
from iclr25.interventions.metrics import argmax_tokens, edit_metrics, locality_examples, utility
from iclr25.lm import (edit_examples, edit_split, fact_queries, mc_general_items, mc_hazard_items, mlp_out,
                       next_token_accuracy, next_token_margin, world_batch)
from iclr25.lm.world import EDIT_TEMPLATE, RARE_RELATIONS

RUNS_FILE = Path(__file__).resolve().parent / "results" / "edit-sweep.json"
SCRIPT = "python -m iclr25.interventions.sweep_runs"
N_EDITS = 10
N_SEEDS = 20
COMPRESSORS = ("magnitude", "wanda", "rtn")
# the settings the chapter tunes at `full` (seed 0, tuning seed 1000); the chapter checks them
RECIPE = {
    "editors": ["MEMIT", "FT"],
    "edit_choice": {"MEMIT": {"layer": 0, "lam": 500.0, "eps": 0.1, "clamp": 2.0},
                    "FT": {"layer": 0, "box": 0.03, "steps": 160}},
    "sweep": {"magnitude": [0.3, 0.5, 0.7], "wanda": [0.3, 0.5, 0.7], "rtn": [8, 4, 3, 2]},
}


def calibration(world, s: int, device):
    """Calibration documents (ids, loss mask) for the key statistics: 64 pre-training documents."""
    ids, mask = world_batch(world, np.random.default_rng([s, 7]), 64)
    return ids.to(device), mask.to(device)


def probes(world, s: int):
    """Multiple-choice items: the MMLU analog (persons, recipes) and the WMDP analog (toxins)."""
    return (mc_general_items(world, np.random.default_rng([s, 3])),
            mc_hazard_items(world, np.random.default_rng([s, 4])))


def editor(name: str, vocab, split, ids, mask, hp: dict) -> Intervention:
    """An editing :class:`Intervention` for one edit set (``ROME``, ``MEMIT``, ``FT``, ``FT masked`` or ``FT matched``)."""
    if name == "ROME":
        fn = lambda m: rome_edit(m, vocab, split.edits, hp["layer"], ids, mask, eps=hp["eps"], clamp_factor=hp["clamp"])  # noqa: E731
    elif name == "MEMIT":     # hp["layers"] (optional): the edit spread over several blocks, one MEMIT step each
        v_kw = {"steps": hp["steps"]} if "steps" in hp else {}

        def fn(m):
            for layer in hp.get("layers", [hp["layer"]]):
                memit_edit(m, vocab, split.edits, layer, ids, mask, lam=hp["lam"], eps=hp["eps"], clamp_factor=hp["clamp"],
                           **v_kw)
    elif name in ("FT", "FT masked", "FT matched"):
        # "FT masked": mask-aware FT, zero weights stay zero (a control); "FT matched": the same with the box its
        # recipe gives (the control recipe widens it to dense FT's Frobenius budget on the surviving weights)
        fn = lambda m: ft_edit(m, vocab, split.edits, hp["layer"], lr=5e-3, max_change=hp["box"], steps=hp["steps"],  # noqa: E731
                               keep_zeros=name != "FT")
    else:
        raise ValueError(f"unknown editor {name!r}")
    return Intervention(name, "edit", fn)


def edit_size(m, base, layer: int) -> float:
    """``||Delta||_F / ||W||_F`` of block ``layer``'s ``W_out`` against the base model."""
    W = mlp_out(base, layer).weight.detach()
    return float((mlp_out(m, layer).weight.detach() - W).norm() / W.norm())


def margin_pool(base, world):
    """The pre-trained hobby facts and their margins in the unedited model (the control's pool)."""
    pool = fact_queries(world, None, RARE_RELATIONS, EDIT_TEMPLATE)
    return pool, next_token_margin(base, world.vocab, pool).cpu().numpy()


def margin_matched(pool, pool_margin, edit_margins, exclude):
    """Pool facts the base model knows (margin > 0), one per edit, nearest in margin (without
    replacement), skipping the persons in ``exclude``; also the median absolute margin gap of the match."""
    free = [i for i in np.argsort(pool_margin) if pool_margin[i] > 0 and pool[i].meta["subject"] not in exclude]
    out = []
    for mrg in edit_margins:
        j = min(free, key=lambda i: abs(pool_margin[i] - mrg))
        out.append(j)
        free.remove(j)
    return [pool[j] for j in out], float(np.median(np.abs(pool_margin[out] - np.asarray(edit_margins))))


def seed_rows(base, world, s: int, editors, edit_choice: dict, sweep: dict, pool=None, pool_margin=None) -> list[dict]:
    """Every row of seed ``s``: dicts with ``seed, editor, comp, strength, order`` and the metrics
    (``order`` in uncompressed, compress only, alone, edit first, compress first, margin control)."""
    vocab = world.vocab
    device = next(base.parameters()).device
    if pool is None:
        pool, pool_margin = margin_pool(base, world)
    split = edit_split(world, N_EDITS, s)
    ids, mask = calibration(world, s, device)
    gen, _ = probes(world, s)
    ref = argmax_tokens(base, world, locality_examples(split))     # the unedited model's answers, once
    old_facts = edit_examples(split.edits, 0, new=False)           # control: the same persons' true cities
    ev = lambda m: {**edit_metrics(m, ref, world, split), **utility(m, world, gen)}  # noqa: E731
    real = ids != vocab.pad_id                                     # Wanda's calibration mask
    comps = {(c, st): compressor(c, st, ids, calib_mask=real) for c in COMPRESSORS for st in sweep[c]}
    only = {k: compose(base, [C]) for k, C in comps.items()}
    rows = [dict(seed=s, editor="none", comp="none", strength=0, order="uncompressed",
                 orig_fact=next_token_accuracy(base, vocab, old_facts))]
    for (c, st), mc_ in only.items():
        rows.append(dict(seed=s, editor="none", comp=c, strength=st, order="compress only",
                         orig_fact=next_token_accuracy(mc_, vocab, old_facts), **ev(mc_)))
    for e in editors:
        E = editor(e, vocab, split, ids, mask, edit_choice[e])
        edited = compose(base, [E])
        margins = next_token_margin(edited, vocab, edit_examples(split.edits, 0)).cpu().numpy()
        matched_facts, gap = margin_matched(pool, pool_margin, margins, {x.subject for x in split.edits})
        rows.append(dict(seed=s, editor=e, comp="none", strength=0, order="alone",
                         rel=edit_size(edited, base, edit_choice[e]["layer"]),
                         margin=float(np.median(margins)), margin_gap=gap, **ev(edited)))
        for (c, st), C in comps.items():
            rows.append(dict(seed=s, editor=e, comp=c, strength=st, order="edit first", **ev(compose(edited, [C]))))
            rows.append(dict(seed=s, editor=e, comp=c, strength=st, order="compress first", **ev(compose(base, [C, E]))))
            rows.append(dict(seed=s, editor=e, comp=c, strength=st, order="margin control",
                             success=next_token_accuracy(only[c, st], vocab, matched_facts)))
    return [{k: (float(v) if isinstance(v, (float, np.floating)) else v) for k, v in r.items()} for r in rows]


def code_fingerprints(fns) -> dict[str, str]:
    """``{module.name: sha256}`` of each function's source without docstrings, comments and blank lines
    (:func:`iclr25.common.digest.strip_source`): what a record stores so that the chapter can tell whether
    the code that made it is the code it runs."""
    return {f"{Path(inspect.getsourcefile(inspect.unwrap(f))).stem}.{f.__name__}":
            bytes_sha256(strip_source(inspect.getsource(f)).encode())
            for f in fns}          # keyed by file, not __module__ (which is "__main__" when a script runs itself)


def record_code() -> dict[str, str]:
    """The fingerprints of the functions that make :data:`RUNS_FILE`."""
    return code_fingerprints([seed_rows, editor, edit_size, margin_pool, margin_matched, calibration, probes, memit_edit,
                              target_deltas, ft_edit, compose, compressor, prune_model_, quantize_model_, edit_metrics,
                              utility])


def load_runs() -> dict:
    """The committed sweep, digest checked."""
    runs = json.loads(RUNS_FILE.read_text())
    if json_sha256(runs["rows"]) != runs["rows_sha256"]:
        raise ValueError(f"{RUNS_FILE.name}: rows do not match their sha256; re-run `{SCRIPT}`")
    return runs


def same_rows(a: list[dict], b: list[dict], tol: float = 1e-6) -> float:
    """The largest absolute difference of any metric between two lists of rows of the same seeds (inf if
    the rows do not line up)."""
    if len(a) != len(b):
        return float("inf")
    worst = 0.0
    for x, y in zip(a, b):
        if {k: v for k, v in x.items() if isinstance(v, str)} != {k: v for k, v in y.items() if isinstance(v, str)} \
                or set(x) != set(y):
            return float("inf")
        worst = max([worst] + [abs(float(x[k]) - float(y[k])) for k in x if not isinstance(x[k], str)])
    return worst


def main(n_seeds: int = N_SEEDS) -> None:
    """Run seeds ``0 .. n_seeds - 1`` at :data:`RECIPE` (the strengths include the chapter's
    matched ones) and write :data:`RUNS_FILE`."""
    from iclr25.common import start
    from iclr25.lm import load_world_lm

    device = start("full", 0, threads=1)
    base, world = load_world_lm("base", device=device)
    pool, pool_margin = margin_pool(base, world)
    t0 = time.process_time()
    rows = []
    for s in range(n_seeds):
        rows += seed_rows(base, world, s, RECIPE["editors"], RECIPE["edit_choice"], RECIPE["sweep"], pool, pool_margin)
        print(f"seed {s} done ({time.process_time() - t0:.0f} cpu s)", flush=True)
    out = {"recipe": {**RECIPE, "seeds": list(range(n_seeds)), "n_edits": N_EDITS, "model": "load_world_lm('base')",
                      "threads": 1, "torch": torch.__version__, "script": SCRIPT, "code": record_code(),
                      "cpu_s": round(time.process_time() - t0, 1)},
           "rows": rows, "rows_sha256": json_sha256(rows)}
    RUNS_FILE.write_text(json.dumps(out, indent=0, sort_keys=True))
    print(f"wrote {RUNS_FILE} ({RUNS_FILE.stat().st_size / 1e3:.1f} kB)")


if __name__ == "__main__":
    import sys
    main(int(sys.argv[1]) if len(sys.argv) > 1 else N_SEEDS)
