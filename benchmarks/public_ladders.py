"""Benchmark: the loss forecast on published ladders, by distance, beside a plain Approach 3 fit.

Reads the public ladders of ``--data`` (default ``../shared/ladders``; see that folder's README and each
SOURCE.txt). Nothing of them is shipped: most carry no licence, so the benchmark reads them where they lie.

The protocol, fixed per kind of ladder (only final losses of runs whose schedule ended at their budget):

- **IsoFLOP ladders** (Porian et al. 2024, the ``decay-chinchilla`` configurations: a cosine decay sized to each
  budget; Beck et al. 2025's xLSTM/Llama sweeps, a cosine per run): the budgets are the FLOP groups (Porian's
  ``flops``, Beck's ``isoflop_group`` at their median ``6ND``). For each distance ``k`` in 4x, 16x and 32x, the
  engine is fitted on the budgets at least ``k`` below the top budget and forecasts the top budget's runs
  near its optimum (its ``NEAR_OPT`` lowest losses). The engine sees params, tokens and loss alone, and groups
  budgets by ``6ND``; ``--budgets`` gives it each run's budget as ``flops``, as a ``flops`` column does in
  ``ladder fit --runs``. A split that leaves fewer than 2 budgets is skipped (one
  isoFLOP curve cannot tell the loss's scaling in compute from its shape at one budget). Porian's
  ``decay-kaplan`` and ``decay-const`` rows are read off longer runs and are left out.
- **Several budgets per size** (Li et al. 2025, the best learning rate of each (size, tokens)): fitted on the
  sizes at least 2x, 4x and 8x below the largest; every run of the larger sizes is forecast.
- **Epoch's Chinchilla extraction**: the 5 highest losses dropped (as Epoch does), fitted below 1e20 FLOPs,
  every run above forecast.

The forecast of a split: ``forecast_loss`` with the split's largest-compute target as the hero and the others
as ``predict`` points. The baseline: the plain Approach 3 fit (Chinchilla's ``E + A/N^a + B/D^b``, Huber on log
loss, a grid of starts: the engine's ``chinchilla`` form alone) with its bootstrap's 90% prediction interval.

Distance of a forecast: its ``6ND`` over the largest ``6ND`` fitted (compute), its parameters over the largest
fitted (parameters). Reported per ladder and pooled, by compute band (``0-1x``, ``1-4x``, ``4-16x``,
``16-64x``, ``64x+``; and ``16x+``, the two far bands together) and parameter band (``0-1x``, ``1-2x``, ``2-4x``,
``4-8x``, ``8x+``): median and worst ``|error|``, mean signed error, coverage of the 90% interval and the median
half-width, each in percent of the forecast.

    .venv/bin/python benchmarks/public_ladders.py [--data DIR] [--json] [--n-boot 100] [--only NAME] [--budgets]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ladder.reports.fits.engine import fit
from ladder.reports.fits.loss import forecast_loss
from ladder.reports.fits.loss.loss_forecast import PUBLIC_RATE
from ladder.reports.fits.loss.loss_forms import LOSS_FORMS
from ladder.reports.fits.loss.track_record import EDGES, band_label
from ladder.reports.fits.runs import Runs

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "ladders"
ISOFLOP_CUTS = (4.0, 16.0, 32.0)
SIZE_CUTS = (2.0, 4.0, 8.0)
NEAR_OPT = 3  # the top budget's runs forecast: its lowest losses
EPOCH_CUT = 1e20
MIN_BUDGETS = 2
COMPUTE_BANDS = EDGES  # the bands the track record uses (reports/fits/loss/track_record.py)
PARAM_BANDS = ((0.0, 1.0), (1.0, 2.0), (2.0, 4.0), (4.0, 8.0), (8.0, math.inf))
FAR = 16.0


@dataclass
class Ladder:
    name: str
    kind: str  # isoflop | sizes | epoch
    runs: pd.DataFrame  # params, tokens, loss, flops (6ND), budget (isoflop only)
    source: str


@dataclass
class Split:
    label: str
    train: pd.DataFrame
    targets: pd.DataFrame


def _frame(params, tokens, loss, **extra) -> pd.DataFrame:
    df = pd.DataFrame(
        {
            "params": np.asarray(params, float),
            "tokens": np.asarray(tokens, float),
            "loss": np.asarray(loss, float),
            **extra,
        }
    )
    df = df[np.isfinite(df[["params", "tokens", "loss"]]).all(axis=1) & (df["loss"] > 0)].copy()
    df["flops"] = 6.0 * df["params"] * df["tokens"]
    return df.reset_index(drop=True)


def load(data: Path) -> list[Ladder]:
    """Every ladder of the folder that the protocol can use (a missing folder is skipped with a word)."""
    out: list[Ladder] = []
    f = data / "porian2024_rsld" / "runs.csv"
    if f.is_file():
        df = pd.read_csv(f)
        for fam, g in df[df["decay"] == "chinchilla"].groupby("family"):
            out.append(
                Ladder(
                    f"porian/{fam}",
                    "isoflop",
                    _frame(g["params"], g["tokens"], g["loss"], budget=g["flops"].to_numpy(float)),
                    "Porian et al. 2024 (MIT)",
                )
            )
    f = data / "xlstm_beck2025" / "runs.csv"
    if f.is_file():
        df = pd.read_csv(f)
        for fam, g in df.groupby("family"):
            budget = g.groupby("isoflop_group")["flops_6ND"].transform("median")
            out.append(
                Ladder(
                    f"xlstm/{fam}",
                    "isoflop",
                    _frame(g["params"], g["tokens"], g["loss"], budget=budget.to_numpy(float)),
                    "Beck et al. 2025 (no licence: benchmark only)",
                )
            )
    f = data / "misfitting_li2025" / "runs_best_lr.csv"
    if f.is_file():
        df = pd.read_csv(f)
        for fam, g in df.groupby("family"):
            out.append(
                Ladder(
                    f"li2025/{fam}",
                    "sizes",
                    _frame(g["params"], g["tokens"], g["loss"]),
                    "Li et al. 2025 (no licence: benchmark only)",
                )
            )
    f = data / "epoch_chinchilla" / "svg_extracted_data.csv"
    if f.is_file():
        raw = pd.read_csv(f)
        df = raw.sort_values("loss").iloc[:-5]  # Epoch drops the 5 highest-loss points
        n, c = df["Model Size"].to_numpy(float), df["Training FLOP"].to_numpy(float)
        out.append(
            Ladder(
                "epoch/chinchilla",
                "epoch",
                _frame(n, c / (6 * n), df["loss"]),
                "Hoffmann et al. 2022 via Epoch AI (no licence: benchmark only)",
            )
        )
    return out


def splits(ladder: Ladder) -> list[Split]:
    df = ladder.runs
    out = []
    if ladder.kind == "isoflop":
        budgets = np.unique(df["budget"])
        top = budgets.max()
        targets = df[df["budget"] == top].nsmallest(NEAR_OPT, "loss")
        for cut in ISOFLOP_CUTS:
            keep = budgets[budgets <= top / cut * (1 + 1e-9)]
            if len(keep) < MIN_BUDGETS:
                continue
            out.append(Split(f"budgets <= top/{cut:g}", df[df["budget"].isin(keep)], targets))
    elif ladder.kind == "sizes":
        top = df["params"].max()
        for cut in SIZE_CUTS:
            train = df[df["params"] <= top / cut * (1 + 1e-9)]
            if train["params"].nunique() < 3:
                continue
            out.append(Split(f"sizes <= largest/{cut:g}", train, df[df["params"] > train["params"].max()]))
    else:
        out.append(Split(f"compute < {EPOCH_CUT:.0e}", df[df["flops"] < EPOCH_CUT], df[df["flops"] >= EPOCH_CUT]))
    return out


def _rows(split: Split, loss, lo, hi) -> list[dict]:
    t = split.targets
    cmax, nmax = split.train["flops"].max(), split.train["params"].max()
    rows = []
    for (_, r), p, a, b in zip(t.iterrows(), loss, lo, hi):
        if p is None or not np.isfinite(p):
            continue
        rows.append(
            {
                "params": float(r["params"]),
                "tokens": float(r["tokens"]),
                "actual": float(r["loss"]),
                "forecast": float(p),
                "lo": float(a),
                "hi": float(b),
                "err_pct": 100.0 * (p - r["loss"]) / r["loss"],
                "inside": bool(a <= r["loss"] <= b),
                "half_width_pct": 100.0 * (b - a) / 2.0 / p,
                "compute_x": float(r["flops"] / cmax),
                "params_x": float(r["params"] / nmax),
            }
        )
    return rows


def engine_forecast(split: Split, n_boot: int, seed: int = 0, budgets: bool = False) -> tuple[list[dict], dict]:
    tr, t = split.train, split.targets
    # --budgets: an isoFLOP ladder's stated budgets set the engine's compute levels, as a flops column of each run's
    # budget does in `ladder fit --runs`; by default the engine sees what every table has, params, tokens and loss
    flops = tr["budget"].to_numpy(float) if budgets and "budget" in tr.columns else None
    data = Runs(tr["params"], tr["tokens"], tr["loss"], [str(i) for i in tr.index], flops=flops)
    hero = int(np.argmax(t["flops"].to_numpy()))
    order = [hero] + [i for i in range(len(t)) if i != hero]
    pts = [(float(t["params"].iloc[i]), float(t["tokens"].iloc[i])) for i in order]
    fc = forecast_loss(data, *pts[0], predict=pts[1:], n_boot=n_boot, seed=seed)
    by = {}
    for i, p in zip(order, fc.points):
        by[i] = p
    loss = [by[i].loss for i in range(len(t))]
    lo = [by[i].lo for i in range(len(t))]
    hi = [by[i].hi for i in range(len(t))]
    rows = _rows(split, loss, lo, hi)
    for i, r in zip(range(len(t)), rows):
        r["beyond_reach"] = bool(by[i].beyond_reach)
        r["beyond_tested"] = bool(by[i].beyond_tested)
        r["distance_x"] = by[i].distance.get("distance_x")
    return rows, {
        "weights": fc.weights,
        "calibration_factor": fc.factor,
        "drift": fc.drift,
        "far_error": fc.far_error,
        "reach": fc.reach,
    }


def baseline_forecast(split: Split, n_boot: int, seed: int = 0) -> list[dict]:
    form = LOSS_FORMS["chinchilla"]
    tr, t = split.train, split.targets
    law = fit(form.engine, form.raw(tr["params"], tr["tokens"]), np.log(tr["loss"]), n_boot=n_boot, seed=seed)
    point, lo, hi = law.interval(form.raw(t["params"], t["tokens"]), seed=seed)
    return _rows(split, np.exp(point), np.exp(lo), np.exp(hi))


def summarize(rows: list[dict], key: str = "compute_x", bands=COMPUTE_BANDS, far: bool = True) -> list[dict]:
    groups = [(band_label(a, b), [r for r in rows if a <= r[key] < b]) for a, b in bands]
    if far:
        groups.append((f"{FAR:g}x+", [r for r in rows if r[key] >= FAR]))
    groups.append(("all", rows))
    out = []
    for label, rs in groups:
        if not rs:
            out.append(
                {
                    "band": label,
                    "n": 0,
                    "median_abs_err_pct": None,
                    "worst_abs_err_pct": None,
                    "mean_err_pct": None,
                    "coverage": None,
                    "median_half_width_pct": None,
                }
            )
            continue
        e = np.array([r["err_pct"] for r in rs])
        out.append(
            {
                "band": label,
                "n": len(rs),
                "median_abs_err_pct": float(np.median(np.abs(e))),
                "worst_abs_err_pct": float(np.max(np.abs(e))),
                "mean_err_pct": float(np.mean(e)),
                "coverage": float(np.mean([r["inside"] for r in rs])),
                "median_half_width_pct": float(np.median([r["half_width_pct"] for r in rs])),
            }
        )
    return out


def _bands(rows: dict[str, list[dict]]) -> dict:
    return {
        "bands": {k: summarize(v) for k, v in rows.items()},
        "bands_params": {k: summarize(v, "params_x", PARAM_BANDS, far=False) for k, v in rows.items()},
    }


def error_rate(rows: list[dict]) -> dict:
    """The engine's median |log(actual / forecast)| per unit of log distance over one ladder's forecasts at least
    2x beyond their fit (nearer ones say more about noise than about drift): what ``PUBLIC_RATE`` is made of."""
    rates = [
        abs(math.log(r["actual"] / r["forecast"])) / math.log(r["distance_x"])
        for r in rows
        if r.get("distance_x") and r["distance_x"] >= 2.0 and r["actual"] > 0 and r["forecast"] > 0
    ]
    return {"n": len(rates), "median": float(np.median(rates)) if rates else None}


def run(data: Path, n_boot: int, only: str | None = None, progress=None, budgets: bool = False) -> dict:
    ladders = [lad for lad in load(data) if only is None or only in lad.name]
    if not ladders:
        raise SystemExit(f"{data}: no published ladder found (see ../shared/ladders/README.md)")
    out = {"data": str(data), "n_boot": n_boot, "budgets": budgets, "ladders": []}
    pooled = {"ladder": [], "baseline": []}
    for lad in ladders:
        entry = {"name": lad.name, "kind": lad.kind, "source": lad.source, "n_runs": len(lad.runs), "splits": []}
        rows = {"ladder": [], "baseline": []}
        for sp in splits(lad):
            t0 = time.perf_counter()
            eng, info = engine_forecast(sp, n_boot, budgets=budgets)
            base = baseline_forecast(sp, n_boot)
            for r in eng:
                r["split"] = sp.label
            for r in base:
                r["split"] = sp.label
            rows["ladder"] += eng
            rows["baseline"] += base
            entry["splits"].append(
                {
                    "label": sp.label,
                    "n_train": len(sp.train),
                    "n_targets": len(sp.targets),
                    "seconds": time.perf_counter() - t0,
                    **info,
                    "ladder": eng,
                    "baseline": base,
                }
            )
            if progress:
                progress(
                    f"{lad.name}: {sp.label}: {len(sp.train)} runs fitted, {len(eng)} forecast in "
                    f"{time.perf_counter() - t0:.0f} s"
                )
        entry.update(_bands(rows))
        entry["error_rate"] = error_rate(rows["ladder"])
        out["ladders"].append(entry)
        for k in pooled:
            pooled[k] += [dict(r, ladder=lad.name) for r in rows[k]]
    out["pooled"] = _bands(pooled)
    medians = [lad["error_rate"]["median"] for lad in out["ladders"] if lad["error_rate"]["median"] is not None]
    # the median over ladders of each ladder's median: one ladder of a hundred forecasts does not outvote five
    out["pooled"]["error_rate"] = {
        "ladders": len(medians),
        "median_over_ladders": float(np.median(medians)) if medians else None,
        "public_rate": PUBLIC_RATE,
    }
    return out


def _fmt(v, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def table(name: str, bands: dict) -> str:
    lines = [
        f"{name}",
        "  band      n | ladder: med |err|  worst  mean   cover  half | plain: med |err|  worst  mean   cover  half",
    ]
    for a, b in zip(bands["ladder"], bands["baseline"]):
        if not a["n"]:
            continue
        lines.append(
            f"  {a['band']:<8} {a['n']:>3} | {_fmt(a['median_abs_err_pct'], '10.2f')}% {_fmt(a['worst_abs_err_pct'], '5.2f')}%"
            f" {_fmt(a['mean_err_pct'], '+5.2f')}% {_fmt(a['coverage'], '5.0%')} {_fmt(a['median_half_width_pct'], '4.1f')}%"
            f" | {_fmt(b['median_abs_err_pct'], '9.2f')}% {_fmt(b['worst_abs_err_pct'], '5.2f')}%"
            f" {_fmt(b['mean_err_pct'], '+5.2f')}% {_fmt(b['coverage'], '5.0%')} {_fmt(b['median_half_width_pct'], '4.1f')}%"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the published ladders (default: %(default)s)")
    ap.add_argument("--json", action="store_true", help="print one JSON object (ladders, pooled)")
    ap.add_argument("--n-boot", type=int, default=100, help="bootstrap refits per form (default: %(default)s)")
    ap.add_argument("--only", default=None, help="only the ladders whose name holds this text")
    ap.add_argument("--save", type=Path, default=None, help="also write the JSON object to this file")
    ap.add_argument(
        "--budgets",
        action="store_true",
        help="give the engine each isoFLOP run's budget as its flops (as fit --runs with a flops column does)",
    )
    args = ap.parse_args()
    if not args.data.is_dir():
        raise SystemExit(f"--data {args.data}: no such folder (the published ladders live in ../shared/ladders)")
    t0 = time.perf_counter()
    say = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    res = run(args.data, args.n_boot, args.only, progress=say, budgets=args.budgets)
    res["seconds"] = time.perf_counter() - t0
    if args.save:
        args.save.write_text(json.dumps(res, indent=1, default=float))
    if args.json:
        print(json.dumps(res, default=float))
        return
    for lad in res["ladders"]:
        print(table(f"{lad['name']} ({lad['n_runs']} runs; {lad['source']})", lad["bands"]))
    print(table("POOLED, by compute multiple", res["pooled"]["bands"]))
    print(table("POOLED, by parameter multiple", res["pooled"]["bands_params"]))
    rate = res["pooled"]["error_rate"]
    per = ", ".join(
        f"{lad['name']} {lad['error_rate']['median']:.4f}" for lad in res["ladders"] if lad["error_rate"]["median"]
    )
    print(
        f"error per unit of log distance (forecasts >= 2x out), median over {rate['ladders']} ladders: "
        f"{_fmt(rate['median_over_ladders'], '.4f')} (the engine's PUBLIC_RATE floor: {rate['public_rate']}); {per}"
    )
    print(f"({res['seconds']:.0f} s)")


if __name__ == "__main__":
    main()
