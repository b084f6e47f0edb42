"""What every chapter needs: scale handling, seeding, device choice, progress bars, widgets.

A chapter starts with::

    from iclr25.common import start, by_scale
    device = start(scale, seed)          # validates scale, seeds everything, picks the device
    n_steps = by_scale(scale, ci=200, full=2000)
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, TypeVar

import numpy as np

from iclr25.common.cache import atomic_write, cache_dir, cached  # noqa: F401 - re-exported

SCALES = ("ci", "full")
"""The two scales every chapter supports: ``ci`` (<= 45 s on 2 cores) and ``full`` (<= 5 min)."""

#: Set by the runner (``python -m iclr25 run``/``book``) while it executes a chapter headlessly.
HEADLESS_ENV = "ICLR25_HEADLESS"

T = TypeVar("T")


def check_scale(scale: str) -> str:
    """Return ``scale`` if it is one of :data:`SCALES`, else raise ``ValueError`` naming them."""
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; valid scales: {', '.join(SCALES)}")
    return scale


def by_scale(scale: str, *, ci: T, full: T) -> T:
    """Pick the value for ``scale``: ``by_scale("ci", ci=64, full=512) == 64``."""
    return ci if check_scale(scale) == "ci" else full


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (CPU and CUDA) from one integer."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a hard dependency of the book
        return
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def device() -> "torch.device":  # noqa: F821 - torch imported lazily
    """``cuda`` when a GPU is present, else ``cpu``."""
    import torch

    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def gpu_reproducible() -> None:
    """On a GPU, float32 matrix products and convolutions in full IEEE precision, and cuDNN's
    deterministic algorithms.

    CUDA's default lets cuDNN convolutions (and, where enabled, matrix products) round their inputs
    to TF32, a 10-bit mantissa, and lets cuDNN pick a convolution algorithm per input shape by timing:
    an identity the book checks to 1e-3 (a DDPM inversion reconstructing its input, a fixed point of
    guidance) then fails on a GPU and holds on a CPU. Without a GPU nothing changes: CPU float32 is
    already IEEE.
    """
    import torch

    if not torch.cuda.is_available():
        return
    if hasattr(torch.backends, "fp32_precision"):   # torch >= 2.9
        torch.backends.fp32_precision = "ieee"
    else:  # pragma: no cover - older torch
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


def start(scale: str, seed: int = 0, *, threads: int | None = None) -> "torch.device":  # noqa: F821
    """Set up a chapter: validate ``scale``, seed every RNG, fix torch threads, keep float32 in full
    precision on a GPU (:func:`gpu_reproducible`), pick the device.

    ``threads`` defaults to ``min(2, cpu count)`` so that numbers printed on the reference
    machine (2 cores) do not depend on how many cores a reader has.
    """
    import torch

    check_scale(scale)
    torch.set_num_threads(threads or min(2, os.cpu_count() or 1))
    seed_everything(seed)
    gpu_reproducible()
    inline_figures()
    try:
        import matplotlib as mpl

        mpl.rcParams.update({"figure.dpi": 100, "figure.figsize": (6.4, 4.0),
                             "axes.grid": True, "grid.alpha": 0.3})
    except ImportError:  # pragma: no cover
        pass
    return device()


def inline_figures() -> None:
    """In a Jupyter kernel, make figures show in the notebook even when ``MPLBACKEND`` names a
    non-interactive backend: the book's runner sets ``Agg`` for its own process, kernels inherit it,
    and ``plt.show()`` then drew nothing, so executed chapters had no figures. Outside a kernel
    (a script, the tests) nothing changes."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with the kernel
        return
    shell = get_ipython()
    if shell is None or not hasattr(shell, "kernel"):
        return
    import matplotlib

    if "inline" not in matplotlib.get_backend():
        shell.run_line_magic("matplotlib", "inline")


def headless() -> bool:
    """True while the book's runner executes the notebook (no live widget frontend)."""
    return os.environ.get(HEADLESS_ENV, "") == "1"


def progress(iterable: Iterable[T], **kwargs: Any) -> Iterable[T]:
    """A ``tqdm.auto`` progress bar; plain-text and quiet when run headlessly by the book runner."""
    if headless():
        from tqdm import tqdm

        kwargs.setdefault("disable", True)
        return tqdm(iterable, **kwargs)
    from tqdm.auto import tqdm

    return tqdm(iterable, **kwargs)


def control_default(control: Any) -> Any:
    """The value a control of :func:`explore` starts at: a widget's ``value``; for an abbreviation
    the value ``ipywidgets.interact`` would start at (``(lo, hi[, step])``: the middle, on a step;
    a list or dict of options: the first; a plain value: itself). Computed without ipywidgets, so
    the static figure does not depend on which version (7.x or 8.x) is installed, or on any."""
    if hasattr(control, "value") and not isinstance(control, (tuple, list, dict)):
        return control.value
    if isinstance(control, tuple) and 2 <= len(control) <= 3 and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in control):
        lo, hi = control[0], control[1]
        step = control[2] if len(control) == 3 else None
        diff = hi - lo
        value = lo + diff / 2
        if not isinstance(value, type(diff)):  # integer bounds: an integer in the middle
            value = lo + diff // 2
        if step is not None:
            value = lo + int((value - lo) / step) * step
        return value
    if isinstance(control, dict):
        return next(iter(control.values()))
    if isinstance(control, (list, tuple)) and control:
        first = control[0]
        return first[1] if isinstance(first, tuple) and len(first) == 2 and isinstance(first[0], str) else first
    return control


def explore(fn: Callable[..., Any], **controls: Any) -> Any:
    """An ipywidgets control for a reader, with a static fallback for the rendered book.

    ``controls`` are ipywidgets abbreviations (``N=(16, 256, 16)``) or widgets, as for
    :func:`ipywidgets.interact`. Headless (the book build), ``fn`` is called once with each
    control's default value (:func:`control_default`), so the page shows a static figure. With a
    reader, the controls work with ipywidgets 7.x (what Colab ships) and 8.x; where no widgets can
    be shown (ipywidgets missing or failing) the static figure is drawn instead, with a note.
    """
    defaults = {name: control_default(ctl) for name, ctl in controls.items()}
    if headless():
        return fn(**defaults)
    try:
        import ipywidgets as widgets

        if "google.colab" in sys.modules and int(widgets.__version__.split(".")[0]) >= 8:
            from google.colab import output  # type: ignore[import-not-found]

            output.enable_custom_widget_manager()  # Colab shows ipywidgets 8 through it
        return widgets.interact(fn, **controls)
    except Exception as err:  # noqa: BLE001 - any failure of the widget layer: show the static figure
        print(f"(interactive controls unavailable: {type(err).__name__}: {err}; "
              "showing the figure at the default values)")
        return fn(**defaults)
