"""Clean ``.ipynb`` copies of the chapters for Colab and Binder (they cannot open MyST ``.md``).

The rendered book's launch buttons point at ``book/<part>/<slug>.ipynb`` on the repository's
``notebooks`` branch (``_config.yml``); ``python -m iclr25 notebooks`` writes that tree.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat

from iclr25.book.registry import chapters
from iclr25.book.runner import read_chapter


def write_launch_notebooks(root: Path, out: Path | None = None) -> Path:
    """Write every chapter as an output-free notebook under ``out`` (default
    ``_build/notebooks``), mirroring the repository layout, plus the package and environment."""
    out = out or root / "_build" / "notebooks"
    for c in chapters(root):
        nb = read_chapter(c)
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = [], None
        dest = out / f"{c.file}.ipynb"
        dest.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, dest)
    for extra in ("environment.yml", "README.md"):
        shutil.copy2(root / extra, out / extra)
    if (out / "pkg").exists():
        shutil.rmtree(out / "pkg")
    shutil.copytree(root / "pkg", out / "pkg", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    # Binder (repo2docker) builds environment.yml, then runs postBuild: install the package.
    post = out / "postBuild"
    post.write_text("#!/bin/bash\nset -e\npip install --no-deps -e ./pkg\n")
    post.chmod(0o755)
    return out
