import sys
from pathlib import Path

import pytest

from iclr25.book.registry import TocError, UnknownChapter, chapters, find_root, get_chapter


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


def test_threads_read_from_the_setup_call() -> None:
    root = Path(__file__).resolve().parents[2]
    threads = {c.id: c.threads for c in chapters(root)}
    # semantix and interlcm ask for one thread; sorel calls start(scale, seed), whose default is two;
    # zo-pog asks for by_scale(scale, ci=1, full=2): not a literal, so start's default of two is read
    two = {"theory/sorel", "theory/zo-pog"}
    assert {cid for cid, n in threads.items() if n != 1} == two
    assert all(threads[cid] == 2 for cid in two)


def test_threads_default(mini_book: Path) -> None:
    ok = get_chapter("demo/ok")
    assert ok.threads == 1  # no start( call
    text = ok.path.read_text()
    ok.path.write_text(text.replace("x = n * 2", "# start(scale, seed, threads=4)\ndevice = start(scale, seed)"))
    assert ok.threads == 2
    ok.path.write_text(text.replace("x = n * 2", "device = start(scale, seed, threads=3)  # three"))
    assert ok.threads == 3


def test_toc_read_without_sphinx_external_toc(mini_book: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the book extra (``list`` alone) the toc is walked by hand, to the same chapters."""
    real = Path(__file__).resolve().parents[2]
    with_lib = [(c.id, c.part) for c in chapters(real)] + [(c.id, c.part) for c in chapters(mini_book)]
    monkeypatch.setitem(sys.modules, "sphinx_external_toc.parsing", None)  # import raises ImportError
    assert [(c.id, c.part) for c in chapters(real)] + [(c.id, c.part) for c in chapters(mini_book)] == with_lib
    (mini_book / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nparts: [3]\n")
    with pytest.raises(TocError, match="not a jb-book toc of parts with chapters"):
        chapters(mini_book)


def test_toc_schema_errors_from_the_library(mini_book: Path) -> None:
    toc = mini_book / "_toc.yml"
    toc.write_text("format: jb-book\nroot: book/intro\nparts:\n  - caption: A\n    chapters:\n      - book/demo/ok\n")
    with pytest.raises(TocError, match=r"entry is not a mapping type at '/parts/0/chapters/0'"):
        chapters(mini_book)
    toc.write_text("format: jb-book\nroot: book/intro\nparts:\n  - caption: A\n    chapters:\n"
                   "      - file: book/demo/ok\n        sections:\n          - file: book/demo/broken\n")
    assert [(c.id, c.part) for c in chapters(mini_book)] == [("demo/ok", "A"), ("demo/broken", "A")]
