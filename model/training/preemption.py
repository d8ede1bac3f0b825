"""Signals and preemption: how :func:`ladder.model.training.loop.train` stops at a step boundary (the contract).

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
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from pathlib import Path
from typing import Any

log = logging.getLogger("ladder.train")


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


def preempt_signals() -> list[int]:
    sigs = [signal.SIGTERM, signal.SIGINT]
    if hasattr(signal, "SIGUSR2"):
        sigs.append(signal.SIGUSR2)
    name = os.environ.get("SUBMITIT_PREEMPT_SIGNAL")
    if name:
        s = getattr(signal, name if name.startswith("SIG") else f"SIG{name}", None)
        if s is not None and s not in sigs:
            sigs.append(s)
    return [int(s) for s in sigs]


class SignalTrap:
    """Records preemption signals while the loop runs; see the module docstring for the contract."""

    def __init__(self, enabled: bool):
        self.signals = preempt_signals()
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
        # a handler that raises an interrupt (Python's own for SIGINT, the CLI's for SIGTERM and SIGHUP) would
        # replace Preempted, which says where the checkpoint is
        if callable(prev) and prev is not signal.default_int_handler and not getattr(prev, "raises_interrupt", False):
            prev(signum, None)
