"""When a finite loss means the run has diverged.

A run diverges when its loss stays above ``spike_factor`` x its lowest *typical* loss for ``patience`` consecutive
steps. The typical loss is the median of the last ``patience`` steps' losses, and the reference is the lowest such
median so far. The loss of one step was the reference once, and it failed on small batches: at 2 sequences a
step, one easy batch (a repeated file) scored 1.6 where the run's loss was 3.9, and a healthy run was stopped 20
steps later as diverged (the default study at half its batch, 3 of 6 trunks). A median of ``patience`` steps
ignores a few easy batches and a few spikes alike; a real blow-up, which lasts, still stops the run within
``2 x patience`` steps.

The state is three entries of the trainer's state (checkpointed, and carried on by a branch from its trunk):
``spike_window`` (the last ``patience`` losses), ``running_min`` (the lowest median of a full window, None
before the first) and ``spike_count``.
"""

from __future__ import annotations

import statistics
from typing import Any

KEYS = ("spike_window", "running_min", "spike_count")


def fresh() -> dict[str, Any]:
    return {"spike_window": [], "running_min": None, "spike_count": 0}


def upgrade(state: dict[str, Any]) -> dict[str, Any]:
    """A state written before the window existed held the lowest single-step loss in ``running_min``: not
    comparable, so the reference starts again (``checkpoint.load_checkpoint`` applies it to every state it reads)."""
    if "spike_window" not in state:
        state.update(fresh())
    return state


def update(state: dict[str, Any], loss: float, factor: float, patience: int) -> bool:
    """Account for one step's (finite) ``loss``; True when the run has diverged."""
    rmin = state["running_min"]
    state["spike_count"] = state["spike_count"] + 1 if rmin is not None and loss > factor * rmin else 0
    window = (state["spike_window"] + [loss])[-patience:]
    state["spike_window"] = window
    if len(window) == patience:
        typical = statistics.median(window)
        state["running_min"] = typical if rmin is None else min(rmin, typical)
    return state["spike_count"] >= patience


def reason(state: dict[str, Any], factor: float, loss: float, step: int) -> str:
    return (
        f"loss above {factor:g} x its lowest typical loss ({state['running_min']:.4g}, the median of a window "
        f"of steps) for {state['spike_count']} consecutive steps (loss {loss:.4g} at step {step})"
    )
