"""Progress of a long fit: the fits say what they start (:func:`step`), and a caller that wants to show it (``ladder
fit`` on a large runs table) installs a hook for the time of the fit (:func:`reporting`). Without a hook a step
costs nothing and prints nothing, so the fits stay silent in a notebook, a test or ``plan --suggest``'s refits."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

_hook: Callable[[str], None] | None = None


@contextmanager
def reporting(hook: Callable[[str], None] | None) -> Iterator[None]:
    """Send each :func:`step` to ``hook`` (one line of text) while the block runs; ``None`` shows nothing."""
    global _hook
    before, _hook = _hook, hook
    try:
        yield
    finally:
        _hook = before


def step(text: str) -> None:
    """Say that a stage of the fit starts (only where :func:`reporting` installed a hook)."""
    if _hook is not None:
        _hook(text)
