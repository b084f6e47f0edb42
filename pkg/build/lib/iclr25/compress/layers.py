"""Apply masks and quantizers to ``torch.nn.Linear`` layers, and collect their calibration inputs.

>>> layers = find_linears(model.blocks)                       # {"0.attn.qkv": Linear, ...}
>>> X = collect_inputs(layers["0.mlp.0"], lambda: model(calib_ids))   # (n_tokens, in_features)
>>> mask = prune_linear_(layers["0.mlp.0"], "wanda", 0.5, "2:4", X=X)
>>> masks = prune_layers_(layers, "sparsegpt", 0.5, run=lambda: model(calib_ids))  # sequential

Every function here changes the layer's weight in place (the trailing underscore) under
``torch.no_grad`` and keeps its dtype and device; biases are never touched.
"""

from __future__ import annotations

from typing import Callable, Mapping, Union

import torch
from torch import Tensor, nn

from iclr25.compress.masks import Pattern, magnitude_mask, wanda_mask
from iclr25.compress.obs import gptq_quantize, input_hessian, sparsegpt_prune
from iclr25.compress.quant import QuantGrid, dequantize, quantize_codes, rtn_grid

PRUNE_METHODS = ("magnitude", "wanda", "sparsegpt")
"""The pruners :func:`prune_linear_` knows."""


def find_linears(module: nn.Module, skip: tuple[str, ...] = ()) -> dict[str, nn.Linear]:
    """Every ``nn.Linear`` inside ``module``, by qualified name, in registration (usually forward) order.

    Names containing any substring of ``skip`` are left out (e.g. ``skip=("lm_head",)``).
    """
    return {name: m for name, m in module.named_modules()
            if isinstance(m, nn.Linear) and not any(s in name for s in skip)}


def collect_inputs(layers: Union[nn.Linear, Mapping[str, nn.Linear]],
                   run: Callable[[], object]) -> Union[Tensor, dict[str, Tensor]]:
    """Record what ``layers`` receive while ``run()`` executes (under ``torch.no_grad``).

    A forward hook on each layer stores its input; the hooks are removed afterwards, even on error.
    Returns the inputs flattened over all leading (batch, sequence) dims and concatenated over calls:
    ``(n_tokens, in_features)`` for a single layer, or a dict of those for a mapping of layers. On
    the device the model ran on. Raises ``ValueError`` if a layer was never called.
    """
    single = isinstance(layers, nn.Module)
    mods: dict[str, nn.Module] = {"": layers} if single else dict(layers)
    store: dict[str, list[Tensor]] = {name: [] for name in mods}

    def hook(name: str):
        def record(_module: nn.Module, args: tuple, _out: object) -> None:
            x = args[0].detach()
            store[name].append(x.reshape(-1, x.shape[-1]))
        return record

    handles = [m.register_forward_hook(hook(name)) for name, m in mods.items()]
    try:
        with torch.no_grad():
            run()
    finally:
        for h in handles:
            h.remove()
    missing = [name or "the layer" for name, xs in store.items() if not xs]
    if missing:
        raise ValueError(f"never called during run(): {', '.join(missing)}")
    out = {name: torch.cat(xs) for name, xs in store.items()}
    return out[""] if single else out


def apply_mask_(layer: nn.Linear, mask: Tensor) -> nn.Linear:
    """Zero the weights of ``layer`` where ``mask (out, in)`` is ``False``; returns the layer."""
    with torch.no_grad():
        layer.weight.mul_(mask.to(layer.weight.device, layer.weight.dtype))
    return layer


def prune_linear_(layer: nn.Linear, method: str, sparsity: float | None, pattern: Pattern = None,
                  X: Tensor | None = None, **kwargs) -> Tensor:
    """Prune ``layer`` in place with ``method`` in :data:`PRUNE_METHODS`; returns the keep-mask.

    ``X (n, in_features)`` are its calibration inputs (needed by Wanda and SparseGPT). Extra
    keywords go to :func:`~iclr25.compress.obs.sparsegpt_prune` (``blocksize``, ``percdamp``) or
    :func:`~iclr25.compress.masks.magnitude_mask` (``per_row``).
    """
    W = layer.weight.detach()
    if method not in PRUNE_METHODS:
        raise ValueError(f"unknown pruning method {method!r}; use one of {PRUNE_METHODS}")
    if method != "magnitude" and X is None:
        raise ValueError(f"{method} needs the layer's calibration inputs X")
    if method == "magnitude":
        mask = magnitude_mask(W, sparsity, pattern, **kwargs)
    elif method == "wanda":
        if kwargs:
            raise TypeError(f"wanda takes no options, got {sorted(kwargs)}")
        mask = wanda_mask(W, X, sparsity, pattern)
    else:
        W_new, mask = sparsegpt_prune(W, input_hessian(X).to(W.device), sparsity, pattern, **kwargs)
        with torch.no_grad():
            layer.weight.copy_(W_new)
    apply_mask_(layer, mask)
    return mask


def _per_layer(value: object, name: str) -> object:
    return value[name] if isinstance(value, Mapping) else value


def prune_layers_(layers: Mapping[str, nn.Linear], method: str,
                  sparsity: Union[float, None, Mapping[str, float | None]],
                  pattern: Union[Pattern, Mapping[str, Pattern]] = None,
                  run: Callable[[], object] | None = None, sequential: bool = True,
                  **kwargs) -> dict[str, Tensor]:
    """Prune several layers in place; returns their keep-masks by name.

    ``sparsity`` and ``pattern`` are one value for all layers or a mapping by name (mixed C_4^n:
    ``pattern={"0.in_proj": ("c4n", 1), "1.in_proj": ("c4n", 3)}``). Wanda and SparseGPT need
    ``run``, a callable that runs the model on the calibration data. ``sequential=True`` (as in the
    Wanda and SparseGPT code) prunes the layers in the mapping's order and collects each layer's
    inputs from a fresh ``run()`` *after* the earlier layers were pruned (one forward per layer);
    ``sequential=False`` collects every layer's inputs from one forward first. The official
    Wanda/SparseGPT schedule (a transformer block at a time, its sublayers calibrated together on
    the outputs of the pruned earlier blocks) is one call with ``sequential=False`` per block.
    """
    needs_data = method != "magnitude"
    if needs_data and run is None:
        raise ValueError(f"{method} needs run=, a callable that runs the calibration data")
    inputs = collect_inputs(layers, run) if needs_data and not sequential else {}
    masks = {}
    for name, layer in layers.items():
        X = None
        if needs_data:
            X = collect_inputs(layer, run) if sequential else inputs[name]
        masks[name] = prune_linear_(layer, method, _per_layer(sparsity, name),
                                    _per_layer(pattern, name), X=X, **kwargs)
    return masks


def quantize_linear_(layer: nn.Linear, bits: int, group_size: int | None = None,
                     symmetric: bool = False, method: str = "rtn", X: Tensor | None = None,
                     **kwargs) -> QuantGrid:
    """Quantize ``layer``'s weight in place (fake quantization: grid values in the weight's dtype).

    ``method="rtn"`` (:func:`~iclr25.compress.quant.rtn_quantize`) or ``"gptq"``
    (:func:`~iclr25.compress.obs.gptq_quantize`, needs the calibration inputs ``X (n, in)``; extra
    keywords ``blocksize``, ``percdamp``). Returns the grid.
    """
    W = layer.weight.detach()
    if method == "rtn":
        grid = rtn_grid(W, bits, group_size, symmetric)
        W_new = dequantize(quantize_codes(W, grid), grid, W.dtype)
    elif method == "gptq":
        if X is None:
            raise ValueError("gptq needs the layer's calibration inputs X")
        W_new, grid = gptq_quantize(W, input_hessian(X).to(W.device), bits, group_size, symmetric, **kwargs)
    else:
        raise ValueError(f"unknown quantization method {method!r}; use 'rtn' or 'gptq'")
    with torch.no_grad():
        layer.weight.copy_(W_new)
    return grid
