"""The rungs of a sweep or ablation (``Scale``): runs grouped by the ``scale`` column, or by compute."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ladder.errors import FitError

REQUIRED = ("params", "tokens", "flops", "loss")


@dataclass(frozen=True)
class Scale:
    """One rung: its label and representative numbers (geometric mean of compute, median N and D)."""

    label: str
    flops: float
    params: float
    tokens: float
    index: pd.Index  # rows of the frame in this rung


def check_columns(df: pd.DataFrame, needed: Sequence[str], what: str) -> None:
    if not isinstance(df, pd.DataFrame):
        raise FitError(f"{what}: expected a pandas DataFrame of runs, got {type(df).__name__}")
    missing = [c for c in needed if c not in df.columns]
    if missing:
        raise FitError(f"{what}: the runs table lacks column(s) {', '.join(missing)}")
    if len(df) == 0:
        raise FitError(f"{what}: the runs table is empty")


def group_scales(df: pd.DataFrame, *, tol: float = 0.10, by: Sequence[str] | None = None) -> list[Scale]:
    """Rungs of the ladder, smallest compute first. By the ``scale`` column when present; else by the
    columns ``by`` when given and present; else runs whose compute is within ``tol`` of the smallest of a
    group share a rung."""
    if not df.index.is_unique:
        raise FitError("runs table: row labels repeat (reset_index() a concatenated table)")
    if "scale" in df.columns and df["scale"].notna().all():
        keys = df["scale"].astype(str)
    elif by and all(c in df.columns for c in by):
        keys = df[list(by)].astype(str).agg("/".join, axis=1)
    else:
        order = np.argsort(df["flops"].to_numpy(dtype=float), kind="stable")
        flops = df["flops"].to_numpy(dtype=float)
        labels = np.empty(len(df), dtype=object)
        anchor, group = None, -1
        for i in order:
            if anchor is None or flops[i] > anchor * (1 + tol):
                anchor, group = flops[i], group + 1
            labels[i] = group
        keys = pd.Series(labels, index=df.index)
        names = {}
        for g in pd.unique(keys):
            f = df.loc[keys == g, "flops"].to_numpy(dtype=float)
            names[g] = f"C={float(np.exp(np.mean(np.log(f)))):.3g}"
        keys = keys.map(names)
    scales = []
    for key in pd.unique(keys):
        idx = df.index[keys == key]
        sub = df.loc[idx]
        f = sub["flops"].to_numpy(dtype=float)
        f = f[np.isfinite(f) & (f > 0)]
        flops = float(np.exp(np.mean(np.log(f)))) if len(f) else math.nan
        scales.append(
            Scale(
                label=str(key),
                flops=flops,
                params=float(sub["params"].median()),
                tokens=float(sub["tokens"].median()),
                index=idx,
            )
        )
    scales.sort(key=lambda s: s.flops if math.isfinite(s.flops) else math.inf)
    return scales
