"""The chapter registry: ``_toc.yml`` is the one list of chapters.

A chapter is a toc entry ``book/<part>/<slug>`` whose source is a jupytext notebook (its front
matter has a ``kernelspec``); its id is ``<part>/<slug>``. Every other entry is a page: directly
under ``book/`` (the intro, the scoreboard, the bibliography) or in a folder of plain pages (the API
reference). Every entry must exist; a malformed toc, or an entry that is neither a chapter nor an
existing page, raises :class:`TocError` with one line naming the problem.
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT_ENV = "ICLR25_ROOT"


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
        if self.path.is_file():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
        return self.id


def _toc_files(toc: dict) -> list[tuple[str, str]]:
    """``(part caption, file)`` for every entry of a jb-book toc, in order."""
    out: list[tuple[str, str]] = []

    def walk(entries: object, caption: str) -> None:
        if entries is None:
            return
        if not isinstance(entries, list):
            raise TocError(f"_toc.yml: expected a list of entries under {caption or 'the root'!r}, "
                           f"got {type(entries).__name__}")
        for entry in entries:
            if not isinstance(entry, dict):
                raise TocError(f"_toc.yml: entry {entry!r} under {caption or 'the root'!r} is not a mapping "
                               "(write `- file: book/<part>/<slug>`)")
            if "file" in entry:
                out.append((caption, str(entry["file"])))
            walk(entry.get("sections"), caption)

    parts = toc.get("parts")
    if parts is not None and not isinstance(parts, list):
        raise TocError("_toc.yml: `parts` must be a list of parts with a caption and chapters")
    for part in parts or []:
        if not isinstance(part, dict):
            raise TocError(f"_toc.yml: part {part!r} is not a mapping with `caption` and `chapters`")
        walk(part.get("chapters"), str(part.get("caption", "")))
    walk(toc.get("chapters"), "")
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
    for suffix in SOURCE_SUFFIXES:
        if (root / f"{file}{suffix}").is_file():
            return root / f"{file}{suffix}"
    return None


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
        if src is None:
            kind = "chapter" if len(parts) == 3 else "page"
            raise TocError(f"_toc.yml lists {file!r} but there is no {file}.md: "
                           f"it is neither an existing chapter nor a known page ({kind} expected)")
        kind = "chapter" if len(parts) == 3 and _is_notebook(src) else "page"
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
    for c in known:
        if key == c.id:
            return c
    by_slug = [c for c in known if c.id.split("/")[-1] == key]
    if len(by_slug) == 1:
        return by_slug[0]
    close = difflib.get_close_matches(key, ids + [i.split("/")[-1] for i in ids], n=1, cutoff=0.4)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise UnknownChapter(f"unknown chapter {name!r}.{hint} Valid chapters: {', '.join(ids)}")


_THREADS = re.compile(r"\bstart\([^)]*\bthreads\s*=\s*(\d+)")


def chapter_threads(chapter: Chapter) -> int:
    """The torch threads the chapter's setup call ``start(scale, seed, threads=N)`` asks for (1
    when it names none)."""
    m = _THREADS.search(chapter.path.read_text(encoding="utf-8"))
    return int(m.group(1)) if m else 1
