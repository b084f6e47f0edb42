"""One encoder block of the Small Transformer Zoo as a function of its weights.

The weights of one block are a dict of tensors (leading batch dimensions ``...`` allowed, the same
for every key)::

    WQ (..., h, D, Dk)   WK (..., h, D, Dk)   WV (..., h, D, Dv)   WO (..., h, Dv, D)
    WA (..., D, Da)      bA (..., Da)         WB (..., Da, D)      bB (..., D)

Row vectors multiply from the left (``x @ WQ[i]``), as in the zoo's weight-space layout: head ``i``
computes ``softmax(x̂ WQ_i (x̂ WK_i)^T / sqrt(Dk)) x̂ WV_i`` and the heads are summed through
``WO_i``. The zoo's block has no residual connections and a LayerNorm without affine parameters
(``vision_task/model.py`` of the official code), which is why a permutation of the attention output
features is a symmetry; ``residual=True`` gives the usual pre-LN block, where it is not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

KEYS = ("WQ", "WK", "WV", "WO", "WA", "bA", "WB", "bB")
"""The keys of a block's weight dict, in the order every flattening uses."""

Weights = dict[str, torch.Tensor]


@dataclass(frozen=True)
class BlockSpec:
    """Sizes of one encoder block: ``h`` heads, model width ``D``, query/key width ``Dk``,
    value width ``Dv``, MLP width ``Da``."""

    h: int = 2
    D: int = 16
    Dk: int = 8
    Dv: int = 8
    Da: int = 32

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """The shape of every key (without batch dimensions)."""
        h, D, Dk, Dv, Da = self.h, self.D, self.Dk, self.Dv, self.Da
        return {"WQ": (h, D, Dk), "WK": (h, D, Dk), "WV": (h, D, Dv), "WO": (h, Dv, D),
                "WA": (D, Da), "bA": (Da,), "WB": (Da, D), "bB": (D,)}

    def n_params(self) -> int:
        """Number of weights of one block."""
        return sum(math.prod(s) for s in self.shapes().values())

    @staticmethod
    def of(weights: Weights) -> "BlockSpec":
        """Read the sizes off a weight dict."""
        h, D, Dk = weights["WQ"].shape[-3:]
        return BlockSpec(h=h, D=D, Dk=Dk, Dv=weights["WV"].shape[-1], Da=weights["WA"].shape[-1])


def random_weights(spec: BlockSpec, *batch: int, std: float = 0.3, generator: torch.Generator | None = None,
                   dtype: torch.dtype = torch.float64, device: torch.device | str | None = None) -> Weights:
    """I.i.d. normal weights (biases included) of standard deviation ``std``, shape ``(*batch, ...)``
    per key. Generated on the CPU from ``generator``, then moved, so a seed gives the same weights
    on every device."""
    return {k: (std * torch.randn(*batch, *s, generator=generator, dtype=dtype)).to(device)
            for k, s in spec.shapes().items()}


def layer_norm(x: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """LayerNorm over the last axis without affine parameters (``nn.LayerNorm(D, elementwise_affine=False)``)."""
    mean = x.mean(-1, keepdim=True)
    var = (x - mean).pow(2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps)


def softmax(s: torch.Tensor) -> torch.Tensor:
    """Softmax over the last axis, ``exp(s - max) / sum exp(s - max)`` (written out: for the
    zoo's few tokens it is several times faster on a CPU than ``torch.softmax``)."""
    e = torch.exp(s - s.amax(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True)


def multi_head_attention(x: torch.Tensor, w: Weights) -> torch.Tensor:
    """Multi-head self-attention ``sum_i softmax(x WQ_i (x WK_i)^T / sqrt(Dk)) x WV_i WO_i``.

    ``x``: ``(..., batch, seq, D)``; ``w``: a block's weights with leading dims ``...`` (or none).
    Returns ``(..., batch, seq, D)``.
    """
    dk = w["WQ"].shape[-1]
    q = torch.einsum("...btd,...hdk->...bhtk", x, w["WQ"])
    k = torch.einsum("...btd,...hdk->...bhtk", x, w["WK"])
    v = torch.einsum("...btd,...hdk->...bhtk", x, w["WV"])
    att = softmax(q @ k.transpose(-1, -2) / math.sqrt(dk))
    return torch.einsum("...bhtv,...hvd->...btd", att @ v, w["WO"])


def mlp(x: torch.Tensor, w: Weights) -> torch.Tensor:
    """The block's MLP ``ReLU(x WA + bA) WB + bB``; ``x``: ``(..., batch, seq, D)``."""
    hid = torch.relu(torch.einsum("...btd,...da->...bta", x, w["WA"]) + w["bA"][..., None, None, :])
    return torch.einsum("...bta,...ad->...btd", hid, w["WB"]) + w["bB"][..., None, None, :]


def attention_block(x: torch.Tensor, weights: Weights, *, residual: bool = False) -> torch.Tensor:
    """The zoo's encoder block on ``x`` of shape ``(batch, seq, D)`` (or ``(..., batch, seq, D)``
    with weights batched over ``...``).

    Without residual (the zoo): ``a = MHA(LN(x))``, ``y = MLP(LN(a))``. With ``residual=True``
    (pre-LN): ``a = x + MHA(LN(x))``, ``y = a + MLP(LN(a))``.
    """
    a = multi_head_attention(layer_norm(x), weights)
    if residual:
        a = x + a
    y = mlp(layer_norm(a), weights)
    return a + y if residual else y
