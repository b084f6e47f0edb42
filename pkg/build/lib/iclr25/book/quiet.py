"""Keep the build's output to one line per chapter: what Jupyter kernels print goes to a file.

A kernel started by papermill inherits the parent's standard error, and ipykernel prints
``[IPKernelApp] WARNING | Kernel is running over TCP without encryption ...`` at every start and
``KeyboardInterrupt caught in kernel`` at shutdown. :func:`captured_stderr` points file descriptor 2
at a temporary file while a chapter runs (so the kernel, started inside, writes there for its
whole life); the caller shows :meth:`Captured.text` only when the chapter failed.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from typing import Iterator


class Captured:
    """What was written to standard error inside :func:`captured_stderr`."""

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile(mode="w+b")

    def text(self) -> str:
        """Everything written so far (also what a still running kernel wrote)."""
        self._file.flush()
        self._file.seek(0)
        return self._file.read().decode("utf-8", errors="replace")

    def close(self) -> None:
        self._file.close()


@contextlib.contextmanager
def captured_stderr(enabled: bool = True) -> Iterator[Captured]:
    """Redirect file descriptor 2 (and ``sys.stderr``) to a temporary file inside the block.

    Subprocesses started inside keep writing to that file after the block ends; the file is read
    through the returned :class:`Captured` and removed when it is garbage-collected."""
    cap = Captured()
    if not enabled:
        yield cap
        return
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        os.dup2(cap._file.fileno(), 2)
        yield cap
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
