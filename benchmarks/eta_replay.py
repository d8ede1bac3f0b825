"""Replay a finished study's training through the progress ETA and compare it with the time that was really left.

    python benchmarks/eta_replay.py ladder-runs/default          # after `make demo`
    python benchmarks/eta_replay.py STUDY_DIR --json

Each run's start and end come from its result.json (end: the file's modification time; start: end less its
wall_time_s); in between its FLOPs grow linearly. At every 2 s of the replayed schedule the runs' status rows
(as `ladder status` builds them: state, FLOPs spent, wall time so far) go to ``ladder.books.run_status.EtaClock``
and, side by side, to the reference: one FLOP rate for the whole study, the running runs' FLOPs per wall second
summed (what the ETA assumed before it knew that small models turn fewer FLOPs per second), with the same
glide. Printed: ETA / actual time left at each tenth of the schedule, and the median and worst ratio over the
polls with more than 30 s left (1.0 is right; below 1 the ETA is too short).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ladder.books.run_status import FINAL, EtaClock, RunStatus  # noqa: E402

POLL_S = 2.0


def schedule(study: Path) -> list[dict]:
    runs = []
    for result in sorted(study.glob("runs/*/result.json")):
        r = json.loads(result.read_text())
        spec = json.loads((result.parent / "spec.json").read_text())
        if r.get("status") != "done" or not r.get("wall_time_s") or not r.get("flops_spent"):
            continue
        end = os.path.getmtime(result)
        runs.append(
            {
                "run_id": r["run_id"],
                "variant": spec["variant"],
                "start": end - float(r["wall_time_s"]),
                "end": end,
                "flops": float(r["flops_spent"]),
                "per_token": float(r["flops_per_token"]),
                "tokens": int(spec["tokens"]),
            }
        )
    if not runs:
        raise SystemExit(f"{study}: no done run with a result.json to replay")
    return runs


def rows_at(runs: list[dict], t: float) -> list[RunStatus]:
    rows = []
    for x in runs:
        state = "done" if t >= x["end"] else ("running" if t >= x["start"] else "queued")
        frac = {"done": 1.0, "queued": 0.0}.get(state, (t - x["start"]) / (x["end"] - x["start"]))
        own = round(x["flops"] / x["per_token"])
        rows.append(
            RunStatus(
                run_id=x["run_id"],
                variant=x["variant"],
                size="",
                state=state,
                tokens_done=x["tokens"] - own + int(own * frac),
                tokens_planned=x["tokens"],
                progress=frac,
                train_loss=None,
                eval_loss=None,
                tokens_per_s=None,
                eta_s=None,
                job_id=None,
                executor="local",
                error=None,
                flops_spent=x["flops"] * frac,
                flops_planned=x["flops"],
                own_tokens_done=int(own * frac),
                own_tokens_planned=own,
                elapsed_s=(x["end"] - x["start"]) * frac if state != "queued" else None,
            )
        )
    return rows


class StudyRateClock(EtaClock):
    """The reference: FLOPs left over the running runs' summed FLOPs per wall second, with EtaClock's glide."""

    def estimate(self, rows: list[RunStatus]) -> float | None:
        left = sum(max(0.0, r.flops_planned - r.flops_spent) for r in rows if r.state not in FINAL)
        rate = sum(r.flops_spent / r.elapsed_s for r in rows if r.state == "running" and r.elapsed_s)
        return 0.0 if left <= 0 else (left / rate if rate > 0 else None)


def replay(study: Path) -> dict:
    runs = schedule(study)
    t0, t1 = min(x["start"] for x in runs), max(x["end"] for x in runs)
    now = [t0]
    clock, reference = EtaClock(clock=lambda: now[0]), StudyRateClock(clock=lambda: now[0])
    polls = []
    t = t0
    while t < t1:
        now[0] = t
        rows = rows_at(runs, t)
        polls.append((t - t0, clock(rows), reference(rows), t1 - t))
        t += POLL_S

    def ratios(i: int) -> list[float]:
        return [p[i] / p[3] for p in polls if p[3] > 30 and p[i] is not None]

    def summary(i: int) -> dict:
        r = ratios(i)  # the worst: the ratio farthest from 1 either way
        return {"median_ratio": statistics.median(r), "worst_ratio": max(r, key=lambda x: abs(math.log(x)))}

    tenths = [min(polls, key=lambda p: abs(p[0] - k * (t1 - t0) / 10)) for k in range(10)]
    return {
        "study": str(study),
        "runs": len(runs),
        "wall_s": t1 - t0,
        "eta": summary(1),
        "reference": summary(2),
        "tenths": [
            {"t_s": round(p[0]), "actual_left_s": round(p[3]), "eta_s": p[1], "reference_s": p[2]} for p in tenths
        ],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("study", type=Path, help="a study directory whose runs are done")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    out = replay(args.study)
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"{out['study']}: {out['runs']} runs over {out['wall_s']:.0f} s of training")
    print(f"{'t (s)':>7} {'left (s)':>9} {'ETA (s)':>8} {'reference (s)':>14}")
    for p in out["tenths"]:
        eta, ref = p["eta_s"], p["reference_s"]
        print(
            f"{p['t_s']:>7} {p['actual_left_s']:>9} {'-' if eta is None else round(eta):>8} "
            f"{'-' if ref is None else round(ref):>14}"
        )
    for name in ("eta", "reference"):
        s = out[name]
        print(f"{name}: ETA / actual left, median {s['median_ratio']:.2f}, worst {s['worst_ratio']:.2f}")


if __name__ == "__main__":
    main()
