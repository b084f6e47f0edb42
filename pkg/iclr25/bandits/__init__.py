"""Batched linear contextual bandits: environments, the minimax batch grid, batched elimination
with Exp-Policy exploration (Zhang, Ji & Zhou, ICLR 2025) and the standard baselines."""

from .algorithms import (DESIGNS, Estimator, RunResult, batch_schedule, batched_elimination,
                         batched_linucb, batches_needed, eliminate, elimination_beta,
                         elimination_u, ridge_from_stats,
                         exp_policy_design, exp_policy_mixture_act, exp_policy_online,
                         explore_then_commit, fit_loglog_slope, gamma, geometric_schedule, linucb,
                         linucb_beta, ridge_fit, theory_regret, uniform_schedule, widths)
from .lower_bound import batch_lower_bound, grid_lower_bound, info_gap, needle_margin
from .envs import (CONTEXT_KINDS, DigitsBanditEnv, LinearContextualEnv, TiledEnv, make_needle_env,
                   make_sign_env, make_synthetic_env, random_theta, sign_vectors)

__all__ = [
    "CONTEXT_KINDS", "DESIGNS", "batch_lower_bound", "grid_lower_bound", "info_gap", "needle_margin", "DigitsBanditEnv", "Estimator", "LinearContextualEnv", "RunResult",
    "batch_schedule", "batched_elimination", "batched_linucb", "batches_needed", "eliminate",
    "elimination_beta", "elimination_u", "ridge_from_stats", "TiledEnv", "exp_policy_design", "exp_policy_mixture_act", "exp_policy_online",
    "explore_then_commit", "fit_loglog_slope", "gamma", "geometric_schedule", "linucb",
    "linucb_beta", "make_needle_env", "make_sign_env", "make_synthetic_env", "random_theta",
    "sign_vectors", "ridge_fit",
    "theory_regret", "uniform_schedule", "widths",
]
