from pathlib import Path

import pytest

from iclr25.book.registry import UnknownChapter, chapters, find_root, get_chapter


def test_chapters_read_from_toc(mini_book: Path) -> None:
    chs = chapters(mini_book)
    assert [c.id for c in chs] == ["demo/ok", "demo/broken"]  # scoreboard is a page, not a chapter
    assert chs[0].part == "Demo"
    assert chs[0].title == "A chapter that works"
    assert chs[0].path == mini_book / "book" / "demo" / "ok.md"


def test_lookup_by_id_path_and_slug(mini_book: Path) -> None:
    assert get_chapter("demo/ok").id == "demo/ok"
    assert get_chapter("book/demo/ok.md").id == "demo/ok"
    assert get_chapter("broken").id == "demo/broken"


def test_unknown_chapter_names_valid_ids_and_closest(mini_book: Path) -> None:
    with pytest.raises(UnknownChapter) as err:
        get_chapter("demo/brokn")
    msg = str(err.value)
    assert "demo/ok" in msg and "demo/broken" in msg
    assert "Did you mean 'demo/broken'" in msg


def test_find_root_from_env(mini_book: Path) -> None:
    assert find_root() == mini_book.resolve()


def test_real_toc_chapters_exist() -> None:
    root = Path(__file__).resolve().parents[2]
    chs = chapters(root)
    assert chs, "the real _toc.yml lists no chapter"
    missing = [c.id for c in chs if not c.path.is_file()]
    assert not missing, f"chapters listed in _toc.yml without a source file: {missing}"
    assert len({c.id for c in chs}) == len(chs)
