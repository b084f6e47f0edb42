"""A small Sphinx extension that makes the rendered book whole without a network.

- **MathJax from the book itself.** Sphinx loads MathJax 3 from a CDN by default, so a reader
  offline saw raw ``\\(\\mathrm{KL}_0/T\\)``. This extension points ``mathjax_path`` at
  ``_static/mathjax/tex-mml-chtml.js`` and, when the build finishes, copies MathJax 3 (the ``es5``
  build, with its fonts and on-demand TeX extensions) there from the installed PyPI package
  ``django-static-mathjax``, which ships it as plain files (it needs no Django to be read).
- **The API reference** is ``sphinx.ext.autosummary`` with ``:recursive:`` (``book/api.md``), one
  page per module from :data:`MODULE_TEMPLATE`. Kept by hand, because
  Sphinx's Python domain does not follow imports: the missing-reference resolver, since docstrings
  (rendered with warnings as errors, references checked) name objects by their public path
  (``iclr25.common.cached``) or a short name from another module, while autodoc documents them
  where they are defined. Names from torch, numpy, scipy ... cannot resolve offline (no
  intersphinx) and are not reported. A constant's ``#:`` comment is kept as written (napoleon would
  read "x (y): z" as a type).
- **No console errors.** The theme's colour mode starts from "auto" when none is stored, and a
  script registered twice is included once.
- **Only the real book.** The book is rendered from executed notebooks in a staging tree that
  ``python -m iclr25 book`` lays out (:func:`iclr25.book.build.stage` marks it with
  :data:`STAGED_MARK`); ``jb build .`` on the repository would render the chapters' sources without
  outputs, API pages or the repository's address, so it stops with :data:`NOT_STAGED`.

Jupyter Book loads it through ``sphinx: extra_extensions`` in ``_config.yml``.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
from pathlib import Path
from typing import Any

#: The MathJax component the book loads, relative to ``_static``.
MATHJAX_ENTRY = "mathjax/tex-mml-chtml.js"
#: What of MathJax's ``es5`` folder the book serves: the entry point and what it loads on demand
#: (TeX extensions through autoload, the CHTML fonts, the menu's renderers and accessibility parts).
MATHJAX_PARTS = ("tex-mml-chtml.js", "input", "output", "ui", "a11y", "sre", "adaptors")

#: Python references that are not reported when they do not resolve: text that is no Python name
#: (free-text types in docstrings' parameter and attribute sections), names in other libraries (no
#: intersphinx offline) and builtins. A name that looks like one of the package's own and resolves
#: to nothing is still an error.
EXTERNAL_NAMES = [
    (r"py:.*", r".*[^\w.].*"),
    (r"py:.*", r"(torch|numpy|np|scipy|sklearn|diffusers|skimage|networkx|nx|matplotlib|plt|mpl|ot|torch_geometric|"
               r"pyg|ipywidgets|widgets|nbformat|papermill|IPython|pandas|tqdm|yaml|PIL|collections|"
               r"typing|typing_extensions|pathlib|dataclasses|enum|abc|random|types|os|re|json|"
               r"argparse|subprocess|concurrent|contextlib|functools|itertools|datetime|Path|Tensor|"
               r"LongTensor|FloatTensor|BoolTensor|Module|Generator|Callable|Iterable|Iterator|"
               r"Sequence|Mapping|Any|Literal|TypeVar|Optional|Union|NamedTuple|ndarray|Data|Batch)"
               r"(\..*)?"),
    (r"py:.*", r"(int|float|str|bool|bytes|dict|list|tuple|set|frozenset|object|type|None|True|False|"
               r"complex|slice|callable|Ellipsis|NotImplemented|optional|default|array|tensor|"
               r"function|iterable|sequence|mapping|matrix|vector|scalar|number|shape|dtype|device|"
               r"[A-Za-z])"),
]

#: The file :func:`iclr25.book.build.stage` writes at the root of its staging tree.
STAGED_MARK = ".iclr25-staged"
#: What a build of anything but a staging tree (``jb build .``) stops with.
NOT_STAGED = ("this book is built by `make book` (python -m iclr25 book): it renders executed notebooks; "
              "`jb build .` alone cannot")

#: autosummary's module page: the module's members documented (the default template only lists
#: them), or, for a package, its submodules walked. Written under the build's doctree folder (a file
#: in the package would enter the chapters' cache keys as package data of ``iclr25.book``).
MODULE_TEMPLATE = """{{ fullname | escape | underline }}

.. automodule:: {{ fullname }}
{% if modules %}
.. autosummary::
   :toctree:
   :recursive:
{% for item in modules %}
   {{ item }}
{%- endfor %}
{% else %}   :members:
   :undoc-members:
   :show-inheritance:
{% endif %}
"""

#: pydata-sphinx-theme logs a console error when no colour mode is stored yet (an empty default
#: mode, which sphinx-book-theme gives no option to set): start from "auto".
THEME_MODE_JS = ('if (!document.documentElement.dataset.mode) {'
                 'document.documentElement.dataset.mode = localStorage.getItem("mode") || "auto";}')


def resolve_python_name(target: str, module: str | None = None, cls: str | None = None) -> Any:
    """The object a dotted name written in a docstring of ``module`` (inside class ``cls``) denotes,
    by import, or None."""
    import importlib

    candidates = [target]
    if module:
        if cls:
            candidates.append(f"{module}.{cls}.{target}")
        candidates.append(f"{module}.{target}")
    for name in candidates:
        parts = name.split(".")
        for i in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:i]))
            except Exception:  # noqa: BLE001 - not a module (or not importable): try a shorter prefix
                continue
            try:
                for attr in parts[i:]:
                    obj = getattr(obj, attr)
            except AttributeError:
                break
            return obj
    return None


def canonical_name(obj: Any) -> str | None:
    """Where the API reference documents ``obj``: ``<defining module>.<qualified name>``."""
    import inspect

    if inspect.ismodule(obj):
        return obj.__name__
    module, qual = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    return f"{module}.{qual}" if module and qual else None


def _missing_reference(app: Any, env: Any, node: Any, contnode: Any) -> Any:
    """Resolve a Python reference through the package's namespaces: ``iclr25.common.cached`` is
    documented where it is defined, ``iclr25.common.cache.cached``; a short name used in a module's
    docstring is looked up in that module (imports included). A name that denotes something this
    reference does not document (another library's object, a constant, a private helper, a type
    variable) is shown as text; only a name that denotes nothing is reported."""
    from typing import TypeVar

    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "")
    if not re.fullmatch(r"[\w.]+", target):
        return None
    domain = env.get_domain("py")
    obj = resolve_python_name(target, node.get("py:module"), node.get("py:class"))
    if obj is None:  # a short name from another module (a summary table's): the unique object so named
        matches = domain.find_obj(env, None, None, target, None, 1)
        if len(matches) != 1:
            return None  # names nothing: reported (unless EXTERNAL_NAMES says it is another library's)
        return domain.resolve_xref(env, node["refdoc"], app.builder, "obj", matches[0][0], node, contnode)
    name = canonical_name(obj)
    if isinstance(obj, TypeVar) or not name or not name.startswith("iclr25.") or name == target:
        return contnode  # another library's object, a constant, a type variable: shown as text
    return domain.resolve_xref(env, node["refdoc"], app.builder, "obj", name, node, contnode) or contnode


def mathjax_source() -> Path:
    """The ``es5`` folder of the MathJax 3 that ``django-static-mathjax`` installs."""
    spec = importlib.util.find_spec("mathjax")
    folders = list(spec.submodule_search_locations or []) if spec else []
    for folder in folders:
        es5 = Path(folder) / "static" / "mathjax" / "es5"
        if (es5 / "tex-mml-chtml.js").is_file():
            return es5
    raise RuntimeError("MathJax is not installed: the book serves MathJax itself so that it renders "
                       "offline; install the book's toolchain (`make venv`, which installs "
                       "django-static-mathjax from pkg/constraints.txt)")


def copy_mathjax(dest: Path) -> Path:
    """Copy MathJax (the parts in :data:`MATHJAX_PARTS`) into ``dest`` (``<html>/_static/mathjax``)."""
    src = mathjax_source()
    dest.mkdir(parents=True, exist_ok=True)
    for part in MATHJAX_PARTS:
        s, d = src / part, dest / part
        if s.is_dir():
            shutil.copytree(s, d, dirs_exist_ok=True)
        elif s.is_file():
            shutil.copy2(s, d)
    return dest / Path(MATHJAX_ENTRY).name


def require_staged(srcdir: str | Path) -> None:
    """Raise :class:`sphinx.errors.ConfigError` (:data:`NOT_STAGED`) unless ``srcdir`` is a staging
    tree made by :func:`iclr25.book.build.stage`."""
    from sphinx.errors import ConfigError

    if not (Path(srcdir) / STAGED_MARK).is_file():
        raise ConfigError(NOT_STAGED)

def _data_comment_as_written(app: Any, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    """Before napoleon: an empty comment first, so that it does not read a constant's comment as a type."""
    if what == "data" and lines:
        lines[:0] = ["..", ""]


def _config_inited(app: Any, config: Any) -> None:
    require_staged(app.srcdir)
    mathjax_source()  # fail at the start of the build, not after it, when MathJax is missing
    config.mathjax_path = MATHJAX_ENTRY
    templates = Path(app.doctreedir) / "iclr25-templates"
    (templates / "autosummary").mkdir(parents=True, exist_ok=True)
    (templates / "autosummary" / "module.rst").write_text(MODULE_TEMPLATE, encoding="utf-8")
    config.templates_path = [*config.templates_path, str(templates)]
    # autosummary's toctrees list the API pages: sphinx-external-toc only notes that it did not write them
    config.suppress_warnings = [*config.suppress_warnings, "etoc.toctree"]
    config.nitpick_ignore_regex = [*getattr(config, "nitpick_ignore_regex", []), *EXTERNAL_NAMES]


def _unique_scripts(app: Any, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    """Drop repeated scripts from a page: an inline script added after the builder started is
    registered twice by Sphinx 7.4 (once with the file name None, once with ""), so sphinx-thebe's
    settings came twice, and a second ``const THEBE_JS_URL`` is a script error."""
    seen: set[tuple[str, str]] = set()
    unique = []
    for script in context.get("script_files", []):
        key = (str(getattr(script, "filename", script) or ""), repr(sorted(getattr(script, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    context["script_files"] = unique


def _build_finished(app: Any, exc: BaseException | None) -> None:
    if exc is None and app.builder.format == "html":
        copy_mathjax(Path(app.outdir) / "_static" / "mathjax")


def setup(app: Any) -> dict[str, Any]:
    app.connect("config-inited", _config_inited)
    app.connect("missing-reference", _missing_reference)
    app.connect("autodoc-process-docstring", _data_comment_as_written, priority=100)
    app.connect("html-page-context", _unique_scripts, priority=900)
    app.add_js_file(None, body=THEME_MODE_JS, priority=100)
    app.connect("build-finished", _build_finished)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
