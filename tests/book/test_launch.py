"""Launch notebooks: MyST to plain notebook Markdown, and the tree."""

from __future__ import annotations

import re
from pathlib import Path

import jupytext
import nbformat
import pytest

from iclr25.book.launch import (Context, check_tree, chapter_numbers, equation_labels, myst_leftovers,
                                python_object_source, read_bibliography, to_markdown, write_launch_notebooks)
from iclr25.book.registry import chapters
from iclr25.book.site import Site, site

ROOT = Path(__file__).resolve().parents[2]
SITE = Site(repository_url="https://github.com/o/r", notebooks_branch="notebooks",
            book_url="https://o.github.io/r/", binderhub_url="https://mybinder.org",
            colab_url="https://colab.research.google.com")


@pytest.fixture
def ctx(tmp_path: Path) -> Context:
    (tmp_path / "pkg" / "m").mkdir(parents=True)
    (tmp_path / "pkg" / "m" / "code.py").write_text(
        "import os\n\n\n@staticmethod\ndef helper(x):\n    return x + 1\n\n\nclass K:\n"
        "    \"\"\"A class.\"\"\"\n\n    def method(self, y):\n        return y * 2\n")
    (tmp_path / "book" / "part").mkdir(parents=True)
    bib = {"liu2016": {"short": "Liu and Wang, 2016", "names": "Liu and Wang", "year": "2016",
                       "full": "Q. Liu, D. Wang. SVGD. NeurIPS. 2016."}}
    return Context(root=tmp_path, chapter_dir=tmp_path / "book" / "part", site=SITE, commit="abc123",
                   bib=bib, chapter_number="3", equations={"svgd": "3.1", "other": "3.2"},
                   substitutions={"repository_url": SITE.repository_url})


def test_literalinclude_pyobject_becomes_the_code_with_a_link(ctx: Context) -> None:
    md = to_markdown("Look:\n\n```{literalinclude} ../../pkg/m/code.py\n:pyobject: K.method\n```\n", ctx)
    assert "```python\n    def method(self, y):\n        return y * 2\n```" in md
    assert "[`pkg/m/code.py`](https://github.com/o/r/blob/abc123/pkg/m/code.py#L12-L13)" in md
    assert not myst_leftovers(md)
    code, first, last = python_object_source(ctx.root / "pkg" / "m" / "code.py", "helper")
    assert code.startswith("def helper") and (first, last) == (5, 6)
    with pytest.raises(ValueError, match="no 'nothing'"):
        python_object_source(ctx.root / "pkg" / "m" / "code.py", "nothing")


def test_roles_become_text_and_links(ctx: Context) -> None:
    md = to_markdown("SVGD {cite}`liu2016` moves points; {cite:t}`liu2016` showed it; see {eq}`svgd`, "
                     "{eq}`the bound <other>`, {math}`x^2`, {doc}`the board <../scoreboard>`, "
                     "{ref}`a section <sec>` and {abbr}`KSD (kernel Stein discrepancy)`.", ctx)
    assert "[Liu and Wang, 2016](https://o.github.io/r/book/bibliography.html)" in md
    assert "Liu and Wang [2016](https://o.github.io/r/book/bibliography.html) showed" in md
    assert "see (3.1), the bound, $x^2$" in md
    assert "[the board](https://o.github.io/r/book/scoreboard.html)" in md
    assert "a section and KSD." in md
    assert ctx.cited == ["liu2016"] and not myst_leftovers(md)


def test_code_is_left_alone(ctx: Context) -> None:
    text = "Write `{cite}` like ``{cite}`key` ``.\n\n```python\nx = '{cite}`no`'  # {eq}`no`\n```"
    assert to_markdown(text, ctx) == text
    assert not myst_leftovers(text)


def test_equations_directives_targets_comments(ctx: Context) -> None:
    text = ("(sec)=\n## A section\n% a MyST comment\n\n$$\nx = 1\n$$ (svgd)\n\n$$ y = 2 $$ (other)\n\n"
            "```{math}\n:label: svgd\nz = 3\n```\n\n"
            "::::{note} Careful\nOuter {cite}`liu2016`.\n:::{warning}\nInner.\n:::\n::::\n\n"
            "```{admonition} Why\n:class: tip\nBecause.\n```\n\n"
            "```{bibliography}\n```\n\nSite: {{ repository_url }}")
    md = to_markdown(text, ctx)
    assert "(sec)=" not in md and "% a MyST" not in md and "## A section" in md
    assert "x = 1\n\\tag{3.1} $$" in md and "$$ y = 2 \\tag{3.2} $$" in md
    assert "$$\nz = 3 \\tag{3.1}\n$$" in md
    assert "> **Careful**" in md and "> Outer [Liu and Wang, 2016]" in md and "> > **Warning**" in md
    assert "> **Why**\n>\n> Because." in md
    assert "bibliography" not in md.replace("bibliography.html", "")
    assert "Site: https://github.com/o/r" in md
    assert not myst_leftovers(md), myst_leftovers(md)
    assert equation_labels(text) == ["svgd", "other", "svgd"]


def test_leftovers_are_found() -> None:
    found = myst_leftovers("{cite}`x`\n```{note}\nhi\n```\n$$ a $$ (lab)\n(tgt)=\n{{ name }}")
    assert {f.split(":")[0] for f in found} == {"role", "directive", "equation label", "target", "substitution"}
    assert not myst_leftovers("$\\frac{1}{{N}}$ and `{cite}`")


def test_bibliography_and_chapter_numbers() -> None:
    bib = read_bibliography(ROOT / "book" / "references.bib")
    assert bib["banerjee2025svgd"]["short"] == "Banerjee et al., 2025"
    assert "Improved Finite-Particle Convergence Rates" in bib["banerjee2025svgd"]["full"]
    numbers = chapter_numbers(ROOT)
    assert numbers[chapters(ROOT)[0].id] == "1"
    assert len(set(numbers.values())) == len(numbers)


def test_every_chapter_launch_notebook_is_plain_and_complete(tmp_path: Path) -> None:
    """The real chapters: no MyST survives, no outputs, the first cell pins the commit, and every
    code cell of the source is there unchanged (the chapter's own install cell replaced)."""
    out = write_launch_notebooks(ROOT, tmp_path / "nb", commit="0" * 40)
    assert check_tree(out) == []
    s = site(ROOT)
    for c in chapters(ROOT):
        nb = nbformat.read(out / f"{c.file}.ipynb", as_version=4)
        assert f"git+{s.repository_url}@{'0' * 40}#subdirectory=pkg" in nb.cells[0].source
        src = [cell.source for cell in jupytext.read(c.path).cells
               if cell.cell_type == "code" and "google.colab" not in cell.source]
        assert [cell.source for cell in nb.cells[1:] if cell.cell_type == "code"] == src
        tags = re.findall(r"\\tag\{([\d.]+)\}", "\n".join(x.source for x in nb.cells if x.cell_type == "markdown"))
        assert all(t.startswith(f"{chapter_numbers(ROOT)[c.id]}.") for t in tags)
    assert (out / "pkg" / "iclr25" / "__init__.py").is_file() and (out / "pkg" / "pyproject.toml").is_file()
    assert (out / "binder" / "environment.yml").is_file() and (out / "binder" / "postBuild").stat().st_mode & 0o100
    assert not list((out / "pkg").rglob("__pycache__"))
    assert "python -m iclr25 publish" in (out / "README.md").read_text()
