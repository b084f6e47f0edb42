"""Fairness controls of ``theory/zo-pog``: a white-box ceiling, BDPL's official update, the policy's
concentration, and the random-search bar of the untouched-start study.

Everything below is fixed in this file before its run (``python -m iclr25.blackbox.zo_pog_fair``
writes ``results/zo-pog-fair.json``; one process, one torch thread; the record holds the sha256 of
its content and of the code that made it):

1. **White-box ceiling** of the 128-dev shared-template study (:func:`whitebox`): Adam on z with the
   *exact* gradient of the training loss (:data:`WB_STEPS` steps, the step chosen among :data:`WB_LRS`
   on the tuning seeds by mean test accuracy over the three token sets; the dev set selects among
   the iterates every 10 steps and z = 0, as for the black-box methods), on three token sets of each
   seed: BBT's fixed tokens, ZO-PoG's deployed tokens (its paper-rule draw, from a re-run at its
   chosen cell that must reproduce the record) and the best on dev of the 64 random prompts of the
   study's reference. The seed's **ceiling** is the white-box accuracy of the token set whose
   white-box dev score is best (ties to the first set). At 1000 queries and at 300 (ZO-PoG's tokens of
   that budget), both on the 60 seeds of the 1000-query study (:data:`CEIL_SEEDS`, seeds 200-259).
   A NO for a row needs **room**: the 95% CI of the ceiling minus the row's other arm lies above
   +1 point, so a gain of a point was reachable (read by the chapter).
2. **BDPL with its official update** (:func:`run_bdpl_official`): the signed derivative (+1/p at the
   sampled candidate, -1/p at the others), the baseline-corrected average over the I samples, the
   gradient norm clipped at :data:`CLIP`, an AdamW step (PyTorch's defaults otherwise) and the
   projection back onto the simplices. Tuned at 1000 queries over :data:`BDPL_LRS` on the tuning
   seeds (an edge optimum extended outward once), evaluated on the 60 seeds of the 1000-query study.
   The chapter's "beats BDPL" row at 1000 queries reads this arm (the baseline as its authors
   run it); the plain projected-gradient BDPL is printed beside it.
3. **How concentrated the policies get** (:func:`policy_log`): for the tuned cells at 1000 queries of
   ZO-PoG, its no-continuous ablation and both BDPLs, on :data:`LOG_SEEDS`, the policy's entropy
   (nats per position; ZO-PoG's of alpha / sum alpha) and the share of its weights at the clip
   (alpha at alpha_min; a BDPL probability at 0) after policy steps :data:`LOG_STEPS` and the last.
4. **Random search in the untouched-start study**: the 64 committed random prompts of each of its 50
   seeds (:mod:`iclr25.blackbox.zo_pog_random`) scored on its 32-example dev set, so that the best on
   dev of the first k can be read at each token learner's own number of dev evaluations.
"""

from __future__ import annotations

import inspect
import itertools
import json
import math
import time
from contextlib import contextmanager
from pathlib import Path

import torch
from tqdm.auto import tqdm

from iclr25.blackbox import policy as pol
from iclr25.blackbox import zo_pog_budget as bud
from iclr25.blackbox import zo_pog_budget2 as b2
from iclr25.blackbox import zo_pog_random
from iclr25.blackbox import zo_pog_study as study
from iclr25.blackbox.api import BlackBoxLM, BudgetExceeded, prompted_logits
from iclr25.blackbox.methods import RunResult, _minibatches, _Tracker, run_bdpl, run_zo_pog
from iclr25.common.digest import bytes_sha256, load_record, record_sha256, strip_source
from iclr25.lm import VERBALIZERS

WB_STEPS = 100
WB_LRS = (3e-3, 1e-2, 3e-2)
TOKEN_SETS = ("BBT", "ZO-PoG", "random")
CLIP = 3.0
BDPL_LRS = (1e-3, 3e-3, 1e-2, 3e-2, 1e-1)
BDPL_OFF = "BDPL official"
CEIL_SEEDS = b2.SEEDS_BIG
LOG_SEEDS = b2.SEEDS_BIG[:10]
LOG_STEPS = (1, 2, 5)
RECORD = Path(__file__).parent / "results" / "zo-pog-fair.json"


def whitebox(s: int, prompt: torch.Tensor, lr: float, device: torch.device | str = "cpu") -> tuple[float, float]:
    """Adam on z with exact gradients for the fixed tokens ``prompt`` on seed ``s`` of the 128-dev
    shared-template setting: (dev, test) accuracy (%) of the dev-selected iterate."""
    torch.manual_seed(s)
    lm, vocab = study.model_and_vocab()
    enc, _, A = bud.setup(s, device)
    A = A.to(device)
    bb = BlackBoxLM(lm, vocab, study.TASK, 0, device=device)
    verbalizer = torch.tensor(vocab.encode(list(VERBALIZERS[study.TASK])), device=device)
    train, p = enc["train"], prompt.to(device)[None]
    z = torch.zeros(A.shape[1], device=device, requires_grad=True)
    opt = torch.optim.Adam([z], lr=lr)
    best_dev, best_z = -1.0, z.detach().clone()
    for step in range(WB_STEPS + 1):
        if step % 10 == 0:
            zc = z.detach().clone()
            dev = bb.evaluate(prompt, (A @ zc).view(study.N_POS, -1).cpu(), enc["dev"])
            if dev > best_dev:
                best_dev, best_z = dev, zc
        if step == WB_STEPS:
            break
        logits = prompted_logits(lm, vocab.bos_id, p, (A @ z).view(1, study.N_POS, -1), train.body.to(device),
                                 train.lengths.to(device), verbalizer)[0]
        loss = torch.nn.functional.cross_entropy(logits, train.labels.to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
    for q in lm.parameters():
        q.grad = None
    return 100 * best_dev, 100 * bb.evaluate(prompt, (A @ best_z).view(study.N_POS, -1).cpu(), enc["test"])


def token_sets(s: int, point: tuple, budget: int, ref_dev: list[float]) -> tuple[dict, float]:
    """Seed ``s``'s three token sets (BBT's fixed tokens, ZO-PoG's paper-rule tokens from a run at
    ``point`` with ``budget`` queries, the best-on-dev random prompt given the reference's dev
    scores ``ref_dev``) and that ZO-PoG run's test accuracy (%)."""
    torch.set_num_threads(1)
    lm, vocab = study.model_and_vocab()
    enc, cands, A = bud.setup(s)
    gen = torch.Generator().manual_seed(s)
    bbt = cands[torch.randint(cands.numel(), (study.N_POS,), generator=gen)]
    bb = BlackBoxLM(lm, vocab, study.TASK, budget)
    r = run_zo_pog(bb, enc["train"], enc["dev"], enc["test"], cands, study.N_POS, A, study.config("ZO-PoG", point),
                   seed=s)
    gen = torch.Generator().manual_seed(bud.RANDOM_OFFSET + s)
    P = cands[torch.randint(cands.numel(), (max(bud.BEST_OF_K), study.N_POS), generator=gen)]
    best = max(range(len(ref_dev)), key=lambda i: (ref_dev[i], -i))
    return {"BBT": bbt, "ZO-PoG": r.primary.prompt, "random": P[best]}, round(100 * r.primary.test_acc, 2)


def ceiling_runs(seeds, point: tuple, budget: int, ref: dict, lr: float) -> dict:
    """Per seed: the re-run ZO-PoG's accuracy and each token set's white-box (dev, test) at step ``lr``."""
    out = {}
    for s in tqdm(seeds, desc=f"white box, {budget} queries"):
        sets, acc = token_sets(s, point, budget, ref[str(s)]["dev"])
        out[str(s)] = {"zo_pog_acc": acc} | {k: [round(x, 2) for x in whitebox(s, p, lr)] for k, p in sets.items()}
    return out


def ceiling_of(run: dict) -> float:
    """A seed's ceiling: the white-box test accuracy of the token set with the best white-box dev score."""
    k = max(TOKEN_SETS, key=lambda t: (run[t][0], -TOKEN_SETS.index(t)))
    return run[k][1]


def entropy_and_clip(p: torch.Tensor, clip: torch.Tensor) -> tuple[float, float]:
    """Mean entropy (nats) over positions of the rows of ``p`` (n, V), and the share of ``clip`` (bool)."""
    lp = torch.where(p > 0, p.log(), torch.zeros_like(p))
    return round(float(-(p * lp).sum(-1).mean()), 4), round(float(clip.double().mean()), 4)


def run_bdpl_official(bb: BlackBoxLM, train, dev, test, candidates: torch.Tensor, n_pos: int, lr: float, *,
                      batch_size: int, n_samples: int, seed: int = 0, log: list | None = None) -> RunResult:
    """BDPL with its authors' update (item 2 of the module docstring); deployed at the mode (argmax
    of p, scored on dev after every pass). ``log`` collects (entropy, share at 0) after every step."""
    gen = torch.Generator().manual_seed(seed)
    V = candidates.numel()
    p = torch.full((n_pos, V), 1.0 / V, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.AdamW([p], lr=lr)
    track = _Tracker(bb, dev, test, lambda z: None)
    trace: dict[str, list[float]] = {"queries": [], "loss": []}
    try:
        for batch, end_of_pass in _minibatches(train, batch_size, gen):
            J = torch.multinomial(p.detach(), n_samples, replacement=True, generator=gen).T   # (I, n)
            losses, _ = bb.query(candidates[J], None, batch)
            L = losses.mean(1).to(p.dtype)
            onehot = torch.nn.functional.one_hot(J, V).to(p.dtype)                        # (I, n, V)
            deriv = (2 * onehot - 1) / p.detach().clamp_min(1e-12)                           # +1/p sampled, -1/p else
            opt.zero_grad()
            p.grad = ((L - L.mean())[:, None, None] * deriv).sum(0) / (n_samples - 1)
            torch.nn.utils.clip_grad_norm_([p], CLIP)
            opt.step()
            with torch.no_grad():
                p.copy_(pol.project_simplex(p))
            if log is not None:
                log.append(entropy_and_clip(p.detach(), p.detach() <= 0))
            trace["queries"].append(bb.n_queries)
            trace["loss"].append(float(losses.mean()))
            if end_of_pass:
                track(candidates[p.detach().argmax(-1)], None)
    except BudgetExceeded:
        pass
    track(candidates[p.detach().argmax(-1)], None)
    return RunResult(BDPL_OFF, bb.n_queries, {"mode": track.best}, trace, p.detach().clone())


def bdpl_official(s: int, lr: float, budget: int = b2.BIG, log: list | None = None) -> dict:
    """One run of :func:`run_bdpl_official` on seed ``s`` of the 128-dev shared-template setting."""
    torch.set_num_threads(1)
    lm, vocab = study.model_and_vocab()
    enc, cands, _ = bud.setup(s)
    bb = BlackBoxLM(lm, vocab, study.TASK, budget)
    r = run_bdpl_official(bb, enc["train"], enc["dev"], enc["test"], cands, study.N_POS, lr,
                          batch_size=study.BASE.batch_size, n_samples=study.BASE.n_samples, seed=s, log=log)
    return {"acc": round(100 * r.primary.test_acc, 2), "n_dev_evals": len(r.primary.curve), "queries": r.queries,
            "leak": any(q.grad is not None for q in lm.parameters())}


@contextmanager
def logged_steps(log: list):
    """Record (entropy, share at the clip) after every step of both policy classes, unchanged otherwise."""
    cat, sim = pol.CategoricalPromptPolicy.step, pol.SimplexPromptPolicy.step

    def cat_step(self, *a, **k):
        g = cat(self, *a, **k)
        log.append(entropy_and_clip(self.alpha / self.alpha.sum(-1, keepdim=True), self.alpha <= self.alpha_min))
        return g

    def sim_step(self, *a, **k):
        g = sim(self, *a, **k)
        log.append(entropy_and_clip(self.probs, self.probs <= 0))
        return g

    pol.CategoricalPromptPolicy.step, pol.SimplexPromptPolicy.step = cat_step, sim_step
    try:
        yield log
    finally:
        pol.CategoricalPromptPolicy.step, pol.SimplexPromptPolicy.step = cat, sim


def pick(log: list) -> dict:
    """The logged (entropy, share) after steps :data:`LOG_STEPS` and the last."""
    return {str(i): log[i - 1] for i in LOG_STEPS if i <= len(log)} | {"last": log[-1], "steps": len(log)}


def policy_log(chosen: dict, bdpl_lr: float) -> dict:
    """Item 3: per arm and seed of :data:`LOG_SEEDS`, the picked log and the run's accuracy."""
    out: dict[str, dict] = {}
    for n in ("ZO-PoG", "ZO-PoG no continuous", "BDPL", BDPL_OFF):
        for s in tqdm(LOG_SEEDS, desc=f"policy log {n}"):
            log: list = []
            if n == BDPL_OFF:
                acc = bdpl_official(s, bdpl_lr, log=log)["acc"]
            else:
                with logged_steps(log):
                    acc = b2.run_arm(n, s, tuple(chosen[n]), b2.BIG)["acc"]
            out.setdefault(n, {})[str(s)] = pick(log) | {"acc": acc}
    return out


def untouched_dev(s: int) -> list[float]:
    """Item 4: dev accuracy (%) of the 64 committed random prompts of untouched-start seed ``s`` (z = 0)."""
    torch.set_num_threads(1)
    lm, vocab = study.model_and_vocab()
    enc, _, _ = study.setup(s)
    bb = BlackBoxLM(lm, vocab, study.TASK, 0)
    return [round(100 * bb.evaluate(p, None, enc["dev"]), 2) for p in zo_pog_random.random_prompts(s)]


def code_sha256() -> str:
    """The 1000-query records' code fingerprint plus this module's functions and constants."""
    src = [strip_source(inspect.getsource(f)) for f in
           (whitebox, token_sets, ceiling_runs, ceiling_of, entropy_and_clip, run_bdpl_official, bdpl_official,
            logged_steps, pick, policy_log, untouched_dev, make)]
    src += [strip_source(inspect.getsource(f)) for f in (zo_pog_random.random_prompts, study._setup)]
    consts = dict(WB_STEPS=WB_STEPS, WB_LRS=WB_LRS, TS=TOKEN_SETS, CLIP=CLIP, LRS=BDPL_LRS, LOG=LOG_SEEDS, CS=CEIL_SEEDS,
                  STEPS=LOG_STEPS, OFF=zo_pog_random.SEED_OFFSET, SEEDS=study.EVAL_SEEDS)
    return bytes_sha256((b2.code_sha256() + b2.ext_code_sha256() + "\n".join(src)
                         + json.dumps(consts, sort_keys=True, default=str)).encode())


def make() -> dict:
    """Items 1-4 of the module docstring."""
    t0 = time.process_time()
    torch.set_num_threads(1)
    BUD, CHK, EXT = bud.load(), b2.load_checks(), b2.load_ext()
    ref = CHK["reference_draws"]
    untouched = {str(s): untouched_dev(s) for s in tqdm(study.EVAL_SEEDS, desc="untouched-start random prompts")}
    # 1. white-box step on the tuning seeds (their ZO-PoG tokens at 1000 queries), then the ceilings
    tune_ref = {str(s): {"dev": b2.reference_draws(s)["dev"]} for s in b2.TUNE_SEEDS_BIG}
    sets = {s: token_sets(s, tuple(EXT["chosen"]["ZO-PoG"]), b2.BIG, tune_ref[str(s)]["dev"])[0]
            for s in b2.TUNE_SEEDS_BIG}
    wb_tuning = {str(lr): [round(whitebox(s, p, lr)[1], 2) for s in b2.TUNE_SEEDS_BIG for p in sets[s].values()]
                 for lr in tqdm(WB_LRS, desc="white-box step")}
    wb_lr = float(max(wb_tuning, key=lambda k: sum(wb_tuning[k]) / len(wb_tuning[k])))
    ceiling = {"1000": ceiling_runs(CEIL_SEEDS, tuple(EXT["chosen"]["ZO-PoG"]), b2.BIG, ref, wb_lr),
               "300": ceiling_runs(CEIL_SEEDS, tuple(BUD["chosen"]["ZO-PoG"]), bud.BUDGET_B, ref, wb_lr)}
    # 2. BDPL with the official update
    grid, cells = list(BDPL_LRS), {}
    for _ in range(2):
        for lr in grid:
            if str(lr) not in cells:
                cells[str(lr)] = [bdpl_official(s, lr)["acc"] for s in b2.TUNE_SEEDS_BIG]
        best = float(max(cells, key=lambda k: sum(cells[k]) / len(cells[k])))
        i = grid.index(best)
        if 0 < i < len(grid) - 1:
            break
        grid = [round(grid[0] ** 2 / grid[1], 8)] + grid if i == 0 else grid + [round(grid[-1] ** 2 / grid[-2], 8)]
    runs = {str(s): bdpl_official(s, best) for s in tqdm(b2.SEEDS_BIG, desc="BDPL official")}
    logs = policy_log(EXT["chosen"], best)
    record = {"recipe": "python -m iclr25.blackbox.zo_pog_fair (one torch thread, one process)",
              "code_sha256": code_sha256(), "ext_record_sha256": EXT["sha256"], "checks_record_sha256": CHK["sha256"],
              "wb_tuning": wb_tuning, "wb_lr": wb_lr, "ceiling": ceiling,
              "bdpl_grid": grid, "bdpl_tuning": cells, "bdpl_lr": best, "bdpl_runs": runs,
              "policy_log": logs, "untouched_dev": untouched, "cpu_s": round(time.process_time() - t0, 1)}
    record["sha256"] = record_sha256(record)
    return record


def load(path: Path = RECORD) -> dict:
    """The committed record, refused if its content does not match its sha256."""
    return load_record(path, "python -m iclr25.blackbox.zo_pog_fair")


if __name__ == "__main__":
    rec = make()
    RECORD.write_text(json.dumps(rec, separators=(",", ":")) + "\n")
    print(rec["wb_lr"], rec["bdpl_lr"], rec["cpu_s"], "s CPU")
