"""iclr25.risk: spectral risks, the permutahedron, and stochastic optimisers for them (SOREL and
the smoothing-based baselines LSVRG, Prospect, SaddleSAGA, and minibatch SGD)."""

from .optimizers import (METHODS, Trace, lsvrg, optimize, prospect, saddle_saga, sorel,
                         spectral_sgd)
from .problems import DATASETS, LOSSES, LinearProblem, load_problem
from .solvers import (Reference, dual_value, kkt_weights, minimize_smoothed, reference_optimum,
                      smoothed_objective)
from .spectral import (SPECTRA, coarsen_spectrum, project_permutahedron, shift_penalty,
                       smoothed_risk, smoothed_weights, smoothing_bound, spectral_risk,
                       spectral_weights, vertex_weights)

__all__ = [
    "METHODS", "Trace", "lsvrg", "optimize", "prospect", "saddle_saga", "sorel", "spectral_sgd",
    "DATASETS", "LOSSES", "LinearProblem", "load_problem",
    "Reference", "dual_value", "kkt_weights", "minimize_smoothed", "reference_optimum",
    "smoothed_objective",
    "SPECTRA", "coarsen_spectrum", "project_permutahedron", "shift_penalty", "smoothed_risk",
    "smoothed_weights", "smoothing_bound", "spectral_risk", "spectral_weights", "vertex_weights",
]
