import pytest

from iclr25.book import Claim, report_claims
from iclr25.book.claims import _markdown_table, _text_table, claim_rows


def test_report_claims_rows_and_text(capsys: pytest.CaptureFixture) -> None:
    claims = [
        Claim("rate", paper="1/sqrt N", measured="slope -0.71", holds=True),
        Claim("beats baseline", paper="10x", measured="3.1x", holds=False),
    ]
    assert report_claims("demo/ok", "ci", claims) is None
    rows = claim_rows("demo/ok", "ci", claims)
    out = capsys.readouterr().out  # outside a kernel the table is printed
    assert "slope -0.71" in out and "NO" in out and "yes" in out
    assert rows[1] == {"claim": "beats baseline", "paper": "10x", "measured": "3.1x", "holds": False,
                       "chapter": "demo/ok", "scale": "ci"}


def test_claim_validation() -> None:
    with pytest.raises(ValueError, match="measured"):
        Claim("x", paper="p", measured="  ", holds=True)
    with pytest.raises(ValueError, match="valid scales"):
        report_claims("demo/ok", "tiny", [Claim("x", paper="p", measured="m", holds=True)])
    with pytest.raises(ValueError, match="at least one"):
        report_claims("demo/ok", "ci", [])
    with pytest.raises(TypeError):
        report_claims("demo/ok", "ci", [("x", "p", "m", True)])  # type: ignore[list-item]


def test_holds_is_plain_bool_and_tables_escape() -> None:
    import numpy as np

    c = Claim("a|b", paper="p", measured="m", holds=np.bool_(True))
    assert c.holds is True
    row = {"claim": "a|b", "paper": "p", "measured": "m", "holds": True}
    assert "a\\|b" in _markdown_table([row])
    assert _text_table([row]).splitlines()[0].startswith("claim")
