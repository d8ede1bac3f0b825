"""Benchmark: fit speed and forecast accuracy of the loss forecast (`ladder.reports.fits.loss.forecast_loss`).

1. Speed: one forecast with every law form (chinchilla, overtrain, ratio, frontier), 200 bootstrap refits each
   (from fresh starts) and the whole rollout backtest, on 250 synthetic runs (50 sizes x 5 tokens/param, 1.5%
   noise, Epoch's constants). Target: under 30 s on 2 cores.
2. Accuracy on Epoch AI's extraction of Chinchilla's runs (epoch-research/analyzing-chinchilla,
   data/svg_extracted_data.csv; the one public ladder this project may tune on): the chinchilla form's
   full-data constants against Epoch's (E 1.82, A 482, B 2085, alpha 0.348, beta 0.366; they drop the 5
   highest-loss points, as here), and a forecast fitted on the runs below 1e20 FLOPs scored on those above.
   The CSV is not shipped (no licence to redistribute) and this machine cannot download it: pass
   `--epoch-csv PATH` (columns "Model Size", "Training FLOP", "loss", or params, flops, loss); without it this
   part is skipped.

    .venv/bin/python benchmarks/bench_fit.py [--epoch-csv svg_extracted_data.csv] [--json] [--no-readme]

Writes the measured speed into benchmarks/README.md under "## Scaling-law fit speed" (that section only).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import time
from pathlib import Path

import numpy as np
import pandas as pd

from ladder.reports.fits.engine import fit
from ladder.reports.fits.loss import forecast_loss
from ladder.reports.fits.loss.loss_forms import LOSS_FORMS
from ladder.reports.fits.runs import Runs

E, A, B, ALPHA, BETA = 1.82, 482.0, 2085.0, 0.348, 0.366  # Epoch AI's Chinchilla replication
from readme_table import update_section  # noqa: E402 (the script's folder is on sys.path)

README = Path(__file__).with_name("README.md")
HEADING = "## Scaling-law fit speed"
HEADER = (
    "| date | machine | runs | forms | bootstrap | rollout fits | total (s) | CPU (s) | load | hero err % |\n"
    "|---|---|---|---|---|---|---|---|---|---|"
)


def synthetic(n_sizes: int = 50, mults=(5, 10, 20, 40, 80), noise: float = 0.015, seed: int = 0):
    rng = np.random.default_rng(seed)
    n = np.repeat(np.geomspace(1e7, 1e9, n_sizes), len(mults))
    d = n * np.tile(np.asarray(mults, float), n_sizes)
    loss = (E + A * n**-ALPHA + B * d**-BETA) * np.exp(rng.normal(0, noise, len(n)))
    return Runs(n, d, loss, [str(i) for i in range(len(n))])


def speed(n_boot: int) -> dict:
    data = synthetic()
    hero = (1e10, 2e11)
    load = os.getloadavg()[0]
    w0, c0 = time.perf_counter(), time.process_time()
    fc = forecast_loss(data, *hero, n_boot=n_boot)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    truth = E + A * hero[0] ** -ALPHA + B * hero[1] ** -BETA
    fits = sum(len(p["fitted"]) for p in fc.rollout.prefixes)
    return {
        "runs": len(data),
        "forms": list(fc.laws),
        "n_boot": n_boot,
        "rollout_fits": fits,
        "wall_s": wall,
        "cpu_s": cpu,
        "load": load,
        "hero_err_pct": 100 * (fc.points[0].loss - truth) / truth,
        "weights": fc.weights,
        "pass": wall < 30,
    }


def read_epoch(path: Path) -> pd.DataFrame:
    """Epoch's CSV ("Model Size", "Training FLOP", "loss") or the same runs as params, flops, loss; tokens are
    ``flops / (6 params)``, as Epoch's analysis has them."""
    raw = pd.read_csv(path)
    names = {"params": "Model Size", "flops": "Training FLOP", "loss": "loss"}
    if not all(v in raw.columns for v in names.values()):
        names = {k: k for k in names}
    missing = [v for v in names.values() if v not in raw.columns]
    if missing:
        raise SystemExit(
            f"{path}: no column(s) {', '.join(missing)} (Epoch's 'Model Size', 'Training FLOP', "
            "'loss', or params, flops, loss)"
        )
    df = pd.DataFrame({k: raw[v].astype(float) for k, v in names.items()}).dropna()
    df["tokens"] = df["flops"] / (6 * df["params"])
    return df


def epoch(path: Path, n_boot: int) -> dict:
    df = read_epoch(path)
    df = df.sort_values("loss").iloc[:-5]  # Epoch drops the 5 highest-loss points
    form = LOSS_FORMS["chinchilla"]
    law = fit(form.engine, form.raw(df["params"], df["tokens"]), np.log(df["loss"]), n_boot=n_boot)
    low, high = df[df["flops"] < 1e20], df[df["flops"] >= 1e20]
    data = Runs(low["params"], low["tokens"], low["loss"], [str(i) for i in low.index])
    i = high["params"].idxmax()
    fc = forecast_loss(
        data,
        float(high.loc[i, "params"]),
        float(high.loc[i, "tokens"]),
        predict=list(zip(high["params"], high["tokens"])),
        n_boot=n_boot,
    )
    points = fc.points[1:]
    err = np.array([100 * (p.loss - a) / a for p, a in zip(points, high["loss"]) if p.loss is not None])
    inside = np.mean([p.lo <= a <= p.hi for p, a in zip(points, high["loss"]) if p.loss is not None])
    return {
        "full_data": law.params,
        "full_data_ci90": law.intervals(),
        "epoch": {"E": E, "A": A, "B": B, "alpha": ALPHA, "beta": BETA},
        "held_out": {
            "n_fit": len(low),
            "n_forecast": len(err),
            "mean_abs_err_pct": float(np.mean(np.abs(err))),
            "mean_err_pct": float(np.mean(err)),
            "max_abs_err_pct": float(np.max(np.abs(err))),
            "coverage": float(inside),
            "median_half_width_pct": float(np.median([p.half_width_pct for p in points if p.loss is not None])),
            "largest_params_x": float(high["params"].max() / low["params"].max()),
            "largest_compute_x": float(high["flops"].max() / low["flops"].max()),
            "weights": fc.weights,
            "reach": fc.reach,
        },
    }


INTRO = (
    "One loss forecast with every law form, 200 bootstrap refits per form (fresh starts) and the whole rollout\n"
    "backtest, on 250 synthetic runs (50 sizes x 5 tokens/param, 1.5% noise); target < 30 s on 2 cores.\n"
    "Measured with `python benchmarks/bench_fit.py`; CPU is process time; load is the 1-minute load average\n"
    "when the run started (a figure needs a quiet machine: load < 0.5)."
)


def update_readme(row: str, path: Path = README) -> None:
    update_section(HEADING, INTRO, HEADER, row, path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-boot", type=int, default=200)
    ap.add_argument("--epoch-csv", type=Path, default=None)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-readme", action="store_true")
    args = ap.parse_args()
    out = {"speed": speed(args.n_boot)}
    if args.epoch_csv is not None and args.epoch_csv.is_file():
        out["epoch"] = epoch(args.epoch_csv, args.n_boot)
    else:
        out["epoch"] = {"skipped": "no --epoch-csv given (the data is not shipped and cannot be downloaded here)"}
    if args.json:
        print(json.dumps(out, indent=2, default=float))
    else:
        s = out["speed"]
        print(
            f"{s['runs']} runs, forms {', '.join(s['forms'])}, {s['n_boot']} bootstrap refits each, "
            f"{s['rollout_fits']} rollout fits: {s['wall_s']:.1f} s wall ({s['cpu_s']:.1f} s CPU), load "
            f"{s['load']:.1f}; hero error {s['hero_err_pct']:+.2f}%  {'PASS' if s['pass'] else 'FAIL'} (< 30 s)"
        )
        print(json.dumps(out["epoch"], indent=2, default=float))
    s = out["speed"]
    row = (
        f"| {dt.date.today().isoformat()} | {platform.machine()} x{os.cpu_count()} | {s['runs']} | {len(s['forms'])} | "
        f"{s['n_boot']} | {s['rollout_fits']} | {s['wall_s']:.1f} | {s['cpu_s']:.1f} | {s['load']:.1f} | "
        f"{s['hero_err_pct']:+.2f} |"
    )
    if not args.no_readme:
        update_readme(row)


if __name__ == "__main__":
    main()
