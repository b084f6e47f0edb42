"""Data and weights that chapters make once and reuse: keyed by the code that makes them.

A chapter that trains a model or simulates a data set once and reuses it across runs calls::

    model_state = cached("lm", "toy", make=train, key={"steps": 600, "seed": 0},
                         code=[train, TinyLM])

The file name is a hash of ``key`` (the parameters), of the *source code* of every object in
``code`` (functions, classes or modules: editing them makes a new entry, so a stale artefact is
never served), and of the torch and numpy versions. The file is written to a unique temporary
file and renamed into place (two processes can race safely), and a file that cannot be loaded
(truncated, corrupt) is rebuilt instead of crashing or being trusted.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar

T = TypeVar("T")


def cache_dir(*parts: str) -> Path:
    """A per-user cache folder for data a chapter generates once (``$ICLR25_CACHE`` or
    ``~/.cache/iclr25``), created on demand."""
    root = Path(os.environ.get("ICLR25_CACHE", Path.home() / ".cache" / "iclr25"))
    path = root.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def source_fingerprint(code: Sequence[Any]) -> str:
    """sha256 over the source text of each function, class or module in ``code`` (in order)."""
    h = hashlib.sha256()
    for obj in code:
        try:
            src = inspect.getsource(obj)
        except (TypeError, OSError) as err:
            raise TypeError(f"cannot read the source of {obj!r} to key a cache entry") from err
        h.update(getattr(obj, "__qualname__", getattr(obj, "__name__", "")).encode())
        h.update(src.encode())
    return h.hexdigest()


def cache_key(key: Any, code: Sequence[Any] = ()) -> str:
    """16 hex digits naming one artefact: its parameters ``key`` (JSON-able), the source of
    ``code`` and the numpy/torch versions."""
    import numpy as np

    try:
        import torch

        torch_version = torch.__version__
    except ImportError:  # pragma: no cover
        torch_version = ""
    payload = json.dumps({"key": key, "code": source_fingerprint(code), "numpy": np.__version__,
                          "torch": torch_version}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def _torch_save(obj: Any, path: Path) -> None:
    import torch

    torch.save(obj, path)


def _torch_load(path: Path) -> Any:
    import torch

    return torch.load(path, map_location="cpu", weights_only=False)


def atomic_write(path: Path, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp)`` on a unique temporary file beside ``path``, then rename it onto
    ``path`` (atomic on one file system). Nothing half-written is ever left under ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def cached(folder: str, name: str, make: Callable[[], T], *, key: Any, code: Sequence[Any] = (),
           save: Callable[[T, Path], None] | None = None, load: Callable[[Path], T] | None = None,
           suffix: str = ".pt", use_cache: bool = True) -> T:
    """``make()``'s result, computed once per (``key``, source of ``code``) and stored in
    ``cache_dir(folder)/<name>-<hash><suffix>``.

    ``save(obj, path)``/``load(path)`` default to ``torch.save``/``torch.load``. A file that
    ``load`` cannot read is rebuilt. ``use_cache=False`` always calls ``make`` and stores nothing.
    """
    if not use_cache:
        return make()
    save, load = save or _torch_save, load or _torch_load
    path = cache_dir(folder) / f"{name}-{cache_key(key, code)}{suffix}"
    if path.is_file():
        try:
            return load(path)
        except Exception:  # noqa: BLE001 - a corrupt or truncated file is rebuilt, never trusted
            path.unlink(missing_ok=True)
    obj = make()
    atomic_write(path, lambda tmp: save(obj, tmp))
    return obj
