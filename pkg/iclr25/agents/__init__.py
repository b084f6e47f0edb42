"""Tool-agent-user environments and the reliability metric pass^k (tau-bench, Yao et al., ICLR 2025).

A mini retail domain (procedural database, tools, policy), a scripted stochastic user, an
environment with tau-bench's ``reset``/``step`` interface and database-state reward, agents that
need no LLM (rule, eps-noisy, behaviour-cloned), an adapter for a real LLM agent, and the
estimators pass^k and pass@k with the tools to read published results.
"""

from .core import RESPOND, Action, Task, changes, db_hash, to_hashable
from .env import (Agent, Episode, ToolEnv, Trials, concat_trials, evaluate_actions, outputs_found, run_episode, run_trials,
                  scripted_users)
from .passk import (SUCCESS_TOL, all_outcome_tables, all_subsets_fraction, beta_moment,
                    binomial_transform_matrix, bootstrap_curve, first_k_estimate, fit_beta_binomial,
                    heterogeneity_fit_test, histogram, histogram_from_pass_hat, homogeneity_chi2,
                    homogeneity_pvalue, model_moments,
                    integer_histograms, is_success, log_convex, moment_range, overdispersion,
                    paired_bootstrap_diff, pass_at_k, pass_curve, pass_k_bounds,
                    pass_hat_from_histogram, pass_hat_k, success_counts)
from .policies import (FEATURES, MACROS, BCPolicy, NoisyPolicyAgent, PolicyAgent, softmax_proba,
                       RecordingPolicyAgent, Tracker, error_opportunities, features, fit_bc,
                       predicted_success, rule_macro, sample_macro, slip_slots, wrong_price)
from .retail import POLICY, TOOLS, WRITE_TOOLS, fresh_copy, make_retail_db
from .tasks import TaskStats, gold_actions, make_tasks, replay
from .user import ScriptedUser, canonical_action

__all__ = [
    "FEATURES", "MACROS", "POLICY", "RESPOND", "SUCCESS_TOL", "TOOLS", "WRITE_TOOLS", "Action",
    "Agent", "BCPolicy", "Episode", "NoisyPolicyAgent", "PolicyAgent", "RecordingPolicyAgent",
    "ScriptedUser", "Task", "TaskStats", "ToolEnv", "Tracker", "Trials", "all_outcome_tables",
    "all_subsets_fraction", "beta_moment", "binomial_transform_matrix", "bootstrap_curve",
    "canonical_action", "changes", "concat_trials", "heterogeneity_fit_test", "model_moments",
    "wrong_price", "db_hash", "error_opportunities", "evaluate_actions", "features",
    "first_k_estimate", "fit_bc", "fit_beta_binomial", "fresh_copy", "gold_actions", "histogram",
    "histogram_from_pass_hat", "homogeneity_chi2", "homogeneity_pvalue", "integer_histograms",
    "is_success", "log_convex", "make_retail_db", "make_tasks", "moment_range", "outputs_found",
    "overdispersion", "paired_bootstrap_diff", "pass_k_bounds",
    "pass_at_k", "pass_curve", "pass_hat_from_histogram", "pass_hat_k", "predicted_success",
    "replay", "rule_macro", "run_episode", "run_trials", "sample_macro", "scripted_users",
    "slip_slots", "softmax_proba", "success_counts", "to_hashable",
]
