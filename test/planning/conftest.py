"""Fixtures of the planning tests."""

import pytest
import torch


@pytest.fixture(scope="module")
def one_torch_thread():
    """Torch on one thread for the module: on a shared 2-core machine torch's thread pool waits on descheduled
    threads (graspd: ~1 s per step with 2 threads next to another busy process, 17 ms with one)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
