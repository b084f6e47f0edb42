"""The sampling kernels work in float64: every test in this folder runs with that default dtype."""

import pytest


@pytest.fixture(autouse=True)
def _float64(float64_default):
    yield
