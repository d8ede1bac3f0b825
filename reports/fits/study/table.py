"""The runs table of a study fit: checking it, which runs are excluded and why, the rung and law-variant of every
run, and the tuned configuration of each rung that the loss laws use. A file of runs is read by
:mod:`ladder.reports.fits.study.runs_file`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ladder.errors import FitError
from ladder.layout import jsonable
from ladder.model.config import format_count
from ladder.reports.fits.runs import group_budgets, tie_kind
from ladder.reports.fits.study.runs_file import ADDED_COLUMNS, NUMERIC
from ladder.studies.spec import StudySpec

REQUIRED = ("params", "tokens", "loss")
KEEP_STATUS = {"done", "ok", "completed", "complete", "success", "succeeded", "finished"}
TUNING_AXES = ("lr", "lr_multipliers", "batch_tokens", "batch_multipliers", "aspect_ratio")
VARIANT_AXES = ("tie_embeddings",)
REPLICATE_AXES = ("seed",)  # repeats of one configuration: the same rung, not a rung of their own
RUNG_RTOL = 0.05  # runs whose params and tokens agree within 5% share a rung (tables without axis columns)
HERO_REASON = "the hero run (scored by `ladder forecast score`, not fitted)"

NO_VARIANT = "(no variant)"  # the variant of a --runs row whose variant cell is empty


def _tokens_hint(missing: list[str], columns: list[str]) -> str:
    """A table of params, FLOPs and loss (Chinchilla's as Epoch AI extracted it) lacks only the tokens, which the
    fit does not derive: the FLOPs may count more than 6ND, and D = C / 6N would then be wrong in silence."""
    if missing != ["tokens"] or "flops" not in columns:
        return ""
    return " (with FLOPs counted as 6ND, tokens = flops / (6 x params): add that column)"


def _separator_hint(columns: list[str]) -> str:
    """A hint when a column name holds the names of several columns joined by another separator (a CSV
    written with ';', tab or '|' is read as one column named 'params;tokens;loss')."""
    for sep, name in ((";", "';'"), ("\t", "tab"), ("|", "'|'")):
        if any(sep in c and any(r in c.split(sep) for r in REQUIRED) for c in columns):
            return f" (is the file {name}-separated? ladder reads a comma-separated CSV: write it with ',')"
    if any("," in c and any(r in c.split(",") for r in REQUIRED) for c in columns):
        return " (is the file comma-separated? a .tsv file is read tab-separated: name it .csv)"
    if any("." in c for c in columns):
        return " (nested keys, as in a W&B export: map them with --columns, e.g. params=config.n_params,...)"
    lower = {c.strip().lower(): c for c in columns}
    near = [f"{lower[r]!r} to {r}" for r in REQUIRED if r not in columns and r in lower]
    if near:
        return (
            f" (names are read as written: rename {', '.join(near)}, or map them with --columns "
            + ",".join(f"{r}={lower[r].strip()}" for r in REQUIRED if r in lower)
            + ")"
        )
    return ""


def _columns_hint(missing: list[str]) -> str:
    """The way to read a table whose columns bear their own names (a published ladder's N, D, eval/loss), which
    the refusal listed without a word of how to read them."""
    return f" (rename the columns, or map the file's own with --columns {','.join(f'{r}=COLUMN' for r in missing)})"


def prepare(runs: Any) -> pd.DataFrame:
    """The runs as a checked DataFrame: required columns, numeric columns as float, run ids as the index."""
    if isinstance(runs, pd.DataFrame):
        df = runs.copy()
    elif isinstance(runs, dict):
        df = pd.DataFrame(runs)
    else:
        raise FitError(f"fit: runs must be a pandas DataFrame (or a mapping of columns), got {type(runs).__name__}")
    df.columns = [str(c) for c in df.columns]
    if "batch_size" in df.columns:
        if "batch_tokens" in df.columns:
            raise FitError(
                "fit: the runs table has both batch_size and batch_tokens; batch_size is an alias, keep one (or "
                "pick the one in tokens per batch with --columns batch_tokens=COLUMN)"
            )
        df = df.rename(columns={"batch_size": "batch_tokens"})
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        added = set(df.attrs.get(ADDED_COLUMNS) or [])
        own = [c for c in df.columns if c not in added]
        have = ", ".join(own) or "none"
        raise FitError(
            f"fit: the runs table lacks column(s) {', '.join(missing)}; it needs params, tokens and loss "
            f"(optional: flops, lr, batch_tokens or batch_size, variant, status); it has {have}"
            + (_separator_hint(own) + _tokens_hint(missing, own) or _columns_hint(missing))
        )
    if len(df) == 0:
        raise FitError("fit: the runs table has no rows")
    for col in NUMERIC:
        if col in df.columns:
            try:
                df[col] = pd.to_numeric(df[col], errors="raise").astype(float)
            except (TypeError, ValueError) as exc:
                raise FitError(f"fit: column {col} is not numeric ({exc})") from None
    if "run_id" in df.columns and df["run_id"].notna().all() and df["run_id"].is_unique:
        df.index = pd.Index(df["run_id"].astype(str), name="run")
    else:
        df.index = pd.Index([f"row {i}" for i in range(len(df))], name="run")
    return df


def content_hash(runs: Any) -> str:
    """A hash of a results table's content (columns sorted, numbers written in full), so that a fit, a
    report or a frozen forecast can tell whether the table it was made from has changed since."""
    import hashlib

    df = runs if isinstance(runs, pd.DataFrame) else pd.DataFrame(runs)
    df = df.reindex(sorted(map(str, df.columns)), axis=1)
    text = df.to_csv(index=False, float_format="%.17g")
    return hashlib.sha256(text.encode()).hexdigest()


def is_hero(df: pd.DataFrame) -> np.ndarray:
    """Which rows are hero runs (``role == "hero"``, planned by ``ladder hero``). A forecast checked against a run
    it was fitted on checks nothing, so the fits never use them: they are scored against the frozen forecast."""
    if "role" not in df.columns:
        return np.zeros(len(df), dtype=bool)
    return (df["role"].astype(str).str.strip().str.lower() == "hero").to_numpy()


def results_hash(runs: Any) -> str:
    """:func:`content_hash` of the rows a fit's laws are fitted on (the finished runs but the hero runs'), without
    the columns that are empty in all of them: the hero's own row (planned, then training, then done), the columns
    only it fills, and runs that are planned, training or failed never make a fit or a frozen forecast look older
    than the data it was made from (collecting runs added by ``plan --suggest --add`` changes no forecast). What
    such runs have spent so far counts in the ladder's cost at the next fit."""
    df = runs if isinstance(runs, pd.DataFrame) else pd.DataFrame(runs)
    df = df[~is_hero(df) & status_ok(df)].reset_index(drop=True).dropna(axis=1, how="all")
    return content_hash(df)


def results_hashes(runs: Any) -> tuple[str, str]:
    """:func:`results_hash`, then the hash a ladder before 30aca64 (2026-12-05) recorded in fit.json and its freezes:
    every row but the hero runs', unfinished ones too. A freeze of that age, made while a run was planned, training
    or failed, holds the latter; read against the former alone, results unchanged since read as changed."""
    df = runs if isinstance(runs, pd.DataFrame) else pd.DataFrame(runs)
    return results_hash(df), content_hash(df[~is_hero(df)].reset_index(drop=True).dropna(axis=1, how="all"))


def hero_excluded(df: pd.DataFrame) -> list[dict]:
    """The ``excluded`` entries of the hero runs, with :data:`HERO_REASON`."""
    if not len(df):
        return []
    rows = excluded_rows(
        df.assign(status=df["status"] if "status" in df.columns else "unknown"), np.zeros(len(df), dtype=bool)
    )
    return [{**r, "reason": HERO_REASON} for r in rows]


def spent(df: pd.DataFrame) -> np.ndarray:
    """FLOPs each run actually spent: collect's ``flops_spent`` (a partial run's consumed FLOPs, a branch's own
    steps), else its ``flops``; 0 where neither is known."""
    out = np.zeros(len(df))
    for col in ("flops", "flops_spent"):  # the later column wins where it is known
        if col in df.columns:
            v = pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=float)
            out = np.where(np.isfinite(v), v, out)
    return out


def status_ok(df: pd.DataFrame) -> np.ndarray:
    """Which runs are finished (a missing status counts as finished)."""
    if "status" not in df.columns:
        return np.ones(len(df), dtype=bool)
    s = df["status"]
    return (s.isna() | s.astype(str).str.strip().str.lower().isin(KEEP_STATUS)).to_numpy()


def excluded_rows(df: pd.DataFrame, ok: np.ndarray) -> list[dict]:
    """The ``excluded`` entries: each unfinished run with its status and reason."""
    out = []
    for label, row in df[~ok].iterrows():
        reason = None
        for col in ("error", "reason"):  # collect's error text, or an exported table's reason
            value = row.get(col) if col in df.columns else None
            if value is not None and not (isinstance(value, float) and math.isnan(value)) and str(value).strip():
                reason = value
                break
        if reason is None:
            step = row.get("diverged_at_step") if "diverged_at_step" in df.columns else None
            reason = f"diverged at step {int(step)}" if step is not None and pd.notna(step) else None
        out.append(
            jsonable(
                {
                    "run": str(label),
                    "status": str(row["status"]),
                    "reason": None if reason is None else str(reason),
                    "variant": str(row["variant"]) if "variant" in df.columns and pd.notna(row["variant"]) else None,
                    "params": row.get("params"),
                    "tokens": row.get("tokens"),
                    "flops_spent": spent(df.loc[[label]])[0],
                }
            )
        )
    return out


def rung_variant_keys(df: pd.DataFrame) -> tuple[pd.Series, pd.Series, list[str], str]:
    """(rung key, law-variant key, tuning columns, how variants were defined) per row."""
    axis_cols = [c for c in df.columns if c.startswith("axis/")]
    if axis_cols:
        tune = [f"axis/{a}" for a in TUNING_AXES if f"axis/{a}" in df.columns]
        var = [f"axis/{a}" for a in VARIANT_AXES if f"axis/{a}" in df.columns]
        reps = [f"axis/{a}" for a in REPLICATE_AXES]
        rung_cols = [c for c in axis_cols if c not in tune and c not in var and c not in reps]
        rung = _text(_budgets_as_multiples(df[rung_cols])).agg(" ".join, axis=1) if rung_cols else _cluster_key(df)
        if var:
            variant = df[var[0]].map(tie_kind)
            how = "the study's tie_embeddings axis"
        else:
            variant, how = _tie_or_single(df)
        return rung, variant, tune, how
    tune = [c for c in ("lr", "batch_tokens", "aspect_ratio") if c in df.columns]
    rung = _cluster_key(df)
    if "variant" in df.columns:
        # an empty cell is a variant of its own, named as such (never "variant ?")
        variant = df["variant"].astype(object).where(df["variant"].notna(), NO_VARIANT).astype(str)
        variant = variant.where(variant.str.strip() != "", NO_VARIANT)
        how = "the variant column"
    else:
        variant, how = _tie_or_single(df)
    return rung, variant, tune, how


def _budgets_as_multiples(frame: pd.DataFrame) -> pd.DataFrame:
    """A budget's multiplier as `ladder plan` and the tracker write it (2x): a rung was "4K 2.0" in fit and the
    report beside plan's "4K ... trunk 2x"."""
    if "axis/multiplier" not in frame.columns:
        return frame
    m = pd.to_numeric(frame["axis/multiplier"], errors="coerce")
    return frame.assign(**{"axis/multiplier": [f"{v:g}x" if np.isfinite(v) else None for v in m]})


def _text(frame: pd.DataFrame) -> pd.DataFrame:
    """Every cell as text, a missing one as ``?``: a row of a damaged run (collect's row of a run whose spec.json
    is gone has no axis values) joins into a key like any other (``astype(str)`` keeps NaN under pandas' string
    dtype)."""
    return frame.astype(object).where(frame.notna(), "?").astype(str)


ALL_RUNS = "all"  # the law variant of a study (or runs table) without variants: every run


def of_variant(variant: str | None) -> str:
    """The words " of variant tied" after "law form(s)" or "the laws"; nothing for :data:`ALL_RUNS` (fit said "variant
    all" of a study with one variant, as if "all" were a variant's name)."""
    return "" if variant in (None, ALL_RUNS) else f" of variant {variant}"


def _tie_or_single(df: pd.DataFrame) -> tuple[pd.Series, str]:
    """Variants from the tie_embeddings column when it varies, else one variant for every run."""
    if "tie_embeddings" in df.columns and df["tie_embeddings"].nunique() > 1:
        return df["tie_embeddings"].map(tie_kind), "the tie_embeddings column"
    return pd.Series(ALL_RUNS, index=df.index), "a single variant"


def _cluster_key(df: pd.DataFrame) -> pd.Series:
    """Rungs of a table without axis columns: params and tokens each clustered within RUNG_RTOL, named by the
    median of each cluster ("100M x 2B": fit named them "N0/D0", which no user could place)."""
    out = []
    for col in ("params", "tokens"):
        v = df[col].to_numpy(dtype=float)
        good = np.isfinite(v) & (v > 0)
        lab = np.full(len(v), -1)
        if good.any():
            lab[good], _ = group_budgets(v[good], RUNG_RTOL)
        names = {k: format_count(float(np.median(v[lab == k]))) for k in set(lab.tolist()) if k >= 0}
        out.append([names.get(k, "?") for k in lab])
    return pd.Series([f"{a} x {b}" for a, b in zip(*out)], index=df.index)


def best_configs(df: pd.DataFrame, tune: list[str]) -> tuple[pd.DataFrame, str | None]:
    """Per (rung, variant): the runs of the configuration of the tuning axes with the lowest mean loss."""
    varying = [c for c in tune if (df.groupby(["_rung", "_variant"])[c].nunique(dropna=False) > 1).any()]
    if not varying:
        return df, None
    keep: list = []
    for _, g in df.groupby(["_rung", "_variant"], sort=False):
        cfg = _text(g[varying]).agg("|".join, axis=1)
        best = g["loss"].groupby(cfg).mean().idxmin()
        keep.extend(g.index[cfg == best])
    names = ", ".join(c.removeprefix("axis/") for c in varying)
    dropped = len(df) - len(keep)
    note = (
        f"the loss laws use the best {names} configuration of each rung and variant (the tuned loss); "
        f"{dropped} sweep run(s) at other values are left out of the laws (they feed the hyperparameter "
        "and ablation fits)"
    )
    return df.loc[keep], note


def convention(df: pd.DataFrame, study: StudySpec | None, warnings: list[str]) -> str:
    """The parameter-count convention of N: the study's, else the table's (one only)."""
    col = None
    if "param_convention" in df.columns:
        vals = sorted(df["param_convention"].dropna().astype(str).unique())
        if len(vals) > 1:
            raise FitError(
                f"fit: the runs count parameters in different conventions ({', '.join(vals)}); "
                "a law needs one N: fit them separately"
            )
        col = vals[0] if vals else None
    if study is not None:
        if col is not None and col != study.ladder.param_count:
            warnings.append(
                f"the runs count params as {col!r} but the study's ladder.param_count is "
                f"{study.ladder.param_count!r}; the hero's params are read in the study's convention"
            )
        return study.ladder.param_count
    return col or "as given (params column)"


def rungs_as_scale(df: pd.DataFrame) -> pd.DataFrame:
    """The table the sweep and ablation fits read: this fit's rung grouping as their ``scale`` column."""
    return df.drop(columns=["scale"], errors="ignore").assign(scale=df["_rung"]).drop(columns=["_rung", "_variant"])


RISING_RANK_CORR = 0.5  # loss vs compute rank correlation above which the runs are said to get worse with scale
RISING_MIN_SPAN = 2.0  # ... over runs whose compute spans at least this factor (one isoFLOP budget is one compute)


def loss_rises_with_compute(df: pd.DataFrame) -> float | None:
    """The rank correlation of loss with compute (6ND) when it is clearly positive over runs spanning >= 2 sizes
    and a factor :data:`RISING_MIN_SPAN` in compute (a larger model or budget that scores a higher loss: an
    accuracy column read as the loss?), else None. The runs of one isoFLOP budget differ in compute only by
    rounding: their loss follows the size, not the compute."""
    if len(df) < 3 or df["params"].nunique() < 2:
        return None
    six_nd = df["params"] * df["tokens"]
    if six_nd.max() < RISING_MIN_SPAN * six_nd.min():
        return None
    compute = six_nd.rank()
    rho = float(compute.corr(df["loss"].rank()))
    return rho if rho > RISING_RANK_CORR else None


def largest_size_winner(law_df: pd.DataFrame, fitted: Sequence[str]) -> tuple[str, str]:
    """The variant with the lowest mean loss at the largest size every variant trained, on the rungs (params x
    tokens) they share, and why; when they share no rung, the first in the table, and why. (The largest size of
    the whole table would crown the one variant that alone trained it, however much worse its loss.)"""
    sub = law_df[law_df["_variant"].isin(fitted)]
    if sub.empty:
        return str(fitted[0]), "the first variant"
    order = [str(v) for v in pd.unique(sub["_variant"])]
    rungs = [set(sub.loc[sub["_variant"] == v, "_rung"]) for v in order]
    shared = set.intersection(*rungs)
    if len(order) > 1 and not shared:
        # of more than two, some may share rungs: "share no rung" read as if none did
        who = "share no rung" if len(order) == 2 else f"have no rung that all {len(order)} trained"
        return order[0], (
            f"the first variant in the table: the variants ({', '.join(order)}) {who} (params x tokens) "
            "to compare their loss like for like"
        )
    at = sub[sub["_rung"].isin(shared)]
    top = at[at["params"] >= at["params"].max() / (1 + RUNG_RTOL)]
    best = top.groupby("_variant", sort=False)["loss"].mean()
    from ladder.model.config import format_count

    size = format_count(float(top["params"].median()))
    return str(best.idxmin()), (
        f"the lowest mean loss at the largest size every variant trained ({size} params, on the budgets they share)"
    )
