"""The rendered book, checked as a reader sees it: headless Chromium opens the built HTML from disk.

``python -m iclr25 browser [--html DIR]`` drives the system's Chromium (Debian's ``chromium``,
which ``.ci/run`` installs; no browser is downloaded) through Playwright, and every request that
is not a file of the book is refused, so the pages must be whole without a network. On every
chapter page it checks that

- the math is typeset (each ``.math`` element holds MathJax output, no raw ``\\(`` is left),
- every image loaded with a non-zero size,
- the claims table is there,
- the launch buttons open the chapter's notebook on the ``notebooks`` branch (Colab and Binder)
  and the download button's notebook is the chapter's launch notebook with outputs (its first cell
  tagged ``install``, no papermill injected-parameters cell, no MyST left in its Markdown, outputs
  in at least one code cell),
- the page ends with its own references (at least one entry) and each citation link leads to an
  entry of that list or of the bibliography page,
- the browser logged no error (console errors, uncaught exceptions, refused requests);

on the scoreboard page, that there is one section per chapter. It saves a screenshot of the first
chapter and of the scoreboard under ``_build/`` for people to look at.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from urllib.parse import unquote, urlparse

from iclr25.book.registry import chapters
from iclr25.book.site import site

CHROMIUM_ENV = "ICLR25_CHROMIUM"
#: The claims table's header (``iclr25.book.claims.markdown_table``).
CLAIMS_HEADER = ("we measure", "holds")
MATHJAX_TIMEOUT_MS = 30_000


def chromium_path() -> str | None:
    """``$ICLR25_CHROMIUM``, else the ``chromium`` (or ``chromium-browser``) on the PATH."""
    return os.environ.get(CHROMIUM_ENV) or shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class PageReport:
    """What the browser saw on one page."""

    name: str
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# JavaScript run in the page once it has loaded and MathJax has finished.
_INSPECT = """
() => {
  const main = document.querySelector('article') || document.querySelector('main') || document.body;
  const maths = [...main.querySelectorAll('.math')];
  const untypeset = maths.filter(m => !m.querySelector('mjx-container')).length;
  const clone = main.cloneNode(true);
  clone.querySelectorAll('pre, code, script, style, mjx-container, .highlight').forEach(e => e.remove());
  const text = clone.innerText || '';
  const raw = ['\\\\(', '\\\\[', '$$'].filter(t => text.includes(t));
  const imgs = [...document.querySelectorAll('img')].map(i => ({
      src: i.getAttribute('src'), ok: i.complete && i.naturalWidth > 0 && i.naturalHeight > 0,
      content: main.contains(i), w: i.getBoundingClientRect().width, h: i.getBoundingClientRect().height}));
  const tables = [...main.querySelectorAll('table')].map(t => ({
      head: [...t.querySelectorAll('th')].map(th => th.innerText.trim().toLowerCase()),
      rows: t.querySelectorAll('tbody tr').length}));
  const links = [...document.querySelectorAll('a[href]')].map(a => a.href);
  const refs = [...main.querySelectorAll('.citation-list .citation[id]')].map(e => e.id);
  const cites = [...main.querySelectorAll('.bibtex-citation a[href]')].map(a => a.href);
  const h2 = [...main.querySelectorAll('h2')].map(h => {
    const c = h.cloneNode(true);
    c.querySelectorAll('mjx-container').forEach(m => m.replaceWith('$'));  // typeset math -> marker
    return c.textContent.replace(/#$/, '').trim();
  });
  return {maths: maths.length, mjx: main.querySelectorAll('mjx-container').length, untypeset, raw,
          imgs, tables, links, h2, refs, cites};
}
"""


def _wait_for_mathjax(page: Any) -> bool:
    """Wait until MathJax (if the page loads it) has typeset the page. Returns whether it did."""
    if not page.evaluate("() => !!document.querySelector('script[src*=\"mathjax\"]')"):
        return False
    return bool(page.evaluate(
        """() => new Promise(resolve => {
             const t0 = Date.now();
             const poll = () => {
               if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
                 MathJax.startup.promise.then(() => resolve(true), () => resolve(false));
               } else if (Date.now() - t0 > %d) { resolve(false); } else { setTimeout(poll, 50); }
             };
             poll();
           })""" % MATHJAX_TIMEOUT_MS))


def _file_of(url: str) -> Path | None:
    parsed = urlparse(url)
    return Path(unquote(parsed.path)) if parsed.scheme == "file" else None


def check_chapter(info: dict[str, Any], report: PageReport, nb_path: str, colab: str, binder_prefix: str) -> None:
    """The checks of a chapter page on what the page's inspection script returned."""
    if info["maths"] == 0:
        report.problems.append("no math on the page (a chapter derives its method)")
    if info["untypeset"]:
        report.problems.append(f"{info['untypeset']} of {info['maths']} math elements not typeset by MathJax")
    if info["raw"]:
        report.problems.append(f"raw TeX delimiters left in the text: {' '.join(info['raw'])}")
    if not any(all(h in " ".join(t["head"]) for h in CLAIMS_HEADER) and t["rows"] for t in info["tables"]):
        report.problems.append("no claims table (header with 'we measure' and 'holds')")
    links = info["links"]
    if colab not in links:
        report.problems.append(f"no Colab launch button opening {colab}")
    if not any(link.startswith(binder_prefix) and nb_path in link for link in links):
        report.problems.append(f"no Binder launch button opening {nb_path} on {binder_prefix}")
    downloads = [link for link in links if link.startswith("file:") and link.endswith(f"_sources/{nb_path}")]
    if not downloads:
        report.problems.append(f"no download button for _sources/{nb_path}")
    elif not (_file_of(downloads[0]) or Path()).is_file():
        report.problems.append(f"the download button's notebook {downloads[0]} does not exist")
    else:
        check_download(_file_of(downloads[0]) or Path(), report)
    figures = sum(i["content"] for i in info["imgs"])
    if not figures:
        report.problems.append("no figure on the page (the executed notebook has no image output)")
    report.notes.append(f"{info['mjx']} formulas, {figures} figures")


def check_download(path: Path, report: PageReport) -> None:
    """The download button's notebook ``path`` is a launch notebook with outputs: first cell tagged
    ``install``, no papermill injected-parameters cell, no MyST in any Markdown cell
    (:func:`iclr25.book.launch.myst_leftovers`), at least one code cell with outputs."""
    import nbformat

    from iclr25.book.launch import myst_leftovers

    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as err:  # noqa: BLE001 - any unreadable file is the problem reported
        report.problems.append(f"the download button's notebook is no notebook: {type(err).__name__}: {err}")
        return
    what = "the download button's notebook"
    if not nb.cells or "install" not in nb.cells[0].metadata.get("tags", []):
        report.problems.append(f"{what} does not start with the install cell (no launch notebook)")
    if any("injected-parameters" in c.metadata.get("tags", []) for c in nb.cells):
        report.problems.append(f"{what} has papermill's injected-parameters cell")
    left = [f for c in nb.cells if c.cell_type == "markdown" for f in myst_leftovers(c.source)]
    if left:
        report.problems.append(f"{what} has MyST left in its Markdown: {'; '.join(left[:3])}")
    if not any(c.cell_type == "code" and c.get("outputs") for c in nb.cells):
        report.problems.append(f"{what} has no outputs")


def bibliography_ids(html: Path) -> set[str]:
    """The ids of the entries of the bibliography page ``html`` (``book/bibliography.html``)."""
    if not html.is_file():
        return set()
    return set(re.findall(r'<div class="citation" id="([^"]+)"', html.read_text(errors="replace")))


def check_references(info: dict[str, Any], report: PageReport, page: str, bib_page: str,
                     bib_ids: set[str]) -> None:
    """The page (address ``page``) lists its own references, and each citation link leads to an
    entry of that list or of the bibliography page (address ``bib_page``, entries ``bib_ids``)."""
    refs = set(info.get("refs", []))
    if not refs:
        report.problems.append("no references list on the page")
    cites = info.get("cites", [])
    if not cites:
        report.problems.append("no citation on the page")
    bad = []
    for link in cites:
        target, _, frag = link.partition("#")
        ok = (target == page and frag in refs) or (target == bib_page and frag in bib_ids)
        if not ok:
            bad.append(link)
    if bad:
        report.problems.append(f"{len(bad)} citation link(s) lead to no reference: {', '.join(sorted(set(bad))[:3])}")
    report.notes.append(f"{len(refs)} references")


def check_images(info: dict[str, Any], report: PageReport) -> None:
    """Every image loaded; every figure of the page's content also shown with a non-zero size (the
    launch buttons' logos sit in a closed menu)."""
    for img in info["imgs"]:
        if not img["ok"]:
            report.problems.append(f"image not loaded: {img['src']}")
        elif img["content"] and (img["w"] <= 0 or img["h"] <= 0):
            report.problems.append(f"figure shown with zero size: {img['src']}")


_SMART_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})


def _title_key(text: str) -> str:
    """A heading's text with each formula (``$...$`` in the source, typeset math on the page)
    reduced to one marker, Sphinx's typographic quotes made straight again and whitespace
    collapsed, so a source title matches its rendered heading."""
    return " ".join(re.sub(r"\$[^$]*\$", "$", text).translate(_SMART_QUOTES).split())


def check_scoreboard(info: dict[str, Any], report: PageReport, titles: list[str]) -> None:
    shown = {_title_key(h) for h in info["h2"]}
    wanted = {_title_key(t) for t in titles}
    missing = [t for t in titles if _title_key(t) not in shown]
    if missing:
        report.problems.append(f"no section for chapter(s): {'; '.join(missing)}")
    extra = [h for h in info["h2"] if _title_key(h) not in wanted]
    if extra:
        report.problems.append(f"sections that are no chapter: {'; '.join(extra)}")
    report.notes.append(f"{len(info['h2'])} chapter sections")


def check_book(html: Path, root: Path, *, screenshots: Path | None = None,
               echo: Callable[[str], None] = print) -> list[str]:
    """Open the built book ``html`` in headless Chromium with every non-file request refused and run
    the checks of the module's docstring. Prints one line per page; returns the problems."""
    html = html.resolve()
    if not (html / "index.html").is_file():
        msg = f"no built book at {html} (run `make book` first)"
        echo(msg)
        return [msg]
    exe = chromium_path()
    if not exe:
        msg = ("Chromium is not installed: `apt-get install chromium` (.ci/run does it), or set "
               f"{CHROMIUM_ENV} to a Chromium binary")
        echo(msg)
        return [msg]
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        msg = "Playwright is not installed: `pip install -e 'pkg[test]'` (make venv does it)"
        echo(msg)
        return [msg]
    s = site(root)
    chs = chapters(root)
    files = {c.id: c.file for c in chs}
    pages: list[tuple[str, Path]] = [("intro", html / "book" / "intro.html")]
    pages += [(c.id, html / f"{c.file}.html") for c in chs]
    pages += [("scoreboard", html / "book" / "scoreboard.html"), ("api", html / "book" / "api.html")]
    bib_html = html / "book" / "bibliography.html"
    bib_ids = bibliography_ids(bib_html)
    problems: list[str] = []
    t_start = time.perf_counter()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
        context = browser.new_context(viewport={"width": 1280, "height": 1000}, service_workers="block")
        refused: list[str] = []

        def route(r: Any) -> None:
            if r.request.url.startswith(("file:", "data:", "blob:", "about:")):
                r.continue_()
            else:
                refused.append(r.request.url)
                r.abort("internetdisconnected")

        context.route("**/*", route)
        for name, path in pages:
            report = PageReport(name)
            if not path.is_file():
                report.problems.append(f"page missing: {path}")
                problems += [f"{name}: {p}" for p in report.problems]
                echo(f"  {name:32s} FAILED: {'; '.join(report.problems)}")
                continue
            page = context.new_page()
            errors: list[str] = []
            page.on("console", lambda m, errors=errors: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e, errors=errors: errors.append(f"uncaught: {e}"))
            refused.clear()
            t0 = time.perf_counter()
            page.goto(path.as_uri(), wait_until="load")
            typeset = _wait_for_mathjax(page)
            info = page.evaluate(_INSPECT)
            check_images(info, report)
            if name in files:
                nb = f"{files[name]}.ipynb"
                if not typeset:
                    report.problems.append("MathJax did not finish typesetting")
                check_chapter(info, report, nb, s.colab_launch(nb), s.binder_launch(nb))
                check_references(info, report, path.as_uri(), bib_html.as_uri(), bib_ids)
                if screenshots is not None and name == chs[0].id:
                    _screenshot(page, screenshots / "screenshot-chapter.png", report)
            elif name == "scoreboard":
                check_scoreboard(info, report, [c.title for c in chs])
                if screenshots is not None:
                    _screenshot(page, screenshots / "screenshot-scoreboard.png", report)
            page.wait_for_timeout(100)  # late console messages
            if refused:
                report.problems.append(f"requests outside the book (refused): {', '.join(sorted(set(refused)))}")
            report.problems += [f"console error: {e}" for e in errors]
            page.close()
            state = "ok" if not report.problems else "FAILED: " + "; ".join(report.problems)
            echo(f"  {name:32s} {time.perf_counter() - t0:4.1f} s  {', '.join(report.notes)}  {state}")
            problems += [f"{name}: {p}" for p in report.problems]
        browser.close()
    echo(f"browser: {len(pages)} pages checked in {time.perf_counter() - t_start:.1f} s "
         f"(Chromium, network refused), {len(problems)} problem(s)")
    return problems


def _screenshot(page: Any, path: Path, report: PageReport) -> None:
    """A screenshot of the page (its first 3000 px) at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    height = min(3000, int(page.evaluate("document.documentElement.scrollHeight")))
    page.screenshot(path=str(path), clip={"x": 0, "y": 0, "width": 1280, "height": max(height, 1)},
                    full_page=True)
    report.notes.append(f"screenshot {path}")
