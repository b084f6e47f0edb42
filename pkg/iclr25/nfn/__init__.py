"""iclr25.nfn: transformer weight spaces, their symmetry group, equivariant layers, and a model zoo.

>>> from iclr25.nfn import BlockSpec, random_weights, random_group_element, apply_group_action
>>> spec = BlockSpec(h=2, D=16, Dk=8, Dv=8, Da=32)
>>> w = random_weights(spec)                        # one encoder block: WQ, WK, WV, WO, WA, bA, WB, bB
>>> g = random_group_element(spec)                  # head permutation, GL(Dk)/GL(Dv) per head, pO, pA
>>> y, gy = attention_block(x, w), attention_block(x, apply_group_action(w, g))   # equal

:mod:`.block` the zoo's encoder block; :mod:`.group` the group and its action; :mod:`.layers` the
Transformer-NFN equivariant and invariant layers and the invariant predictor; :mod:`.baselines`
flattened weights, STATNN statistics, norms, an MLP; :mod:`.zoo` many tiny transformers trained at
once on scikit-learn's digits; :mod:`.fit` training predictors for many configurations and splits
at once; :mod:`.metrics` Kendall's tau and a paired bootstrap.
"""

from .baselines import (NORMS, PRODUCT_SLOTS, FlatWeightsMLP, MLPRegressor, flatten_weights, group_augment, norm_features,
                        product_stat_features, stat_features, tensor_stats)
from .block import (KEYS, BlockSpec, attention_block, layer_norm, mlp, multi_head_attention, random_weights,
                    softmax)
from .fit import Selection, fit_ensemble, interior, select, select_mean
from .group import (apply_group_action, exchange_head_columns, head_products, identity_element, products_match, random_group_element,
                    recover_gl, well_conditioned)
from .layers import (TransformerNFN, TransformerNFNEquivariant, TransformerNFNInvariant, hidden_unit_features,
                     invariant_features, masked_relu, output_unit_features)
from .metrics import kendall_tau, paired_bootstrap_tau, tau_difference
from .zoo import (OPTIMIZERS, lr_share_after, ZooConfig, ZooGrid, digits_tokens, permute_stream, sample_recipes, train_zoo,
                  zoo_forward, zoo_test_accuracy)

__all__ = [
    "KEYS", "BlockSpec", "attention_block", "layer_norm", "mlp", "multi_head_attention", "random_weights",
    "softmax",
    "apply_group_action", "exchange_head_columns", "head_products", "identity_element", "products_match", "random_group_element",
    "recover_gl", "well_conditioned",
    "TransformerNFN", "TransformerNFNEquivariant", "TransformerNFNInvariant", "hidden_unit_features",
    "invariant_features", "masked_relu", "output_unit_features",
    "NORMS", "PRODUCT_SLOTS", "FlatWeightsMLP", "MLPRegressor", "group_augment", "flatten_weights", "norm_features", "product_stat_features", "stat_features",
    "tensor_stats",
    "Selection", "fit_ensemble", "interior", "select", "select_mean", "kendall_tau", "paired_bootstrap_tau", "tau_difference",
    "OPTIMIZERS", "lr_share_after", "ZooConfig", "ZooGrid", "digits_tokens", "permute_stream", "sample_recipes", "train_zoo",
    "zoo_forward", "zoo_test_accuracy",
]
