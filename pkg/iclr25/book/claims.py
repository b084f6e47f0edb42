"""The results table a chapter ends with, and the rows the scoreboard page collects.

A chapter reports every claim it checks through one call::

    report_claims("theory/svgd-rates", scale, [
        Claim("SVGD beats i.i.d. at every N", paper="KSD = O(N^-1/2), like i.i.d.",
              measured=f"max ratio {ratio:.2f}", holds=ratio < 1),
    ])

The call displays the table (plain text for nbval and terminals, Markdown for the rendered book)
and stores the rows in the output under :data:`CLAIMS_MIME`, where the book build finds them.
The cell that makes this call is tagged ``nbval-check-output``: print only rounded numbers.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

CLAIMS_MIME = "application/vnd.iclr25.claims+json"


@dataclass(frozen=True)
class Claim:
    """One claim of a paper, set beside our measurement.

    ``claim``: what the paper says, in a few words; ``paper``: what the paper reports;
    ``measured``: what this chapter measured (a string with rounded numbers);
    ``holds``: whether our measurement supports the claim.
    """

    claim: str
    paper: str
    measured: str
    holds: bool

    def __post_init__(self) -> None:
        for name in ("claim", "paper", "measured"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name).strip():
                raise ValueError(f"Claim.{name} must be a non-empty string")
        # numpy/torch booleans are fine; store a plain bool
        object.__setattr__(self, "holds", bool(self.holds))


def _text_table(rows: Sequence[dict[str, Any]]) -> str:
    cols = ["claim", "paper", "measured", "holds"]
    cells = [[r[c] if c != "holds" else ("yes" if r[c] else "NO") for c in cols] for r in rows]
    widths = [max(len(c), *(len(str(row[i])) for row in cells)) for i, c in enumerate(cols)]
    line = lambda vals: " | ".join(str(v).ljust(w) for v, w in zip(vals, widths)).rstrip()  # noqa: E731
    return "\n".join([line(cols), "-+-".join("-" * w for w in widths)] + [line(r) for r in cells])


def _escape_md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    out = ["| claim | paper reports | we measure | holds |", "|---|---|---|---|"]
    for r in rows:
        mark = "✅ yes" if r["holds"] else "❌ no"
        out.append(f"| {_escape_md(r['claim'])} | {_escape_md(r['paper'])} | "
                   f"{_escape_md(r['measured'])} | {mark} |")
    return "\n".join(out)


def claim_rows(chapter: str, scale: str, claims: Sequence[Claim]) -> list[dict[str, Any]]:
    """The scoreboard rows (``claim, paper, measured, holds, chapter, scale``) of ``claims``."""
    from iclr25.common import check_scale

    check_scale(scale)
    if not claims:
        raise ValueError("report_claims needs at least one Claim")
    if any(not isinstance(c, Claim) for c in claims):
        raise TypeError("report_claims takes a sequence of iclr25.book.Claim")
    return [{**asdict(c), "chapter": chapter, "scale": scale} for c in claims]


def report_claims(chapter: str, scale: str, claims: Sequence[Claim]) -> None:
    """Display the chapter's results table and store its rows for the scoreboard.

    Returns nothing, so that the cell's only output is the table whatever the frontend does with a
    trailing ``;`` (nbval compares this cell's outputs).
    """
    rows = claim_rows(chapter, scale, claims)
    data = {
        "text/plain": _text_table(rows),
        "text/markdown": _markdown_table(rows),
        CLAIMS_MIME: {"chapter": chapter, "scale": scale, "rows": rows},
    }
    try:
        from IPython import get_ipython
        from IPython.display import display

        in_kernel = get_ipython() is not None
    except ImportError:  # pragma: no cover
        in_kernel = False
    if in_kernel:
        display(data, raw=True)
    else:
        print(data["text/plain"])


def notebook_claims(nb_path: Path) -> list[dict[str, Any]]:
    """The claims rows that ``report_claims`` stored in an executed notebook."""
    import nbformat

    nb = nbformat.read(nb_path, as_version=4)
    return [row for cell in nb.cells for out in cell.get("outputs", [])
            for row in out.get("data", {}).get(CLAIMS_MIME, {}).get("rows", [])]
