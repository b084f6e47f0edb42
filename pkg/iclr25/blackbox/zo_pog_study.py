"""The stand-in study of the chapter ``theory/zo-pog``: its setup, one run, tuning and evaluation.

Every method sees the same input layout ``<bos> p_1 … p_4  sentence ?``: four learnable prompt
positions, then the sentence; **no fixed template**. The task needs two things a prompt must
supply: the *cue word* that names the task (``sentiment``/``feeling``; without it the model answers
the wrong question), which only a discrete token provides (a random subspace of dimension
``D_INTRINSIC`` = 8 of the 192-dimensional prompt embeddings cannot imitate a word), and a
*calibration* of the decision on mixed sentences (the downstream convention labels them ``good``),
which the candidate words cannot give (no polar adjective among them) but a continuous offset can.
The candidates are the instruction words and the four cue words of the language, and PMI words of
the training set that are not polar adjectives.

Two package scripts write committed records (each with the sha256 of its content,
:func:`iclr25.common.digest.json_sha256`, and the sha256 of the code that made it,
:func:`code_sha256`):

* ``python -m iclr25.blackbox.zo_pog_study tune``: every grid cell of every method runs the
  whole budget on each tuning seed (100, 101, 102, apart from the evaluation seeds); the mean test
  accuracy per cell and the chosen cell per method go to ``results/zo-pog-tuning.json``.
* ``python -m iclr25.blackbox.zo_pog_study evaluate``: every method at its chosen cell on the
  evaluation seeds 0-49, a per-run summary (:func:`summarize`) to ``results/zo-pog-eval.json``;
  the chapter re-runs a few seeds live and compares the summaries exactly.

One torch thread per run, two worker processes, ``nice -n 10``.
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import json
import math
import multiprocessing
import sys
import time
from pathlib import Path

import torch

from iclr25.blackbox import api, cmaes, methods, policy, prompts, zo
from iclr25.blackbox.api import BlackBoxLM, encode_task, prompted_logits
from iclr25.blackbox.methods import PromptTuningConfig, evaluate_manual, run_bbt, run_bdpl, run_zo_pog
from iclr25.blackbox.prompts import pmi_candidates, random_projection
from iclr25.common.digest import bytes_sha256, json_sha256
from iclr25.lm import CUES, VERBALIZERS, few_shot_split, pretrained_toy_lm, toy_vocab
from iclr25.lm.language import INSTRUCTION_WORDS, NEGATIVE, POSITIVE

TASK = "sentiment"
TEMPLATE: tuple[str, ...] = ()              # no fixed template: the cue word must come from the prompt
MANUAL = "please tell sentiment now"        # the hand-written prompt (holds the cue word)
BUDGET = 1000                               # training queries per run (the paper's api_limit: 4000)
N_TEST = 500
N_POS, N_CAND, D_INTRINSIC = 4, 30, 8       # prompt length n, candidates V, dim of z
LEXICON = list(INSTRUCTION_WORDS) + [w for cues in CUES.values() for w in cues]   # 15 + 4 cue words
EXCLUDE = LEXICON + list(POSITIVE) + list(NEGATIVE)   # the PMI words: no polar adjective
BASE = PromptTuningConfig(batch_size=16)
MU = 1e-1
LR_ALPHA, LR_Z = (1e-2, 3e-2, 1e-1, 3e-1, 1.0, 3.0), (3e-3, 1e-2, 3e-2, 1e-1, 3e-1, 1.0)
GRIDS = {  # name: (axis names, axis values); the grid is their product, log-spaced by factors of 3
    "ZO-PoG": (("lr_alpha", "lr_z"), (LR_ALPHA, LR_Z)),
    "ZO-PoG no continuous": (("lr_alpha",), (LR_ALPHA,)),   # all queries to the policy: its own step
    "ZO-only": (("lr_z",), (LR_Z,)),        # exactly ZO-PoG's eta_z: the two differ only by the policy
    "BDPL": (("lr_bdpl",), ((3e-3, 1e-2, 3e-2, 1e-1, 3e-1),)),
    "BBT": (("sigma0",), ((1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1, 1.0),)),
}
ABLATIONS = ("ZO-PoG no Gumbel",)           # ZO-PoG minus the Gumbel noise, at ZO-PoG's settings
ON_MANUAL = {"BBT on Manual": "BBT", "ZO-only on Manual": "ZO-only"}   # z-optimisers from the manual tokens
EVAL_METHODS = tuple(GRIDS) + ABLATIONS + tuple(ON_MANUAL)
TUNE_SEEDS = (100, 101, 102)
EVAL_SEEDS = tuple(range(50))
Q_GRID = tuple(range(100, BUDGET + 1, 100))  # query counts at which a run's best-dev accuracy is kept
WB_STEPS, WB_LR = 100, 1e-2                 # the white-box reference: Adam on z with exact gradients
RESULTS = Path(__file__).parent / "results" / "zo-pog-tuning.json"
EVAL = Path(__file__).parent / "results" / "zo-pog-eval.json"

_STATE: dict = {}


def config(name: str, point: tuple) -> PromptTuningConfig:
    """The hyperparameters of ``name`` (a method or an ablation) at one grid point."""
    name = ON_MANUAL.get(name, name)
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
    manual = torch.tensor(vocab.encode(MANUAL)) if name in ON_MANUAL else None
    if name == "BDPL":
        r = run_bdpl(*args, cfg, seed=s)
    elif ON_MANUAL.get(name, name) == "BBT":
        r = run_bbt(*args, A, cfg, seed=s, prompt=manual)
    else:
        base = ON_MANUAL.get(name, name)
        r = run_zo_pog(*args, A, cfg, seed=s, discrete=base != "ZO-only", gumbel=name != "ZO-PoG no Gumbel",
                       continuous=name != "ZO-PoG no continuous", name=name, prompt=manual)
    return r, any(p.grad is not None for p in lm.parameters())


def matched_acc(r) -> float:
    """Test accuracy (%) of a run under the matched deployment rule: the policy's mode for every
    method with a policy, the fixed tokens otherwise."""
    return 100 * (r.selections["mode"] if "mode" in r.selections else r.primary).test_acc


def chosen_point(name: str, tuning: dict) -> tuple:
    """The grid point a method runs at: its own tuned cell; an ablation takes ZO-PoG's, a
    z-optimiser started from the manual tokens takes its method's."""
    return tuple(tuning["chosen"]["ZO-PoG" if name in ABLATIONS else ON_MANUAL.get(name, name)])


def _tune_one(job):
    r, _ = run(job)
    return matched_acc(r), 100 * r.test_acc


def code_sha256() -> str:
    """sha256 over the source of the code that determines a run: the black box, the optimisers,
    the estimators, and this study's setup, configuration, run, summary and white-box reference (with
    its constants)."""
    consts = dict(TASK=TASK, TEMPLATE=TEMPLATE, MANUAL=MANUAL, BUDGET=BUDGET, N_TEST=N_TEST, N_POS=N_POS,
                  N_CAND=N_CAND, D=D_INTRINSIC, LEXICON=LEXICON, EXCLUDE=EXCLUDE, BASE=dataclasses.asdict(BASE),
                  MU=MU, GRIDS=GRIDS, Q_GRID=Q_GRID, WB=(WB_STEPS, WB_LR))
    src = [inspect.getsource(m) for m in (api, cmaes, methods, policy, prompts, zo)]
    src += [inspect.getsource(f) for f in (config, _setup, run, matched_acc, summarize, whitebox_z)]
    return bytes_sha256(("\n".join(src) + json.dumps(consts, sort_keys=True, default=str)).encode())


def _record_digest(record: dict) -> str:
    return json_sha256({k: v for k, v in record.items() if k not in ("sha256", "cpu_s_main", "wall_s")})


def tune(processes: int = 2) -> dict:
    """Run every grid cell on every tuning seed, in one run of this script; return the record
    written to :data:`RESULTS`."""
    t0 = time.process_time(), time.time()
    for s in TUNE_SEEDS:
        setup(s)
    jobs = [(name, s, pt) for name, (_, values) in GRIDS.items()
            for pt in itertools.product(*values) for s in TUNE_SEEDS]
    with multiprocessing.get_context("fork").Pool(processes) as pool:
        accs = pool.map(_tune_one, jobs)
    cells: dict[str, dict[str, list[float]]] = {}
    own: dict[str, dict[str, list[float]]] = {}
    for (name, s, pt), (a, a_own) in zip(jobs, accs):
        cells.setdefault(name, {}).setdefault(json.dumps(list(pt)), []).append(round(a, 4))
        own.setdefault(name, {}).setdefault(json.dumps(list(pt)), []).append(round(a_own, 4))
    chosen = {name: json.loads(max(c, key=lambda k: sum(c[k]) / len(c[k]))) for name, c in cells.items()}
    record = {
        "recipe": "nice -n 10 python -m iclr25.blackbox.zo_pog_study tune (one torch thread per run, "
                  f"{processes} processes, one run of the script)",
        "code_sha256": code_sha256(),
        "task": TASK, "template": list(TEMPLATE), "budget": BUDGET, "n_test": N_TEST,
        "n_pos": N_POS, "n_cand": N_CAND, "d": D_INTRINSIC, "mu": MU, "batch_size": BASE.batch_size,
        "tune_seeds": list(TUNE_SEEDS),
        "grids": {name: {"axes": list(axes), "values": [list(v) for v in values]}
                  for name, (axes, values) in GRIDS.items()},
        "selection": "mean test accuracy over the tuning seeds under the matched rule (mode of a policy)",
        "test_acc": cells, "test_acc_own_rule": own, "chosen": chosen,
        "cpu_s_main": round(time.process_time() - t0[0], 1), "wall_s": round(time.time() - t0[1], 1),
    }
    record["sha256"] = _record_digest(record)
    return record


def whitebox_z(s: int, prompt: torch.Tensor, device: torch.device | str = "cpu") -> float:
    """The white-box ceiling of the continuous part: Adam on z (``WB_STEPS`` steps of step
    ``WB_LR``, from z = 0) with the *exact* gradient of the training loss through the model, for the
    fixed tokens ``prompt``; the dev set selects among the iterates (every 10 steps, and z = 0) as in
    the black-box methods. Returns the test accuracy (%) of the selected z."""
    torch.manual_seed(s)
    lm, vocab = model_and_vocab()
    enc, _, A = setup(s, device)
    A = A.to(device)
    bb = BlackBoxLM(lm, vocab, TASK, 0, device=device)
    verbalizer = torch.tensor(vocab.encode(list(VERBALIZERS[TASK])), device=device)
    train, p = enc["train"], prompt.to(device)[None]
    z = torch.zeros(A.shape[1], device=device, requires_grad=True)
    opt = torch.optim.Adam([z], lr=WB_LR)
    best_dev, best_z = -1.0, z.detach().clone()
    for step in range(WB_STEPS + 1):
        if step % 10 == 0:
            zc = z.detach().clone()
            dev = bb.evaluate(prompt, (A @ zc).view(N_POS, -1).cpu(), enc["dev"])
            if dev > best_dev:
                best_dev, best_z = dev, zc
        if step == WB_STEPS:
            break
        logits = prompted_logits(lm, vocab.bos_id, p, (A @ z).view(1, N_POS, -1), train.body.to(device),
                                 train.lengths.to(device), verbalizer)[0]
        loss = torch.nn.functional.cross_entropy(logits, train.labels.to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
    for q in lm.parameters():
        q.grad = None
    return 100 * bb.evaluate(prompt, (A @ best_z).view(N_POS, -1).cpu(), enc["test"])


def summarize(name: str, s: int, point: tuple | None, device: torch.device | str = "cpu") -> dict:
    """What the evaluation keeps of one run (and what the chapter re-computes live to compare):
    test accuracy (%) under the matched rule and, for a Gumbel policy, the paper's draw rule; the
    best-dev test accuracy within each of :data:`Q_GRID` queries; the deployed prompt. ZO-PoG adds
    its deployed tokens' accuracy with z = 0 and the white-box ceiling of z on those tokens.
    ``name = "Manual"`` (no run, ``point`` ignored) gives the per-seed references: the manual
    prompt, the untouched start (the seed's random fixed tokens, z = 0), the majority class, and the
    white-box ceiling of z on the manual tokens."""
    lm, vocab = model_and_vocab()
    enc, cands, A = setup(s, device)
    r2 = lambda x: None if x != x else round(float(x), 2)  # noqa: E731  (nan -> None)
    bb = BlackBoxLM(lm, vocab, TASK, 0, device=device)
    if name == "Manual":
        manual = torch.tensor(vocab.encode(MANUAL))
        gen = torch.Generator().manual_seed(s)   # the fixed tokens of BBT and ZO-only on this seed
        start = cands[torch.randint(cands.numel(), (N_POS,), generator=gen)]
        frac = float(enc["test"].labels.float().mean())
        return {"acc": r2(100 * evaluate_manual(bb, enc["dev"], enc["test"], manual).test_acc),
                "start": r2(100 * bb.evaluate(start, None, enc["test"])), "start_prompt": vocab.decode(start),
                "majority": r2(100 * max(frac, 1 - frac)), "wb": r2(whitebox_z(s, manual, device))}
    r, leak = run((name, s, point), device)
    sel = r.selections["mode"] if "mode" in r.selections else r.primary
    out = {"acc": r2(100 * sel.test_acc), "at": [r2(100 * sel.test_at(q)) for q in Q_GRID],
           "prompt": vocab.decode(sel.prompt), "leak": leak, "queries": r.queries}
    if "draw" in r.selections:
        d = r.selections["draw"]
        out |= {"draw": r2(100 * d.test_acc), "draw_at": [r2(100 * d.test_at(q)) for q in Q_GRID]}
    if name == "ZO-PoG":
        out |= {"no_z": r2(100 * bb.evaluate(sel.prompt, None, enc["test"])),
                "wb": r2(whitebox_z(s, sel.prompt, device))}
    return out


def _eval_one(job):
    name, s, point = job
    torch.set_num_threads(1)
    return summarize(name, s, point)


def evaluate(processes: int = 2, seeds: tuple[int, ...] = EVAL_SEEDS) -> dict:
    """Every method at its chosen cell of the committed tuning on every evaluation seed; return the
    record written to :data:`EVAL`."""
    t0 = time.process_time(), time.time()
    tuning = load_tuning()
    for s in seeds:
        setup(s)
    jobs = [(name, s, chosen_point(name, tuning)) for s in seeds for name in EVAL_METHODS]
    jobs += [("Manual", s, None) for s in seeds]
    with multiprocessing.get_context("fork").Pool(processes) as pool:
        out = pool.map(_eval_one, jobs, chunksize=4)
    runs: dict[str, dict[str, dict]] = {}
    for (name, s, _), o in zip(jobs, out):
        runs.setdefault(name, {})[str(s)] = o
    record = {
        "recipe": "nice -n 10 python -m iclr25.blackbox.zo_pog_study evaluate (one torch thread per run, "
                  f"{processes} processes)",
        "code_sha256": code_sha256(), "tuning_sha256": tuning["sha256"], "seeds": list(seeds),
        "points": {name: list(chosen_point(name, tuning)) for name in EVAL_METHODS},
        "q_grid": list(Q_GRID), "runs": runs,
        "cpu_s_main": round(time.process_time() - t0[0], 1), "wall_s": round(time.time() - t0[1], 1),
    }
    record["sha256"] = _record_digest(record)
    return record


def load_tuning(path: Path = RESULTS) -> dict:
    """The committed tuning record, refused if its content does not match its sha256."""
    return _load(path)


def load_eval(path: Path = EVAL) -> dict:
    """The committed evaluation record, refused if its content does not match its sha256."""
    return _load(path)


def _load(path: Path) -> dict:
    record = json.loads(Path(path).read_text())
    digest = _record_digest(record)
    if digest != record["sha256"]:
        raise ValueError(f"{path}: content sha256 {digest[:12]}… differs from its record "
                         f"{record['sha256'][:12]}…; re-run python -m iclr25.blackbox.zo_pog_study")
    return record


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "tune"
    rec, path = (tune(), RESULTS) if what == "tune" else (evaluate(), EVAL)
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(rec, indent=None, separators=(",", ":")) + "\n")
    print(rec.get("chosen", ""), rec["wall_s"], "s wall", rec["cpu_s_main"], "s CPU (main)")
