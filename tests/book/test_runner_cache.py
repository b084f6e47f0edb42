"""The runner's cache keys on what changes results (code, imported package files and data), shows
cached outputs under the current prose, runs the kernel on the hashed package, cleans up after
interrupted runs and stops a chapter at its deadline."""

import time
from pathlib import Path

import nbformat
import pytest

from iclr25.book import cache
from iclr25.book.params import read_chapter
from iclr25.book.registry import get_chapter
from iclr25.book.runner import (BUDGET_S, PROVENANCE_TAG, TIMEOUT_FACTOR, ChapterFailed, Deadline, WrongPackage,
                                find_result, run_chapter)


def _cells(path: Path) -> list[nbformat.NotebookNode]:
    return nbformat.read(path, as_version=4).cells


def _outputs(path: Path) -> list[list[dict]]:
    return [c.outputs for c in _cells(path) if c.cell_type == "code"]


def _edit(ch, old: str, new: str) -> None:
    text = ch.path.read_text()
    assert old in text
    ch.path.write_text(text.replace(old, new))


def test_prose_edit_rerenders_without_reexecuting(mini_book: Path) -> None:
    ch = get_chapter("demo/ok")
    first = run_chapter(ch, scale="ci", progress=False)
    record = first.notebook.read_bytes()
    # unchanged: the record itself is the current view
    assert run_chapter(ch, scale="ci", progress=False).notebook == first.notebook
    _edit(ch, "# A chapter that works", "# A chapter that works\n\nNew prose, *fixed*.")
    _edit(ch, "```{code-cell} ipython3\n:tags: [nbval-check-output]\n\nx = n * 2",
          "More prose.\n\n```{code-cell} ipython3\n:tags: [nbval-check-output, hide-input]\n\nx = n * 2")
    again = run_chapter(ch, scale="ci", progress=False)
    assert again.cached and again.notebook != first.notebook and again.wall_s == round(first.wall_s, 1)
    assert first.notebook.read_bytes() == record  # the record is never rewritten
    cells = _cells(again.notebook)
    md = "\n".join(c.source for c in cells if c.cell_type == "markdown")
    assert "New prose, *fixed*." in md and "More prose." in md
    assert _outputs(again.notebook) == _outputs(first.notebook)  # the stored outputs, injected cell too
    kinds = [("injected" if "injected-parameters" in c.metadata.get("tags", []) else c.cell_type) for c in cells]
    assert kinds == ["markdown", "code", "injected", "code", "markdown", "code"]
    assert "hide-input" in cells[-1].metadata["tags"]  # the current cell's tags
    assert cache.read_meta(again.notebook)["params"]["scale"] == "ci"
    assert find_result(ch, scale="ci") == again.notebook  # the current view, still for the current code
    # a code edit re-executes
    _edit(ch, "x = n * 2", "x = n * 5")
    res = run_chapter(ch, scale="ci", progress=False)
    assert not res.cached and "15" in str(_outputs(res.notebook))


def test_merge_keeps_the_injected_cell_after_its_code_cell() -> None:
    v4 = nbformat.v4
    params = {"tags": ["parameters"]}
    stored = v4.new_notebook(cells=[v4.new_markdown_cell("old"), v4.new_code_cell("a = 1", metadata=params),
                                    v4.new_code_cell("a = 2", metadata={"tags": ["injected-parameters"]}),
                                    v4.new_code_cell("print(a)", outputs=[v4.new_output("stream", text="2\n")])])
    current = v4.new_notebook(cells=[v4.new_code_cell("a = 1", metadata=params),
                                     v4.new_markdown_cell("new"), v4.new_code_cell("print(a)")])
    merged = cache.merge_outputs(stored, current)
    assert [c.source for c in merged.cells] == ["a = 1", "a = 2", "new", "print(a)"]
    assert merged.cells[-1].outputs[0]["text"] == "2\n" and not current.cells[-1].outputs
    current.cells[-1].source = "print(a + 1)"
    with pytest.raises(ValueError, match="code cells differ"):
        cache.merge_outputs(stored, current)


def _subpackage(root: Path, name: str) -> Path:
    sub = root / "pkg" / "iclr25" / name
    (sub / "weights").mkdir(parents=True)
    (sub / "__init__.py").write_text("")
    (sub / "weights" / "w.json").write_text("[1]")
    return sub


def test_package_data_enters_the_key(mini_book: Path) -> None:
    ch = get_chapter("demo/ok")
    used, unused = _subpackage(mini_book, "used"), _subpackage(mini_book, "unused")
    _edit(ch, "import iclr25.dummy", "import iclr25.dummy\n    from iclr25.used import thing")
    code = cache.code_cells(read_chapter(ch))
    rel = {p.relative_to(mini_book / "pkg" / "iclr25").as_posix() for p in cache.dependency_files(ch, code)}
    assert rel == {"dummy.py", "used/__init__.py", "used/weights/w.json"}
    assert run_chapter(ch, scale="ci", progress=False).cached is False
    (unused / "weights" / "w.json").write_text("[2]")  # a package the chapter does not import
    (used / "__pycache__").mkdir()
    (used / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    assert run_chapter(ch, scale="ci", progress=False).cached
    (used / "weights" / "w.json").write_text("[2]")  # data of an imported package
    assert not run_chapter(ch, scale="ci", progress=False).cached
    (used / "weights" / "new.pt").write_bytes(b"\1")  # a new data file
    assert not run_chapter(ch, scale="ci", progress=False).cached


def test_uncertain_imports_depend_on_all_package_data(mini_book: Path) -> None:
    _subpackage(mini_book, "used")
    files = cache.package_files(mini_book)
    assert mini_book / "pkg" / "iclr25" / "used" / "weights" / "w.json" in files


def test_kernel_imports_the_hashed_package(mini_book: Path) -> None:
    ch = get_chapter("demo/ok")
    res = run_chapter(ch, scale="ci", progress=False)
    found = Path(cache.read_meta(res.notebook)["iclr25_file"])
    assert found.resolve().is_relative_to((mini_book / "pkg").resolve())
    assert not [c for c in _cells(res.notebook) if PROVENANCE_TAG in c.metadata.get("tags", [])]
    _edit(ch, "x = n * 2", "import sys, types\nm = types.ModuleType('iclr25')\n"
                           "m.__file__ = '/elsewhere/iclr25/__init__.py'\nsys.modules['iclr25'] = m\nx = n * 2")
    with pytest.raises(WrongPackage) as err:
        run_chapter(ch, scale="ci", progress=False)
    assert isinstance(err.value, ChapterFailed)
    expected = f"the kernel imported iclr25 from /elsewhere/iclr25/__init__.py, not from {mini_book / 'pkg'}"
    assert expected in str(err.value)
    assert find_result(ch, scale="ci") is None  # nothing stored


def test_interrupted_run_leaves_nothing_behind(mini_book: Path) -> None:
    ok = get_chapter("demo/ok")
    tmp = mini_book / "_build" / "tmp"
    mine, other = tmp / "run-demo__ok.k2j4h1", tmp / "run-demo__broken.aa11bb"
    for d in (mine, other):
        d.mkdir(parents=True)
        (d / "executed.ipynb").write_text("{}")
    partial = cache.chapter_dir(ok) / ".0123abcd.ipynb.abc.tmp"
    partial.parent.mkdir(parents=True)
    partial.write_text("{ half a notebook")
    merged_partial = cache.chapter_dir(ok) / "merged" / ".x.ipynb.y.tmp"
    merged_partial.parent.mkdir()
    merged_partial.write_text("")
    res = run_chapter(ok, scale="ci", progress=False)
    assert not mine.exists() and other.is_dir()  # another chapter's run is not ours to remove
    assert not partial.exists() and not merged_partial.exists()
    assert not list(tmp.glob("run-demo__ok.*"))  # and this run's work folder is gone too
    assert cache.latest(ok, scale="ci")[0] == res.notebook


def test_default_deadline_is_three_times_the_budget() -> None:
    assert BUDGET_S == {"ci": 45.0, "full": 300.0} and TIMEOUT_FACTOR == 3
    d = Deadline.for_run("ci", None)
    assert d.seconds == 135 and d.message() == "timed out after 135 s (3x its ci budget of 45 s)"
    assert Deadline.for_run("full", None).seconds == 900
    assert Deadline.for_run("ci", 7).message() == "timed out after 7 s"
    d.start()
    assert 133 <= d.cell_timeout() <= 135
    d.end = time.monotonic() - 10
    assert d.cell_timeout() == 1


def test_deadline_is_per_chapter_and_names_the_cell(mini_book: Path) -> None:
    ch = get_chapter("demo/ok")
    _edit(ch, "x = n * 2",
          "import time\ntime.sleep(5)  # first\n```\n\n```{code-cell} ipython3\ntime.sleep(5)  # second")
    t0 = time.perf_counter()
    with pytest.raises(ChapterFailed) as err:
        run_chapter(ch, scale="ci", progress=False, timeout_s=8)  # each cell alone would fit in 8 s
    assert time.perf_counter() - t0 < 30
    msg = str(err.value)
    assert "chapter demo/ok failed in code cell" in msg and "timed out after 8 s" in msg
    assert (err.value.cell, err.value.first_line) in [(3, "import time"), (4, "time.sleep(5)  # second")]
    assert err.value.notebook is not None and err.value.notebook.is_file()
    assert find_result(ch, scale="ci") is None
    assert not list((mini_book / "_build" / "tmp").glob("*"))


def test_locks_are_portable() -> None:
    import tomllib

    import iclr25.book.timings as timings

    for module in (cache, timings):
        assert "fcntl" not in cache.all_imports(Path(module.__file__).read_text())  # POSIX-only
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pkg" / "pyproject.toml").read_text())
    assert any(r.startswith("filelock") for r in pyproject["project"]["optional-dependencies"]["book"])


def test_record_time_under_the_lock(tmp_path: Path) -> None:
    import threading

    from iclr25.book.timings import load_timings, record_time

    threads = [threading.Thread(target=record_time, args=(tmp_path, f"p/c{i}", "ci", float(i)))
               for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(load_timings(tmp_path)) == [f"p/c{i}" for i in range(4)]  # no update was lost


def test_a_cpu_kernel_selection_gets_its_own_result(mini_book: Path, monkeypatch) -> None:
    """ATEN_CPU_CAPABILITY and the like change the last bits of every float: a run under another
    kernel selection is not served from a native run's record."""
    from iclr25.book.environment import KERNEL_VARS

    for var in KERNEL_VARS:  # the test command's unit stage itself runs under another selection
        monkeypatch.delenv(var, raising=False)
    ch = get_chapter("demo/ok")
    native = run_chapter(ch, scale="ci", progress=False)
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    other = run_chapter(ch, scale="ci", progress=False)
    assert not other.cached and other.notebook != native.notebook
    monkeypatch.delenv("ATEN_CPU_CAPABILITY")
    assert run_chapter(ch, scale="ci", progress=False).cached
