"""Repetitions of a pure-CPU check spread over the machine's cores.

The statistical tests repeat one fit hundreds of times (coverage needs ~200 repetitions to tell 90% from 85%);
the repetitions are independent, so they run in worker processes, one per core. The inputs are drawn in the
test process and the function must be importable (a module-level function), so the results are exactly those
of the serial loop, whatever the number of workers.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

SERIAL_BELOW = 8


def cores() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


def map_reps(fn: Callable[..., Any], args: Iterable[tuple], workers: int | None = None) -> list[Any]:
    """``[fn(*a) for a in args]``, in order, over ``workers`` spawned processes (default: one per core); fewer
    than :data:`SERIAL_BELOW` repetitions run here (starting a worker costs about a second of imports)."""
    args = list(args)
    workers = min(workers or cores(), len(args))
    if workers <= 1 or len(args) < SERIAL_BELOW:
        return [fn(*a) for a in args]
    # spawn, not fork: the test process may hold torch's thread pools, which a fork would copy mid-state
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        return list(pool.map(fn, *zip(*args), chunksize=max(1, len(args) // (4 * workers))))
