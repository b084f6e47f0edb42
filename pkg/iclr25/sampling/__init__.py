"""iclr25.sampling: SVGD, Stein kernels and the kernel Stein discrepancy (KSD).

Kernels (:mod:`.kernels`) give Gram matrices, SVGD repulsions and Stein kernels; :mod:`.stein`
turns them into KSD^2; :mod:`.svgd` runs SVGD (and a Langevin baseline); :mod:`.targets` holds
score functions; :mod:`.metrics` closed-form Gaussian KL and W2 by optimal transport (POT); :mod:`.rates` exponents in N,
the verdict rule and closed-form i.i.d. references.
All functions take torch tensors of particles ``(..., N, d)``; use float64.
"""

from .kernels import IMQ, RBF, Kernel, Linear, Matern52, RadialKernel, SumKernel, sq_dists
from .metrics import (gaussian_kl, sliced_wasserstein2_std_normal, wasserstein2,
                      wasserstein2_std_normal_1d)
from .rates import (exponent, gaussian_langevin_law, iid_expected_ksd2_rbf, iid_expected_w2sq_gaussian_1d,
                    iid_expected_w2sq_std_normal_1d, local_slopes, lsq_slope, normal_order_means, ratio_slope,
                    verdict_below)
from .stein import KSD_KINDS, ksd, ksd_from_scores, stein_kernel_matrix
from .svgd import svgd, svgd_direction, svgd_jacobian_rbf_std_normal, svgd_step, ula
from .targets import (gaussian_mixture_score, gaussian_score, logistic_posterior_score,
                      standard_gaussian_score)

__all__ = [
    "Kernel", "RadialKernel", "RBF", "IMQ", "Matern52", "Linear", "SumKernel", "sq_dists",
    "stein_kernel_matrix", "ksd", "ksd_from_scores", "KSD_KINDS",
    "svgd_direction", "svgd_step", "svgd", "ula", "svgd_jacobian_rbf_std_normal",
    "gaussian_score", "standard_gaussian_score", "gaussian_mixture_score", "logistic_posterior_score",
    "gaussian_kl", "wasserstein2", "wasserstein2_std_normal_1d", "sliced_wasserstein2_std_normal",
    "verdict_below", "lsq_slope", "local_slopes", "exponent", "ratio_slope", "gaussian_langevin_law",
    "iid_expected_ksd2_rbf", "normal_order_means", "iid_expected_w2sq_std_normal_1d", "iid_expected_w2sq_gaussian_1d",
]
