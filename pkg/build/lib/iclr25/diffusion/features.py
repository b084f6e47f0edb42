"""Reading a network's intermediate activations during a forward pass (diffusion features)."""

from __future__ import annotations

from typing import Sequence

import torch


class FeatureHook:
    """Context manager that records the outputs of named submodules of ``model`` during forward
    passes: ``with FeatureHook(unet, ["up_blocks.1"]) as feats: unet(x, t)`` then
    ``feats["up_blocks.1"]`` is that block's output (``(B, C_l, H_l, W_l)`` for a U-Net block),
    with its autograd graph (so an energy of the features can be differentiated to the input).
    The latest forward pass overwrites earlier ones. Names are those of ``model.named_modules()``.
    """

    def __init__(self, model: torch.nn.Module, names: Sequence[str]) -> None:
        self.model, self.names = model, list(names)
        self.features: dict[str, torch.Tensor] = {}
        self._handles: list = []

    def __enter__(self) -> dict[str, torch.Tensor]:
        for name in self.names:
            module = self.model.get_submodule(name)
            self._handles.append(module.register_forward_hook(self._recorder(name)))
        return self.features

    def _recorder(self, name: str):
        def hook(module, inputs, output):
            self.features[name] = output[0] if isinstance(output, tuple) else output
        return hook

    def __exit__(self, *exc) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()


def to_tokens(f: torch.Tensor, size: int | None = None) -> torch.Tensor:
    """Feature maps ``(B, C, H, W)`` as tokens ``(B, N, C)``, ``N = H W`` in row-major order,
    after bilinear resizing to ``size x size`` when ``size`` is given and differs."""
    if size is not None and f.shape[-1] != size:
        f = torch.nn.functional.interpolate(f, size=(size, size), mode="bilinear", align_corners=False)
    return f.flatten(2).transpose(1, 2)
