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


def test_strip_source_drops_docstrings_comments_and_blank_lines_only():
    from iclr25.common.digest import strip_source

    src = '''
    def f(x):  # a comment
        """Doc with λ ± non-ASCII."""

        y = "# not a comment"  # real comment ±
        return x  # end
    class A:
        "one-line doc"
        z = 1
    '''
    assert strip_source(src) == 'def f(x):\n    y = "# not a comment"\n    return x\nclass A:\n    z = 1'
    # what the code does still changes the text
    assert strip_source(src.replace("return x", "return -x")) != strip_source(src)


def test_zo_pog_records_match_their_code_on_this_python():
    """The records' code fingerprints use strip_source, which reads the raw source text (not an
    ast.unparse round trip, whose output depends on the Python version)."""
    import json
    from pathlib import Path

    from iclr25.blackbox import zo_pog_random, zo_pog_template

    for mod, name in ((zo_pog_random, "zo-pog-random"), (zo_pog_template, "zo-pog-template")):
        path = Path(mod.__file__).parent / "results" / f"{name}.json"
        assert json.loads(path.read_text())["code_sha256"] == mod.code_sha256(), name
