"""The MiniPLM chapter's synthetic setup and its student grid, run once and committed.

:func:`setup` builds what the chapter builds (the fact corpus, the clean corpus variant, the test set,
the teacher and the two references, cached) and :func:`scores` the one-off inference pass. The
students (tuning grids, every arm on every evaluation seed with loss checkpoints, the alpha sweep,
the clean-corpus variant, no-KD runs of 2x and 4x the steps, and MiniPLM, teacher-only and no KD at
the plateau budget of 4x the steps on fresh noisy and clean corpora, each scored by the same teacher
and reference and read once) take several CPU minutes, more than
the chapter's budget, so ``python -m iclr25.lm.miniplm_runs`` trains them and writes
``weights/miniplm-runs.json`` (recipe, seeds, per-run results, torch version); the chapter loads it
and re-trains a few runs live to show they match (:func:`student_run` is the one function both use).
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from iclr25.common import cached
from iclr25.common.digest import bytes_sha256
from iclr25.lm import distill, model as lm_model, train as lm_train
from iclr25.lm.distill import (answer_mask, difference_scores, document_nll, fact_corpus, fact_table,
                               kd_loss_fn, kd_matched_steps, non_embedding_params, pretrain_on, token_hits,
                               token_nll, top_fraction)
from iclr25.lm.model import TinyLMConfig

RUNS_FILE = Path(__file__).parent / "weights" / "miniplm-runs.json"
SCRIPT = "python -m iclr25.lm.miniplm_runs"

n_keys, n_triples = 12, 21
batch = 32
alpha = 0.5
S = 300                                  # student steps at full scale
N_full = 20_000
lr_grid = [3e-3, 1e-2, 3e-2]             # every cross-entropy arm's grid (tuned on no KD)
kd_lr_grid = [1e-2, 3e-2, 1e-1]          # vanilla KD's grid, with 0.1 so its optimum can be interior
beta_grid = [0.1, 0.2, 0.5]
eval_seeds = [0, 1, 2, 3, 4]
tune_seed = 100
long_steps = [600, 1200]                 # no KD given 2x and 4x the steps, on fresh documents
alpha_sweep = [0.25, 0.75]
every = 50                               # checkpoint interval (steps) for the loss-vs-compute curves
n_curve = 256                            # test documents scored at each checkpoint (all 2000 at the end)
plateau = 1200                           # the budget where no KD's loss has plateaued (4x S): the decisive rows
plateau_corpora = {"noisy": (8, 0.5), "clean": (9, 1.0)}   # fresh corpora (seed, p_clean) of plateau * batch / alpha
CODE = [distill, lm_model, lm_train]


def lm_cfg(vocab: int, T: int, width: int, layers: int, heads: int = 4) -> TinyLMConfig:
    return TinyLMConfig(vocab_size=vocab, d_model=width, n_layers=layers, n_heads=heads, d_ff=4 * width, max_len=T)


def setup(steps: int = S, device: torch.device | str = "cpu") -> SimpleNamespace:
    """Corpora, configurations and the three cached scorer models (teacher, reference, teacher-sized
    reference); ``steps`` sets the students' corpus size N = steps * batch / alpha."""
    table = fact_table(n_keys, seed=0)
    D_all = fact_corpus(N_full, table, n_triples=n_triples, seed=0)
    D_ref = fact_corpus(3000, table, n_triples=n_triples, seed=1)
    D_ref_big = fact_corpus(400 * batch, table, n_triples=n_triples, seed=3)
    test = fact_corpus(2000, table, n_triples=n_triples, seed=2, p_clean=1.0)
    T = D_all.ids.shape[1]
    V = D_all.vocab_size
    N = math.ceil(steps * batch / alpha)
    cfg_teacher, cfg_ref, cfg_student = lm_cfg(V, T, 64, 2), lm_cfg(V, T, 16, 1, heads=2), lm_cfg(V, T, 32, 2)
    recipes = {"teacher": (cfg_teacher, "D", 400, 1e-2), "reference": (cfg_ref, "D_ref", 150, 1e-2),
               "reference (teacher-sized)": (cfg_teacher, "D_ref_big", 400, 1e-2)}
    corpora = {"D": D_all.ids, "D_ref": D_ref.ids, "D_ref_big": D_ref_big.ids}

    def trained(name: str) -> torch.nn.Module:
        cfg, corpus, n_steps, lr = recipes[name]

        def make():
            return pretrain_on(cfg, corpora[corpus], n_steps, lr=lr, seed=0, batch_size=batch)[0].state_dict()

        state = cached("miniplm", name.replace(" ", "-").replace("(", "").replace(")", ""), make,
                       key={"recipe": [str(cfg), corpus, n_steps, lr, batch],
                            "corpus": [N_full, 3000, 400 * batch, n_keys]}, code=CODE)
        m = lm_model.TinyLM(cfg)
        m.load_state_dict(state)
        return m.to(device).eval()

    bins = np.linspace(0, 1, 6)
    d_bin = np.clip(np.digitize(test.difficulty, bins) - 1, 0, len(bins) - 2)
    return SimpleNamespace(table=table, D_all=D_all, D_ref=D_ref, D_ref_big=D_ref_big, test=test, T=T, N=N,
                           D=D_all.subset(np.arange(N)),
                           D_clean=fact_corpus(N, table, n_triples=n_triples, seed=6, p_clean=1.0),
                           cfg_teacher=cfg_teacher, cfg_ref=cfg_ref, cfg_student=cfg_student, recipes=recipes,
                           trained=trained, bins=bins, d_bin=d_bin, device=device)


def plateau_corpus(env: SimpleNamespace, kind: str):
    """The fresh corpus of the plateau budget (``kind`` "noisy" or "clean"): ``plateau * batch / alpha``
    documents, so that D' (the top alpha) is read once in ``plateau`` steps."""
    cseed, p_clean = plateau_corpora[kind]
    return fact_corpus(math.ceil(plateau * batch / alpha), env.table, n_triples=n_triples, seed=cseed, p_clean=p_clean)


def scores(model: torch.nn.Module, ids: torch.Tensor) -> np.ndarray:
    """Per-document NLL (nats/token) of ``model`` on ``ids``: the one-off inference pass."""
    return document_nll(model, ids).cpu().numpy()


def selections(nll: dict[str, np.ndarray], corpus) -> dict[str, np.ndarray]:
    """The kept indices (top alpha) of every selection rule, from the per-document NLLs."""
    t = torch.tensor(nll["teacher"])
    out = {"MiniPLM (r)": difference_scores(t, torch.tensor(nll["reference"])), "teacher only": -t,
           "reference only": torch.tensor(nll["reference"]),
           "random": torch.tensor(np.random.default_rng([GRID_SEED, 5]).random(len(t)))}
    if "reference (teacher-sized)" in nll:
        out["no capacity gap"] = difference_scores(t, torch.tensor(nll["reference (teacher-sized)"]))
        out["oracle (knobs)"] = torch.tensor(corpus.difficulty * (1 - corpus.corruption) ** 3)
    return {k: top_fraction(s, alpha).numpy() for k, s in out.items()}


def evaluate(model: torch.nn.Module, env: SimpleNamespace, n: int | None = None, facts: bool = False) -> dict:
    """Clean test loss, fact exact match and loss per difficulty bin; with ``n``, only the loss on the
    first ``n`` test documents (and their fact exact match when ``facts``)."""
    ids = env.test.ids[:n].to(env.device)
    tok = token_nll(model, ids).cpu()
    fact_ans = answer_mask(env.test.ids[:n])[:, 1:] & (env.test.ids[:n, :-1] < 2 + n_keys)
    if n is not None:
        if not facts:
            return {"loss": float(tok.mean())}
        return {"loss": float(tok.mean()), "fact_acc": float(token_hits(model, ids).cpu()[fact_ans].float().mean())}
    hits = token_hits(model, ids).cpu()
    per_doc = tok.mean(1).numpy()
    return {"loss": float(tok.mean()), "fact_acc": float(hits[fact_ans].float().mean()),
            "per_bin": [float(per_doc[env.d_bin == b].mean()) for b in range(len(env.bins) - 1)]}


def student_run(env: SimpleNamespace, ids: torch.Tensor, steps: int, lr: float, seed: int, *,
                teacher: torch.nn.Module | None = None, beta: float | None = None, curve: bool = True,
                facts: bool = False) -> dict:
    """Train one student on the documents ``ids`` and evaluate it; with ``curve`` also the loss on
    the first ``n_curve`` test documents every ``every`` steps (``[step, loss]``, or
    ``[step, loss, fact exact match]`` with ``facts``). Vanilla KD when ``beta`` is set."""
    points = []
    loss_fn = kd_loss_fn(teacher, beta) if beta is not None else None

    def point(k: int, m: torch.nn.Module) -> list:
        e = evaluate(m, env, n_curve, facts=facts)
        return [k, e["loss"], e["fact_acc"]] if facts else [k, e["loss"]]

    model, _ = pretrain_on(env.cfg_student, ids.to(env.device), steps, lr=lr, seed=seed, batch_size=batch,
                           loss_fn=loss_fn, device=env.device, every=every if curve else 0,
                           on_checkpoint=lambda k, m: points.append(point(k, m)))
    out = evaluate(model, env)
    if curve:
        out["curve"] = points + [point(steps, model)]
    return out


def _r4(x):
    if isinstance(x, float):
        return round(x, 6)
    if isinstance(x, list):
        return [_r4(v) for v in x]
    if isinstance(x, dict):
        return {k: _r4(v) for k, v in x.items()}
    return x


def load_runs() -> dict:
    """The committed grid (see the module docstring)."""
    return json.loads(RUNS_FILE.read_text())


def _job(job: dict) -> tuple[str, dict]:
    env, ids, teacher = _G["env"], _G["ids"], _G["teacher"]
    t0 = time.process_time()
    out = student_run(env, ids[job["corpus"]][job["kept"]] if job["kept"] is not None else ids[job["corpus"]],
                      job["steps"], job["lr"], job["seed"], teacher=teacher, beta=job.get("beta"),
                      facts=job.get("facts", False))
    out["cpu_s"] = round(time.process_time() - t0, 2)
    return job["key"], out


_G: dict = {}


def main(processes: int = 2) -> None:
    import multiprocessing as mp

    torch.set_num_threads(1)
    t_start = time.time()
    env = setup()
    teacher = env.trained("teacher")
    models = {k: env.trained(k) for k in env.recipes}
    nll = {k: scores(m, env.D.ids) for k, m in models.items()}
    nll_clean = {k: scores(models[k], env.D_clean.ids) for k in ("teacher", "reference")}
    keep = selections(nll, env.D)
    keep_clean = selections(nll_clean, env.D_clean)
    long_ids = fact_corpus(max(long_steps) * batch, env.table, n_triples=n_triples, seed=5).ids
    N_s, N_t = (non_embedding_params(m) for m in (lm_model.TinyLM(env.cfg_student), teacher))
    S_kd = kd_matched_steps(S, N_s, N_t)
    ids = {"D": env.D.ids, "clean": env.D_clean.ids, "long": long_ids}
    keep_plateau = {}
    for kind, (cseed, p_clean) in plateau_corpora.items():
        corpus = plateau_corpus(env, kind)
        ids[f"plateau-{kind}"] = corpus.ids
        keep_plateau[kind] = selections({k: scores(models[k], corpus.ids) for k in ("teacher", "reference")}, corpus)
    _G.update(env=env, teacher=teacher, ids=ids)
    ctx = mp.get_context("fork")

    def run_all(jobs):
        with ctx.Pool(processes) as pool:
            return dict(pool.map(_job, jobs, chunksize=1))

    def job(key, corpus="D", kept=None, steps=S, lr=None, seed=0, beta=None):
        return {"key": key, "corpus": corpus, "kept": None if kept is None else torch.as_tensor(kept),
                "steps": steps, "lr": lr, "seed": seed, "beta": beta}

    tuning = run_all([job(f"tune/noKD/{lr:g}", lr=lr, seed=tune_seed) for lr in lr_grid]
                     + [job(f"tune/KD/{lr:g}/{b:g}", steps=S_kd, lr=lr, seed=tune_seed, beta=b)
                        for lr in kd_lr_grid for b in beta_grid])
    lr_ce = min(lr_grid, key=lambda lr: tuning[f"tune/noKD/{lr:g}"]["loss"])
    lr_kd, beta_kd = min(((lr, b) for lr in kd_lr_grid for b in beta_grid),
                         key=lambda p: tuning[f"tune/KD/{p[0]:g}/{p[1]:g}"]["loss"])
    jobs = []
    for s in eval_seeds:
        jobs.append(job(f"main/no KD/{s}", lr=lr_ce, seed=s))
        jobs += [job(f"main/{a}/{s}", kept=k, lr=lr_ce, seed=s) for a, k in keep.items()]
        jobs.append(job(f"main/vanilla KD (equal compute)/{s}", steps=S_kd, lr=lr_kd, seed=s, beta=beta_kd))
        jobs.append(job(f"main/vanilla KD (same steps)/{s}", lr=lr_kd, seed=s, beta=beta_kd))
        jobs.append(job(f"clean/no KD/{s}", corpus="clean", lr=lr_ce, seed=s))
        jobs += [job(f"clean/{a}/{s}", corpus="clean", kept=keep_clean[a], lr=lr_ce, seed=s)
                 for a in ("MiniPLM (r)", "teacher only")]
        jobs += [job(f"long/{n}/{s}", corpus="long", steps=n, lr=lr_ce, seed=s) for n in long_steps]
        for kind in plateau_corpora:   # no KD on the noisy corpus at the plateau budget is long/1200
            jobs += [job(f"plateau/{kind}/{a}/{s}", corpus=f"plateau-{kind}", kept=keep_plateau[kind][a],
                         steps=plateau, lr=lr_ce, seed=s) for a in ("MiniPLM (r)", "teacher only")]
        jobs.append(job(f"plateau/clean/no KD/{s}", corpus="plateau-clean", steps=plateau, lr=lr_ce, seed=s))
    jobs += [job(f"alpha/{a:g}/{s}", kept=top_fraction(torch.tensor(nll["reference"] - nll["teacher"]), a).numpy(),
                 lr=lr_ce, seed=s) for a in alpha_sweep for s in eval_seeds[:1]]   # one seed: reported only
    jobs.sort(key=lambda j: -j["steps"])   # longest first: the two workers finish together
    runs = run_all(jobs)
    keep_sha = {k: keep_digest(v) for k, v in keep.items()}
    keep_sha.update({f"plateau/{kind}/{a}": keep_digest(keep_plateau[kind][a]) for kind in plateau_corpora
                     for a in ("MiniPLM (r)", "teacher only")})
    out = {
        "script": SCRIPT,
        "recipe": {"S": S, "S_kd": S_kd, "batch": batch, "alpha": alpha, "N": env.N, "lr_grid": lr_grid,
                   "kd_lr_grid": kd_lr_grid, "beta_grid": beta_grid, "eval_seeds": eval_seeds, "tune_seed": tune_seed,
                   "long_steps": long_steps, "alpha_sweep": alpha_sweep, "every": every, "n_curve": n_curve,
                   "clean_corpus": "fact_corpus(N, seed=6, p_clean=1.0), scored by the same teacher and reference",
                   "long_corpus": "fact_corpus(1200 * batch, seed=5)", "plateau": plateau,
                   "plateau_corpora": {k: f"fact_corpus(plateau * batch / alpha, seed={v[0]}, p_clean={v[1]})"
                                       for k, v in plateau_corpora.items()},
                   "code_sha256": {f.name: bytes_sha256(f.read_bytes())[:16]
                                   for f in [Path(m.__file__) for m in CODE] + [Path(__file__)]},
                   "torch": torch.__version__},
        "chosen": {"lr_ce": lr_ce, "lr_kd": lr_kd, "beta_kd": beta_kd},
        "keep_sha256": keep_sha,
        "tuning": _r4(tuning),
        "runs": _r4(runs),
        "wall_s": round(time.time() - t_start, 1),
        "cpu_s": round(sum(v["cpu_s"] for v in list(runs.values()) + list(tuning.values())), 1),
    }
    RUNS_FILE.write_text(json.dumps(out, indent=0, sort_keys=True))
    print(f"wrote {RUNS_FILE} ({RUNS_FILE.stat().st_size / 1e3:.0f} kB): {len(runs) + len(tuning)} runs, "
          f"{out['wall_s']} s wall, {out['cpu_s']} s CPU")


EXTRA_FILE = Path(__file__).parent / "weights" / "miniplm-extra.json"
budgets = [450, 600, 750, 900]          # budget-sized schedules: each its own warmup + cosine over the budget


def main_extra() -> None:
    """Runs added to the committed grid, in one process, written to ``weights/miniplm-extra.json``
    after each group (so a finished group is kept):

    1. ``plateau/{noisy,clean}/reference only/{seed}``: the reference-only selection (top alpha by the
       reference's NLL, no teacher) at the plateau budget, with loss and fact-match checkpoints; plus the
       share of MiniPLM's D' that reference-only keeps on each plateau corpus;
    2. ``budget/{no KD,MiniPLM (r)}/{steps}/{seed}``: no KD (the ``long`` corpus) and MiniPLM (the noisy
       plateau corpus's D') trained for ``steps`` in ``budgets`` with their own schedule; the seed and the
       corpus equal those of the plateau runs, so a budget run reads the first ``steps`` batches of them;
    3. ``facts/{no KD,MiniPLM (r)}/{seed}``: the noisy plateau runs of the grid again, with fact exact
       match at every checkpoint (their loss curves must reproduce the grid's).
    """
    torch.set_num_threads(1)
    t_start = time.time()
    env = setup()
    teacher = env.trained("teacher")
    models = {k: env.trained(k) for k in ("teacher", "reference")}
    lr_ce = load_runs()["chosen"]["lr_ce"]
    ids = {"long": fact_corpus(max(long_steps) * batch, env.table, n_triples=n_triples, seed=5).ids}
    keep_plateau, overlap, sha = {}, {}, {}
    for kind in plateau_corpora:
        corpus = plateau_corpus(env, kind)
        ids[f"plateau-{kind}"] = corpus.ids
        keep_plateau[kind] = selections({k: scores(models[k], corpus.ids) for k in models}, corpus)
        kp = keep_plateau[kind]
        overlap[kind] = {a: len(np.intersect1d(kp["MiniPLM (r)"], kp[a])) / len(kp["MiniPLM (r)"])
                         for a in ("reference only", "teacher only")}
        sha.update({f"plateau/{kind}/{a}": keep_digest(kp[a]) for a in ("MiniPLM (r)", "teacher only", "reference only")})
    _G.update(env=env, teacher=teacher, ids=ids)
    out = {"script": SCRIPT + " extra",
           "recipe": {"plateau": plateau, "budgets": budgets, "lr_ce": lr_ce, "every": every, "n_curve": n_curve,
                      "eval_seeds": eval_seeds,
                      "code_sha256": {f.name: bytes_sha256(f.read_bytes())[:16]
                                      for f in [Path(m.__file__) for m in CODE] + [Path(__file__)]},
                      "torch": torch.__version__},
           "keep_sha256": sha, "overlap_with_MiniPLM": _r4(overlap), "runs": {}}

    def job(key, corpus, kept=None, steps=plateau, seed=0, facts=False):
        return {"key": key, "corpus": corpus, "kept": None if kept is None else torch.as_tensor(kept),
                "steps": steps, "lr": lr_ce, "seed": seed, "facts": facts}

    groups = [
        [job(f"plateau/{kind}/reference only/{s}", f"plateau-{kind}", keep_plateau[kind]["reference only"], seed=s,
             facts=True) for kind in plateau_corpora for s in eval_seeds],
        [job(f"budget/no KD/{n}/{s}", "long", steps=n, seed=s) for n in budgets for s in eval_seeds]
        + [job(f"budget/MiniPLM (r)/{n}/{s}", "plateau-noisy", keep_plateau["noisy"]["MiniPLM (r)"], steps=n, seed=s)
           for n in budgets for s in eval_seeds],
        [job(f"facts/no KD/{s}", "long", seed=s, facts=True) for s in eval_seeds]
        + [job(f"facts/MiniPLM (r)/{s}", "plateau-noisy", keep_plateau["noisy"]["MiniPLM (r)"], seed=s, facts=True)
           for s in eval_seeds],
    ]
    for g in groups:
        for j in g:
            k, r = _job(j)
            out["runs"][k] = _r4(r)
            print(k, r["loss"], r["cpu_s"], flush=True)
        out["wall_s"] = round(time.time() - t_start, 1)
        out["cpu_s"] = round(sum(v["cpu_s"] for v in out["runs"].values()), 1)
        EXTRA_FILE.write_text(json.dumps(out, indent=0, sort_keys=True))
    print(f"wrote {EXTRA_FILE}: {len(out['runs'])} runs, {out['wall_s']} s wall, {out['cpu_s']} s CPU")


def load_extra() -> dict:
    """The runs added to the committed grid (see :func:`main_extra`)."""
    return json.loads(EXTRA_FILE.read_text())


GRID_SEED = 0                            # the seed of the committed grid's random selection and spot check


def check_seed(scale: str, seed: int) -> None:
    """Refuse a chapter seed the committed full-scale grid was not made with: at ``full`` the chapter
    loads the grid (whose random selection was drawn with seed ``GRID_SEED``) and re-trains two of
    its runs with that seed, so any other seed would compare different selections."""
    if scale == "full" and int(seed) != GRID_SEED:
        raise ValueError(f"scale='full' loads the committed grid ({RUNS_FILE.name}), made with seed = {GRID_SEED}; "
                         f"set seed = {GRID_SEED} (got {seed}), or use scale='ci', which trains live with any seed, "
                         f"or re-train the grid ({SCRIPT})")


def majority_answer(table: torch.Tensor, ids: torch.Tensor) -> tuple[int, float]:
    """The trivial answer to every fact: the table's most common value. Returns that value (as a
    key index) and its exact-match accuracy on the fact answers of ``ids`` (the positions that
    :func:`evaluate` scores)."""
    value = int(np.bincount(table.reshape(-1).cpu().numpy(), minlength=table.shape[0]).argmax())
    fact_ans = answer_mask(ids)[:, 1:] & (ids[:, :-1] < 2 + table.shape[0])
    return value, float((ids[:, 1:][fact_ans] == value + 2).float().mean())


def keep_digest(kept: np.ndarray) -> str:
    """The short sha256 of a selection (as stored in ``keep_sha256``)."""
    return bytes_sha256(np.asarray(kept, dtype=np.int64).tobytes())[:16]


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["extra"]:
        main_extra()
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
