"""Time the main job's training stage: the `default` study's 14 runs submitted to local workers and waited for,
exactly as `ladder run default` does between its "submit" and "train" stages (data preparation, the sanity check,
lm-eval, fit and report are outside the timing).

    python benchmarks/bench_main_job.py                 # plans into a fresh temporary folder, prints a table
    python benchmarks/bench_main_job.py --json          # one JSON object: stage seconds and every run's result
    python benchmarks/bench_main_job.py --compile true  # every run compiled (--inductor-cache DIR: warm or cold)

Only APIs that every version of ladder since the calibrated default study has (plan, prepare, submit, wait), so
the same file times an older checkout: check that commit out in the same folder (the embedded corpus hashes
site-packages, whose editable-install finder names the checkout's path: another folder means other data and
incomparable losses), install it, and run this file from anywhere. The machine must be quiet: the workers use
every core, so other processes' CPU use is sampled for 3 s just before and just after the stage; `quiet: false`
marks a run where either sample was busy.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_trainer import QUIET_OTHER_CORES, LoadWatch  # noqa: E402 - the same load check as the trainer benchmark


def idle_sample(seconds: float = 3.0) -> float:
    """Cores that other processes used over a few idle seconds (the workers' own use cannot be told apart from
    theirs while the stage runs, so the machine is sampled just before and just after it)."""
    with LoadWatch() as w:
        time.sleep(seconds)
    return w.other_cores


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=None, help="study folder (default: a temporary one, removed)")
    p.add_argument(
        "--compile",
        choices=("auto", "true", "false"),
        default=None,
        help="the study's training.compile (default: as the study says; versions before it: leave unset)",
    )
    p.add_argument(
        "--inductor-cache",
        type=Path,
        default=None,
        help="compiled kernels' folder (TORCHINDUCTOR_CACHE_DIR): an empty one times a cold compile",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object only")
    a = p.parse_args()
    if a.inductor_cache is not None:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(a.inductor_cache.resolve())
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import ladder
    from ladder.books.run_status import wait
    from ladder.jobs.submit import submit
    from ladder.pipeline import prepare
    from ladder.plan.planner import expand, write_plan
    from ladder.studies import load_study

    study = load_study("default")
    if a.compile is not None:
        setting = {"true": True, "false": False}.get(a.compile, "auto")
        study = study.model_copy(update={"training": study.training.model_copy(update={"compile": setting})})
    tmp = None
    out = a.out
    if out is None:
        tmp = Path(tempfile.mkdtemp(prefix="bench-main-job-"))
        out = tmp / "default"
    try:
        write_plan(expand(study), out)
        prepare(study, progress=not a.json)  # cached after the first time; not timed
        before = idle_sample()
        load0 = os.getloadavg()
        t0 = time.perf_counter()
        submit(out, study.executor)
        rows = wait(out, poll_s=0.25)
        stage = time.perf_counter() - t0
        load1 = os.getloadavg()
        after = idle_sample()
        runs = {}
        for d in sorted((out / "runs").iterdir()):
            try:
                r = json.loads((d / "result.json").read_text())
            except (OSError, ValueError):
                r = {"status": "missing"}
            runs[d.name] = {k: r.get(k) for k in ("status", "final_train_loss", "final_eval_loss", "train_time_s",
                                                  "wall_time_s", "tokens_per_s", "mfu", "steps")}  # fmt: skip
            runs[d.name]["compile"] = json.loads((d / "spec.json").read_text()).get("compile")
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    done = sum(r["status"] == "done" for r in runs.values())
    report = {
        "ladder": str(Path(ladder.__file__).resolve().parent), "cores": os.cpu_count(),
        "training_stage_s": round(stage, 2), "runs": len(runs), "done": done, "compile": a.compile,
        "compiled_runs": sum(bool(r.get("compile")) for r in runs.values()),
        "sum_train_time_s": round(sum(r["train_time_s"] or 0 for r in runs.values()), 2),
        "sum_wall_time_s": round(sum(r["wall_time_s"] or 0 for r in runs.values()), 2),
        "load_before": load0[0], "load_after_1min": load1[0], "other_cores_before": round(before, 3),
        "other_cores_after": round(after, 3), "quiet": max(before, after) < QUIET_OTHER_CORES,
        "states": sorted({r.state for r in rows}), "results": runs,
    }  # fmt: skip
    if a.json:
        print(json.dumps(report))
        return
    print(f"# ladder at {report['ladder']}; {report['cores']} cores; load before {load0[0]:.2f}, after {load1[0]:.2f}")
    print(
        f"training stage: {stage:.1f} s for {done}/{len(runs)} runs done "
        f"(sum of runs' train_time_s {report['sum_train_time_s']:.1f} s, wall_time_s {report['sum_wall_time_s']:.1f} s)"
    )
    print("| run | status | steps | final train loss | final eval loss | train s | wall s | tok/s |")
    print("|---|---|---|---|---|---|---|---|")
    for rid, r in runs.items():
        print(
            f"| {rid} | {r['status']} | {r['steps']} | {r['final_train_loss']} | {r['final_eval_loss']} | "
            f"{r['train_time_s']} | {r['wall_time_s']} | {r['tokens_per_s'] and round(r['tokens_per_s'])} |"
        )
    if not report["quiet"]:
        print(f"WARNING: THE MACHINE WAS BUSY: other processes used {before:.2f} cores in the 3 s before the stage and "
              f"{after:.2f} in the 3 s after it: NOT a figure", file=sys.stderr)  # fmt: skip


if __name__ == "__main__":
    main()
