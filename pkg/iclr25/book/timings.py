"""The ledger of measured wall times, ``book/timings.json`` (tracked: "measured on 2 cores").

Only an explicit ``--record`` (``python -m iclr25 run|book --record``) writes it; the test command
never does. ``python -m iclr25 readme`` copies it into the README chapter table.
"""

from __future__ import annotations

import json
from pathlib import Path

from iclr25.common.cache import atomic_write

TIMINGS = "book/timings.json"


def load_timings(root: Path) -> dict[str, dict]:
    """``{chapter id: {"ci": s, "full": s, "claims_ci": [held, tested, undecided], ...}}``; empty if absent."""
    path = root / TIMINGS
    return json.loads(path.read_text()) if path.is_file() else {}


def record_time(root: Path, chapter_id: str, scale: str, wall_s: float,
                claims: tuple[int, int, int] | None = None) -> None:
    """Store a chapter's measured wall time at ``scale`` and how many of the paper's claims held
    (``claims_<scale>: [held, tested, undecided]``, :func:`iclr25.book.claims.held_counts`), under
    a lock, atomically."""
    from filelock import FileLock

    path = root / TIMINGS
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(path.with_name(".timings.lock")):
        data = load_timings(root)
        entry = data.setdefault(chapter_id, {})
        entry[scale] = round(wall_s, 1)
        if claims is not None:
            entry[f"claims_{scale}"] = list(claims)
        text = json.dumps(dict(sorted(data.items())), indent=2) + "\n"
        atomic_write(path, lambda tmp: tmp.write_text(text))


def schedule(chs: list, jobs: int, timings: dict[str, dict], scale: str) -> tuple[list, list]:
    """Chapters to run alone (more than one torch thread, or ``jobs`` < 2) and chapters to run
    ``jobs`` at a time, the longest first (by their last measured time at ``scale``)."""
    alone = [c for c in chs if jobs < 2 or c.threads > 1]
    rest = [c for c in chs if c not in alone]
    rest.sort(key=lambda c: -float(timings.get(c.id, {}).get(scale, 0.0)))
    return alone, rest
