"""The test command (``python -m iclr25 test``, what ``make test`` and CI run), stage by stage.

1. package and runner unit tests;
2. the unit tests again on the **newest releases** that ``pkg/pyproject.toml`` admits (its own
   virtual environment, no constraints file; torch stays at the pinned CPU build), so a removed
   numpy/scipy/matplotlib behaviour fails here before it fails for a reader;
3. every chapter at ``ci`` (network off) and the test book rendered with warnings as errors into
   ``_build/html-ci`` (the reader's ``_build/html`` is never touched);
4. that book opened in headless Chromium with the network off (math typeset, figures loaded,
   claims tables, launch buttons, no console errors; :mod:`iclr25.book.browser`);
5. the launch notebooks (Colab/Binder) written, checked free of MyST, and executed at ``ci`` with
   the package from their own tree (:mod:`iclr25.book.launch`);
6. golden freshness, and the ``ci`` executions of stage 3 compared with the goldens (native CPU
   kernels, nothing executed again);
7. nbval re-executes the golden notebooks under a CPU kernel selection other than this machine's
   (what another CPU computes), without a GPU and with the network off.

Each stage prints its time; the command ends with ``stages: N passed, N failed``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

CI_BUDGET_S = 45.0
LATEST_VENV = "_build/venv-latest"
PINNED_TORCH = "torch==2.13.0"
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


def _run(cmds: list[list[str]], env: dict[str, str] | None = None) -> int:
    for cmd in cmds:
        rc = subprocess.run(cmd, env=env).returncode
        if rc != 0:
            print(f"command failed (exit {rc}): {' '.join(cmd)}", flush=True)
            return rc
    return 0


def run_tests(root: Path, *, skip: set[str] | None = None) -> int:
    """Run the stages in order (each even if an earlier one failed); 0 when all passed."""
    from iclr25.book.environment import describe, golden_env, other_kernels_env

    skip = skip or set()
    py = sys.executable
    os.chdir(root)
    offline = offline_prefix()
    net_off = " (network off)" if offline else ""
    other = describe(other_kernels_env())
    stages: list[tuple[str, str, list[list[str]], dict[str, str] | None]] = [
        ("unit", "1 package and runner tests", [[py, "-m", "pytest", *UNIT_TEST_ARGS]], None),
        ("latest", "2 unit tests on the newest releases (needs PyPI)", latest_env_commands(root, py), None),
        ("chapters", f"3 chapters at ci + test book render{net_off}",
         [[*offline, py, "-m", "iclr25", "book", "--scale", "ci"]], None),
        ("browser", f"4 test book in headless Chromium{net_off}",
         [[*offline, py, "-m", "iclr25", "browser", "--html", "_build/html-ci"]], None),
        ("launch", f"5 launch notebooks at ci from their own tree{net_off}",
         [[*offline, py, "-m", "iclr25", "notebooks", "--execute-ci"]], None),
        ("compare", "6 golden freshness + ci runs vs goldens (native kernels)",
         [[py, "-m", "iclr25", "golden", "--check", "--compare"]], None),
        ("nbval", f"7 nbval on golden notebooks, other CPU kernels ({other}), no GPU{net_off}",
         [[*offline, py, "-m", "iclr25", "golden", "--verify", "--kernels", "other"]], golden_env()),
    ]
    times: list[tuple[str, float, int]] = []
    for key, name, cmds, env in stages:
        if key in skip:
            continue
        print(f"\n=== {name}", flush=True)
        t0 = time.perf_counter()
        rc = _run(cmds, env)
        times.append((name, time.perf_counter() - t0, rc))
        print(f"=== {name}: {'ok' if rc == 0 else f'FAILED (exit {rc})'} in {time.perf_counter() - t0:.1f} s",
              flush=True)
    print("\nstage times:")
    for name, secs, rc in times:
        print(f"  {name[:70]:70s} {secs:7.1f} s  {'ok' if rc == 0 else 'FAILED'}")
    print(f"  {'total':70s} {sum(t for _, t, _ in times):7.1f} s")
    budget_report(root)
    failed = sum(rc != 0 for _, _, rc in times)
    print(f"\nstages: {len(times) - failed} passed, {failed} failed")
    return 1 if failed else 0


def budget_report(root: Path) -> None:
    """Each chapter's latest measured ci time on this machine against the 45 s budget."""
    from iclr25.book.cache import latest
    from iclr25.book.registry import chapters

    print(f"\nchapter times at ci on this machine (budget {CI_BUDGET_S:.0f} s on 2 cores):")
    for c in chapters(root):
        found = latest(c, scale="ci")
        if found is None:
            print(f"  {c.id:32s}   not executed")
            continue
        wall = float(found[1]["wall_s"])
        print(f"  {c.id:32s} {wall:6.1f} s  {'ok' if wall <= CI_BUDGET_S else 'OVER BUDGET'}")
