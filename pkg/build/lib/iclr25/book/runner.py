"""Execute one chapter with papermill, reusing a cached result, with an honest failure report.

``run_chapter`` converts the jupytext source to a notebook, injects the parameters and executes it
in the reproducible environment (:mod:`iclr25.book.environment`). Results are kept per cache key
(:mod:`iclr25.book.cache`), so different scales and parameters never evict each other. A failure
leaves no result behind, keeps the failed notebook in ``_build/failed/`` for inspection, and raises
:class:`ChapterFailed`, which names the chapter, the code cell as a reader finds it in the ``.md``
(the n-th code cell and its first line), the exception and its last frame.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat

from iclr25.book import cache
from iclr25.book.claims import held_counts, notebook_claims
from iclr25.book.environment import apply_reproducible_env
from iclr25.book.quiet import captured_stderr
from iclr25.book.params import (BadParameter, MissingParameters, check_overrides, parameters_cell,  # noqa: F401
                                parse_overrides, read_chapter)
from iclr25.book.registry import Chapter
from iclr25.book.timings import load_timings, record_time  # noqa: F401 - re-exported
from iclr25.common import HEADLESS_ENV, check_scale


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


@dataclass(frozen=True)
class RunResult:
    """What one ``run_chapter`` call produced: the executed notebook and its wall time."""

    chapter: str
    notebook: Path
    wall_s: float
    cached: bool
    params: dict


# ---------------------------------------------------------------- failure reports
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_FRAME = re.compile(r"(File [^\n]+?:\d+(?:, in [^\n]+)?|Cell In\[\d+\], line \d+)")


def last_frame(traceback: list[str]) -> str:
    """The innermost frame of an IPython traceback (``File .../x.py:12, in f()``)."""
    frames = _FRAME.findall(_ANSI.sub("", "\n".join(traceback or [])))
    return frames[-1].strip() if frames else ""


def failing_code_cell(nb: nbformat.NotebookNode) -> int | None:
    """1-based number, among the chapter's own code cells (the papermill-injected parameters cell
    does not count), of the first cell with an error output: the n-th code cell of the ``.md``."""
    n = 0
    for c in nb.cells:
        if c.cell_type != "code" or "injected-parameters" in c.metadata.get("tags", []):
            continue
        n += 1
        if any(o.get("output_type") == "error" for o in c.get("outputs", [])):
            return n
    return None


def _failure(chapter: Chapter, err: BaseException, failed: Path | None) -> ChapterFailed:
    from papermill.exceptions import PapermillExecutionError

    if isinstance(err, PapermillExecutionError):
        first = next((ln for ln in err.source.splitlines() if ln.strip()), "")
        number = None
        if failed is not None and failed.is_file():
            number = failing_code_cell(nbformat.read(failed, as_version=4))
        return ChapterFailed(chapter.id, number, first.strip(), f"{err.ename}: {err.evalue}", failed,
                             last_frame(err.traceback))
    return ChapterFailed(chapter.id, None, "", f"{type(err).__name__}: {err}", failed)


# ---------------------------------------------------------------- execution
def _run_key(chapter: Chapter, nb: nbformat.NotebookNode, params: dict[str, Any],
             extra_env: dict[str, str], cuda: bool) -> str:
    """The cache key of one execution: code, parameters, the device the kernel gets, and any
    extra environment beyond hiding the GPU."""
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    more = {"_env": extra_env} if set(extra_env) - {"CUDA_VISIBLE_DEVICES"} else {}
    return cache.cache_key(chapter, code, {**params, "_device": "cuda" if cuda else "cpu", **more})


def run_chapter(chapter: Chapter, *, scale: str = "full", seed: int = 0,
                overrides: dict[str, Any] | None = None, force: bool = False,
                progress: bool = True, record: bool = False, timeout_s: int = 1800,
                env: dict[str, str] | None = None) -> RunResult:
    """Execute ``chapter`` at ``scale`` (or reuse the cached result for the same key).

    ``overrides`` are further parameters (raw text from ``-p`` or typed values); ``record``
    writes the wall time into ``book/timings.json`` (default seed and no overrides only); ``env``
    adds variables to the kernel's environment (e.g. ``CUDA_VISIBLE_DEVICES=""``; they are part of
    the cache key). Raises :class:`ChapterFailed`, :class:`BadParameter` or
    :class:`MissingParameters`.
    """
    import papermill as pm

    check_scale(scale)
    apply_reproducible_env()
    defaults, typed = check_overrides(chapter, dict(overrides or {}))
    params = {"scale": scale, "seed": seed, **typed}
    nb = read_chapter(chapter)
    extra_env = dict(env or {})
    cuda = _uses_cuda(extra_env)
    key = _run_key(chapter, nb, params, extra_env, cuda)
    with cache.chapter_lock(chapter):
        hit = None if force else cache.lookup(chapter, key)
        if hit is not None:
            path, meta = hit
            return RunResult(chapter.id, path, float(meta["wall_s"]), cached=True, params=params)
        cache.result_path(chapter, key).unlink(missing_ok=True)
        work = Path(tempfile.mkdtemp(prefix="run-", dir=_mkdir(chapter.root / "_build" / "tmp")))
        src, out = work / "source.ipynb", work / "executed.ipynb"
        nbformat.write(nb, src)
        failed_path = chapter.root / "_build" / "failed" / f"{chapter.id}.ipynb"
        log_path = failed_path.with_suffix(".log")
        saved_env = {k: os.environ.get(k) for k in (*extra_env, HEADLESS_ENV)}
        os.environ.update({**extra_env, HEADLESS_ENV: "1"})
        t0 = time.perf_counter()
        try:
            with captured_stderr(enabled=not progress) as kernel_output:
                pm.execute_notebook(str(src), str(out), parameters=params, kernel_name="python3",
                                    progress_bar=progress, cwd=str(chapter.path.parent),
                                    execution_timeout=timeout_s, report_mode=False, log_output=False)
        except BaseException as err:  # noqa: BLE001 - re-raised as ChapterFailed (or as is)
            failed = None
            failed_path.parent.mkdir(parents=True, exist_ok=True)
            if out.is_file():
                os.replace(out, failed_path)
                failed = failed_path
            if kernel_output.text().strip():
                log_path.write_text(kernel_output.text())
            _cleanup(work)
            if isinstance(err, KeyboardInterrupt):
                raise
            failure = _failure(chapter, err, failed)
            failure.log = log_path if log_path.is_file() else None
            raise failure from err
        finally:
            for k, v in saved_env.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        wall = time.perf_counter() - t0
        executed = nbformat.read(out, as_version=4)
        _cleanup(work)
        failed_path.unlink(missing_ok=True)
        log_path.unlink(missing_ok=True)
        meta = {"chapter": chapter.id, "params": params, "env": extra_env, "wall_s": round(wall, 1),
                "python": sys.version.split()[0], "cuda": cuda,
                "finished": time.strftime("%Y-%m-%dT%H:%M:%S")}
        path = cache.store(chapter, key, executed, meta)
    if record and not typed and seed == defaults["seed"] and not extra_env:
        rows = notebook_claims(path)
        record_time(chapter.root, chapter.id, scale, wall, held_counts(rows)["paper"] if rows else None)
    return RunResult(chapter.id, path, wall, cached=False, params=params)


def find_result(chapter: Chapter, *, scale: str = "ci", seed: int = 0,
                env: dict[str, str] | None = None) -> Path | None:
    """The stored execution of the chapter's *current* code at (scale, seed, default parameters,
    ``env``), or None; executes nothing."""
    extra_env = dict(env or {})
    key = _run_key(chapter, read_chapter(chapter), {"scale": scale, "seed": seed}, extra_env,
                   _uses_cuda(extra_env))
    hit = cache.lookup(chapter, key)
    return hit[0] if hit else None


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
