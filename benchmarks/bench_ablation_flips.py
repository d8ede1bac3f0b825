"""Tie ablation on a constant gap: how often does it report a flip that is not there?

The untied variant's loss is the tied one's times e^0.006 at every rung (a constant gap in ln loss, 0.3% noise,
7 rungs 1e16-1e19 FLOPs), so tied wins everywhere and nothing crosses. Each repetition draws new noise and fits
the ablation (`ladder.reports.fits.ablations.fit_tie_ablation`, hero at 1e21 FLOPs). The check passes when no
repetition states a crossover (within or beyond the ladder), none calls untied the hero's winner with
certainty, and tied is the hero's winner in at least 75% of them (30 of 40).

This was the slow test ``test_a_constant_gap_never_reports_a_flip_over_many_repetitions``; the suite keeps a
smoke test of 3 repetitions (tests/reports/fits/test_ablations.py::test_a_constant_gap_never_reports_a_flip).
The repetitions run over the machine's cores (tests/parallel.py).

    python benchmarks/bench_ablation_flips.py [--reps 40] [--n-boot 40] [--json]

Exit status 1 when the check fails.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TIED_SHARE = 0.75


def run(reps: int, n_boot: int) -> dict:
    from tests.parallel import map_reps
    from tests.reports.fits.test_ablations import _constant_gap_call

    t0 = time.perf_counter()
    results = map_reps(_constant_gap_call, [(s, n_boot) for s in range(reps)])
    flips = [r.crossover["message"] for r in results if r.crossover["status"] in ("within_range", "beyond_range")]
    certain_untied = [
        r.hero["message"] for r in results if r.hero["winner"] == "untied" and r.hero["call"] == "certain"
    ]
    tied = sum(r.hero["winner"] == "tied" for r in results)
    calls = {}
    for r in results:
        calls[r.hero["call"]] = calls.get(r.hero["call"], 0) + 1
    ok = not flips and not certain_untied and tied >= TIED_SHARE * reps
    return {
        "check": "constant-gap",
        "reps": reps,
        "n_boot": n_boot,
        "ok": ok,
        "flips_stated": len(flips),
        "certain_untied": len(certain_untied),
        "tied_hero_winner": tied,
        "tied_needed": TIED_SHARE * reps,
        "hero_calls": calls,
        "flip_messages": flips[:5],
        "s": time.perf_counter() - t0,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--n-boot", type=int, default=40)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    out = run(args.reps, args.n_boot)
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(
            f"constant gap, {out['reps']} repetitions ({out['n_boot']} bootstrap refits): "
            f"{out['flips_stated']} flips stated, {out['certain_untied']} certain untied calls, "
            f"tied the hero's winner in {out['tied_hero_winner']} (>= {out['tied_needed']:g} needed), "
            f"calls {out['hero_calls']}; {'ok' if out['ok'] else 'FAILED'} in {out['s']:.0f}s"
        )
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
