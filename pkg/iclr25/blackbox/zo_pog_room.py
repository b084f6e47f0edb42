"""Is there room for the words in the shared-template instance of ``theory/zo-pog``? A pre-registered pilot.

In the 1000-query shared-template study the words and the continuous prompt z are substitutes: once z
is fitted, which tokens sit in the four positions hardly matters. The cheapest lever that could give
the words a job z cannot do is **z's capacity**. This module fixes, before its run, two room
conditions and a pilot of that lever:

* **(a) room above BBT**: white-box z (Adam on z with exact gradients, dev-selected, as in
  :func:`iclr25.blackbox.zo_pog_fair.whitebox`) on the best words (of BBT's tokens and the best on
  dev at z = 0 of :data:`N_RANDOM` random token sets, the set with the better white-box dev score)
  minus BBT's test accuracy (CMA-ES at its 1000-query cell) is more than :data:`BAR` = 1 point;
* **(b) room for the words**: white-box z on the best on dev of :data:`N_RANDOM` random token sets
  minus white-box z on BBT's tokens is more than :data:`BAR` point.

For a study, both must hold at 95 % (the lower end of a paired t interval above :data:`BAR`). The
pilot (:func:`pilot`) runs each instance of :data:`VARIANTS` (the study's d = 8, and d = 2 with the
same projection scale rule, the convention shift kept: same template, task, candidates) on the
:data:`PILOT_SEEDS` tuning seeds and reads **room** when the mean of both (a) and (b) exceeds
:data:`PILOT_BAR` = 1.5 points (a 3-seed pilot cannot reach 95 %; a mean of 1.5 leaves a 60-seed
study a chance of clearing 1 point). Only a pilot that shows room would justify re-running the
1000-query study and its fairness record on that instance.

``python -m iclr25.blackbox.zo_pog_room`` writes ``results/zo-pog-room.json`` (one process, one
torch thread) with the sha256 of its content and of the functions that made it.
"""

from __future__ import annotations

import inspect
import json
import math
import time
from pathlib import Path

import torch
from tqdm.auto import tqdm

from iclr25.blackbox import zo_pog_budget as bud
from iclr25.blackbox import zo_pog_budget2 as b2
from iclr25.blackbox import zo_pog_study as study
from iclr25.blackbox.api import BlackBoxLM, prompted_logits
from iclr25.blackbox.methods import run_bbt
from iclr25.blackbox.prompts import random_projection
from iclr25.common.digest import bytes_sha256, load_record, record_sha256, strip_source
from iclr25.lm import VERBALIZERS

BAR = 1.0                                   # points of room a study needs (95 %)
PILOT_BAR = 1.5                             # the pilot's bar on the mean of (a) and of (b)
N_RANDOM = 256                              # random token sets screened on dev at z = 0
VARIANTS = {"d=8": 8, "d=2": 2}             # z's dimension; the projection's scale rule is the study's
PILOT_SEEDS = b2.TUNE_SEEDS_BIG             # (100, 101, 102)
WB_STEPS = 100
WB_LRS = (1e-2, 3e-2, 1e-1)                 # the white-box step, chosen per token set by dev
BBT_SIGMA = 0.009                           # BBT's 1000-query cell (zo-pog-budget-1000x.json)
RECORD = Path(__file__).parent / "results" / "zo-pog-room.json"


def projection(s: int, d: int) -> torch.Tensor:
    """Seed ``s``'s random projection for a z of dimension ``d`` (the study's scale rule)."""
    lm, vocab = study.model_and_vocab()
    probe = BlackBoxLM(lm, vocab, study.TASK, 0)
    return random_projection(study.N_POS, probe.embed_dim, d, probe.embedding_std,
                             alpha=100 * math.sqrt(d / 500), generator=torch.Generator().manual_seed(s))


def whitebox_z(s: int, prompt: torch.Tensor, A: torch.Tensor, lr: float) -> tuple[float, float]:
    """Adam on z (exact gradients, :data:`WB_STEPS` steps, dev selection every 10 steps and z = 0)
    for the fixed tokens ``prompt`` (n,) on seed ``s`` of the 128-dev setting: (dev, test) in %."""
    torch.manual_seed(s)
    lm, vocab = study.model_and_vocab()
    enc, _, _ = bud.setup(s)
    bb = BlackBoxLM(lm, vocab, study.TASK, 0)
    verbalizer = torch.tensor(vocab.encode(list(VERBALIZERS[study.TASK])))
    train = enc["train"]
    z = torch.zeros(A.shape[1], requires_grad=True)
    opt = torch.optim.Adam([z], lr=lr)
    best_dev, best_z = -1.0, z.detach().clone()
    for step in range(WB_STEPS + 1):
        if step % 10 == 0:
            zc = z.detach().clone()
            dev = bb.evaluate(prompt, (A @ zc).view(study.N_POS, -1), enc["dev"])
            if dev > best_dev:
                best_dev, best_z = dev, zc
        if step == WB_STEPS:
            break
        logits = prompted_logits(lm, vocab.bos_id, prompt[None], (A @ z).view(1, study.N_POS, -1), train.body,
                                 train.lengths, verbalizer)[0]
        loss = torch.nn.functional.cross_entropy(logits, train.labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
    for q in lm.parameters():
        q.grad = None
    return 100 * best_dev, 100 * bb.evaluate(prompt, (A @ best_z).view(study.N_POS, -1), enc["test"])


def best_lr(s: int, prompt: torch.Tensor, A: torch.Tensor) -> tuple[float, float]:
    """:func:`whitebox_z` at the step of :data:`WB_LRS` with the best dev score (ties to the first)."""
    runs = [whitebox_z(s, prompt, A, lr) for lr in WB_LRS]
    return max(runs, key=lambda r: r[0])


def token_sets(s: int) -> tuple[torch.Tensor, torch.Tensor, float]:
    """BBT's fixed tokens of seed ``s``, the best on dev (z = 0) of :data:`N_RANDOM` random sets (the
    first 64 are the study's reference prompts), and that set's dev accuracy (%)."""
    lm, vocab = study.model_and_vocab()
    enc, cands, _ = bud.setup(s)
    bbt = cands[torch.randint(cands.numel(), (study.N_POS,), generator=torch.Generator().manual_seed(s))]
    gen = torch.Generator().manual_seed(bud.RANDOM_OFFSET + s)
    P = cands[torch.randint(cands.numel(), (N_RANDOM, study.N_POS), generator=gen)]
    bb = BlackBoxLM(lm, vocab, study.TASK, 0)
    dev = [bb.evaluate(p, None, enc["dev"]) for p in P]
    i = max(range(N_RANDOM), key=lambda j: (dev[j], -j))
    return bbt, P[i], round(100 * dev[i], 2)


def bbt_acc(s: int, A: torch.Tensor, budget: int = b2.BIG) -> float:
    """BBT's test accuracy (%) on seed ``s`` with projection ``A`` at :data:`BBT_SIGMA`, ``budget`` queries."""
    lm, vocab = study.model_and_vocab()
    enc, cands, _ = bud.setup(s)
    bb = BlackBoxLM(lm, vocab, study.TASK, budget)
    r = run_bbt(bb, enc["train"], enc["dev"], enc["test"], cands, study.N_POS, A,
                study.config("BBT", (BBT_SIGMA,)), seed=s)
    return round(100 * r.primary.test_acc, 2)


def room(run: dict) -> tuple[float, float]:
    """One seed's (a) and (b) in points from its white-box (dev, test) pairs and BBT's accuracy."""
    best = run["random"] if run["random"][0] > run["BBT_tokens"][0] else run["BBT_tokens"]
    return best[1] - run["BBT"], run["random"][1] - run["BBT_tokens"][1]


def t_interval(x: list[float], level: float = 0.95) -> tuple[float, float, float]:
    """Mean and two-sided t interval of the paired differences ``x``."""
    from scipy import stats
    t = torch.tensor(x, dtype=torch.float64)
    m, n = float(t.mean()), len(x)
    if n < 2:
        return m, float("nan"), float("nan")
    h = float(stats.t.ppf(0.5 + level / 2, n - 1)) * float(t.std()) / math.sqrt(n)
    return m, m - h, m + h


def verdict(runs: dict, *, pilot: bool) -> dict:
    """(a) and (b) over the seeds of ``runs``: means, 95 % intervals and whether room is shown
    (pilot: both means above :data:`PILOT_BAR`; study: both lower ends above :data:`BAR`)."""
    a, b = zip(*(room(r) for r in runs.values()))
    ia, ib = t_interval(list(a)), t_interval(list(b))
    ok = (ia[0] > PILOT_BAR and ib[0] > PILOT_BAR) if pilot else (ia[1] > BAR and ib[1] > BAR)
    return {"a": [round(v, 2) for v in ia], "b": [round(v, 2) for v in ib], "room": bool(ok)}


def pilot(seeds=PILOT_SEEDS) -> dict:
    """Per variant and seed: white-box (dev, test) on BBT's tokens and on the best random set, and BBT."""
    torch.set_num_threads(1)
    out: dict = {}
    for s in tqdm(seeds, desc="room pilot"):
        bbt_tokens, rnd, rnd_dev = token_sets(s)
        for name, d in VARIANTS.items():
            A = projection(s, d)
            out.setdefault(name, {})[str(s)] = {
                "BBT_tokens": [round(v, 2) for v in best_lr(s, bbt_tokens, A)],
                "random": [round(v, 2) for v in best_lr(s, rnd, A)],
                "random_dev_z0": rnd_dev, "BBT": bbt_acc(s, A)}
    return out


def code_sha256() -> str:
    """The functions that make the record and its constants."""
    src = [strip_source(inspect.getsource(f)) for f in
           (projection, whitebox_z, best_lr, token_sets, bbt_acc, pilot, bud.setup, study.config)]
    consts = dict(BAR=BAR, PB=PILOT_BAR, N=N_RANDOM, V=VARIANTS, S=PILOT_SEEDS, ST=WB_STEPS, L=WB_LRS,
                  SIG=BBT_SIGMA, OFF=bud.RANDOM_OFFSET, BIG=b2.BIG, BASE=str(study.BASE))
    return bytes_sha256(("\n".join(src) + json.dumps(consts, sort_keys=True, default=str)).encode())


def make() -> dict:
    """The pilot's record."""
    t0 = time.process_time()
    runs = pilot()
    record = {"recipe": "python -m iclr25.blackbox.zo_pog_room (one torch thread, one process)",
              "code_sha256": code_sha256(), "seeds": list(PILOT_SEEDS), "variants": VARIANTS, "runs": runs,
              "verdicts": {n: verdict(r, pilot=True) for n, r in runs.items()},
              "cpu_s": round(time.process_time() - t0, 1)}
    record["sha256"] = record_sha256(record)
    return record


def load(path: Path = RECORD) -> dict:
    """The committed record, refused if its content does not match its sha256."""
    return load_record(path, "python -m iclr25.blackbox.zo_pog_room")


if __name__ == "__main__":
    rec = make()
    RECORD.write_text(json.dumps(rec, separators=(",", ":")) + "\n")
    print(json.dumps(rec["verdicts"]), rec["cpu_s"], "s CPU")
