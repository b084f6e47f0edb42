"""The execution cache: what a chapter's result depends on, and where results are kept.

**Key.** A chapter's executed notebook is reused only when nothing it depends on changed: the
chapter source, every package file it imports (transitively, found statically), the pinned
requirements and the parameters (:func:`cache_key`). Cells are parsed the way IPython runs them
(magics and ``!`` lines transformed first); when the imports cannot be known for sure (a magic or a
shell escape, ``importlib``, a cell that does not parse) the chapter depends on the whole package.

**Store.** Results are kept per key, not one slot per chapter, so a ``ci`` run (the tests), a ``full``
run (the book) and a ``-p`` experiment never evict each other: ``_build/cache/<id>/<key>.ipynb``.
The key and the run's metadata live inside the notebook (``metadata.iclr25``), written to a unique
temporary file and renamed into place in one step; a record that cannot be read, or whose key does
not match its name, is deleted and rebuilt. One lock file per chapter (never deleted) serialises
executions of the same chapter by concurrent builds.
"""

from __future__ import annotations

import ast
import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator

import nbformat

from iclr25.book.registry import Chapter

CONSTRAINTS = "pkg/constraints.txt"
CACHE_DIR = "_build/cache"
META = "iclr25"
KEEP_PER_CHAPTER = 6


# ---------------------------------------------------------------- what a chapter depends on
def package_files(root: Path) -> list[Path]:
    """Every package source file."""
    return sorted(p for p in (root / "pkg" / "iclr25").rglob("*.py") if "__pycache__" not in p.parts)


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


def _dynamic(source: str) -> bool:
    return "importlib" in source or "__import__" in source


def dependency_files(chapter: Chapter, cells: list[str]) -> list[Path]:
    """The package files the chapter's code ``cells`` import, directly or through other package
    modules (with every parent package's ``__init__``). Anything uncertain (magics, shell escapes,
    dynamic imports, code that does not parse) makes the chapter depend on the whole package."""
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


def cache_key(chapter: Chapter, code_cells: list[str], params: dict[str, Any]) -> str:
    """sha256 of the chapter source, the package files its code imports (transitively), the
    pinned requirements and the parameters."""
    h = hashlib.sha256()
    files = dependency_files(chapter, code_cells)
    if (chapter.root / CONSTRAINTS).is_file():
        files.append(chapter.root / CONSTRAINTS)
    h.update(chapter.path.read_bytes())
    for f in files:
        h.update(str(f.relative_to(chapter.root)).encode())
        h.update(f.read_bytes())
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


def store(chapter: Chapter, key: str, nb: nbformat.NotebookNode, meta: dict[str, Any]) -> Path:
    """Write ``nb`` with ``meta`` (and the key) inside it, atomically, as the result for ``key``."""
    nb.metadata[META] = {**meta, "key": key}
    dest = result_path(chapter, key)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.stem}.", suffix=".tmp", dir=dest.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            nbformat.write(nb, f)
        os.replace(tmp, dest)
    finally:
        Path(tmp).unlink(missing_ok=True)
    prune(chapter)
    return dest


def prune(chapter: Chapter, keep: int = KEEP_PER_CHAPTER) -> None:
    """Keep the ``keep`` most recently used results of ``chapter``."""
    results = sorted(chapter_dir(chapter).glob("*.ipynb"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in results[keep:]:
        old.unlink(missing_ok=True)


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
    """Hold the chapter's lock (an ``flock`` on a file that is never deleted)."""
    lock = chapter.root / CACHE_DIR / f"{chapter.id}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
