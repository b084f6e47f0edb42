"""The execution cache: what a chapter's result depends on, and where results are kept.

**Key.** A chapter's executed notebook is reused only when nothing that can change its outputs
changed (:func:`cache_key`): the source of its code cells (in order; markdown cells do not count,
so a prose edit re-renders without re-executing), every package file its code imports (transitively,
found statically), the data files (anything but ``.py``) of every package it imports, the pinned
requirements and the parameters. Cells are parsed the way IPython runs them (magics and ``!`` lines
transformed first); when the imports cannot be known for sure (a magic or a shell escape,
``importlib``, a cell that does not parse) the chapter depends on the whole package, data included.
A package's data are the files in its folder and in sub-folders that are not packages themselves
(``diffusion/weights/*.pt``, ``ssm/data/*.csv``); data that code reads from *another* package's
folder is not seen.

**Store.** Results are kept per key, not one slot per chapter, so a ``ci`` run (the tests), a ``full``
run (the book) and a ``-p`` experiment never evict each other: ``_build/cache/<id>/<key>.ipynb``.
The key and the run's metadata live inside the notebook (``metadata.iclr25``), written to a unique
temporary file and renamed into place in one step; a record that cannot be read, or whose key does
not match its name, is deleted and rebuilt. When the chapter's text changed since the record was
made (prose, cell tags), :func:`current_view` merges the stored outputs into the current text, as
jupyter-cache does, and writes that beside the record (``merged/<key>.ipynb``); the record itself is
never rewritten. A lock per chapter (:func:`chapter_lock`, ``filelock``) serialises executions of the
same chapter by concurrent builds; whoever holds it first removes what an interrupted run left
(:func:`remove_partial`).
"""

from __future__ import annotations

import ast
import contextlib
import copy
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any, Iterator

import nbformat

from iclr25.book.registry import Chapter
from iclr25.common.cache import atomic_write

CONSTRAINTS = "pkg/constraints.txt"
CACHE_DIR = "_build/cache"
META = "iclr25"
KEEP_PER_CHAPTER = 6
MERGED = "merged"
INJECTED = "injected-parameters"
#: Cell metadata written by the execution (papermill, nbclient), not by the chapter's author.
RUN_METADATA = ("papermill", "execution")


# ---------------------------------------------------------------- what a chapter depends on
def _ignored(path: Path) -> bool:
    return "__pycache__" in path.parts or path.suffix == ".pyc"


def package_files(root: Path) -> list[Path]:
    """Every package file: sources and data (not ``__pycache__``)."""
    return sorted(p for p in (root / "pkg" / "iclr25").rglob("*") if p.is_file() and not _ignored(p))


def data_files(folder: Path) -> list[Path]:
    """The data files of the package in ``folder``: files other than ``.py`` in it and in its
    sub-folders that are not packages themselves (no ``__init__.py``)."""
    found: list[Path] = []
    for p in sorted(folder.iterdir()) if folder.is_dir() else []:
        if _ignored(p) or p.name == "__pycache__":
            continue
        if p.is_dir():
            if not (p / "__init__.py").is_file():
                found.extend(data_files(p))
        elif p.suffix != ".py":
            found.append(p)
    return found


def python_source(cell_source: str) -> tuple[str, bool]:
    """A code cell as the Python that IPython runs, and whether that is *certain*: a magic
    (``%run``, ``%load``, ``%%bash``...), a shell escape (``!``) or help (``?``) turns into a
    ``get_ipython()`` call whose effect on imports cannot be read statically."""
    from IPython.core.inputtransformer2 import TransformerManager

    code = TransformerManager().transform_cell(cell_source)
    return code, "get_ipython()" not in code


def all_imports(source: str, current: str = "") -> set[str] | None:
    """Dotted names of every module that ``source`` may import (``from a import b`` yields both
    ``a`` and ``a.b``, since ``b`` may be a submodule); ``current`` resolves relative imports.
    None when ``source`` does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
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
    return names


def imported_modules(source: str, current: str = "") -> set[str] | None:
    """The ``iclr25`` modules among :func:`all_imports` (None when ``source`` does not parse: the
    caller must then assume everything)."""
    names = all_imports(source, current)
    return None if names is None else {n for n in names if n == "iclr25" or n.startswith("iclr25.")}


def _module_file(root: Path, name: str) -> Path | None:
    base = root / "pkg" / Path(*name.split("."))
    for cand in (base.with_suffix(".py"), base / "__init__.py"):
        if cand.is_file():
            return cand
    return None


_DYNAMIC = re.compile(r"\bimport_module\s*\(|\b__import__\s*\(|\bimportlib\.reload\s*\(")


def _dynamic(source: str) -> bool:
    """Whether ``source`` imports modules by name at run time (``importlib.import_module``,
    ``__import__``, ``reload``); ``importlib.resources``, ``.metadata`` and ``find_spec`` import
    nothing."""
    return bool(_DYNAMIC.search(source))


def dependency_files(chapter: Chapter, cells: list[str]) -> list[Path]:
    """The package files the chapter's code ``cells`` import, directly or through other package
    modules (with every parent package's ``__init__``), and the data files of every package among
    them (:func:`data_files`). Anything uncertain (magics, shell escapes, dynamic imports, code
    that does not parse) makes the chapter depend on the whole package."""
    everything = package_files(chapter.root)
    todo: list[str] = []
    for cell in cells:
        code, certain = python_source(cell)
        names = imported_modules(code)
        if not certain or names is None or _dynamic(code):
            return everything
        todo.extend(names)
    seen: set[str] = set()
    files: set[Path] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        parts = name.split(".")
        todo.extend(".".join(parts[:i]) for i in range(1, len(parts)))  # parent packages
        files.update(data_files(chapter.root / "pkg" / Path(*parts)))  # a package's data, if any
        f = _module_file(chapter.root, name)
        if f is None:
            continue
        files.add(f)
        text = f.read_text(encoding="utf-8")
        names = imported_modules(text, f"{name}.__init__" if f.name == "__init__.py" else name)
        if names is None or _dynamic(text):
            return everything
        todo.extend(names)
    return sorted(files)


def code_cells(nb: nbformat.NotebookNode) -> list[str]:
    """The source of the notebook's code cells, in order: the only cells that enter the key."""
    return [c.source for c in nb.cells if c.cell_type == "code"]


def cache_key(chapter: Chapter, code: list[str], params: dict[str, Any]) -> str:
    """sha256 of the chapter's code cells (``code``, in order; markdown never enters), the package
    files and package data its code imports (transitively), the pinned requirements and the
    parameters."""
    h = hashlib.sha256()
    files = dependency_files(chapter, code)
    if (chapter.root / CONSTRAINTS).is_file():
        files.append(chapter.root / CONSTRAINTS)
    h.update(json.dumps(code).encode())
    for f in files:
        h.update(str(f.relative_to(chapter.root)).encode())
        h.update(hashlib.sha256(f.read_bytes()).digest())
    h.update(json.dumps(params, sort_keys=True, default=str).encode())
    return h.hexdigest()


# ---------------------------------------------------------------- where results are kept
def chapter_dir(chapter: Chapter) -> Path:
    return chapter.root / CACHE_DIR / chapter.id


def result_path(chapter: Chapter, key: str) -> Path:
    """Where the executed notebook for ``key`` is kept."""
    return chapter_dir(chapter) / f"{key[:24]}.ipynb"


def read_meta(path: Path) -> dict[str, Any] | None:
    """The run metadata stored inside an executed notebook, or None if it cannot be read."""
    try:
        nb = nbformat.read(path, as_version=4)
        meta = dict(nb.metadata[META])
        meta["key"]  # noqa: B018 - must be there
        return meta
    except Exception:  # noqa: BLE001 - any unreadable record is treated as absent
        return None


def lookup(chapter: Chapter, key: str) -> tuple[Path, dict[str, Any]] | None:
    """The stored result for ``key`` and its metadata; a corrupt record is deleted (rebuilt)."""
    path = result_path(chapter, key)
    if not path.is_file():
        return None
    meta = read_meta(path)
    if meta is None or meta.get("key") != key:
        path.unlink(missing_ok=True)
        return None
    os.utime(path)  # most recently used: kept longest by prune()
    return path, meta


def _write(nb: nbformat.NotebookNode, dest: Path) -> Path:
    """Write ``nb`` to ``dest`` atomically (a unique ``.<name>.*.tmp`` beside it, then a rename)."""
    return atomic_write(dest, lambda tmp: nbformat.write(nb, str(tmp)))


def store(chapter: Chapter, key: str, nb: nbformat.NotebookNode, meta: dict[str, Any]) -> Path:
    """Write ``nb`` with ``meta`` (and the key) inside it, atomically, as the result for ``key``."""
    nb.metadata[META] = {**meta, "key": key}
    dest = _write(nb, result_path(chapter, key))
    prune(chapter)
    return dest


def prune(chapter: Chapter, keep: int = KEEP_PER_CHAPTER) -> None:
    """Keep the ``keep`` most recently used results of ``chapter`` (and their merged views)."""
    results = sorted(chapter_dir(chapter).glob("*.ipynb"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in results[keep:]:
        old.unlink(missing_ok=True)
    for view in (chapter_dir(chapter) / MERGED).glob("*.ipynb"):
        if not (chapter_dir(chapter) / view.name).is_file():
            view.unlink(missing_ok=True)


def remove_partial(chapter: Chapter) -> list[Path]:
    """Delete the temporary files (``.*.tmp``) that an interrupted write left in the chapter's cache
    folder; call it holding :func:`chapter_lock` (every write there happens under it). Returns them."""
    folder = chapter_dir(chapter)
    stale = [*folder.glob(".*.tmp"), *(folder / MERGED).glob(".*.tmp")]
    for p in stale:
        p.unlink(missing_ok=True)
    return stale


# ---------------------------------------------------------------- the stored outputs, current text
def _is_injected(cell: nbformat.NotebookNode) -> bool:
    return INJECTED in cell.metadata.get("tags", [])


def _text(nb: nbformat.NotebookNode) -> list[tuple[str, str, dict[str, Any]]]:
    """What the author wrote: every cell's type, source and metadata (not what the execution added:
    its metadata, and the empty ``tags`` papermill gives every cell)."""
    return [(c.cell_type, c.source, {k: v for k, v in c.metadata.items()
                                     if k not in RUN_METADATA and not (k == "tags" and not v)})
            for c in nb.cells if not _is_injected(c)]


def merge_outputs(stored: nbformat.NotebookNode, current: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """``current``'s cells (markdown, code and its tags as they are now) carrying ``stored``'s
    outputs: code cells are matched in order (their source is equal, since it is in the key), and
    papermill's injected-parameters cell stays right after the code cell it followed."""
    runs = [c for c in stored.cells if c.cell_type == "code" and not _is_injected(c)]
    if code_cells(current) != [c.source for c in runs]:
        raise ValueError("the stored notebook's code cells differ from the chapter's")
    injected, after = None, 0
    for c in stored.cells:
        if _is_injected(c):
            injected = c
            break
        after += c.cell_type == "code"
    injected = copy.deepcopy(injected)
    cells = [injected] if injected is not None and after == 0 else []
    done = 0
    for cell in current.cells:
        cell = copy.deepcopy(cell)
        if cell.cell_type == "code":
            run = runs[done]
            cell.outputs, cell.execution_count = run.outputs, run.execution_count
            cell.metadata.update({k: run.metadata[k] for k in RUN_METADATA if k in run.metadata})
            done += 1
        cells.append(cell)
        if cell.cell_type == "code" and injected is not None and done == after:
            cells.append(injected)
    return nbformat.from_dict({**copy.deepcopy({k: v for k, v in stored.items() if k != "cells"}),
                               "cells": cells})


def merged_path(chapter: Chapter, record: Path) -> Path:
    """Where the merged view of ``record`` (a stored result) is written."""
    return chapter_dir(chapter) / MERGED / record.name


def current_view(chapter: Chapter, record: Path, current: nbformat.NotebookNode) -> Path:
    """The stored result ``record`` as the chapter reads now: ``record`` itself when the chapter's
    text is unchanged since it ran, else its outputs merged into ``current`` (the chapter as a
    notebook), written atomically to :func:`merged_path`. Call it holding :func:`chapter_lock`."""
    stored = nbformat.read(record, as_version=4)
    if _text(stored) == _text(current):
        return record
    return _write(merge_outputs(stored, current), merged_path(chapter, record))


def latest(chapter: Chapter, **params: Any) -> tuple[Path, dict[str, Any]] | None:
    """The most recent stored result of ``chapter`` whose parameters include ``params`` (e.g.
    ``scale="ci"``), whatever its key; for reports, never for reuse."""
    found = []
    for path in chapter_dir(chapter).glob("*.ipynb"):
        meta = read_meta(path)
        if meta and all(meta.get("params", {}).get(k) == v for k, v in params.items()):
            found.append((path.stat().st_mtime, path, meta))
    return max(found, key=lambda t: t[0])[1:] if found else None


@contextlib.contextmanager
def chapter_lock(chapter: Chapter) -> Iterator[None]:
    """Hold the chapter's lock (``filelock``: ``fcntl`` on POSIX, ``msvcrt`` on Windows)."""
    from filelock import FileLock

    lock = chapter.root / CACHE_DIR / f"{chapter.id}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(lock):
        yield
