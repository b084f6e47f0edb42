"""Batched linear contextual bandits: environments, the minimax batch grid, batched elimination
with Exp-Policy exploration (Zhang, Ji & Zhou, ICLR 2025) and the standard baselines."""

from .algorithms import (DESIGNS, Estimator, RunResult, batch_schedule, batched_elimination,
                         batched_linucb, batches_needed, eliminate, elimination_beta,
                         elimination_u, exp_policy_design, exp_policy_mixture_act, exp_policy_online,
                         explore_then_commit, fit_loglog_slope, gamma, geometric_schedule, linucb,
                         linucb_beta, ridge_fit, ridge_from_stats, theory_regret, uniform_schedule, widths)
from .envs import (CONTEXT_KINDS, DigitsBanditEnv, LinearContextualEnv, TiledEnv, make_needle_env,
                   make_sign_env, make_synthetic_env, random_theta, sign_vectors)
from .lower_bound import (batch_lower_bound, best_grid_bound, grid_lower_bound, info_gap,
                          needle_margin)

__all__ = sorted([
    "CONTEXT_KINDS", "DESIGNS", "DigitsBanditEnv", "Estimator", "LinearContextualEnv", "RunResult",
    "TiledEnv", "batch_lower_bound", "batch_schedule", "batched_elimination", "batched_linucb",
    "batches_needed", "best_grid_bound", "eliminate", "elimination_beta", "elimination_u",
    "exp_policy_design", "exp_policy_mixture_act", "exp_policy_online", "explore_then_commit",
    "fit_loglog_slope", "gamma", "geometric_schedule", "grid_lower_bound", "info_gap", "linucb",
    "linucb_beta", "make_needle_env", "make_sign_env", "make_synthetic_env", "needle_margin",
    "random_theta", "ridge_fit", "ridge_from_stats", "sign_vectors", "theory_regret",
    "uniform_schedule", "widths",
])
