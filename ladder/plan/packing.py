"""How a study's runs share devices, and whether each fits the device it names: the plan decides both before it
writes anything, and ``ladder submit`` starts its local workers from the same decision.

Packing (the executor fields a study leaves unset):

- CPU (local, no GPUs): one thread per run and as many runs at once as there are cores (never more than there are
  runs, nor more than fit in the machine's memory). Ladder models are small: one process per core scales
  almost perfectly, threads inside one small model do not. ``benchmarks/bench_trainer.py --packing`` measures
  both on every default rung (2 runs x 1 thread against 1 run x 2 threads on the 2-core reference machine:
  benchmarks/README.md has the figures).
- GPUs (local): ``runs_per_gpu`` runs share each GPU, bounded by memory. Unset, it is 1: packing small runs on a
  big GPU raises aggregate throughput (``benchmarks/gpu_check.py --packing`` on an H200, a 20M model: 2 runs
  1.86x, 4 runs 2.16x one run's tokens/s), but one size is not yet a rule for every rung.
- SLURM: one run per job (a task per GPU of it), with ``slurm.cpus_per_task`` threads.

Memory: every run's estimate (:mod:`ladder.model.memory`) must fit ``USABLE_MEMORY`` of one device of
``executor.hardware`` (``DEVICE_MEMORY``) divided among the runs sharing it; otherwise the plan refuses with one
line that names the run and what to change.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ladder.errors import SpecError
from ladder.model.config import RunSpec
from ladder.model.hardware import USABLE_MEMORY, device_memory_bytes
from ladder.model.memory import MemoryEstimate, run_memory
from ladder.studies.spec import ExecutorSpec

GPU_RUNS_PER_DEVICE = 1  # gpu_check.py --packing measured one size (benchmarks/README.md); a rule needs more


@dataclass(frozen=True)
class Packing:
    """Runs training at once on one device (CPU: the machine; GPU: each GPU) and torch threads per run."""

    runs_per_device: int
    threads_per_run: int
    devices: int
    rule: str

    @property
    def runs_at_once(self) -> int:
        return self.runs_per_device * self.devices

    def to_dict(self) -> dict[str, Any]:
        return {"runs_per_device": self.runs_per_device, "threads_per_run": self.threads_per_run,
                "devices": self.devices, "runs_at_once": self.runs_at_once, "rule": self.rule}  # fmt: skip


def run_precision(run: RunSpec, hardware: str) -> str:
    """What the run computes in on ``hardware``: ``auto`` is bf16 on a GPU, fp32 on CPU."""
    if run.precision == "auto":
        return "fp32" if hardware == "cpu" else "bf16"
    return run.precision


def estimate(run: RunSpec, hardware: str) -> MemoryEstimate:
    return run_memory(run.shape, run.micro_batch_size, run.data.seq_len, run_precision(run, hardware))


def packing(executor: ExecutorSpec, runs: list[RunSpec], cores: int | None = None) -> Packing:
    """The packing of ``runs`` under ``executor`` (see the module docstring)."""
    cores = cores or os.cpu_count() or 1
    biggest = max((estimate(r, executor.hardware).total for r in runs), default=0)
    usable = USABLE_MEMORY * device_memory_bytes(executor.hardware)
    fit = max(1, int(usable // biggest)) if biggest else 1
    if executor.kind == "slurm":
        return Packing(1, executor.slurm.cpus_per_task, max(1, executor.slurm.gpus_per_task), "slurm: one run per job")
    loc = executor.local
    if executor.kind == "local" and loc.gpus:
        k = loc.runs_per_gpu or min(GPU_RUNS_PER_DEVICE, fit)
        rule = "study: executor.local.runs_per_gpu" if loc.runs_per_gpu else "rule: one run per GPU (not yet measured)"
        threads = loc.cpus_per_run or max(1, cores // (k * len(loc.gpus)))
        return Packing(k, threads, len(loc.gpus), rule)
    if loc.parallel:
        parallel, rule = loc.parallel, "study: executor.local.parallel"
    else:
        parallel = max(1, min(cores, len(runs) or 1, fit))
        rule = "rule: one run per core, one thread each (bench_trainer.py --packing)"
    threads = loc.cpus_per_run or max(1, cores // parallel)
    return Packing(parallel, threads, 1, rule)


def check_memory(runs: list[RunSpec], executor: ExecutorSpec, pack: Packing) -> dict[str, MemoryEstimate]:
    """Every run's estimate; SpecError (one line) for the first run that cannot fit its share of the device."""
    hw = executor.hardware
    device = device_memory_bytes(hw)
    if hw == "cpu" and executor.kind == "slurm" and executor.slurm.mem_gb:
        device = int(executor.slurm.mem_gb * 2**30)  # what the job is given, not this machine's RAM
    share = USABLE_MEMORY * device / pack.runs_per_device
    out = {}
    for run in runs:
        est = estimate(run, hw)
        out[run.run_id] = est
        if est.total > share:
            shared = f" shared by {pack.runs_per_device} runs" if pack.runs_per_device > 1 else ""
            raise SpecError(
                f"run {run.run_id} ({run.shape.describe()}, micro-batch {run.micro_batch_size} x {run.data.seq_len} "
                f"tokens, {run_precision(run, hw)}) needs ~{est.total / 2**30:.1f} GiB, more than the "
                f"{share / 2**30:.1f} GiB it gets of one {hw}{shared}: lower training.micro_batch_tokens"
            )
    return out
