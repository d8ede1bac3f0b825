"""Resumable checkpoints of a run, written so that a kill at ANY moment leaves a usable one.

A checkpoint is a directory ``ckpt-<step>/`` (name from :mod:`ladder.layout`) holding::

    model/               the weights via ``save_pretrained`` (safetensors; loads in plain transformers)
    optimizer.pt         ``optimizer.state_dict()``
    rng.pt               torch CPU and CUDA generator states
    trainer_state.json   step, data position, python and numpy RNG states, metrics bookkeeping (loss window,
                         running minimum, spike count, log accumulators, wall time so far, restarts)

Write protocol (:func:`save_checkpoint`): everything goes into a hidden temporary directory
``.ckpt-<step>.tmp-<pid>`` in the run dir, every file is fsync'ed, the directory is renamed to ``ckpt-<step>``
and the run dir fsync'ed; only then is ``checkpoint.json`` replaced atomically (write temp, fsync, rename) to
point at it; only then are older ``ckpt-*`` directories deleted. So at every instant ``checkpoint.json`` is
either absent or names a complete checkpoint; leftovers of an interrupted write (temporary directories, a
renamed directory the pointer never reached) are removed by :func:`clean_stale` when the run starts again.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ladder.errors import StateError
from ladder.layout import CHECKPOINT_PREFIX, SNAPSHOT_PREFIX, RunDir, atomic_write_json
from ladder.model.training import divergence
from ladder.model.training.llama import save_model

MODEL_DIR = "model"
OPTIMIZER_FILE = "optimizer.pt"
RNG_FILE = "rng.pt"
STATE_FILE = "trainer_state.json"
_TMP_PREFIX = "." + CHECKPOINT_PREFIX


def fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(root: Path) -> None:
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            fsync_path(Path(dirpath) / name)
        fsync_path(Path(dirpath))


# ---- RNG states ---------------------------------------------------------------------------------------
def capture_python_numpy_rng() -> dict[str, Any]:
    """Python's and numpy's global RNG states as JSON-able data."""
    version, internal, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)
    return {
        "python": [version, list(internal), gauss],
        "numpy": [kind, keys.tolist(), int(pos), int(has_gauss), float(cached)],
    }


def restore_python_numpy_rng(state: dict[str, Any]) -> None:
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))


def capture_torch_rng() -> dict[str, Any]:
    out: dict[str, Any] = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        out["cuda"] = torch.cuda.get_rng_state_all()
    return out


def restore_torch_rng(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["cpu"])
    cuda = state.get("cuda")
    if cuda is not None and torch.cuda.is_available():
        n = min(len(cuda), torch.cuda.device_count())
        torch.cuda.set_rng_state_all(cuda[:n])


# ---- pointer and cleanup ------------------------------------------------------------------------------
def latest_checkpoint(run: RunDir) -> tuple[int, Path] | None:
    """``(step, directory)`` of the checkpoint ``checkpoint.json`` points at, or None when there is none."""
    if not run.checkpoint_pointer.is_file():
        return None
    try:
        pointer = json.loads(run.checkpoint_pointer.read_text())
        step = int(pointer["step"])
        path = run.path / pointer["path"]
    except (ValueError, KeyError, TypeError) as e:
        raise StateError(f"{run.checkpoint_pointer} is unreadable ({e}); delete it to restart the run from scratch")
    if not (path / STATE_FILE).is_file():
        raise StateError(
            f"{run.checkpoint_pointer} names {path.name}, which is missing or incomplete; delete the pointer to "
            "restart the run from scratch"
        )
    return step, path


def clean_stale(run: RunDir) -> None:
    """Delete temporary checkpoint and snapshot directories and every ``ckpt-*`` directory the pointer does not
    name (snapshots ``branch-*`` are kept: branches start from them)."""
    keep = latest_checkpoint(run)
    keep_path = keep[1].resolve() if keep else None
    for p in list(run.path.glob(f"{_TMP_PREFIX}*")) + list(run.path.glob(f".{SNAPSHOT_PREFIX}*")):
        shutil.rmtree(p, ignore_errors=True)
    for p in run.checkpoint_dirs():
        if keep_path is None or p.resolve() != keep_path:
            shutil.rmtree(p, ignore_errors=True)


def remove_checkpoints(run: RunDir) -> None:
    """Delete the pointer first (so no reader follows it to a half-deleted directory), then every checkpoint
    (not the snapshots ``branch-*`` a trunk keeps for its branches)."""
    run.checkpoint_pointer.unlink(missing_ok=True)
    for p in list(run.checkpoint_dirs()) + list(run.path.glob(f"{_TMP_PREFIX}*")):
        shutil.rmtree(p, ignore_errors=True)


# ---- save and load ------------------------------------------------------------------------------------
def save_checkpoint(
    run: RunDir,
    step: int,
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    state: dict[str, Any],
) -> Path:
    """Write checkpoint ``step`` atomically (see the module docstring) and delete older ones. ``model`` is the
    bare ``PreTrainedModel`` (not a DDP or compiled wrapper). ``state`` is the JSON-able trainer state; python
    and numpy RNG states are added here. Returns the checkpoint directory."""
    final = run.checkpoint_dir(step)
    current = latest_checkpoint(run)
    if current is not None and current[0] == step and current[1].resolve() == final.resolve():
        return final  # this exact checkpoint is already complete (the state of step N does not change)
    tmp = run.path / f"{_TMP_PREFIX}{step:09d}.tmp-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    try:
        save_model(model, tmp / MODEL_DIR)
        torch.save(optimizer.state_dict(), tmp / OPTIMIZER_FILE)
        torch.save(capture_torch_rng(), tmp / RNG_FILE)
        full_state = dict(state, step=step, rng=capture_python_numpy_rng())
        with open(tmp / STATE_FILE, "w", encoding="utf-8") as f:
            json.dump(full_state, f)
        fsync_tree(tmp)
        if final.exists():  # a directory from an interrupted earlier attempt that the pointer never named
            shutil.rmtree(final)
        os.replace(tmp, final)
        fsync_path(run.path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    atomic_write_json(run.checkpoint_pointer, {"step": step, "path": final.name})
    fsync_path(run.path)
    for p in run.checkpoint_dirs():
        if p.resolve() != final.resolve():
            shutil.rmtree(p, ignore_errors=True)
    return final


def load_model_weights(model: torch.nn.Module, folder: Path) -> None:
    """Load the safetensors weights in ``folder`` (one file or shards) into ``model`` in place, exactly."""
    from safetensors.torch import load_file

    files = sorted(Path(folder).glob("*.safetensors"))
    if not files:
        raise StateError(f"no *.safetensors weights in {folder}")
    expected = set(model.state_dict().keys())
    seen: set[str] = set()
    for f in files:
        tensors = load_file(str(f))
        unexpected = set(tensors) - expected
        if unexpected:
            raise StateError(f"checkpoint weights in {f} do not fit the model: unexpected {sorted(unexpected)[:5]}")
        model.load_state_dict(tensors, strict=False)
        seen |= set(tensors)
    missing = expected - seen
    tied = getattr(model.config, "tie_word_embeddings", False)
    if tied:
        missing.discard("lm_head.weight")
    if missing:
        raise StateError(f"checkpoint weights in {folder} lack {sorted(missing)[:5]}")
    if tied:
        model.tie_weights()


def load_checkpoint(
    path: Path,
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    restore_rng: bool = True,
) -> dict[str, Any]:
    """Load a checkpoint directory into ``model`` and ``optimizer`` (in place), restore the RNG states when asked,
    and return the trainer state (a state written by an older version in today's form: every resume and every
    branch start reads it here)."""
    path = Path(path)
    state = divergence.upgrade(json.loads((path / STATE_FILE).read_text()))
    load_model_weights(model, path / MODEL_DIR)
    if optimizer is not None:
        opt_state = torch.load(path / OPTIMIZER_FILE, map_location="cpu", weights_only=True)
        optimizer.load_state_dict(opt_state)
    if restore_rng:
        restore_torch_rng(torch.load(path / RNG_FILE, map_location="cpu", weights_only=True))
        restore_python_numpy_rng(state["rng"])
    return state


def resume(
    run: RunDir, *, model: torch.nn.Module, optimizer: torch.optim.Optimizer, spec_hash: str
) -> dict[str, Any] | None:
    """Restore the run's latest checkpoint (weights, optimizer, RNG) and return its trainer state with
    ``restarts`` counted up; None when there is none. StateError when it was written for another spec."""
    latest = latest_checkpoint(run)
    if latest is None:
        return None
    _, path = latest
    try:
        state = load_checkpoint(path, model=model, optimizer=optimizer, restore_rng=True)
    except StateError as exc:  # its weights gone or not this model's: the same repair, which it did not say
        raise StateError(
            f"{exc}; delete the checkpoint ({run.checkpoint_pointer.name} and {path.name}) to restart the run from "
            "its start"
        ) from exc
    except Exception as exc:  # noqa: BLE001 - a torn file of it (disk trouble, a copy cut short): a traceback was all
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        raise StateError(
            f"checkpoint {path} is damaged ({type(exc).__name__}: {first}); delete it "
            f"({run.checkpoint_pointer.name} and {path.name}) to restart the run from its start"
        ) from exc
    if state.get("spec_hash") != spec_hash:
        raise StateError(
            f"checkpoint {path} was written for a different spec (hash {state.get('spec_hash')} != "
            f"{spec_hash}); delete it ({run.checkpoint_pointer.name} and ckpt-*) to restart"
        )
    state.pop("rng", None)
    state["restarts"] = int(state.get("restarts", 0)) + 1
    return state
