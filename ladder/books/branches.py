"""Cooldown branches seen from the study directory: whether a branch still waits for its trunk, for the local
queue (:mod:`ladder.jobs.on_node`), the books (:mod:`ladder.books.run_books`: ``ladder status`` and ``collect``) and
``ladder submit``.

A branch waits while it has not started on its own (no checkpoint, no result), its trunk's snapshot at the branch
step is not there, and its trunk may still write it (the trunk has not ended done or diverged and snapshots that
step). What a branch does when it starts is the trainer's (:mod:`ladder.model.training.branching`).
"""

from __future__ import annotations

from ladder import layout
from ladder.model.config import RunSpec


def snapshot_ready(sd: layout.StudyDir, spec: RunSpec) -> bool:
    t = spec.trunk
    return t is not None and sd.run(t.run_id).snapshot_dir(t.step).is_dir()


def waits_for(rd: layout.RunDir, spec: RunSpec) -> str | None:
    """Why ``spec`` (a branch, in run directory ``rd``) cannot start yet, naming its trunk; None when it can (or
    is not a branch)."""
    t = spec.trunk
    if t is None:
        return None
    trunk = rd.sibling(t.run_id)
    if rd.checkpoint_pointer.is_file() or rd.result.is_file() or trunk.snapshot_dir(t.step).is_dir():
        return None
    if layout.result_status(trunk) in ("done", "diverged"):
        return None  # it trains from step 0 or fails with its trunk's reason: either way it can go
    trunk_spec = trunk.spec_or_none()
    if trunk_spec is not None and t.step not in trunk_spec.branch_steps:
        return None  # this trunk never snapshots that step: the branch trains from step 0
    return f"waits for trunk {t.run_id} at step {t.step}"
