"""Shared pytest fixtures: a tiny throw-away book for the runner tests."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

# Unit tests use small tensors: one torch thread avoids oversubscribing a busy 2-core machine
# (a second OpenMP thread made some tests 20x slower there) and makes results independent of it.
torch.set_num_threads(1)

HEADER = textwrap.dedent("""\
    ---
    jupytext:
      text_representation:
        extension: .md
        format_name: myst
    kernelspec:
      display_name: Python 3
      language: python
      name: python3
    ---
    """)


def chapter_source(title: str, body: str) -> str:
    """A minimal jupytext chapter with a parameters cell and ``body`` as its last code cell."""
    cells = [
        f"# {title}",
        "```{code-cell} ipython3\n:tags: [parameters]\n\nscale = \"full\"\nseed = 0\nn = 3\nverbose = True\n```",
        "```{code-cell} ipython3\nprint(\"scale\", scale, \"n\", n, \"verbose\", verbose)\n```",
        f"```{{code-cell}} ipython3\n:tags: [nbval-check-output]\n\n{body}\n```",
    ]
    return HEADER + "\n" + "\n\n".join(cells) + "\n"


@pytest.fixture
def mini_book(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A book root with two chapters: ``demo/ok`` (succeeds) and ``demo/broken`` (raises in cell 3)."""
    (tmp_path / "pkg" / "iclr25").mkdir(parents=True)
    (tmp_path / "pkg" / "iclr25" / "dummy.py").write_text("X = 1\n")
    (tmp_path / "book" / "demo").mkdir(parents=True)
    (tmp_path / "_toc.yml").write_text(textwrap.dedent("""\
        format: jb-book
        root: book/intro
        parts:
          - caption: Demo
            chapters:
              - file: book/demo/ok
              - file: book/demo/broken
          - caption: Back
            chapters:
              - file: book/scoreboard
        """))
    (tmp_path / "book" / "scoreboard.md").write_text("# Board\n<!-- generated: scoreboard -->\n")
    (tmp_path / "_config.yml").write_text("repository:\n  url: https://github.com/o/r\n  branch: notebooks\n")
    (tmp_path / "book" / "demo" / "ok.md").write_text(chapter_source("A chapter that works", "x = n * 2\nprint(x)\nif False:  # a static dependency on the package\n    import iclr25.dummy"))
    (tmp_path / "book" / "demo" / "broken.md").write_text(
        chapter_source("A chapter that fails", "raise ZeroDivisionError('deliberate failure')"))
    monkeypatch.setenv("ICLR25_ROOT", str(tmp_path))
    return tmp_path


@pytest.fixture
def float64_default():
    """Run a test with torch's default dtype set to float64, restored afterwards. Test files whose
    kernels work in float64 use it with ``pytestmark = pytest.mark.usefixtures("float64_default")``."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


@pytest.fixture
def one_torch_thread():
    """Run a test on one torch thread, restored afterwards, even if code under test (a chapter's
    ``start(threads=...)``) changed it. Folders of tiny models use it autouse: on a busy 2-core
    machine a second thread made a forward pass 20x slower (synchronisation, not work)."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)
