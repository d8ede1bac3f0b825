"""Fixtures shared by the model tests (the trainer's tiny runs are in training/tiny_runs.py)."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread (the CPU is shared; the subprocess tests use one too, for bit-identical results). A module
    that trains asks for it with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
