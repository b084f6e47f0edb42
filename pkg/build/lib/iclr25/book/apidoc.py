"""The book's API reference: one page per subpackage of ``iclr25``, generated at staging time.

``book/api.md`` (in ``_toc.yml``) is the reference's front page; :func:`write_api_pages` fills its
table and writes ``book/api/<subpackage>.rst`` into the staging tree, one per subpackage, each with
an autosummary table of what the subpackage exports and every module's members (Sphinx autodoc,
rendered with warnings as errors). A new subpackage gets its page without anyone writing it.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path
from typing import TypeVar

API_PAGE = "book/api"
API_INDEX_MARK = "<!-- generated: api index -->"


def subpackages(pkg_root: Path) -> list[str]:
    """Names of the subpackages of ``iclr25`` (folders with an ``__init__.py``), sorted."""
    base = pkg_root / "iclr25"
    return sorted(p.parent.name for p in base.glob("*/__init__.py") if not p.parent.name.startswith("_"))


def modules(pkg_root: Path, sub: str) -> list[str]:
    """Dotted names of the public modules of ``iclr25.<sub>`` (not ``_private``, not ``__main__``)."""
    base = pkg_root / "iclr25" / sub
    return [f"iclr25.{sub}.{p.stem}" for p in sorted(base.glob("*.py")) if not p.stem.startswith("_")]


def first_line(doc: str | None) -> str:
    """The first sentence-line of a docstring, for a summary table."""
    lines = [ln.strip() for ln in (doc or "").strip().splitlines()]
    return lines[0].rstrip(":") if lines and lines[0] else ""


def module_docstring(path: Path) -> str | None:
    """A module's docstring read without importing it."""
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))


def exported(sub: str) -> dict[int, str]:
    """What ``iclr25.<sub>`` exports (its ``__all__``): ``{id(object): name}``."""
    package = importlib.import_module(f"iclr25.{sub}")
    return {id(getattr(package, n)): n for n in getattr(package, "__all__", []) if hasattr(package, n)}


def module_members(module: str) -> list[tuple[str, object]]:
    """Public functions and classes defined in ``module`` (not imported into it), in source order."""
    mod = importlib.import_module(module)
    found = [(n, o) for n, o in vars(mod).items() if not n.startswith("_")
             and (inspect.isfunction(o) or inspect.isclass(o)) and getattr(o, "__module__", None) == module]

    def line(item: tuple[str, object]) -> int:
        try:
            return inspect.getsourcelines(item[1])[1]
        except (OSError, TypeError):
            return 0

    return sorted(found, key=line)


def module_constants(module: str) -> list[str]:
    """Public names assigned at the top level of ``module``'s source that are plain values (not
    functions, classes, modules or type variables), in source order."""
    mod = importlib.import_module(module)
    tree = ast.parse(inspect.getsource(mod))
    names: list[str] = []
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        for t in targets:
            if isinstance(t, ast.Name) and not t.id.startswith("_") and t.id not in names:
                value = getattr(mod, t.id, None)
                if not (callable(value) or inspect.ismodule(value) or isinstance(value, TypeVar)):
                    names.append(t.id)
    return names


def summary(obj: object) -> str:
    """The first sentence of ``obj``'s docstring (its first paragraph, joined), with roles turned
    into literals: a summary table cell must not hold references that only resolve inside the
    object's own context, nor a literal cut in two."""
    doc = inspect.getdoc(obj) or ""
    paragraph = " ".join(ln.strip() for ln in doc.strip().split("\n\n")[0].splitlines())
    text = re.sub(r"(?<![`\w]):[\w:]+:`(?!`)~?([^`<]*?)(?:\s*<[^>]*>)?`", r"``\1``", paragraph)
    cut = re.search(r"(?<=\.)\s", text)
    if cut and text[: cut.start()].count("``") % 2 == 0:
        text = text[: cut.start()]
    if text.count("``") % 2:
        text = text.replace("``", "")
    return text.rstrip(":").replace("|", "\\|")


def _short_repr(value: object, width: int = 70) -> str:
    text = repr(value).replace("\n", " ")
    return text if len(text) <= width else text[: width - 3] + "..."


def _rst_title(text: str, char: str) -> list[str]:
    return [text, char * len(text), ""]


def api_page(pkg_root: Path, sub: str) -> str:
    """The reStructuredText page of ``iclr25.<sub>``: the subpackage's docstring, a table of its
    functions and classes with their one-line summaries, then each module: its docstring,
    constants, functions and classes (documented where they are defined; a reference through the
    subpackage, ``iclr25.sampling.ksd``, resolves to ``iclr25.sampling.stein.ksd``)."""
    from sphinx.pycode import ModuleAnalyzer

    package = f"iclr25.{sub}"
    exports = exported(sub)
    lines = _rst_title(package, "=") + [f".. automodule:: {package}", ""]
    per_module = [(m, module_members(m)) for m in modules(pkg_root, sub)]
    rows = [(f"{m}.{name}", id(obj) in exports, summary(obj)) for m, members in per_module for name, obj in members]
    if rows:
        lines += [f"Everything marked * is importable from ``{package}`` itself.", "",
                  ".. list-table::", "   :header-rows: 1", "   :widths: 35 65", "",
                  "   * - name", "     - what it is"]
        for target, star, text in rows:
            lines += [f"   * - :py:obj:`~{target}`" + (" *" if star else ""), f"     - {text}"]
        lines.append("")
    for m, members in per_module:
        lines += _rst_title(m, "-") + [f".. automodule:: {m}", "", f".. currentmodule:: {m}", ""]
        documented = ModuleAnalyzer.for_module(m).find_attr_docs()
        mod = importlib.import_module(m)
        for name in module_constants(m):
            lines += [f".. py:data:: {name}", f"   :value: {_short_repr(getattr(mod, name))}", ""]
            comment = [ln for ln in documented.get(("", name), []) if ln.strip()]
            if comment:  # its ``#:`` comment, as written (napoleon would read "x (y): z" as a type)
                lines += [f"   {ln}" for ln in comment] + [""]
        for name, obj in members:
            if inspect.isclass(obj):
                lines += [f".. autoclass:: {name}", "   :members:", "   :undoc-members:",
                          "   :show-inheritance:", ""]
            else:
                lines += [f".. autofunction:: {name}", ""]
    return "\n".join(lines)


def api_index(pkg_root: Path) -> str:
    """The table that the API front page shows: each subpackage and what it holds."""
    rows = ["| subpackage | what it holds |", "|---|---|"]
    for sub in subpackages(pkg_root):
        doc = first_line(module_docstring(pkg_root / "iclr25" / sub / "__init__.py"))
        doc = doc.removeprefix(f"iclr25.{sub}:").strip().replace("|", "\\|")
        rows.append(f"| {{doc}}`iclr25.{sub} <api/{sub}>` | {doc} |")
    return "\n".join(rows)


def write_api_pages(src: Path, pkg_root: Path) -> list[str]:
    """Write ``book/api/<sub>.rst`` under the staging tree ``src`` and fill the front page's table.
    Returns the toc file names (``book/api/<sub>``) to list under the front page."""
    index = src / f"{API_PAGE}.md"
    if not index.is_file():
        return []
    index.write_text(index.read_text(encoding="utf-8").replace(API_INDEX_MARK, api_index(pkg_root)),
                     encoding="utf-8")
    out = src / API_PAGE
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for sub in subpackages(pkg_root):
        (out / f"{sub}.rst").write_text(api_page(pkg_root, sub), encoding="utf-8")
        files.append(f"{API_PAGE}/{sub}")
    return files


def add_to_toc(toc: dict, files: list[str]) -> bool:
    """Add ``files`` as the sections of the toc entry of :data:`API_PAGE` (in place). Returns whether
    the entry was found."""
    def walk(entries: list) -> bool:
        for entry in entries or []:
            if str(entry.get("file", "")).removesuffix(".md") == API_PAGE:
                entry["sections"] = [{"file": f} for f in files]
                return True
            if walk(entry.get("sections", [])):
                return True
        return False

    return any(walk(part.get("chapters", [])) for part in toc.get("parts", [])) or walk(toc.get("chapters", []))
