"""``python -m iclr25 publish``: everything a reader opens, from one commit.

1. Refuse a working tree whose tracked files differ from HEAD (the notebooks pin HEAD, so the
   book, the notebooks and the package a Colab reader installs must all be that commit), and a HEAD
   that no remote-tracking branch contains (Colab's ``pip install`` of that commit would fail);
   checked offline, against the remote-tracking branches as last fetched.
2. Check that every golden notebook (the chapter's launch notebook with its ``ci`` outputs) is
   fresh, then run them with nbval (native kernels, no GPU): the launch notebooks run as a reader
   gets them. ``execute=False`` skips this step.
3. Render the book (``build_book`` at the given scale) into ``_build/html``.
4. Write the launch notebooks tree (notebooks, ``pkg/``, ``binder/``, README) and check it: no MyST
   left, no outputs, the install cell pins the commit, and each equation number equals the book's.
5. Lay out ``<out>/html`` (plus ``.nojekyll``) and ``<out>/notebooks``, each a git repository with
   one commit naming the source commit, and print the two pushes that publish them: the HTML to
   the GitHub Pages branch, the notebooks to the branch the launch buttons open (``_config.yml``).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Callable

import nbformat

from iclr25.book.site import git_commit, site

PAGES_BRANCH = "gh-pages"


def equation_mismatches(html: Path, tree: Path) -> list[str]:
    """Chapters whose launch notebook numbers its equations differently from the rendered book."""
    problems = []
    for nb_path in sorted(tree.glob("book/*/*.ipynb")):
        page = (html / nb_path.relative_to(tree)).with_suffix(".html")
        if not page.is_file():
            problems.append(f"{nb_path.relative_to(tree)}: no rendered page {page}")
            continue
        numbers = re.findall(r'id="equation-[\w:.-]+">\s*<span class="eqno">\(([\d.]+)\)', page.read_text())
        nb = nbformat.read(nb_path, as_version=4)
        tags = re.findall(r"\\tag\{([^}]*)\}", "\n".join(c.source for c in nb.cells if c.cell_type == "markdown"))
        if numbers != tags:
            problems.append(f"{nb_path.relative_to(tree)}: equations numbered {tags} in the notebook, "
                            f"{numbers} in the book")
    return problems


def _git_snapshot(folder: Path, message: str) -> None:
    """Make ``folder`` a git repository with a single commit of its content."""
    shutil.rmtree(folder / ".git", ignore_errors=True)
    git = ["git", "-c", "user.name=iclr25 publish", "-c", "user.email=publish@localhost", "-C", str(folder)]
    for cmd in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", message]):
        subprocess.run([*git, *cmd], check=True, capture_output=True)


def check_pushed(root: Path, commit: str) -> None:
    """Raise unless ``commit`` is contained in some remote-tracking branch (``git branch -r
    --contains``, as last fetched: nothing is fetched), since the launch notebooks' install cell
    makes Colab ``pip install`` the package at exactly that commit from the repository."""
    try:
        out = subprocess.run(["git", "branch", "-r", "--contains", commit], cwd=root, capture_output=True,
                             text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as err:
        raise RuntimeError(f"cannot tell whether {commit[:12]} has been pushed: {err}") from err
    if not [line for line in out.splitlines() if line.strip()]:
        raise RuntimeError(f"push {commit} first: the Colab install cell pins it, and no remote-tracking "
                           "branch contains it (checked without fetching; `git fetch` if it was pushed "
                           "from elsewhere)")


def check_goldens(root: Path, echo: Callable[[str], None] = print) -> None:
    """Raise unless every golden notebook is fresh and passes nbval (native kernels, two at a time)."""
    from iclr25.book.golden import check_fresh, verify_goldens
    from iclr25.book.registry import chapters

    chs = chapters(root)
    problems = [p for p in (check_fresh(c) for c in chs) if p]
    problems = problems or verify_goldens(chs, kernels="native", python=None, jobs=2, echo=echo)
    if problems:
        raise RuntimeError("the golden (launch) notebooks do not pass:\n" + "\n".join(problems))


def publish(root: Path, *, scale: str = "full", out: Path | None = None, allow_dirty: bool = False,
            execute: bool = True, echo: Callable[[str], None] = print) -> Path:
    """Build the HTML book and the launch notebooks from HEAD into ``out`` (default
    ``_build/publish``); see the module's docstring. Returns ``out``."""
    from iclr25.book.build import build_book
    from iclr25.book.launch import check_tree, write_launch_notebooks

    t0 = time.perf_counter()
    s = site(root)
    commit, dirty = git_commit(root)
    if not commit:
        raise RuntimeError("publish needs a git checkout: the notebooks install the package at a commit")
    if dirty and not allow_dirty:
        raise RuntimeError("tracked files differ from HEAD: commit them first (the notebooks install the "
                           f"package at HEAD, {commit[:12]}), or pass --allow-dirty")
    check_pushed(root, commit)
    out = out or root / "_build" / "publish"
    echo(f"publishing commit {commit[:12]} of {s.repository_url} at scale {scale}")
    if execute:
        check_goldens(root, echo)
    index = build_book(scale, root=root, echo=echo)
    echo(f"book rendered: {index}")
    tree = write_launch_notebooks(root, root / "_build" / "notebooks", commit=commit)
    problems = check_tree(tree) + equation_mismatches(index.parent, tree)
    if problems:
        raise RuntimeError("the launch notebooks are not fit to publish:\n" + "\n".join(problems))
    echo(f"launch notebooks written and checked: {tree}")
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(index.parent, out / "html")
    (out / "html" / ".nojekyll").write_text("")
    shutil.copytree(tree, out / "notebooks")
    stamp = {"commit": commit, "repository": s.repository_url, "scale": scale,
             "built": time.strftime("%Y-%m-%dT%H:%M:%S"), "dirty": dirty}
    (out / "html" / "published.json").write_text(json.dumps(stamp, indent=2) + "\n")
    (out / "notebooks" / "published.json").write_text(json.dumps(stamp, indent=2) + "\n")
    message = f"ICLR 2025 in Code, built from {commit} ({'with local changes, ' if dirty else ''}scale {scale})"
    _git_snapshot(out / "html", message)
    _git_snapshot(out / "notebooks", message)
    echo(f"published tree ready in {time.perf_counter() - t0:.0f} s: {out}")
    echo("to publish (force-pushes the two branches; the book's launch buttons open the second):")
    echo(f"  git -C {out / 'html'} push --force {s.repository_url} HEAD:{PAGES_BRANCH}")
    echo(f"  git -C {out / 'notebooks'} push --force {s.repository_url} HEAD:{s.notebooks_branch}")
    return out
