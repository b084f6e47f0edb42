"""The sampling kernels work in float64: run these tests with that default dtype, and restore it."""

import pytest
import torch


@pytest.fixture(autouse=True)
def float64_default():
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)
