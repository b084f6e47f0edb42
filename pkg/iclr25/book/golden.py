"""Golden notebooks: ``tests/golden/<id>.ipynb``, the chapter's **launch notebook** (what a reader
opens in Colab or Binder, :mod:`iclr25.book.launch`) with the outputs of the chapter executed at
``ci`` scale without a GPU.

- :func:`make_golden` executes the chapter (or reuses the cached run) and moves its outputs into
  the launch notebook, cell by cell (the code cells are the same; papermill's injected-parameters
  cell follows the parameters cell, as papermill puts it).
- :func:`check_fresh` makes sure a golden still holds exactly the launch notebook's code plus the
  injected ``ci`` parameters, so a chapter cannot drift away from its test.
- :func:`compare_with_golden` compares an execution the test command already made with the golden,
  without executing again.
- :func:`verify_goldens` re-executes the goldens with nbval, one process per chapter with a timeout
  of 3x the ``ci`` budget, in a given Python environment (the test command's reader environment:
  the built wheel plus the reader package list), under the native or another CPU kernel selection,
  and compares the outputs of the cells tagged ``nbval-check-output`` (the claims table).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

import nbformat

from iclr25.book.params import read_chapter
from iclr25.book.registry import Chapter
from iclr25.common.cache import atomic_write

CHECK_TAG = "nbval-check-output"
NO_GPU = {"CUDA_VISIBLE_DEVICES": ""}

GOLDEN_DIR = "tests/golden"
GOLDEN_PARAMS = {"scale": "ci", "seed": 0}
#: The commit a golden's install cell names: it only runs on Colab, so a fixed name keeps the golden
#: independent of the commit it was made at.
GOLDEN_COMMIT = "main"
CI_BUDGET_S = 45.0
#: Every execution of a chapter is stopped after this many times its budget.
TIMEOUT_FACTOR = 3
DROP_MIME = ("image/png", "image/jpeg", "image/svg+xml", "application/vnd.jupyter.widget-view+json")
INJECTED = "injected-parameters"
KERNEL_NAME = "iclr25-test"


def golden_path(chapter: Chapter) -> Path:
    return chapter.root / GOLDEN_DIR / f"{chapter.id}.ipynb"


def strip_for_golden(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Drop images, widget views and run-specific metadata; keep text outputs."""
    for cell in nb.cells:
        cell.metadata.pop("papermill", None)
        cell.metadata.pop("execution", None)
        for out in cell.get("outputs", []):
            for mime in DROP_MIME:
                out.get("data", {}).pop(mime, None)
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.outputs if o.get("output_type") not in ("display_data",)
                            or o.get("data")]
    for key in ("papermill", "widgets", "iclr25"):
        nb.metadata.pop(key, None)
    return nb


def _tags(cell: nbformat.NotebookNode) -> list[str]:
    return list(cell.metadata.get("tags", []))


def launch_with_outputs(launch: nbformat.NotebookNode, executed: nbformat.NotebookNode,
                        chapter_id: str) -> nbformat.NotebookNode:
    """``launch`` (a launch notebook) with the outputs and tags of ``executed`` (the chapter's
    papermill run): the k-th code cell after the install cell gets the outputs of the k-th
    executed code cell that papermill did not inject, and papermill's injected cell follows the
    parameters cell. Raises ValueError when the two do not hold the same code."""
    done = [c for c in executed.cells if c.cell_type == "code" and INJECTED not in _tags(c)]
    injected = [c for c in executed.cells if INJECTED in _tags(c)]
    code = [i for i, c in enumerate(launch.cells) if c.cell_type == "code"]
    if len(code) != len(done) + 1:
        raise ValueError(f"{chapter_id}: the launch notebook has {len(code) - 1} code cells after its install "
                         f"cell, the executed chapter {len(done)}")
    nb = nbformat.from_dict(json.loads(json.dumps(launch)))
    cells = []
    k = 0
    for cell in nb.cells:
        cells.append(cell)
        if cell.cell_type != "code" or "install" in _tags(cell):
            continue
        src = done[k]
        k += 1
        if cell.source.strip() != src.source.strip():
            raise ValueError(f"{chapter_id}: code cell {k} of the launch notebook differs from the executed chapter's")
        cell.outputs = src.get("outputs", [])
        cell.execution_count = src.get("execution_count")
        tags = sorted(set(_tags(cell)) | set(_tags(src)))
        if tags:
            cell.metadata["tags"] = tags
        if "parameters" in tags:
            cells.extend(nbformat.from_dict(json.loads(json.dumps(c))) for c in injected)
    nb.cells = cells
    return nb


def golden_notebook(chapter: Chapter, executed: Path) -> nbformat.NotebookNode:
    """The golden of ``chapter`` from its executed ``ci`` notebook ``executed``."""
    from iclr25.book.launch import chapter_launch_notebook

    launch = chapter_launch_notebook(chapter.root, chapter, GOLDEN_COMMIT)
    nb = launch_with_outputs(launch, nbformat.read(executed, as_version=4), chapter.id)
    return strip_for_golden(nb)


def make_golden(chapter: Chapter, *, force: bool = False) -> Path:
    """Execute ``chapter`` at ``ci`` without a GPU (reusing a cached run) and store its golden."""
    from iclr25.book.runner import run_chapter

    res = run_chapter(chapter, scale="ci", seed=GOLDEN_PARAMS["seed"], force=force, env=NO_GPU)
    nb = golden_notebook(chapter, res.notebook)
    dest = golden_path(chapter)
    dest.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(dest, lambda tmp: nbformat.write(nb, str(tmp)))
    return dest


def checked_outputs(nb: nbformat.NotebookNode) -> list[list[str]]:
    """The text that nbval compares: for each cell tagged ``nbval-check-output``, its outputs'
    plain text (streams and ``text/plain``), in order."""
    out = []
    for c in nb.cells:
        if c.cell_type != "code" or CHECK_TAG not in c.metadata.get("tags", []):
            continue
        texts = []
        for o in c.get("outputs", []):
            if o.get("output_type") == "stream":
                texts.append(o.get("text", ""))
            elif "text/plain" in o.get("data", {}):
                texts.append(o["data"]["text/plain"])
        out.append(texts)
    return out


def compare_with_golden(chapter: Chapter, executed: Path) -> str | None:
    """None when the checked cells of the executed notebook equal the golden's, else a message
    with the first difference. A golden without checked cells is a difference too: it would
    compare nothing."""
    path = golden_path(chapter)
    if not path.is_file():
        return f"{chapter.id}: no golden notebook"
    want = checked_outputs(nbformat.read(path, as_version=4))
    if not want:
        return f"{chapter.id}: the golden notebook has no cell tagged {CHECK_TAG}: nothing to compare"
    got = checked_outputs(nbformat.read(executed, as_version=4))
    if want == got:
        return None
    import difflib

    a = "\n".join("\n".join(t) for t in want).splitlines()
    b = "\n".join("\n".join(t) for t in got).splitlines()
    diff = [ln for ln in difflib.unified_diff(a, b, "golden", "this run", n=0, lineterm="")][2:12]
    return f"{chapter.id}: checked outputs differ from the golden:\n  " + "\n  ".join(diff)


def _code(nb: nbformat.NotebookNode) -> list[str]:
    return [c.source.strip() for c in nb.cells if c.cell_type == "code" and INJECTED not in _tags(c)]


def check_fresh(chapter: Chapter) -> str | None:
    """None when the golden holds the chapter's launch notebook's code with the ``ci`` parameters,
    else a message saying how to fix it."""
    from iclr25.book.launch import chapter_launch_notebook

    path = golden_path(chapter)
    fix = f"run `python -m iclr25 golden {chapter.id}`"
    if not path.is_file():
        return f"{chapter.id}: no golden notebook at {path.relative_to(chapter.root)}; {fix}"
    golden = nbformat.read(path, as_version=4)
    if _code(golden) != _code(chapter_launch_notebook(chapter.root, chapter, GOLDEN_COMMIT)):
        return f"{chapter.id}: the golden notebook's code differs from the chapter's launch notebook; {fix}"
    if not checked_outputs(golden):
        return f"{chapter.id}: the golden notebook has no cell tagged {CHECK_TAG}; {fix}"
    injected = [c for c in golden.cells if INJECTED in _tags(c)]
    expected = [f"{k} = {v!r}" for k, v in GOLDEN_PARAMS.items()]
    if len(injected) != 1 or any(e.replace("'", '"') not in injected[0].source.replace("'", '"')
                                 for e in expected):
        return f"{chapter.id}: the golden notebook was not made with scale='ci', seed=0; {fix}"
    return None


# ---------------------------------------------------------------- nbval
def write_kernelspec(python: str, folder: Path) -> Path:
    """A Jupyter data folder holding the kernelspec :data:`KERNEL_NAME` that runs ``python``
    (put it on ``JUPYTER_PATH``); returns the folder."""
    spec = folder / "kernels" / KERNEL_NAME
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": f"iclr25 test ({python})", "language": "python"}))
    return folder


def verify_env(kernels: str, jupyter_path: Path | None = None) -> dict[str, str]:
    """The environment of an nbval run: reproducible, no GPU, no source tree on ``PYTHONPATH``, the
    ``native`` or the ``other`` CPU kernel selection, and the test kernelspec's folder."""
    from iclr25.book.environment import golden_env, other_kernels_env

    if kernels not in ("native", "other"):
        raise ValueError(f"unknown kernel selection {kernels!r}; valid: native, other")
    env = golden_env()
    env.pop("PYTHONPATH", None)
    if kernels == "other":
        env.update(other_kernels_env())
    if jupyter_path is not None:
        env["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(jupyter_path), env.get("JUPYTER_PATH")]))
    return env


def nbval_command(chapter: Chapter, *, kernel: str | None, cell_timeout_s: int) -> list[str]:
    """pytest with nbval on the golden of ``chapter`` (``kernel``: a kernelspec name; None: the
    Python running this)."""
    how = ["--nbval-kernel-name", kernel] if kernel else ["--nbval-current-env"]
    ini = ["-c", "tests/pytest.ini"] if (chapter.root / "tests" / "pytest.ini").is_file() else []
    return [sys.executable, "-m", "pytest", "-v", "--nbval-lax", *how, f"--nbval-cell-timeout={cell_timeout_s}",
            "-p", "no:cacheprovider", *ini, "--rootdir", ".", str(golden_path(chapter).relative_to(chapter.root))]


_CELL_DONE = re.compile(r"::Cell (\d+) (PASSED|FAILED|ERROR|SKIPPED)")


def _last_cell(output: str) -> int | None:
    """The number of the last cell nbval reported (None before any)."""
    found = _CELL_DONE.findall(output)
    return int(found[-1][0]) if found else None


def verify_one(chapter: Chapter, env: dict[str, str], kernel: str | None,
               timeout_s: float = TIMEOUT_FACTOR * CI_BUDGET_S) -> tuple[str | None, float, str]:
    """nbval on the golden of ``chapter`` in its own process group, stopped after ``timeout_s``:
    ``(None or what failed, seconds, pytest's output)``."""
    cmd = nbval_command(chapter, kernel=kernel, cell_timeout_s=int(timeout_s))
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=chapter.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        last = _last_cell(out)
        where = f"in notebook cell {last + 1}" if last is not None else "before its first cell finished"
        return (f"{chapter.id}: nbval timed out after {timeout_s:.0f} s (the limit; default {TIMEOUT_FACTOR}x "
                f"the ci budget of {CI_BUDGET_S:.0f} s, golden --verify --timeout sets it), {where}",
                time.perf_counter() - t0, out)
    wall = time.perf_counter() - t0
    if proc.returncode == 0 and " passed" in out:
        return None, wall, out
    failed = sorted({int(n) for n, state in _CELL_DONE.findall(out) if state in ("FAILED", "ERROR")})
    cells = f" (notebook cell {', '.join(map(str, failed))})" if failed else ""
    return f"{chapter.id}: nbval failed{cells}, exit {proc.returncode}", wall, out


def verify_goldens(chs: list[Chapter], *, kernels: str = "other", python: str | None = None, jobs: int = 1,
                   timeout_s: float | None = None, echo: Callable[[str], None] = print) -> list[str]:
    """nbval on the goldens of ``chs``, each in its own process with a timeout, its kernel run by
    ``python`` (default: this Python) under the ``kernels`` selection, without a GPU; ``jobs`` at a
    time for chapters on one torch thread (the longest first), alone for the others. ``timeout_s``
    stops one chapter's nbval (default: the runner's limit of 3x the ci budget; raise it on a
    loaded machine). Returns the failures."""
    from iclr25.book.environment import describe

    root = chs[0].root if chs else Path.cwd()
    python = os.path.abspath(python) if python else None  # not resolved: a venv's python is a symlink
    folder = write_kernelspec(python, root / "_build" / "jupyter-test") if python else None
    env = verify_env(kernels, folder)
    echo(f"nbval on {len(chs)} golden notebook(s), no GPU, "
         f"{describe(env) if kernels == 'other' else 'native kernels'}, kernel: {python or sys.executable}")
    failures: list[str] = []
    count = [0]

    def one(c: Chapter) -> None:
        limit = {} if timeout_s is None else {"timeout_s": timeout_s}
        error, wall, out = verify_one(c, env, KERNEL_NAME if python else None, **limit)
        count[0] += 1
        if error:
            failures.append(error)
            tail = "\n".join(f"    | {ln}" for ln in out.strip().splitlines()[-40:])
            echo(f"[{count[0]}/{len(chs)}] FAILED after {wall:.1f} s: {error}\n{tail}")
        else:
            echo(f"[{count[0]}/{len(chs)}] {c.id} ok in {wall:.1f} s")

    from iclr25.book.timings import load_timings, schedule

    alone, paired = schedule(chs, jobs, load_timings(root), "ci")
    for c in alone:
        one(c)
    if paired:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            list(pool.map(one, paired))
    return failures
