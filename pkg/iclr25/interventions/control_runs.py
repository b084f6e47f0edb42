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
from typing import Callable, Sequence
from pathlib import Path

import numpy as np
import torch

from iclr25.common.digest import json_sha256, load_record, record_sha256
from iclr25.interventions.compose import Intervention, compose, compressor, gptq_compressor
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


def make_compressor(c: str, st: float, ids, real) -> Intervention:
    """Compressor ``c`` at strength ``st`` calibrated on the real tokens ``real`` of ``ids``: GPTQ
    (:func:`iclr25.interventions.compose.gptq_compressor`) for ``"gptq"``, else
    :func:`iclr25.interventions.compose.compressor`."""
    return gptq_compressor(int(st), ids, real) if c == "gptq" else compressor(c, st, ids, calib_mask=real)


def pipeline_rows(base, world, s: int, name: str, hp: dict, star: dict, orders: Sequence[str], pool, pool_margin,
                  with_only: bool = True, make_editor: Callable = editor) -> list[dict]:
    """Seed ``s``'s rows for one editor ``name`` at ``hp`` (built by ``make_editor(name, vocab, split, ids, mask,
    hp)``, default :func:`iclr25.interventions.sweep_runs.editor`): the compressors of ``star`` alone ("compress
    only", utility, if ``with_only``), the editor alone (``rel``, ``margin``, ``margin_gap``), and per compressor
    the ``orders`` ("edit first" with ``ratio``; "compress first", i.e. compress, edit, compress, with ``ratio``
    and ``success_pre``) and the margin-matched control. The one per-seed pipeline of this module's
    :func:`seed_rows`, of FT with slack (:mod:`iclr25.interventions.slack_runs`) and of the GPTQ rows."""
    vocab = world.vocab
    device = next(base.parameters()).device
    split = edit_split(world, N_EDITS, s)
    ids, mask = calibration(world, s, device)
    gen, _ = probes(world, s)
    ref = argmax_tokens(base, world, locality_examples(split))
    ev = lambda m: {**edit_metrics(m, ref, world, split), **utility(m, world, gen)}  # noqa: E731
    real = ids != vocab.pad_id
    comps = {c: make_compressor(c, st, ids, real) for c, st in star.items()}
    only = {c: compose(base, [C]) for c, C in comps.items()}
    rows = [dict(seed=s, editor="none", comp=c, strength=star[c], order="compress only", **utility(m, world, gen))
            for c, m in only.items()] if with_only else []
    E, L = make_editor(name, vocab, split, ids, mask, hp), hp["layer"]
    edited = compose(base, [E])
    margins = next_token_margin(edited, vocab, edit_examples(split.edits, 0)).cpu().numpy()
    matched_facts, gap = margin_matched(pool, pool_margin, margins, {x.subject for x in split.edits})
    rows.append(dict(seed=s, editor=name, comp="none", strength=0, order="alone", rel=edit_size(edited, base, L),
                     margin=float(np.median(margins)), margin_gap=gap, **ev(edited)))
    for c, C in comps.items():
        st = star[c]
        if "edit first" in orders:
            ef = compose(edited, [C])
            rows.append(dict(seed=s, editor=name, comp=c, strength=st, order="edit first",
                             ratio=output_ratio(base, edited, ef, vocab, split.edits, L), **ev(ef)))
        if "compress first" in orders:
            ce = compose(only[c], [E])                        # compress, edit ...
            cf = compose(ce, [C])                             # ... compress: compose(base, [C, E])
            rows.append(dict(seed=s, editor=name, comp=c, strength=st, order="compress first",
                             ratio=output_ratio(only[c], ce, cf, vocab, split.edits, L),
                             success_pre=edit_metrics(ce, ref, world, split)["success"], **ev(cf)))
        rows.append(dict(seed=s, editor=name, comp=c, strength=st, order="margin control",
                         success=next_token_accuracy(only[c], vocab, matched_facts)))
    return [{k: (float(v) if isinstance(v, (float, np.floating)) else v) for k, v in r.items()} for r in rows]


def seed_rows(base, world, s: int, recipe: dict = RECIPE, pool=None, pool_margin=None) -> list[dict]:
    """Seed ``s``'s control rows, in :func:`iclr25.interventions.sweep_runs.seed_rows`' format (``seed,
    editor, comp, strength, order`` and the metrics) plus ``ratio`` (:func:`output_ratio`) on the
    edit-first and compress-first rows and ``success_pre`` (edit success before the final
    re-compression) on the compress-first rows: the compressors at ``recipe["star"]`` alone ("compress only",
    with the edit metrics and the original facts' accuracy), then each editor through :func:`pipeline_rows`
    (alone, per compressor both orders and the margin-matched control)."""
    vocab = world.vocab
    device = next(base.parameters()).device
    if pool is None:
        pool, pool_margin = margin_pool(base, world)
    split = edit_split(world, N_EDITS, s)
    ids, _ = calibration(world, s, device)
    gen, _ = probes(world, s)
    ref = argmax_tokens(base, world, locality_examples(split))
    old_facts = edit_examples(split.edits, 0, new=False)
    real = ids != vocab.pad_id
    rows = []
    for c, st in recipe["star"].items():
        m = compose(base, [make_compressor(c, st, ids, real)])
        rows.append(dict(seed=s, editor="none", comp=c, strength=st, order="compress only",
                         orig_fact=next_token_accuracy(m, vocab, old_facts), **edit_metrics(m, ref, world, split),
                         **utility(m, world, gen)))
    for e in recipe["editors"]:
        star = {c: st for c, st in recipe["star"].items() if [e, c] not in recipe["skip"]}
        rows += pipeline_rows(base, world, s, e, recipe["edit_choice"][e], star, ("edit first", "compress first"),
                              pool, pool_margin, with_only=False)
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
    return {**sweep_code(), **code_fingerprints([seed_rows, pipeline_rows, make_compressor, output_ratio])}


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


GPTQ_FILE = Path(__file__).resolve().parent / "results" / "edit-gptq.json"
GPTQ_EDITORS = ("MEMIT", "FT", "FT slack")   # fixed before the run: GPTQ at b* bits, both orders, the controls' seeds


def gptq_code() -> dict[str, str]:
    """The fingerprints of the functions that make :data:`GPTQ_FILE`."""
    from iclr25.interventions import slack_runs
    from iclr25.interventions.compose import gptq_model_
    return {**record_code(), **code_fingerprints([gptq_compressor, gptq_model_, slack_runs.ft_editor])}


def load_gptq() -> dict:
    """The committed GPTQ rows, sha256 checked."""
    return load_record(GPTQ_FILE, SCRIPT + " gptq")


def main_gptq(n_seeds: int = N_SEEDS) -> None:
    """:data:`GPTQ_EDITORS` through :func:`pipeline_rows` with GPTQ at b* (the RTN bits of :data:`RECIPE`), both
    orders, on seeds ``0 .. n_seeds - 1`` (FT slack at the recorded choice of :mod:`iclr25.interventions.slack_runs`),
    written to :data:`GPTQ_FILE` every 5 seeds."""
    from iclr25.common import progress, start
    from iclr25.interventions import slack_runs
    from iclr25.lm import load_world_lm

    device = start("full", 0, threads=1)
    base, world = load_world_lm("base", device=device)
    pool, pool_margin = margin_pool(base, world)
    hps = {**{e: RECIPE["edit_choice"][e] for e in GPTQ_EDITORS if e != "FT slack"},
           "FT slack": slack_runs.load_runs()["recipe"]["choice"]}
    star = {"gptq": RECIPE["star"]["rtn"]}
    t0 = time.process_time()
    rows = []
    for s in progress(range(n_seeds), desc="GPTQ seeds"):
        for i, e in enumerate(GPTQ_EDITORS):
            rows += pipeline_rows(base, world, s, e, hps[e], star, ("edit first", "compress first"), pool, pool_margin,
                                  with_only=i == 0, make_editor=slack_runs.ft_editor if e == "FT slack" else editor)
        print(f"seed {s} done ({time.process_time() - t0:.0f} cpu s)", flush=True)
        if (s + 1) % 5 == 0 or s + 1 == n_seeds:
            out = {"recipe": {"star": star, "editors": hps, "seeds": list(range(s + 1)), "n_edits": N_EDITS,
                              "model": "load_world_lm('base')", "threads": 1, "torch": torch.__version__,
                              "script": SCRIPT + " gptq", "code": gptq_code()},
                   "rows": rows, "cpu_s": round(time.process_time() - t0, 1)}
            out["sha256"] = record_sha256(out)
            GPTQ_FILE.write_text(json.dumps(out, indent=0, sort_keys=True))
            print(f"wrote {GPTQ_FILE} ({GPTQ_FILE.stat().st_size / 1e3:.1f} kB)", flush=True)


def same_rows(new: list[dict], old: list[dict]) -> bool:
    """Whether two row lists are equal after a JSON round trip (what a record stores)."""
    return json.loads(json.dumps(new, sort_keys=True)) == json.loads(json.dumps(old, sort_keys=True))


def main_restamp(seeds: Sequence[int] = (0, 1)) -> None:
    """Prove that the shared :func:`pipeline_rows` reproduces the committed controls (seeds ``seeds``), FT slack
    records (the first of ``seeds``) and extra seeds (the first extra seed) row for row, then stamp those three
    records with the present code fingerprints (their rows untouched); refuses if any row differs."""
    from iclr25.common import start
    from iclr25.interventions import slack_runs
    from iclr25.lm import load_world_lm

    device = start("full", 0, threads=1)
    base, world = load_world_lm("base", device=device)
    pool, pool_margin = margin_pool(base, world)
    t0 = time.process_time()
    ctl = load_runs()
    for s in seeds:
        ok = same_rows(seed_rows(base, world, s, RECIPE, pool, pool_margin), [r for r in ctl["rows"] if r["seed"] == s])
        print(f"controls seed {s}: identical {ok} ({time.process_time() - t0:.0f} cpu s)", flush=True)
        if not ok:
            raise SystemExit("controls differ: not re-stamped")
    slk, xtr = slack_runs.load_runs(), slack_runs.load_runs(slack_runs.EXTRA_FILE)
    star, pr = slack_runs.RECIPE["star"], {c: slack_runs.RECIPE["star"][c] for c in slack_runs.PRUNERS}
    s = seeds[0]
    new = slack_runs.pipeline_rows(base, world, s, "FT slack", slk["recipe"]["choice"], star,
                                   ("edit first", "compress first"), pool, pool_margin)
    for b in slack_runs.BOXES:
        new += slack_runs.pipeline_rows(base, world, s, f"FT box {b:g}", {**slack_runs.RECIPE["ft"], "lr": 5e-3, "box": b},
                                        pr, ("edit first",), pool, pool_margin, with_only=False)
    ok_s = same_rows(new, [r for r in slk["rows"] if r["seed"] == s])
    x = xtr["recipe"]["extra_seeds"][0]
    new = slack_runs.pipeline_rows(base, world, x, "FT", slack_runs.RECIPE["ft"], pr, ("edit first",), pool, pool_margin)
    new += slack_runs.pipeline_rows(base, world, x, "FT slack", xtr["recipe"]["choice"], pr, ("edit first",), pool,
                                    pool_margin, with_only=False)
    ok_x = same_rows(new, [r for r in xtr["rows"] if r["seed"] == x])
    print(f"FT slack seed {s}: identical {ok_s}; extra seed {x}: identical {ok_x} ({time.process_time() - t0:.0f} cpu s)")
    if not (ok_s and ok_x):
        raise SystemExit("FT slack records differ: not re-stamped")
    ctl["recipe"]["code"] = record_code()
    ctl["recipe"]["restamp"] = {"seeds_recomputed": list(seeds), "identical": True}
    RUNS_FILE.write_text(json.dumps(ctl, indent=0, sort_keys=True))
    for path, rec, done in ((slack_runs.RUNS_FILE, slk, [s]), (slack_runs.EXTRA_FILE, xtr, [x])):
        rec["recipe"]["code"] = slack_runs.record_code()
        rec["recipe"]["restamp"] = {"seeds_recomputed": done, "identical": True}
        slack_runs.write(path, rec)
    print(f"re-stamped three records ({time.process_time() - t0:.0f} cpu s)")


TREND_FILE = Path(__file__).resolve().parent / "results" / "edit-trend.json"
# fixed before the run (pre-registered): the chapter's editors (MEMIT, FT with slack) on the paper's compressors beyond
# the matched strengths, both orders, the controls' 20 seeds. The look: per editor, order and compressor, the
# strongest setting here at which the compressed unedited model keeps the edited persons' original facts (mean
# ``orig_fact``) >= ``orig_min``; there the per-seed excess, the editor's loss of edit success against the editor alone
# minus the same-margin facts' loss (``1 - margin control``), is judged against ``bar`` by ``decide.three_way``
# (mean ± 2 s.e. against the bar, else undecided; ``decide.trend_cells``, ``decide.trend_votes``). A cell with no such setting has no vote. The row "compression hinders editing
# increasingly with strength" is ``decide.verdict`` of the votes (any yes: yes; all NO: NO; else undecided).
TREND = {"strengths": {"sparsegpt": [0.6, 0.7], "gptq": [2]}, "editors": ["MEMIT", "FT slack"],
         "orders": ["edit first", "compress first"], "bar": 0.15, "orig_min": 0.9}


def trend_code() -> dict[str, str]:
    """The fingerprints of the functions that make :data:`TREND_FILE`."""
    return {**gptq_code(), **code_fingerprints([trend_rows])}


def trend_rows(base, world, s: int, hps: dict, pool, pool_margin, trend: dict = TREND) -> list[dict]:
    """Seed ``s``'s trend rows: per compressor setting of ``trend["strengths"]`` the compressed unedited model
    ("compress only": ``orig_fact``, the edited persons' original facts, and utility), then each editor of
    ``trend["editors"]`` at ``hps[editor]`` through :func:`pipeline_rows`, both orders and the margin control, one
    call per strength level (the editor is re-made per call; it is the same function of the seed)."""
    from iclr25.interventions import slack_runs

    vocab = world.vocab
    device = next(base.parameters()).device
    split = edit_split(world, N_EDITS, s)
    ids, _ = calibration(world, s, device)
    gen, _ = probes(world, s)
    old_facts = edit_examples(split.edits, 0, new=False)
    real = ids != vocab.pad_id
    rows = []
    levels = max(len(v) for v in trend["strengths"].values())
    for c, sts in trend["strengths"].items():
        for st in sts:
            m = compose(base, [make_compressor(c, st, ids, real)])
            rows.append(dict(seed=s, editor="none", comp=c, strength=st, order="compress only",
                             orig_fact=next_token_accuracy(m, vocab, old_facts), **utility(m, world, gen)))
    for i in range(levels):
        star = {c: sts[i] for c, sts in trend["strengths"].items() if i < len(sts)}
        for e in trend["editors"]:
            new = pipeline_rows(base, world, s, e, hps[e], star, trend["orders"], pool, pool_margin, with_only=False,
                                make_editor=slack_runs.ft_editor if e == "FT slack" else editor)
            rows += [r for r in new if not (i > 0 and r["order"] == "alone")]
    return [{k: (float(v) if isinstance(v, (float, np.floating)) else v) for k, v in r.items()} for r in rows]


def load_trend() -> dict:
    """The committed trend rows, sha256 checked."""
    return load_record(TREND_FILE, SCRIPT + " trend")


def main_trend(n_seeds: int = N_SEEDS) -> None:
    """:func:`trend_rows` on seeds ``0 .. n_seeds - 1`` (MEMIT at the controls' choice, FT slack at the recorded
    choice), written to :data:`TREND_FILE` every 5 seeds."""
    from iclr25.common import progress, start
    from iclr25.interventions import slack_runs
    from iclr25.lm import load_world_lm

    device = start("full", 0, threads=1)
    base, world = load_world_lm("base", device=device)
    pool, pool_margin = margin_pool(base, world)
    hps = {"MEMIT": RECIPE["edit_choice"]["MEMIT"], "FT slack": slack_runs.load_runs()["recipe"]["choice"]}
    t0 = time.process_time()
    rows = []
    for s in progress(range(n_seeds), desc="trend seeds"):
        rows += trend_rows(base, world, s, hps, pool, pool_margin)
        print(f"seed {s} done ({time.process_time() - t0:.0f} cpu s)", flush=True)
        if (s + 1) % 5 == 0 or s + 1 == n_seeds:
            out = {"recipe": {**TREND, "editor_choice": hps, "seeds": list(range(s + 1)), "n_edits": N_EDITS,
                              "model": "load_world_lm('base')", "threads": 1, "torch": torch.__version__,
                              "script": SCRIPT + " trend", "code": trend_code()},
                   "rows": rows, "cpu_s": round(time.process_time() - t0, 1)}
            out["sha256"] = record_sha256(out)
            TREND_FILE.write_text(json.dumps(out, indent=0, sort_keys=True))
            print(f"wrote {TREND_FILE} ({TREND_FILE.stat().st_size / 1e3:.1f} kB)", flush=True)


if __name__ == "__main__":
    import sys
    if len(sys.argv) > 1 and sys.argv[1] == "gptq":
        main_gptq(int(sys.argv[2]) if len(sys.argv) > 2 else N_SEEDS)
    elif len(sys.argv) > 1 and sys.argv[1] == "trend":
        main_trend(int(sys.argv[2]) if len(sys.argv) > 2 else N_SEEDS)
    elif len(sys.argv) > 1 and sys.argv[1] == "restamp":
        main_restamp()
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else N_SEEDS)
