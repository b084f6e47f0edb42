import pytest

from iclr25.book import Claim, report_claims
from iclr25.book.claims import below, claim_rows, held_counts, markdown_table, text_table


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
    assert held_counts(rows) == {"paper": (1, 2), "check": (1, 1)}


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
