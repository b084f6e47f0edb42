"""The chapter registry: ``_toc.yml`` is the one list of chapters.

A chapter is a toc entry ``book/<part>/<slug>``; its id is ``<part>/<slug>``. Entries directly
under ``book/`` (the intro, the scoreboard, the bibliography) are pages, not chapters.
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

    def walk(entries: list, caption: str) -> None:
        for entry in entries or []:
            if "file" in entry:
                out.append((caption, str(entry["file"])))
            walk(entry.get("sections", []), caption)

    for part in toc.get("parts", []):
        walk(part.get("chapters", []), part.get("caption", ""))
    walk(toc.get("chapters", []), "")
    return out


def load_toc(root: Path | None = None) -> dict:
    """The parsed ``_toc.yml``."""
    root = root or find_root()
    return yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))


def chapters(root: Path | None = None) -> list[Chapter]:
    """Every chapter listed in ``_toc.yml``, in book order."""
    root = root or find_root()
    found = []
    for caption, file in _toc_files(load_toc(root)):
        file = re.sub(r"\.(md|ipynb)$", "", file)
        parts = file.split("/")
        if len(parts) == 3 and parts[0] == "book":
            found.append(Chapter(id="/".join(parts[1:]), file=file, part=caption, root=root))
    return found


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
