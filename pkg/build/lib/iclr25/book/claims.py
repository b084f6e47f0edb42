"""The results table a chapter ends with, and the rows the scoreboard page collects.

A chapter reports every claim it checks through one call::

    report_claims("theory/svgd-rates", scale, [
        Claim("SVGD beats i.i.d. at every N", paper="KSD = O(N^-1/2), like i.i.d.",
              measured=f"max ratio {ratio:.2f}", holds=ratio < 1, kind="paper"),
        Claim("Stein identity E[A_p f] = 0", paper="identity (Stein's lemma)",
              measured=f"|mean| {below(err, 1e-3)}", holds=err < 1e-3, kind="check"),
    ])

Two kinds of rows: ``kind="paper"`` for a statement the paper makes (``paper`` quotes or
paraphrases the paper, nothing else) and ``kind="check"`` for an identity, a sanity check, a bound
we chose or a test of our own code. Paper claims come first in every table; the scoreboard counts
them apart from the checks.

The call displays the table (plain text for nbval and terminals, Markdown for the rendered book)
and stores the rows in the output under :data:`CLAIMS_MIME`, where the book build finds them.
The cell that makes this call is tagged ``nbval-check-output``: print only rounded numbers.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

CLAIMS_MIME = "application/vnd.iclr25.claims+json"


KINDS = ("paper", "check")
"""``paper``: a statement the paper makes; ``check``: an identity, sanity check or our own bound."""


@dataclass(frozen=True)
class Claim:
    """One row of a chapter's results table.

    ``claim``: the statement, in a few words; ``paper``: for ``kind="paper"`` what the paper
    reports (a quote or close paraphrase), for ``kind="check"`` what is expected (an identity, our
    threshold); ``measured``: what this chapter measured (a string with numbers rounded to what
    the experiment determines, see :func:`below`); ``holds``: whether the measurement supports
    it; ``kind``: ``"paper"`` or ``"check"`` (required: every row says which it is).
    """

    claim: str
    paper: str
    measured: str
    holds: bool
    kind: str

    def __post_init__(self) -> None:
        for name in ("claim", "paper", "measured"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name).strip():
                raise ValueError(f"Claim.{name} must be a non-empty string")
        if self.kind not in KINDS:
            raise ValueError(f"Claim.kind must be one of {', '.join(map(repr, KINDS))}, got {self.kind!r}")
        # numpy/torch booleans are fine; store a plain bool
        object.__setattr__(self, "holds", bool(self.holds))


def below(value: float, bound: float) -> str:
    """A round-off-level number as a bound that every machine prints alike: ``"< 1e-12"`` when
    ``value < bound``, else the value itself with two significant digits (``"3.4e-09"``), which
    then differs from the bound anyway. Use it for errors of identities in a claims table."""
    value = float(value)
    if value != value:  # NaN
        return "nan"
    return f"< {bound:.0e}" if abs(value) < bound else f"{value:.1e}"


def held_counts(rows: Sequence[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """``{"paper": (held, total), "check": (held, total)}`` over scoreboard rows (rows without a
    ``kind`` count as paper claims)."""
    out = {}
    for kind in KINDS:
        mine = [r for r in rows if r.get("kind", "paper") == kind]
        out[kind] = (sum(bool(r["holds"]) for r in mine), len(mine))
    return out


def _ordered(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Paper claims first, then checks, each in the chapter's order."""
    return sorted(rows, key=lambda r: KINDS.index(r.get("kind", "paper")))


def text_table(rows: Sequence[dict[str, Any]]) -> str:
    """The claims table as aligned plain text (what nbval compares and a terminal shows)."""
    cols = ["kind", "claim", "paper", "measured", "holds"]
    cells = [[r.get(c, "paper") if c != "holds" else ("yes" if r[c] else "NO") for c in cols]
             for r in _ordered(rows)]
    widths = [max(len(c), *(len(str(row[i])) for row in cells)) for i, c in enumerate(cols)]
    line = lambda vals: " | ".join(str(v).ljust(w) for v, w in zip(vals, widths)).rstrip()  # noqa: E731
    return "\n".join([line(cols), "-+-".join("-" * w for w in widths)] + [line(r) for r in cells])


def escape_md(text: str) -> str:
    """``text`` safe inside one Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    """The claims table in Markdown: paper claims first, then our checks; plain-text marks (no
    emoji, which a browser without an emoji font shows as empty boxes)."""
    out = ["| kind | claim | paper says / expected | we measure | holds |", "|---|---|---|---|---|"]
    for r in _ordered(rows):
        mark = "**yes**" if r["holds"] else "**NO**"
        kind = "paper" if r.get("kind", "paper") == "paper" else "check"
        out.append(f"| {kind} | {escape_md(r['claim'])} | {escape_md(r['paper'])} | "
                   f"{escape_md(r['measured'])} | {mark} |")
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
        "text/plain": text_table(rows),
        "text/markdown": markdown_table(rows),
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
