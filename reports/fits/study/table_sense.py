"""What a runs table from elsewhere (``ladder fit --runs``) may hold that no ladder does, said as warnings before the
fit: a run far worse than a smaller, shorter one (diverged or unfinished, with no status to say so), tokens per
parameter no ladder trains at (params and tokens swapped, or counted in millions), a batch column that reads as
sequences where the fit reads tokens, a flops column in another unit than FLOPs per run, and runs at one params x
tokens point whose losses differ in a table with no seed column (replicates, or another schedule mixed in).
ladder's own studies never get these: its trainer marks a diverged run, and it writes every count itself."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ladder.model.config import format_count, format_multiple
from ladder.reports.fits.runs import group_labels

WORSE = 0.10  # a run this much above the loss of a run with no more params and no more tokens is no rung of the law
SAME = 0.05  # params or tokens within 5% count as the same (the fit's rung tolerance)
FEWEST_TOKENS_PER_PARAM = 1.0  # below this median tokens/param: params and tokens swapped, or tokens a step count
MOST_TOKENS_PER_PARAM = 1e5  # above: params counted in millions or thousands (Chinchilla is 20, SmolLM2 ~1.5e4)
POINT_RTOL = 1e-3  # params and tokens within this of each other are one point (a run given twice, or replicates)
FLOPS_FACTOR = 10.0  # a flops column this far from 6ND for the median run is in another unit (attention at long
# context adds ~3x at most to a small model's 6ND)
MOST_STEPS = 1e7  # tokens / batch beyond this for the median run: the batch column counts sequences, not tokens


def _few(items: list[str], limit: int = 3) -> str:
    return "; ".join(items[:limit]) + (f"; and {len(items) - limit} more" if len(items) > limit else "")


def worse_than_smaller(law_df: pd.DataFrame) -> str | None:
    """The runs (of one variant) whose loss is more than :data:`WORSE` above a run with no more params and no more
    tokens: a larger or longer run never scores that much worse on one recipe, so it diverged, stopped early or
    is mislabelled, and the laws fit it all the same."""
    found: list[str] = []
    groups = law_df.groupby("_variant", sort=False) if "_variant" in law_df.columns else [(None, law_df)]
    for _, g in groups:
        n, d, loss = (g[c].to_numpy(float) for c in ("params", "tokens", "loss"))
        for i in range(len(g)):
            smaller = (n <= n[i] * (1 + SAME)) & (d <= d[i] * (1 + SAME))
            smaller[i] = False
            if not smaller.any():
                continue
            j = np.flatnonzero(smaller)[np.argmin(loss[smaller])]
            if loss[i] > loss[j] * (1 + WORSE):
                found.append(
                    f"{g.index[i]} ({format_count(n[i])} params, {format_count(d[i])} tokens) scored {loss[i]:.4g}, "
                    f"{100 * (loss[i] / loss[j] - 1):.0f}% above {g.index[j]}'s {loss[j]:.4g} "
                    f"({format_count(n[j])} params, {format_count(d[j])} tokens)"
                )
    if not found:
        return None
    return (
        f"{len(found)} run(s) score a loss more than {100 * WORSE:.0f}% above a run with no more params and no more "
        f"tokens: {_few(found)}. A larger or longer run does not score worse on one recipe: diverged, unfinished or "
        "mislabelled? They are fitted all the same; a status column that marks them not done (diverged, crashed) "
        "leaves them out"
    )


def repeats_without_seed(law_df: pd.DataFrame) -> str | None:
    """Runs (of one variant) at one params x tokens point whose losses differ, in a table with no seed column: the
    fit takes each for a run of its own, and their spread sets no noise floor. Seed replicates want a seed column;
    runs of another schedule mixed in (an isoFLOP table's loss read part-way through a longer run, beside runs whose
    schedule ended at their budget) want a variant column, or leaving out. A published ladder converted by hand
    mixes them silently."""
    if "seed" in law_df.columns or law_df.empty:
        return None
    # one point: params and tokens within POINT_RTOL (a rung's 5% put Epoch's distinct 22.3B- and 23.2B-token runs of
    # one size together, as if one run twice)
    point = [group_labels(law_df[c].to_numpy(float), POINT_RTOL) for c in ("params", "tokens")]
    keys = [*point, law_df["_variant"].to_numpy()] if "_variant" in law_df.columns else point
    found: list[tuple[float, str]] = []
    n_runs = 0
    for _, g in law_df.groupby(keys, sort=False):
        loss = g["loss"].to_numpy(float)
        if len(g) < 2 or loss.min() == loss.max():
            continue
        n_runs += len(g)
        lo, hi = int(np.argmin(loss)), int(np.argmax(loss))
        found.append(
            (
                loss[hi] / loss[lo] - 1,
                f"{g.index[lo]} and {g.index[hi]} ({format_count(float(g['params'].median()))} params, "
                f"{format_count(float(g['tokens'].median()))} tokens) scored {loss[lo]:.4g} and {loss[hi]:.4g}",
            )
        )
    if not found:
        return None
    found.sort(key=lambda f: -f[0])
    return (
        f"{len(found)} params x tokens point(s) hold {n_runs} runs whose losses differ (by up to "
        f"{100 * found[0][0]:.1f}%: {found[0][1]}), and the table has no seed column: the fit takes each for a "
        "run of its own, not a replicate. Seed replicates? A seed column says so (their spread sets the intervals' "
        "noise floor). Runs of another recipe or schedule mixed in (a loss read part-way through a longer run is "
        "no final loss)? A variant column fits them apart"
    )


def odd_tokens_per_param(df: pd.DataFrame) -> str | None:
    """A median tokens/param no ladder trains at: below :data:`FEWEST_TOKENS_PER_PARAM` (the columns swapped, tokens
    a step count or in millions) or above :data:`MOST_TOKENS_PER_PARAM` (params in millions, or FLOPs as tokens)."""
    ratio = float(np.median(df["tokens"].to_numpy(float) / df["params"].to_numpy(float)))
    said = (
        f"the median run trained on {format_multiple(ratio, '')} tokens per parameter "
        f"(params {format_count(df['params'].min())} to {format_count(df['params'].max())}, tokens "
        f"{format_count(df['tokens'].min())} to {format_count(df['tokens'].max())})"
    )
    if ratio < FEWEST_TOKENS_PER_PARAM:
        return (
            f"{said}: fewer tokens than parameters; are the params and tokens columns swapped, is tokens a step "
            "count, or are tokens written in millions or billions? Both are plain counts: parameters of the model, "
            "tokens it trained on"
        )
    if ratio > MOST_TOKENS_PER_PARAM:
        return (
            f"{said}: far more than any ladder trains; are params written in millions or thousands, or does the "
            "tokens column hold FLOPs (tokens = flops / (6 x params))? Give plain counts (1.2e9 or 1.2B)"
        )
    return None


def flops_not_6nd(df: pd.DataFrame) -> str | None:
    """A flops column more than :data:`FLOPS_FACTOR` times off 6 x params x tokens for the median run: another unit
    (PFLOPs, GFLOPs) or FLOPs per token. The IsoFLOP budgets and N_opt(C) are fitted in the column's units, while
    the loss laws' compute and every distance are 6ND: fit.json's budgets said 12.5 FLOPs of runs of 1.25e16."""
    if "flops" not in df.columns:
        return None
    flops = pd.to_numeric(df["flops"], errors="coerce").to_numpy(float)
    six_nd = 6.0 * df["params"].to_numpy(float) * df["tokens"].to_numpy(float)
    good = np.isfinite(flops) & (flops > 0) & np.isfinite(six_nd) & (six_nd > 0)
    if not good.any():
        return None
    ratios = flops[good] / six_nd[good]
    ratio = float(np.median(ratios))
    if 1 / FLOPS_FACTOR <= ratio <= FLOPS_FACTOR:
        return None
    i = int(np.argmin(np.abs(np.log(ratios / ratio))))  # the median run, as an example
    return (
        f"the flops column is {format_multiple(ratio, '')} times 6 x params x tokens for the median run (e.g. "
        f"{format_count(float(flops[good][i]))} where 6ND is {format_count(float(six_nd[good][i]))}): "
        "is it in another unit (PFLOPs, GFLOPs) or per token? Give FLOPs per run, or leave the column out (FLOPs are "
        "then 6 x params x tokens); the IsoFLOP budgets and N_opt(C) are fitted in its units, the loss laws on 6ND"
    )


def batch_as_sequences(df: pd.DataFrame) -> str | None:
    """A batch column that reads as sequences: the fit reads it as tokens per batch (its B* is in tokens), and the
    median run would then take more than :data:`MOST_STEPS` steps."""
    if "batch_tokens" not in df.columns:
        return None
    batch = pd.to_numeric(df["batch_tokens"], errors="coerce").to_numpy(float)
    good = np.isfinite(batch) & (batch > 0)
    if not good.any():
        return None
    steps = float(np.median(df["tokens"].to_numpy(float)[good] / batch[good]))
    if steps <= MOST_STEPS:
        return None
    return (
        f"the batch column is read as tokens per batch (batch_size is batch_tokens' alias), so the median run took "
        f"{format_count(steps)} steps, far more than any run trains: does it count sequences? Give batch_tokens, "
        "sequences x sequence length (the hyperparameter laws' B* is in tokens)"
    )
