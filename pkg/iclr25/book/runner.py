"""Execute one chapter with papermill, reusing a cached result, with an honest failure report.

``run_chapter`` converts the jupytext source to a notebook, injects the parameters and executes it
in the reproducible environment (:mod:`iclr25.book.environment`). Results are kept per cache key
(:mod:`iclr25.book.cache`), so different scales and parameters never evict each other; a result
found for the key is shown with the chapter's current prose (:func:`iclr25.book.cache.current_view`).

The kernel imports ``iclr25`` from ``<root>/pkg``, the package the key was computed from (it comes
first on the kernel's ``PYTHONPATH``); a hidden last cell reports where it came from, the run fails
if that is elsewhere and records it as ``iclr25_file`` in the run's metadata. Each execution has a
deadline, :data:`TIMEOUT_FACTOR` times the chapter's budget at its scale (:data:`BUDGET_S`).

A failure leaves no result behind, keeps the failed notebook in ``_build/failed/`` for inspection,
and raises :class:`ChapterFailed`, which names the chapter, the code cell as a reader finds it in the
``.md`` (the n-th code cell and its first line), the exception (or the deadline) and its last frame.
An interrupted run's leftovers (its ``_build/tmp/run-<chapter>.*`` folder, partial cache files) are
removed by the next run of the chapter.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import nbformat

from iclr25.book import cache
from iclr25.book.claims import held_counts, notebook_claims
from iclr25.book.environment import apply_reproducible_env
from iclr25.book.quiet import Captured, captured_stderr
from iclr25.book.params import (BadParameter, MissingParameters, check_overrides, parameters_cell,  # noqa: F401
                                parse_overrides, read_chapter)
from iclr25.book.registry import Chapter
from iclr25.book.timings import load_timings, record_time  # noqa: F401 - re-exported
from iclr25.common import HEADLESS_ENV, check_scale

#: A chapter's time budget at each scale (2 cores), and how far past it an execution is stopped.
BUDGET_S = {"ci": 45.0, "full": 300.0}
TIMEOUT_FACTOR = 3
PROVENANCE_TAG = "iclr25-provenance"
_PROVENANCE = ("import json as _j, iclr25 as _m\n"
               "print(_j.dumps(getattr(_m, '__file__', None) or list(_m.__path__)[0]))\n"
               "del _j, _m")


class ChapterFailed(RuntimeError):
    """A chapter raised while executing; the message names chapter, cell, exception, last frame."""

    def __init__(self, chapter: str, cell: int | None, first_line: str, error: str,
                 notebook: Path | None, frame: str = ""):
        self.chapter, self.cell, self.first_line, self.error, self.notebook, self.frame = (
            chapter, cell, first_line, error, notebook, frame)
        self.log: Path | None = None  # the kernel's stderr, when it was captured
        where = f"in code cell {cell} ({first_line!r})" if cell is not None else "before any cell ran"
        at = f" [{frame}]" if frame else ""
        saved = f"; the failed notebook is at {notebook}" if notebook else ""
        super().__init__(f"chapter {chapter} failed {where}: {error}{at}{saved}")


class WrongPackage(ChapterFailed):
    """The kernel imported ``iclr25`` from somewhere else than the package that was hashed."""

    def __init__(self, chapter: str, found: str, expected: Path):
        self.chapter, self.cell, self.first_line, self.notebook, self.frame = chapter, None, "", None, ""
        self.error = f"the kernel imported iclr25 from {found}, not from {expected}"
        self.log = None
        RuntimeError.__init__(self, f"chapter {chapter}: {self.error} (the package its cache key was "
                                    "computed from); is another clone's iclr25 installed or on PYTHONPATH?")


@dataclass(frozen=True)
class RunResult:
    """What one ``run_chapter`` call produced: the executed notebook (its outputs under the chapter's
    current text) and its wall time."""

    chapter: str
    notebook: Path
    wall_s: float
    cached: bool
    params: dict


@dataclass
class Deadline:
    """One execution's time limit, for the whole chapter, not per cell."""

    seconds: float
    scale: str
    default: bool
    end: float = math.inf

    @classmethod
    def for_run(cls, scale: str, timeout_s: float | None) -> "Deadline":
        """``timeout_s``, or :data:`TIMEOUT_FACTOR` times the budget at ``scale`` when None."""
        if timeout_s is None:
            return cls(TIMEOUT_FACTOR * BUDGET_S[scale], scale, True)
        return cls(float(timeout_s), scale, False)

    def start(self) -> None:
        self.end = time.monotonic() + self.seconds

    def cell_timeout(self, cell: Any = None) -> int:
        """nbclient's ``timeout_func``: the seconds left until the deadline (at least 1)."""
        return max(1, math.ceil(self.end - time.monotonic()))

    def message(self) -> str:
        why = (f" ({TIMEOUT_FACTOR}x its {self.scale} budget of {BUDGET_S[self.scale]:.0f} s)"
               if self.default else "")
        return f"timed out after {self.seconds:.0f} s{why}"


# ---------------------------------------------------------------- failure reports
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_FRAME = re.compile(r"(File [^\n]+?:\d+(?:, in [^\n]+)?|Cell In\[\d+\], line \d+)")


def last_frame(traceback: list[str]) -> str:
    """The innermost frame of an IPython traceback (``File .../x.py:12, in f()``)."""
    frames = _FRAME.findall(_ANSI.sub("", "\n".join(traceback or [])))
    return frames[-1].strip() if frames else ""


def chapter_code_cells(nb: nbformat.NotebookNode) -> Iterator[tuple[int, nbformat.NotebookNode]]:
    """(n, cell) for the chapter's own code cells, numbered from 1 as in the ``.md`` (papermill's
    injected-parameters cell and the provenance cell do not count)."""
    n = 0
    for c in nb.cells:
        tags = c.metadata.get("tags", [])
        if c.cell_type == "code" and cache.INJECTED not in tags and PROVENANCE_TAG not in tags:
            n += 1
            yield n, c


def failing_code_cell(nb: nbformat.NotebookNode) -> int | None:
    """1-based number, among the chapter's own code cells, of the first cell with an error
    output: the n-th code cell of the ``.md``."""
    return next((n for n, c in chapter_code_cells(nb)
                 if any(o.get("output_type") == "error" for o in c.get("outputs", []))), None)


def last_started_code_cell(nb: nbformat.NotebookNode) -> tuple[int, str] | None:
    """Number and first line of the last code cell papermill started (the one running when the
    deadline struck), or None."""
    found = None
    for n, c in chapter_code_cells(nb):
        if c.metadata.get("papermill", {}).get("start_time"):
            found = (n, _first_line(c.source))
    return found


def _first_line(source: str) -> str:
    return next((ln.strip() for ln in source.splitlines() if ln.strip()), "")


def _failure(chapter: Chapter, err: BaseException, failed: Path | None, deadline: Deadline) -> ChapterFailed:
    from nbclient.exceptions import CellTimeoutError
    from papermill.exceptions import PapermillExecutionError

    nb = nbformat.read(failed, as_version=4) if failed is not None and failed.is_file() else None
    if isinstance(err, PapermillExecutionError):
        number = failing_code_cell(nb) if nb is not None else None
        return ChapterFailed(chapter.id, number, _first_line(err.source), f"{err.ename}: {err.evalue}", failed,
                             last_frame(err.traceback))
    if isinstance(err, CellTimeoutError):
        number, first = (last_started_code_cell(nb) if nb is not None else None) or (None, "")
        return ChapterFailed(chapter.id, number, first, deadline.message(), failed)
    return ChapterFailed(chapter.id, None, "", f"{type(err).__name__}: {err}", failed)


# ---------------------------------------------------------------- execution
def _run_key(chapter: Chapter, nb: nbformat.NotebookNode, params: dict[str, Any],
             extra_env: dict[str, str], cuda: bool) -> str:
    """The cache key of one execution: code, parameters (and which code cell holds them), the
    device the kernel gets, a CPU kernel selection set in the environment (it changes the last bits
    of every float), and any extra environment beyond hiding the GPU."""
    from iclr25.book.environment import KERNEL_VARS

    code = cache.code_cells(nb)
    tagged = [n for n, c in enumerate(c for c in nb.cells if c.cell_type == "code")
              if "parameters" in c.metadata.get("tags", [])]
    more = {"_env": extra_env} if set(extra_env) - {"CUDA_VISIBLE_DEVICES"} else {}
    kernels = {k: v for k, v in {**os.environ, **extra_env}.items() if k in KERNEL_VARS}
    if kernels:
        more["_kernels"] = kernels
    return cache.cache_key(chapter, code, {**params, "_device": "cuda" if cuda else "cpu",
                                           "_parameters_cells": tagged, **more})


def run_chapter(chapter: Chapter, *, scale: str = "full", seed: int = 0,
                overrides: dict[str, Any] | None = None, force: bool = False,
                progress: bool = True, record: bool = False, timeout_s: float | None = None,
                env: dict[str, str] | None = None) -> RunResult:
    """Execute ``chapter`` at ``scale`` (or reuse the cached result for the same key).

    ``overrides`` are further parameters (raw text from ``-p`` or typed values); ``record``
    writes the wall time into ``book/timings.json`` (default seed and no overrides only); ``env``
    adds variables to the kernel's environment (e.g. ``CUDA_VISIBLE_DEVICES=""``; they are part of
    the cache key); ``timeout_s`` limits the whole execution (default: :data:`TIMEOUT_FACTOR` times
    the budget at ``scale``). Raises :class:`ChapterFailed`, :class:`BadParameter` or
    :class:`MissingParameters`.
    """
    check_scale(scale)
    apply_reproducible_env()
    defaults, typed = check_overrides(chapter, dict(overrides or {}))
    params = {"scale": scale, "seed": seed, **typed}
    nb = read_chapter(chapter)
    extra_env = dict(env or {})
    cuda = _uses_cuda(extra_env)
    key = _run_key(chapter, nb, params, extra_env, cuda)
    with cache.chapter_lock(chapter):
        remove_leftovers(chapter)
        hit = None if force else cache.lookup(chapter, key)
        if hit is not None:
            path, meta = hit
            return RunResult(chapter.id, cache.current_view(chapter, path, nb), float(meta["wall_s"]),
                             cached=True, params=params)
        cache.result_path(chapter, key).unlink(missing_ok=True)
        executed, wall, origin = _execute(chapter, nb, params, extra_env, progress,
                                          Deadline.for_run(scale, timeout_s))
        meta = {"chapter": chapter.id, "params": params, "env": extra_env, "wall_s": round(wall, 1),
                "python": sys.version.split()[0], "cuda": cuda, "iclr25_file": origin,
                "finished": time.strftime("%Y-%m-%dT%H:%M:%S")}
        path = cache.store(chapter, key, executed, meta)
    if record and not typed and seed == defaults["seed"] and not extra_env:
        rows = notebook_claims(path)
        record_time(chapter.root, chapter.id, scale, wall, held_counts(rows)["paper"] if rows else None)
    return RunResult(chapter.id, path, wall, cached=False, params=params)


def _execute(chapter: Chapter, nb: nbformat.NotebookNode, params: dict[str, Any], extra_env: dict[str, str],
             progress: bool, deadline: Deadline) -> tuple[nbformat.NotebookNode, float, str]:
    """Run the chapter's notebook ``nb`` once, in a work folder removed afterwards: the executed
    notebook (without the provenance cell), its wall time and where the kernel's ``iclr25`` came
    from. Raises :class:`ChapterFailed` (keeping the failed notebook and the kernel's stderr)."""
    import papermill as pm

    work = Path(tempfile.mkdtemp(prefix=_work_prefix(chapter), dir=_mkdir(chapter.root / "_build" / "tmp")))
    src, out = work / "source.ipynb", work / "executed.ipynb"
    nbformat.write(with_provenance(nb), src)
    failed_path = chapter.root / "_build" / "failed" / f"{chapter.id}.ipynb"
    log_path = failed_path.with_suffix(".log")
    deadline.start()
    t0 = time.perf_counter()
    with _kernel_env(chapter, extra_env), captured_stderr(enabled=not progress) as kernel_output:
        try:
            pm.execute_notebook(str(src), str(out), parameters=params, kernel_name="python3",
                                progress_bar=progress, cwd=str(chapter.path.parent), report_mode=False,
                                log_output=False, timeout_func=deadline.cell_timeout)
        except BaseException as err:  # noqa: BLE001 - re-raised as ChapterFailed (or as is)
            failed = _keep_failed(out, failed_path, log_path, kernel_output)
            _cleanup(work)
            if isinstance(err, KeyboardInterrupt):
                raise
            failure = _failure(chapter, err, failed, deadline)
            failure.log = log_path if log_path.is_file() else None
            raise failure from err
    wall = time.perf_counter() - t0
    executed = nbformat.read(out, as_version=4)
    _cleanup(work)
    failed_path.unlink(missing_ok=True)
    log_path.unlink(missing_ok=True)
    return executed, wall, check_provenance(chapter, pop_provenance(executed))


def _keep_failed(out: Path, failed_path: Path, log_path: Path, kernel_output: Captured) -> Path | None:
    """Move a failed run's notebook to ``failed_path`` and save the kernel's stderr, if any."""
    failed_path.parent.mkdir(parents=True, exist_ok=True)
    if kernel_output.text().strip():
        log_path.write_text(kernel_output.text())
    if not out.is_file():
        return None
    try:
        nb = nbformat.read(out, as_version=4)
        pop_provenance(nb)
        nbformat.write(nb, failed_path)
    except Exception:  # noqa: BLE001 - a half-written notebook is kept as it is
        os.replace(out, failed_path)
    return failed_path


@contextlib.contextmanager
def _kernel_env(chapter: Chapter, extra_env: dict[str, str]) -> Iterator[None]:
    """The environment the kernel starts with: ``extra_env``, headless plotting, and
    ``<root>/pkg`` first on ``PYTHONPATH`` (restored afterwards)."""
    path = os.pathsep.join(p for p in (str(chapter.root / "pkg"), os.environ.get("PYTHONPATH")) if p)
    new = {**extra_env, HEADLESS_ENV: "1", "PYTHONPATH": path}
    saved = {k: os.environ.get(k) for k in new}
    os.environ.update(new)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# ---------------------------------------------------------------- which iclr25 the kernel imported
def with_provenance(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy of ``nb`` with a hidden last cell that prints where ``iclr25`` was imported from."""
    out = nbformat.from_dict(nb)
    cell = nbformat.v4.new_code_cell(_PROVENANCE, metadata={"tags": ["remove-cell", PROVENANCE_TAG]})
    out.cells = [*out.cells, cell]
    return out


def pop_provenance(nb: nbformat.NotebookNode) -> str | None:
    """Remove the provenance cell from ``nb``; what it printed (a path), or None if it did not run."""
    found = None
    for c in [c for c in nb.cells if PROVENANCE_TAG in c.metadata.get("tags", [])]:
        text = "".join(o.get("text", "") for o in c.get("outputs", []) if o.get("name") == "stdout")
        lines = text.strip().splitlines()
        found = json.loads(lines[-1]) if lines else None
        nb.cells.remove(c)
    return found


def check_provenance(chapter: Chapter, found: str | None) -> str:
    """``found`` (where the kernel's ``iclr25`` lives), if it lies under ``<root>/pkg``; else raise
    :class:`WrongPackage`."""
    expected = chapter.root / "pkg"
    if found is None or not Path(found).resolve().is_relative_to(expected.resolve()):
        raise WrongPackage(chapter.id, str(found), expected)
    return found


# ---------------------------------------------------------------- what interrupted runs leave
def _work_prefix(chapter: Chapter) -> str:
    return f"run-{chapter.id.replace('/', '__')}."


def remove_leftovers(chapter: Chapter) -> None:
    """Delete what an interrupted run of ``chapter`` left behind (its ``_build/tmp/run-<id>.*``
    work folders and partial cache files); call it holding the chapter's lock."""
    for work in (chapter.root / "_build" / "tmp").glob(_work_prefix(chapter) + "*"):
        _cleanup(work)
    cache.remove_partial(chapter)


def find_result(chapter: Chapter, *, scale: str = "ci", seed: int = 0,
                env: dict[str, str] | None = None) -> Path | None:
    """The stored execution of the chapter's *current* code at (scale, seed, default parameters,
    ``env``), as the chapter reads now (its current text and tags, :func:`cache.current_view`), or
    None; executes nothing."""
    extra_env = dict(env or {})
    nb = read_chapter(chapter)
    key = _run_key(chapter, nb, {"scale": scale, "seed": seed}, extra_env, _uses_cuda(extra_env))
    with cache.chapter_lock(chapter):
        hit = cache.lookup(chapter, key)
        return cache.current_view(chapter, hit[0], nb) if hit else None


def _uses_cuda(extra_env: dict[str, str]) -> bool:
    """Whether the kernel will see a GPU (``CUDA_VISIBLE_DEVICES=""`` hides it)."""
    visible = extra_env.get("CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES"))
    if visible == "":
        return False
    import torch

    return bool(torch.cuda.is_available())


def _mkdir(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    return p


def _cleanup(work: Path) -> None:
    import shutil

    shutil.rmtree(work, ignore_errors=True)


def chapter_defaults(chapter: Chapter) -> dict[str, Any]:
    """The parameters cell's defaults (raises :class:`MissingParameters` naming the chapter)."""
    return parameters_cell(read_chapter(chapter), f"chapter {chapter.id}")[1]
