"""Peak FLOP/s of the device a run trains on, the denominator of MFU.

MFU = flops_per_token * tokens_per_s / (peak per device * world_size), with ``flops_per_token`` from
:meth:`ModelShape.flops_per_token` (6 x matmul params + attention).

- GPUs: the vendor's DENSE peak (no 2:4 sparsity) for the precision the run computes in: bf16 tensor cores for
  ``bf16``; TF32 tensor cores for ``fp32`` on GPUs that have them (ladder enables TF32 matmuls on CUDA); plain
  fp32 otherwise. Unknown GPUs fall back to a measured matmul rate (``source="measured"``), which is an
  achievable rate, not a datasheet peak, so MFU reads higher than it would against the datasheet.
- CPUs: there is no meaningful datasheet number, so the peak is MEASURED: the best rate of a square fp32 matmul
  at the current torch thread count, ~0.2 s, cached per process and thread count. MFU on CPU is therefore
  "share of what this machine's matmul achieves right now"; another process on the same cores lowers both.
- ``LADDER_PEAK_FLOPS`` (a number, e.g. ``989e12``) overrides everything.

The same table gives the plan its wall-time estimates (:func:`planning_seconds`) for the ``executor.hardware``
a study names, so the plan and MFU never disagree about a device; beside it, the memory of each such device
(:data:`DEVICE_MEMORY`), which the plan checks every run's estimate against, and the peak memory a run records. torch is imported only where a device is
measured, so the plan can use this module without loading torch.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# name fragment (matched case-insensitively against torch.cuda.get_device_name, first match wins):
# (bf16 dense, tf32 dense, fp32 non-tensor) in FLOP/s
GPU_PEAKS: list[tuple[str, tuple[float, float | None, float]]] = [
    ("GH200", (989e12, 494.5e12, 67e12)),
    ("H200", (989e12, 494.5e12, 67e12)),
    ("H100 PCIe", (756e12, 378e12, 51e12)),
    ("H100 NVL", (835e12, 417.5e12, 60e12)),
    ("H100", (989e12, 494.5e12, 67e12)),  # SXM
    ("H800", (989e12, 494.5e12, 67e12)),
    ("B200", (2250e12, 1100e12, 80e12)),
    ("B100", (1750e12, 875e12, 60e12)),
    ("A100", (312e12, 156e12, 19.5e12)),
    ("A800", (312e12, 156e12, 19.5e12)),
    ("A40", (149.7e12, 74.8e12, 37.4e12)),
    ("A30", (165e12, 82e12, 10.3e12)),
    ("A10G", (70e12, 35e12, 31.2e12)),
    ("A10", (125e12, 62.5e12, 31.2e12)),
    ("L40S", (362.05e12, 183e12, 91.6e12)),
    ("L40", (181e12, 90.5e12, 90.5e12)),
    ("L4", (121e12, 60e12, 30.3e12)),
    ("RTX 6000 Ada", (364.2e12, 182.1e12, 91.1e12)),
    ("RTX A6000", (154.8e12, 77.4e12, 38.7e12)),
    ("RTX 4090", (165.2e12, 82.6e12, 82.6e12)),
    ("RTX 3090", (71e12, 35.6e12, 35.6e12)),
    ("V100", (125e12, None, 15.7e12)),  # no bf16: fp16 tensor-core number, for reference only
    ("T4", (65e12, None, 8.1e12)),
    ("MI300X", (1307.4e12, 653.7e12, 163.4e12)),
    ("MI250X", (383e12, None, 95.7e12)),
]


@dataclass(frozen=True)
class Peak:
    flops: float
    """peak FLOP/s of ONE device"""
    source: str
    """``table``, ``measured`` or ``env``"""
    device_name: str


# The fp32 matmul peak measured on the project's 2-core reference machine (DOMAIN.md): the plan's CPU figure.
CPU_REFERENCE_PEAK = 319e9

# What a study's ``executor.hardware`` trains at, for the plan's wall-time estimate: (name in GPU_PEAKS or "cpu",
# precision, assumed MFU). Small ladder models reach a modest share of a GPU; tiny CPU models ~20% of the
# measured matmul peak plus a per-token overhead (Python, optimizer) that dominates models of a few 10k params.
PLANNING: dict[str, tuple[str, str, float]] = {
    "cpu": ("cpu", "fp32", 0.20),
    "v100": ("V100", "bf16", 0.35),
    "a10g": ("A10G", "bf16", 0.35),
    "l40s": ("L40S", "bf16", 0.35),
    "a100": ("A100", "bf16", 0.40),
    "h100": ("H100", "bf16", 0.40),
    "h200": ("H200", "bf16", 0.40),
}
CPU_OVERHEAD_S_PER_TOKEN = 6e-6

# Memory of one device of each ``executor.hardware``, in bytes, for the plan's memory check (model/memory.py).
# The larger common variant where a part comes in two (A100 80 GB, V100 32 GB); "cpu" is this machine's RAM.
GiB = 1 << 30
DEVICE_MEMORY: dict[str, int | None] = {
    "cpu": None,
    "v100": 32 * GiB,
    "a10g": 24 * GiB,
    "l40s": 48 * GiB,
    "a100": 80 * GiB,
    "h100": 80 * GiB,
    "h200": 141 * GiB,
}
USABLE_MEMORY = 0.9  # the rest: CUDA context, library workspaces (on CPU: the interpreter, libraries, the OS)


def device_memory_bytes(hardware: str) -> int:
    """Memory of one device of ``hardware`` (a study's ``executor.hardware``); ``cpu``: this machine's RAM."""
    mem = DEVICE_MEMORY[hardware]
    if mem is None:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    return mem


def planning_peak(hardware: str) -> tuple[float, float]:
    """(peak FLOP/s, assumed MFU) of a study's ``executor.hardware`` for the plan."""
    name, precision, mfu_assumed = PLANNING[hardware]
    if name == "cpu":
        return CPU_REFERENCE_PEAK, mfu_assumed
    peak = gpu_table_peak(name, precision)
    assert peak is not None, name
    return peak, mfu_assumed


def planning_seconds(flops: float, tokens: float, hardware: str) -> float:
    """Estimated wall time of a run of ``flops`` FLOPs over ``tokens`` tokens on ``hardware``."""
    peak, mfu_assumed = planning_peak(hardware)
    seconds = flops / (peak * mfu_assumed)
    if hardware == "cpu":
        seconds += tokens * CPU_OVERHEAD_S_PER_TOKEN
    return seconds


def gpu_table_peak(name: str, precision: str) -> float | None:
    """The table's dense peak for a GPU name and a precision (``bf16`` or ``fp32``), or None if unknown."""
    lname = name.lower()
    for fragment, (bf16, tf32, fp32) in GPU_PEAKS:
        if fragment.lower() in lname:
            if precision == "bf16":
                return bf16
            return tf32 if tf32 is not None else fp32
    return None


_MEASURED: dict[tuple, float] = {}


def measure_matmul_flops(
    device: torch.device | str = "cpu",
    dtype: torch.dtype | None = None,
    *,
    seconds: float = 0.2,
    n: int | None = None,
    cached: bool = True,
) -> float:
    """Best observed FLOP/s of an ``n x n`` matmul on ``device`` in ``dtype`` over about ``seconds``. Cached per
    process, device, dtype, size and torch thread count (``cached=False`` measures again)."""
    import torch

    dtype = torch.float32 if dtype is None else dtype
    device = torch.device(device)
    key = (str(device), dtype, torch.get_num_threads(), n)
    if cached and key in _MEASURED:
        return _MEASURED[key]
    if n is None:
        n = 4096 if device.type == "cuda" else 1024
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    a @ b  # warm up (allocator, kernel selection)
    sync()
    best = 0.0
    deadline = time.perf_counter() + seconds
    reps = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(reps):
            a @ b
        sync()
        dt = time.perf_counter() - t0
        best = max(best, 2.0 * n**3 * reps / dt)
        if time.perf_counter() > deadline:
            break
        if dt < 0.01:
            reps *= 2
    _MEASURED[key] = max(best, _MEASURED.get(key, 0.0))  # measured again: the better keeps its place
    return best


def device_name(device: torch.device | str) -> str:
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "cpu":
        import platform

        return f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"
    return str(device)


def env_peak_flops() -> float | None:
    """``$LADDER_PEAK_FLOPS`` as a count (``312T`` as well as ``3.12e14``), None when unset; a value that is no
    positive count is a SpecError (float() of "312T" was a traceback inside training, the run recorded failed)."""
    import math

    from ladder.errors import SpecError
    from ladder.model.config import read_count

    env = os.environ.get("LADDER_PEAK_FLOPS")
    if not env:
        return None
    value = read_count(env.strip())
    if value is None or not math.isfinite(value) or value <= 0:
        raise SpecError(
            f"LADDER_PEAK_FLOPS={env!r}: must be one device's peak FLOP/s, a positive count such as 312T or 3.12e14"
        )
    return float(value)


def peak_flops(device: torch.device | str, precision: str = "fp32") -> Peak:
    """The peak FLOP/s of one ``device`` computing in ``precision`` (``fp32`` or ``bf16``)."""
    import torch

    device = torch.device(device)
    name = device_name(device)
    env = env_peak_flops()
    if env is not None:
        return Peak(env, "env", name)
    if device.type == "cuda":
        table = gpu_table_peak(name, precision)
        if table is not None:
            return Peak(table, "table", name)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    return Peak(measure_matmul_flops(device, dtype), "measured", name)


def checked_peak(peak: Peak, achieved_flops: float | None, device: torch.device | str, precision: str = "fp32") -> Peak:
    """``peak`` for a run's MFU, measured again when the run computed faster than it: a measured peak is taken in
    0.2 s once per process, and another process busy on the same cores at that moment (a second local worker, a
    test suite) lowers it; the main job's runs then read MFU up to 160%. The better of the two measurements is
    kept (and cached); a datasheet or ``LADDER_PEAK_FLOPS`` peak is never second-guessed."""
    import torch

    if peak.source != "measured" or not achieved_flops or achieved_flops <= peak.flops:
        return peak
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    again = measure_matmul_flops(device, dtype, cached=False)
    return Peak(max(again, peak.flops), "measured", peak.device_name)


MALLOC_ENV = "LADDER_MALLOC_TUNING"
_MALLOC_TUNED = False


def tune_cpu_allocator() -> bool:
    """Keep freed CPU tensor memory in the process (glibc ``mallopt``): returns whether it did.

    glibc serves every allocation above its mmap threshold (128 KiB at first) with a fresh ``mmap`` and hands it
    back on free, so each activation of a few MB page-faults its way in again at every step: about 1,600 minor
    faults per step on the default study's smallest rung, 4,700 on its largest, a tenth or more of the step's CPU
    time. Raising the threshold to its maximum (32 MiB) and the trim threshold to 1 GiB makes the heap keep
    that memory, and the faults (nearly) vanish. The arithmetic is untouched. Once per process, on Linux with
    glibc only; ``LADDER_MALLOC_TUNING=0`` leaves malloc alone."""
    global _MALLOC_TUNED
    if _MALLOC_TUNED:
        return True
    if os.environ.get(MALLOC_ENV, "1") == "0" or not os.uname().sysname == "Linux":
        return False
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        m_trim_threshold, m_mmap_threshold = -1, -3  # glibc's malloc.h
        ok = libc.mallopt(m_mmap_threshold, 32 << 20) == 1 and libc.mallopt(m_trim_threshold, 1 << 30) == 1
    except (OSError, AttributeError):  # not glibc (musl, ...)
        return False
    _MALLOC_TUNED = ok
    return ok


def reset_peak_memory(device: torch.device | str) -> None:
    """Start counting this process's peak memory afresh: the CUDA allocator's peak on a GPU; on Linux also the
    peak resident set (``/proc/self/clear_refs``), so that a worker training runs one after another reports each
    run's own peak."""
    import torch

    device = torch.device(device)
    # Before CUDA's lazy initialisation there is no allocator to reset (torch raises "Invalid device argument"),
    # and nothing has been allocated: a fresh node job trains its first run with CUDA not yet initialised.
    if device.type == "cuda" and torch.cuda.is_initialized():
        torch.cuda.reset_peak_memory_stats(device)
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:  # not Linux, or not allowed: the peak since the process started
        pass


def peak_memory(device: torch.device | str) -> dict[str, int | None]:
    """``peak_rss_bytes`` (this process's peak resident memory since :func:`reset_peak_memory`) and
    ``peak_gpu_allocated_bytes`` (the CUDA allocator's peak on ``device``; None on CPU)."""
    import torch

    device = torch.device(device)
    rss = None
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    rss = int(line.split()[1]) * 1024
    except OSError:
        import resource
        import sys

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        rss = int(peak if sys.platform == "darwin" else peak * 1024)
    gpu = int(torch.cuda.max_memory_allocated(device)) if device.type == "cuda" else None
    return {"peak_rss_bytes": rss, "peak_gpu_allocated_bytes": gpu}


def mfu(flops_per_token: float, tokens_per_s: float, peak: float, world_size: int = 1) -> float | None:
    """Model FLOPs utilisation: achieved model FLOP/s over the peak of all devices."""
    if not peak or peak <= 0 or tokens_per_s is None:
        return None
    return float(flops_per_token) * float(tokens_per_s) / (float(peak) * max(1, world_size))
