"""Tests of iclr25.align run on one torch thread: the models are tiny, and on a busy 2-core machine a
second thread made a forward pass 20x slower (synchronisation, not work)."""

import pytest
import torch


@pytest.fixture(autouse=True)
def one_torch_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)
