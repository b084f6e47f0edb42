"""A stand-in for a GPU in tests that run without one.

:class:`OnFakeCuda` is a CPU tensor that reports ``device == cuda:0`` and enforces the rules a real
CUDA tensor imposes: an operation that mixes it with a CPU tensor (other than a 0-dim scalar or an
index) raises "Expected all tensors to be on the same device", and ``.numpy()`` raises unless the
tensor went through ``.cpu()`` first. Inside :func:`fake_cuda`, factory functions called with
``device=cuda`` (``torch.zeros(..., device=x.device)``, ``torch.as_tensor(a, device=x.device)``)
make fake-CUDA tensors, so code written to keep results on its input's device passes, and code
that makes new tensors on the default device or hands a GPU tensor to numpy fails, as it would on
a GPU.

Use::

    with fake_cuda():
        x = to_fake(torch.randn(5, 2))
        out = kernel(x)
        assert out.device == FAKE_CUDA
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten, tree_map

FAKE_CUDA = torch.device("cuda", 0)


def _is_cuda(dev: Any) -> bool:
    if dev is None:
        return False
    return torch.device(dev).type == "cuda" if isinstance(dev, (str, torch.device)) else False


def to_fake(t: torch.Tensor) -> "OnFakeCuda":
    """``t`` (a CPU tensor) as a fake-CUDA tensor."""
    return t.as_subclass(OnFakeCuda)


def _wrap(out: Any) -> Any:
    return tree_map(lambda t: to_fake(t) if type(t) is torch.Tensor else t, out)


def _parse_to(args: tuple, kwargs: dict) -> tuple[Any, Any]:
    """``(device, dtype)`` that a ``Tensor.to(*args, **kwargs)`` call asks for (either may be None)."""
    rest = tuple(a.as_subclass(torch.Tensor) if isinstance(a, OnFakeCuda) else a for a in args[1:])
    device, dtype, _, _ = torch._C._nn._parse_to(*rest, **kwargs)
    for a in args[1:]:
        if isinstance(a, OnFakeCuda):
            device = FAKE_CUDA
    return device, dtype


def _cast(t: torch.Tensor, dtype: Any) -> torch.Tensor:
    return t if dtype is None else t.to(dtype=dtype)


class OnFakeCuda(torch.Tensor):
    """A CPU tensor that behaves, for device checks, like a tensor on ``cuda:0``."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func == torch.Tensor.device.__get__:
            return FAKE_CUDA
        if func == torch.Tensor.is_cuda.__get__:
            return True
        if func is torch.Tensor.numpy:
            raise TypeError("can't convert cuda:0 device type tensor to numpy. "
                            "Use Tensor.cpu() to copy the tensor to host memory first.")
        if func is torch._has_compatible_shallow_copy_type:
            return False
        if func is torch.Tensor.cpu:
            return args[0].as_subclass(torch.Tensor)
        if func is torch.Tensor.to:
            dev, dtype = _parse_to(args, kwargs)
            with torch._C.DisableTorchFunctionSubclass():
                out = _cast(args[0], dtype)
            return out.as_subclass(torch.Tensor if dev is not None and not _is_cuda(dev) else OnFakeCuda)
        flat, _ = tree_flatten((args, kwargs))
        tensors = [t for t in flat if isinstance(t, torch.Tensor)]
        if func is torch.Tensor.__getitem__ and isinstance(args[0], OnFakeCuda):
            tensors = tensors[:1]  # a CUDA tensor may be indexed by CPU indices
        on_cpu = [t for t in tensors if not isinstance(t, OnFakeCuda) and t.dim() > 0]
        if on_cpu and len(on_cpu) < len(tensors):
            raise RuntimeError("Expected all tensors to be on the same device, but found at least two "
                               f"devices, cuda:0 and cpu! (in {getattr(func, '__name__', func)})")
        return super().__torch_function__(func, types, args, kwargs)


class _FakeCudaFactories(TorchFunctionMode):
    """Factory calls with ``device=cuda`` make fake-CUDA tensors instead of failing."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.Tensor.to and not isinstance(args[0], OnFakeCuda):
            dev, dtype = _parse_to(args, kwargs)
            if _is_cuda(dev):  # a CPU tensor sent to the GPU
                return to_fake(_cast(args[0], dtype))
        if _is_cuda(kwargs.get("device")):
            kwargs = {**kwargs, "device": "cpu"}
            return _wrap(func(*args, **kwargs))
        return func(*args, **kwargs)


@contextlib.contextmanager
def fake_cuda() -> Iterator[None]:
    """Run the block with factories on ``device=cuda`` answered by fake-CUDA tensors."""
    with _FakeCudaFactories():
        yield
