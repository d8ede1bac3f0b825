"""Rollout coverage study: do the hero forecast's 90% intervals cover a new run 90% of the time?

Synthetic ladders from known laws with log-normal noise; for each repetition the whole forecast pipeline
(`ladder.reports.fits.loss.forecast_loss`: every identifiable form, rollout weights, calibration) forecasts a
hero 4x above the largest size, whose noisy loss is then drawn from the same law. Scenarios:

- chinchilla:   Epoch's constants (E 1.82, A 482, B 2085, alpha 0.348, beta 0.366), 6 sizes 10M-160M,
                budgets 0.25/0.5/1 x 20 tokens/param (the WSD-branch design), noise 0.5%
- drift:        misspecified: alpha drifts with size (5% per e-fold), same design
- single-ratio: 7 sizes at 20 tokens/param only (the collinear design)
- noisy:        as chinchilla with 2% noise

    python benchmarks/bench_coverage.py [--reps 200] [--scenario all] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from ladder.reports.fits.loss import forecast_loss
from ladder.reports.fits.runs import Runs

E, A, B, ALPHA, BETA = 1.82, 482.0, 2085.0, 0.348, 0.366


def chinchilla(n, d):
    return E + A * n**-ALPHA + B * d**-BETA


def drift(n, d):
    return E + A * n ** -(ALPHA * (1 + 0.05 * np.log(n / 1e7))) + B * d**-BETA


def design(kind):
    if kind == "single-ratio":
        sizes = np.geomspace(1e7, 1.6e8, 7)
        return sizes, np.ones(7) * 20
    sizes = np.geomspace(1e7, 1.6e8, 6)
    return np.repeat(sizes, 3), np.tile([5.0, 10.0, 20.0], 6)


SCENARIOS = {
    "chinchilla": (chinchilla, "budgets", 0.005),
    "drift": (drift, "budgets", 0.005),
    "single-ratio": (chinchilla, "single-ratio", 0.005),
    "noisy": (chinchilla, "budgets", 0.02),
}


def run(name, reps, seed=0):
    law, kind, sigma = SCENARIOS[name]
    n, ratio = design(kind)
    d = n * ratio
    nh = n.max() * 4
    dh = 20 * nh
    rng = np.random.default_rng(seed)
    hits, errs, widths, factors = 0, [], [], []
    t0 = time.perf_counter()
    for r in range(reps):
        loss = law(n, d) * np.exp(rng.normal(0, sigma, len(n)))
        actual = law(nh, dh) * np.exp(rng.normal(0, sigma))
        fc = forecast_loss(Runs(n, d, loss, [str(i) for i in range(len(n))]), nh, dh, seed=r)
        p = fc.points[0]
        hits += p.lo <= actual <= p.hi
        errs.append(100 * (p.loss - actual) / actual)
        widths.append(p.half_width_pct)
        factors.append(fc.factor)
    e = np.array(errs)
    return {
        "scenario": name,
        "reps": reps,
        "coverage": hits / reps,
        "rms_err_pct": float(np.sqrt((e**2).mean())),
        "bias_pct": float(e.mean()),
        "median_half_width_pct": float(np.median(widths)),
        "widened": float(np.mean(np.array(factors) > 1)),
        "s_per_rep": (time.perf_counter() - t0) / reps,
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--scenario", default="all", choices=["all", *SCENARIOS])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    names = list(SCENARIOS) if args.scenario == "all" else [args.scenario]
    out = [run(s, args.reps) for s in names]
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(
        f"{'scenario':14} {'reps':>5} {'coverage':>9} {'rms err %':>10} {'bias %':>7} {'half-width %':>13} "
        f"{'widened':>8} {'s/rep':>6}"
    )
    for o in out:
        print(
            f"{o['scenario']:14} {o['reps']:5d} {o['coverage']:9.3f} {o['rms_err_pct']:10.2f} {o['bias_pct']:7.2f} "
            f"{o['median_half_width_pct']:13.2f} {o['widened']:8.2f} {o['s_per_rep']:6.2f}"
        )


if __name__ == "__main__":
    sys.exit(main())
