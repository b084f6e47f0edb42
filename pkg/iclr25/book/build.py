"""Render the book from executed notebooks.

``build_book`` executes every chapter that is not cached (``runner.run_chapter``), then lays out
a staging tree ``_build/src-<scale>`` in which each chapter's ``.md`` is replaced by its executed
``.ipynb``, fills the generated parts (the chapter table on the intro page, the reproduction
scoreboard), ends each chapter with its own references, and runs Sphinx through Jupyter Book's
configuration with warnings as errors. Jupyter Book itself executes nothing (``execute_notebooks:
off``), and builds nothing but a staging tree (:mod:`iclr25.book.sphinxext`: ``jb build .`` stops).
After Sphinx, each chapter's download button (``_sources/<chapter>.ipynb``) gets the chapter's launch
notebook with the outputs of the run the page shows (:func:`write_downloads`).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable


from iclr25.book.claims import (escape_md, format_counts, held_counts, markdown_table, notebook_claims,
                                parse_counts)
from iclr25.book.params import MissingParameters
from iclr25.book.registry import Chapter, chapters, find_root
from iclr25.book.runner import ChapterFailed, run_chapter
from iclr25.book.sphinxext import STAGED_MARK
from iclr25.book.timings import load_timings, schedule

CHAPTER_TABLE_MARK = "<!-- generated: chapter table -->"
SCOREBOARD_MARK = "<!-- generated: scoreboard -->"


def chapter_table(root: Path, chs: list[Chapter], link: Callable[[Chapter], str] | None = None) -> str:
    """Markdown table: part, chapter, last measured ci/full times and how many of the paper's
    claims held of those tested at each scale (``"3/4 (1 undecided)"``: undecided rows are in
    neither number), then a total row that sums the chapters (times over the chapters measured)."""
    timings = load_timings(root)
    lines = ["| part | chapter | `ci` time (s) | `full` time (s) | paper claims held / tested at `ci` / `full` |",
             "|---|---|---|---|---|"]
    totals = {s: [0, 0, 0] for s in SCALES_SHOWN}
    seen = {s: 0 for s in SCALES_SHOWN}
    time_sum = {s: 0.0 for s in SCALES_SHOWN}
    for c in chs:
        t = timings.get(c.id, {})
        name = link(c) if link else f"`{c.id}`"
        fmt = lambda s: f"{t[s]:.0f}" if s in t else "—"  # noqa: E731
        cells = []
        for s in SCALES_SHOWN:
            if s in t:
                time_sum[s] += round(t[s])
            n = parse_counts(t.get(f"claims_{s}"))
            if n is None:
                cells.append("—")
                continue
            seen[s] += 1
            totals[s] = [a + b for a, b in zip(totals[s], n)]
            cells.append(format_counts(*n))
        lines.append(f"| {c.part} | {name} | {fmt('ci')} | {fmt('full')} | {' / '.join(cells)} |")
    held = " / ".join(f"**{format_counts(*totals[s])}**" if seen[s] else "—" for s in SCALES_SHOWN)
    times = " | ".join(f"{time_sum[s]:.0f}" for s in SCALES_SHOWN)
    lines.append(f"| **total** | {len(chs)} chapters | {times} | {held} |")
    return "\n".join(lines)


SCALES_SHOWN = ("ci", "full")
"""The scales the README's chapter table shows, in its column order."""

_SUB = str.maketrans("0123456789+-=()aehijklmnoprstuvx", "₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎ₐₑₕᵢⱼₖₗₘₙₒₚᵣₛₜᵤᵥₓ")
_SUP = str.maketrans("0123456789+-=()abcdefghijklmnoprstuvwxyz",
                     "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ᵃᵇᶜᵈᵉᶠᵍʰⁱʲᵏˡᵐⁿᵒᵖʳˢᵗᵘᵛʷˣʸᶻ")
_SCRIPT = re.compile(r"([_^])(\{([^{}]*)\}|(.))")


def link_text(title: str) -> str:
    """``title`` for a ``{doc}`` link, whose text Sphinx shows verbatim: inline math such as
    ``$C_4^n$`` becomes Unicode (``C₄ⁿ``); a script with no Unicode form is kept as ``_x``/``^x``."""
    def script(m: re.Match) -> str:
        body = m.group(3) if m.group(3) is not None else m.group(4)
        table = _SUB if m.group(1) == "_" else _SUP
        out = body.translate(table)
        return out if all(a != b for a, b in zip(body, out)) else m.group(0)
    return re.sub(r"\$([^$]+)\$", lambda m: _SCRIPT.sub(script, m.group(1)), title)


def scoreboard_table(rows_by_chapter: dict[str, list[dict[str, Any]]],
                     titles: dict[str, str] | None = None) -> str:
    """The scoreboard page body: the count of the papers' claims that hold of those tested (and
    how many this scale left undecided, counted apart), a summary table (paper claims and our
    checks per chapter, apart), then each chapter's claims table (the same table the chapter
    shows: paper claims first, then checks)."""
    titles = titles or {}
    allrows = [r for rows in rows_by_chapter.values() for r in rows]
    total = held_counts(allrows)
    (ph, pt, pu), (ch, ct, cu) = total["paper"], total["check"]
    undecided = ""
    if pu or cu:
        undecided = (f" {pu} paper claim{'s' if pu != 1 else ''} and {cu} check{'s' if cu != 1 else ''} "
                     "were **undecided**: the scale they were measured at cannot decide them (too few "
                     "seeds or too small a run); they are in neither count, and each table gives the reason.")
    out = [f"**{ph} of {pt} paper claims hold** on our measurements "
           f"(and {ch} of {ct} of our own checks: identities, sanity "
           f"checks and thresholds we chose).{undecided}", "",
           "| chapter | measured at scale | paper claims that hold | checks that pass |", "|---|---|---|---|"]
    for cid, rows in rows_by_chapter.items():
        title = escape_md(link_text(titles.get(cid, cid)))
        scales = ", ".join(sorted({r["scale"] for r in rows})) or "—"
        n = held_counts(rows)
        out.append(f"| {{doc}}`{title} <{cid}>` | `{scales}` | {format_counts(*n['paper'], sep=' of ')} "
                   f"| {format_counts(*n['check'], sep=' of ')} |")
    out.append(f"| **total** | | **{format_counts(*total['paper'], sep=' of ')}** "
               f"| **{format_counts(*total['check'], sep=' of ')}** |")
    for cid, rows in rows_by_chapter.items():
        out += ["", f"## {titles.get(cid, cid)}", "",
                f"{{doc}}`Chapter {cid} <{cid}>`, measured at scale "
                f"`{', '.join(sorted({r['scale'] for r in rows})) or '—'}`.", ""]
        out.append(markdown_table(rows) if rows else "*This chapter reported no claims.*")
    return "\n".join(out)


#: Written in the repository's pages, replaced by ``repository.url`` of ``_config.yml`` at staging.
REPOSITORY_URL_MARK = "{{ repository_url }}"


#: The section that ends each chapter page that cites anything: the entries cited on that page
#: (sphinxcontrib-bibtex's local bibliography; a citation resolves to its own page's entry first).
#: The same keys are in the global bibliography page too: ``bibtex.duplicate_citation`` (across
#: pages) is suppressed in ``_config.yml``, a duplicate within one page is still an error.
REFERENCES_MD = "## References\n\n```{bibliography}\n:filter: docname in docnames\n```"
_CITE = re.compile(r"\{(cite|footcite)(:\w+)?\}`")


def write_for_book(executed: Path, dest: Path) -> None:
    """Copy an executed chapter into the staging tree, hiding papermill's injected-parameters cell
    (the claims table and the parameters cell already say the scale), and end it with its own
    references (:data:`REFERENCES_MD`) when it cites anything."""
    import nbformat

    nb = nbformat.read(executed, as_version=4)
    for cell in nb.cells:
        tags = cell.metadata.get("tags", [])
        if "injected-parameters" in tags and "remove-cell" not in tags:
            cell.metadata["tags"] = [*tags, "remove-cell"]
    if any(c.cell_type == "markdown" and _CITE.search(c.source) for c in nb.cells):
        nb.cells.append(nbformat.v4.new_markdown_cell(REFERENCES_MD))
    nbformat.write(nb, dest)


def download_notebook(root: Path, chapter: Chapter, executed: Path, commit: str) -> Any:
    """What a chapter page's download button serves: the chapter's launch notebook (no MyST, an
    install cell pinning ``commit``) with the outputs of ``executed``, the run the page shows
    (images kept), without papermill's injected-parameters cell."""
    import nbformat

    from iclr25.book.golden import INJECTED, launch_with_outputs
    from iclr25.book.launch import chapter_launch_notebook

    nb = launch_with_outputs(chapter_launch_notebook(root, chapter, commit),
                             nbformat.read(executed, as_version=4), chapter.id)
    nb.cells = [c for c in nb.cells if INJECTED not in c.metadata.get("tags", [])]
    nbformat.validate(nb)
    return nb


def write_downloads(root: Path, chs: list[Chapter], notebooks: dict[str, Path], out: Path,
                    commit: str | None = None) -> list[Path]:
    """Replace each chapter's ``_sources/<chapter>.ipynb`` in the rendered book ``out`` (the file
    sphinx-book-theme's download button links; Sphinx copied the staged notebook, MyST and all) by
    :func:`download_notebook`. ``commit`` defaults to HEAD ("main" outside git)."""
    import nbformat

    from iclr25.book.site import git_commit

    if commit is None:
        commit = git_commit(root)[0] or "main"
    written = []
    for c in chs:
        dest = out / "_sources" / f"{c.file}.ipynb"
        dest.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(download_notebook(root, c, notebooks[c.id], commit), dest)
        written.append(dest)
    return written


def html_dir(root: Path, scale: str) -> Path:
    """Where the book rendered at ``scale`` goes: ``_build/html`` (full, what readers get) or
    ``_build/html-ci`` (the test command's book), so the tests never overwrite the real book."""
    return root / "_build" / ("html" if scale == "full" else f"html-{scale}")


def stage(root: Path, chs: list[Chapter], notebooks: dict[str, Path], src: Path | None = None) -> Path:
    """Lay out the staging tree (default ``_build/src``): config, toc, pages, and each chapter as
    its executed notebook ``notebooks[chapter id]`` (what ``run_chapter`` returns: the outputs under
    the chapter's current text, so a prose edit is staged without re-executing); fill the generated parts (chapter table,
    scoreboard, the repository's URL; autosummary writes the API pages); mark the tree as staged
    (:data:`~iclr25.book.sphinxext.STAGED_MARK`, which the book's Sphinx extension requires)."""
    import yaml

    src = src or root / "_build" / "src"
    if src.exists():
        shutil.rmtree(src)
    src.mkdir(parents=True)
    (src / STAGED_MARK).write_text("a staging tree of `python -m iclr25 book` (iclr25.book.build.stage)\n")
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy2(root / name, src / name)
    chapter_sources = {c.path.resolve() for c in chs}
    pages: list[Path] = []
    for f in (root / "book").rglob("*"):
        if f.is_dir() or f.resolve() in chapter_sources or f.suffix in {".ipynb", ".json", ".lock"}:
            continue
        dest = src / f.relative_to(root)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, dest)
        if dest.suffix == ".md":
            pages.append(dest)
    # literalinclude paths in chapters point at ../../pkg/...: link the package into the tree
    (src / "pkg").symlink_to(root / "pkg", target_is_directory=True)
    rows_by_chapter: dict[str, list[dict[str, Any]]] = {}
    for c in chs:
        nb_path = notebooks[c.id]
        dest = src / f"{c.file}.ipynb"
        dest.parent.mkdir(parents=True, exist_ok=True)
        write_for_book(nb_path, dest)
        rows_by_chapter[c.id] = notebook_claims(nb_path)
    intro = src / "book" / "intro.md"
    if intro.is_file():
        intro.write_text(intro.read_text().replace(
            CHAPTER_TABLE_MARK, chapter_table(root, chs, lambda c: f"{{doc}}`{escape_md(c.title)} <{c.id}>`")))
    board = src / "book" / "scoreboard.md"
    if board.is_file():
        titles = {c.id: c.title for c in chs}
        board.write_text(board.read_text().replace(SCOREBOARD_MARK, scoreboard_table(rows_by_chapter, titles)))
    if any(REPOSITORY_URL_MARK in p.read_text() for p in pages):
        from iclr25.book.site import site

        url = site(root).repository_url
        for p in pages:
            p.write_text(p.read_text().replace(REPOSITORY_URL_MARK, url))
    return src


def render(src: Path, out: Path) -> None:
    """Jupyter Book's Sphinx configuration, then ``sphinx-build -W -n --keep-going``; the HTML
    serves MathJax itself (:mod:`iclr25.book.sphinxext`), so it renders without a network."""
    jb = [sys.executable, "-c", "from jupyter_book.cli.main import main; main()"]
    proc = subprocess.run([*jb, "config", "sphinx", str(src)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError("Jupyter Book could not read _config.yml/_toc.yml:\n" + proc.stderr[-4000:])
    if out.exists():
        shutil.rmtree(out)
    cmd = [sys.executable, "-m", "sphinx", "-W", "-n", "--keep-going", "-q", "-b", "html",
           "-d", str(src.parent / f"doctrees-{src.name}"), str(src), str(out)]
    proc = subprocess.run(cmd, text=True, capture_output=True)
    if proc.returncode != 0:
        raise RuntimeError("the book did not render (Sphinx, warnings as errors):\n"
                           + (proc.stderr or proc.stdout)[-6000:])


#: The wall-time budget of one chapter on 2 CPU cores, per scale.
BUDGET_S = {"ci": 45.0, "full": 300.0}


def _run_one(chapter_id: str, root: str, scale: str, force: bool, record: bool) -> tuple[str, str | None, float, bool, str]:
    """Execute one chapter (in a worker process): ``(id, notebook or None, seconds, cached, error)``."""
    from iclr25.book.environment import apply_reproducible_env
    from iclr25.book.registry import get_chapter

    apply_reproducible_env()
    c = get_chapter(chapter_id, Path(root))
    t0 = time.perf_counter()
    try:
        res = run_chapter(c, scale=scale, force=force, progress=False, record=record)
    except (ChapterFailed, MissingParameters) as err:
        log = getattr(err, "log", None)
        tail = ""
        if log is not None:
            lines = log.read_text(errors="replace").strip().splitlines()[-15:]
            tail = "\n    kernel log (last lines):\n" + "\n".join(f"    | {ln}" for ln in lines)
        return chapter_id, None, time.perf_counter() - t0, False, f"{err}{tail}"
    return chapter_id, str(res.notebook), res.wall_s, res.cached, ""


def build_book(scale: str = "full", *, force: bool = False, root: Path | None = None,
               record: bool = False, jobs: int = 1, budget_factor: float | None = None,
               echo: Callable[[str], None] = print) -> Path:
    """Execute what is not cached, then render the book (:func:`html_dir`). Returns the index
    page. Chapters on one torch thread run ``jobs`` at a time (each in its own process), the
    others alone. A failing chapter (or one without a parameters cell) is reported and the others
    still run; with ``budget_factor``, a chapter whose run took longer than that many times its
    budget (:data:`BUDGET_S`) fails too. The book is rendered only when every chapter passed."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    root = root or find_root()
    chs = chapters(root)
    timings = load_timings(root)
    failures: list[str] = []
    notebooks: dict[str, Path] = {}
    done = [0]
    limit = budget_factor * BUDGET_S[scale] if budget_factor else None

    def report(result: tuple[str, str | None, float, bool, str]) -> None:
        cid, nb, wall, cached, error = result
        done[0] += 1
        if nb is None:
            failures.append(error)
            echo(f"[{done[0]}/{len(chs)}] {cid} FAILED: {error}")
            return
        notebooks[cid] = Path(nb)
        how = f"cached (ran in {wall:.1f} s)" if cached else f"{wall:.1f} s"
        if limit is not None and wall > limit:
            failures.append(f"{cid}: {wall:.1f} s at {scale}, over {budget_factor}x its budget of "
                            f"{BUDGET_S[scale]:.0f} s ({limit:.0f} s)")
            how += f" OVER {budget_factor}x the {BUDGET_S[scale]:.0f} s budget"
        echo(f"[{done[0]}/{len(chs)}] {cid} {how}")

    alone, paired = schedule(chs, jobs, timings, scale)
    args = (str(root), scale, force, record)
    for c in alone:
        report(_run_one(c.id, *args))
    if paired:
        with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn")) as pool:
            for result in pool.map(_run_one, [c.id for c in paired], *zip(*[args] * len(paired))):
                report(result)
    if failures:
        raise RuntimeError(f"{len(failures)} chapter(s) failed; the book was not rendered:\n"
                           + "\n".join(failures))
    echo("rendering the book (Sphinx, warnings as errors) ...")
    out = html_dir(root, scale)
    render(stage(root, chs, notebooks, root / "_build" / f"src-{scale}"), out)
    write_downloads(root, chs, notebooks, out)
    return out / "index.html"
