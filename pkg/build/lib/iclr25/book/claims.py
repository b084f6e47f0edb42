"""The results table a chapter ends with, and the rows the scoreboard page collects.

A chapter reports every claim it checks through one call::

    report_claims("theory/svgd-rates", scale, [
        Claim("SVGD beats i.i.d. at every N", paper="KSD = O(N^-1/2), like i.i.d.",
              measured=f"max ratio {ratio:.2f}", holds=ratio < 1 - 1e-9, kind="paper"),
        Claim("Stein identity E[A_p f] = 0", paper="identity (Stein's lemma)",
              measured=f"|mean| {below(err, 1e-3)}", holds=err < 1e-3, kind="check"),
        Claim("beats BBT over seeds", paper="ZO-PoG > BBT (Table 2)",
              measured=f"{n_seeds} seeds", kind="paper",
              holds=(lo > 0) if n_seeds >= 5 else None,
              reason=None if n_seeds >= 5 else f"needs 5 seeds; this scale runs {n_seeds}"),
    ])

Two kinds of rows: ``kind="paper"`` for a statement the paper makes (``paper`` quotes or
paraphrases the paper, nothing else) and ``kind="check"`` for an identity, a sanity check, a bound
we chose or a test of our own code. Paper claims come first in every table; the scoreboard counts
them apart from the checks.

Three verdicts: ``holds=True`` (shown "yes"), ``holds=False`` ("NO") and ``holds=None`` with a
``reason`` ("undecided"): the experiment at this scale cannot decide the row. Undecided rows are
shown, but left out of the held / tested counts (:func:`held_counts` counts them apart).

Rules for a ``kind="paper"`` row:

1. It states what the paper claims, about the paper's method as the paper defines it. A variant we
   added (a re-fit, a different reading of the method, our own baseline), an identity that holds
   on the paper's own data, and a bound that holds by construction are ``kind="check"``.
2. A row whose verdict is fixed by the scale is undecided at that scale, not NO: when the verdict
   needs ``scale == "full"``, or a seed count (a gate such as ``n_seeds >= 5``) that the scale
   never reaches, write ``holds=None, reason="needs 5 seeds; ci runs 3"`` there. A measurement that
   was made and does not support the claim is NO.
3. A numeric threshold in a verdict carries a tolerance (``gap >= 0.15 - 1e-6``, ``ratio < 1 + tol``):
   a float that lands on the threshold (0.1499999762 for 0.975 - 0.825 in float32) must not flip the
   row. Use the tolerance the measurement warrants, and at least round-off.

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


UNDECIDED = "undecided"
"""How the tables show a row with ``holds=None``: the scale cannot decide it."""


def _as_verdict(holds: Any) -> bool | None:
    """``holds`` as ``True``, ``False`` or ``None``: a Python bool, ``None``, or a numpy or torch
    boolean scalar; anything else (an int, a float, an array, a string) is a ``TypeError``, so
    that no verdict becomes ``None`` or ``True`` by accident."""
    if holds is None or isinstance(holds, bool):
        return holds
    mod = type(holds).__module__.split(".", 1)[0]
    if mod == "numpy" and getattr(holds, "dtype", None) is not None and holds.dtype.kind == "b" \
            and getattr(holds, "shape", None) == ():
        return bool(holds)
    if mod == "torch" and str(getattr(holds, "dtype", "")) == "torch.bool" and holds.numel() == 1:
        return bool(holds)
    raise TypeError(f"Claim.holds must be True, False or None (undecided, with a reason), or a numpy/"
                    f"torch boolean scalar; got {type(holds).__name__} {holds!r:.40}")


@dataclass(frozen=True)
class Claim:
    """One row of a chapter's results table.

    ``claim``: the statement, in a few words; ``paper``: for ``kind="paper"`` what the paper
    reports (a quote or close paraphrase), for ``kind="check"`` what is expected (an identity, our
    threshold); ``measured``: what this chapter measured (a string with numbers rounded to what
    the experiment determines, see :func:`below`); ``holds``: whether the measurement supports
    it, or ``None`` when this scale cannot decide it (undecided); ``kind``: ``"paper"`` or
    ``"check"`` (required: every row says which it is); ``reason``: why the row is undecided
    (required, non-empty, exactly when ``holds`` is ``None``; e.g. ``"needs 5 seeds; ci runs 3"``).
    See the module docstring for the rules on ``kind`` and on undecided rows.
    """

    claim: str
    paper: str
    measured: str
    holds: bool | None
    kind: str
    reason: str | None = None

    def __post_init__(self) -> None:
        for name in ("claim", "paper", "measured"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name).strip():
                raise ValueError(f"Claim.{name} must be a non-empty string")
        if self.kind not in KINDS:
            raise ValueError(f"Claim.kind must be one of {', '.join(map(repr, KINDS))}, got {self.kind!r}")
        # numpy/torch booleans are fine; store a plain bool
        holds = _as_verdict(self.holds)
        object.__setattr__(self, "holds", holds)
        if holds is None:
            if not isinstance(self.reason, str) or not self.reason.strip():
                raise ValueError("an undecided Claim (holds=None) needs a non-empty reason: why this "
                                 "scale cannot decide it")
        elif self.reason is not None and (not isinstance(self.reason, str) or self.reason.strip()):
            raise ValueError("Claim.reason is only for undecided rows (holds=None); a decided row "
                             f"(holds={holds}) takes none, got {self.reason!r}")
        else:
            object.__setattr__(self, "reason", None)


def below(value: float, bound: float) -> str:
    """A round-off-level number as a bound that every machine prints alike: ``"< 1e-12"`` when
    ``value < bound``, else the value itself with two significant digits (``"3.4e-09"``), which
    then differs from the bound anyway. Use it for errors of identities in a claims table."""
    value = float(value)
    if value != value:  # NaN
        return "nan"
    return f"< {bound:.0e}" if abs(value) < bound else f"{value:.1e}"


def held_counts(rows: Sequence[dict[str, Any]]) -> dict[str, tuple[int, int, int]]:
    """``{"paper": (held, tested, undecided), "check": (held, tested, undecided)}`` over scoreboard
    rows: ``tested`` counts the decided rows (``holds`` True or False), ``undecided`` the rows with
    ``holds`` None, which are in neither ``held`` nor ``tested``. Rows without a ``kind`` count as
    paper claims."""
    out = {}
    for kind in KINDS:
        mine = [r for r in rows if r.get("kind", "paper") == kind]
        decided = [r for r in mine if r["holds"] is not None]
        out[kind] = (sum(bool(r["holds"]) for r in decided), len(decided), len(mine) - len(decided))
    return out


def format_counts(held: int, tested: int, undecided: int = 0, *, sep: str = "/") -> str:
    """``"3/4"``, or ``"3/4 (1 undecided)"`` when rows were undecided (``sep=" of "`` gives
    ``"3 of 4"``)."""
    return f"{held}{sep}{tested}" + (f" ({undecided} undecided)" if undecided else "")


def parse_counts(value: Any) -> tuple[int, int, int] | None:
    """A ``claims_<scale>`` entry of ``book/timings.json`` as ``(held, tested, undecided)``: the
    list ``[held, tested, undecided]``, or the older string ``"held/total"`` (no undecided rows).
    ``None`` when absent."""
    if value is None:
        return None
    if isinstance(value, str):
        held, total = (int(v) for v in value.split("/"))
        return held, total, 0
    held, tested, *rest = (int(v) for v in value)
    return held, tested, rest[0] if rest else 0


def verdict_text(holds: bool | None) -> str:
    """``"yes"``, ``"NO"`` or ``"undecided"``."""
    return UNDECIDED if holds is None else "yes" if holds else "NO"


def _ordered(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Paper claims first, then checks, each in the chapter's order."""
    return sorted(rows, key=lambda r: KINDS.index(r.get("kind", "paper")))


def text_table(rows: Sequence[dict[str, Any]]) -> str:
    """The claims table as aligned plain text (what nbval compares and a terminal shows); an
    undecided row says ``undecided`` in the holds column, and its reason in a note under the table."""
    cols = ["kind", "claim", "paper", "measured", "holds"]
    cells = [[r.get(c, "paper") if c != "holds" else verdict_text(r[c]) for c in cols]
             for r in _ordered(rows)]
    widths = [max(len(c), *(len(str(row[i])) for row in cells)) for i, c in enumerate(cols)]
    line = lambda vals: " | ".join(str(v).ljust(w) for v, w in zip(vals, widths)).rstrip()  # noqa: E731
    notes = [f"undecided: {r['claim']}: {r.get('reason') or 'no reason given'}"
             for r in _ordered(rows) if r["holds"] is None]
    return "\n".join([line(cols), "-+-".join("-" * w for w in widths)] + [line(r) for r in cells] + notes)


def escape_md(text: str) -> str:
    """``text`` safe inside one Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    """The claims table in Markdown: paper claims first, then our checks; plain-text marks (no
    emoji, which a browser without an emoji font shows as empty boxes). An undecided row says
    *undecided* and why, in the holds column."""
    out = ["| kind | claim | paper says / expected | we measure | holds |", "|---|---|---|---|---|"]
    for r in _ordered(rows):
        mark = (f"*undecided*: {escape_md(r.get('reason') or 'no reason given')}" if r["holds"] is None
                else "**yes**" if r["holds"] else "**NO**")
        kind = "paper" if r.get("kind", "paper") == "paper" else "check"
        out.append(f"| {kind} | {escape_md(r['claim'])} | {escape_md(r['paper'])} | "
                   f"{escape_md(r['measured'])} | {mark} |")
    return "\n".join(out)


def claim_rows(chapter: str, scale: str, claims: Sequence[Claim]) -> list[dict[str, Any]]:
    """The scoreboard rows (``claim, paper, measured, holds, kind, chapter, scale``, and ``reason``
    for an undecided row) of ``claims``."""
    from iclr25.common import check_scale

    check_scale(scale)
    if not claims:
        raise ValueError("report_claims needs at least one Claim")
    if any(not isinstance(c, Claim) for c in claims):
        raise TypeError("report_claims takes a sequence of iclr25.book.Claim")
    rows = []
    for c in claims:
        row = {**asdict(c), "chapter": chapter, "scale": scale}
        if c.holds is not None:
            del row["reason"]
        rows.append(row)
    return rows


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
