"""What both ablations read per rung: a variant's best configuration (replicates averaged, the other axes
tuned away), and when two computes count as matched."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from ladder.layout import jsonable

COMPUTE_MATCH_TOL = 0.01  # relative compute difference below which variants count as matched
OTHER_AXES = ("lr", "batch_tokens", "tie_embeddings", "aspect_ratio", "d_model", "n_layers")


def best_config(sub: pd.DataFrame, exclude: Sequence[str]) -> dict | None:
    """Replicates averaged per configuration of the other axes, then the configuration with the lowest loss."""
    sub = sub[np.isfinite(sub["loss"].to_numpy(dtype=float))]
    if len(sub) == 0:
        return None
    cols = [c for c in OTHER_AXES if c in sub.columns and c not in exclude]
    keys = sub[cols].astype(str).agg("|".join, axis=1) if cols else pd.Series("all", index=sub.index)
    best = None
    for _, g in sub.groupby(keys, sort=False):
        loss = g["loss"].to_numpy(dtype=float)
        f = g["flops"].to_numpy(dtype=float)
        row = {
            "loss": float(loss.mean()),
            "loss_std": float(loss.std(ddof=1)) if len(loss) > 1 else None,
            "n": int(len(loss)),
            "flops": float(np.exp(np.mean(np.log(f)))),
            "params": float(g["params"].median()),
            "config": {c: jsonable(g[c].iloc[0]) for c in cols},
        }
        if best is None or row["loss"] < best["loss"]:
            best = row
    best["n_configs"] = int(keys.nunique())
    return best
