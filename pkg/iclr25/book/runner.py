"""Execute one chapter with papermill, with a cache and an honest failure report.

``run_chapter`` converts the jupytext source to a notebook, injects the parameters, executes it
and writes ``_build/executed/<id>.ipynb`` plus ``<id>.json`` (cache key, wall time). It writes to a
temporary file and renames on success; a failure removes any earlier result of that chapter, keeps
the failed notebook in ``_build/failed/`` for inspection, and raises :class:`ChapterFailed`.
"""

from __future__ import annotations

import ast
import contextlib
import fcntl
import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat

from iclr25.book.claims import held_counts, notebook_claims
from iclr25.book.registry import Chapter
from iclr25.common import HEADLESS_ENV, SCALES, check_scale

CONSTRAINTS = "pkg/constraints.txt"
TIMINGS = "book/timings.json"


class ChapterFailed(RuntimeError):
    """A chapter raised while executing; the message names chapter, cell and exception."""

    def __init__(self, chapter: str, cell: int | None, first_line: str, error: str, notebook: Path | None):
        self.chapter, self.cell, self.first_line, self.error, self.notebook = (
            chapter, cell, first_line, error, notebook)
        where = f"in cell {cell} ({first_line!r})" if cell is not None else "before any cell ran"
        saved = f"; the failed notebook is at {notebook}" if notebook else ""
        super().__init__(f"chapter {chapter} failed {where}: {error}{saved}")


class BadParameter(ValueError):
    """A ``-p name=value`` whose name is not in the chapter's parameters cell."""


@dataclass(frozen=True)
class RunResult:
    """What one ``run_chapter`` call produced."""

    chapter: str
    notebook: Path
    wall_s: float
    cached: bool


# ---------------------------------------------------------------- the notebook and its parameters
def read_chapter(chapter: Chapter) -> nbformat.NotebookNode:
    """The chapter as an nbformat notebook (through jupytext)."""
    import jupytext

    if not chapter.path.is_file():
        raise FileNotFoundError(f"chapter {chapter.id} is listed in _toc.yml but {chapter.path} does not exist")
    nb = jupytext.read(chapter.path)
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    return nb


def parameters_cell(nb: nbformat.NotebookNode) -> tuple[int, dict[str, Any]]:
    """Index and literal values of the single cell tagged ``parameters``."""
    found = [i for i, c in enumerate(nb.cells)
             if c.cell_type == "code" and "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(found) != 1:
        raise ValueError(f"a chapter needs exactly one cell tagged 'parameters', found {len(found)}")
    values: dict[str, Any] = {}
    for node in ast.parse(nb.cells[found[0]].source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                values[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError as err:
                raise ValueError(f"the parameters cell must hold literals only: {ast.unparse(node)}") from err
    for required in ("scale", "seed"):
        if required not in values:
            raise ValueError(f"the parameters cell must define {required!r}")
    return found[0], values


def parse_overrides(pairs: list[str]) -> dict[str, Any]:
    """``["n=3", "name=abc"]`` -> ``{"n": 3, "name": "abc"}`` (Python literals, else strings)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep or not name.strip():
            raise BadParameter(f"parameter {pair!r} is not of the form name=value")
        try:
            out[name.strip()] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            out[name.strip()] = raw
    return out


def check_overrides(chapter: Chapter, overrides: dict[str, Any]) -> dict[str, Any]:
    """Refuse names that are not in the parameters cell; return the defaults."""
    _, defaults = parameters_cell(read_chapter(chapter))
    unknown = sorted(set(overrides) - set(defaults))
    if unknown:
        raise BadParameter(f"chapter {chapter.id} has no parameter {', '.join(map(repr, unknown))}; "
                           f"its parameters are: {', '.join(defaults)}")
    if "scale" in overrides:
        check_scale(overrides["scale"])
    return defaults


# ---------------------------------------------------------------- cache
def package_files(root: Path) -> list[Path]:
    """Every package source file."""
    return sorted(p for p in (root / "pkg" / "iclr25").rglob("*.py") if "__pycache__" not in p.parts)


def _imported_modules(source: str, current: str = "") -> set[str]:
    """Dotted names of ``iclr25`` modules that ``source`` may import (``from a import b`` yields
    both ``a`` and ``a.b``, since ``b`` may be a submodule). ``current`` resolves relative imports."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {"iclr25"}
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = current.split(".")[: len(current.split(".")) - node.level]
                base = ".".join([*pkg, base] if base else pkg)
            names.add(base)
            names.update(f"{base}.{a.name}" for a in node.names)
    return {n for n in names if n == "iclr25" or n.startswith("iclr25.")}


def _module_file(root: Path, name: str) -> Path | None:
    base = root / "pkg" / Path(*name.split("."))
    for cand in (base.with_suffix(".py"), base / "__init__.py"):
        if cand.is_file():
            return cand
    return None


def dependency_files(chapter: Chapter, code: str) -> list[Path]:
    """The package files a chapter's ``code`` imports, directly or through other package modules
    (with every parent package's ``__init__``). Import statements are found statically; a
    chapter that imports the package in a way this cannot see (``importlib``) depends on all of it."""
    if "importlib" in code or "__import__" in code:
        return package_files(chapter.root)
    todo = list(_imported_modules(code))
    seen: set[str] = set()
    files: set[Path] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        parts = name.split(".")
        todo.extend(".".join(parts[:i]) for i in range(1, len(parts)))  # parent packages
        f = _module_file(chapter.root, name)
        if f is not None:
            files.add(f)
            is_pkg = f.name == "__init__.py"
            todo.extend(_imported_modules(f.read_text(encoding="utf-8"), f"{name}.__init__" if is_pkg else name))
    return sorted(files)


def cache_key(chapter: Chapter, params: dict[str, Any]) -> str:
    """Hash of the chapter source, the package files it imports (transitively), the pinned
    requirements and the parameters."""
    h = hashlib.sha256()
    source = chapter.path.read_text(encoding="utf-8")
    code = "\n".join(c.source for c in read_chapter(chapter).cells if c.cell_type == "code")
    files = dependency_files(chapter, code)
    if (chapter.root / CONSTRAINTS).is_file():
        files.append(chapter.root / CONSTRAINTS)
    h.update(source.encode())
    for f in files:
        h.update(str(f.relative_to(chapter.root)).encode())
        h.update(f.read_bytes())
    h.update(json.dumps(params, sort_keys=True, default=str).encode())
    return h.hexdigest()


def executed_path(chapter: Chapter) -> Path:
    return chapter.root / "_build" / "executed" / f"{chapter.id}.ipynb"


def meta_path(chapter: Chapter) -> Path:
    return executed_path(chapter).with_suffix(".json")


def cached_result(chapter: Chapter, key: str) -> dict[str, Any] | None:
    """The stored metadata when an execution with this key exists, else None."""
    meta, nb = meta_path(chapter), executed_path(chapter)
    if meta.is_file() and nb.is_file():
        data = json.loads(meta.read_text())
        if data.get("key") == key:
            return data
    return None


def record_time(root: Path, chapter_id: str, scale: str, wall_s: float,
                claims: tuple[int, int] | None = None) -> None:
    """Store the last measured wall time of a chapter at a scale in ``book/timings.json``, and how
    many of the paper's claims held (``claims_<scale>: "held/total"``)."""
    path = root / TIMINGS
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data = json.loads(path.read_text()) if path.is_file() else {}
        entry = data.setdefault(chapter_id, {})
        entry[scale] = round(wall_s, 1)
        if claims is not None:
            entry[f"claims_{scale}"] = f"{claims[0]}/{claims[1]}"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(dict(sorted(data.items())), indent=2) + "\n")
        tmp.replace(path)
    with contextlib.suppress(OSError):
        path.with_suffix(".lock").unlink()


def load_timings(root: Path) -> dict[str, dict[str, float]]:
    path = root / TIMINGS
    return json.loads(path.read_text()) if path.is_file() else {}


# ---------------------------------------------------------------- execution
def _failure(chapter: Chapter, err: BaseException, failed_nb: Path | None) -> ChapterFailed:
    from papermill.exceptions import PapermillExecutionError

    if isinstance(err, PapermillExecutionError):
        first = next((ln for ln in err.source.splitlines() if ln.strip()), "")
        return ChapterFailed(chapter.id, err.cell_index, first.strip(), f"{err.ename}: {err.evalue}", failed_nb)
    return ChapterFailed(chapter.id, None, "", f"{type(err).__name__}: {err}", failed_nb)


def _remove_result(chapter: Chapter) -> None:
    for p in (executed_path(chapter), meta_path(chapter)):
        with contextlib.suppress(FileNotFoundError):
            p.unlink()


def run_chapter(chapter: Chapter, *, scale: str = "full", seed: int = 0,
                overrides: dict[str, Any] | None = None, force: bool = False,
                progress: bool = True, timeout_s: int = 1800) -> RunResult:
    """Execute ``chapter`` at ``scale`` (or reuse a cached execution) and return where it went.

    Raises :class:`ChapterFailed` (chapter, cell, first line, exception) on an error in the
    notebook, :class:`BadParameter` for an unknown ``overrides`` name.
    """
    import papermill as pm

    check_scale(scale)
    overrides = dict(overrides or {})
    defaults = check_overrides(chapter, overrides)
    params = {**{k: defaults[k] for k in ("scale", "seed")}, "scale": scale, "seed": seed, **overrides}
    key = cache_key(chapter, params)
    out = executed_path(chapter)
    hit = None if force else cached_result(chapter, key)
    if hit is not None:
        return RunResult(chapter.id, out, float(hit["wall_s"]), cached=True)

    _remove_result(chapter)  # a stale result must not survive a failed re-run
    out.parent.mkdir(parents=True, exist_ok=True)
    src = out.with_name(out.stem + ".source.ipynb")
    tmp = out.with_name(out.stem + ".running.ipynb")
    nbformat.write(read_chapter(chapter), src)
    failed_dir = chapter.root / "_build" / "failed" / chapter.id
    os.environ[HEADLESS_ENV] = "1"
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    t0 = time.perf_counter()
    try:
        pm.execute_notebook(str(src), str(tmp), parameters=params, kernel_name="python3",
                            progress_bar=progress, cwd=str(chapter.path.parent),
                            execution_timeout=timeout_s, report_mode=False)
    except BaseException as err:  # noqa: BLE001 - re-raised as ChapterFailed (or re-raised)
        failed = None
        if tmp.is_file():
            failed_dir.parent.mkdir(parents=True, exist_ok=True)
            failed = failed_dir.with_suffix(".ipynb")
            tmp.replace(failed)
        src.unlink(missing_ok=True)
        if isinstance(err, KeyboardInterrupt):
            raise
        raise _failure(chapter, err, failed) from err
    wall = time.perf_counter() - t0
    src.unlink(missing_ok=True)
    failed_dir.with_suffix(".ipynb").unlink(missing_ok=True)
    meta = {"chapter": chapter.id, "key": key, "params": params, "wall_s": round(wall, 1),
            "python": sys.version.split()[0], "finished": time.strftime("%Y-%m-%dT%H:%M:%S")}
    tmp.replace(out)
    meta_path(chapter).write_text(json.dumps(meta, indent=2) + "\n")
    if not overrides and seed == defaults["seed"] and scale in SCALES:
        rows = notebook_claims(out)
        record_time(chapter.root, chapter.id, scale, wall, held_counts(rows)["paper"] if rows else None)
    return RunResult(chapter.id, out, wall, cached=False)
