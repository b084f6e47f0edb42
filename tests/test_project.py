"""Project-wide consistency: README table, pins, golden notebooks, chapter parameters."""

from pathlib import Path

import pytest
import yaml

from iclr25.book.golden import golden_path
from iclr25.book.readme import readme_chapter_ids
from iclr25.book.registry import chapters
from iclr25.book.params import parameters_cell, read_chapter

ROOT = Path(__file__).resolve().parents[1]


def _pins(lines: list[str]) -> dict[str, str]:
    out = {}
    for line in lines:
        line = line.strip().lstrip("- ").strip()
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==", 1)
            out[name.lower().replace("_", "-")] = version
    return out


def test_environment_yml_matches_constraints() -> None:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    env_pins = _pins(pip_section)
    lock = _pins((ROOT / "pkg" / "constraints.txt").read_text().splitlines())
    assert env_pins, "environment.yml pins nothing"
    drift = {k: (v, lock.get(k)) for k, v in env_pins.items() if lock.get(k) != v}
    assert not drift, f"environment.yml and pkg/constraints.txt disagree: {drift}"
    for needed in ("jupyter-book", "torch", "papermill", "nbval", "jupytext", "torch-geometric", "pot"):
        assert needed in env_pins, f"environment.yml does not pin {needed}"
    assert env_pins["jupyter-book"] == "1.0.4.post1" and env_pins["torch"] == "2.13.0"


def test_readme_lists_exactly_the_toc_chapters() -> None:
    assert readme_chapter_ids(ROOT) == [c.id for c in chapters(ROOT)], \
        "README table is out of date with _toc.yml: run `python -m iclr25 readme`"


def test_every_chapter_has_parameters_and_golden() -> None:
    for c in chapters(ROOT):
        _, values = parameters_cell(read_chapter(c))
        assert values["scale"] == "full", f"{c.id}: the parameters cell must default to scale='full'"
        assert golden_path(c).is_file(), f"{c.id}: no golden notebook; run `python -m iclr25 golden {c.id}`"


def test_no_merge_conflict_markers_in_tracked_text_files() -> None:
    """A merge committed with its conflict unresolved breaks the bibliography or a chapter quietly."""
    import re
    import subprocess

    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    if not files:  # not a git checkout (e.g. an sdist): nothing to check
        return
    marker = re.compile(r"^(<<<<<<<|>>>>>>>)( |$)", re.M)
    bad = []
    for name in files:
        path = ROOT / name
        if path.suffix in {".md", ".py", ".bib", ".yml", ".yaml", ".toml", ".txt", ".cfg", ".ipynb"} and path.is_file():
            if marker.search(path.read_text(errors="replace")):
                bad.append(name)
    assert not bad, f"conflict markers in {bad}"


def test_every_committed_package_data_file_is_shipped() -> None:
    """A weight or data file under pkg/iclr25 that no package-data glob names is missing from a
    non-editable install (the launch notebooks' tree, a reader's `pip install ./pkg`)."""
    import fnmatch
    import subprocess
    import tomllib

    files = subprocess.run(["git", "ls-files", "pkg/iclr25"], cwd=ROOT, capture_output=True,
                           text=True).stdout.split()
    if not files:  # not a git checkout
        return
    globs = tomllib.loads((ROOT / "pkg" / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    unshipped = []
    for name in files:
        if name.endswith(".py"):
            continue
        rel = Path(name).relative_to("pkg")
        shipped = any(
            rel.parts[:len(pkg.split("."))] == tuple(pkg.split("."))
            and any(fnmatch.fnmatch("/".join(rel.parts[len(pkg.split(".")):]), g) for g in pats)
            for pkg, pats in globs.items())
        if not shipped:
            unshipped.append(name)
    assert not unshipped, f"not in [tool.setuptools.package-data] of pkg/pyproject.toml: {unshipped}"


def test_only_the_back_matter_has_a_bibliography_directive() -> None:
    """A ``{bibliography}`` in a chapter cites its keys a second time: Sphinx's "duplicate citation"
    warning fails the book build (warnings are errors). Chapters cite; the back matter lists."""
    offenders = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "book").rglob("*.md"))
                 if "```{bibliography}" in p.read_text() and p.name != "bibliography.md"]
    assert not offenders, f"{offenders}: remove the chapter's bibliography directive (book/bibliography.md lists all)"


def test_bibliography_labels_are_unique() -> None:
    """Two entries whose authors and year give the same alphabetic label (e.g. Alaluf, ... 2024 and Azar, Guo,
    Piot ... 2024 are both "AGP+24") make Sphinx warn "duplicate label", and the book build treats warnings as
    errors."""
    pytest.importorskip("pybtex")
    from collections import Counter

    from pybtex.database import parse_file
    from pybtex.style.labels.alpha import LabelStyle

    entries = parse_file(str(ROOT / "book" / "references.bib")).entries
    style = LabelStyle()
    labels = {key: style.format_label(entry) for key, entry in entries.items()}
    clashes = {label: sorted(k for k, v in labels.items() if v == label)
               for label, n in Counter(labels.values()).items() if n > 1}
    assert not clashes, f"entries of book/references.bib share a bibliography label: {clashes}"
