"""A chapter as a notebook, its ``parameters`` cell, and the ``-p name=value`` overrides.

Every chapter has exactly one code cell tagged ``parameters`` holding plain literals (at least
``scale`` and ``seed``). Papermill injects overrides after it. An override must name a parameter
of that cell and is coerced to the type of its default: ``-p verbose=false`` is ``False`` for a
boolean default, ``-p n=3`` an ``int`` for an integer default; a value that does not parse as that
type is refused with a message naming the type.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from iclr25.book.registry import Chapter
from iclr25.common import check_scale

if TYPE_CHECKING:
    import nbformat


class BadParameter(ValueError):
    """A ``-p name=value`` that the chapter's parameters cell does not admit."""


class MissingParameters(ValueError):
    """A chapter without exactly one valid ``parameters`` cell."""


def read_chapter(chapter: Chapter) -> "nbformat.NotebookNode":
    """The chapter as an nbformat notebook (through jupytext)."""
    import jupytext

    if not chapter.path.is_file():
        raise FileNotFoundError(f"chapter {chapter.id} is listed in _toc.yml but {chapter.path} does not exist")
    nb = jupytext.read(chapter.path)
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    return nb


def parameters_cell(nb: "nbformat.NotebookNode", chapter_id: str = "this chapter") -> tuple[int, dict[str, Any]]:
    """Index and literal values of the single code cell tagged ``parameters``.

    Raises :class:`MissingParameters`, naming ``chapter_id``, when there is no such cell, more than
    one, a non-literal value, or no ``scale``/``seed``.
    """
    found = [i for i, c in enumerate(nb.cells)
             if c.cell_type == "code" and "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(found) != 1:
        raise MissingParameters(f"{chapter_id} needs exactly one code cell tagged 'parameters' "
                                f"(with scale = \"full\" and seed = 0), found {len(found)}")
    values: dict[str, Any] = {}
    try:
        body = ast.parse(nb.cells[found[0]].source).body
    except SyntaxError as err:
        raise MissingParameters(f"{chapter_id}: the parameters cell is not valid Python: {err}") from err
    for node in body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                values[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError as err:
                raise MissingParameters(f"{chapter_id}: the parameters cell must hold literals only: {ast.unparse(node)}") from err
    missing = [name for name in ("scale", "seed") if name not in values]
    if missing:
        raise MissingParameters(f"{chapter_id}: the parameters cell must define {missing[0]!r}")
    return found[0], values


def chapter_parameters(chapter: Chapter) -> dict[str, Any]:
    """The defaults of ``chapter``'s parameters cell."""
    return parameters_cell(read_chapter(chapter), f"chapter {chapter.id}")[1]


def parse_overrides(pairs: list[str]) -> dict[str, str]:
    """``["n=3", "name=abc"]`` -> ``{"n": "3", "name": "abc"}`` (raw text; typed by :func:`coerce`)."""
    out: dict[str, str] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep or not name.strip():
            raise BadParameter(f"parameter {pair!r} is not of the form name=value")
        out[name.strip()] = raw.strip()
    return out


_BOOLS = {"true": True, "1": True, "yes": True, "on": True, "false": False, "0": False, "no": False, "off": False}


def _parse(text: str, default: Any) -> Any:
    """``text`` read as a value of ``default``'s type; ``ValueError``/``KeyError`` if it is not one."""
    kind = type(default)
    if kind is bool:
        return _BOOLS[text.lower()]
    if kind is str:
        return text[1:-1] if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"" else text
    if kind in (int, float):
        return kind(text)
    value = ast.literal_eval(text)
    if default is None or isinstance(value, kind):
        return value
    raise ValueError(text)


def coerce(name: str, raw: Any, default: Any) -> Any:
    """``raw`` as a value of ``default``'s type (raw text is parsed; a typed value is checked)."""
    kind = type(default)
    try:
        if isinstance(raw, str):
            return _parse(raw.strip(), default)
        if type(raw) is kind or (kind is float and type(raw) is int):
            return kind(raw)
    except (ValueError, SyntaxError, KeyError):
        pass
    hint = " (true or false)" if kind is bool else ""
    raise BadParameter(f"parameter {name!r} takes a {kind.__name__}{hint} (default {default!r}); cannot read {raw!r}")


def check_overrides(chapter: Chapter, overrides: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Refuse names that are not in the parameters cell and values that do not parse as their
    default's type. Returns (defaults, typed overrides)."""
    defaults = chapter_parameters(chapter)
    unknown = sorted(set(overrides) - set(defaults))
    if unknown:
        raise BadParameter(f"chapter {chapter.id} has no parameter {', '.join(map(repr, unknown))}; "
                           f"its parameters are: {', '.join(defaults)}")
    typed = {k: coerce(k, v, defaults[k]) for k, v in overrides.items()}
    if "scale" in typed:
        check_scale(typed["scale"])
    return defaults, typed
