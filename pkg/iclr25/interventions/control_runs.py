"""Controls for the composable-interventions chapter's editing × compression rows, committed over the
sweep's 20 seeds.

Two questions the main sweep (:mod:`iclr25.interventions.sweep_runs`) cannot answer:

* **Is FT's compress-first loss the box-clipped update landing on pruned weights?** ``FT masked``
  is the same FT with the weights that are zero at its start kept at zero (mask-aware FT): on a
  pruned model its whole update lands on the surviving weights, which re-pruning mostly keeps.
  **SparseGPT** (the paper's compressor, which reconstructs the surviving weights) at the matched
  sparsity is the other control, for every editor in both orders.
* **Is the edit of the paper's size against compression?** For every editor, compressor and
  order, :func:`output_ratio` measures, at the edited keys, compression's change of the edited
  matrix's output against the edit's own change, ``||(C(W') - W') k*_i|| / ||(W' - W) k*_i||``
  (median over the 10 edits); the paper's edits are small against what compression changes
  (ratio of order 1 or more), the capped edits here may not be.

``python -m iclr25.interventions.control_runs`` runs :data:`RECIPE` on seeds
``0 .. N_SEEDS - 1`` and writes ``results/edit-controls.json`` (recipe, rows, sha256 of the rows).
Its MEMIT and FT rows at magnitude, Wanda and RTN repeat cells of the committed sweep (same
function of the same seed): the chapter checks that they are equal.
"""

from __future__ import annotations

import json
import math
import time
from typing import Sequence
from pathlib import Path

import numpy as np
import torch

from iclr25.common.digest import json_sha256
from iclr25.interventions.compose import compose, compressor
from iclr25.interventions.editing import subject_keys
from iclr25.interventions.metrics import argmax_tokens, edit_metrics, locality_examples, utility
from iclr25.interventions.sweep_runs import (N_EDITS, RECIPE as SWEEP_RECIPE, calibration, code_fingerprints, edit_size,
                                             editor, margin_matched, margin_pool, probes, record_code as sweep_code)
from iclr25.lm import edit_examples, edit_split, mlp_out, next_token_accuracy, next_token_margin

RUNS_FILE = Path(__file__).resolve().parent / "results" / "edit-controls.json"
SCRIPT = "python -m iclr25.interventions.control_runs"
N_SEEDS = 20
# fixed before the run: the chapter's matched strengths (s* for every pruning method, b* bits), the
# editors of the sweep plus the mask-aware FT (FT's tuned setting), and FT masked only on the pruners
# "FT matched" is mask-aware FT with its per-weight box widened by 1 / sqrt(1 - s*): on the 1 - s* surviving
# weights its largest Frobenius change equals dense FT's, so it removes the capacity loss and nothing else
S_PRUNE = 0.5
RECIPE = {
    "star": {"magnitude": S_PRUNE, "wanda": S_PRUNE, "sparsegpt": S_PRUNE, "rtn": 3},
    "editors": ["MEMIT", "FT", "FT masked", "FT matched"],
    "edit_choice": {**SWEEP_RECIPE["edit_choice"], "FT masked": SWEEP_RECIPE["edit_choice"]["FT"],
                    "FT matched": {**SWEEP_RECIPE["edit_choice"]["FT"],
                                   "box": round(SWEEP_RECIPE["edit_choice"]["FT"]["box"] / math.sqrt(1 - S_PRUNE), 6)}},
    "skip": [["FT masked", "rtn"], ["FT matched", "rtn"]],
}


@torch.no_grad()
def output_ratio(before, edited, final, vocab, edits, layer: int | Sequence[int]) -> float:
    """Median over the edits of ``||(W_final - W_edited) k_i|| / ||(W_edited - W_before) k_i||``, block
    ``layer``'s ``W_out`` and the edited model's keys ``k_i`` at the edited positions: what the last
    compression changes at an edit's key against what the edit changed there. For an edit spread over
    several blocks (``layer`` a sequence), numerator and denominator are summed over the blocks."""
    noise, signal = 0.0, 0.0
    for l in ([layer] if isinstance(layer, int) else layer):
        W0, We, Wf = (mlp_out(m, l).weight.detach().double() for m in (before, edited, final))
        K = subject_keys(edited, vocab, edits, l).to(We.device)          # (n_edits, d_ff)
        noise = noise + ((Wf - We) @ K.T).norm(dim=0)
        signal = signal + ((We - W0) @ K.T).norm(dim=0)
    return float((noise / signal.clamp_min(1e-12)).median())


def seed_rows(base, world, s: int, recipe: dict = RECIPE, pool=None, pool_margin=None) -> list[dict]:
    """Seed ``s``'s control rows, in :func:`iclr25.interventions.sweep_runs.seed_rows`' format (``seed,
    editor, comp, strength, order`` and the metrics) plus ``ratio`` (:func:`output_ratio`) on the
    edit-first and compress-first rows and ``success_pre`` (edit success before the final
    re-compression) on the compress-first rows: the compressors at ``recipe["star"]`` alone ("compress only"),
    each editor alone, then per compressor both orders and the margin-matched control."""
    vocab = world.vocab
    device = next(base.parameters()).device
    if pool is None:
        pool, pool_margin = margin_pool(base, world)
    split = edit_split(world, N_EDITS, s)
    ids, mask = calibration(world, s, device)
    gen, _ = probes(world, s)
    ref = argmax_tokens(base, world, locality_examples(split))
    old_facts = edit_examples(split.edits, 0, new=False)
    ev = lambda m: {**edit_metrics(m, ref, world, split), **utility(m, world, gen)}  # noqa: E731
    real = ids != vocab.pad_id
    comps = {c: compressor(c, st, ids, calib_mask=real) for c, st in recipe["star"].items()}
    only = {c: compose(base, [C]) for c, C in comps.items()}
    rows = [dict(seed=s, editor="none", comp=c, strength=recipe["star"][c], order="compress only",
                 orig_fact=next_token_accuracy(m, vocab, old_facts), **ev(m)) for c, m in only.items()]
    for e in recipe["editors"]:
        hp = recipe["edit_choice"][e]
        E, L = editor(e, vocab, split, ids, mask, hp), hp["layer"]
        edited = compose(base, [E])
        margins = next_token_margin(edited, vocab, edit_examples(split.edits, 0)).cpu().numpy()
        matched_facts, gap = margin_matched(pool, pool_margin, margins, {x.subject for x in split.edits})
        rows.append(dict(seed=s, editor=e, comp="none", strength=0, order="alone", rel=edit_size(edited, base, L),
                         margin=float(np.median(margins)), margin_gap=gap, **ev(edited)))
        for c, C in comps.items():
            if [e, c] in recipe["skip"]:
                continue
            st = recipe["star"][c]
            ef = compose(edited, [C])
            rows.append(dict(seed=s, editor=e, comp=c, strength=st, order="edit first",
                             ratio=output_ratio(base, edited, ef, vocab, split.edits, L), **ev(ef)))
            ce = compose(only[c], [E])                        # compress, edit ...
            cf = compose(ce, [C])                             # ... compress: compose(base, [C, E])
            rows.append(dict(seed=s, editor=e, comp=c, strength=st, order="compress first",
                             ratio=output_ratio(only[c], ce, cf, vocab, split.edits, L),
                             success_pre=edit_metrics(ce, ref, world, split)["success"], **ev(cf)))
            rows.append(dict(seed=s, editor=e, comp=c, strength=st, order="margin control",
                             success=next_token_accuracy(only[c], vocab, matched_facts)))
    return [{k: (float(v) if isinstance(v, (float, np.floating)) else v) for k, v in r.items()} for r in rows]


def arm_row(base, world, s: int, hp: dict, star: dict, only: dict | None = None) -> dict:
    """One MEMIT setting ``hp`` (``hp["layers"]``: the blocks it spreads over, else ``[hp["layer"]]``) on seed
    ``s``'s edits, for the smaller-edit arm: alone (``success``, ``locality``, ``rel`` the largest
    ``||Delta||/||W||`` of its matrices, ``hobby``), and per compressor ``c`` at ``star[c]`` the edit success in
    both orders (``ef_c``, ``cf_c``) and :func:`output_ratio` summed over the edited blocks (``ratio_ef_c``,
    ``ratio_cf_c``). ``only``: the compressed unedited models by compressor, if at hand."""
    vocab = world.vocab
    device = next(base.parameters()).device
    split = edit_split(world, N_EDITS, s)
    ids, mask = calibration(world, s, device)
    gen, _ = probes(world, s)
    ref = argmax_tokens(base, world, locality_examples(split))
    layers = hp.get("layers", [hp["layer"]])
    E = editor("MEMIT", vocab, split, ids, mask, hp)
    edited = compose(base, [E])
    out = dict(**{k: edit_metrics(edited, ref, world, split)[k] for k in ("success", "locality")},
               rel=max(edit_size(edited, base, l) for l in layers), hobby=utility(edited, world, gen)["hobby"])
    real = ids != vocab.pad_id
    for c, st in star.items():
        C = compressor(c, st, ids, calib_mask=real)
        cb = only[c] if only is not None else compose(base, [C])
        ef, ce = compose(edited, [C]), compose(cb, [E])
        cf = compose(ce, [C])
        out.update({f"ef_{c}": edit_metrics(ef, ref, world, split)["success"],
                    f"cf_{c}": edit_metrics(cf, ref, world, split)["success"],
                    f"ratio_ef_{c}": output_ratio(base, edited, ef, vocab, split.edits, layers),
                    f"ratio_cf_{c}": output_ratio(cb, ce, cf, vocab, split.edits, layers)})
    return {k: float(v) for k, v in out.items()}


def record_code() -> dict[str, str]:
    """The fingerprints of the functions that make :data:`RUNS_FILE` (the sweep's, this seed_rows and output_ratio)."""
    return {**sweep_code(), **code_fingerprints([seed_rows, output_ratio])}


def load_runs() -> dict:
    """The committed controls, digest checked."""
    runs = json.loads(RUNS_FILE.read_text())
    if json_sha256(runs["rows"]) != runs["rows_sha256"]:
        raise ValueError(f"{RUNS_FILE.name}: rows do not match their sha256; re-run `{SCRIPT}`")
    return runs


def main(n_seeds: int = N_SEEDS) -> None:
    """Run seeds ``0 .. n_seeds - 1`` at :data:`RECIPE` and write :data:`RUNS_FILE`."""
    from iclr25.common import progress, start
    from iclr25.lm import load_world_lm

    device = start("full", 0, threads=1)
    base, world = load_world_lm("base", device=device)
    pool, pool_margin = margin_pool(base, world)
    t0 = time.process_time()
    rows = []
    for s in progress(range(n_seeds), desc="control seeds"):
        rows += seed_rows(base, world, s, RECIPE, pool, pool_margin)
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
