"""Golden notebooks: ``tests/golden/<id>.ipynb``, a chapter executed at ``ci`` scale without a GPU.

nbval re-executes them and compares the outputs of the cells tagged ``nbval-check-output`` (the
claims table), under a CPU kernel selection other than this machine's (:func:`nbval_command`).
:func:`compare_with_golden` compares an execution the test command already made with the golden,
without executing again. ``check_fresh`` makes sure a golden notebook still holds exactly the
chapter's code plus the injected ``ci`` parameters, so a chapter cannot drift away from its test.
"""

from __future__ import annotations

from pathlib import Path

import nbformat

from iclr25.common.cache import atomic_write
from iclr25.book.params import read_chapter
from iclr25.book.registry import Chapter
from iclr25.book.runner import run_chapter

CHECK_TAG = "nbval-check-output"
NO_GPU = {"CUDA_VISIBLE_DEVICES": ""}

GOLDEN_DIR = "tests/golden"
GOLDEN_PARAMS = {"scale": "ci", "seed": 0}
DROP_MIME = ("image/png", "image/jpeg", "image/svg+xml", "application/vnd.jupyter.widget-view+json")


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


def make_golden(chapter: Chapter, *, force: bool = False) -> Path:
    """Execute ``chapter`` at ``ci`` without a GPU (reusing a cached run) and store its golden
    notebook."""
    res = run_chapter(chapter, scale="ci", seed=GOLDEN_PARAMS["seed"], force=force, env=NO_GPU)
    nb = strip_for_golden(nbformat.read(res.notebook, as_version=4))
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
    with the first difference."""
    path = golden_path(chapter)
    if not path.is_file():
        return f"{chapter.id}: no golden notebook"
    want = checked_outputs(nbformat.read(path, as_version=4))
    got = checked_outputs(nbformat.read(executed, as_version=4))
    if want == got:
        return None
    import difflib

    a = "\n".join("\n".join(t) for t in want).splitlines()
    b = "\n".join("\n".join(t) for t in got).splitlines()
    diff = [ln for ln in difflib.unified_diff(a, b, "golden", "this run", n=0, lineterm="")][2:12]
    return f"{chapter.id}: checked outputs differ from the golden:\n  " + "\n  ".join(diff)


def _code(nb: nbformat.NotebookNode) -> list[str]:
    return [c.source.strip() for c in nb.cells if c.cell_type == "code"
            and "injected-parameters" not in c.metadata.get("tags", [])]


def check_fresh(chapter: Chapter) -> str | None:
    """None when the golden notebook matches the chapter, else a message saying how to fix it."""
    path = golden_path(chapter)
    fix = f"run `python -m iclr25 golden {chapter.id}`"
    if not path.is_file():
        return f"{chapter.id}: no golden notebook at {path.relative_to(chapter.root)}; {fix}"
    golden = nbformat.read(path, as_version=4)
    if _code(golden) != _code(read_chapter(chapter)):
        return f"{chapter.id}: the golden notebook's code differs from the chapter; {fix}"
    injected = [c for c in golden.cells if "injected-parameters" in c.metadata.get("tags", [])]
    expected = [f"{k} = {v!r}" for k, v in GOLDEN_PARAMS.items()]
    if len(injected) != 1 or any(e.replace("'", '"') not in injected[0].source.replace("'", '"')
                                 for e in expected):
        return f"{chapter.id}: the golden notebook was not made with scale='ci', seed=0; {fix}"
    return None


def nbval_command(chs: list[Chapter], *, kernels: str = "other") -> tuple[list[str], dict[str, str], str]:
    """The nbval run that re-executes the golden notebooks of ``chs`` and compares the checked
    cells, without a GPU, under the ``native`` or the ``other`` CPU kernel selection
    (:func:`iclr25.book.environment.other_kernels_env`). Returns (command, environment, a
    description of the kernels)."""
    import sys

    from iclr25.book.environment import describe, golden_env, other_kernels_env

    if kernels not in ("native", "other"):
        raise ValueError(f"unknown kernel selection {kernels!r}; valid: native, other")
    env = golden_env()
    if kernels == "other":
        env.update(other_kernels_env())
    paths = [str(golden_path(c).relative_to(c.root)) for c in chs]
    cmd = [sys.executable, "-m", "pytest", "-q", "--nbval-lax", "--nbval-current-env", "-p", "no:cacheprovider",
           "-c", "tests/pytest.ini", "--rootdir", ".", *paths]
    return cmd, env, describe(env) if kernels == "other" else "native kernels"
