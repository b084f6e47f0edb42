"""Controls of the small-budget study of ``theory/zo-pog`` (:mod:`iclr25.blackbox.zo_pog_budget`).

The small-budget study decides the shared-template rows at 300 queries. Four questions about that
design are answered here, each fixed in this file before its runs:

1. **Does each policy learner beat random search at its own number of dev evaluations?**
   The 64 random prompts per seed of the study's reference (same generator, z = 0) are scored
   on dev, each draw kept, and on test wherever a draw leads all earlier ones on dev
   (:func:`reference_draws`), so the best-on-dev of any k draws can be read; the chapter compares every policy learner with best-of-k at its own k. The policy
   learners are re-run on :data:`MASS_SEEDS` to read their final policy's mass on the positive
   and negative adjectives (:func:`polar_mass`), and their accuracy must reproduce the record's.
2. **No-Gumbel tuned on its own grid**: the product eta_alpha x eta_z of ZO-PoG (42 cells) on the
   study's 5 tuning seeds, by the test accuracy of its own rule (the mode), then run on the 200
   evaluation seeds at its own cell.
3. **Half-budget control**: ZO-only and BBT with :data:`HALF` = 150 queries (the number of
   z-steps ZO-PoG makes in 300), at their tuned cells, on the 200 evaluation seeds.
4. **A second budget** (:data:`BIG` = 1000 queries, same dev set of 128): every arm re-tuned on
   :data:`TUNE_SEEDS_BIG` over its 300-query optimum and that value's neighbours on each axis
   (:func:`big_grid`), evaluated on :data:`SEEDS_BIG`; each run keeps its test accuracy under
   the best-dev prompt found within 150, 300, 500 and 1000 queries (a learning curve).

``python -m iclr25.blackbox.zo_pog_budget2 checks`` writes ``results/zo-pog-budget-checks.json``
(items 1-3) and ``... big`` writes ``results/zo-pog-budget-1000.json`` (item 4); one process, one
torch thread; each record holds the sha256 of its content and of the code that made it.
"""

from __future__ import annotations

import inspect
import itertools
import json
import sys
import time
from pathlib import Path

import torch
from tqdm.auto import tqdm

from iclr25.blackbox import api, cmaes, methods, policy, prompts, zo
from iclr25.blackbox import zo_pog_budget as bud
from iclr25.blackbox import zo_pog_study as study
from iclr25.blackbox import zo_pog_template as tpl
from iclr25.blackbox.api import BlackBoxLM
from iclr25.blackbox.methods import run_bbt, run_bdpl, run_zo_pog
from iclr25.common.digest import bytes_sha256, load_record, record_sha256, strip_source
from iclr25.lm.language import NEGATIVE, POSITIVE

NO_GUMBEL = "ZO-PoG no Gumbel"
POLICY_ARMS = ("ZO-PoG", "ZO-PoG no continuous", "BDPL")   # re-run for their final policy
MASS_SEEDS = bud.EVAL_SEEDS_B[:60]          # seeds 200-259
HALF = 150                                  # the half-budget control's queries
HALF_ARMS = ("ZO-only", "BBT")
BIG = 1000                                  # the second budget
BIG_ARMS = bud.METHODS_B + (NO_GUMBEL,)
TUNE_SEEDS_BIG = (100, 101, 102)
SEEDS_BIG = bud.EVAL_SEEDS_B[:60]           # seeds 200-259
AT = (150, 300, 500, 1000)                  # queries at which a 1000-query run's accuracy is kept
RECORD_CHECKS = Path(__file__).parent / "results" / "zo-pog-budget-checks.json"
RECORD_BIG = Path(__file__).parent / "results" / "zo-pog-budget-1000.json"


def grid_of(name: str) -> tuple[tuple[str, ...], tuple[tuple[float, ...], ...]]:
    """The 300-query grid of ``name`` (no-Gumbel: ZO-PoG's product grid)."""
    return bud.GRIDS_B["ZO-PoG" if name == NO_GUMBEL else name]


def polar_mass(probs: torch.Tensor, cands: torch.Tensor) -> tuple[float, float]:
    """Mean over positions of a policy's mass on positive and on negative adjectives.

    ``probs``: (n_pos, V) final policy over the candidates ``cands`` (token ids, V); the words
    of :data:`POSITIVE` and :data:`NEGATIVE` are the adjectives."""
    _, vocab = study.model_and_vocab()
    words = [vocab.decode(torch.tensor([int(c)])).strip() for c in cands]
    pos = torch.tensor([w in POSITIVE for w in words], dtype=probs.dtype)
    neg = torch.tensor([w in NEGATIVE for w in words], dtype=probs.dtype)
    return float((probs @ pos).mean()), float((probs @ neg).mean())


def run_arm(name: str, s: int, point: tuple, budget: int, device: torch.device | str = "cpu") -> dict:
    """One run of ``name`` at ``point`` on seed ``s`` of the small-budget study's setting with
    ``budget`` queries: test accuracy (%) by its own rule (``acc``) and at the mode, its dev
    evaluations, the best-dev test accuracy within each of :data:`AT` queries (own rule),
    the final policy's mass on positive/negative adjectives, budget use and a leak flag."""
    torch.set_num_threads(1)
    lm, vocab = study.model_and_vocab()
    enc, cands, A = bud.setup(s, device)
    r2 = lambda x: round(float(x), 2)  # noqa: E731
    bb = BlackBoxLM(lm, vocab, study.TASK, budget, device=device)
    cfg = study.config("ZO-PoG" if name == NO_GUMBEL else name, point)
    args = (bb, enc["train"], enc["dev"], enc["test"], cands, study.N_POS)
    if name == "BDPL":
        r = run_bdpl(*args, cfg, seed=s)
    elif name == "BBT":
        r = run_bbt(*args, A, cfg, seed=s)
    else:
        r = run_zo_pog(*args, A, cfg, seed=s, discrete=name != "ZO-only", gumbel=name != NO_GUMBEL,
                       continuous=name != "ZO-PoG no continuous", name=name)
    out = {"acc": r2(100 * r.primary.test_acc), "n_dev_evals": len(r.primary.curve),
           "at": {str(q): r2(100 * r.primary.test_at(q)) for q in AT if q <= budget},
           "queries": r.queries, "leak": any(p.grad is not None for p in lm.parameters())}
    if "mode" in r.selections and r.primary is not r.selections["mode"]:
        out["mode"] = r2(100 * r.selections["mode"].test_acc)
    if r.probs is not None:
        out["pos_mass"], out["neg_mass"] = (round(m, 4) for m in polar_mass(r.probs, cands))
    return out


def reference_draws(s: int, device: torch.device | str = "cpu") -> dict:
    """Dev and test accuracy (%) of each of the study's random prompts of seed ``s`` (z = 0),
    drawn exactly as in :func:`iclr25.blackbox.zo_pog_budget.summarize`."""
    torch.set_num_threads(1)
    lm, vocab = study.model_and_vocab()
    enc, cands, _ = bud.setup(s, device)
    bb = BlackBoxLM(lm, vocab, study.TASK, 0, device=device)
    gen = torch.Generator().manual_seed(bud.RANDOM_OFFSET + s)
    P = cands[torch.randint(cands.numel(), (max(bud.BEST_OF_K), study.N_POS), generator=gen)]
    dev = [round(100 * bb.evaluate(p, None, enc["dev"]), 2) for p in P]
    leaders = [i for i in range(len(dev)) if all(dev[i] > d for d in dev[:i])]
    return {"dev": dev, "test": {str(i): round(100 * bb.evaluate(P[i], None, enc["test"]), 2) for i in leaders}}


def best_of_k(draws: dict, k: int) -> float:
    """Test accuracy of the best-on-dev of the first ``k`` draws (ties to the first draw).

    Only a draw whose dev score beats every earlier draw's can be that best, so the test
    accuracy is kept for those draws alone (``draws["test"]``, keyed by draw index)."""
    i = max(range(k), key=lambda j: (draws["dev"][j], -j))
    return draws["test"][str(i)]


def tune(names, grids: dict, seeds, budget: int) -> tuple[dict, dict]:
    """Every cell of ``grids[name]`` (product of its axes) on ``seeds``: per-seed accuracies by
    the method's own rule, and the chosen cell (best mean; ties to the first cell)."""
    cells: dict[str, dict[str, list[float]]] = {}
    jobs = [(n, pt) for n in names for pt in itertools.product(*grids[n])]
    for n, pt in tqdm(jobs, desc=f"tuning at {budget}"):
        cells.setdefault(n, {})[json.dumps(list(pt))] = [run_arm(n, s, pt, budget)["acc"] for s in seeds]
    chosen = {n: json.loads(max(c, key=lambda k: sum(c[k]) / len(c[k]))) for n, c in cells.items()}
    return cells, chosen


def neighbours(v: float, axis: tuple[float, ...]) -> tuple[float, ...]:
    """``v`` and its neighbours on ``axis``; past an end of the axis, the end step repeated."""
    i = axis.index(v)
    lo = axis[i - 1] if i > 0 else round(v * v / axis[1], 6)
    hi = axis[i + 1] if i + 1 < len(axis) else round(v * v / axis[-2], 6)
    return (lo, v, hi)


def big_grid(chosen300: dict) -> dict:
    """The 1000-query grid of every arm: its 300-query optimum and neighbours on each axis."""
    return {n: tuple(neighbours(v, ax) for v, ax in zip(chosen300[n], grid_of(n)[1])) for n in BIG_ARMS}


def code_sha256() -> str:
    """sha256 of what determines both records (docstrings and comments excluded), with constants."""
    src = [strip_source(inspect.getsource(m)) for m in (api, cmaes, methods, policy, prompts, zo)]
    src += [strip_source(inspect.getsource(f)) for f in
            (study.config, tpl.setup, bud.setup, grid_of, polar_mass, run_arm, reference_draws, best_of_k,
             tune, neighbours, big_grid, make_checks, make_big)]
    consts = dict(TEMPLATE_T=tpl.TEMPLATE_T, EXCLUDE_T=tpl.EXCLUDE_T, TASK=study.TASK, DEV_K=bud.DEV_K,
                  N_TEST=study.N_TEST, N_POS=study.N_POS, N_CAND=study.N_CAND, D=study.D_INTRINSIC,
                  MU=study.MU, BASE=str(study.BASE), GRIDS=bud.GRIDS_B, tune=bud.TUNE_SEEDS_B,
                  seeds=bud.EVAL_SEEDS_B, K=bud.BEST_OF_K, OFF=bud.RANDOM_OFFSET, MASS=MASS_SEEDS,
                  HALF=HALF, HALF_ARMS=HALF_ARMS, BIG=BIG, BIG_ARMS=BIG_ARMS, TB=TUNE_SEEDS_BIG,
                  SB=SEEDS_BIG, AT=AT, POS=sorted(POSITIVE), NEG=sorted(NEGATIVE))
    return bytes_sha256(("\n".join(src) + json.dumps(consts, sort_keys=True, default=str)).encode())


def make_checks(budget_record: dict) -> dict:
    """Items 1-3 of the module docstring; ``budget_record``: the small-budget study's record."""
    t0 = time.process_time()
    seeds = bud.EVAL_SEEDS_B
    ref = {str(s): reference_draws(s) for s in tqdm(seeds, desc="random draws")}
    chosen = budget_record["chosen"]
    rerun = {n: {str(s): run_arm(n, s, tuple(chosen[n]), bud.BUDGET_B) for s in tqdm(MASS_SEEDS, desc=n)}
             for n in POLICY_ARMS}
    cells, ng = tune((NO_GUMBEL,), {NO_GUMBEL: grid_of(NO_GUMBEL)[1]}, bud.TUNE_SEEDS_B, bud.BUDGET_B)
    runs = {NO_GUMBEL: {str(s): run_arm(NO_GUMBEL, s, tuple(ng[NO_GUMBEL]), bud.BUDGET_B)
                        for s in tqdm(seeds, desc="no Gumbel, own cell")}}
    half = {n: {str(s): run_arm(n, s, tuple(chosen[n]), HALF) for s in tqdm(seeds, desc=f"{n} half")}
            for n in HALF_ARMS}
    record = {"recipe": "python -m iclr25.blackbox.zo_pog_budget2 checks (one torch thread, one process)",
              "code_sha256": code_sha256(), "budget_record_sha256": budget_record["sha256"],
              "seeds": list(seeds), "mass_seeds": list(MASS_SEEDS), "half": HALF,
              "reference_draws": ref, "rerun": rerun, "no_gumbel_tuning": cells,
              "no_gumbel_chosen": ng[NO_GUMBEL], "no_gumbel": runs[NO_GUMBEL], "half_runs": half,
              "cpu_s": round(time.process_time() - t0, 1)}
    record["sha256"] = record_sha256(record)
    return record


def make_big(budget_record: dict, checks_record: dict) -> dict:
    """Item 4 of the module docstring: re-tune every arm at :data:`BIG` queries, then evaluate."""
    t0 = time.process_time()
    chosen300 = dict(budget_record["chosen"], **{NO_GUMBEL: checks_record["no_gumbel_chosen"]})
    grids = big_grid(chosen300)
    cells, chosen = tune(BIG_ARMS, grids, TUNE_SEEDS_BIG, BIG)
    runs = {n: {str(s): run_arm(n, s, tuple(chosen[n]), BIG) for s in tqdm(SEEDS_BIG, desc=f"{n} at {BIG}")}
            for n in BIG_ARMS}
    record = {"recipe": "python -m iclr25.blackbox.zo_pog_budget2 big (one torch thread, one process)",
              "code_sha256": code_sha256(), "budget_record_sha256": budget_record["sha256"],
              "checks_record_sha256": checks_record["sha256"], "budget": BIG,
              "tune_seeds": list(TUNE_SEEDS_BIG), "seeds": list(SEEDS_BIG),
              "grids": {n: [list(ax) for ax in g] for n, g in grids.items()}, "tuning": cells,
              "chosen": chosen, "runs": runs, "cpu_s": round(time.process_time() - t0, 1)}
    record["sha256"] = record_sha256(record)
    return record


EXTEND_MAX = 2                              # outward extensions of a 1000-query grid at most
RECORD_EXT = Path(__file__).parent / "results" / "zo-pog-budget-1000x.json"


def extend_grid(point: list, axes: list[list[float]]) -> list[list[float]] | None:
    """``axes`` with one more value past each end that ``point`` sits on (the end step repeated);
    ``None`` if ``point`` is interior on every axis."""
    out, moved = [list(ax) for ax in axes], False
    for i, (v, ax) in enumerate(zip(point, axes)):
        j = list(ax).index(v)
        if j == 0:
            out[i] = [round(ax[0] * ax[0] / ax[1], 6)] + out[i]
            moved = True
        elif j == len(ax) - 1:
            out[i] = out[i] + [round(ax[-1] * ax[-1] / ax[-2], 6)]
            moved = True
    return out if moved else None


def make_ext(big_record: dict) -> dict:
    """Item 4's grids extended: while an arm's chosen cell lies on its grid's edge (at most
    :data:`EXTEND_MAX` times), add the next value outward on that axis, tune the new cells on
    :data:`TUNE_SEEDS_BIG` and choose again (best mean, ties to the first cell); an arm whose
    chosen cell changed is evaluated on :data:`SEEDS_BIG` at the new cell."""
    t0 = time.process_time()
    grids = {n: [list(ax) for ax in g] for n, g in big_record["grids"].items()}
    cells = {n: dict(c) for n, c in big_record["tuning"].items()}
    chosen = dict(big_record["chosen"])
    for n in tqdm(BIG_ARMS, desc="extending grids"):
        for _ in range(EXTEND_MAX):
            wider = extend_grid(chosen[n], grids[n])
            if wider is None:
                break
            grids[n] = wider
            for pt in itertools.product(*wider):
                key = json.dumps(list(pt))
                if key not in cells[n]:
                    cells[n][key] = [run_arm(n, s, pt, BIG)["acc"] for s in TUNE_SEEDS_BIG]
            chosen[n] = json.loads(max(cells[n], key=lambda k: sum(cells[n][k]) / len(cells[n][k])))
    runs = {n: {str(s): run_arm(n, s, tuple(chosen[n]), BIG) for s in tqdm(SEEDS_BIG, desc=f"{n} at its new cell")}
            for n in BIG_ARMS if chosen[n] != big_record["chosen"][n]}
    src = [strip_source(inspect.getsource(f)) for f in (extend_grid, make_ext)]
    record = {"recipe": "python -m iclr25.blackbox.zo_pog_budget2 extend (one torch thread, one process)",
              "code_sha256": bytes_sha256((code_sha256() + "\n".join(src) + str(EXTEND_MAX)).encode()),
              "big_record_sha256": big_record["sha256"], "grids": grids, "tuning": cells, "chosen": chosen,
              "runs": runs, "cpu_s": round(time.process_time() - t0, 1)}
    record["sha256"] = record_sha256(record)
    return record


def ext_code_sha256() -> str:
    """The fingerprint :func:`make_ext` writes: the records' code plus the extension's."""
    src = [strip_source(inspect.getsource(f)) for f in (extend_grid, make_ext)]
    return bytes_sha256((code_sha256() + "\n".join(src) + str(EXTEND_MAX)).encode())


def load_ext(path: Path = RECORD_EXT) -> dict:
    """The committed record of the extended 1000-query grids, refused if edited."""
    return load_record(path, "python -m iclr25.blackbox.zo_pog_budget2 extend")


def load_checks(path: Path = RECORD_CHECKS) -> dict:
    """The committed record of items 1-3, refused if its content does not match its sha256."""
    return load_record(path, "python -m iclr25.blackbox.zo_pog_budget2 checks")


def load_big(path: Path = RECORD_BIG) -> dict:
    """The committed 1000-query record, refused if its content does not match its sha256."""
    return load_record(path, "python -m iclr25.blackbox.zo_pog_budget2 big")


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "checks"
    if which == "checks":
        rec = make_checks(bud.load())
        RECORD_CHECKS.write_text(json.dumps(rec, separators=(",", ":")) + "\n")
    elif which == "big":
        rec = make_big(bud.load(), load_checks())
        RECORD_BIG.write_text(json.dumps(rec, separators=(",", ":")) + "\n")
    else:
        rec = make_ext(load_big())
        RECORD_EXT.write_text(json.dumps(rec, separators=(",", ":")) + "\n")
    print(rec.get("no_gumbel_chosen", rec.get("chosen")), rec["cpu_s"], "s CPU")
