"""Benchmark: one Approach-3 (Chinchilla) fit plus 200 bootstrap refits on 250 synthetic runs.

Target: under 30 s on 2 cores. (A naive fit, L-BFGS-B with numerical gradients from each of Epoch
AI's 4,500 grid starts, took ~13 min for a single fit on this machine class; ``--naive N`` times N
such starts and extrapolates.)

    .venv/bin/python benchmarks/bench_fit.py            # prints timing + a markdown row, updates README
    .venv/bin/python benchmarks/bench_fit.py --naive 30 --no-readme

Writes the measured numbers into ``benchmarks/README.md`` under ``## Scaling-law fit speed`` (only
that section is touched; the last 10 rows are kept).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import re
import time
from pathlib import Path

import numpy as np
import pandas as pd

from ladder.reports.fits import lsefit
from ladder.reports.fits.approach3 import fit_chinchilla

E, A, B, ALPHA, BETA = 1.82, 482.0, 2085.0, 0.348, 0.366  # Epoch AI's Chinchilla replication
README = Path(__file__).with_name("README.md")
HEADING = "## Scaling-law fit speed"
HEADER = (
    "| date | machine | runs | bootstrap | fit (s) | bootstrap (s) | total (s) | CPU (s) | load | "
    "E | alpha | beta |\n|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def synthetic(n_sizes: int = 50, mults=(5, 10, 20, 40, 80), noise: float = 0.015, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = np.repeat(np.geomspace(1e7, 1e9, n_sizes), len(mults))
    d = n * np.tile(np.asarray(mults, float), n_sizes)
    loss = (E + A * n**-ALPHA + B * d**-BETA) * np.exp(rng.normal(0, noise, len(n)))
    return pd.DataFrame({"params": n, "tokens": d, "loss": loss})


def timed(fn):
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w0, time.process_time() - c0


@lsefit.single_threaded_blas
def naive(df: pd.DataFrame, n_starts: int) -> float:
    """Seconds per start of the naive procedure (numerical gradient, raw coordinates)."""
    from scipy.optimize import minimize

    logn, logd, logl = np.log(df["params"]), np.log(df["tokens"]), np.log(df["loss"])

    def obj(p):
        a, b, e, al, be = p
        pred = np.logaddexp(np.logaddexp(a - al * logn, b - be * logd), e)
        return lsefit.huber(pred - logl, 1e-3).sum()

    starts = lsefit._epoch_grid(2)[:: max(1, 4500 // n_starts)][:n_starts]
    t = time.perf_counter()
    for s in starts:  # internal order is [e, a, b, alpha, beta]
        minimize(obj, [s[1], s[2], s[0], s[3], s[4]], method="L-BFGS-B")
    return (time.perf_counter() - t) / len(starts)


def update_readme(row: str, command: str, naive_line: str | None = None, path: Path = README) -> None:
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    pattern = re.compile(rf"^{re.escape(HEADING)}\n(.*?)(?=^## |\Z)", re.S | re.M)
    old = pattern.search(text)
    rows = re.findall(r"^\| \d{4}-\d\d-\d\d.*$", old.group(1), re.M) if old else []
    rows = (rows + [row])[-10:]
    if naive_line is None and old:
        kept = re.search(r"^Naive baseline.*$", old.group(1), re.M)
        naive_line = kept.group(0) if kept else None
    section = (
        f"{HEADING}\n\n"
        "One Approach-3 (Chinchilla, Epoch AI's Huber/LSE objective) fit plus 200 bootstrap refits on 250\n"
        "synthetic runs (50 sizes x 5 tokens-per-parameter multipliers, 1.5% noise); target < 30 s on 2 cores.\n"
        f"Measured with `{command}`. \"fit\" is the full-data fit (start selection + optimization),\n"
        "\"bootstrap\" the 200 warm-started refits; CPU is process time; load is the 1-minute load average\n"
        "when the run started (the machine is shared).\n\n"
        + (f"{naive_line}\n\n" if naive_line else "")
        + f"{HEADER}\n" + "\n".join(rows) + "\n\n"
    )
    text = pattern.sub(lambda _: section, text) if old else text.rstrip("\n") + "\n\n" + section
    path.write_text(text.rstrip("\n") + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, default=50)
    ap.add_argument("--n-boot", type=int, default=200)
    ap.add_argument("--naive", type=int, default=0, help="also time N naive starts and extrapolate to 4,500")
    ap.add_argument("--no-readme", action="store_true")
    args = ap.parse_args()

    df = synthetic(args.sizes)
    load = os.getloadavg()[0]
    fit0, t_fit, c_fit = timed(lambda: fit_chinchilla(df, n_boot=0, backtest=None))
    fit, t_all, c_all = timed(lambda: fit_chinchilla(df, n_boot=args.n_boot, backtest=None))
    t_boot = max(0.0, t_all - t_fit)
    machine = f"{platform.machine()} x{os.cpu_count()}"
    print(f"{len(df)} runs, {fit.n_boot} bootstrap refits: fit {t_fit:.2f} s, bootstrap {t_boot:.2f} s, "
          f"total {t_all:.2f} s wall ({c_all:.2f} s CPU), load {load:.1f}")
    print(f"E={fit.E:.3f} [{fit.ci90['E'][0]:.3f}, {fit.ci90['E'][1]:.3f}]  A={fit.A:.0f}  B={fit.B:.0f}  "
          f"alpha={fit.alpha:.3f} [{fit.ci90['alpha'][0]:.3f}, {fit.ci90['alpha'][1]:.3f}]  "
          f"beta={fit.beta:.3f} [{fit.ci90['beta'][0]:.3f}, {fit.ci90['beta'][1]:.3f}]  "
          f"(truth E={E} A={A:.0f} B={B:.0f} alpha={ALPHA} beta={BETA})")
    print("PASS" if t_all < 30 else "FAIL", "(target < 30 s)")
    naive_line = None
    if args.naive:
        per = naive(df, args.naive)
        print(f"naive: {per * 1e3:.0f} ms per start -> {per * 4500 / 60:.1f} min for 4,500 starts (one fit)")
        naive_line = (
            f"Naive baseline ({dt.date.today().isoformat()}, `--naive {args.naive}`): L-BFGS-B with numerical "
            f"gradients from each of Epoch's 4,500 starts, {per * 1e3:.0f} ms per start, i.e. ~{per * 4500 / 60:.0f} min "
            "for one fit without bootstrap (extrapolated)."
        )
    row = (
        f"| {dt.date.today().isoformat()} | {machine} | {len(df)} | {fit.n_boot} | {t_fit:.2f} | {t_boot:.2f} | "
        f"{t_all:.2f} | {c_all:.2f} | {load:.1f} | {fit.E:.3f} | {fit.alpha:.3f} | {fit.beta:.3f} |"
    )
    print(HEADER)
    print(row)
    if not args.no_readme:
        update_readme(row, "python benchmarks/bench_fit.py", naive_line)
        print(f"updated {README}")


if __name__ == "__main__":
    main()
