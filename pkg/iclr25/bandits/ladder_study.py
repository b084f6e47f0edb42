"""The dense-ladder study of the chapter ``theory/batch-bandits``: one fixed gap ladder for every
method, batch number and horizon.

The worst case over a family of instances is what the batched lower bound charges, and its growth
in ``T`` is the paper's exponent ``gamma_M``. Measured on a coarse ladder, or on a ladder that moves
with the horizon, the fitted exponent is either a saw-tooth or built into the ladder. Here the ladder
is fixed in advance: ``N_GAPS`` gaps, geometric from ``GAP_MIN`` (below the scale no method can
resolve at the longest horizon) to 1, shared by all methods, all ``M`` and all horizons, each gap on
``STREAMS`` independent context streams (stream ``r`` of every gap sees the same contexts; the
chapter's bootstrap resamples the streams). One rung is a factor ``(1/GAP_MIN)^(1/(N_GAPS-1))``.

Methods (each on the hard family of the chapter: ``K = d = 8`` nearly fixed actions, noise 0.1,
``lambda = 0.01``, ``delta = 0.01``, theory radii): the paper's batched elimination and LinUCB
frozen between batches, each on the minimax grid (``u = u_eff``, the chapter's ``u_of``) and on the
geometric grid (``t_1 = T^(1/M)``, a small first batch), and frozen LinUCB with its tuned radius
(``FROZEN_C``) on the geometric grid, at ``M`` in ``MS`` and every horizon in
``HORIZONS`` (each grid rebuilt per horizon); sequential LinUCB once at the longest horizon (it is
anytime: shorter horizons are its prefixes). Per cell the record keeps, per gap and stream, the
total regret, the regret after the cell's first batch (rounds ``t_1 + 1 .. T``) and the regret in
its last batch (rounds ``t_(M-1) + 1 .. T``: what the data before the last batch earns, the
chapter's competence clause).

The long extension adds the horizons ``LONG_HORIZONS`` (48 000 and 96 000) for the paper's algorithm
and the geometric-grid control (``LONG_METHODS``) at every ``M`` in ``MS``, and sequential LinUCB run to
the longest of them (its totals at the base horizons must equal the recorded ones, a reproduction
check printed by :func:`main`); their arrays are named ``method|M|part|long`` (:func:`key` with
``long=True``), shape ``(len(LONG_HORIZONS), N_GAPS, STREAMS)``; about 900 s of CPU. The tuned head-to-head adds ``TUNED``
at the base horizons and ``M`` in ``TUNED_MS`` (``M* = 3``): the paper's algorithm with radius scale ``ELIM_C`` on its own minimax grid
(``u = ELIM_C^2 u_eff``, part ``kept`` too: the fraction of rounds whose optimal action survived, the tuned
radius' admissibility) and frozen LinUCB with scale ``SAME_GRID_C`` on that same grid; about 100 s of CPU.

Run ``python -m iclr25.bandits.ladder_study`` (one worker process, one thread, about 600 s of
CPU for the base study): it writes ``results/ladder-study.json``: the recipe, seeds, timings, the arrays (regrets
rounded to 0.1) and their sha256 (:func:`iclr25.common.digest.json_sha256`), and the sha256 of the
code that made them (``algorithms.py``, ``envs.py``). By default the jobs
whose arrays the committed record already holds are taken from it (:func:`main`). The chapter loads it with
:func:`load`, which checks the digest, and re-runs :func:`run_cell` on cells of it live to show that
they reproduce the record (to its rounding).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from pathlib import Path

import numpy as np

from .algorithms import (batch_schedule, batched_elimination, batched_linucb, elimination_u,
                         geometric_schedule, linucb)
from .envs import make_needle_env

D = K = 8
NOISE, LAM, DELTA = 0.1, 0.01, 0.01
HORIZONS = (1500, 3000, 6000, 12000, 24000)
MS = (2, 3)
N_GAPS, GAP_MIN = 48, 0.01
STREAMS = 16
SEED = 0
GAPS = np.geomspace(GAP_MIN, 1.0, N_GAPS)
BATCHED = ("elimination", "frozen LinUCB", "frozen LinUCB, geometric grid", "elimination, geometric grid",
           "frozen LinUCB tuned, geometric grid")
FROZEN_C = 0.125        # frozen LinUCB's tuned radius scale: the chapter's tuning at M* (minimax grid, T = 24000,
                        # tuning seeds apart from these), the top of its plateau 0.125 .. 1/64
LONG_HORIZONS = (48000, 96000)   # the long extension: where the (T - t_(m-1))/T shares saturate
LONG_METHODS = ("elimination", "elimination, geometric grid")   # the paper's algorithm and its grid control
# the tuned head-to-head on the ladder's 16 streams (base horizons): the paper's algorithm with its tuned radius scale
# on its own minimax grid (u = c^2 u_eff), and frozen LinUCB with its radius tuned on that same grid; both scales are
# the chapter's tuning at full (T = 24000, M* = 3, tuning seeds apart from these): elimination's c = 0.25 is the
# smallest admissible scale (c = 0.125 loses the optimal action), frozen LinUCB's 0.125 the top of its plateau
TUNED = ("elimination tuned", "frozen LinUCB tuned, same grid")
ELIM_C, SAME_GRID_C = 0.25, 0.125
TUNED_MS = (3,)                         # M* of the chapter's hard family at T = 24000
RESULTS = Path(__file__).parent / "results"
RECORD = RESULTS / "ladder-study.json"
PARTS = ("total", "post", "last")       # total regret, after t_1, in the last batch (after t_{M-1})
ROUND = 1                                   # decimals kept of every regret in the record
CODE = ("algorithms.py", "envs.py")         # the modules whose code makes the arrays (sha256 in the record)


def env_of(gaps: np.ndarray = GAPS, streams: int = STREAMS, seed: int = SEED):
    """The hard family on the ladder ``gaps``: instance ``s`` has gap ``gaps[s // streams]`` and sees
    context stream ``s % streams``."""
    return make_needle_env(gaps, streams, D, seed=seed, noise_sd=NOISE, streams=streams)


def u_of(T: int, M: int) -> float:
    """The elimination cost ``u_eff = 4 beta^2 K`` at horizon ``T`` with ``M`` batches (theory radius)."""
    return elimination_u(NOISE, K, T, M, DELTA, LAM, 1.0)


def grid_of(method: str, T: int, M: int) -> np.ndarray:
    """The batch ends of a batched method: the minimax grid, the tuned elimination's own minimax grid
    (``u = ELIM_C^2 u_eff``, for both :data:`TUNED` methods), or the geometric one."""
    if method.endswith("geometric grid"):
        return geometric_schedule(T, M)
    return batch_schedule(T, M, 1, (ELIM_C ** 2 if method in TUNED else 1.0) * u_of(T, M))


def run_cell(method: str, M: int, T: int, env=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One batched method at ``M`` batches and horizon ``T`` on the ladder: ``(total, after t_1,
    last batch)`` (the last part is the regret in rounds ``t_{M-1} + 1 .. T``, what the data before
    the last batch earns), each of shape ``(N_GAPS, STREAMS)`` (gap, stream)."""
    return run_cell_kept(method, M, T, env)[:3]


def run_cell_kept(method: str, M: int, T: int, env=None) -> tuple[np.ndarray, ...]:
    """:func:`run_cell`, and for the paper's algorithm also the fraction of rounds whose optimal action
    survived per (gap, stream) (``None`` for frozen LinUCB)."""
    env = env_of() if env is None else env
    grid = grid_of(method, T, M)
    if method.startswith("elimination"):
        r = batched_elimination(env, T, grid, lam=LAM, delta=DELTA, beta_scale=ELIM_C if method in TUNED else 1.0)
    else:
        c = SAME_GRID_C if method in TUNED else FROZEN_C if method.startswith("frozen LinUCB tuned") else 1.0
        r = batched_linucb(env, T, grid, lam=LAM, delta=DELTA, beta_scale=c)
    shape = (len(env.theta) // env.streams, env.streams)
    kept = r.info.get("opt_kept_runs")
    return (r.regret.sum(1).reshape(shape), r.regret[:, int(grid[0]):].sum(1).reshape(shape),
            r.regret[:, int(grid[-2]):].sum(1).reshape(shape), None if kept is None else np.asarray(kept).reshape(shape))


def run_linucb(horizons=HORIZONS, env=None) -> np.ndarray:
    """Sequential LinUCB at the longest horizon; its totals at every horizon, ``(H, N_GAPS, STREAMS)``."""
    env = env_of() if env is None else env
    r = linucb(env, max(horizons), lam=LAM, delta=DELTA)
    cum = np.cumsum(r.regret, axis=1)
    shape = (len(env.theta) // env.streams, env.streams)
    return np.stack([cum[:, T - 1].reshape(shape) for T in horizons])


def _job(job: tuple) -> tuple[tuple, dict, float]:
    os.environ["OMP_NUM_THREADS"] = "1"
    t0 = time.process_time()
    if job[0] == "long":
        if job[1] == "LinUCB":
            out = {"total": run_linucb(HORIZONS + LONG_HORIZONS)}
        else:
            cells = [run_cell(job[1], job[2], T) for T in LONG_HORIZONS]
            out = {part: np.stack([c[i] for c in cells]) for i, part in enumerate(PARTS)}
    elif job[0] in TUNED:
        cells = [run_cell_kept(job[0], job[1], T) for T in HORIZONS]
        out = {part: np.stack([c[i] for c in cells]) for i, part in enumerate(PARTS + ("kept",))
               if cells[0][i] is not None}
    elif job[0] == "LinUCB":
        out = {"total": run_linucb()}
    else:
        method, M = job
        cells = [run_cell(method, M, T) for T in HORIZONS]
        out = {part: np.stack([c[i] for c in cells]) for i, part in enumerate(PARTS)}
    return job, out, time.process_time() - t0


def key(method: str, M: int | None, part: str, long: bool = False) -> str:
    """The array name of a method (``M=None`` for sequential LinUCB) and part (total, post, last);
    ``long``: its arrays at the ``LONG_HORIZONS``."""
    return f"{method}|{M if M is not None else 'T'}|{part}" + ("|long" if long else "")


def has_long(arrays: dict) -> bool:
    """Whether ``arrays`` hold the whole long extension (every ``LONG_METHODS`` part at every ``M``, and
    sequential LinUCB)."""
    return key("LinUCB", None, "total", long=True) in arrays and all(
        key(m, M, p, long=True) in arrays for m in LONG_METHODS for M in MS for p in PARTS)


def with_long(arrays: dict, method: str, M: int | None, part: str) -> np.ndarray:
    """A method's array at ``HORIZONS + LONG_HORIZONS`` (the base study, then the long extension)."""
    return np.concatenate([arrays[key(method, M, part)], arrays[key(method, M, part, long=True)]])


def code_sha256() -> dict:
    """The sha256 of the modules that make the arrays (:data:`CODE`), as they are now."""
    from iclr25.common.digest import file_sha256

    return {name: file_sha256(Path(__file__).parent / name) for name in CODE}


def code_matches(record: dict) -> bool:
    """Whether the record was made by the current code: its ``code_sha256`` equals :func:`code_sha256`."""
    return record.get("code_sha256") == code_sha256()


def write(arrays: dict, cpu: dict, wall: float) -> None:
    """Write the record: recipe, timings, arrays (nested lists, rounded to ``ROUND`` decimals) and the
    sha256 of the arrays."""
    from iclr25.common.digest import json_sha256

    lists = {k: np.round(np.asarray(a, float), 4 if k.split("|")[2] == "kept" else ROUND).tolist()
             for k, a in sorted(arrays.items())}
    record = {"recipe": {"d": D, "K": K, "noise_sd": NOISE, "lam": LAM, "delta": DELTA,
                         "horizons": list(HORIZONS), "long_horizons": list(LONG_HORIZONS),
                         "long_methods": list(LONG_METHODS) + ["LinUCB"], "Ms": list(MS), "n_gaps": N_GAPS, "gap_min": GAP_MIN,
                         "streams": STREAMS, "seed": SEED, "methods": list(BATCHED) + ["LinUCB"], "frozen_tuned_c": FROZEN_C,
                         "tuned": list(TUNED), "elim_c": ELIM_C, "same_grid_c": SAME_GRID_C,
                         "code_sha256": "sha256 of algorithms.py and envs.py (the code that makes the arrays) when "
                                        "the record was written; main(reuse=True) reuses arrays only if it equals the "
                                        "current code's, so every array here was made by this code (the first "
                                        "arrays were stamped after their run, from the unchanged code that made them)",
                         "grids": {f"{m} M={M}": {str(T): grid_of(m, T, M).tolist() for T in HORIZONS}
                                   for m in BATCHED for M in MS},
                         "tuned_grids": {f"{m} M={M}": {str(T): grid_of(m, T, M).tolist() for T in HORIZONS}
                                         for m in TUNED for M in TUNED_MS},
                         "long_grids": {f"{m} M={M}": {str(T): grid_of(m, T, M).tolist() for T in LONG_HORIZONS}
                                        for m in LONG_METHODS for M in MS},
                         "arrays": "name 'method|M|part' (M = 'T' for sequential LinUCB), part total, post "
                                   "(regret after the cell's t_1) or last (regret after its t_(M-1)), shape (horizon, gap, stream), rounded to "
                                   f"{ROUND} decimal (part kept, the fraction of rounds whose optimal action survived, to 4 decimals); a "
                                   "name ending '|long' holds the long_horizons"},
              "cpu_s": cpu, "wall_s": round(wall, 1), "code_sha256": code_sha256(),
              "arrays_sha256": json_sha256(lists), "arrays": lists}
    RESULTS.mkdir(exist_ok=True)
    RECORD.write_text(json.dumps(record, separators=(",", ":")) + "\n")


def _jobs() -> list[tuple]:
    """Every job: the base study's (method, M) and sequential LinUCB, then the long extension's."""
    return ([("elimination", M) for M in MS] + [(m, M) for m in BATCHED[1:] for M in MS] + [("LinUCB",)]
            + [("long", m, M) for m in LONG_METHODS for M in MS] + [("long", "LinUCB")]
            + [(m, M) for m in TUNED for M in TUNED_MS])


def _job_keys(job: tuple) -> list[str]:
    if job[0] == "long":
        if job[1] == "LinUCB":
            return [key("LinUCB", None, "total", long=True)]
        return [key(job[1], job[2], p, long=True) for p in PARTS]
    if job[0] == "LinUCB":
        return [key("LinUCB", None, "total")]
    return [key(job[0], job[1], p) for p in PARTS + (("kept",) if job[0] == TUNED[0] else ())]


def main(reuse: bool = True) -> None:
    """Run the study's jobs; with ``reuse``, the jobs whose every array is already in the committed
    record are taken from it (their CPU time is the recorded one) and only the missing ones run. Reuse
    is refused (``ValueError``) unless the record's ``code_sha256`` equals the sha256 of the current
    :data:`CODE` modules: arrays made by other code are not mixed with new ones. At ``M = 2`` the
    last batch starts at ``t_1``, so a record's ``post`` is also its ``last``."""
    jobs = _jobs()
    t0 = time.time()
    arrays, cpu, wall0 = {}, {}, 0.0
    if reuse and RECORD.exists():
        old, old_arrays = load()
        if not code_matches(old):
            raise ValueError(f"{RECORD} was made by other code (sha256 of {', '.join(CODE)}: "
                             f"{old.get('code_sha256')} vs now {code_sha256()}); run main(reuse=False)")
        for k, a in old_arrays.items():
            arrays[k] = a
            method, M, part = k.split("|")[:3]
            if part == "post" and M == "2" and not k.endswith("|long"):
                arrays[key(method, 2, "last")] = a
        cpu.update(old["cpu_s"])
        wall0 = old.get("wall_s", 0.0)          # the record's wall time is the sum over its runs
        jobs = [j for j in jobs if not all(k in arrays for k in _job_keys(j))]
    print("jobs to run:", jobs, flush=True)
    with multiprocessing.get_context("fork").Pool(1) as pool:     # one process: the machine is shared
        for job, out, c in pool.imap(_job, jobs):
            name = ("LinUCB" if job[-1] == "LinUCB" else f"{job[-2]} M={job[-1]}") + (" long" if job[0] == "long" else "")
            cpu[name] = round(c, 1)
            print(f"{name}: {c:.0f} s CPU", flush=True)
            if job == ("long", "LinUCB"):       # anytime: its base horizons must reproduce the recorded run
                base = np.round(out["total"][:len(HORIZONS)], ROUND)
                if key("LinUCB", None, "total") in arrays:
                    print("LinUCB base horizons reproduced: max abs difference "
                          f"{np.abs(base - arrays[key('LinUCB', None, 'total')]).max():.2g}", flush=True)
                out = {"total": out["total"][len(HORIZONS):]}
            for part, a in out.items():
                k = key(*((job[1], job[2] if job[1] != "LinUCB" else None) if job[0] == "long"
                          else (job[0], job[1] if len(job) > 1 else None)), part, long=job[0] == "long")
                arrays[k] = a
            write(arrays, cpu, wall0 + time.time() - t0)    # after every job: a partial run keeps what it made
    print(f"wrote {RECORD} ({RECORD.stat().st_size / 1e3:.0f} kB) in {time.time() - t0:.0f} s")


def load() -> tuple[dict, dict]:
    """The committed record (without its arrays) and the arrays as float arrays; raises ``ValueError``
    if the arrays' sha256 differs from the one recorded with them."""
    from iclr25.common.digest import json_sha256

    record = json.loads(RECORD.read_text())
    lists = record.pop("arrays")
    digest = json_sha256(lists)
    if digest != record["arrays_sha256"]:
        raise ValueError(f"{RECORD}: arrays have sha256 {digest[:12]}…, the record says "
                         f"{record['arrays_sha256'][:12]}…; re-run python -m iclr25.bandits.ladder_study")
    return record, {k: np.asarray(v, float) for k, v in lists.items()}


if __name__ == "__main__":
    main()
