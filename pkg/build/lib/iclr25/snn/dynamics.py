"""Sub-threshold dynamics of the two-compartment neuron: state space, stability, frequency responses.

Below threshold (no spikes, no resets) the TS-LIF step is linear. With the state
``x = [U_d, U_s]`` and the soma reading the *updated* dendrite,

    x[t] = A x[t-1] + b I[t],
    A = [[alpha_d, -beta_sd], [-beta_ds alpha_d, alpha_s + beta_ds beta_sd]],
    b = [gamma_d, gamma_s - beta_ds gamma_d].

Its z-transform gives the transfer functions from the input current to each membrane,

    H_d(z) = (gamma_d - (gamma_d alpha_s + beta_sd gamma_s) z^-1) / D(z),
    H_s(z) = ((gamma_s - beta_ds gamma_d) - gamma_s alpha_d z^-1) / D(z),
    D(z)   = 1 - (alpha_d + alpha_s + beta_ds beta_sd) z^-1 + alpha_d alpha_s z^-2,

and the frequency response is ``H(e^{i omega})``. ``D`` is the characteristic polynomial of ``A``
(trace ``alpha_d + alpha_s + beta_ds beta_sd``, determinant ``alpha_d alpha_s``), so the
recurrence is stable iff (Jury) ``|det A| < 1`` and ``|tr A| < 1 + det A``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class TwoCompartmentParams:
    """The six scalars of the linear part of TS-LIF (defaults: the official initialisation)."""

    alpha_d: float = 0.8
    gamma_d: float = 0.2
    alpha_s: float = 0.3
    gamma_s: float = 0.7
    beta_sd: float = 0.1
    beta_ds: float = 0.8

    def asdict(self) -> dict[str, float]:
        """The parameters as a plain dict (keyword arguments of :class:`TwoCompartmentParams`)."""
        return asdict(self)


def state_space(p: TwoCompartmentParams) -> tuple[np.ndarray, np.ndarray]:
    """``(A, b)`` of ``x[t] = A x[t-1] + b I[t]`` for ``x = [U_d, U_s]``: shapes ``(2, 2)``, ``(2,)``."""
    A = np.array([[p.alpha_d, -p.beta_sd],
                  [-p.beta_ds * p.alpha_d, p.alpha_s + p.beta_ds * p.beta_sd]])
    b = np.array([p.gamma_d, p.gamma_s - p.beta_ds * p.gamma_d])
    return A, b


def transfer_coefficients(p: TwoCompartmentParams) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Numerator and denominator coefficients in powers of ``z^-1`` for each compartment.

    Returns ``{"dendrite": (num, den), "soma": (num, den)}`` in the convention of
    :func:`scipy.signal.freqz` (``num`` shape ``(2,)``, ``den`` shape ``(3,)``).
    """
    den = np.array([1.0, -(p.alpha_d + p.alpha_s + p.beta_ds * p.beta_sd), p.alpha_d * p.alpha_s])
    num_d = np.array([p.gamma_d, -(p.gamma_d * p.alpha_s + p.beta_sd * p.gamma_s)])
    num_s = np.array([p.gamma_s - p.beta_ds * p.gamma_d, -p.gamma_s * p.alpha_d])
    return {"dendrite": (num_d, den), "soma": (num_s, den)}


def frequency_response(p: TwoCompartmentParams, omega: np.ndarray) -> dict[str, np.ndarray]:
    """``H_d(e^{i omega})`` and ``H_s(e^{i omega})`` (complex, shape of ``omega``, radians per step)."""
    zinv = np.exp(-1j * np.asarray(omega, dtype=float))
    out = {}
    for name, (num, den) in transfer_coefficients(p).items():
        out[name] = (num[0] + num[1] * zinv) / (den[0] + den[1] * zinv + den[2] * zinv**2)
    return out


def lif_frequency_response(beta: float, omega: np.ndarray, gain: float = 1.0) -> np.ndarray:
    """Frequency response ``gain / (1 - beta e^{-i omega})`` of a one-compartment leaky membrane."""
    return gain / (1 - beta * np.exp(-1j * np.asarray(omega, dtype=float)))


def poles(p: TwoCompartmentParams) -> np.ndarray:
    """The two poles (roots of ``z^2 D(z)``, the eigenvalues of ``A``), complex, shape ``(2,)``."""
    return np.roots(transfer_coefficients(p)["dendrite"][1]).astype(complex)


def spectral_radius(p: TwoCompartmentParams) -> float:
    """``max |eigenvalue of A|``: the sub-threshold recurrence is stable iff it is below 1."""
    return float(np.abs(np.linalg.eigvals(state_space(p)[0])).max())


def jury_stable(p: TwoCompartmentParams) -> bool:
    """Jury's test for the second-order denominator: ``|det A| < 1`` and ``|tr A| < 1 + det A``."""
    A, _ = state_space(p)
    tr, det = np.trace(A), np.linalg.det(A)
    return bool(abs(det) < 1 and abs(tr) < 1 + det)


def simulate_linear(p: TwoCompartmentParams, current: np.ndarray) -> np.ndarray:
    """Run the sub-threshold recurrence from rest on ``current`` ``(T,)``: membranes ``(T, 2)`` = [U_d, U_s]."""
    A, b = state_space(p)
    x = np.zeros(2)
    out = np.empty((len(current), 2))
    for t, i in enumerate(current):
        x = A @ x + b * i
        out[t] = x
    return out


def band_ratio(response: np.ndarray) -> float:
    """``|H(pi)| / |H(0)|`` for a response sampled on ``omega`` from 0 to pi (first and last entries):
    below 1 a low-pass, above 1 a high-pass (DC-suppressed) compartment."""
    return float(np.abs(response[-1]) / np.abs(response[0]))
