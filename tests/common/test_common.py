import numpy as np
import pytest
import torch

from iclr25.common import by_scale, check_scale, explore, progress, seed_everything, start


def test_scale_helpers() -> None:
    assert by_scale("ci", ci=1, full=2) == 1 and by_scale("full", ci=1, full=2) == 2
    with pytest.raises(ValueError, match="valid scales: ci, full"):
        check_scale("medium")
    with pytest.raises(ValueError):
        by_scale("CI", ci=1, full=2)


def test_seeding_is_reproducible() -> None:
    seed_everything(3)
    a = (np.random.rand(), torch.rand(1).item())
    seed_everything(3)
    assert (np.random.rand(), torch.rand(1).item()) == a
    assert start("ci", 3).type in ("cpu", "cuda")


def test_headless_helpers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ICLR25_HEADLESS", "1")
    assert list(progress(range(3))) == [0, 1, 2]
    assert explore(lambda n, h: n * h, n=(1, 9, 1), h=(0.5, 2.0)) == 5 * 1.25


def test_load_record_accepts_its_own_digest_and_refuses_an_edit(tmp_path):
    import json

    from iclr25.common.digest import load_record, record_sha256

    rec = {"a": [1, 2], "cpu_s": 3.0}
    rec["sha256"] = record_sha256(rec)
    assert record_sha256({**rec, "cpu_s": 9.9}) == rec["sha256"]  # timing is not part of the digest
    path = tmp_path / "r.json"
    path.write_text(json.dumps(rec))
    assert load_record(path, "python -m x") == rec
    path.write_text(json.dumps({**rec, "a": [1, 3]}))
    with pytest.raises(ValueError, match="python -m x"):
        load_record(path, "python -m x")


def test_code_ast_sha256_ignores_comments_and_docstrings_only(tmp_path):
    from iclr25.common.digest import code_ast_sha256

    a, b, c = tmp_path / "a.py", tmp_path / "b.py", tmp_path / "c.py"
    a.write_text('"""Module."""\nX = 1  # one\n\ndef f(x):\n    """Doc |D_l|."""\n    return x + X\n')
    b.write_text('"""Other words."""\nX = 1  # a different comment\n\n\ndef f(x):\n    """Other doc."""\n    return x + X\n')
    c.write_text('"""Module."""\nX = 1  # one\n\ndef f(x):\n    """Doc |D_l|."""\n    return x - X\n')
    assert code_ast_sha256(a) == code_ast_sha256(b)
    assert code_ast_sha256(a) != code_ast_sha256(c)
