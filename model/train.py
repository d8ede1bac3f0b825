"""Train one run of a ladder: the job that runs on a node. ``train(run_dir)`` reads ``spec.json`` and leaves
``metrics.jsonl``, ``result.json`` and ``model/`` (see :mod:`ladder.layout`).

What one call does
------------------
1. If ``result.json`` says ``done`` or ``diverged``, return it (both are deterministic outcomes; delete the file to
   train again). A ``failed`` result is overwritten by the new attempt; ``error.json`` is removed.
2. Data: an injected ``dataset`` (a :class:`TrainData`, or a ``PreparedData``) or ``prepare_data(spec.data, ...)``
   (rank 0 first, the others then find it in the cache). Validation: the fixed first windows of the validation
   split, ``ceil(eval_tokens / seq_len)`` of them.
3. Model ``build_model(spec.shape)`` seeded with ``spec.seed``; AdamW (:mod:`ladder.model.optim`); LR from
   :func:`ladder.model.schedule.lr_at`. If ``checkpoint.json`` exists, everything is restored from it (weights,
   optimizer, step, RNG, bookkeeping) and ``metrics.jsonl`` is cut back to the records with ``step <=`` the
   checkpoint's step (rewritten atomically), so the file never holds duplicates.
4. Each step is ``batch_tokens // seq_len`` sequences: global sequence numbers ``step * S .. step * S + S - 1``,
   read through ``window_order(len(train), seed)``; so the data position is a function of the step alone. The
   step's sequences are split in contiguous slices over ranks, each slice in micro-batches of
   ``micro_batch_size`` sequences; the loss of each micro-batch is weighted by its share of the global batch so
   that the gradient is that of the mean loss over the whole batch, whatever the world size or micro-batching.
   Gradient clipping at ``grad_clip`` (the logged ``grad_norm`` is the norm before clipping).
5. fp32 on CPU; bf16 autocast on CUDA (``precision: auto``; weights and optimizer stay fp32; TF32 matmuls on);
   SDPA attention; ``torch.compile`` when ``spec.compile``. On CPU in fp32 a run is bit-reproducible at a fixed
   thread count, also across kills and resumes.
6. Logs ``{"kind": "train", "step", "tokens", "loss", "lr", "grad_norm", "tokens_per_s", "mfu", "elapsed_s"}``
   every ``log_interval`` steps (``loss``: mean of the per-step losses since the previous record; ``lr`` and
   ``grad_norm``: of the logged step; ``tokens_per_s`` over the interval's step time; ``elapsed_s``: wall time
   since the run first started, summed over restarts) and ``{"kind": "eval", "step", "tokens", "eval_loss"}``
   every ``eval_interval`` steps and once at the end. ``step`` counts completed optimizer updates (1..steps),
   ``tokens`` = step x tokens per step.
7. Checkpoints (:mod:`ladder.model.checkpoint`) every ``checkpoint_interval`` steps and whenever
   ``checkpoint_minutes`` have passed since the last one (never at the final step: the run ends instead).
8. At the end: final eval, ``model/`` (``save_pretrained`` + the tokenizer files; written to a temporary folder
   and renamed), then ``result.json`` (atomic), then the checkpoints are deleted.

Result (``result.json``)
------------------------
``status`` (done | diverged | failed), ``run_id``, ``final_train_loss`` (the MEAN of the per-step training
losses over the last ``max(1, ceil(steps / 10))`` steps: a smoothed, exactly reproducible number),
``final_eval_loss``, ``tokens``, ``steps``, ``flops`` (= flops_per_token x tokens), ``wall_time_s`` (wall time of
all attempts up to their last checkpoint plus the last attempt: work lost to a kill after the last checkpoint is
not counted), ``train_time_s`` (time inside training steps), ``tokens_per_s`` (tokens / train_time_s),
``mfu``, ``peak_flops``, ``restarts``, ``device``, ``device_name``, ``precision``, ``world_size``, and on
divergence ``diverged_at_step`` and ``reason``; on failure ``reason`` and ``error_type``.

Divergence
----------
A non-finite loss or gradient norm at step N stops the run BEFORE the optimizer applies that update: no state
is written from a NaN. A loss above ``spike_factor`` x its running minimum for ``patience`` consecutive STEPS
(every step is checked, not only logged ones) also stops it. Either way ``result.json`` gets ``status:
diverged``, ``diverged_at_step: N`` and a ``reason``; the last good checkpoint is kept; no ``model/`` is written.
Test hook: ``force_nan_at_step=N`` or the environment variable ``LADDER_FORCE_NAN_AT_STEP=N`` turns the loss of
update N into NaN.

Signals and preemption (the contract)
-------------------------------------
While the training loop runs (installed in the MAIN thread only; elsewhere nothing is installed), ``train``
handles ``SIGTERM``, ``SIGINT``, ``SIGUSR2`` and, if set, submitit's ``SUBMITIT_PREEMPT_SIGNAL``. The handler
only records the signal. At the next step boundary (after the step in flight has been applied and logged; in
DDP the flag is all-reduced with the step's loss, so every rank stops at the same step):

1. a checkpoint of that step is written (rank 0; the other ranks wait at a barrier until it is complete);
2. the handlers that were installed before ``train`` started are put back;
3. if the previous handler of the received signal is a Python callable (other than Python's default SIGINT
   handler), it is CALLED with ``(signum, None)``. This is how submitit's ``checkpoint_and_try_requeue`` (its
   USR2 handler: calls the Checkpointable's ``checkpoint()``, requeues the job with scontrol, exits with
   ``SystemExit``) runs, at a step boundary with a fresh checkpoint on disk, instead of mid-step;
4. if that handler returns (or there is none), ``Preempted(signum, step, checkpoint)`` is raised. Its
   ``exit_code`` is ``128 + signum`` (130 for Ctrl-C, 143 for SIGTERM), which a CLI should exit with after
   printing ``str(exc)``. ``result.json`` is NOT written: the run is unfinished, and calling ``train`` again
   resumes it bit-identically (on CPU fp32).

A second SIGINT while one is pending raises ``KeyboardInterrupt`` at once (a hard stop; the last periodic
checkpoint is intact because checkpoints are atomic). SIGKILL cannot be handled: the run resumes from its last
checkpoint. Signals arriving during the final evaluation and save are ignored (the run is about to finish).

For a Checkpointable submit wrapper: call ``train(run_dir)`` from ``__call__``; ``checkpoint()`` needs to save
nothing (train's own checkpoint is on disk) and can return ``DelayedSubmission(self, *args)``. Let
``Preempted`` propagate if submitit's handler returned (non-zero ranks), since the job is being requeued anyway.

Several devices
---------------
When ``WORLD_SIZE > 1`` (torchrun, or ``submitit.helpers.TorchDistributedEnvironment().export()`` under
submitit), ``train`` initialises ``torch.distributed`` itself (``nccl`` on CUDA, ``gloo`` on CPU) unless it is
already initialised, uses ``cuda:LOCAL_RANK``, wraps the model in DDP and splits every global batch across ranks
(the loss curve is that of one process with the same global batch, up to float summation order). Only rank 0
writes files; every rank returns the result dict.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import shutil
import signal
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from ladder.model import checkpoint as ckpt
from ladder.model.config import RunSpec
from ladder.model.hardware import mfu as compute_mfu
from ladder.model.hardware import peak_flops
from ladder.model.llama import build_model, save_model
from ladder.model.optim import build_optimizer
from ladder.model.schedule import lr_at

from ladder.errors import DataError, SpecError, StateError
from ladder.layout import (
    RunDir,
    append_jsonl,
    atomic_write_json,
    atomic_write_text,
    read_jsonl,
)

log = logging.getLogger("ladder.train")

FORCE_NAN_ENV = "LADDER_FORCE_NAN_AT_STEP"
FINAL_LOSS_WINDOW = 0.1  # final_train_loss: mean over the last 10% of steps


# ======================================================================================= public helpers


class Preempted(Exception):
    """Training stopped at a step boundary on a signal, after writing a checkpoint. Not a failure: calling
    ``train`` again resumes. ``exit_code`` is ``128 + signum``."""

    def __init__(self, signum: int, step: int, checkpoint: Path | None):
        self.signum = int(signum)
        self.step = int(step)
        self.checkpoint = checkpoint
        try:
            name = signal.Signals(self.signum).name
        except ValueError:
            name = str(self.signum)
        self.signal_name = name
        super().__init__(
            f"stopped by {name} after step {self.step}; checkpoint {checkpoint}; run the same command again to resume"
        )

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    def __reduce__(self):  # picklable (submitit pickles a job's exception into its result file)
        return (type(self), (self.signum, self.step, self.checkpoint))


class Windows(Protocol):
    """What the trainer reads: ``len()`` windows of ``seq_len + 1`` tokens; ``batch(indices)`` stacks them."""

    def __len__(self) -> int: ...

    def batch(self, indices: Sequence[int]) -> np.ndarray: ...


class ArrayWindows:
    """In-memory twin of ``ladder.model.data.TokenWindows``: non-overlapping windows of ``seq_len + 1`` tokens over
    a 1-D token array (window ``i`` is ``tokens[i * (seq_len + 1) : (i + 1) * (seq_len + 1)]``)."""

    def __init__(self, tokens: np.ndarray | Sequence[int], seq_len: int, limit: int | None = None):
        self.tokens = np.asarray(tokens, dtype=np.int64).reshape(-1)
        self.seq_len = int(seq_len)
        self.window = self.seq_len + 1
        n = len(self.tokens) // self.window
        self._len = n if limit is None else min(n, int(limit))

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, i: int) -> np.ndarray:
        i = int(i)
        if not 0 <= i < self._len:
            raise IndexError(f"window {i} out of range (0..{self._len - 1})")
        return self.tokens[i * self.window : (i + 1) * self.window].copy()

    def batch(self, indices: Sequence[int]) -> np.ndarray:
        idx = np.asarray([int(i) for i in indices], dtype=np.int64)
        if len(idx) and (idx.min() < 0 or idx.max() >= self._len):
            raise IndexError(f"window index out of range (0..{self._len - 1})")
        return self.tokens[idx[:, None] * self.window + np.arange(self.window)[None, :]]


@dataclass
class TrainData:
    """Data injected into :func:`train`: train windows, the FIXED validation windows (evaluated in order, the
    first ``ceil(eval_tokens / seq_len)`` of them), and optionally the tokenizer folder (copied into ``model/``)
    and the special ids (written into the model config)."""

    train: Windows
    val: Windows
    tokenizer_dir: Path | None = None
    eos_id: int | None = None
    pad_id: int | None = None


def inputs_and_labels(windows: torch.Tensor, *, label_shift_bug: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Split windows of ``seq_len + 1`` tokens into inputs ``w[:, :-1]`` and next-token labels ``w[:, 1:]``.
    ``label_shift_bug=True`` deliberately breaks the shift (labels = inputs), for the sanity check's test."""
    x = windows[:, :-1]
    y = windows[:, :-1] if label_shift_bug else windows[:, 1:]
    return x, y


def lm_loss(model: torch.nn.Module, windows: torch.Tensor, *, label_shift_bug: bool = False, reduction: str = "mean"):
    """Next-token cross-entropy (in fp32) of ``model`` on a batch of windows; every position is a target."""
    x, y = inputs_and_labels(windows, label_shift_bug=label_shift_bug)
    logits = model(input_ids=x, use_cache=False).logits
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1), reduction=reduction)


def resolve_precision(precision: str, device: torch.device) -> str:
    """``auto`` -> ``bf16`` on a CUDA device that supports it, else ``fp32``."""
    if precision == "auto":
        if device.type == "cuda" and torch.cuda.is_bf16_supported():
            return "bf16"
        return "fp32"
    return precision


# ======================================================================================= distributed


@dataclass
class _Dist:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    initialized_here: bool = False

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def _setup_distributed(device: torch.device | None) -> tuple[_Dist, torch.device]:
    import torch.distributed as dist

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        if device is None:
            device = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
        return _Dist(), torch.device(device)
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", str(rank)))
    if device is None:
        device = torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")
    device = torch.device(device)
    here = False
    if not dist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group(backend=backend, rank=rank, world_size=world)
        here = True
    if device.type == "cpu" and "OMP_NUM_THREADS" not in os.environ:
        local_world = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // max(1, local_world)))
    return _Dist(rank=dist.get_rank(), world_size=dist.get_world_size(), local_rank=local_rank, initialized_here=here), device


def _barrier(d: _Dist) -> None:
    if d.enabled:
        import torch.distributed as dist

        dist.barrier()


def _all_reduce_sum(t: torch.Tensor, d: _Dist) -> torch.Tensor:
    if d.enabled:
        import torch.distributed as dist

        dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t


# ======================================================================================= signals


def _preempt_signals() -> list[int]:
    sigs = [signal.SIGTERM, signal.SIGINT]
    if hasattr(signal, "SIGUSR2"):
        sigs.append(signal.SIGUSR2)
    name = os.environ.get("SUBMITIT_PREEMPT_SIGNAL")
    if name:
        s = getattr(signal, name if name.startswith("SIG") else f"SIG{name}", None)
        if s is not None and s not in sigs:
            sigs.append(s)
    return [int(s) for s in sigs]


class _SignalTrap:
    """Records preemption signals while the loop runs; see the module docstring for the contract."""

    def __init__(self, enabled: bool):
        self.signals = _preempt_signals()
        self.enabled = enabled and threading.current_thread() is threading.main_thread()
        self.received: int | None = None
        self.previous: dict[int, Any] = {}

    def _handler(self, signum: int, frame: Any) -> None:
        if self.received == signal.SIGINT and signum == signal.SIGINT:
            raise KeyboardInterrupt  # second Ctrl-C: stop now
        if self.received is None:
            self.received = signum
            log.warning("received %s: will checkpoint and stop at the next step boundary", signal.Signals(signum).name)

    def install(self) -> None:
        if not self.enabled:
            return
        for s in self.signals:
            self.previous[s] = signal.getsignal(s)
            signal.signal(s, self._handler)

    def restore(self) -> None:
        for s, h in self.previous.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)
        self.previous.clear()

    def flags(self) -> list[float]:
        return [1.0 if self.received == s else 0.0 for s in self.signals]

    def chain(self, signum: int) -> None:
        """Restore the previous handlers and call the previous one of ``signum`` if it is a Python callable."""
        prev = self.previous.get(signum)
        self.restore()
        if callable(prev) and prev is not signal.default_int_handler:
            prev(signum, None)


# ======================================================================================= the run


def _read_spec(run: RunDir) -> RunSpec:
    if not run.spec.is_file():
        raise StateError(f"{run.path} has no {run.spec.name}: not a planned run directory")
    try:
        return RunSpec.model_validate_json(run.spec.read_text())
    except Exception as e:  # pydantic ValidationError or bad JSON
        raise SpecError(f"{run.spec}: {e}") from e


def _finite_or_none(x: float | None) -> float | None:
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _resolve_data(spec: RunSpec, dataset: Any, data_cache: Any, progress: bool, d: _Dist) -> TrainData:
    seq_len = spec.data.seq_len
    if dataset is None:
        from ladder.model.data import prepare_data

        prepared = None
        if d.is_main:
            prepared = prepare_data(spec.data, spec.shape.vocab_size, cache_root=data_cache, progress=progress)
        _barrier(d)
        if not d.is_main:
            prepared = prepare_data(spec.data, spec.shape.vocab_size, cache_root=data_cache, progress=False)
        dataset = prepared
    if isinstance(dataset, TrainData):
        return dataset
    if hasattr(dataset, "train_windows") and hasattr(dataset, "val_windows"):  # a PreparedData
        return TrainData(
            train=dataset.train_windows(seq_len),
            val=dataset.val_windows(seq_len, spec.data.validation_tokens),
            tokenizer_dir=Path(dataset.tokenizer_dir),
            eos_id=dataset.eos_id,
            pad_id=dataset.pad_id,
        )
    raise TypeError(f"dataset must be a TrainData or a PreparedData, got {type(dataset).__name__}")


def _trim_metrics(run: RunDir, step: int) -> None:
    """Keep only the records with ``step <= step`` (all of them written before that checkpoint)."""
    if not run.metrics.exists():
        return
    kept = [r for r in read_jsonl(run.metrics) if int(r.get("step", 0)) <= step]
    atomic_write_text(run.metrics, "".join(json.dumps(r) + "\n" for r in kept))


def _copy_tokenizer(src: Path, dst: Path) -> None:
    """Copy a tokenizer folder's files (or one tokenizer.json) into ``dst``, never over the model's own files."""
    src = Path(src)
    files = [src] if src.is_file() else sorted(f for f in src.iterdir() if f.is_file())
    for f in files:
        if not (dst / f.name).exists():
            shutil.copy2(f, dst / f.name)


def _model_tmp_prefix(run: RunDir) -> str:
    return f".{run.model.name}.tmp-"


def _save_final_model(run: RunDir, model: torch.nn.Module, tokenizer_dir: Path | None) -> None:
    """``model/`` = save_pretrained + tokenizer, written in a temporary folder and renamed into place."""
    tmp = run.path / f"{_model_tmp_prefix(run)}{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    save_model(model, tmp)
    if tokenizer_dir is not None:
        _copy_tokenizer(Path(tokenizer_dir), tmp)
    ckpt.fsync_tree(tmp)
    if run.model.exists():
        shutil.rmtree(run.model)
    os.replace(tmp, run.model)
    ckpt.fsync_path(run.path)


class _Progress:
    def __init__(self, enabled: bool, total_tokens: int, done_tokens: int, run_id: str):
        self.bar = None
        if not enabled:
            return
        from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

        self.bar = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[tok]}"),
            TextColumn("loss {task.fields[loss]}"),
            TextColumn("{task.fields[tps]} tok/s"),
            TimeRemainingColumn(),
            transient=False,
        )
        self.total = total_tokens
        self.task = self.bar.add_task(run_id or "train", total=total_tokens, completed=done_tokens,
                                      tok=self._tok(done_tokens), loss="-", tps="-")  # fmt: skip
        self.bar.start()

    def _tok(self, done: int) -> str:
        from ladder.model.config import format_count

        return f"{format_count(done)}/{format_count(self.total)} tok"

    def update(self, tokens: int, loss: float, tps: float | None) -> None:
        if self.bar is not None:
            self.bar.update(self.task, completed=tokens, tok=self._tok(tokens), loss=f"{loss:.4f}",
                            tps=f"{tps:,.0f}" if tps else "-")  # fmt: skip

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


def train(
    run_dir: str | os.PathLike,
    *,
    dataset: TrainData | Any | None = None,
    device: str | torch.device | None = None,
    progress: bool = False,
    data_cache: str | os.PathLike | None = None,
    stop_after_steps: int | None = None,
    force_nan_at_step: int | None = None,
    handle_signals: bool = True,
) -> dict[str, Any]:
    """Train the run in ``run_dir`` (resuming from its checkpoint if any) and return the result dict.

    ``dataset``: inject data (a :class:`TrainData` or a ``PreparedData``) instead of preparing ``spec.data``;
    ``data_cache``: cache root for ``prepare_data``. ``stop_after_steps=N``: stop once N steps are complete,
    write a checkpoint there and return ``{"status": "stopped", "steps_done": N, ...}`` without a result.json.
    ``force_nan_at_step``: test hook (see Divergence). ``handle_signals=False`` leaves signal handlers alone.
    Raises :class:`Preempted` on a handled signal (see the module docstring).
    """
    run = RunDir(Path(run_dir))
    spec = _read_spec(run)
    if run.result.is_file():
        try:
            previous = json.loads(run.result.read_text())
        except ValueError:
            previous = {}
        if previous.get("status") in ("done", "diverged"):
            if previous.get("status") == "done" and int(os.environ.get("RANK", "0")) == 0:
                ckpt.remove_checkpoints(run)  # left behind when a kill hit between result.json and the cleanup
            return previous
    d, dev = _setup_distributed(device)
    try:
        return _Trainer(run, spec, d, dev, dataset, data_cache, progress, stop_after_steps,
                        force_nan_at_step, handle_signals).run()  # fmt: skip
    finally:
        if d.initialized_here:
            import torch.distributed as dist

            dist.destroy_process_group()


class _Trainer:
    def __init__(self, run, spec, d, dev, dataset, data_cache, progress, stop_after_steps, force_nan, handle_signals):
        self.run_dir: RunDir = run
        self.spec: RunSpec = spec
        self.d: _Dist = d
        self.dev: torch.device = dev
        self.dataset = dataset
        self.data_cache = data_cache
        self.progress = progress and d.is_main
        self.stop_after_steps = stop_after_steps
        env_nan = os.environ.get(FORCE_NAN_ENV)
        self.force_nan = force_nan if force_nan is not None else (int(env_nan) if env_nan else None)
        self.trap = _SignalTrap(handle_signals)
        self.attempt_start = time.perf_counter()

    # ---------------------------------------------------------------------------------------- helpers
    def _write(self, fn: Callable[[], None]) -> None:
        if self.d.is_main:
            fn()

    def _elapsed(self) -> float:
        return self.state["wall_time_s"] + (time.perf_counter() - self.attempt_start)

    def _base_result(self) -> dict[str, Any]:
        spec, st = self.spec, self.state
        tokens = st["step"] * self.tokens_per_step
        tps = st["tokens_trained"] / st["train_time_s"] if st["train_time_s"] > 0 else None
        return {
            "run_id": spec.run_id or self.run_dir.run_id,
            "steps": st["step"],
            "tokens": tokens,
            "flops": float(spec.flops_per_token) * tokens,
            "final_train_loss": _finite_or_none(float(np.mean(st["recent_losses"]))) if st["recent_losses"] else None,
            "wall_time_s": round(self._elapsed(), 3),
            "train_time_s": round(st["train_time_s"], 3),
            "tokens_per_s": tps,
            "mfu": compute_mfu(spec.flops_per_token, tps, self.peak.flops, self.d.world_size) if tps else None,
            "peak_flops": self.peak.flops,
            "peak_flops_source": self.peak.source,
            "restarts": st["restarts"],
            "device": self.dev.type,
            "device_name": self.peak.device_name,
            "precision": self.precision,
            "world_size": self.d.world_size,
            "seq_len": self.seq_len,
            "batch_sequences": self.S,
            "params_total": spec.shape.params_total,
            "params_non_embedding": spec.shape.params_non_embedding,
            "flops_per_token": spec.flops_per_token,
            "torch_threads": torch.get_num_threads() if self.dev.type == "cpu" else None,
        }

    # ---------------------------------------------------------------------------------------- setup
    def _setup(self) -> None:
        spec, d = self.spec, self.d
        run = self.run_dir
        self.seq_len = spec.data.seq_len
        self.S = spec.sequences_per_batch
        if self.S < 1:
            raise SpecError(f"batch_tokens={spec.batch_tokens} is smaller than one sequence of seq_len={self.seq_len}")
        if self.S < d.world_size:
            raise SpecError(f"{self.S} sequences per step cannot be split over {d.world_size} ranks")
        self.tokens_per_step = self.S * self.seq_len
        if spec.batch_tokens % self.seq_len:
            log.warning("batch_tokens=%d is not a multiple of seq_len=%d: training %d tokens per step",
                        spec.batch_tokens, self.seq_len, self.tokens_per_step)  # fmt: skip
        self.total_steps = spec.steps
        self.precision = resolve_precision(spec.precision, self.dev)
        if self.dev.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
        self.autocast = (
            (lambda: torch.autocast(device_type=self.dev.type, dtype=torch.bfloat16))
            if self.precision == "bf16"
            else contextlib.nullcontext
        )

        if d.is_main:
            run.error.unlink(missing_ok=True)
            ckpt.clean_stale(run)
            for p in run.path.glob(f"{_model_tmp_prefix(run)}*"):  # a final save interrupted by a kill
                shutil.rmtree(p, ignore_errors=True)
        _barrier(d)

        data = _resolve_data(spec, self.dataset, self.data_cache, self.progress, d)
        self.data = data
        if len(data.train) < 1:
            raise DataError("the training data has no window of seq_len + 1 tokens")
        if len(data.val) < 1:
            raise DataError("the validation data has no window of seq_len + 1 tokens")
        self.n_eval = min(len(data.val), max(1, math.ceil(spec.eval_tokens / self.seq_len)))
        from ladder.model.data import window_order

        self.order = window_order(len(data.train), spec.seed)

        torch.manual_seed(spec.seed)
        np.random.seed(spec.seed % 2**32)
        import random

        random.seed(spec.seed)
        self.model = build_model(
            spec.shape, seq_len=self.seq_len, seed=spec.seed, device=self.dev,
            bos_token_id=data.eos_id, eos_token_id=data.eos_id, pad_token_id=data.pad_id,
        )  # fmt: skip
        self.model.train()
        self.optimizer = build_optimizer(self.model, spec.optimizer, lr=spec.lr)
        self.peak = peak_flops(self.dev, self.precision)
        self.state: dict[str, Any] = {
            "spec_hash": spec.content_hash(),
            "step": 0,
            "tokens_trained": 0,
            "recent_losses": [],
            "running_min": None,
            "spike_count": 0,
            "log_loss_sum": 0.0,
            "log_steps": 0,
            "log_time": 0.0,
            "wall_time_s": 0.0,
            "train_time_s": 0.0,
            "restarts": 0,
        }
        latest = ckpt.latest_checkpoint(run)
        if latest is not None:
            step, path = latest
            state = ckpt.load_checkpoint(path, model=self.model, optimizer=self.optimizer, restore_rng=True)
            if state.get("spec_hash") != self.state["spec_hash"]:
                raise StateError(
                    f"checkpoint {path} was written for a different spec (hash {state.get('spec_hash')} != "
                    f"{self.state['spec_hash']}); delete it ({run.checkpoint_pointer.name} and ckpt-*) to restart"
                )
            state.pop("rng", None)
            state["restarts"] = int(state.get("restarts", 0)) + 1
            self.state.update(state)
            log.info("resuming %s from step %d (restart %d)", run.run_id, step, self.state["restarts"])
        self._write(lambda: _trim_metrics(run, self.state["step"]))
        self.window_len = max(1, math.ceil(FINAL_LOSS_WINDOW * self.total_steps))
        self.recent = deque(self.state["recent_losses"], maxlen=self.window_len)
        self.last_ckpt_time = time.perf_counter()

        self.train_model: torch.nn.Module = self.model
        if d.enabled:
            from torch.nn.parallel import DistributedDataParallel as DDP

            self.train_model = DDP(
                self.model, device_ids=[self.dev.index] if self.dev.type == "cuda" else None, broadcast_buffers=False
            )
        if spec.compile:
            self.train_model = torch.compile(self.train_model)

    # ---------------------------------------------------------------------------------------- steps
    def _my_sequences(self, step: int) -> list[int]:
        S, W, r = self.S, self.d.world_size, self.d.rank
        lo, hi = (r * S) // W, ((r + 1) * S) // W
        start = step * S
        return [self.order(start + j) for j in range(lo, hi)]

    def _train_step(self, step: int) -> tuple[float, float, float, list[float]]:
        """Compute update ``step + 1``. Returns (global mean loss, grad norm, lr, signal flags); does NOT apply the
        optimizer step (the caller checks for non-finite values first)."""
        spec, d = self.spec, self.d
        lr = lr_at(step, peak=spec.lr, total_steps=self.total_steps, warmup_steps=spec.warmup_steps,
                   schedule=spec.schedule)  # fmt: skip
        for g in self.optimizer.param_groups:
            g["lr"] = lr
        mine = self._my_sequences(step)
        m = spec.micro_batch_size
        chunks = [mine[i : i + m] for i in range(0, len(mine), m)]
        loss_sum = torch.zeros((), dtype=torch.float64, device=self.dev)
        for j, chunk in enumerate(chunks):
            windows = torch.from_numpy(self.data.train.batch(chunk)).to(self.dev, non_blocking=True)
            sync = contextlib.nullcontext()
            if d.enabled and j < len(chunks) - 1:
                sync = self.train_model.no_sync() if hasattr(self.train_model, "no_sync") else sync
            with sync:
                with self.autocast():
                    loss = lm_loss(self.train_model, windows)
                if self.force_nan is not None and step + 1 == self.force_nan:
                    loss = loss * float("nan")
                weight = len(chunk) * d.world_size / self.S
                (loss * weight if weight != 1.0 else loss).backward()
            loss_sum += loss.detach().double() * len(chunk)
        clip = spec.grad_clip if spec.grad_clip is not None else float("inf")
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), clip)
        packed = torch.cat([loss_sum.reshape(1), torch.tensor(self.trap.flags(), dtype=torch.float64, device=self.dev)])
        packed = _all_reduce_sum(packed, d).cpu()
        loss_mean = float(packed[0]) / self.S
        return loss_mean, float(grad_norm), lr, [float(x) for x in packed[1:]]

    @torch.no_grad()
    def evaluate(self) -> float:
        d = self.d
        model = self.model
        model.eval()
        idx = list(range(d.rank, self.n_eval, d.world_size))
        m = max(1, self.spec.micro_batch_size)
        total = torch.zeros(2, dtype=torch.float64, device=self.dev)
        for i in range(0, len(idx), m):
            windows = torch.from_numpy(self.data.val.batch(idx[i : i + m])).to(self.dev)
            with self.autocast():
                s = lm_loss(model, windows, reduction="sum")
            total[0] += s.double()
            total[1] += windows.shape[0] * (windows.shape[1] - 1)
        total = _all_reduce_sum(total, d)
        model.train()
        return float(total[0] / total[1])

    def _checkpoint(self) -> Path | None:
        path = None
        if self.d.is_main:
            st = dict(self.state)
            st["recent_losses"] = list(self.recent)
            st["wall_time_s"] = self._elapsed()
            path = ckpt.save_checkpoint(self.run_dir, st["step"], model=self.model, optimizer=self.optimizer, state=st)
        self.last_ckpt_time = time.perf_counter()
        return path

    def _finish(self, status: str, **extra: Any) -> dict[str, Any]:
        self.state["recent_losses"] = list(self.recent)
        result = {"status": status, **self._base_result(), **extra}
        self._write(lambda: atomic_write_json(self.run_dir.result, result))
        return result

    # ---------------------------------------------------------------------------------------- loop
    def run(self) -> dict[str, Any]:
        try:
            self._setup()
            return self._loop()
        except Exception as e:
            if not isinstance(e, Preempted) and self.d.is_main and hasattr(self, "state"):
                try:
                    self._finish("failed", reason=f"{type(e).__name__}: {e}", error_type=type(e).__name__,
                                 traceback=traceback.format_exc(limit=20))  # fmt: skip
                except Exception:  # pragma: no cover - never hide the original error
                    log.exception("could not write the failed result")
            raise

    def _loop(self) -> dict[str, Any]:
        spec, d, st = self.spec, self.d, self.state
        run = self.run_dir
        bar = _Progress(self.progress, self.total_steps * self.tokens_per_step, st["step"] * self.tokens_per_step,
                        spec.run_id or run.run_id)  # fmt: skip
        if self.stop_after_steps is not None and st["step"] >= self.stop_after_steps and st["step"] < self.total_steps:
            bar.close()
            return {"status": "stopped", "run_id": spec.run_id or run.run_id, "steps_done": st["step"],
                    "checkpoint": str(run.checkpoint_dir(st["step"]))}  # fmt: skip
        self.trap.install()
        try:
            while st["step"] < self.total_steps:
                step = st["step"]
                t0 = time.perf_counter()
                loss, grad_norm, lr, flags = self._train_step(step)
                done = step + 1
                if not (math.isfinite(loss) and math.isfinite(grad_norm)):
                    self.optimizer.zero_grad(set_to_none=True)
                    what = "loss" if not math.isfinite(loss) else "gradient norm"
                    return self._diverged(done, f"non-finite {what} at step {done} (loss={loss}, grad_norm={grad_norm})")
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)
                if self.dev.type == "cuda":
                    torch.cuda.synchronize(self.dev)
                dt = time.perf_counter() - t0

                st["step"] = done
                st["tokens_trained"] += self.tokens_per_step
                st["train_time_s"] += dt
                self.recent.append(loss)
                st["log_loss_sum"] += loss
                st["log_steps"] += 1
                st["log_time"] += dt
                # sustained spike: loss above factor x running minimum for `patience` consecutive steps
                rmin = st["running_min"]
                if rmin is not None and loss > spec.divergence.spike_factor * rmin:
                    st["spike_count"] += 1
                else:
                    st["spike_count"] = 0
                st["running_min"] = loss if rmin is None else min(rmin, loss)
                tokens = done * self.tokens_per_step

                if done % spec.log_interval == 0 or done == self.total_steps:
                    tps = self.tokens_per_step * st["log_steps"] / st["log_time"] if st["log_time"] > 0 else None
                    rec = {
                        "kind": "train", "step": done, "tokens": tokens,
                        "loss": st["log_loss_sum"] / st["log_steps"], "lr": lr, "grad_norm": grad_norm,
                        "tokens_per_s": tps,
                        "mfu": compute_mfu(spec.flops_per_token, tps, self.peak.flops, d.world_size) if tps else None,
                        "elapsed_s": round(self._elapsed(), 3),
                    }  # fmt: skip
                    self._write(lambda: append_jsonl(run.metrics, rec))
                    st["log_loss_sum"], st["log_steps"], st["log_time"] = 0.0, 0, 0.0
                bar.update(tokens, loss, self.tokens_per_step / dt if dt > 0 else None)

                if st["spike_count"] >= spec.divergence.patience:
                    return self._diverged(
                        done,
                        f"loss above {spec.divergence.spike_factor:g} x its running minimum ({st['running_min']:.4g}) "
                        f"for {st['spike_count']} consecutive steps (loss {loss:.4g} at step {done})",
                    )
                if done == self.total_steps:
                    break
                if done % spec.eval_interval == 0:
                    ev = self.evaluate()
                    self._write(lambda: append_jsonl(run.metrics, {"kind": "eval", "step": done, "tokens": tokens,
                                                                    "eval_loss": ev}))  # fmt: skip

                if d.enabled:  # every rank must agree: use the flags all-reduced with this step's loss
                    signum = next((s for s, f in zip(self.trap.signals, flags) if f > 0), None)
                else:  # one process: also honour a signal that arrived after the step's flags were read
                    signum = self.trap.received
                stop_here = self.stop_after_steps is not None and done >= self.stop_after_steps
                due = (
                    done % spec.checkpoint_interval == 0
                    or (time.perf_counter() - self.last_ckpt_time) >= spec.checkpoint_minutes * 60
                )
                if signum is not None or stop_here or due:
                    path = self._checkpoint()
                    if signum is not None or stop_here:
                        _barrier(d)  # the other ranks wait until rank 0's checkpoint is complete
                if signum is not None:
                    bar.close()
                    self.trap.chain(signum)  # may not return (submitit requeues and exits)
                    raise Preempted(signum, done, path if d.is_main else run.checkpoint_dir(done))
                if stop_here:
                    return {"status": "stopped", "run_id": spec.run_id or run.run_id, "steps_done": done,
                            "checkpoint": str(run.checkpoint_dir(done))}  # fmt: skip
        finally:
            self.trap.restore()
            bar.close()

        # ---- the end: final eval, model, result, cleanup
        ev = self.evaluate()
        tokens = st["step"] * self.tokens_per_step
        self._write(lambda: append_jsonl(run.metrics, {"kind": "eval", "step": st["step"], "tokens": tokens,
                                                        "eval_loss": ev}))  # fmt: skip
        self._write(lambda: _save_final_model(run, self.model, self.data.tokenizer_dir))
        result = self._finish("done", final_eval_loss=_finite_or_none(ev), eval_tokens=self.n_eval * self.seq_len)
        self._write(lambda: ckpt.remove_checkpoints(run))
        _barrier(d)
        log.info("run %s done: eval loss %.4f", result["run_id"], ev)
        return result

    def _diverged(self, step: int, reason: str) -> dict[str, Any]:
        log.error("run %s diverged: %s", self.spec.run_id or self.run_dir.run_id, reason)
        return self._finish("diverged", final_eval_loss=None, diverged_at_step=step, reason=reason)
