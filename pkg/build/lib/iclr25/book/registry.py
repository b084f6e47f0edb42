"""The chapter registry: ``_toc.yml`` is the one list of chapters.

A chapter is a toc entry ``book/<part>/<slug>`` whose source is a jupytext notebook (its front
matter has a ``kernelspec``); its id is ``<part>/<slug>``. Every other entry is a page: directly
under ``book/`` (the intro, the scoreboard, the bibliography) or in a folder of plain pages (the API
reference). Every entry must exist; a malformed toc, or an entry that is neither a chapter nor an
existing page, raises :class:`TocError` with one line naming the problem.

The toc is parsed by ``sphinx_external_toc`` as Jupyter Book parses it (same schema checks, nesting
and file order); without the ``[book]`` extra, ``list`` falls back to a plain walk of the YAML.
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT_ENV = "ICLR25_ROOT"
START_THREADS = 2  # the threads iclr25.common.start sets by default (min(2, cores))


class UnknownChapter(ValueError):
    """Raised for a chapter id that is not in ``_toc.yml``; the message names the valid ids."""


class TocError(ValueError):
    """``_toc.yml`` is missing, empty, malformed, or lists an entry that is not a chapter or page."""


SOURCE_SUFFIXES = (".md", ".ipynb", ".rst")


def find_root(start: Path | None = None) -> Path:
    """The book's root: ``$ICLR25_ROOT``, else the nearest folder above ``start`` (default: the
    current directory) holding both ``_toc.yml`` and ``pkg/``."""
    if os.environ.get(ROOT_ENV):
        return Path(os.environ[ROOT_ENV]).resolve()
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "_toc.yml").is_file() and (folder / "pkg").is_dir():
            return folder
    raise FileNotFoundError(
        f"no book root (a folder with _toc.yml and pkg/) at or above {here}; "
        f"run from the repository or set {ROOT_ENV}")


@dataclass(frozen=True)
class Chapter:
    """One chapter: ``id`` ("theory/svgd-rates"), its toc ``file`` ("book/theory/svgd-rates"),
    the ``part`` caption, and the ``root`` it lives in."""

    id: str
    file: str
    part: str
    root: Path

    @property
    def path(self) -> Path:
        """The jupytext source, ``<root>/book/<id>.md``."""
        return self.root / f"{self.file}.md"

    @property
    def title(self) -> str:
        """The first ``"# "`` heading of the source (the id if the file has none yet)."""
        heading = re.search(r"^# (.+)$", self.path.read_text(encoding="utf-8"), re.M) if self.path.is_file() else None
        return heading.group(1).strip() if heading else self.id

    @property
    def threads(self) -> int:
        """The torch threads its setup call sets: ``N`` of ``start(scale, seed, threads=N)``; without
        ``threads=``, ``start``'s default of 2 (``min(2, cores)``); 1 when there is no ``start(`` call."""
        call = re.search(r"^[^#\n]*\bstart\(([^)]*)\)", self.path.read_text(encoding="utf-8"), re.M)
        given = re.search(r"\bthreads\s*=\s*(\d+)", call.group(1)) if call else None
        return int(given.group(1)) if given else START_THREADS if call else 1


def _toc_files(toc: dict) -> list[tuple[str, str]]:
    """``(part caption, file)`` for every file entry of a jb-book toc, in order."""
    try:
        from sphinx_external_toc.api import FileItem
        from sphinx_external_toc.parsing import MalformedError, parse_toc_data
    except ImportError:  # no book extra (``list``): each part's chapters, no nesting or schema checks
        try:
            return [(str(p.get("caption", "")), str(c["file"])) for p in toc["parts"] for c in p["chapters"]]
        except (AttributeError, KeyError, TypeError):
            raise TocError("_toc.yml is not a jb-book toc of parts with chapters") from None
    try:
        site = parse_toc_data(toc)
    except MalformedError as err:
        problem, _, where = str(err).partition(" @ ")
        raise TocError(f"_toc.yml: {problem.replace(' not a ', ' is not a ')} at {where or '/'}") from None

    out: list[tuple[str, str]] = []

    def walk(doc: str, caption: str | None) -> None:  # sections keep their part's caption
        for tree in site[doc].subtrees:
            for item in (i for i in tree.items if isinstance(i, FileItem)):
                out.append((caption or tree.caption or "", str(item)))
                walk(item, caption or tree.caption)
    walk(site.root.docname, None)
    return out


def load_toc(root: Path | None = None) -> dict:
    """The parsed ``_toc.yml``; :class:`TocError` when it is missing, empty or not a jb-book toc."""
    root = root or find_root()
    path = root / "_toc.yml"
    try:
        toc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TocError(f"no _toc.yml at {root}") from None
    except yaml.YAMLError as err:
        where = getattr(err, "problem_mark", None)
        line = f" at line {where.line + 1}" if where is not None else ""
        raise TocError(f"_toc.yml is not valid YAML{line}: {getattr(err, 'problem', err)}") from None
    if not toc:
        raise TocError("_toc.yml is empty: it must list the book's parts and chapters")
    if not isinstance(toc, dict) or "root" not in toc:
        raise TocError("_toc.yml must be a mapping with `format: jb-book`, `root:` and `parts:`")
    return toc


def _source(root: Path, file: str) -> Path | None:
    return next((p for p in (root / f"{file}{suffix}" for suffix in SOURCE_SUFFIXES) if p.is_file()), None)


def _is_notebook(path: Path) -> bool:
    """A jupytext MyST notebook (front matter with a kernelspec) or an ``.ipynb``."""
    if path.suffix == ".ipynb":
        return True
    front = path.read_text(encoding="utf-8")[:4000].split("---", 2)
    return len(front) == 3 and front[0].strip() == "" and "kernelspec:" in front[1]


def toc_entries(root: Path | None = None) -> list[tuple[str, str, str]]:
    """``(kind, part caption, file)`` for every toc entry, ``kind`` "chapter" or "page", checked:
    every entry must exist under ``book/``; a chapter is ``book/<part>/<slug>`` and a notebook."""
    root = root or find_root()
    out = []
    for caption, file in _toc_files(load_toc(root)):
        file = re.sub(r"\.(md|ipynb|rst)$", "", file.strip())
        parts = file.split("/")
        if parts[0] != "book" or len(parts) < 2 or "" in parts or ".." in parts:
            raise TocError(f"_toc.yml entry {file!r} is neither a chapter (book/<part>/<slug>) nor a page "
                           "(book/<page>)")
        src = _source(root, file)
        kind = "chapter" if len(parts) == 3 and (src is None or _is_notebook(src)) else "page"
        if src is None:
            raise TocError(f"_toc.yml lists {file!r} but there is no {file}.md: "
                           f"it is neither an existing chapter nor a known page ({kind} expected)")
        out.append((kind, caption, file))
    return out


def chapters(root: Path | None = None) -> list[Chapter]:
    """Every chapter listed in ``_toc.yml``, in book order."""
    root = root or find_root()
    return [Chapter(id="/".join(file.split("/")[1:]), file=file, part=caption, root=root)
            for kind, caption, file in toc_entries(root) if kind == "chapter"]


def get_chapter(name: str, root: Path | None = None) -> Chapter:
    """Look a chapter up by id ("theory/svgd-rates"), toc path ("book/theory/svgd-rates.md") or a
    unique slug ("svgd-rates"). Raise :class:`UnknownChapter` naming the valid ids otherwise."""
    known = chapters(root)
    ids = [c.id for c in known]
    key = re.sub(r"\.(md|ipynb)$", "", name.strip()).removeprefix("./").removeprefix("book/")
    found = [c for c in known if key == c.id] or [c for c in known if c.id.split("/")[-1] == key]
    if len(found) == 1:
        return found[0]
    close = difflib.get_close_matches(key, ids + [i.split("/")[-1] for i in ids], n=1, cutoff=0.4)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise UnknownChapter(f"unknown chapter {name!r}.{hint} Valid chapters: {', '.join(ids)}")

