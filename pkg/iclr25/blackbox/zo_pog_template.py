"""The paper's setting for the chapter ``theory/zo-pog``: a shared hand-written template.

Every method sees ``<bos> p_1 … p_4  please tell sentiment now  sentence ?``: the hand-written
prompt of :mod:`iclr25.blackbox.zo_pog_study` as a fixed template shared by all, plus four learnable
positions. ZO-PoG learns the positions' tokens and the continuous prompt z; BBT and ZO-only learn z
on the template (their four positions stay at one random draw of candidates); BDPL and ZO-PoG
without its continuous part learn tokens only. The candidates are the 19 instruction and cue words
and the 11 words of highest label PMI on the training set, **polar adjectives included** (the
paper builds its candidates by PMI). Same toy LM, budget, data splits and projection as the study.

``python -m iclr25.blackbox.zo_pog_template`` tunes every method's grid (:data:`GRIDS_T`, the
study's grids with eta_z extended to 3 and BDPL's step down to 3e-4; ZO-PoG on the product
eta_alpha x eta_z) on the tuning seeds 100-102 (mean test accuracy under the
matched rule), then evaluates every method at its chosen cell on the evaluation seeds 0-49, in one
process with one torch thread, and writes ``results/zo-pog-template.json`` with the sha256 of its
content and of the code that made it (docstrings and comments excluded).
"""

from __future__ import annotations

import inspect
import itertools
import json
import math
import time
from pathlib import Path

import torch

from iclr25.blackbox import api, cmaes, methods, policy, prompts, zo
from iclr25.blackbox import zo_pog_study as study
from iclr25.blackbox.api import BlackBoxLM, encode_task
from iclr25.blackbox.methods import run_bbt, run_bdpl, run_zo_pog
from iclr25.blackbox.prompts import pmi_candidates, random_projection
from iclr25.common.digest import bytes_sha256, load_record, record_sha256, strip_source
from iclr25.lm import few_shot_split

TEMPLATE_T = tuple(study.MANUAL.split())     # the shared template: the hand-written prompt
EXCLUDE_T = list(study.LEXICON)              # PMI words may be polar adjectives
METHODS = ("ZO-PoG", "ZO-PoG no continuous", "ZO-only", "BDPL", "BBT")
LR_Z_T = study.LR_Z + (3.0,)                 # the study's grids, extended where a one-seed pilot chose an edge
GRIDS_T = {"ZO-PoG": (("lr_alpha", "lr_z"), (study.LR_ALPHA, LR_Z_T)),
           "ZO-PoG no continuous": (("lr_alpha",), (study.LR_ALPHA,)),
           "ZO-only": (("lr_z",), (LR_Z_T,)),
           "BDPL": (("lr_bdpl",), ((3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1),)),
           "BBT": study.GRIDS["BBT"]}
RECORD = Path(__file__).parent / "results" / "zo-pog-template.json"
_SETUPS: dict = {}


def setup(s: int, device: torch.device | str = "cpu"):
    """Data (with the shared template), candidates and projection of seed ``s`` (cached)."""
    if s not in _SETUPS:
        lm, vocab = study.model_and_vocab()
        split = few_shot_split(study.TASK, 16, study.N_TEST, s, ties="positive")
        enc = {k: encode_task(vocab, v, TEMPLATE_T) for k, v in split.items()}
        pmi = pmi_candidates(split["train"].sentences, split["train"].labels.tolist(),
                             study.N_CAND - len(study.LEXICON), exclude=EXCLUDE_T)
        cands = torch.tensor(vocab.encode(study.LEXICON + pmi))
        probe = BlackBoxLM(lm, vocab, study.TASK, 0, device=device)
        A = random_projection(study.N_POS, probe.embed_dim, study.D_INTRINSIC, probe.embedding_std,
                              alpha=100 * math.sqrt(study.D_INTRINSIC / 500),
                              generator=torch.Generator().manual_seed(s))
        _SETUPS[s] = enc, cands, A
    return _SETUPS[s]


def summarize(name: str, s: int, point: tuple | None, device: torch.device | str = "cpu") -> dict:
    """One run of ``name`` at grid point ``point`` on seed ``s``: test accuracy (%) under the matched
    rule (mode of a policy, fixed tokens otherwise) and, with Gumbel noise, the paper's draw; the
    deployed prompt. ``name = "reference"``: the majority class and the untouched start (the seed's
    random tokens of BBT and ZO-only on the template, z = 0)."""
    torch.set_num_threads(1)
    lm, vocab = study.model_and_vocab()
    enc, cands, A = setup(s, device)
    r2 = lambda x: round(float(x), 2)  # noqa: E731
    bb = BlackBoxLM(lm, vocab, study.TASK, study.BUDGET, device=device)
    if name == "reference":
        start = cands[torch.randint(cands.numel(), (study.N_POS,), generator=torch.Generator().manual_seed(s))]
        frac = float(enc["test"].labels.float().mean())
        return {"start": r2(100 * bb.evaluate(start, None, enc["test"])), "majority": r2(100 * max(frac, 1 - frac)),
                "start_prompt": vocab.decode(start)}
    cfg = study.config(name, point)
    args = (bb, enc["train"], enc["dev"], enc["test"], cands, study.N_POS)
    if name == "BDPL":
        r = run_bdpl(*args, cfg, seed=s)
    elif name == "BBT":
        r = run_bbt(*args, A, cfg, seed=s)
    else:
        r = run_zo_pog(*args, A, cfg, seed=s, discrete=name != "ZO-only",
                       continuous=name != "ZO-PoG no continuous", name=name)
    sel = r.selections["mode"] if "mode" in r.selections else r.primary
    out = {"acc": r2(100 * sel.test_acc), "prompt": vocab.decode(sel.prompt), "queries": r.queries,
           "leak": any(p.grad is not None for p in lm.parameters())}
    if "draw" in r.selections:
        out["draw"] = r2(100 * r.selections["draw"].test_acc)
    return out


def code_sha256() -> str:
    """sha256 of what determines the record (docstrings and comments excluded), with the constants."""
    src = [strip_source(inspect.getsource(m)) for m in (api, cmaes, methods, policy, prompts, zo)]
    src += [strip_source(inspect.getsource(f)) for f in (study.config, setup, summarize, make)]
    consts = dict(TEMPLATE_T=TEMPLATE_T, EXCLUDE_T=EXCLUDE_T, METHODS=METHODS, TASK=study.TASK,
                  BUDGET=study.BUDGET, N_TEST=study.N_TEST, N_POS=study.N_POS, N_CAND=study.N_CAND,
                  D=study.D_INTRINSIC, LEXICON=study.LEXICON, MU=study.MU, GRIDS=GRIDS_T,
                  BASE=str(study.BASE), tune=study.TUNE_SEEDS, seeds=study.EVAL_SEEDS)
    return bytes_sha256(("\n".join(src) + json.dumps(consts, sort_keys=True, default=str)).encode())


def _digest(record: dict) -> str:
    return record_sha256(record)


def make(tune_seeds=study.TUNE_SEEDS, seeds=study.EVAL_SEEDS) -> dict:
    """Tune every method on ``tune_seeds``, evaluate at the chosen cells on ``seeds``; the record."""
    t0 = time.process_time()
    cells = {}
    for name in METHODS:
        axes, values = GRIDS_T[name]
        for pt in itertools.product(*values):
            cells.setdefault(name, {})[json.dumps(list(pt))] = [summarize(name, s, pt)["acc"] for s in tune_seeds]
    chosen = {name: json.loads(max(c, key=lambda k: sum(c[k]) / len(c[k]))) for name, c in cells.items()}
    runs = {name: {str(s): summarize(name, s, tuple(chosen[name])) for s in seeds} for name in METHODS}
    runs["reference"] = {str(s): summarize("reference", s, None) for s in seeds}
    record = {"recipe": "nice -n 10 python -m iclr25.blackbox.zo_pog_template (one torch thread, one process)",
              "code_sha256": code_sha256(), "template": list(TEMPLATE_T), "tune_seeds": list(tune_seeds),
              "seeds": list(seeds), "grids": {k: [list(a), [list(v) for v in vals]] for k, (a, vals) in GRIDS_T.items()},
              "tuning": cells, "chosen": chosen, "runs": runs,
              "cpu_s": round(time.process_time() - t0, 1)}
    record["sha256"] = _digest(record)
    return record


def load(path: Path = RECORD) -> dict:
    """The committed record, refused if its content does not match its sha256."""
    return load_record(path, "python -m iclr25.blackbox.zo_pog_template")


if __name__ == "__main__":
    rec = make()
    RECORD.write_text(json.dumps(rec, separators=(",", ":")) + "\n")
    print(rec["chosen"], rec["cpu_s"], "s CPU")
