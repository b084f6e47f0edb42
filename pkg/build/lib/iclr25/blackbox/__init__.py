"""iclr25.blackbox: zeroth-order estimators, policy gradient over discrete prompts, and
black-box prompt learning (ZO-PoG, BBT, BDPL, ZO-only) against a query-counting model API."""

from iclr25.blackbox.api import (BlackBoxLM, BudgetExceeded, EncodedTask, encode_task,
                                 prompted_logits)
from iclr25.blackbox.cmaes import CMAES
from iclr25.blackbox.methods import (PromptTuningConfig, RunResult, Selection, evaluate_manual,
                                     run_bbt, run_bdpl, run_zo_pog)
from iclr25.blackbox.policy import (CategoricalPromptPolicy, SimplexPromptPolicy, pg_gradient,
                                    project_simplex)
from iclr25.blackbox.prompts import pmi_candidates, pmi_scores, random_projection
from iclr25.blackbox.zo import zo_directions, zo_gradient, zo_variance_gaussian

__all__ = ["BlackBoxLM", "BudgetExceeded", "CMAES", "CategoricalPromptPolicy", "EncodedTask",
           "PromptTuningConfig", "RunResult", "Selection", "SimplexPromptPolicy", "encode_task",
           "evaluate_manual", "pg_gradient", "pmi_candidates", "pmi_scores", "project_simplex",
           "prompted_logits",
           "random_projection", "run_bbt", "run_bdpl", "run_zo_pog", "zo_directions",
           "zo_gradient", "zo_variance_gaussian"]
