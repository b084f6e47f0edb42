"""iclr25.interventions: knowledge editing (ROME, MEMIT, constrained fine-tuning), unlearning
(gradient ascent, gradient difference, RMU), compression as an intervention (from
:mod:`iclr25.compress`), and the composition harness with the composability metrics of
Kolbeinsson et al. (ICLR 2025).

>>> W_new = rank_one_edit(W, k, v, C)          # W_new @ k == v, rank(W_new - W) == 1
>>> edited_then_pruned = compose(model, [editor, compressor("wanda", 0.3, calib_ids)])
>>> order_sensitivity(m_ab, m_ba), order_free_error(m_ab, m_ba)
"""

from iclr25.interventions.compose import (CATEGORIES, Intervention, compose, compressor,
                                          order_free_error, order_sensitivity, prune_model_,
                                          quantize_model_, same_weights)
from iclr25.interventions.editing import (EDIT_TEMPLATES, add_at, edit_prompts, ft_edit, memit_delta,
                                          memit_edit, rank_one_edit, rome_edit, subject_keys,
                                          target_deltas)
from iclr25.interventions.unlearning import (block_output, gradient_ascent, gradient_difference,
                                             rmu, rmu_direction, text_batch, upper_params)

__all__ = [
    "CATEGORIES", "Intervention", "compose", "compressor", "order_free_error", "order_sensitivity",
    "prune_model_", "quantize_model_", "same_weights",
    "EDIT_TEMPLATES", "add_at", "edit_prompts", "rank_one_edit", "memit_delta", "subject_keys",
    "target_deltas", "rome_edit", "memit_edit", "ft_edit",
    "text_batch", "upper_params", "gradient_ascent", "gradient_difference", "block_output",
    "rmu_direction", "rmu",
]
