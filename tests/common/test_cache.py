"""iclr25.common.cached: keyed by parameters and code, atomic, rebuilds what it cannot load."""

from pathlib import Path

import pytest

from iclr25.common import cache_dir, cached
from iclr25.common.cache import atomic_write, cache_key


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ICLR25_CACHE", str(tmp_path / "cache"))


def make_one() -> dict:
    return {"value": 1}


def make_two() -> dict:
    return {"value": 2}


def test_built_once_then_loaded() -> None:
    calls = []

    def make() -> dict:
        calls.append(1)
        return {"value": 1}

    assert cached("t", "x", make, key={"a": 1}) == {"value": 1}
    assert cached("t", "x", make, key={"a": 1}) == {"value": 1}
    assert len(calls) == 1
    cached("t", "x", make, key={"a": 2})  # new parameters: built again
    assert len(calls) == 2
    cached("t", "x", make, key={"a": 2}, use_cache=False)
    assert len(calls) == 3


def test_key_follows_the_source_of_the_code() -> None:
    assert cache_key({"a": 1}, [make_one]) != cache_key({"a": 1}, [make_two])
    assert cache_key({"a": 1}, [make_one]) == cache_key({"a": 1}, [make_one])
    with pytest.raises(TypeError, match="cannot read the source"):
        cache_key({}, [1])


def test_corrupt_file_is_rebuilt_not_loaded() -> None:
    cached("t", "x", make_one, key=0, code=[make_one])
    (path,) = cache_dir("t").glob("x-*.pt")
    path.write_bytes(b"not a torch file")
    assert cached("t", "x", make_one, key=0, code=[make_one]) == {"value": 1}
    assert path.read_bytes() != b"not a torch file"


def test_atomic_write_leaves_nothing_on_failure(tmp_path: Path) -> None:
    def boom(tmp: Path) -> None:
        tmp.write_text("half")
        raise RuntimeError("died while writing")

    with pytest.raises(RuntimeError):
        atomic_write(tmp_path / "out.bin", boom)
    assert list(tmp_path.iterdir()) == []
    atomic_write(tmp_path / "out.bin", lambda tmp: tmp.write_text("whole"))
    assert (tmp_path / "out.bin").read_text() == "whole" and len(list(tmp_path.iterdir())) == 1
