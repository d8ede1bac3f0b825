"""Train one run of a ladder: the job that runs on a node. ``train(run_dir)`` reads ``spec.json`` and leaves
``metrics.jsonl``, ``result.json`` and ``model/`` (see :mod:`ladder.layout`).

What one call does
------------------
1. If ``result.json`` says ``done`` or ``diverged``, return it (both are deterministic outcomes; delete the file to
   train again). A ``failed`` result is overwritten by the new attempt; ``error.json`` is removed.
2. Data: an injected ``dataset`` (a :class:`TrainData`, or a ``PreparedData``) or ``prepare_data(spec.data, ...)``
   (rank 0 first, the others then find it in the cache). Validation: the fixed first windows of the validation
   split, ``ceil(eval_tokens / seq_len)`` of them.
3. Model ``build_model(spec.shape)`` seeded with ``spec.seed``; AdamW; LR from :func:`ladder.model.schedule.lr_at`.
   ``checkpoint.json`` restores it all (weights, optimizer, step, RNG, bookkeeping) and cuts ``metrics.jsonl`` back
   to its step (no duplicates); a cooldown branch without one starts from its trunk's snapshot (:mod:`.branching`).
4. Each step is ``batch_tokens // seq_len`` sequences, read in an order that is a function of the step alone and
   split over ranks and micro-batches so that the gradient is that of the mean loss over the whole batch
   (:mod:`ladder.model.training.steps`). Gradient clipping at ``grad_clip`` (the logged ``grad_norm`` is the norm
   before clipping).
5. fp32 on CPU; bf16 autocast on CUDA (``precision: auto``; weights and optimizer stay fp32; TF32 matmuls on);
   SDPA attention; ``torch.compile`` when ``spec.compile``. On CPU in fp32 a run is bit-reproducible at a fixed
   thread count, also across kills and resumes.
6. Logs ``{"kind": "train", "step", "tokens", "loss", "lr", "grad_norm", "tokens_per_s", "interval_tokens_per_s",
   "mfu", "elapsed_s", "train_time_s"}`` every ``log_interval`` steps (``loss``: mean of the per-step losses since
   the previous record; ``lr`` and ``grad_norm``: of the logged step; ``tokens_per_s``: the tokens this run has
   trained so far over ``train_time_s``, its time inside training steps so far, the definition of result.json's
   ``tokens_per_s`` (:func:`.result.throughput`), and ``mfu`` of it; ``interval_tokens_per_s``: over the
   interval's step time alone; ``elapsed_s``: wall time since the run first started, summed over restarts) and ``{"kind": "eval", "step", "tokens", "eval_loss",
   "eval_loss_repeats", "eval_loss_novel"}`` (the loss over every validation target, and over the in-context
   repeats and the novel targets apart: :mod:`ladder.model.data.repeats`) every ``eval_interval`` steps and once
   at the end. ``step`` counts completed optimizer updates (1..steps),
   ``tokens`` = step x tokens per step.
7. Checkpoints (:mod:`ladder.model.training.checkpoint`) every ``checkpoint_interval`` steps and whenever
   ``checkpoint_minutes`` have passed since the last one (never at the final step: the run ends instead).
8. At the end: final eval, ``model/`` (``save_pretrained`` + the tokenizer files; written to a temporary folder
   and renamed), then ``result.json`` (atomic), then the checkpoints are deleted.

Result (``result.json``): :mod:`ladder.model.training.result`.

Divergence
----------
A non-finite loss or gradient norm at step N stops the run BEFORE the optimizer applies that update: no state
is written from a NaN. A loss above ``spike_factor`` x its lowest typical loss for ``patience`` consecutive STEPS
(every step is checked, not only logged ones; :mod:`ladder.model.training.divergence`) also stops it. Either way
``result.json`` gets ``status: diverged``, ``diverged_at_step: N`` and a ``reason``; the last good checkpoint is
kept; no ``model/`` is written.
Test hook: ``nan_at`` (:mod:`ladder.model.training.faults`), a callback asked at every update whether to turn its
loss into NaN.

Signals (SIGTERM, SIGINT, SIGUSR2, submitit's preemption signal) stop the run at a step boundary with a fresh
checkpoint and raise :class:`~ladder.model.training.preemption.Preempted`: the contract is in
:mod:`ladder.model.training.preemption`. Several devices (``WORLD_SIZE > 1``):
:mod:`ladder.model.training.distributed`.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import time
import traceback
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ladder.errors import DataError, SpecError
from ladder.layout import RunDir, atomic_write_json
from ladder.model.config import RunSpec
from ladder.model.hardware import mfu as compute_mfu
from ladder.model.hardware import peak_flops, reset_peak_memory
from ladder.model.schedule import lr_at
from ladder.model.training import branching, divergence, tracking
from ladder.model.training import checkpoint as ckpt
from ladder.model.training.distributed import Dist, barrier, setup_distributed
from ladder.model.training.inputs import TrainData, resolve_data
from ladder.model.training.preemption import Preempted, SignalTrap
from ladder.model.training.progress import Progress
from ladder.model.training.result import base_result, throughput
from ladder.model.training.run_files import (
    finite_or_none,
    model_tmp_prefix,
    read_spec,
    save_final_model,
)
from ladder.model.training.steps import Steps

log = logging.getLogger("ladder.train")

FINAL_LOSS_WINDOW = 0.1  # final_train_loss: mean over the last 10% of steps


DATA_FIELDS = ("tokenizer_sha256", "train_tokens", "val_tokens")  # the data key also moves when a file is touched


def same_data(before: Any, now: dict[str, Any] | None, run: RunDir, branch: bool) -> None:
    """Refuse to resume a run (or start a branch from its trunk's snapshot) on other data than its checkpoint
    trained on: the corpus or its tokenizer changed in place since, and the run would finish on other tokens,
    its loss of neither. A checkpoint that predates the record (no ``data``) resumes as before."""
    if not isinstance(before, dict) or not now:
        return
    changed = [k for k in DATA_FIELDS if before.get(k) != now.get(k)]
    if not changed:
        return
    was = ", ".join(f"{k} {before.get(k)} -> {now.get(k)}" for k in changed)
    again = "restore the corpus and run it again (`ladder submit STUDY_DIR --retry-failed`)"
    if branch:  # its trunk trained on the old corpus: the branch cannot start from it on the new one
        raise DataError(
            f"the corpus or its tokenizer changed since its trunk's snapshot was written ({was}): started from it, "
            f"the branch would cool down on other tokens than its trunk trained on; {again}"
        )
    raise DataError(
        f"the corpus or its tokenizer changed since its checkpoint was written ({was}): resumed, the run would "
        f"finish on other tokens; {again}, or remove {run.checkpoint_pointer.name} and the ckpt-* folders of "
        f"{run.path} to train it from its start on the corpus as it is now"
    )


def train(
    run_dir: str | os.PathLike,
    *,
    dataset: TrainData | Any | None = None,
    device: str | torch.device | None = None,
    progress: bool = False,
    data_cache: str | os.PathLike | None = None,
    stop_after_steps: int | None = None,
    nan_at: Callable[[int], bool] | None = None,
    handle_signals: bool = True,
) -> dict[str, Any]:
    """Train the run in ``run_dir`` (resuming from its checkpoint if any) and return the result dict.

    ``dataset``: inject data (a :class:`TrainData` or a ``PreparedData``) instead of preparing ``spec.data``;
    ``data_cache``: cache root for ``prepare_data``. ``stop_after_steps=N``: stop once N steps are complete,
    write a checkpoint there and return ``{"status": "stopped", "steps_done": N, ...}`` without a result.json.
    ``nan_at``: test hook (see Divergence). ``handle_signals=False`` leaves signal handlers alone.
    Raises :class:`Preempted` on a handled signal (see :mod:`ladder.model.training.preemption`).
    """
    run = RunDir(Path(run_dir))
    spec = read_spec(run)
    if run.result.is_file():
        try:
            previous = json.loads(run.result.read_text())
        except ValueError:
            previous = {}
        if previous.get("status") in ("done", "diverged"):
            if previous.get("status") == "done" and int(os.environ.get("RANK", "0")) == 0:
                ckpt.remove_checkpoints(run)  # left behind when a kill hit between result.json and the cleanup
            return previous
    d, dev = setup_distributed(device)
    try:
        return _Trainer(run, spec, d, dev, dataset, data_cache, progress, stop_after_steps,
                        nan_at, handle_signals).run()  # fmt: skip
    finally:
        if d.initialized_here:
            import torch.distributed as dist

            dist.destroy_process_group()


class _Trainer:
    def __init__(self, run, spec, d, dev, dataset, data_cache, progress, stop_after_steps, nan_at, handle_signals):
        self.run_dir: RunDir = run
        self.spec: RunSpec = spec
        self.d: Dist = d
        self.dev: torch.device = dev
        self.dataset = dataset
        self.data_cache = data_cache
        self.progress = progress and d.is_main
        self.stop_after_steps = stop_after_steps
        self.nan_at = nan_at
        self.trap = SignalTrap(handle_signals)
        self.attempt_start = time.perf_counter()
        reset_peak_memory(dev)

    # ---------------------------------------------------------------------------------------- helpers
    def _write(self, fn: Callable[[], None]) -> None:
        if self.d.is_main:
            fn()

    def _elapsed(self) -> float:
        return self.state["wall_time_s"] + (time.perf_counter() - self.attempt_start)

    def _base_result(self) -> dict[str, Any]:
        identity = getattr(getattr(self, "data", None), "identity", None)  # the data it trained on
        return base_result(self.spec, self.run_dir, self.state, tokens_per_step=self.tokens_per_step,
                           sequences=self.S, seq_len=self.seq_len, elapsed_s=self._elapsed(), peak=self.peak,
                           dev=self.dev, precision=self.precision,
                           world_size=self.d.world_size) | ({"data": identity} if identity else {})  # fmt: skip

    # ---------------------------------------------------------------------------------------- setup
    def _setup(self) -> None:
        spec, d = self.spec, self.d
        run = self.run_dir
        self.branch = branching.branch_start(run, spec)  # first: a branch that waits fails fast and writes nothing
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
        if d.is_main:
            run.error.unlink(missing_ok=True)
            ckpt.clean_stale(run)
            for p in run.path.glob(f"{model_tmp_prefix(run)}*"):  # a final save interrupted by a kill
                shutil.rmtree(p, ignore_errors=True)
        barrier(d)

        data = resolve_data(spec, self.dataset, self.data_cache, self.progress, d)
        self.data = data
        if len(data.train) < 1:
            raise DataError("the training data has no window of seq_len + 1 tokens")
        if len(data.val) < 1:
            raise DataError("the validation data has no window of seq_len + 1 tokens")
        self.n_eval = min(len(data.val), max(1, math.ceil(spec.eval_tokens / self.seq_len)))
        self.steps = Steps(spec, data, d, self.dev, self.n_eval)
        self.model, self.optimizer, self.precision = self.steps.model, self.steps.optimizer, self.steps.precision
        self.peak = peak_flops(self.dev, self.precision)
        self.state: dict[str, Any] = {
            "spec_hash": spec.content_hash(),
            "step": 0,
            "tokens_trained": 0,
            "recent_losses": [],
            **divergence.fresh(),
            "log_loss_sum": 0.0,
            "log_steps": 0,
            "log_time": 0.0,
            "wall_time_s": 0.0,
            "train_time_s": 0.0,
            "restarts": 0,
        }
        resumed = branching.resume(run, self.branch, self.model, self.optimizer, self.state["spec_hash"], d.is_main)
        if resumed is not None:
            same_data(resumed.get("data"), data.identity, run, self.branch is not None)
            self.state.update(resumed)
            log.info("resuming %s from step %d (restart %d)", run.run_id, self.state["step"], self.state["restarts"])
        self.state["data"] = data.identity  # its checkpoints say which data they trained on
        self.window_len = max(1, math.ceil(FINAL_LOSS_WINDOW * self.total_steps))
        self.recent = deque(self.state["recent_losses"], maxlen=self.window_len)
        self.metrics = tracking.MetricsLog(run, spec, self.state["step"], d.is_main, self.dev)  # + the tracker
        self.last_ckpt_time = time.perf_counter()

        self.steps.distribute()

    # ---------------------------------------------------------------------------------------- steps
    def _train_step(self, step: int) -> tuple[float, float, float, list[float]]:
        """Compute update ``step + 1``. Returns (global mean loss, grad norm, lr, signal flags); does NOT apply the
        optimizer step (the caller checks for non-finite values first)."""
        spec = self.spec
        lr = lr_at(step, peak=spec.lr, total_steps=self.total_steps, warmup_steps=spec.warmup_steps,
                   schedule=spec.schedule)  # fmt: skip
        nan = self.nan_at is not None and self.nan_at(step + 1)
        loss, grad_norm, flags = self.steps.gradients(step, lr, self.trap.flags, force_nan=nan)
        return loss, grad_norm, lr, flags

    def _checkpoint(self) -> Path | None:
        path = None
        if self.d.is_main:
            st = dict(self.state)
            st["recent_losses"] = list(self.recent)
            st["wall_time_s"] = self._elapsed()
            path = ckpt.save_checkpoint(self.run_dir, st["step"], model=self.model, optimizer=self.optimizer, state=st)
            branching.write_snapshot(self.run_dir, self.spec, st["step"])  # at a branch step only
        self.last_ckpt_time = time.perf_counter()
        return path

    def _finish(self, status: str, **extra: Any) -> dict[str, Any]:
        if hasattr(self, "recent"):  # not when the setup failed before it (a damaged checkpoint to resume)
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
        finally:
            if hasattr(self, "metrics"):
                self.metrics.close()

    def _loop(self) -> dict[str, Any]:
        spec, d, st = self.spec, self.d, self.state
        run = self.run_dir
        bar = Progress(self.progress, self.total_steps * self.tokens_per_step, st["step"] * self.tokens_per_step,
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
                    return self._diverged(
                        done, f"non-finite {what} at step {done} (loss={loss}, grad_norm={grad_norm})"
                    )
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)
                if self.dev.type == "cuda" and (done % spec.log_interval == 0 or done == self.total_steps):
                    torch.cuda.synchronize(self.dev)  # a logged interval's time ends with the device's work
                dt = time.perf_counter() - t0

                st["step"] = done
                st["tokens_trained"] += self.tokens_per_step
                st["train_time_s"] += dt
                self.recent.append(loss)
                st["log_loss_sum"] += loss
                st["log_steps"] += 1
                st["log_time"] += dt
                diverged = divergence.update(st, loss, spec.divergence.spike_factor, spec.divergence.patience)
                tokens = done * self.tokens_per_step

                if done % spec.log_interval == 0 or done == self.total_steps:
                    tps = throughput(st)  # result.json's definition, so far: status shows the same number
                    recent = self.tokens_per_step * st["log_steps"] / st["log_time"] if st["log_time"] > 0 else None
                    rec = {
                        "kind": "train", "step": done, "tokens": tokens,
                        "loss": st["log_loss_sum"] / st["log_steps"], "lr": lr, "grad_norm": grad_norm,
                        "tokens_per_s": tps, "interval_tokens_per_s": recent,
                        "mfu": compute_mfu(spec.flops_per_token, tps, self.peak.flops, d.world_size) if tps else None,
                        "elapsed_s": round(self._elapsed(), 3), "train_time_s": round(st["train_time_s"], 3),
                    }  # fmt: skip
                    self.metrics.append(rec)
                    st["log_loss_sum"], st["log_steps"], st["log_time"] = 0.0, 0, 0.0
                # the run's throughput so far, as result.json and `ladder status` give it: one step's own rate
                # ended the run "finished: ..., 131,618 tok/s" where result.json said 2,249
                bar.update(tokens, loss, throughput(st))

                if diverged:
                    return self._diverged(done, divergence.reason(st, spec.divergence.spike_factor, loss, done))
                if done == self.total_steps:
                    break
                if done % spec.eval_interval == 0:
                    ev = self.steps.evaluate()
                    self.metrics.append({"kind": "eval", "step": done, "tokens": tokens, **ev.record()})

                if d.enabled:  # every rank must agree: use the flags all-reduced with this step's loss
                    signum = next((s for s, f in zip(self.trap.signals, flags) if f > 0), None)
                else:  # one process: also honour a signal that arrived after the step's flags were read
                    signum = self.trap.received
                stop_here = self.stop_after_steps is not None and done >= self.stop_after_steps
                due = (
                    done % spec.checkpoint_interval == 0
                    or done in spec.branch_steps
                    or (time.perf_counter() - self.last_ckpt_time) >= spec.checkpoint_minutes * 60
                )
                if signum is not None or stop_here or due:
                    path = self._checkpoint()
                    if signum is not None or stop_here:
                        barrier(d)  # the other ranks wait until rank 0's checkpoint is complete
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
        ev = self.steps.evaluate()
        tokens = st["step"] * self.tokens_per_step
        self.metrics.append({"kind": "eval", "step": st["step"], "tokens": tokens, **ev.record()})
        self._write(lambda: save_final_model(run, self.model, self.data.tokenizer_dir))
        result = self._finish(
            "done", final_eval_loss=finite_or_none(ev.loss), final_eval_loss_repeats=finite_or_none(ev.repeats),
            final_eval_loss_novel=finite_or_none(ev.novel), eval_repeat_share=ev.repeat_share,
            eval_tokens=self.n_eval * self.seq_len,
        )  # fmt: skip
        self._write(lambda: ckpt.remove_checkpoints(run))
        barrier(d)
        log.info("run %s done: eval loss %.4f", result["run_id"], ev.loss)
        return result

    def _diverged(self, step: int, reason: str) -> dict[str, Any]:
        log.error("run %s diverged: %s", self.spec.run_id or self.run_dir.run_id, reason)
        return self._finish("diverged", final_eval_loss=None, diverged_at_step=step, reason=reason)
