"""What the reader's book is made of: addresses from _config.yml, the API pages, offline MathJax,
quiet builds, widgets that degrade, the publish command's guards and the browser checks' logic."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from iclr25.book import browser, publish, sphinxext
from iclr25.book.quiet import captured_stderr
from iclr25.book.site import site

ROOT = Path(__file__).resolve().parents[2]


def test_site_reads_the_one_repository_url() -> None:
    s = site(ROOT)
    cfg = (ROOT / "_config.yml").read_text()
    assert cfg.count(s.repository_url) == 1, "the repository URL is written once, in _config.yml"
    owner_repo = s.owner_repo
    assert s.colab_launch("book/a/b.ipynb") == \
        f"https://colab.research.google.com/github/{owner_repo}/blob/{s.notebooks_branch}/book/a/b.ipynb"
    assert s.pip_spec("c0ffee") == f"iclr25 @ git+{s.repository_url}@c0ffee#subdirectory=pkg"
    assert s.book_url == f"https://{owner_repo.split('/')[0]}.github.io/{owner_repo.split('/')[1]}/"
    for page in ("book/intro.md", "book/api.md"):
        text = (ROOT / page).read_text()
        assert s.repository_url not in text, f"{page} writes the repository URL: use {{{{ repository_url }}}}"


def test_api_reference_is_autosummary_recursive() -> None:
    """book/api.md lists ``iclr25`` for autosummary to walk; the module template documents members."""
    page = (ROOT / "book" / "api.md").read_text()
    assert ".. autosummary::\n   :toctree: api\n   :recursive:\n\n   iclr25\n" in page
    template = sphinxext.MODULE_TEMPLATE
    assert ".. automodule:: {{ fullname }}" in template and ":members:" in template and ":recursive:" in template
    lines = ["The leaderboard (README, 4 trials): pass^1..4."]
    sphinxext._data_comment_as_written(None, "data", "X", None, None, lines)
    from sphinx.ext.napoleon import Config
    from sphinx.ext.napoleon.docstring import GoogleDocstring

    assert not any(":type:" in ln for ln in GoogleDocstring(lines, Config(), what="data", name="X").lines())


def test_references_resolve_through_the_package() -> None:
    from iclr25.common.cache import cached
    from iclr25.sampling.stein import ksd

    assert sphinxext.resolve_python_name("iclr25.common.cached") is cached
    assert sphinxext.resolve_python_name("ksd", "iclr25.sampling") is ksd
    assert sphinxext.resolve_python_name("nothing_here", "iclr25.sampling") is None
    assert sphinxext.canonical_name(ksd) == "iclr25.sampling.stein.ksd"


def test_mathjax_is_served_from_the_book(tmp_path: Path) -> None:
    entry = sphinxext.copy_mathjax(tmp_path / "mathjax")
    assert entry.name == "tex-mml-chtml.js" and entry.stat().st_size > 100_000
    fonts = list((tmp_path / "mathjax" / "output" / "chtml" / "fonts" / "woff-v2").glob("*.woff"))
    assert fonts, "MathJax's CHTML fonts must be served too"
    assert (ROOT / "_config.yml").read_text().count("iclr25.book.sphinxext") == 1


def test_kernel_chatter_is_captured() -> None:
    with captured_stderr() as cap:
        subprocess.run([sys.executable, "-c", "import sys; sys.stderr.write('[IPKernelApp] WARNING | noise')"])
    assert "[IPKernelApp] WARNING | noise" in cap.text()


def test_explore_defaults_match_ipywidgets_and_degrade(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    import ipywidgets as widgets

    from iclr25.common import HEADLESS_ENV, control_default, explore

    for abbrev in [(16, 256, 16), (0, 10), (0.0, 1.0), (-1.0, 3.0, 0.25), (1, 4, 2), ["a", "b"],
                   [("x", 1), ("y", 2)], {"a": 3}, True, "s"]:
        assert control_default(abbrev) == widgets.interactive.widget_from_abbrev(abbrev).value, abbrev
    assert control_default(widgets.IntSlider(value=7)) == 7

    seen = []
    monkeypatch.setenv(HEADLESS_ENV, "1")
    explore(lambda n, h: seen.append((n, h)), n=(16, 256, 16), h=widgets.FloatSlider(value=1.5))
    monkeypatch.delenv(HEADLESS_ENV)

    def broken(*a: object, **k: object) -> None:
        raise RuntimeError("no widget frontend")

    monkeypatch.setattr(widgets, "interact", broken)
    explore(lambda n, h: seen.append((n, h)), n=(16, 256, 16), h=widgets.FloatSlider(value=1.5))
    assert seen == [(128, 1.5), (128, 1.5)]
    assert "interactive controls unavailable" in capsys.readouterr().out


def test_publish_refuses_a_dirty_tree(tmp_path: Path) -> None:
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(tmp_path)]
    (tmp_path / "_config.yml").write_text("repository:\n  url: https://github.com/o/r\n")
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "x"], check=True)
    (tmp_path / "_config.yml").write_text("repository:\n  url: https://github.com/o/other\n")
    with pytest.raises(RuntimeError, match="tracked files differ from HEAD"):
        publish.publish(tmp_path, echo=lambda _: None)


def test_publish_checks_the_goldens_fresh_first_then_with_nbval(mini_book: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from iclr25.book import golden

    ran: list[tuple] = []
    monkeypatch.setattr(golden, "check_fresh", lambda c: f"{c.id}: stale" if c.id == "demo/ok" else None)
    monkeypatch.setattr(golden, "verify_goldens", lambda chs, **kw: ran.append((len(chs), kw)) or [])
    with pytest.raises(RuntimeError, match="demo/ok: stale"):
        publish.check_goldens(mini_book, echo=lambda _: None)
    assert ran == []  # a stale golden is refused before nbval runs
    monkeypatch.setattr(golden, "check_fresh", lambda c: None)
    publish.check_goldens(mini_book, echo=lambda _: None)
    assert ran[0][0] == 2 and ran[0][1]["kernels"] == "native" and ran[0][1]["python"] is None


def test_equation_numbers_compared_with_the_book(tmp_path: Path) -> None:
    import nbformat

    html, tree = tmp_path / "html", tmp_path / "tree"
    (html / "book" / "p").mkdir(parents=True)
    (tree / "book" / "p").mkdir(parents=True)
    (html / "book" / "p" / "c.html").write_text(
        '<div id="equation-a">\n<span class="eqno">(2.1)</span></div><div id="equation-b"><span class="eqno">(2.2)')
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("$$ x \\tag{2.1} $$\n$$ y \\tag{2.2} $$")])
    nbformat.write(nb, tree / "book" / "p" / "c.ipynb")
    assert publish.equation_mismatches(html, tree) == []
    nb.cells[0].source = "$$ x \\tag{2.1} $$"
    nbformat.write(nb, tree / "book" / "p" / "c.ipynb")
    assert "numbered ['2.1'] in the notebook, ['2.1', '2.2'] in the book" in publish.equation_mismatches(html, tree)[0]


def test_browser_checks_flag_what_a_reader_would_miss(tmp_path: Path) -> None:
    import nbformat

    nb = "book/p/c.ipynb"
    download = tmp_path / "_sources" / nb
    download.parent.mkdir(parents=True)
    launch = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("%pip install iclr25", metadata={"tags": ["install"]}),
        nbformat.v4.new_markdown_cell("# A chapter"),
        nbformat.v4.new_code_cell("print(1)", outputs=[nbformat.v4.new_output("stream", text="1\n")])])
    nbformat.write(launch, download)
    colab, binder = "https://colab/x", "https://binder/v2/gh/o/r/notebooks"
    good = {"maths": 3, "mjx": 3, "untypeset": 0, "raw": [], "h2": [],
            "imgs": [{"src": "a.png", "ok": True, "content": True, "w": 600, "h": 400}],
            "tables": [{"head": ["kind", "claim", "paper says / expected", "we measure", "holds"], "rows": 2}],
            "links": [colab, f"{binder}?urlpath=tree/{nb}", download.as_uri()]}
    report = browser.PageReport("c")
    browser.check_images(good, report)
    browser.check_chapter(good, report, nb, colab, binder)
    assert report.problems == []
    staged = nbformat.v4.new_notebook(cells=[  # what Sphinx copies there: the staged notebook
        nbformat.v4.new_markdown_cell("# A chapter\n\n{cite}`x`"),
        nbformat.v4.new_code_cell("scale = 'ci'", metadata={"tags": ["injected-parameters"]})])
    nbformat.write(staged, download)
    report = browser.PageReport("c")
    browser.check_chapter(good, report, nb, colab, binder)
    assert [p.split(" has ")[-1].split(" does ")[-1][:20] for p in report.problems] == [
        "not start with the i", "papermill's injected", "MyST left in its Mar", "no outputs"]
    download.unlink()
    report = browser.PageReport("c")
    browser.check_chapter(good, report, nb, colab, binder)
    assert report.problems == [f"the download button's notebook {download.as_uri()} does not exist"]
    bad = {**good, "untypeset": 1, "raw": ["\\("], "tables": [], "links": [],
           "imgs": [{"src": "b.png", "ok": False, "content": True, "w": 0, "h": 0}]}
    report = browser.PageReport("c")
    browser.check_images(bad, report)
    browser.check_chapter(bad, report, nb, colab, binder)
    text = " | ".join(report.problems)
    for expected in ("image not loaded: b.png", "not typeset", "raw TeX", "no claims table", "no Colab",
                     "no Binder", "no download"):
        assert expected in text
    board = browser.PageReport("scoreboard")
    browser.check_scoreboard({"h2": ["Chapter A"]}, board, ["Chapter A", "Chapter B"])
    assert board.problems == ["no section for chapter(s): Chapter B"]
    board = browser.PageReport("scoreboard")  # a title with math: typeset on the page, TeX in the toc
    browser.check_scoreboard({"h2": ["Sparse $ kernels  for SSMs"]}, board, ["Sparse $C_4^n$ kernels for SSMs"])
    assert board.problems == []
    board = browser.PageReport("scoreboard")  # Sphinx's smartquotes curl the apostrophe on the page
    browser.check_scoreboard({"h2": ["the reference\u2019s sky"]}, board, ["the reference's sky"])
    assert board.problems == []


def test_browser_checks_each_chapter_lists_its_references() -> None:
    page, bib = "file:///b/book/p/c.html", "file:///b/book/bibliography.html"
    info = {"refs": ["id9", "id10"], "cites": [f"{page}#id9", f"{bib}#id3"]}
    report = browser.PageReport("c")
    browser.check_references(info, report, page, bib, {"id3"})
    assert report.problems == [] and report.notes == ["2 references"]
    report = browser.PageReport("c")
    browser.check_references({"refs": [], "cites": [f"{page}#id7", f"{bib}#id4"]}, report, page, bib, {"id3"})
    assert report.problems == ["no references list on the page",
                               f"2 citation link(s) lead to no reference: {bib}#id4, {page}#id7"]


def test_chapter_references_render_beside_the_global_bibliography(tmp_path: Path) -> None:
    """The staged chapters' references section (a local bibliography) next to the bibliography
    page's ``:all:`` renders with warnings as errors under the book's ``suppress_warnings``, and a
    citation links to its own page's list."""
    import re

    import yaml

    from iclr25.book.build import REFERENCES_MD

    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
    (tmp_path / "conf.py").write_text(
        "extensions = ['myst_parser', 'sphinxcontrib.bibtex']\n"
        "bibtex_bibfiles = ['refs.bib']\n"
        f"bibtex_reference_style = {cfg['sphinx']['config']['bibtex_reference_style']!r}\n"
        f"suppress_warnings = {cfg['sphinx']['config']['suppress_warnings']!r}\n")
    (tmp_path / "refs.bib").write_text("@article{a1, author={A. Author}, title={One}, journal={J}, year={2020}}\n"
                                       "@article{b2, author={B. Bauthor}, title={Two}, journal={J}, year={2021}}\n")
    (tmp_path / "index.md").write_text("# Book\n\n```{toctree}\nc1\nc2\nbibliography\n```\n")
    for name in ("c1", "c2"):
        (tmp_path / f"{name}.md").write_text(f"# {name}\n\nAs {{cite:t}}`a1` and {{cite:p}}`b2`.\n\n{REFERENCES_MD}\n")
    (tmp_path / "bibliography.md").write_text("# Bibliography\n\n```{bibliography}\n:all:\n```\n")
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-W", "-n", "-q", "-b", "html", str(tmp_path),
                           str(tmp_path / "_out")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    html = (tmp_path / "_out" / "c2.html").read_text()
    own = set(re.findall(r'<div class="citation" id="([^"]+)"', html))
    links = re.findall(r'class="bibtex-citation"[^>]*>[^<]*<a class="reference internal" href="#([^"]+)"', html)
    assert len(own) == 2 and len(links) == 2 and set(links) <= own


def test_jb_build_of_the_sources_stops_with_one_line(tmp_path: Path) -> None:
    """``jb build .`` would render the chapters without outputs: the book's extension stops it
    unless the source folder is a staging tree."""
    import re

    from sphinx.errors import ConfigError

    with pytest.raises(ConfigError, match="built by `make book`"):
        sphinxext.require_staged(ROOT)
    (tmp_path / sphinxext.STAGED_MARK).write_text("")
    sphinxext.require_staged(tmp_path)
    jb = "from jupyter_book.cli.main import main; main()"
    proc = subprocess.run([sys.executable, "-c", jb, "build", str(ROOT), "--path-output", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=300)
    out = re.sub(r"\x1b\[[\d;]*m", "", proc.stdout + proc.stderr)  # colours
    assert proc.returncode != 0
    assert f"Configuration error:\n{sphinxext.NOT_STAGED}\n" in out and "\n" not in sphinxext.NOT_STAGED


def test_attributes_sections_name_one_attribute_per_entry() -> None:
    """napoleon renders "Attributes" as ``:ivar name:`` fields (``napoleon_use_ivar``), which take one
    name each; "a, b : type" would become a broken cross-reference and fail the warnings-as-errors build."""
    import re
    bad = []
    for path in sorted((ROOT / "pkg" / "iclr25").rglob("*.py")):
        for block in re.findall(r"\n( *)Attributes\n\1-+\n(.*?)(?:\n\s*\n|\"\"\")", path.read_text(), re.S):
            indent, body = block
            for line in body.splitlines():
                if line.startswith(indent) and not line.startswith(indent + " ") and ":" in line:
                    if "," in line.split(":")[0]:
                        bad.append(f"{path.relative_to(ROOT)}: {line.strip()}")
    assert not bad, "one attribute per entry in Attributes sections:\n" + "\n".join(bad)


def test_build_prints_one_line_per_chapter_and_kernel_output_only_on_failure(
        mini_book: Path, capfd: pytest.CaptureFixture[str]) -> None:
    from iclr25.book.build import build_book

    lines: list[str] = []
    with pytest.raises(RuntimeError, match="1 chapter"):
        build_book("ci", root=mini_book, echo=lines.append)
    err = capfd.readouterr().err
    assert "IPKernelApp" not in err and "KeyboardInterrupt" not in err, err
    ok = [ln for ln in lines if ln.startswith("[1/2] demo/ok")]
    assert len(ok) == 1 and "\n" not in ok[0]
    failed = "\n".join(lines[lines.index(next(ln for ln in lines if "demo/broken FAILED" in ln)):])
    assert "ZeroDivisionError" in failed


def test_contributing_says_what_the_test_command_and_the_reader_files_are() -> None:
    """CONTRIBUTING.md names the test command's stage count as the README does, the goldens as
    launch notebooks, the reader environment and the command that generates the reader's files."""
    import re

    from iclr25.book.reader import READER_LIST, REGENERATE
    from iclr25.book.testing import READER_VENV

    text = (ROOT / "CONTRIBUTING.md").read_text()
    stages = re.search(r"`make test` runs (\w+) stages", (ROOT / "README.md").read_text())
    assert stages and f"{stages.group(1)} stages" in text
    for needed in (READER_VENV, READER_LIST, REGENERATE, "launch notebook", "binder/environment.yml",
                   "environment.yml", "`jb build .`"):
        assert needed in text, needed
    assert "{bibliography} is on the back-matter page" not in text
