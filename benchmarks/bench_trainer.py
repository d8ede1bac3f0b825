"""Trainer throughput on the default study's rungs: ladder's trainer against a plain Hugging Face ``Trainer`` loop
on the same model, data and batch, side by side in one run, with MFU against the measured matmul peak.

    python benchmarks/bench_trainer.py             # every default rung, 1 thread (what the main job uses)
    python benchmarks/bench_trainer.py --json      # the same, one JSON object on stdout (progress on stderr)
    python benchmarks/bench_trainer.py --packing   # also: 2 runs x 1 thread against 1 run x 2 threads
    python benchmarks/bench_trainer.py --compile   # also: ladder with its decoder layers compiled
    python benchmarks/bench_trainer.py --sizes 24K,200K --steps 10 --repeats 2    # a quicker look

Per rung (the tied variant of each default-study size: the shape, batch, sequence length, LR and schedule that
``ladder plan default`` gives it) both trainers take ``--warmup`` untimed steps and ``--steps`` timed ones on the
same random-token windows, in fp32 at ``--threads`` torch threads, each trainer in a worker process of its own
(neither inherits the other's allocator state). The two alternate, A B B A A B ..., for ``--repeats`` rounds,
and each keeps its best round (the least disturbed). ladder's trainer runs as a run does
(``train()`` on a run directory, logging every ``--warmup`` steps) without evaluations or checkpoints, which
the HF loop does not do either. Throughput is tokens over the wall time between the end of the warm-up and the
end of the last step. MFU = ``flops_per_token`` (6 x matmul params + attention) x tokens/s over the best fp32
1024^2 matmul rate at the same thread count, measured before every timed trial.

``--compile`` adds a third trainer, ladder with ``compile: true`` (its decoder layers compiled by inductor), in a
fresh process per trial as a run has, with a compile cache of its own per rung: its first round compiles cold
(what a fresh machine pays once per shape), the later rounds load the cached kernels (what every later run of
the shape pays). The compile time is what the warm-up steps took beyond the eager trainer's warm-up at the
compiled step rate; ``pays_after_steps`` is where the faster steps have paid it back, to compare with the
rung's planned ``steps``. The HF loop stays eager: the target is against a plain ``Trainer``.

The load: before and after every trial the benchmark reads the 1-minute load average and, from /proc/stat, the
CPU time that everything but the benchmark used during the trial (other processes, the kernel, steal). Results are figures only on a quiet machine (other processes
below ``QUIET_OTHER_CORES`` of a core on average in every trial); otherwise it prints a loud warning and
``"quiet": false``, and the ratios are only comparisons made under the same disturbance.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

QUIET_OTHER_CORES = 0.15  # other processes' average CPU use (in cores) during a trial that still counts as quiet


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------ the load
def _busy_seconds() -> float:
    """CPU seconds all processes and the kernel spent busy since boot, over all cores (from /proc/stat; steal
    time, the hypervisor giving the cores to other machines, counts as busy)."""
    with open("/proc/stat") as f:
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in f.readline().split()[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _descendants() -> list[int]:
    me, kids = os.getpid(), {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    kids.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]), []).append(int(name))
            except (OSError, IndexError, ValueError):
                continue
    out, todo = [], list(kids.get(me, []))
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(kids.get(pid, []))
    return out


def _own_seconds() -> float:
    """CPU seconds of this process, of its children that have been waited for, and of its live descendants (the
    trainers' worker processes) with what each of them has waited for: a worker that exits and is reaped by its
    parent while the watch runs moves its time into that parent's, instead of out of the count."""
    import resource

    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    total = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    tick = os.sysconf("SC_CLK_TCK")
    for pid in _descendants():
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += sum(int(x) for x in fields[11:15]) / tick  # utime, stime, cutime, cstime
        except (OSError, IndexError, ValueError):
            continue
    return total


class LoadWatch:
    """What else the machine did while a trial ran: the CPU time of every other process (and the kernel, and the
    hypervisor's steal) in cores, averaged over the trial, and the 1-minute load average before and after. The
    trial's own processes must have ended (been waited for) when the watch closes."""

    def __enter__(self) -> LoadWatch:
        self.load_before = os.getloadavg()[0]
        self.t0, self.busy0, self.own0 = time.perf_counter(), _busy_seconds(), _own_seconds()
        return self

    def __exit__(self, *exc) -> None:
        wall = time.perf_counter() - self.t0
        other = (_busy_seconds() - self.busy0) - (_own_seconds() - self.own0)
        self.other_cores = max(0.0, other) / wall if wall > 0 else 0.0
        self.load_after = os.getloadavg()[0]

    def to_dict(self) -> dict[str, float]:
        return {"other_cores": round(self.other_cores, 3), "load_before": round(self.load_before, 2),
                "load_after": round(self.load_after, 2)}  # fmt: skip


# ------------------------------------------------------------------------------------------------ the runs
def rung_specs(sizes: list[str] | None):
    """One run of each default-study rung, as the plan makes it: the tied trunk of seed 0, or the untied run where
    the rung has no tied one (the top rung is trained untied only); the branches start from a trunk's snapshots
    and the benchmark trains neither long enough to need one."""
    from ladder.plan.planner import expand
    from ladder.studies import load_study

    by_size: dict[str, object] = {}
    for r in expand(load_study("default")).runs:  # a tied run replaces an untied one of its rung
        if r.trunk is None and r.seed == 0:
            size = str(r.axes["size"])
            if size not in by_size or (r.shape.tied and not by_size[size].shape.tied):
                by_size[size] = r.model_copy(update={"branch_steps": []})
    runs = list(by_size.values())  # the plan's order: sizes, then the extra runs
    if sizes:
        missing = [s for s in sizes if s not in by_size]
        if missing:
            raise SystemExit(f"unknown size {missing}; the default study has {list(by_size)}")
        return [by_size[s] for s in sizes]
    return runs


def windows(spec, n: int) -> np.ndarray:
    seq = spec.data.seq_len
    return np.random.default_rng(0).integers(0, spec.shape.vocab_size, size=n * (seq + 1), dtype=np.int64)


def bench_spec(spec, steps: int, warmup: int):
    total = warmup + steps
    return spec.model_copy(update={
        "steps": total, "tokens": total * spec.batch_tokens, "warmup_steps": max(1, total // 10),
        "eval_interval": 10**9, "log_interval": warmup, "checkpoint_interval": 10**9, "checkpoint_minutes": 1e6,
    }).with_id()  # fmt: skip


def bench_ladder(spec, steps: int, warmup: int, workdir: Path) -> float:
    return bench_ladder_timed(spec, steps, warmup, workdir)[0]


def bench_ladder_timed(spec, steps: int, warmup: int, workdir: Path) -> tuple[float, float]:
    """(tokens/s after the warm-up, seconds the run took to the end of its warm-up: setup, compile, steps)."""
    from ladder.model.training.inputs import ArrayWindows, TrainData
    from ladder.model.training.loop import train

    spec = bench_spec(spec, steps, warmup)
    seq = spec.data.seq_len
    run = workdir / "ladder" / spec.run_id
    run.mkdir(parents=True)
    (run / "spec.json").write_text(spec.model_dump_json())
    toks = windows(spec, spec.steps * spec.sequences_per_batch + 8)
    data = TrainData(train=ArrayWindows(toks, seq), val=ArrayWindows(toks[: 2 * (seq + 1)], seq))
    train(run, dataset=data, handle_signals=False)
    recs = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    recs = {r["step"]: r for r in recs if r["kind"] == "train"}
    a, b = recs[warmup], recs[spec.steps]
    return (b["tokens"] - a["tokens"]) / (b["elapsed_s"] - a["elapsed_s"]), a["elapsed_s"]


def bench_hf(spec, steps: int, warmup: int, workdir: Path) -> float:
    from transformers import Trainer, TrainerCallback, TrainingArguments
    from transformers.trainer_callback import PrinterCallback

    from ladder.model.training.llama import build_model

    spec = bench_spec(spec, steps, warmup)
    seq, S = spec.data.seq_len, spec.sequences_per_batch
    toks = windows(spec, spec.steps * S + 8).reshape(-1, seq + 1)

    class Windows(torch.utils.data.Dataset):
        def __len__(self):
            return len(toks)

        def __getitem__(self, i):
            ids = torch.from_numpy(toks[i, :seq].copy())  # the model shifts the labels itself
            return {"input_ids": ids, "labels": ids}

    ends: list[float] = []

    class Clock(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            ends.append(time.perf_counter())

    o = spec.optimizer
    args = TrainingArguments(
        output_dir=str(workdir / "hf"), per_device_train_batch_size=S, max_steps=spec.steps, learning_rate=spec.lr,
        lr_scheduler_type="cosine", warmup_steps=spec.warmup_steps, weight_decay=o.weight_decay,
        adam_beta1=o.betas[0], adam_beta2=o.betas[1], adam_epsilon=o.eps, max_grad_norm=spec.grad_clip or 0.0,
        optim="adamw_torch", logging_steps=10**6, save_strategy="no", eval_strategy="no", report_to=[],
        use_cpu=True, dataloader_num_workers=0, disable_tqdm=True, seed=spec.seed,
    )  # fmt: skip
    model = build_model(spec.shape, seq_len=seq, seed=spec.seed)
    trainer = Trainer(model=model, args=args, train_dataset=Windows(), callbacks=[Clock()])
    trainer.remove_callback(PrinterCallback)
    trainer.train()
    return steps * S * seq / (ends[-1] - ends[warmup - 1])


def _trial(
    which: str, spec_json: str, steps: int, warmup: int, threads: int, compile_cache: str | None = None
) -> tuple[float, float | None]:
    """One timed trial in a worker process of its own trainer (each trainer keeps its process for every trial, so
    that neither inherits the other's allocator or library state; ``compiled`` gets a fresh process per trial,
    with the rung's compile cache ``compile_cache``). Returns (tokens/s, ladder's seconds to the warm-up's end)."""
    from ladder.model.config import RunSpec

    if compile_cache is not None:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = compile_cache

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.set_num_threads(threads)
    import transformers

    transformers.logging.set_verbosity_error()
    import logging

    logging.getLogger("ladder").setLevel(logging.WARNING)
    spec = RunSpec.model_validate_json(spec_json)
    work = Path(tempfile.mkdtemp(prefix="bench-trainer-"))
    try:
        if which == "hf":
            return bench_hf(spec, steps, warmup, work), None
        if which == "compiled":
            spec = spec.model_copy(update={"compile": True})
        return bench_ladder_timed(spec, steps, warmup, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _worker(which: str, spec_json: str, steps: int, warmup: int, threads: int, workdir: str, start, out) -> None:
    """One benchmark process of the packing measurement: waits for the others, then trains."""
    from ladder.model.config import RunSpec

    torch.set_num_threads(threads)
    spec = RunSpec.model_validate_json(spec_json)
    start.wait()
    out.put(bench_ladder(spec, steps, warmup, Path(workdir)))


def aggregate(spec, n_runs: int, threads: int, steps: int, warmup: int, workdir: Path) -> float:
    """Tokens/s of ``n_runs`` copies of the run training at once, each with ``threads`` threads, summed."""
    ctx = mp.get_context("spawn")
    start, out = ctx.Barrier(n_runs), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=("ladder", spec.model_dump_json(), steps, warmup, threads,
                                                str(workdir / f"p{i}"), start, out)) for i in range(n_runs)]  # fmt: skip
    for p in procs:
        p.start()
    rates = [out.get(timeout=900) for _ in procs]
    for p in procs:
        p.join()
    return float(sum(rates))


def compile_figures(
    warm: dict[str, list[tuple[float, float]]], spec, warmup: int, fpt: int, peak: float, best: dict[str, float]
) -> dict[str, Any]:
    """The compiled trainer's figures: its best rate, ratios, and the compile time it paid cold (its first trial)
    and warm (the best later one) beyond the eager trainer's setup, with the steps that pay each back."""
    tokens = spec.sequences_per_batch * spec.data.seq_len
    setup = min(s - warmup * tokens / r for r, s in warm["ladder"])  # the eager run's setup before its steps
    step_eager, step_compiled = tokens / best["ladder"], tokens / best["compiled"]
    paid = [max(0.0, s - warmup * tokens / r - setup) for r, s in warm["compiled"]]
    cold, hot = paid[0], (min(paid[1:]) if len(paid) > 1 else None)
    gain = step_eager - step_compiled

    def pays(seconds: float | None) -> int | None:
        return None if seconds is None or gain <= 0 else int(math.ceil(seconds / gain))

    return {
        "compiled_tok_s": round(best["compiled"], 1), "compiled_mfu": round(fpt * best["compiled"] / peak, 4),
        "ratio_compiled": round(best["compiled"] / best["hf"], 3),
        "compiled_over_eager": round(best["compiled"] / best["ladder"], 3),
        "compile_cold_s": round(cold, 1), "compile_warm_s": None if hot is None else round(hot, 1),
        "pays_after_steps_cold": pays(cold), "pays_after_steps_warm": pays(hot), "planned_steps": spec.steps,
    }  # fmt: skip


# ------------------------------------------------------------------------------------------------ main
def measure_peak(threads: int) -> float:
    from ladder.model.hardware import measure_matmul_flops

    return measure_matmul_flops("cpu", torch.float32, seconds=0.5, n=1024, cached=False)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default=None, help="comma-separated default-study sizes (default: every rung)")
    p.add_argument("--steps", type=int, default=20, help="timed optimizer steps per trial")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps before them")
    p.add_argument("--threads", type=int, default=1, help="torch threads per run (the default study uses 1)")
    p.add_argument("--repeats", type=int, default=3, help="alternating rounds per rung; the best of each is kept")
    p.add_argument("--packing", action="store_true", help="also measure 2 runs x 1 thread vs 1 run x 2 threads")
    p.add_argument("--compile", action="store_true", help="also ladder with its decoder layers compiled (cold, warm)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout only")
    a = p.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    torch.set_num_threads(a.threads)
    import transformers

    transformers.logging.set_verbosity_error()
    import logging

    logging.getLogger("ladder").setLevel(logging.WARNING)
    specs = rung_specs(a.sizes.split(",") if a.sizes else None)
    head = {"machine": f"{platform.machine()} x{os.cpu_count()}", "cpu": platform.processor() or None,
            "torch": torch.__version__, "transformers": transformers.__version__, "threads": a.threads,
            "steps": a.steps, "warmup": a.warmup, "repeats": a.repeats}  # fmt: skip
    log(f"# {head}")
    rungs: dict[str, Any] = {}
    all_watch: list[dict] = []
    from concurrent.futures import ProcessPoolExecutor

    pools = {w: ProcessPoolExecutor(max_workers=1, mp_context=mp.get_context("spawn")) for w in ("ladder", "hf")}
    for pool in pools.values():  # start them (imports) before anything is timed
        pool.submit(time.sleep, 0).result()
    trainers = ["ladder", "hf"] + (["compiled"] if a.compile else [])
    for spec in specs:
        size = str(spec.axes["size"])
        fpt = spec.flops_per_token
        best = dict.fromkeys(trainers, 0.0)
        warm: dict[str, list[tuple[float, float]]] = {w: [] for w in trainers}  # (tok/s, s to warm-up's end)
        trials, peaks = [], []
        cache = tempfile.mkdtemp(prefix="bench-inductor-") if a.compile else None
        try:
            for rep in range(a.repeats):
                for which in trainers if rep % 2 == 0 else trainers[::-1]:
                    peaks.append(measure_peak(a.threads))
                    args = (_trial, which, spec.model_dump_json(), a.steps, a.warmup, a.threads)
                    with LoadWatch() as w:
                        if which == "compiled":  # a fresh process, as every run of the shape has
                            with ProcessPoolExecutor(max_workers=1, mp_context=mp.get_context("spawn")) as pool:
                                tps, to_warm = pool.submit(*args, cache).result()
                        else:
                            tps, to_warm = pools[which].submit(*args).result()
                    best[which] = max(best[which], tps)
                    if to_warm is not None:
                        warm[which].append((tps, to_warm))
                    trials.append({"trainer": which, "tokens_per_s": round(tps, 1), **w.to_dict()})
                    all_watch.append(w.to_dict())
                    log(f"#   {size} round {rep} {which}: {tps:,.0f} tok/s (others {w.other_cores:.2f} cores, load "
                        f"{w.load_before:.2f}, peak {peaks[-1] / 1e9:.0f} GFLOP/s)")  # fmt: skip
        finally:
            if cache is not None:
                shutil.rmtree(cache, ignore_errors=True)
        peak = max(peaks)
        rungs[size] = {
            "run_shape": spec.shape.describe(), "params_non_embedding": spec.shape.params_non_embedding,
            "params_total": spec.shape.params_total, "batch_sequences": spec.sequences_per_batch,
            "seq_len": spec.data.seq_len, "flops_per_token": fpt, "peak_gflops": round(peak / 1e9, 1),
            "ladder_tok_s": round(best["ladder"], 1), "hf_tok_s": round(best["hf"], 1),
            "ladder_mfu": round(fpt * best["ladder"] / peak, 4), "hf_mfu": round(fpt * best["hf"] / peak, 4),
            "ratio": round(best["ladder"] / best["hf"], 3), "trials": trials,
        }  # fmt: skip
        if a.compile:
            rungs[size].update(compile_figures(warm, spec, a.warmup, fpt, peak, best))
    for pool in pools.values():
        pool.shutdown()
    packing = None
    if a.packing:
        packing = {}
        for spec in specs:
            size = str(spec.axes["size"])
            work = Path(tempfile.mkdtemp(prefix="bench-packing-"))
            row = {}
            try:
                with LoadWatch() as w:
                    for label, n, t in (("1x1", 1, 1), ("2x1", 2, 1), ("1x2", 1, 2)):
                        row[label] = round(aggregate(spec, n, t, a.steps, a.warmup, work / label), 1)
            finally:
                shutil.rmtree(work, ignore_errors=True)
            row["2x1_over_1x2"] = round(row["2x1"] / row["1x2"], 3)
            row.update(w.to_dict())
            all_watch.append(w.to_dict())
            packing[size] = row
            log(f"#   packing {size}: {row}")
    quiet = all(w["other_cores"] < QUIET_OTHER_CORES for w in all_watch)
    result = {**head, "quiet": quiet, "max_other_cores": max(w["other_cores"] for w in all_watch),
              "rungs": rungs, "packing": packing}  # fmt: skip
    if a.json:
        print(json.dumps(result))
    else:
        print(f"# {head['machine']}, torch {head['torch']}, transformers {head['transformers']}, {a.threads} thread(s), "
              f"{a.steps} timed steps after {a.warmup}, best of {a.repeats}; quiet: {quiet}")  # fmt: skip
        print("| rung (non-emb) | shape | batch | peak GFLOP/s | ladder tok/s | HF Trainer tok/s | ladder MFU | HF MFU "
              "| ladder/HF |")  # fmt: skip
        print("|---|---|---|---|---|---|---|---|---|")
        for size, r in rungs.items():
            print(f"| {size} ({r['params_non_embedding']:,}) | {r['run_shape']} | {r['batch_sequences']} x "
                  f"{r['seq_len']} | {r['peak_gflops']:.0f} | {r['ladder_tok_s']:,.0f} | {r['hf_tok_s']:,.0f} | "
                  f"{100 * r['ladder_mfu']:.1f}% | {100 * r['hf_mfu']:.1f}% | {r['ratio']:.2f}x |")  # fmt: skip
        if a.compile:
            print()
            print("| rung | ladder tok/s | compiled tok/s | compiled MFU | compiled/HF | compiled/eager | compile cold s "
                  "| warm s | pays after steps (cold / warm) | planned steps |")  # fmt: skip
            print("|---|---|---|---|---|---|---|---|---|---|")
            for size, r in rungs.items():
                print(f"| {size} | {r['ladder_tok_s']:,.0f} | {r['compiled_tok_s']:,.0f} | {100 * r['compiled_mfu']:.1f}% "
                      f"| {r['ratio_compiled']:.2f}x | {r['compiled_over_eager']:.2f}x | {r['compile_cold_s']:.1f} | "
                      f"{r['compile_warm_s'] if r['compile_warm_s'] is not None else '-'} | "
                      f"{r['pays_after_steps_cold'] or 'never'} / {r['pays_after_steps_warm'] or 'never'} | "
                      f"{r['planned_steps']:,} |")  # fmt: skip
        if packing:
            print()
            print("| rung | 1 run x 1 thread | 2 runs x 1 thread | 1 run x 2 threads | 2x1 / 1x2 |")
            print("|---|---|---|---|---|")
            for size, r in packing.items():
                print(f"| {size} | {r['1x1']:,.0f} | {r['2x1']:,.0f} | {r['1x2']:,.0f} | {r['2x1_over_1x2']:.2f}x |")
    if not quiet:
        log("\n" + "!" * 100 + f"\nWARNING: THE MACHINE WAS BUSY: other processes used up to {result['max_other_cores']:.2f}"
            f" cores during a trial (quiet means < {QUIET_OTHER_CORES}).\nThese numbers are NOT figures: only "
            "comparisons made under the same disturbance. Rerun on a quiet machine.\n" + "!" * 100)  # fmt: skip


if __name__ == "__main__":
    main()
