"""The test command (``python -m iclr25 test``, what ``make test`` and CI run), stage by stage.

Each chapter is executed once per purpose: once by papermill for the test book (stage 3) and once
by nbval, as a reader runs it, for the regression check (stage 6).

1. package and runner unit tests, under a CPU kernel selection other than this machine's (what
   another CPU computes), so a kernel-sensitive test fails here and not on someone else's machine;
2. the unit tests again on the **newest releases** that ``pkg/pyproject.toml`` admits (their own
   virtual environment, no constraints; torch stays at the pinned CPU build; native kernels), so a
   removed numpy/scipy/matplotlib behaviour fails here before it fails for a reader; it runs beside
   stage 1, one core each;
3. every chapter at ``ci`` (network off, one-thread chapters two at a time), each within 1.5x its
   45 s budget and stopped at 3x, and the test book rendered with warnings as errors into
   ``_build/html-ci`` (the reader's ``_build/html`` is never touched);
4. that book opened in headless Chromium with the network off (math typeset, figures loaded,
   claims tables, launch buttons, no console errors; :mod:`iclr25.book.browser`);
5. golden freshness, and the ``ci`` executions of stage 3 compared with the goldens (native CPU
   kernels, nothing executed again; comparing nothing fails);
6. a fresh **reader environment** made from the built wheel and the reader package list
   (:mod:`iclr25.book.reader`), in which nbval re-executes the golden notebooks (the launch
   notebooks a reader opens) under the other CPU kernel selection, without a GPU, network off,
   two at a time, each stopped at 3x its budget.

Each stage prints its time; the command ends with ``stages: N passed, N failed``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

LATEST_VENV = "_build/venv-latest"
READER_VENV = "_build/venv-reader"
DIST = "_build/dist"
PINNED_TORCH = "torch==2.13.0"
#: A chapter fails the test when its ci run takes longer than this many times its budget.
BUDGET_FACTOR = 1.5
UNIT_TEST_ARGS = ["-q", "-p", "no:cacheprovider", "tests", "--ignore=tests/golden", "--ignore=tests/benchmarks"]


def offline_prefix() -> list[str]:
    """A command prefix that runs its command without network (a new network namespace with only
    the loopback up, which the Jupyter kernel needs), or ``[]`` where the machine does not allow it."""
    if not (shutil.which("unshare") and shutil.which("ip")):
        return []
    prefix = ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "offline"]
    ok = subprocess.run([*prefix, "true"], capture_output=True).returncode == 0
    return prefix if ok else []


def latest_env_commands(root: Path, python: str = sys.executable) -> list[list[str]]:
    """Commands that (re)make ``_build/venv-latest`` with the newest releases pyproject admits
    (pip's index; torch pinned to the CPU build) and run the package unit tests in it."""
    venv = root / LATEST_VENV
    vpy = str(venv / "bin" / "python")
    make = [] if (venv / "bin" / "python").is_file() else [[python, "-m", "venv", str(venv)]]
    return [*make,
            [vpy, "-m", "pip", "install", "-q", "--upgrade", "pip"],
            [vpy, "-m", "pip", "install", "-q", PINNED_TORCH],
            [vpy, "-m", "pip", "install", "-q", "--upgrade", "--upgrade-strategy", "eager",
             "-e", f"{root / 'pkg'}[test]", PINNED_TORCH],
            [vpy, "-m", "pip", "install", "-q", "--no-deps", "-r", str(root / "pkg" / "requirements-nodeps.txt")],
            [vpy, "-c", "import numpy, scipy, sklearn, matplotlib, torch, torch_geometric, ot;"
                        "print('newest releases: numpy', numpy.__version__, 'scipy', scipy.__version__,"
                        "'scikit-learn', sklearn.__version__, 'matplotlib', matplotlib.__version__,"
                        "'torch', torch.__version__, 'torch-geometric', torch_geometric.__version__,"
                        "'POT', ot.__version__)"],
            [vpy, "-m", "pytest", *UNIT_TEST_ARGS, "--ignore=tests/book", "--ignore=tests/test_project.py"]]


def _run(cmds: list[list[str]], env: dict[str, str] | None = None, log: Path | None = None) -> int:
    """Run ``cmds`` in order, stopping at the first failure; output to ``log`` when given."""
    out = open(log, "w") if log else None
    try:
        for cmd in cmds:
            rc = subprocess.run(cmd, env=env, stdout=out, stderr=subprocess.STDOUT if out else None).returncode
            if rc != 0:
                print(f"command failed (exit {rc}): {' '.join(cmd)}", file=out or sys.stdout, flush=True)
                return rc
        return 0
    finally:
        if out:
            out.close()


def reader_env_commands(root: Path, python: str = sys.executable) -> list[list[str]]:
    """Build the wheel of ``pkg/`` and make ``_build/venv-reader`` afresh from it and the reader
    package list, then check that its ``iclr25`` is the installed wheel."""
    import tomllib

    from iclr25.book.reader import build_wheel_commands, venv_commands

    version = tomllib.loads((root / "pkg" / "pyproject.toml").read_text())["project"]["version"]
    dist, venv = root / DIST, root / READER_VENV
    wheel = dist / f"iclr25-{version}-py3-none-any.whl"
    vpy = str(venv / "bin" / "python")
    return [[python, "-c", f"import shutil; shutil.rmtree({str(dist)!r}, ignore_errors=True)"],
            *build_wheel_commands(root, dist, python),
            *venv_commands(root, venv, wheel, python),
            [vpy, "-c", "import iclr25, sys; print('reader environment: iclr25', iclr25.__file__); "
                        f"sys.exit(0 if iclr25.__file__.startswith({str(venv)!r}) else 1)"]]


#: A stage: (key, title, commands, environment or None for this process's).
Stage = tuple[str, str, list[list[str]], "dict[str, str] | None"]
STAGE_KEYS = ("unit", "latest", "chapters", "browser", "compare", "nbval")


def stage_plan(root: Path, python: str = sys.executable) -> list[Stage]:
    """The stages of the test command, in order (:data:`STAGE_KEYS`)."""
    from iclr25.book.environment import describe, other_kernels_env

    py = python
    offline = offline_prefix()
    net_off = " (network off)" if offline else ""
    other = other_kernels_env()
    reader_py = str(root / READER_VENV / "bin" / "python")
    return [
        ("unit", f"1 package and runner tests, other CPU kernels ({describe(other)})",
         [[py, "-m", "pytest", *UNIT_TEST_ARGS]], {**os.environ, **other}),
        ("latest", "2 unit tests on the newest releases (needs PyPI; beside stage 1)", latest_env_commands(root, py), None),
        ("chapters", f"3 chapters at ci (budget x{BUDGET_FACTOR}) + test book render{net_off}",
         [[*offline, py, "-m", "iclr25", "book", "--scale", "ci", "--jobs", "2", "--budget-factor", str(BUDGET_FACTOR)]],
         None),
        ("browser", f"4 test book in headless Chromium{net_off}",
         [[*offline, py, "-m", "iclr25", "browser", "--html", "_build/html-ci"]], None),
        ("compare", "5 golden freshness + ci runs vs goldens (native kernels)",
         [[py, "-m", "iclr25", "golden", "--check", "--compare"]], None),
        ("nbval", f"6 reader environment (wheel + reader list), nbval on the goldens, other CPU kernels, "
                  f"no GPU{net_off}",
         [*reader_env_commands(root, py),
          [*offline, py, "-m", "iclr25", "golden", "--verify", "--kernels", "other", "--python", reader_py,
           "--jobs", "2"]], None),
    ]


def run_tests(root: Path, *, skip: set[str] | None = None) -> int:
    """Run the stages in order (each even if an earlier one failed; stage 2 beside stage 1); 0 when
    all passed."""
    skip = skip or set()
    os.chdir(root)
    stages = stage_plan(root)
    times: list[tuple[str, float, int]] = []
    background = None
    for key, name, cmds, env in stages:
        if key in skip:
            continue
        if key == "latest" and "unit" not in skip:  # beside stage 1: started before it, reported after
            continue
        if key == "unit" and "latest" not in skip:
            lkey, lname, lcmds, lenv = stages[1]
            log = root / "_build" / "stage-latest.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            background = (lname, time.perf_counter(), log, _start_background(lcmds, log))
        print(f"\n=== {name}", flush=True)
        t0 = time.perf_counter()
        rc = _run(cmds, env)
        times.append((name, time.perf_counter() - t0, rc))
        print(f"=== {name}: {'ok' if rc == 0 else f'FAILED (exit {rc})'} in {time.perf_counter() - t0:.1f} s",
              flush=True)
        if background is not None:
            bname, bt0, blog, thread = background
            background = None
            print(f"\n=== {bname}", flush=True)
            thread.join()
            print(blog.read_text(errors="replace").rstrip(), flush=True)
            rc = thread.rc  # type: ignore[attr-defined]
            times.append((bname, time.perf_counter() - bt0, rc))
            print(f"=== {bname}: {'ok' if rc == 0 else f'FAILED (exit {rc})'} in {time.perf_counter() - bt0:.1f} s "
                  "(beside stage 1)", flush=True)
    print("\nstage times (stages 1 and 2 ran side by side):")
    for name, secs, rc in times:
        print(f"  {name[:70]:70s} {secs:7.1f} s  {'ok' if rc == 0 else 'FAILED'}")
    print(f"  {'total (wall)':70s} {time.perf_counter() - _T0:7.1f} s")
    failed = sum(rc != 0 for _, _, rc in times)
    print(f"\nstages: {len(times) - failed} passed, {failed} failed")
    return 1 if failed else 0


_T0 = time.perf_counter()


def _start_background(cmds: list[list[str]], log: Path):
    """Run ``cmds`` in a thread (output to ``log``); the thread's ``rc`` holds the exit status."""
    import threading

    def work() -> None:
        t.rc = _run(cmds, None, log)  # type: ignore[attr-defined]

    t = threading.Thread(target=work, daemon=True)
    t.rc = 1  # type: ignore[attr-defined]
    t.start()
    return t
