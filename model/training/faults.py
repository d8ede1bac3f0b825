"""Fault injection for tests: a callback the training loop asks at every update whether to turn that update's
loss into NaN (the divergence path, end to end). The loop knows nothing of where it comes from: a test passes
``nan_at=nan_at_step(N)`` to :func:`~ladder.model.training.loop.train`; a run trained in another process (a
local worker, a SLURM job) gets it from the job's entry point, which reads :data:`ENV` once
(:func:`from_environment`), so that an end-to-end test can make every run of a study diverge."""

from __future__ import annotations

import os
from collections.abc import Callable

ENV = "LADDER_FORCE_NAN_AT_STEP"

NanAt = Callable[[int], bool]  # update number (1-based) -> turn its loss into NaN


def nan_at_step(n: int) -> NanAt:
    return lambda update: update == n


def from_environment() -> NanAt | None:
    """The hook a test asked for through :data:`ENV` (``N``: the loss of update N is NaN), or None."""
    value = os.environ.get(ENV)
    return nan_at_step(int(value)) if value else None
