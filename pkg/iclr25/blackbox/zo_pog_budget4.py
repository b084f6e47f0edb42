"""The paper's budget: a 4000-query leg of the 128-dev shared-template study of ``theory/zo-pog``.

The 1000-query study (:mod:`iclr25.blackbox.zo_pog_budget2`) leaves ZO-PoG's discrete block
(the no-continuous arm) still gaining between 500 and 1000 queries and not detectably better
than random search at its own number of dev evaluations. This leg asks whether that is a budget
effect, at the paper's own budget of :data:`BIG4` = 4000 queries. Everything below is fixed in this
file before its run:

* **Arms and cells.** The six arms of the 1000-query study (:data:`ARMS`). Each is re-tuned on
  :data:`TUNE_SEEDS4` (the 1000-query study's tuning seeds) over its 1000-query optimum (after that
  study's grid extensions) and that value's neighbours on each axis, by the test accuracy of its own
  deployment rule (best mean, ties to the first cell); an optimum on an edge of that grid is extended
  outward once (:data:`EXTEND4`) and re-chosen. Each arm then runs at its cell on :data:`SEEDS4`,
  the 60 evaluation seeds of the 1000-query study (disjoint from the tuning seeds).
* **Learning curve.** Each run keeps its test accuracy under the best-dev prompt found within each
  of :data:`AT4` queries, its final policy's entropy (nats per position, mean over positions) and
  its mass on the positive and negative adjectives.
* **Random-search bar.** :data:`K4` random prompts per seed (z = 0), drawn by the generator of the
  study's reference, scored on dev; best-on-dev of the first k is read at each token learner's own
  number of dev evaluations (:func:`iclr25.blackbox.zo_pog_budget2.best_of_k`).
* **Reading (:func:`read4`).** The gate: the discrete block (no-continuous) beats best-of-own-k random
  prompts at 4000 queries when the 95% CI of its paired gain over the 60 seeds lies above 0. The
  paper rows are ZO-PoG's paired gains over the other arms, read by the 1000-query study's
  family-wise rule (``analyse.family``); the chapter prints them beside the 1000-query verdicts.

``python -m iclr25.blackbox.zo_pog_budget4`` writes ``results/zo-pog-budget-4000.json``; one
process, one torch thread; the record holds the sha256 of its content and of the code that made it.
"""

from __future__ import annotations

import inspect
import itertools
import json
import math
import time
from pathlib import Path

import torch
from tqdm.auto import tqdm

from iclr25.blackbox import zo_pog_budget as bud
from iclr25.blackbox import zo_pog_budget2 as b2
from iclr25.blackbox import zo_pog_study as study
from iclr25.blackbox.api import BlackBoxLM
from iclr25.blackbox.methods import run_bbt, run_bdpl, run_zo_pog
from iclr25.common.digest import bytes_sha256, load_record, record_sha256, strip_source

BIG4 = 4000
ARMS = b2.BIG_ARMS
TUNE_SEEDS4 = b2.TUNE_SEEDS_BIG             # (100, 101, 102)
SEEDS4 = b2.SEEDS_BIG                       # seeds 200-259
AT4 = (150, 300, 500, 1000, 2000, 4000)
K4 = 256                                    # random prompts per seed for the bar
EXTEND4 = 1                                 # outward extensions of an edge optimum at most
TOKEN_LEARNERS = ("ZO-PoG no continuous", "BDPL")
N_ROWS = 6                                  # paper rows in the Bonferroni family
RECORD4 = Path(__file__).parent / "results" / "zo-pog-budget-4000.json"


def entropy(probs: torch.Tensor) -> float:
    """Mean over positions of the entropy (nats) of a policy ``probs`` (n_pos, V)."""
    p = probs.clamp_min(0)
    return float(-(p * torch.where(p > 0, p.log(), torch.zeros_like(p))).sum(-1).mean())


def run4(name: str, s: int, point: tuple, budget: int = BIG4, device: torch.device | str = "cpu") -> dict:
    """One run of ``name`` at ``point`` on seed ``s`` of the 128-dev shared-template setting with
    ``budget`` queries: as :func:`iclr25.blackbox.zo_pog_budget2.run_arm`, with the curve at
    :data:`AT4` and the final policy's entropy."""
    torch.set_num_threads(1)
    lm, vocab = study.model_and_vocab()
    enc, cands, A = bud.setup(s, device)
    r2 = lambda x: round(float(x), 2)  # noqa: E731
    bb = BlackBoxLM(lm, vocab, study.TASK, budget, device=device)
    cfg = study.config("ZO-PoG" if name == b2.NO_GUMBEL else name, point)
    args = (bb, enc["train"], enc["dev"], enc["test"], cands, study.N_POS)
    if name == "BDPL":
        r = run_bdpl(*args, cfg, seed=s)
    elif name == "BBT":
        r = run_bbt(*args, A, cfg, seed=s)
    else:
        r = run_zo_pog(*args, A, cfg, seed=s, discrete=name != "ZO-only", gumbel=name != b2.NO_GUMBEL,
                       continuous=name != "ZO-PoG no continuous", name=name)
    out = {"acc": r2(100 * r.primary.test_acc), "n_dev_evals": len(r.primary.curve),
           "at": {str(q): r2(100 * r.primary.test_at(q)) for q in AT4 if q <= budget},
           "queries": r.queries, "leak": any(p.grad is not None for p in lm.parameters())}
    if "mode" in r.selections and r.primary is not r.selections["mode"]:
        out["mode"] = r2(100 * r.selections["mode"].test_acc)
    if r.probs is not None:
        out["entropy"] = round(entropy(r.probs), 4)
        out["pos_mass"], out["neg_mass"] = (round(m, 4) for m in b2.polar_mass(r.probs, cands))
    return out


def random_draws(s: int, k: int = K4, device: torch.device | str = "cpu") -> dict:
    """Dev accuracy (%) of ``k`` random prompts of seed ``s`` (z = 0, the reference's generator) and
    test accuracy of each draw that leads all earlier draws on dev."""
    torch.set_num_threads(1)
    lm, vocab = study.model_and_vocab()
    enc, cands, _ = bud.setup(s, device)
    bb = BlackBoxLM(lm, vocab, study.TASK, 0, device=device)
    gen = torch.Generator().manual_seed(bud.RANDOM_OFFSET + s)
    P = cands[torch.randint(cands.numel(), (k, study.N_POS), generator=gen)]
    dev = [round(100 * bb.evaluate(p, None, enc["dev"]), 2) for p in P]
    leaders = [i for i in range(len(dev)) if all(dev[i] > d for d in dev[:i])]
    return {"dev": dev, "test": {str(i): round(100 * bb.evaluate(P[i], None, enc["test"]), 2) for i in leaders}}


def grid4(chosen1000: dict, axes1000: dict) -> dict:
    """Each arm's 4000-query grid: its 1000-query optimum and that value's neighbours on each axis."""
    return {n: [list(b2.neighbours(v, tuple(ax))) for v, ax in zip(chosen1000[n], axes1000[n])] for n in ARMS}


def read4(record: dict, family) -> dict:
    """The pre-registered reading of the record: the gate (each token learner's paired gain over
    best-of-own-k random prompts, mean and 95% CI, via ``family(diffs, 1)``) and ZO-PoG's paired
    gains over every other arm with the paper rows' family-wise interval (``family(diffs, N_ROWS)``).

    ``family(diffs, m)`` returns (mean, lo, hi) of the paired differences with a Bonferroni
    interval over ``m`` comparisons."""
    runs, seeds = record["runs"], [str(s) for s in record["seeds"]]
    gate = {}
    for n in TOKEN_LEARNERS:
        d = [runs[n][s]["acc"] - b2.best_of_k(record["random"][s], runs[n][s]["n_dev_evals"]) for s in seeds]
        gate[n] = family(d, 1)
    others = [n for n in ARMS if n != "ZO-PoG"]
    gains = {n: family([runs["ZO-PoG"][s]["acc"] - runs[n][s]["acc"] for s in seeds], N_ROWS)
             for n in others}
    return {"gate": gate, "learns": gate["ZO-PoG no continuous"][1] > 0, "gains": gains}


def code_sha256() -> str:
    """The 1000-query records' code fingerprint plus this leg's functions and constants."""
    src = [strip_source(inspect.getsource(f)) for f in (entropy, run4, random_draws, grid4, read4, make4)]
    consts = dict(BIG4=BIG4, ARMS=ARMS, T=TUNE_SEEDS4, S=SEEDS4, AT4=AT4, K4=K4, E=EXTEND4, TL=TOKEN_LEARNERS, N=N_ROWS)
    return bytes_sha256((b2.code_sha256() + b2.ext_code_sha256() + "\n".join(src)
                         + json.dumps(consts, sort_keys=True)).encode())


def make4(ext_record: dict, log: Path | None = None) -> dict:
    """Tune (with at most :data:`EXTEND4` extension), evaluate and score random prompts."""
    t0 = time.process_time()
    grids = grid4(ext_record["chosen"], ext_record["grids"])
    cells: dict[str, dict[str, list[float]]] = {}
    chosen: dict[str, list[float]] = {}

    def fill(n: str) -> None:
        for pt in itertools.product(*grids[n]):
            key = json.dumps(list(pt))
            if key not in cells.setdefault(n, {}):
                cells[n][key] = [run4(n, s, pt)["acc"] for s in TUNE_SEEDS4]
        chosen[n] = json.loads(max(cells[n], key=lambda k: sum(cells[n][k]) / len(cells[n][k])))

    for n in tqdm(ARMS, desc="tuning at 4000"):
        fill(n)
        for _ in range(EXTEND4):
            wider = b2.extend_grid(chosen[n], grids[n])
            if wider is None:
                break
            grids[n] = wider
            fill(n)
        if log:
            log.write_text(json.dumps({"chosen": chosen, "cpu_s": time.process_time() - t0}))
    runs = {}
    for n in ARMS:
        runs[n] = {str(s): run4(n, s, tuple(chosen[n])) for s in tqdm(SEEDS4, desc=f"{n} at {BIG4}")}
        if log:
            log.write_text(json.dumps({"chosen": chosen, "done": list(runs), "cpu_s": time.process_time() - t0}))
    rand = {str(s): random_draws(s) for s in tqdm(SEEDS4, desc="random prompts")}
    record = {"recipe": "python -m iclr25.blackbox.zo_pog_budget4 (one torch thread, one process)",
              "code_sha256": code_sha256(), "ext_record_sha256": ext_record["sha256"], "budget": BIG4,
              "tune_seeds": list(TUNE_SEEDS4), "seeds": list(SEEDS4), "grids": grids, "tuning": cells,
              "chosen": chosen, "runs": runs, "random": rand, "cpu_s": round(time.process_time() - t0, 1)}
    record["sha256"] = record_sha256(record)
    return record


def load4(path: Path = RECORD4) -> dict:
    """The committed 4000-query record, refused if its content does not match its sha256."""
    return load_record(path, "python -m iclr25.blackbox.zo_pog_budget4")


if __name__ == "__main__":
    rec = make4(b2.load_ext(), Path("/tmp/zp/budget4-progress.json"))
    RECORD4.write_text(json.dumps(rec, separators=(",", ":")) + "\n")
    print(rec["chosen"], rec["cpu_s"], "s CPU")
