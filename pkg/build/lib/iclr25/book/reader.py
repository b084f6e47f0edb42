"""The reader's environment, made from one package list (``pkg/reader.yml``) plus the package.

:func:`reader_list` reads the list; :func:`venv_commands` makes a fresh virtual environment from it
and a built wheel of ``iclr25`` (pinned by ``pkg/constraints.txt``), which is where the test command
executes the launch notebooks, so a chapter that needs something the list lacks fails there.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

READER_LIST = "pkg/reader.yml"
CONSTRAINTS = "pkg/constraints.txt"


@dataclass(frozen=True)
class ReaderList:
    """``pkg/reader.yml``: python version, the torch version (CPU build), packages installed with
    their dependencies, wheels installed with ``--no-deps``, and the notebook front end."""

    python: str
    torch: str
    packages: tuple[str, ...]
    no_deps: tuple[str, ...]
    frontend: tuple[str, ...]


def reader_list(root: Path) -> ReaderList:
    """The reader's package list of the book at ``root``."""
    import yaml

    data = yaml.safe_load((root / READER_LIST).read_text())
    missing = {"python", "torch", "packages", "no_deps", "frontend"} - set(data)
    if missing:
        raise ValueError(f"{READER_LIST} lacks {', '.join(sorted(missing))}")
    return ReaderList(str(data["python"]), str(data["torch"]), tuple(data["packages"]),
                      tuple(data["no_deps"]), tuple(data["frontend"]))


def build_wheel_commands(root: Path, dist: Path, python: str = sys.executable) -> list[list[str]]:
    """Commands that build the wheel of ``pkg/`` into ``dist`` (no network: the build backend,
    setuptools, is already installed)."""
    return [[python, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dist),
             str(root / "pkg")]]


def venv_commands(root: Path, venv: Path, wheel: Path, python: str = sys.executable) -> list[list[str]]:
    """Commands that make ``venv`` afresh from the reader list and ``wheel`` (pinned by the
    constraints file): torch first, alone, so pip takes the CPU build."""
    lst = reader_list(root)
    vpy = str(venv / "bin" / "python")
    pin = ["-c", str(root / CONSTRAINTS)]
    return [[python, "-m", "venv", "--clear", str(venv)],
            [vpy, "-m", "pip", "install", "-q", "--upgrade", "pip"],
            [vpy, "-m", "pip", "install", "-q", *pin, f"torch=={lst.torch}"],
            [vpy, "-m", "pip", "install", "-q", *pin, str(wheel), *lst.packages],
            [vpy, "-m", "pip", "install", "-q", "--no-deps", *lst.no_deps]]
