"""The test command's plan and the checks in it that must be able to fail."""

from __future__ import annotations

import time
from pathlib import Path

import nbformat
import pytest

from iclr25.book import golden
from iclr25.book.environment import other_kernels_env
from iclr25.book.registry import get_chapter
from iclr25.book.testing import STAGE_KEYS, stage_plan

ROOT = Path(__file__).resolve().parents[2]


def test_stages_each_chapter_once_per_purpose() -> None:
    plan = stage_plan(ROOT, "py")
    assert tuple(key for key, *_ in plan) == STAGE_KEYS
    flat = {key: [" ".join(c) for c in cmds] for key, _, cmds, _ in plan}
    # the unit tests run under the other CPU kernel selection, the newest releases on native kernels
    unit_env = plan[0][3]
    assert all(unit_env[k] == v for k, v in other_kernels_env().items())
    assert plan[1][3] is None
    # chapters execute at ci twice in all: papermill (stage 3, budget enforced) and nbval (stage 6)
    assert any("book --scale ci --jobs 2 --budget-factor 1.5" in c for c in flat["chapters"])
    assert not any("notebooks" in c for cmds in flat.values() for c in cmds)
    nbval = flat["nbval"]
    assert any("pip wheel" in c for c in nbval) and any("venv --clear" in c and "venv-reader" in c for c in nbval)
    assert "golden --verify --kernels other --python" in nbval[-1] and "venv-reader/bin/python" in nbval[-1]


def test_book_fails_a_chapter_over_its_budget(mini_book: Path) -> None:
    from iclr25.book.build import build_book

    with pytest.raises(RuntimeError, match=r"demo/ok: .* over 1e-06x its budget of 45 s"):
        build_book("ci", root=mini_book, budget_factor=1e-6, echo=lambda s: None)


def _sleepy_golden(mini_book: Path) -> None:
    ch = get_chapter("demo/ok")
    golden.make_golden(ch)
    path = golden.golden_path(ch)
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("import time\ntime.sleep(60)"))
    nbformat.write(nb, path)


def test_nbval_names_the_chapter_and_cell_when_it_times_out(mini_book: Path) -> None:
    _sleepy_golden(mini_book)
    ch = get_chapter("demo/ok")
    t0 = time.perf_counter()
    error, wall, out = golden.verify_one(ch, golden.verify_env("native"), None, timeout_s=12)
    assert time.perf_counter() - t0 < 30
    assert error and "demo/ok: nbval timed out after 12 s" in error and "in notebook cell" in error


def test_nbval_passes_an_unchanged_golden_and_fails_a_changed_output(mini_book: Path) -> None:
    ch = get_chapter("demo/ok")
    path = golden.make_golden(ch)
    env = golden.verify_env("other")
    assert golden.verify_one(ch, env, None)[0] is None
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if golden.CHECK_TAG in c.metadata.get("tags", []))
    cell.outputs[0]["text"] = "7\n"
    nbformat.write(nb, path)
    error = golden.verify_one(ch, env, None)[0]
    assert error and "nbval failed" in error


def test_the_wheel_is_built_from_a_clean_copy_of_the_package(tmp_path: Path) -> None:
    from iclr25.book.reader import build_wheel_commands, copy_package_source

    (tmp_path / "pkg" / "iclr25").mkdir(parents=True)
    (tmp_path / "pkg" / "iclr25" / "a.py").write_text("")
    (tmp_path / "pkg" / "build" / "lib" / "iclr25").mkdir(parents=True)
    (tmp_path / "pkg" / "build" / "lib" / "iclr25" / "stale.py").write_text("")  # a removed module
    dest = copy_package_source(tmp_path, tmp_path / "copy")
    assert (dest / "iclr25" / "a.py").is_file() and not (dest / "build").exists()
    cmds = build_wheel_commands(ROOT, tmp_path / "dist", "py")
    assert cmds[-1][-1] == str(tmp_path / "dist" / "src")  # pip builds the copy, never pkg/ in place
