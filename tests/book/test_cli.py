"""``python -m iclr25`` refuses bad input (exit 2, one line naming the problem) before anything runs.

No chapter is executed here: the functions that would run one are replaced by ones that fail the
test if called, and the book's own tree is only read.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from iclr25.book import cli
from iclr25.book.cli import main


def must_not_run(*args: object, **kwargs: object) -> None:
    raise AssertionError("called although the input was refused")


@pytest.fixture
def no_execution(monkeypatch: pytest.MonkeyPatch) -> None:
    """Replace everything that would execute a chapter or write notebooks."""
    from iclr25.book import golden, launch, runner

    for module, name in [(golden, "make_golden"), (golden, "nbval_command"), (golden, "check_fresh"),
                         (runner, "run_chapter"), (launch, "write_launch_notebooks")]:
        monkeypatch.setattr(module, name, must_not_run)


def refused(capsys: pytest.CaptureFixture, argv: list[str], *needles: str) -> None:
    """``argv`` exits 2 with one error line holding every needle, and prints nothing on stdout."""
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("error: "), (out, err)
    for needle in needles:
        assert needle in err, err


@pytest.mark.parametrize("argv, needs", [
    (["golden", "--compare"], "--compare needs --check"),
    (["golden", "--kernels", "native"], "--kernels needs --verify"),
    (["golden", "--kernels", "other", "--check"], "--kernels needs --verify"),
    (["golden", "--verify", "--check"], "give one of them"),
    (["golden", "--check", "--force"], "--force only applies when regenerating"),
    (["golden", "--verify", "--force"], "--force only applies when regenerating"),
    (["golden", "--timeout", "300"], "--timeout need --verify"),
    (["golden", "--verify", "--timeout", "0"], "--timeout must be a positive number"),
])
def test_golden_refuses_flags_that_would_regenerate(mini_book: Path, no_execution: None,
                                                    capsys: pytest.CaptureFixture, argv: list[str],
                                                    needs: str) -> None:
    refused(capsys, argv, needs)


def test_golden_regenerates_only_when_asked_plainly(mini_book: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture) -> None:
    from iclr25.book import golden

    made: list[tuple[str, bool]] = []

    def fake_make(chapter, force=False):  # noqa: ANN001, ANN202
        made.append((chapter.id, force))
        return mini_book / "tests" / "golden" / f"{chapter.id}.ipynb"

    monkeypatch.setattr(golden, "make_golden", fake_make)
    assert main(["golden", "ok", "--force"]) == 0
    assert made == [("demo/ok", True)]
    assert main(["golden"]) == 0
    assert made[1:] == [("demo/ok", False), ("demo/broken", False)]
    assert "demo/broken: tests/golden/demo/broken.ipynb" in capsys.readouterr().out
    refused(capsys, ["golden", "nosuch"], "unknown chapter 'nosuch'")


def test_golden_verify_defaults_to_the_other_kernels(mini_book: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from iclr25.book import golden

    seen: list[str] = []

    def fake_verify(chs, *, kernels, **kw):  # noqa: ANN001, ANN202, ARG001
        seen.append(kernels)
        return []

    monkeypatch.setattr(golden, "verify_goldens", fake_verify)
    assert main(["golden", "--verify"]) == 0 and main(["golden", "--verify", "--kernels", "native"]) == 0
    assert seen == ["other", "native"]


def test_notebooks_write_and_check_the_tree(mini_book: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture) -> None:
    from iclr25.book import launch

    tree = tmp_path / "tree"
    (tree / "book" / "demo").mkdir(parents=True)
    (tree / "book" / "demo" / "ok.ipynb").write_text("{}")
    problems: list[str] = []
    monkeypatch.setattr(launch, "write_launch_notebooks", lambda root, out=None: tree)
    monkeypatch.setattr(launch, "check_tree", lambda out: problems)
    assert main(["notebooks"]) == 0
    assert "1 written" in capsys.readouterr().out
    problems.append("book/demo/ok.ipynb cell 1: role: {cite}`x`")
    assert main(["notebooks"]) == 1
    assert "role: {cite}" in capsys.readouterr().out


@pytest.mark.parametrize("argv, needles", [
    (["run", "demo/ok", "-p", "seed=1"], ["set seed with --seed"]),
    (["run", "demo/ok", "-p", "scale=ci"], ["set scale with --scale"]),
    (["run", "demo/ok", "-p", "nope=1"], ["has no parameter 'nope'", "scale, seed, n, verbose"]),
    (["run", "demo/ok", "-p", "n=abc"], ["parameter 'n' takes a int", "cannot read 'abc'"]),
    (["run", "demo/ok", "-p", "n"], ["not of the form name=value"]),
    (["run", "demo/okk"], ["unknown chapter 'demo/okk'", "Did you mean 'demo/ok'"]),
])
def test_run_validates_before_printing(mini_book: Path, no_execution: None, capsys: pytest.CaptureFixture,
                                       argv: list[str], needles: list[str]) -> None:
    refused(capsys, argv, *needles)


def test_exit_codes_are_documented() -> None:
    doc = cli.__doc__ or ""
    assert "0 ok; 1 a chapter or a check failed; 2 bad input" in doc


BLOCKER = textwrap.dedent("""\
    import sys
    from importlib.abc import MetaPathFinder

    BLOCKED = {"nbformat", "papermill", "jupytext", "sphinx_external_toc", "jupyter_book", "myst_nb", "nbclient"}

    class NoBookTools(MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, NoBookTools())
    from iclr25.book.cli import main

    try:
        main(["--help"])
    except SystemExit as exit:
        assert exit.code == 0, exit.code
    assert main(["list"]) == 0
    assert main(["run", "demo/ok"]) == 2
    loaded = sorted(m for m in sys.modules if m.partition(".")[0] in BLOCKED)
    assert not loaded, loaded
    print("BLOCKER DONE")
""")


def test_help_and_list_work_without_the_book_tools(mini_book: Path) -> None:
    pkg = Path(__file__).resolve().parents[2] / "pkg"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(pkg), os.environ.get("PYTHONPATH", "")])}
    res = subprocess.run([sys.executable, "-c", BLOCKER], env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "usage: python -m iclr25" in res.stdout and "BLOCKER DONE" in res.stdout
    assert "demo/ok" in res.stdout and "A chapter that works" in res.stdout  # list, titles without jupytext
    assert "error: this command needs the book tools: pip install 'iclr25[book]'" in res.stderr
    assert res.stderr.count("\n") == 1, res.stderr


def test_golden_compare_fails_when_it_compared_nothing(mini_book: Path, capsys: pytest.CaptureFixture) -> None:
    import shutil

    from iclr25.book.golden import make_golden
    from iclr25.book.registry import get_chapter

    make_golden(get_chapter("demo/ok"))
    assert main(["golden", "demo/ok", "--check", "--compare"]) == 0  # the run make_golden used is compared
    shutil.rmtree(mini_book / "_build" / "cache")  # fresh goldens, but no ci execution to compare
    capsys.readouterr()
    assert main(["golden", "demo/ok", "--check", "--compare"]) == 1
    assert "no ci execution was compared" in capsys.readouterr().out
