import pytest

from iclr25.book import Claim, report_claims
from pathlib import Path

from iclr25.book.claims import (below, claim_rows, format_counts, held_counts, markdown_table, parse_counts,
                                text_table)


def test_report_claims_rows_and_text(capsys: pytest.CaptureFixture) -> None:
    claims = [
        Claim("identity", paper="exact", measured="< 1e-12", holds=True, kind="check"),
        Claim("rate", paper="1/sqrt N", measured="slope -0.71", holds=True, kind="paper"),
        Claim("beats baseline", paper="10x", measured="3.1x", holds=False, kind="paper"),
    ]
    assert report_claims("demo/ok", "ci", claims) is None
    rows = claim_rows("demo/ok", "ci", claims)
    out = capsys.readouterr().out  # outside a kernel the table is printed
    assert "slope -0.71" in out and "NO" in out and "yes" in out
    assert rows[2] == {"claim": "beats baseline", "paper": "10x", "measured": "3.1x", "holds": False,
                       "kind": "paper", "chapter": "demo/ok", "scale": "ci"}
    # paper claims first in both tables, then the checks
    lines = out.splitlines()
    assert lines[2].startswith("paper") and lines[-1].startswith("check")
    assert markdown_table(rows).splitlines()[2].startswith("| paper | rate")
    assert held_counts(rows) == {"paper": (1, 2, 0), "check": (1, 1, 0)}
    assert "reason" not in rows[0]  # decided rows store no reason


def test_claim_validation() -> None:
    with pytest.raises(ValueError, match="measured"):
        Claim("x", paper="p", measured="  ", holds=True, kind="paper")
    with pytest.raises(ValueError, match="'paper', 'check'"):
        Claim("x", paper="p", measured="m", holds=True, kind="claim")
    with pytest.raises(TypeError):
        Claim("x", paper="p", measured="m", holds=True)  # type: ignore[call-arg]  # kind is required
    with pytest.raises(ValueError, match="valid scales"):
        report_claims("demo/ok", "tiny", [Claim("x", paper="p", measured="m", holds=True, kind="check")])
    with pytest.raises(ValueError, match="at least one"):
        report_claims("demo/ok", "ci", [])
    with pytest.raises(TypeError):
        report_claims("demo/ok", "ci", [("x", "p", "m", True)])  # type: ignore[list-item]


def test_holds_is_plain_bool_and_tables_escape() -> None:
    import numpy as np

    c = Claim("a|b", paper="p", measured="m", holds=np.bool_(True), kind="paper")
    assert c.holds is True
    row = {"claim": "a|b", "paper": "p", "measured": "m", "holds": True}
    assert "a\\|b" in markdown_table([row])
    assert text_table([row]).splitlines()[0].startswith("kind")
    assert "✅" not in markdown_table([row])  # plain-text marks, no emoji


def test_below_prints_round_off_as_a_bound() -> None:
    assert below(5e-15, 1e-12) == "< 1e-12" == below(-3e-13, 1e-12)
    assert below(2.3456e-9, 1e-12) == "2.3e-09"
    assert below(float("nan"), 1e-12) == "nan"


def test_undecided_rows_are_shown_and_counted_apart(capsys: pytest.CaptureFixture) -> None:
    claims = [
        Claim("beats BBT", paper="ZO-PoG > BBT", measured="not decided at ci (3 seeds)", holds=None,
              reason="needs 5 seeds; ci runs 3", kind="paper"),
        Claim("rate", paper="1/sqrt N", measured="slope -0.71", holds=True, kind="paper"),
        Claim("beats baseline", paper="10x", measured="3.1x", holds=False, kind="paper"),
        Claim("big enough", paper="n >= 100", measured="n = 10", holds=None, reason="full only", kind="check"),
    ]
    report_claims("demo/ok", "ci", claims)
    out = capsys.readouterr().out
    rows = claim_rows("demo/ok", "ci", claims)
    assert rows[0]["holds"] is None and rows[0]["reason"] == "needs 5 seeds; ci runs 3"
    assert held_counts(rows) == {"paper": (1, 2, 1), "check": (0, 0, 1)}
    text = text_table(rows)
    assert text == out.rstrip("\n")
    body = text.splitlines()
    assert body[2].startswith("paper") and body[2].rstrip().endswith("| undecided")
    assert "undecided: beats BBT: needs 5 seeds; ci runs 3" in body
    assert "| NO" in text and "| yes" in text
    md = markdown_table(rows)
    assert "| *undecided*: needs 5 seeds; ci runs 3 |" in md and "| *undecided*: full only |" in md
    assert md.count("**NO**") == 1 and md.count("**yes**") == 1


def test_undecided_validation() -> None:
    import numpy as np

    with pytest.raises(ValueError, match="reason"):
        Claim("x", paper="p", measured="m", holds=None, kind="paper")  # undecided needs a reason
    with pytest.raises(ValueError, match="reason"):
        Claim("x", paper="p", measured="m", holds=None, reason="  ", kind="paper")
    with pytest.raises(ValueError, match="reason"):
        Claim("x", paper="p", measured="m", holds=False, reason="full only", kind="paper")  # decided: none
    for accidental in (0, 1, 0.5, "yes", [True], np.array([True, False]), np.float64(1.0)):
        with pytest.raises(TypeError, match="holds"):
            Claim("x", paper="p", measured="m", holds=accidental, kind="check")
    assert Claim("x", paper="p", measured="m", holds=np.bool_(False), reason="", kind="check").reason is None
    assert Claim("x", paper="p", measured="m", holds=np.float64(2.0) > 1, kind="check").holds is True
    assert Claim("x", paper="p", measured="m", holds=np.array(1.0) > 2, kind="check").holds is False


def test_holds_accepts_torch_bools() -> None:
    torch = pytest.importorskip("torch")
    c = Claim("x", paper="p", measured="m", holds=torch.tensor(1.0) > 0, kind="check")
    assert c.holds is True and type(c.holds) is bool
    with pytest.raises(TypeError):
        Claim("x", paper="p", measured="m", holds=torch.tensor([True, True]), kind="check")
    with pytest.raises(TypeError):
        Claim("x", paper="p", measured="m", holds=torch.tensor(1.0), kind="check")


def test_counts_format_and_parse() -> None:
    assert format_counts(3, 4) == "3/4" and format_counts(3, 4, 1) == "3/4 (1 undecided)"
    assert format_counts(3, 4, 2, sep=" of ") == "3 of 4 (2 undecided)"
    assert parse_counts("2/3") == (2, 3, 0)  # the older timings.json form
    assert parse_counts([1, 4, 2]) == (1, 4, 2) and parse_counts(None) is None


def test_scoreboard_counts_undecided_apart() -> None:
    from iclr25.book.build import scoreboard_table

    base = {"claim": "c", "paper": "p", "measured": "m", "kind": "paper", "chapter": "x/y", "scale": "ci"}
    rows = [{**base, "holds": True}, {**base, "holds": False},
            {**base, "holds": None, "reason": "needs 5 seeds"}, {**base, "holds": True, "kind": "check"}]
    table = scoreboard_table({"x/y": rows, "x/z": [{**base, "holds": True}]})
    assert table.startswith("**2 of 3 paper claims hold**")
    assert "1 paper claim and 0 checks were **undecided**" in table
    assert "| `ci` | 1 of 2 (1 undecided) | 1 of 1 |" in table
    assert "| **total** | | **2 of 3 (1 undecided)** | **1 of 1** |" in table
    assert "*undecided*: needs 5 seeds" in table


def test_chapter_table_total_sums_the_rows(tmp_path: Path) -> None:
    import json
    from types import SimpleNamespace

    from iclr25.book.build import chapter_table

    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "timings.json").write_text(json.dumps({
        "a/one": {"ci": 10.2, "claims_ci": "2/3", "full": 100.0, "claims_full": [1, 3, 0]},
        "a/two": {"ci": 20.4, "claims_ci": [0, 2, 3]},
    }))
    chs = [SimpleNamespace(id=i, part="A", title=i) for i in ("a/one", "a/two", "a/three")]
    table = chapter_table(tmp_path, chs)  # type: ignore[arg-type]
    lines = table.splitlines()
    assert "| A | `a/one` | 10 | 100 | 2/3 / 1/3 |" in lines
    assert "| A | `a/two` | 20 | — | 0/2 (3 undecided) / — |" in lines
    assert "| A | `a/three` | — | — | — / — |" in lines
    assert lines[-1] == "| **total** | 3 chapters | 30 | 100 | **2/5 (3 undecided)** / **1/3** |"


def _parse_counts_cell(cell: str) -> list[tuple[int, int, int] | None]:
    import re

    out = []
    for part in cell.replace("*", "").split(" / "):
        m = re.fullmatch(r"\s*(\d+)/(\d+)(?: \((\d+) undecided\))?\s*", part)
        out.append(None if m is None else (int(m[1]), int(m[2]), int(m[3] or 0)))
    return out


def test_readme_total_is_the_sum_of_the_rows() -> None:
    from iclr25.book.readme import END, START

    root = Path(__file__).resolve().parents[2]
    table = (root / "README.md").read_text(encoding="utf-8").split(START, 1)[1].split(END, 1)[0]
    rows = [line.split(" | ") for line in table.strip().splitlines()[2:]]
    body, total = rows[:-1], rows[-1]
    assert total[0] == "| **total**" and total[1] == f"{len(body)} chapters"
    for col in (2, 3):  # the time columns
        assert float(total[col]) == sum(float(r[col]) for r in body if r[col] != "—")
    want = [(0, 0, 0), (0, 0, 0)]
    for r in body:
        for i, n in enumerate(_parse_counts_cell(r[4].rstrip(" |"))):
            if n is not None:
                want[i] = tuple(a + b for a, b in zip(want[i], n))  # type: ignore[assignment]
    assert _parse_counts_cell(total[4].rstrip(" |")) == want


def test_readme_ci_counts_are_the_golden_notebooks() -> None:
    """The README's paper-claim counts at ci (book/timings.json) are those of the executed ci
    notebooks (the goldens), so the README cannot count rows that were not tested."""
    import json

    from iclr25.book.claims import notebook_claims
    from iclr25.book.golden import golden_path
    from iclr25.book.registry import chapters

    root = Path(__file__).resolve().parents[2]
    timings = json.loads((root / "book" / "timings.json").read_text())
    for c in chapters(root):
        got = held_counts(notebook_claims(golden_path(c)))["paper"]
        assert parse_counts(timings[c.id]["claims_ci"]) == got, c.id
