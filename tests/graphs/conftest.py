"""Shared fixtures of the graph tests: a CPU stand-in for running package code on a GPU."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator

import pytest
import torch


def _assert_on(out: Any, device: str = "cpu") -> None:
    if isinstance(out, torch.Tensor):
        assert out.device.type == device, f"result on {out.device}, expected {device}"
    elif isinstance(out, (tuple, list)):
        for o in out:
            _assert_on(o, device)
    elif isinstance(out, dict):
        for o in out.values():
            _assert_on(o, device)


@contextmanager
def _foreign_default_device() -> Iterator[None]:
    with torch.device("meta"):
        yield


@pytest.fixture
def on_foreign_device() -> Callable[..., Any]:
    """``on_foreign_device(fn, *args, **kw)``: call ``fn`` with CPU inputs while every tensor
    created *without* ``device=`` lands on the ``meta`` device, and check that every tensor it
    returns lives on the CPU, the inputs' device.

    A function that creates a tensor without ``device=`` and mixes it with its inputs raises (as it
    would with CUDA inputs), or returns a tensor on ``meta``: either way the test fails. Build
    modules and inputs before the call (inside it, their parameters would land on ``meta``).
    """

    def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        with _foreign_default_device():
            out = fn(*args, **kwargs)
        _assert_on(out, "cpu")
        return out

    return call
