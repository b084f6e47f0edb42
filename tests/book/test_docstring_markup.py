"""The package's docstrings and ``#:`` doc-comments are rendered by Sphinx (the book's API page) with
warnings as errors, where a bare ``|word|`` is an undefined substitution and stops the render. This
test finds one in seconds instead of at the book build: write "absolute value of", ``|x|`` in double
backticks, or :math:`|x|`."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "pkg" / "iclr25"
LITERAL = re.compile(r"``.*?``|:[\w:+-]+:`[^`]*`|`[^`]*`", re.S)
SUBSTITUTION = re.compile(r"(?:(?<=\s)|^|(?<=[(\[{<'\"/:-]))\|(?!\s)([^|\n]*?[^\s|])\|"
                          r"(?=$|[\s\-.,:;!?\\/'\")\]}>])", re.M)


def prose(text: str) -> str:
    """``text`` without its literal blocks (the indented block after a line ending in ``::``) and doctest lines."""
    out, block = [], None
    for line in text.splitlines():
        indent = len(line) - len(line.lstrip())
        if block is not None and (not line.strip() or indent > block):
            continue
        block = None
        if line.lstrip().startswith((">>>", "...")):
            continue
        out.append(line)
        if line.rstrip().endswith("::"):
            block = indent
    return LITERAL.sub("", "\n".join(out))


def doc_texts(path: Path):
    """(line, text) of each docstring and ``#:`` doc-comment of a Python file."""
    src = path.read_text()
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            doc = ast.get_docstring(node, clean=True)
            if doc:
                yield getattr(node, "lineno", 1), doc
    for i, line in enumerate(src.splitlines(), 1):
        m = re.search(r"#:(.*)$", line)
        if m:
            yield i, m.group(1)


def bare_substitutions(path: Path) -> list[str]:
    return [f"{path}:{line}: |{m.group(1)}|" for line, text in doc_texts(path)
            for m in SUBSTITUTION.finditer(prose(text))]


def test_the_checker_finds_a_bare_substitution_and_passes_literals(tmp_path):
    bad, good = tmp_path / "bad.py", tmp_path / "good.py"
    bad.write_text('X = 1   #: seeds at |D_l| = N\n\ndef f():\n    """The size (|D_l|) of the set."""\n')
    good.write_text('"""Use ``|D_l|`` or :math:`|x|`; a table a | b; ``|x|^2``.\n\nExample::\n\n'
                    '    measured=f"|mean| {e}"\n\n>>> abs(-1)  # |x|\n"""\nY = 2   #: literal ``|D_l|``\n')
    assert len(bare_substitutions(bad)) == 2
    assert bare_substitutions(good) == []


def test_package_docstrings_have_no_bare_substitution():
    hits = [h for p in sorted(PKG.rglob("*.py")) for h in bare_substitutions(p)]
    assert not hits, "bare |word| in docstrings (Sphinx substitutions):\n" + "\n".join(hits)
