"""Fixtures shared by the unit tests."""

import pytest
import torch


@pytest.fixture
def one_thread():
    """Run a test with one torch thread, restoring the setting afterwards."""
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)
