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
    nb = "book/p/c.ipynb"
    download = tmp_path / "_sources" / nb
    download.parent.mkdir(parents=True)
    download.write_text("{}")
    colab, binder = "https://colab/x", "https://binder/v2/gh/o/r/notebooks"
    good = {"maths": 3, "mjx": 3, "untypeset": 0, "raw": [], "h2": [],
            "imgs": [{"src": "a.png", "ok": True, "content": True, "w": 600, "h": 400}],
            "tables": [{"head": ["kind", "claim", "paper says / expected", "we measure", "holds"], "rows": 2}],
            "links": [colab, f"{binder}?urlpath=tree/{nb}", download.as_uri()]}
    report = browser.PageReport("c")
    browser.check_images(good, report)
    browser.check_chapter(good, report, nb, colab, binder)
    assert report.problems == []
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
