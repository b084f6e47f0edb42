"""The reader's environment (binder/environment.yml): small, complete, and pinned like the toolchain.

What the chapters import at run time is read from their code cells and, transitively, from the
package modules they import (statically, with ``ast``). Every distribution that provides one of
those imports must be installed by the reader's environment (pinned, or required by a pin), and
every pin must be imported (Jupyter itself aside). Versions equal ``pkg/constraints.txt`` where
both name a package.
"""

from __future__ import annotations

import importlib.metadata as md
import re
import sys
from pathlib import Path

import jupytext
import yaml
from packaging.requirements import Requirement

from iclr25.book.cache import all_imports
from iclr25.book.registry import chapters

ROOT = Path(__file__).resolve().parents[2]
READER_ENV = ROOT / "binder" / "environment.yml"
#: Pins the chapters do not import but a reader needs to run a notebook at all.
JUPYTER = {"ipykernel", "jupyterlab"}
#: Imported only where the platform provides them (``google.colab`` on Colab).
PLATFORM = {"google"}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def reader_pins() -> dict[str, str]:
    env = yaml.safe_load(READER_ENV.read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    pins = {}
    for line in pip:
        if "==" in line and not line.startswith("-"):
            name, version = line.split("==", 1)
            pins[_norm(name)] = version.strip()
    return pins


def constraint_pins() -> dict[str, str]:
    out = {}
    for line in (ROOT / "pkg" / "constraints.txt").read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.strip().split("==", 1)
            out[_norm(name)] = version
    return out


def _imports(source: str, module: str = "") -> set[str]:
    """Dotted names imported anywhere in ``source`` (relative imports resolved against ``module``);
    lines of IPython magics and shell escapes are dropped first."""
    names = all_imports(source, module)
    if names is None:  # an IPython magic in a cell
        names = all_imports("\n".join(ln for ln in source.splitlines() if not ln.lstrip().startswith(("%", "!"))), module)
    if names is None:
        raise SyntaxError(f"cannot parse a cell of {module or 'a chapter'} even without its magics")
    return names


def runtime_imports() -> set[str]:
    """Top-level names of the third-party modules the chapters need when they run."""
    pkg = ROOT / "pkg"
    todo = set()
    for c in chapters(ROOT):
        nb = jupytext.read(c.path)
        todo |= _imports("\n".join(cell.source for cell in nb.cells if cell.cell_type == "code"))
    seen: set[str] = set()
    external: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        top = name.split(".")[0]
        if top != "iclr25":
            external.add(top)
            continue
        parts = name.split(".")
        todo.update(".".join(parts[:i]) for i in range(1, len(parts)))
        base = pkg / Path(*parts)
        for f, mod in ((base.with_suffix(".py"), name), (base / "__init__.py", f"{name}.__init__")):
            if f.is_file():
                todo |= _imports(f.read_text(), mod)
    return {m for m in external if m and m not in sys.stdlib_module_names and m not in PLATFORM}


def _requires_closure(dists: set[str]) -> set[str]:
    """``dists`` and everything they require (installed metadata, extras left out)."""
    out: set[str] = set()
    todo = list(dists)
    while todo:
        d = todo.pop()
        if d in out:
            continue
        out.add(d)
        try:
            reqs = md.requires(d) or []
        except md.PackageNotFoundError:
            continue
        for r in map(Requirement, reqs):
            if r.marker is None or r.marker.evaluate({"extra": ""}):
                todo.append(_norm(r.name))
    return out


def test_reader_env_pins_equal_constraints() -> None:
    pins, lock = reader_pins(), constraint_pins()
    assert pins, "binder/environment.yml pins nothing"
    drift = {k: (v, lock[k]) for k, v in pins.items() if k in lock and v.split("+")[0] != lock[k]}
    assert not drift, f"binder/environment.yml and pkg/constraints.txt disagree: {drift}"
    assert pins["torch"].endswith("+cpu"), "the reader's torch must be the CPU build"


def test_reader_env_has_what_chapters_import_and_nothing_else() -> None:
    pins = reader_pins()
    providers = md.packages_distributions()
    needed: dict[str, str] = {}
    for mod in sorted(runtime_imports()):
        dists = providers.get(mod)
        assert dists, f"the chapters import {mod!r}, which no installed distribution provides"
        needed[_norm(dists[0])] = mod
    installed = _requires_closure(set(pins))
    missing = {d: m for d, m in needed.items() if d not in installed}
    assert not missing, f"the chapters import these, which binder/environment.yml does not install: {missing}"
    unused = set(pins) - set(needed) - JUPYTER
    assert not unused, f"binder/environment.yml installs what no chapter imports: {sorted(unused)}"


def test_reader_env_leaves_out_the_toolchain() -> None:
    pins = reader_pins()
    for tool in ("jupyter-book", "sphinx", "pytest", "nbval", "papermill", "diffusers", "jupytext"):
        assert tool not in pins, f"{tool} is development tooling, not for the reader's environment"
    post = (ROOT / "binder" / "postBuild").read_text()
    assert "pip install --no-deps ./pkg" in post
