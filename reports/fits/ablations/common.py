"""What both ablations read per rung: a variant's best configuration (replicates averaged, the other axes
tuned away), the seed-to-seed scatter its replicates show, and when two computes count as matched."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from ladder.layout import jsonable

COMPUTE_MATCH_TOL = 0.01  # relative compute difference below which variants count as matched
OTHER_AXES = ("lr", "batch_tokens", "tie_embeddings", "aspect_ratio", "d_model", "n_layers")
SEED_COLUMNS = ("seed", "axis/seed")
Z90 = 1.6448536269514722  # two-sided 90%


def _seed_column(sub: pd.DataFrame) -> str | None:
    return next((c for c in SEED_COLUMNS if c in sub.columns and sub[c].notna().any()), None)


def best_config(sub: pd.DataFrame, exclude: Sequence[str]) -> dict | None:
    """Replicates averaged per configuration of the other axes, then the configuration with the lowest loss.
    ``ss``/``dof``: the squared deviations of ln loss from each configuration's mean over its replicates (runs
    of one configuration that differ in seed; without a seed column, repeated runs), summed over every
    configuration, for the pooled seed noise."""
    sub = sub[np.isfinite(sub["loss"].to_numpy(dtype=float))]
    if len(sub) == 0:
        return None
    cols = [c for c in OTHER_AXES if c in sub.columns and c not in exclude]
    keys = sub[cols].astype(str).agg("|".join, axis=1) if cols else pd.Series("all", index=sub.index)
    seed_col = _seed_column(sub)
    best, ss, dof = None, 0.0, 0
    for _, g in sub.groupby(keys, sort=False):
        loss = g["loss"].to_numpy(dtype=float)
        f = g["flops"].to_numpy(dtype=float)
        replicates = len(loss) > 1 and (seed_col is None or g[seed_col].nunique() > 1)
        if replicates:
            ll = np.log(loss)
            ss += float(((ll - ll.mean()) ** 2).sum())
            dof += len(ll) - 1
        row = {
            "loss": float(np.exp(np.mean(np.log(loss)))),
            "n": int(len(loss)),
            "flops": float(np.exp(np.mean(np.log(f)))),
            "params": float(g["params"].median()),
            "config": {c: jsonable(g[c].iloc[0]) for c in cols},
        }
        if best is None or row["loss"] < best["loss"]:
            best = row
    best["n_configs"] = int(keys.nunique())
    best["ss"], best["dof"] = ss, dof
    return best


def pooled_sd(parts: Iterable[dict | None]) -> tuple[float, int]:
    """The pooled seed-to-seed sd of ln loss over ``best_config`` results, and its degrees of freedom."""
    ss = dof = 0
    for p in parts:
        if p is not None:
            ss += p["ss"]
            dof += p["dof"]
    return (math.sqrt(ss / dof) if dof else 0.0), int(dof)
