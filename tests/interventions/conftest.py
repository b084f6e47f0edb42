"""Tests of iclr25.align run on one torch thread (the root conftest's ``one_torch_thread``)."""

import pytest


@pytest.fixture(autouse=True)
def _one_thread(one_torch_thread):
    yield
