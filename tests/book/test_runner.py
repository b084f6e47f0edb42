"""The runner: execution, cache hit and miss, failure reports, parameter checks, CLI errors."""

import json
from pathlib import Path

import nbformat
import pytest

from iclr25.book.cli import main
from iclr25.book.registry import get_chapter
from iclr25.book.runner import (BadParameter, ChapterFailed, executed_path, load_timings,
                                meta_path, parameters_cell, parse_overrides, read_chapter, run_chapter)


def outputs_text(nb_path: Path) -> str:
    nb = nbformat.read(nb_path, as_version=4)
    return "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))


def test_parameters_cell_is_found(mini_book: Path) -> None:
    idx, values = parameters_cell(read_chapter(get_chapter("demo/ok")))
    assert values == {"scale": "full", "seed": 0, "n": 3}
    assert idx == 1  # cell 0 is the title (markdown)


def test_run_cache_hit_and_miss(mini_book: Path) -> None:
    ch = get_chapter("demo/ok")
    first = run_chapter(ch, scale="ci", progress=False)
    assert not first.cached and first.notebook == executed_path(ch)
    assert "scale ci n 3" in outputs_text(first.notebook)
    assert json.loads(meta_path(ch).read_text())["params"]["scale"] == "ci"
    assert load_timings(mini_book)["demo/ok"]["ci"] >= 0
    # nothing changed: cached
    assert run_chapter(ch, scale="ci", progress=False).cached
    # a parameter changes: re-executed
    again = run_chapter(ch, scale="ci", overrides={"n": 5}, progress=False)
    assert not again.cached and "scale ci n 5" in outputs_text(again.notebook)
    # a package module the chapter does not import changes: still cached
    run_chapter(ch, scale="ci", progress=False)
    (mini_book / "pkg" / "iclr25" / "other.py").write_text("Y = 1\n")
    assert run_chapter(ch, scale="ci", progress=False).cached
    # a package module the chapter imports changes: re-executed
    (mini_book / "pkg" / "iclr25" / "dummy.py").write_text("X = 2\n")
    assert not run_chapter(ch, scale="ci", progress=False).cached
    # the chapter changes: re-executed
    ch.path.write_text(ch.path.read_text().replace("x = n * 2", "x = n * 3"))
    assert not run_chapter(ch, scale="ci", progress=False).cached


def test_failure_names_chapter_cell_and_exception_and_leaves_nothing(mini_book: Path) -> None:
    ok = get_chapter("demo/ok")
    run_chapter(ok, scale="ci", progress=False)
    # make the working chapter fail: its old result must disappear
    ok.path.write_text(ok.path.read_text().replace("x = n * 2", "x = n / 0"))
    with pytest.raises(ChapterFailed) as err:
        run_chapter(ok, scale="ci", progress=False)
    msg = str(err.value)
    assert "demo/ok" in msg and "ZeroDivisionError" in msg and "x = n / 0" in msg
    assert err.value.cell is not None
    assert not executed_path(ok).exists() and not meta_path(ok).exists()
    assert err.value.notebook is not None and err.value.notebook.is_file()
    assert "failed" in err.value.notebook.parts
    leftovers = [p.name for p in executed_path(ok).parent.glob("*")]
    assert leftovers == [], f"a failed run left {leftovers}"


def test_failure_is_never_cached(mini_book: Path) -> None:
    ch = get_chapter("demo/broken")
    for _ in range(2):
        with pytest.raises(ChapterFailed, match="deliberate failure"):
            run_chapter(ch, scale="ci", progress=False)


def test_unknown_parameter_refused_before_running(mini_book: Path) -> None:
    ch = get_chapter("demo/ok")
    with pytest.raises(BadParameter, match="no parameter 'nn'.*scale, seed, n"):
        run_chapter(ch, scale="ci", overrides={"nn": 1}, progress=False)
    assert not executed_path(ch).exists()
    with pytest.raises(ValueError, match="valid scales: ci, full"):
        run_chapter(ch, scale="huge", progress=False)


def test_dependency_files_follow_imports(tmp_path: Path) -> None:
    from iclr25.book.registry import Chapter
    from iclr25.book.runner import dependency_files

    pkg = tmp_path / "pkg" / "iclr25"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from .a import f\n")
    (pkg / "sub" / "a.py").write_text("from ..common import g\n")
    (pkg / "common.py").write_text("import numpy\n")
    (pkg / "unrelated.py").write_text("")
    ch = Chapter(id="x/y", file="book/x/y", part="", root=tmp_path)
    got = {p.relative_to(pkg).as_posix() for p in dependency_files(ch, "from iclr25.sub import f")}
    assert got == {"__init__.py", "sub/__init__.py", "sub/a.py", "common.py"}
    assert len(dependency_files(ch, "import importlib")) == 5  # dynamic imports: everything


def test_parse_overrides() -> None:
    assert parse_overrides(["n=3", "name=abc", "xs=[1, 2]"]) == {"n": 3, "name": "abc", "xs": [1, 2]}
    with pytest.raises(BadParameter):
        parse_overrides(["novalue"])


def test_cli_errors(mini_book: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["run", "demo/nope", "--scale", "ci"]) == 2
    assert "Valid chapters: demo/ok, demo/broken" in capsys.readouterr().err
    assert main(["run", "demo/ok", "--scale", "ci", "-p", "bogus=1"]) == 2
    assert "its parameters are: scale, seed, n" in capsys.readouterr().err
    assert main(["run", "demo/broken", "--scale", "ci"]) == 1
    err = capsys.readouterr().err
    assert "chapter demo/broken failed in cell" in err and "ZeroDivisionError" in err
    with pytest.raises(SystemExit):
        main(["run", "demo/ok", "--scale", "medium"])
    assert main(["list"]) == 0
    assert "demo/broken" in capsys.readouterr().out
