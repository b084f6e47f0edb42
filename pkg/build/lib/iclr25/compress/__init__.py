"""iclr25.compress: pruning masks and solvers (magnitude, Wanda, SparseGPT, N:M and C_4^n), RTN and
GPTQ quantization, and helpers that apply them to ``nn.Linear`` layers.

Conventions: weights ``W (out, in)`` in the ``nn.Linear`` layout; calibration inputs ``X (n, in)``;
Hessians ``H = X^T X (in, in)``; masks are ``bool`` keep-masks (``True`` = kept, pruned weight
``W * mask``); patterns are ``None``/``"unstructured"`` (per output row), ``"n:m"`` or ``("c4n", n)``.
Every function is device-agnostic (results live on ``W``'s device) and keeps ``W``'s dtype.

>>> mask = wanda_mask(W, X, 0.5, "2:4")
>>> W_sgpt, mask = sparsegpt_prune(W, input_hessian(X), 0.5)
>>> W_q = rtn_quantize(W, bits=4, group_size=32)
"""

from iclr25.compress.layers import (PRUNE_METHODS, apply_mask_, collect_inputs, find_linears,
                                    prune_layers_, prune_linear_, quantize_linear_)
from iclr25.compress.masks import (Pattern, c4n_mask, input_norms, magnitude_mask, mask_from_scores,
                                   n_pruned, nm_mask, parse_pattern, pattern_sparsity, sparsity_of,
                                   unstructured_mask, wanda_mask, wanda_scores)
from iclr25.compress.obs import (compensate, gptq_quantize, input_hessian, obs_saliency,
                                 output_error, sparsegpt_prune)
from iclr25.compress.quant import (QuantGrid, dequantize, quantization_step, quantize_codes,
                                   rtn_grid, rtn_quantize)

__all__ = [
    "Pattern", "parse_pattern", "pattern_sparsity", "n_pruned",
    "unstructured_mask", "nm_mask", "c4n_mask", "mask_from_scores",
    "magnitude_mask", "input_norms", "wanda_scores", "wanda_mask", "sparsity_of",
    "input_hessian", "output_error", "obs_saliency", "sparsegpt_prune", "gptq_quantize", "compensate",
    "QuantGrid", "rtn_grid", "quantize_codes", "dequantize", "rtn_quantize", "quantization_step",
    "PRUNE_METHODS", "find_linears", "collect_inputs", "apply_mask_", "prune_linear_",
    "prune_layers_", "quantize_linear_",
]
