"""The one sha256 helper for committed results."""

import hashlib

import pytest

from iclr25.common.digest import check_sha256, file_sha256, json_sha256


def test_file_and_json_digests(tmp_path):
    p = tmp_path / "w.bin"
    p.write_bytes(b"weights")
    assert file_sha256(p) == hashlib.sha256(b"weights").hexdigest()
    assert json_sha256({"b": 1, "a": [2, 3]}) == json_sha256({"a": [2, 3], "b": 1})
    assert json_sha256({"a": 1}) != json_sha256({"a": 2})


def test_check_refuses_a_changed_file(tmp_path):
    p = tmp_path / "w.bin"
    p.write_bytes(b"weights")
    good = file_sha256(p)
    assert check_sha256(p, good) == b"weights"
    p.write_bytes(b"weights!")
    with pytest.raises(ValueError, match="w.bin.*changed after the run"):
        check_sha256(p, good)
