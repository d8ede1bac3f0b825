"""Cooldown branches on the node: a trunk keeps a snapshot after each of its branch steps, and a branch with no
checkpoint of its own starts from its trunk's snapshot (the plan's side: :mod:`ladder.plan.rung_runs`).

Snapshot (:func:`write_snapshot`): at a branch step the trunk first writes an ordinary checkpoint (so that a
later resume of the trunk never goes back across that step and trims metrics a branch copied), then links (or
copies) its files into a temporary directory, fsyncs it and renames it to ``branch-<step>/`` (the name is
:mod:`ladder.layout`'s). A snapshot is never rewritten (the state after step N does not change) and the end-of-run
cleanup keeps it.

Start (:func:`branch_start` first, before anything is set up; then :func:`resume`): a branch with a checkpoint of
its own resumes from it like any run. Otherwise, when the snapshot is there, the trunk's spec must have the branch's
science (:data:`SCIENCE`; a mismatch is a ``StateError`` naming the field); the branch restores weights, optimizer
and RNG from it, copies the trunk's metrics records up to the branch step into its own ``metrics.jsonl`` (so that
its curve is whole), keeps the loss history (its final-loss window is the last 10% of ITS steps), the running
minimum and the spike count, and starts its own books (log accumulators, times, restarts) at zero. Without a
snapshot: a trunk that finished, or that never snapshots that step (planned before this budget), leaves the branch
to train from step 0 as the independent run it equals (the result says so); a trunk that diverged or failed is a
``StateError``, and so is one that has not reached the step yet (:class:`Waiting`, "waits for trunk ..."): a branch
never starts from scratch while its trunk is on its way. Both are raised before the trainer has any state, so they
write no ``result.json``.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ladder.errors import StateError
from ladder.layout import RunDir, atomic_write_text, jsonable, read_jsonl, result_status
from ladder.model.config import NOT_SCIENCE_SUBFIELDS, SCIENCE_FIELDS, RunSpec
from ladder.model.schedule import cooldown_start
from ladder.model.training import checkpoint as ckpt
from ladder.model.training import divergence

SCIENCE = tuple(f for f in SCIENCE_FIELDS if f not in ("tokens", "steps"))
"""What a branch and its trunk must share: the science of a run (what is hashed into its id, the optimizer and
its decay treatment included) but its budget's length, so everything that decides the updates (and the evals of
the curve it copies) up to the branch step."""

_KEPT = ("step", "recent_losses", *divergence.KEYS)  # the trunk's state a branch carries on


class Waiting(StateError):
    """A branch whose trunk has not reached the branch step yet: try again later (nothing was written)."""


@dataclass(frozen=True)
class BranchStart:
    trunk_run_id: str
    step: int  # the branch step of the plan
    snapshot: Path | None  # None: train from step 0
    note: str | None = None


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)  # a checkpoint's files are never modified in place, so the snapshot may share them
    except OSError:
        shutil.copy2(src, dst)


def write_snapshot(run: RunDir, spec: RunSpec, step: int) -> Path | None:
    """At a branch step of ``spec`` (a trunk), the snapshot of ``step`` from the checkpoint the trunk has just
    written there; None at any other step."""
    if step not in spec.branch_steps:
        return None
    final = run.snapshot_dir(step)
    if final.is_dir():
        return final
    source = run.checkpoint_dir(step)
    if not (source / ckpt.STATE_FILE).is_file():
        raise StateError(f"{source} is not a complete checkpoint: no snapshot of step {step}")
    tmp = run.path / f".{final.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        shutil.copytree(source, tmp, copy_function=_link_or_copy)
        ckpt.fsync_tree(tmp)
        os.replace(tmp, final)
        ckpt.fsync_path(run.path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def _science(spec: RunSpec, name: str) -> Any:
    value = getattr(spec, name)
    if hasattr(value, "model_dump"):
        return value.model_dump(exclude=NOT_SCIENCE_SUBFIELDS.get(name))
    return value


def check_science(branch: RunSpec, trunk: RunSpec) -> None:
    """StateError unless ``trunk`` trains exactly like ``branch`` up to the branch step."""
    assert branch.trunk is not None
    who = f"branch {branch.run_id} cannot start from trunk {trunk.run_id}"
    for name in SCIENCE:
        mine, theirs = _science(branch, name), _science(trunk, name)
        if mine != theirs:
            raise StateError(f"{who}: {name} differs ({mine!r} here, {theirs!r} in the trunk)")
    if branch.schedule.kind != "wsd":
        raise StateError(f"{who}: only wsd schedules branch (schedule.kind is {branch.schedule.kind!r})")
    trunk_cooldown = cooldown_start(trunk.steps, trunk.schedule)
    if trunk_cooldown < branch.trunk.step:
        raise StateError(f"{who}: the trunk's cooldown starts at step {trunk_cooldown}, before the branch step "
                         f"{branch.trunk.step}")  # fmt: skip


def branch_start(run: RunDir, spec: RunSpec) -> BranchStart | None:
    """How a branch starts (None for a run that is not a branch or resumes from a checkpoint of its own); raises
    StateError when it cannot start yet (its trunk has not reached the step) or ever (see the module docstring)."""
    if spec.trunk is None or ckpt.latest_checkpoint(run) is not None:
        return None
    ref = spec.trunk
    trunk = run.sibling(ref.run_id)
    trunk_spec = trunk.spec_or_none()
    if trunk_spec is None:
        raise StateError(f"branch {run.run_id}: its trunk {ref.run_id} is not a planned run next to it ({trunk.path})")
    snapshot = trunk.snapshot_dir(ref.step)
    if (snapshot / ckpt.STATE_FILE).is_file():
        check_science(spec, trunk_spec)
        return BranchStart(ref.run_id, ref.step, snapshot)
    status = result_status(trunk)
    if status == "done" or ref.step not in trunk_spec.branch_steps:
        why = "finished" if status == "done" else "trains"
        return BranchStart(ref.run_id, ref.step, None,
                           note=f"trunk {ref.run_id} {why} without a snapshot at step {ref.step} (planned before "
                                "this budget): trained from step 0 as an independent run")  # fmt: skip
    if status in ("diverged", "failed") or trunk.error.is_file():
        raise StateError(f"branch {run.run_id} cannot start: its trunk {ref.run_id} {status or 'failed'} before "
                         f"step {ref.step} (see `ladder status`; retry the trunk, then the branch)")  # fmt: skip
    raise Waiting(f"branch {run.run_id} waits for trunk {ref.run_id} at step {ref.step}")


def resume(
    run: RunDir,
    start: BranchStart | None,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    spec_hash: str,
    write_files: bool,
) -> dict[str, Any] | None:
    """The trainer state to start from: the run's own checkpoint (:func:`checkpoint.resume`), else a branch's
    ``start`` (from :func:`branch_start`; :func:`start_state`), else None (a fresh run)."""
    resumed = ckpt.resume(run, model=model, optimizer=optimizer, spec_hash=spec_hash)
    if resumed is not None:
        if write_files:  # a trunk killed between the checkpoint of a branch step and its snapshot
            write_snapshot(run, run.read_spec(), int(resumed["step"]))
        return resumed
    return None if start is None else start_state(start, run, model=model, optimizer=optimizer, write_files=write_files)


def start_state(
    start: BranchStart, run: RunDir, *, model: torch.nn.Module, optimizer: torch.optim.Optimizer, write_files: bool
) -> dict[str, Any]:
    """Restore a branch from its trunk's snapshot (weights, optimizer, RNG, in place) and return the trainer
    state it starts with; ``write_files`` (rank 0) also writes its metrics prefix."""
    books: dict[str, Any] = {"branched_from": {"run_id": start.trunk_run_id, "step": 0}, "branch_note": start.note}
    if start.snapshot is None:
        return books
    state = ckpt.load_checkpoint(start.snapshot, model=model, optimizer=optimizer, restore_rng=True)
    if int(state["step"]) != start.step:
        raise StateError(f"{start.snapshot} holds step {state['step']}, not the branch step {start.step}")
    if write_files:
        trunk = run.sibling(start.trunk_run_id)
        records = [r for r in read_jsonl(trunk.metrics) if int(r.get("step", 0)) <= start.step] \
            if trunk.metrics.is_file() else []  # fmt: skip
        atomic_write_text(run.metrics, "".join(json.dumps(jsonable(r)) + "\n" for r in records))
    books["branched_from"]["step"] = start.step
    # the data the trunk trained on (a snapshot that predates the record has none): a branch never cools down on other
    data = {"data": state["data"]} if "data" in state else {}
    return {**{k: state[k] for k in _KEPT}, **data, **books}


def result_fields(run: RunDir, spec: RunSpec, state: dict[str, Any], tokens_per_step: int) -> dict[str, Any]:
    """What ``result.json`` says about branching: ``flops_spent`` (the FLOPs of the steps this run trained
    itself; ``flops`` stays that of all its tokens), and on a branch its trunk and branch step, on a trunk the
    snapshots it kept."""
    start = int((state.get("branched_from") or {}).get("step", 0))
    out: dict[str, Any] = {"flops_spent": float(spec.flops_per_token) * (state["step"] - start) * tokens_per_step}
    if spec.trunk is not None:
        out.update(trunk_run_id=spec.trunk.run_id, branch_step=spec.trunk.step, trained_from_step=start)
        if state.get("branch_note"):
            out["branch_note"] = state["branch_note"]
    if spec.branch_steps:
        out["snapshots"] = [s for s in spec.branch_steps if run.snapshot_dir(s).is_dir()]
    return out
