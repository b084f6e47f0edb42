"""The stand-in study of the chapter ``theory/zo-pog``: its setup, one run, and the tuning script.

Every method sees the same input layout ``<bos> p_1 … p_4  sentiment  sentence ?``: four learnable
prompt positions, then a fixed template naming the task (the cue word ``sentiment``, outside the
learnable positions, the role of ``TEMPLATE_CONFIG`` in the official code), then the sentence. The
candidates of the learnable positions are the instruction words of the language (no cue word) and
words of high label PMI, so the discrete search looks for words that *calibrate* the decision.

Tuning (``python -m iclr25.blackbox.zo_pog_study``): every grid cell of every method runs the whole
budget on each tuning seed (100, 101, 102, apart from the evaluation seeds 0-19); the mean test
accuracy per cell, the chosen cell per method and the recipe are written to
``results/zo-pog-tuning.json`` with the sha256 of the record (:func:`iclr25.common.digest.json_sha256`).
One torch thread per run, two worker processes; about 100 s of CPU.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import multiprocessing
import time
from pathlib import Path

import torch

from iclr25.blackbox.api import BlackBoxLM, encode_task
from iclr25.blackbox.methods import PromptTuningConfig, run_bbt, run_bdpl, run_zo_pog
from iclr25.blackbox.prompts import pmi_candidates, random_projection
from iclr25.common.digest import json_sha256
from iclr25.lm import CUES, few_shot_split, pretrained_toy_lm, toy_vocab
from iclr25.lm.language import INSTRUCTION_WORDS

TASK = "sentiment"
TEMPLATE = (CUES[TASK][0],)                 # the fixed template: names the task, never optimised
BUDGET = 1000                               # training queries per run (the paper's api_limit: 4000)
N_TEST = 500
N_POS, N_CAND, D_INTRINSIC = 4, 30, 50      # prompt length n, candidates V, dim of z
LEXICON = list(INSTRUCTION_WORDS)           # candidate words besides PMI (no cue word)
EXCLUDE = LEXICON + [w for cues in CUES.values() for w in cues]
BASE = PromptTuningConfig(batch_size=16)
MU = 1e-1
LR_ALPHA, LR_Z = (1e-2, 3e-2, 1e-1, 3e-1, 1.0, 3.0), (3e-3, 1e-2, 3e-2, 1e-1, 3e-1, 1.0)
GRIDS = {  # name: (axis names, axis values); the grid is their product, log-spaced by factors of 3
    "ZO-PoG": (("lr_alpha", "lr_z"), (LR_ALPHA, LR_Z)),
    "ZO-only": (("lr_z",), (LR_Z,)),        # exactly ZO-PoG's eta_z: the two differ only by the policy
    "BDPL": (("lr_bdpl",), ((1e-2, 3e-2, 1e-1, 3e-1),)),
    "BBT": (("sigma0",), ((3e-3, 1e-2, 3e-2, 1e-1, 3e-1, 1.0),)),
}
ABLATIONS = ("ZO-PoG no Gumbel", "ZO-PoG no continuous")   # ZO-PoG minus one part, ZO-PoG's settings
TUNE_SEEDS = (100, 101, 102)
RESULTS = Path(__file__).parent / "results" / "zo-pog-tuning.json"

_STATE: dict = {}


def config(name: str, point: tuple) -> PromptTuningConfig:
    """The hyperparameters of ``name`` (a method or an ablation) at one grid point."""
    grid = GRIDS["ZO-PoG" if name in ABLATIONS else name]
    extra = dict(mu=MU) if "lr_z" in grid[0] else {}
    return dataclasses.replace(BASE, **dict(zip(grid[0], point)), **extra)


def model_and_vocab():
    """The committed toy LM and its vocabulary (loaded once per process)."""
    if "lm" not in _STATE:
        _STATE["vocab"] = toy_vocab()
        _STATE["lm"], _STATE["lm_info"] = pretrained_toy_lm(progress=False)
    return _STATE["lm"], _STATE["vocab"]


def lm_source() -> str:
    """Where the toy LM came from: 'committed', 'cache' or 'trained'."""
    model_and_vocab()
    return _STATE["lm_info"]["source"]


def setup(s: int, device: torch.device | str = "cpu"):
    """Data (with the template), candidate tokens and projection for one seed (shared by all
    methods; cached per process, so forked workers share it)."""
    cache = _STATE.setdefault("setups", {})
    if s not in cache:
        cache[s] = _setup(s, device)
    return cache[s]


def _setup(s: int, device: torch.device | str):
    lm, vocab = model_and_vocab()
    split = few_shot_split(TASK, 16, N_TEST, s, ties="positive")
    enc = {k: encode_task(vocab, v, TEMPLATE) for k, v in split.items()}
    pmi = pmi_candidates(split["train"].sentences, split["train"].labels.tolist(),
                         N_CAND - len(LEXICON), exclude=EXCLUDE)
    cands = torch.tensor(vocab.encode(LEXICON + pmi))
    probe = BlackBoxLM(lm, vocab, TASK, 0, device=device)
    A = random_projection(N_POS, probe.embed_dim, D_INTRINSIC, probe.embedding_std,
                          alpha=100 * math.sqrt(D_INTRINSIC / 500),
                          generator=torch.Generator().manual_seed(s))
    return enc, cands, A


def run(job, device: torch.device | str = "cpu"):
    """One run: ``job`` = (method, seed, grid point), on a fresh black box with the whole budget.
    Returns the result and whether a gradient reached the model's parameters."""
    name, s, point = job
    torch.set_num_threads(1)
    lm, vocab = model_and_vocab()
    enc, cands, A = setup(s, device)
    cfg = config(name, point)
    bb = BlackBoxLM(lm, vocab, TASK, BUDGET, device=device)
    args = (bb, enc["train"], enc["dev"], enc["test"], cands, N_POS)
    if name == "BDPL":
        r = run_bdpl(*args, cfg, seed=s)
    elif name == "BBT":
        r = run_bbt(*args, A, cfg, seed=s)
    else:
        r = run_zo_pog(*args, A, cfg, seed=s, discrete=name != "ZO-only", gumbel=name != "ZO-PoG no Gumbel",
                       continuous=name != "ZO-PoG no continuous", name=name)
    return r, any(p.grad is not None for p in lm.parameters())


def matched_acc(r) -> float:
    """Test accuracy (%) of a run under the matched deployment rule: the policy's mode for every
    method with a policy, the fixed tokens otherwise."""
    return 100 * (r.selections["mode"] if "mode" in r.selections else r.primary).test_acc


def _tune_one(job):
    r, _ = run(job)
    return matched_acc(r), 100 * r.test_acc


def tune(processes: int = 2, previous: dict | None = None) -> dict:
    """Run every grid cell on every tuning seed; return the record written to :data:`RESULTS`.
    Cells already in ``previous`` (a record of the same recipe, e.g. before a grid was widened) are
    taken from it instead of being run again (every run is deterministic given its seed and cell)."""
    t0 = time.process_time(), time.time()
    for s in TUNE_SEEDS:
        setup(s)
    jobs = [(name, s, pt) for name, (_, values) in GRIDS.items()
            for pt in itertools.product(*values) for s in TUNE_SEEDS]
    old = {}
    if previous is not None:
        for name, c in previous["test_acc"].items():
            for k, v in c.items():
                for s, a, a_own in zip(previous["tune_seeds"], v, previous["test_acc_own_rule"][name][k]):
                    old[name, s, tuple(json.loads(k))] = (a, a_own)
    todo = [j for j in jobs if j not in old]
    with multiprocessing.get_context("fork").Pool(processes) as pool:
        new = dict(zip(todo, pool.map(_tune_one, todo)))
    accs = [old[j] if j in old else new[j] for j in jobs]
    cells: dict[str, dict[str, list[float]]] = {}
    own: dict[str, dict[str, list[float]]] = {}
    for (name, s, pt), (a, a_own) in zip(jobs, accs):
        cells.setdefault(name, {}).setdefault(json.dumps(list(pt)), []).append(round(a, 4))
        own.setdefault(name, {}).setdefault(json.dumps(list(pt)), []).append(round(a_own, 4))
    chosen = {name: json.loads(max(c, key=lambda k: sum(c[k]) / len(c[k]))) for name, c in cells.items()}
    record = {
        "recipe": "python -m iclr25.blackbox.zo_pog_study (one torch thread per run, 2 processes)",
        "task": TASK, "template": list(TEMPLATE), "budget": BUDGET, "n_test": N_TEST,
        "n_pos": N_POS, "n_cand": N_CAND, "d": D_INTRINSIC, "mu": MU, "batch_size": BASE.batch_size,
        "tune_seeds": list(TUNE_SEEDS),
        "grids": {name: {"axes": list(axes), "values": [list(v) for v in values]}
                  for name, (axes, values) in GRIDS.items()},
        "selection": "mean test accuracy over the tuning seeds under the matched rule (mode of a policy)",
        "test_acc": cells, "test_acc_own_rule": own, "chosen": chosen,
        "cpu_s_main": round(time.process_time() - t0[0], 1), "wall_s": round(time.time() - t0[1], 1),
    }
    record["sha256"] = json_sha256({k: v for k, v in record.items() if k not in ("sha256", "cpu_s_main", "wall_s")})
    return record


def load_tuning(path: Path = RESULTS) -> dict:
    """The committed tuning record, refused if its content does not match its sha256."""
    record = json.loads(Path(path).read_text())
    digest = json_sha256({k: v for k, v in record.items() if k not in ("sha256", "cpu_s_main", "wall_s")})
    if digest != record["sha256"]:
        raise ValueError(f"{path}: content sha256 {digest[:12]}… differs from its record "
                         f"{record['sha256'][:12]}…; re-run python -m iclr25.blackbox.zo_pog_study")
    return record


if __name__ == "__main__":
    rec = tune(previous=load_tuning() if RESULTS.exists() else None)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(rec, indent=1) + "\n")
    print(json.dumps(rec["chosen"]), rec["wall_s"], "s wall")
