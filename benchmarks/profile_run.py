"""Where the time of one default-study run goes: forward, backward, optimizer, data, eval, logging, checkpoints,
setup and the Python that glues them, measured on the real trainer (``ladder.model.training.loop.train``).

    python benchmarks/profile_run.py                       # the top rung (200K, tied), one thread
    python benchmarks/profile_run.py --size 24K --untied   # another rung
    python benchmarks/profile_run.py --ops --max-steps 40  # plus torch.profiler's top operators

The run is planned from the study exactly as ``ladder plan`` plans it and trained on the study's prepared data
(prepared into ``$LADDER_CACHE`` first if missing) in a temporary folder. Phases are wall-clock times of the
trainer's own calls, wrapped here (on CPU every call is synchronous, so wall time is the work): a call made
inside another timed phase counts in the outer one (the eval's forwards are "eval", not "forward"). "forward" is
the training forward including the LM head's gradient, which the chunked loss computes there (its backward only
scales it).
"python" is the loop's time not inside any timed phase (the loop's bookkeeping, the schedule, the autograd
graph's Python side that is not under forward/backward). ``--ops`` profiles again with ``torch.profiler``
(which slows everything down, so its table is a separate run) and prints the operators with the most self CPU
time. Not a test: run on demand; on a shared machine the shares are more reliable than the seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

PHASES = ("setup", "data", "forward", "backward", "optimizer", "eval", "logging", "checkpoint", "final save",
          "python")  # fmt: skip


class PhaseClock:
    """Accumulates wall time per phase; a timed call inside another timed call counts in the outer one."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.depth = 0

    def wrap(self, phase: str, fn: Callable) -> Callable:
        def timed(*args, **kwargs):
            if self.depth:
                return fn(*args, **kwargs)
            self.depth += 1
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[phase] += time.perf_counter() - t0
                self.calls[phase] += 1
                self.depth -= 1

        timed.__wrapped__ = fn  # type: ignore[attr-defined]
        return timed


def instrument(clock: PhaseClock) -> Callable[[], None]:
    """Wrap the trainer's calls; returns the function that undoes it."""
    from ladder.model.data.windows import TokenWindows
    from ladder.model.training import checkpoint, loop, steps
    from ladder.model.training.progress import Progress

    undo: list[tuple[Any, str, Any]] = []

    def patch(owner: Any, name: str, phase: str) -> None:
        if not hasattr(owner, name):
            return
        original = getattr(owner, name)
        undo.append((owner, name, original))
        setattr(owner, name, clock.wrap(phase, original))

    patch(TokenWindows, "batch", "data")
    patch(steps.Steps, "_loss", "forward")  # the training forward (the chunked loss computes the head's gradient here)
    patch(steps, "lm_loss", "forward")  # the same in versions before the chunked loss (for before/after profiles)
    patch(torch.Tensor, "backward", "backward")
    patch(torch.nn.utils, "clip_grad_norm_", "optimizer")
    patch(steps.Steps, "evaluate", "eval")
    patch(loop, "append_jsonl", "logging")
    patch(Progress, "update", "logging")
    patch(checkpoint, "save_checkpoint", "checkpoint")
    patch(loop, "save_final_model", "final save")
    patch(steps.Steps, "__init__", "setup")
    patch(loop, "resolve_data", "setup")
    patch(loop, "peak_flops", "setup")

    original_build = steps.build_optimizer

    def build_optimizer(*args, **kwargs):
        opt = original_build(*args, **kwargs)
        opt.step = clock.wrap("optimizer", opt.step)
        opt.zero_grad = clock.wrap("optimizer", opt.zero_grad)
        return opt

    undo.append((steps, "build_optimizer", original_build))
    steps.build_optimizer = build_optimizer

    def restore() -> None:
        for owner, name, original in reversed(undo):
            setattr(owner, name, original)

    return restore


def train_once(spec, prepared, workdir: Path, clock: PhaseClock | None, ops: bool) -> tuple[float, dict, Any]:
    from ladder.model.training.loop import train

    run = workdir / spec.run_id
    run.mkdir(parents=True)
    (run / "spec.json").write_text(spec.model_dump_json())
    restore = instrument(clock) if clock is not None else (lambda: None)
    prof = None
    try:
        if ops:
            from torch.profiler import ProfilerActivity, profile

            prof = profile(activities=[ProfilerActivity.CPU], record_shapes=False)
            prof.__enter__()
        t0 = time.perf_counter()
        result = train(run, dataset=prepared, handle_signals=False)
        wall = time.perf_counter() - t0
    finally:
        if prof is not None:
            prof.__exit__(None, None, None)
        restore()
    return wall, result, prof


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--study", default="default")
    p.add_argument("--size", default=None, help="the rung as the study names it (default: the largest)")
    p.add_argument("--untied", action="store_true", help="the untied variant (default: tied)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (the default study trains with 1)")
    p.add_argument("--max-steps", type=int, default=None, help="train only this many steps (same intervals)")
    p.add_argument("--ops", action="store_true", help="also print torch.profiler's top operators (a second run)")
    p.add_argument("--json", action="store_true", help="print one JSON object only")
    a = p.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    torch.set_num_threads(a.threads)
    import transformers

    transformers.logging.set_verbosity_error()
    from ladder.model.data.prepare import prepare_data
    from ladder.plan.planner import expand
    from ladder.studies import load_study

    study = load_study(a.study)
    runs = expand(study).runs
    size = a.size or str(runs[-1].axes.get("size"))
    tied = not a.untied
    spec = next((r for r in runs if str(r.axes.get("size")) == size and r.shape.tied == tied), None)
    if spec is None:
        sizes = ", ".join(dict.fromkeys(str(r.axes.get("size")) for r in runs))
        raise SystemExit(f"no {'tied' if tied else 'untied'} run of size {size!r} in {a.study!r} (sizes: {sizes})")
    if a.max_steps is not None and a.max_steps < spec.steps:
        warmup = int(round(spec.warmup_steps * a.max_steps / spec.steps))
        spec = spec.model_copy(update={"steps": a.max_steps, "tokens": a.max_steps * spec.batch_tokens,
                                       "warmup_steps": warmup}).with_id()  # fmt: skip
    prepared = prepare_data(spec.data, spec.shape.vocab_size, progress=not a.json)

    load0 = os.getloadavg()[0]
    clock = PhaseClock()
    work = Path(tempfile.mkdtemp(prefix="profile-run-"))
    try:
        wall, result, _ = train_once(spec, prepared, work / "timed", clock, ops=False)
        prof = train_once(spec, prepared, work / "ops", None, ops=True)[2] if a.ops else None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    load1 = os.getloadavg()[0]
    seconds = dict(clock.seconds)
    seconds["python"] = max(0.0, wall - sum(seconds.values()))
    out = {
        "study": a.study, "size": size, "tied": tied, "run_id": spec.run_id, "steps": spec.steps,
        "batch_sequences": spec.sequences_per_batch, "micro_batch_size": spec.micro_batch_size,
        "params_non_embedding": spec.shape.params_non_embedding, "threads": a.threads, "wall_s": wall,
        "train_time_s": result.get("train_time_s"), "tokens_per_s": result.get("tokens_per_s"),
        "mfu": result.get("mfu"), "load_before": load0, "load_after": load1,
        "phases_s": {k: round(seconds.get(k, 0.0), 3) for k in PHASES},
        "calls": dict(clock.calls),
    }  # fmt: skip
    if a.json:
        print(json.dumps(out))
        return
    print(f"# {a.study} {size} {'tied' if tied else 'untied'} ({spec.run_id}): {spec.steps} steps of "
          f"{spec.sequences_per_batch} x {spec.data.seq_len} tokens, micro-batch {spec.micro_batch_size}, "
          f"{a.threads} thread(s); load {load0:.2f} -> {load1:.2f}")  # fmt: skip
    print(
        f"# wall {wall:.2f} s, {result.get('tokens_per_s') or 0:,.0f} tok/s in steps, MFU {result.get('mfu') or 0:.3f}"
    )
    print("| phase | seconds | share | calls |")
    print("|---|---|---|---|")
    for k in PHASES:
        s = seconds.get(k, 0.0)
        print(f"| {k} | {s:.2f} | {100 * s / wall:.1f}% | {clock.calls.get(k, '')} |")
    if prof is not None:
        print()
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))
    if load0 > 0.5 or load1 > 1.5:
        print(f"WARNING: the machine was busy (load {load0:.2f} -> {load1:.2f}): seconds are inflated, shares less so",
              file=sys.stderr)  # fmt: skip


if __name__ == "__main__":
    main()
