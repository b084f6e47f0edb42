"""The runner: execution, the per-key cache, failure reports, parameters, bad input, CLI errors."""

import json
import threading
from pathlib import Path

import nbformat
import pytest

from iclr25.book import cache
from iclr25.book.cli import main
from iclr25.book.params import (BadParameter, MissingParameters, check_overrides, coerce, parameters_cell,
                                parse_overrides, read_chapter)
from iclr25.book.registry import get_chapter
from iclr25.book.runner import ChapterFailed, find_result, last_frame, run_chapter
from iclr25.book.timings import load_timings


def outputs_text(nb_path: Path) -> str:
    nb = nbformat.read(nb_path, as_version=4)
    return "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))


def test_parameters_cell_is_found(mini_book: Path) -> None:
    idx, values = parameters_cell(read_chapter(get_chapter("demo/ok")))
    assert values == {"scale": "full", "seed": 0, "n": 3, "verbose": True}
    assert idx == 1  # cell 0 is the title (markdown)


def test_run_cache_hit_and_miss(mini_book: Path) -> None:
    ch = get_chapter("demo/ok")
    first = run_chapter(ch, scale="ci", progress=False)
    assert not first.cached and first.notebook.is_relative_to(mini_book / "_build" / "cache" / "demo" / "ok")
    assert "scale ci n 3 verbose True" in outputs_text(first.notebook)
    assert cache.read_meta(first.notebook)["params"]["scale"] == "ci"
    assert load_timings(mini_book) == {}  # the ledger is written only with record=True
    # nothing changed: cached
    assert run_chapter(ch, scale="ci", progress=False).cached
    # a parameter changes: re-executed
    again = run_chapter(ch, scale="ci", overrides={"n": "5"}, progress=False)
    assert not again.cached and "scale ci n 5" in outputs_text(again.notebook)
    # a package module the chapter does not import changes: still cached
    (mini_book / "pkg" / "iclr25" / "other.py").write_text("Y = 1\n")
    assert run_chapter(ch, scale="ci", progress=False).cached
    # a package module the chapter imports changes: re-executed
    (mini_book / "pkg" / "iclr25" / "dummy.py").write_text("X = 2\n")
    assert not run_chapter(ch, scale="ci", progress=False).cached
    # the chapter changes: re-executed
    ch.path.write_text(ch.path.read_text().replace("x = n * 2", "x = n * 3"))
    assert not run_chapter(ch, scale="ci", progress=False).cached


def test_scales_and_parameters_do_not_evict_each_other(mini_book: Path) -> None:
    ch = get_chapter("demo/ok")
    ci = run_chapter(ch, scale="ci", progress=False)
    full = run_chapter(ch, scale="full", progress=False)
    other = run_chapter(ch, scale="full", overrides={"n": "7"}, progress=False)
    assert len({ci.notebook, full.notebook, other.notebook}) == 3
    assert run_chapter(ch, scale="ci", progress=False).cached
    assert run_chapter(ch, scale="full", progress=False).cached
    assert find_result(ch, scale="ci") == ci.notebook and find_result(ch, scale="full") == full.notebook


def test_record_writes_the_ledger_only_for_default_runs(mini_book: Path) -> None:
    ch = get_chapter("demo/ok")
    run_chapter(ch, scale="ci", progress=False, overrides={"n": "4"}, record=True)
    assert load_timings(mini_book) == {}
    run_chapter(ch, scale="ci", progress=False, record=True)
    assert load_timings(mini_book)["demo/ok"]["ci"] >= 0


def test_corrupt_cache_record_is_rebuilt(mini_book: Path) -> None:
    ch = get_chapter("demo/ok")
    first = run_chapter(ch, scale="ci", progress=False)
    first.notebook.write_text("{ not a notebook")
    again = run_chapter(ch, scale="ci", progress=False)
    assert not again.cached and again.notebook == first.notebook
    assert cache.read_meta(again.notebook)["params"]["scale"] == "ci"
    # a record whose stored key does not match its name is not trusted either
    nb = nbformat.read(again.notebook, as_version=4)
    nb.metadata["iclr25"]["key"] = "0" * 64
    nbformat.write(nb, again.notebook)
    assert not run_chapter(ch, scale="ci", progress=False).cached


def test_concurrent_runs_of_one_chapter(mini_book: Path) -> None:
    ch = get_chapter("demo/ok")
    results, errors = [], []

    def go() -> None:
        try:
            results.append(run_chapter(ch, scale="ci", progress=False))
        except Exception as err:  # noqa: BLE001
            errors.append(err)

    threads = [threading.Thread(target=go) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(r.cached for r in results) == [False, True]  # the lock made the second one wait
    assert results[0].notebook == results[1].notebook and nbformat.read(results[0].notebook, as_version=4)
    assert not list((mini_book / "_build" / "cache" / "demo" / "ok").glob("*.tmp"))


def test_magic_makes_the_chapter_depend_on_the_whole_package(mini_book: Path) -> None:
    ch = get_chapter("demo/ok")
    ch.path.write_text(ch.path.read_text().replace("x = n * 2", "%time x = n * 2"))
    code = [c.source for c in read_chapter(ch).cells if c.cell_type == "code"]
    files = cache.dependency_files(ch, code)
    assert files == cache.package_files(mini_book)
    run_chapter(ch, scale="ci", progress=False)
    (mini_book / "pkg" / "iclr25" / "other.py").write_text("Y = 1\n")  # not imported, but uncertain
    assert not run_chapter(ch, scale="ci", progress=False).cached


def test_plain_python_cells_are_parsed_statically() -> None:
    code, certain = cache.python_source("import numpy as np\nx = np.ones(3)\n")
    assert certain and "import numpy" in code
    for cell in ("%run other.py", "!pip list", "np.ones?", "%%bash\necho hi"):
        assert not cache.python_source(cell)[1], cell
    assert cache.imported_modules("from iclr25.common import x\nimport iclr25.lm") == {
        "iclr25.common", "iclr25.common.x", "iclr25.lm"}
    assert cache.imported_modules("def (") is None


def test_failure_names_chapter_code_cell_frame_and_leaves_nothing(mini_book: Path) -> None:
    ok = get_chapter("demo/ok")
    first = run_chapter(ok, scale="ci", progress=False)
    ok.path.write_text(ok.path.read_text().replace("x = n * 2", "x = n / 0"))
    with pytest.raises(ChapterFailed) as err:
        run_chapter(ok, scale="ci", progress=False)
    msg = str(err.value)
    assert "demo/ok" in msg and "ZeroDivisionError" in msg and "x = n / 0" in msg
    assert err.value.cell == 3 and "in code cell 3" in msg  # the parameters cell is code cell 1
    assert "line 1" in err.value.frame
    assert first.notebook.is_file()  # the old code's result stays under its own key ...
    assert find_result(ok, scale="ci") is None  # ... but the current code has none
    assert err.value.notebook is not None and err.value.notebook.is_file()
    assert "failed" in err.value.notebook.parts
    assert not list((mini_book / "_build" / "tmp").glob("*/*"))


def test_failure_is_never_cached(mini_book: Path) -> None:
    ch = get_chapter("demo/broken")
    for _ in range(2):
        with pytest.raises(ChapterFailed, match="deliberate failure"):
            run_chapter(ch, scale="ci", progress=False)


def test_last_frame_of_a_traceback() -> None:
    tb = ["\x1b[31mZeroDivisionError\x1b[39m Traceback", "Cell \x1b[32mIn[3], line 2\x1b[39m\n  x = 1/0",
          "File /x/pkg/iclr25/m.py:12, in f(a)\n   11 ..."]
    assert last_frame(tb) == "File /x/pkg/iclr25/m.py:12, in f(a)"
    assert last_frame([]) == ""


def test_unknown_parameter_refused_before_running(mini_book: Path) -> None:
    ch = get_chapter("demo/ok")
    with pytest.raises(BadParameter, match="no parameter 'nn'.*scale, seed, n, verbose"):
        run_chapter(ch, scale="ci", overrides={"nn": "1"}, progress=False)
    assert find_result(ch, scale="ci") is None
    with pytest.raises(ValueError, match="valid scales: ci, full"):
        run_chapter(ch, scale="huge", progress=False)


def test_overrides_take_the_type_of_the_default(mini_book: Path) -> None:
    assert coerce("verbose", "false", True) is False and coerce("verbose", "True", False) is True
    assert coerce("n", "5", 3) == 5 and coerce("lr", "1e-3", 0.1) == 1e-3 and coerce("lr", 2, 0.1) == 2.0
    assert coerce("name", "abc", "x") == "abc" and coerce("name", "'a b'", "x") == "a b"
    assert coerce("xs", "[1, 2]", [0]) == [1, 2]
    for name, raw, default, hint in [("verbose", "maybe", True, "bool"), ("n", "2.5", 3, "int"),
                                     ("xs", "(1,)", [0], "list"), ("n", 2.5, 3, "int"), ("n", True, 3, "int")]:
        with pytest.raises(BadParameter, match=f"takes a {hint}"):
            coerce(name, raw, default)
    _, typed = check_overrides(get_chapter("demo/ok"), {"verbose": "false", "n": "4"})
    assert typed == {"verbose": False, "n": 4}
    res = run_chapter(get_chapter("demo/ok"), scale="ci", overrides={"verbose": "false"}, progress=False)
    assert "verbose False" in outputs_text(res.notebook)


def test_parse_overrides() -> None:
    assert parse_overrides(["n=3", "name=abc", "xs=[1, 2]"]) == {"n": "3", "name": "abc", "xs": "[1, 2]"}
    with pytest.raises(BadParameter):
        parse_overrides(["novalue"])


def test_chapter_without_parameters_cell_is_named(mini_book: Path) -> None:
    ch = get_chapter("demo/ok")
    ch.path.write_text(ch.path.read_text().replace(":tags: [parameters]\n", ""))
    with pytest.raises(MissingParameters, match="chapter demo/ok needs exactly one code cell tagged 'parameters'"):
        run_chapter(ch, scale="ci", progress=False)


def test_dependency_files_follow_imports(tmp_path: Path) -> None:
    from iclr25.book.registry import Chapter

    pkg = tmp_path / "pkg" / "iclr25"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from .a import f\n")
    (pkg / "sub" / "a.py").write_text("from ..common import g\n")
    (pkg / "common.py").write_text("import numpy\n")
    (pkg / "unrelated.py").write_text("")
    ch = Chapter(id="x/y", file="book/x/y", part="", root=tmp_path)
    got = {p.relative_to(pkg).as_posix() for p in cache.dependency_files(ch, ["from iclr25.sub import f"])}
    assert got == {"__init__.py", "sub/__init__.py", "sub/a.py", "common.py"}
    assert len(cache.dependency_files(ch, ["import importlib\nm = importlib.import_module('iclr25.x')"])) == 5
    assert len(cache.dependency_files(ch, ["__import__('iclr25.x')"])) == 5  # dynamic imports: everything
    assert cache.dependency_files(ch, ["from importlib import resources"]) == []  # imports no module by name
    (pkg / "common.py").write_text("import importlib\nimportlib.import_module('numpy')\n")  # inside the package, too
    assert len(cache.dependency_files(ch, ["from iclr25.sub import f"])) == 5


def test_cli_errors(mini_book: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["run", "demo/nope", "--scale", "ci"]) == 2
    assert "Valid chapters: demo/ok, demo/broken" in capsys.readouterr().err
    assert main(["run", "demo/ok", "--scale", "ci", "-p", "bogus=1"]) == 2
    assert "its parameters are: scale, seed, n, verbose" in capsys.readouterr().err
    assert main(["run", "demo/ok", "--scale", "ci", "-p", "verbose=perhaps"]) == 2
    assert "parameter 'verbose' takes a bool (true or false)" in capsys.readouterr().err
    assert main(["run", "demo/broken", "--scale", "ci"]) == 1
    err = capsys.readouterr().err
    assert "chapter demo/broken failed in code cell 3" in err and "ZeroDivisionError" in err
    with pytest.raises(SystemExit):
        main(["run", "demo/ok", "--scale", "medium"])
    assert main(["list"]) == 0
    assert "demo/broken" in capsys.readouterr().out


@pytest.mark.parametrize("toc, message", [
    ("", "_toc.yml is empty"),
    ("format: jb-book\nroot: book/intro\nparts: [\n", "not valid YAML"),
    ("- a\n- b\n", "must be a mapping"),
    ("format: jb-book\nroot: book/intro\nparts:\n  - caption: A\n    chapters:\n      - book/demo/ok\n",
     "is not a mapping"),
    ("format: jb-book\nroot: book/intro\nparts:\n  - caption: A\n    chapters:\n      - file: notes/x\n",
     "neither a chapter (book/<part>/<slug>) nor a page"),
    ("format: jb-book\nroot: book/intro\nparts:\n  - caption: A\n    chapters:\n      - file: book/demo/gone\n",
     "there is no book/demo/gone.md"),
])
def test_bad_toc_gives_one_clear_line(mini_book: Path, capsys: pytest.CaptureFixture, toc: str,
                                      message: str) -> None:
    (mini_book / "_toc.yml").write_text(toc)
    assert main(["list"]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err


def test_book_reports_a_chapter_without_parameters_and_goes_on(mini_book: Path) -> None:
    from iclr25.book.build import build_book

    ok = get_chapter("demo/ok")
    ok.path.write_text(ok.path.read_text().replace(":tags: [parameters]\n", ""))
    lines: list[str] = []
    with pytest.raises(RuntimeError, match="2 chapter\\(s\\) failed; the book was not rendered"):
        build_book("ci", root=mini_book, echo=lines.append)
    assert any("demo/ok FAILED" in ln and "tagged 'parameters'" in ln for ln in lines)
    assert any("demo/broken FAILED" in ln and "deliberate failure" in ln for ln in lines)
    assert json.dumps(lines)  # plain strings
