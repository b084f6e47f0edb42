"""``python -m iclr25``: list, run, book, golden, readme, notebooks, publish, browser, test.

Every command reads the chapters from ``_toc.yml``. All input is checked before anything runs, and
an error is printed as one line. Exit status: 0 ok; 1 a chapter or a check failed; 2 bad input (an
unknown chapter, scale or parameter, flags that do not go together, a malformed toc, or a command
that needs the ``[book]`` extra run without it). ``--help`` and ``list`` need only the core package;
the book tools (nbformat, papermill, jupytext, ...) are imported inside the commands that use them.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from iclr25.common import SCALES

BOOK_TOOLS = frozenset({"nbformat", "nbclient", "papermill", "jupytext", "jupyter_book", "sphinx",
                        "sphinx_external_toc", "myst_nb", "nbval", "ipykernel"})
NEEDS_BOOK = "this command needs the book tools: pip install 'iclr25[book]'"


class BadInput(ValueError):
    """Command-line input that is refused before anything runs (exit status 2)."""


def _root() -> Path:
    from iclr25.book.registry import find_root

    return find_root()


def cmd_list(args: argparse.Namespace) -> int:
    from iclr25.book.registry import chapters
    from iclr25.book.timings import load_timings

    root = _root()
    timings = load_timings(root)
    rows = [("id", "part", "title", "ci s", "full s")]
    for c in chapters(root):
        t = timings.get(c.id, {})
        rows.append((c.id, c.part, c.title[:60], str(t.get("ci", "-")), str(t.get("full", "-"))))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    for r in rows:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from iclr25.book.params import check_overrides, parse_overrides
    from iclr25.book.registry import get_chapter

    chapter = get_chapter(args.chapter, _root())
    overrides = parse_overrides(args.param or [])
    for fixed in ("scale", "seed"):
        if fixed in overrides:
            raise BadInput(f"set {fixed} with --{fixed}, not -p")
    check_overrides(chapter, overrides)  # unknown or ill-typed parameters, before anything is printed
    from iclr25.book.runner import run_chapter

    print(f"running {chapter.id} at scale={args.scale} seed={args.seed} ...", flush=True)
    res = run_chapter(chapter, scale=args.scale, seed=args.seed, overrides=overrides, force=args.force,
                      record=args.record)
    state = "cached, not re-executed" if res.cached else "executed"
    print(f"{chapter.id}: {state} in {res.wall_s:.1f} s -> {res.notebook.relative_to(chapter.root)}")
    if args.record and not res.cached:
        print("time recorded in book/timings.json (`python -m iclr25 readme` copies it into README.md)")
    return 0


def cmd_book(args: argparse.Namespace) -> int:
    from iclr25.book.build import build_book

    index = build_book(args.scale, force=args.force, root=_root(), record=args.record, jobs=args.jobs,
                       budget_factor=args.budget_factor)
    print(f"book written: {index}")
    return 0


def golden_action(args: argparse.Namespace) -> str:
    """What ``golden`` was asked to do: "verify", "check" or "regenerate" (only when asked plainly,
    ``golden [IDS...] [--force]``). Raises :class:`BadInput` for flags that do not go together."""
    if args.compare and not args.check:
        raise BadInput("golden --compare needs --check (it compares the stored ci runs with the goldens)")
    if args.kernels is not None and not args.verify:
        raise BadInput("golden --kernels needs --verify (it selects the CPU kernels nbval runs under)")
    if (args.python is not None or args.jobs != 1 or args.timeout is not None) and not args.verify:
        raise BadInput("golden --python, --jobs and --timeout need --verify (they say how nbval runs the goldens)")
    if args.timeout is not None and not args.timeout > 0:
        raise BadInput(f"golden --timeout must be a positive number of seconds, not {args.timeout}")
    if args.verify and args.check:
        raise BadInput("golden --verify and --check are separate checks: give one of them")
    if args.force and (args.verify or args.check):
        raise BadInput("golden --force only applies when regenerating (without --check or --verify)")
    return "verify" if args.verify else "check" if args.check else "regenerate"


def cmd_golden(args: argparse.Namespace) -> int:
    from iclr25.book.registry import chapters, get_chapter

    action = golden_action(args)
    root = _root()
    chs = [get_chapter(n, root) for n in args.chapters] if args.chapters else chapters(root)
    from iclr25.book.golden import check_fresh, make_golden

    if action == "verify":
        from iclr25.book.golden import verify_goldens

        failures = verify_goldens(chs, kernels=args.kernels or "other", python=args.python, jobs=args.jobs,
                                  timeout_s=args.timeout)
        print(f"nbval: {len(chs) - len(failures)} golden notebook(s) passed, {len(failures)} failed")
        for f in failures:
            print(f"  {f}")
        return 1 if failures else 0
    if action == "check":
        problems = [p for p in (check_fresh(c) for c in chs) if p]
        for p in problems:
            print(p)
        print(f"golden notebooks: {len(chs) - len(problems)} fresh, {len(problems)} stale")
        if args.compare:
            problems += _compare_ci_runs(chs)
        return 1 if problems else 0
    for c in chs:
        path = make_golden(c, force=args.force)
        print(f"{c.id}: {path.relative_to(root)}")
    return 0


def _compare_ci_runs(chs: list) -> list[str]:
    """Compare each chapter's stored ``ci`` execution (made by ``book --scale ci`` on this
    machine's native kernels, without a GPU) with its golden; no chapter is executed again."""
    from iclr25.book.golden import NO_GPU, compare_with_golden
    from iclr25.book.runner import find_result

    problems, compared = [], 0
    for c in chs:
        path = find_result(c, scale="ci", seed=0, env=NO_GPU)
        if path is None:
            print(f"{c.id}: no ci execution of the current code without a GPU to compare (nbval still checks it)")
            continue
        compared += 1
        msg = compare_with_golden(c, path)
        if msg:
            print(msg)
            problems.append(msg)
    print(f"ci executions vs golden notebooks (native kernels): {compared - len(problems)} equal, "
          f"{len(problems)} differ, {len(chs) - compared} not compared")
    if compared == 0:
        problems.append("no ci execution was compared with a golden: run `python -m iclr25 book --scale ci` "
                        "first (without a GPU)")
        print(problems[-1])
    return problems


def cmd_readme(args: argparse.Namespace) -> int:
    from iclr25.book.readme import update_readme

    changed = update_readme(_root(), check=args.check)
    if args.check and changed:
        print("README chapter table is out of date with _toc.yml; run `python -m iclr25 readme`")
        return 1
    print("README chapter table " + ("updated" if changed else "already up to date"))
    return 0


def cmd_notebooks(args: argparse.Namespace) -> int:
    from iclr25.book.launch import check_tree, write_launch_notebooks

    t0 = time.perf_counter()
    out = write_launch_notebooks(_root(), Path(args.out) if args.out else None)
    problems = check_tree(out)
    for p in problems:
        print(p)
    n = len(list(out.glob("book/*/*.ipynb")))
    print(f"launch notebooks: {n} written under {out} in {time.perf_counter() - t0:.1f} s, "
          f"{len(problems)} problem(s) (MyST left, outputs, install cell)")
    return 1 if problems else 0


def cmd_publish(args: argparse.Namespace) -> int:
    from iclr25.book.publish import publish

    publish(_root(), scale=args.scale, out=Path(args.out) if args.out else None,
            allow_dirty=args.allow_dirty, execute=not args.no_execute_check)
    return 0


def cmd_browser(args: argparse.Namespace) -> int:
    from iclr25.book.browser import check_book

    root = _root()
    html = Path(args.html) if args.html else root / "_build" / "html"
    shots = Path(args.screenshots) if args.screenshots else root / "_build"
    problems = check_book(html, root, screenshots=shots)
    return 1 if problems else 0


def cmd_test(args: argparse.Namespace) -> int:
    from iclr25.book.testing import run_tests

    return run_tests(_root(), skip=set(args.skip or []))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m iclr25", description="ICLR 2025 in Code: the book's runner")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("list", help="chapters with part, title and last measured times").set_defaults(fn=cmd_list)
    r = sub.add_parser("run", help="execute one chapter with papermill")
    r.add_argument("chapter", help="chapter id, e.g. theory/svgd-rates")
    r.add_argument("--scale", choices=SCALES, default="full")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("-p", "--param", action="append", metavar="NAME=VALUE",
                   help="override a parameter of the chapter's parameters cell")
    r.add_argument("--force", action="store_true", help="re-execute even if cached")
    r.add_argument("--record", action="store_true",
                   help="write the wall time into book/timings.json (measure on a quiet 2-core machine)")
    r.set_defaults(fn=cmd_run)
    b = sub.add_parser("book", help="execute uncached chapters and render _build/html")
    b.add_argument("--scale", choices=SCALES, default="full")
    b.add_argument("--force", action="store_true", help="re-execute every chapter")
    b.add_argument("--record", action="store_true", help="write the wall times into book/timings.json")
    b.add_argument("--jobs", type=int, default=1, help="chapters on one torch thread run this many at a time")
    b.add_argument("--budget-factor", type=float, default=None,
                   help="fail a chapter whose run took more than this many times its budget (45 s ci, 300 s full)")
    b.set_defaults(fn=cmd_book)
    g = sub.add_parser("golden", help="regenerate tests/golden/<id>.ipynb at ci scale, or check them")
    g.add_argument("chapters", nargs="*", help="chapter ids (default: all)")
    g.add_argument("--check", action="store_true", help="only check that golden notebooks are fresh")
    g.add_argument("--compare", action="store_true",
                   help="with --check: also compare the stored ci executions with the goldens")
    g.add_argument("--verify", action="store_true",
                   help="re-execute the golden notebooks with nbval and compare their checked cells")
    g.add_argument("--kernels", choices=("other", "native"), default=None,
                   help="with --verify: CPU kernel selection (default: other than this machine's)")
    g.add_argument("--python", default=None,
                   help="with --verify: the Python whose environment runs the notebooks (default: this one)")
    g.add_argument("--jobs", type=int, default=1, help="with --verify: one-thread chapters this many at a time")
    g.add_argument("--timeout", type=float, default=None,
                   help="with --verify: seconds before one chapter's nbval is stopped (default: 3x the ci budget)")
    g.add_argument("--force", action="store_true", help="when regenerating: re-execute even if cached")
    g.set_defaults(fn=cmd_golden)
    m = sub.add_parser("readme", help="rewrite the README chapter table from _toc.yml and timings")
    m.add_argument("--check", action="store_true", help="fail if the table is out of date")
    m.set_defaults(fn=cmd_readme)
    n = sub.add_parser("notebooks", help="write the launch notebooks (Colab/Binder) and check them")
    n.add_argument("--out", help="output folder (default _build/notebooks)")
    n.set_defaults(fn=cmd_notebooks)
    t = sub.add_parser("test", help="the full test suite, stage by stage, with times")
    t.add_argument("--skip", action="append", choices=("unit", "latest", "chapters", "browser", "compare", "nbval"),
                   help="skip a stage (for local iteration; CI runs them all)")
    t.set_defaults(fn=cmd_test)
    pb = sub.add_parser("publish", help="from one clean commit: the HTML book, the notebooks tree and Binder files")
    pb.add_argument("--scale", choices=SCALES, default="full")
    pb.add_argument("--out", help="output folder (default _build/publish)")
    pb.add_argument("--allow-dirty", action="store_true",
                    help="publish although tracked files differ from HEAD (the notebooks then pin HEAD)")
    pb.add_argument("--no-execute-check", action="store_true",
                    help="skip running the golden notebooks (the launch notebooks with ci outputs) with nbval")
    pb.set_defaults(fn=cmd_publish)
    bw = sub.add_parser("browser", help="check the built book in headless Chromium, network off")
    bw.add_argument("--html", help="the built book (default _build/html)")
    bw.add_argument("--screenshots", help="where the screenshots go (default _build)")
    bw.set_defaults(fn=cmd_browser)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns the exit status (0 ok, 1 failed, 2 bad input)."""
    from iclr25.book.environment import apply_reproducible_env

    args = parser().parse_args(argv)
    apply_reproducible_env()
    try:
        return args.fn(args)
    except ImportError as err:
        if (err.name or "").partition(".")[0] not in BOOK_TOOLS:
            raise
        print(f"error: {NEEDS_BOOK}", file=sys.stderr)
        return 2
    except (ValueError, FileNotFoundError) as err:  # BadInput, UnknownChapter, BadParameter, TocError, ...
        print(f"error: {err}", file=sys.stderr)
        return 2
    except RuntimeError as err:  # ChapterFailed and other failures of a chapter or a check
        print(f"error: {err}", file=sys.stderr)
        return 1
