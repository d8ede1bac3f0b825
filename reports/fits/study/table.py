"""The runs table of a study fit: reading and checking it, which runs are excluded and why, the rung and
law-variant of every run, and the tuned configuration of each rung that the loss laws use."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ladder.errors import FitError
from ladder.layout import RepeatedKey, jsonable, no_repeated_keys
from ladder.reports.fits.runs import group_budgets, tie_kind
from ladder.studies.spec import StudySpec

REQUIRED = ("params", "tokens", "loss")
NUMERIC = (
    "params",
    "tokens",
    "loss",
    "flops",
    "flops_spent",
    "lr",
    "batch_tokens",
    "aspect_ratio",
    "d_model",
    "n_layers",
)
KEEP_STATUS = {"done", "ok", "completed", "complete", "success", "succeeded", "finished"}
TUNING_AXES = ("lr", "lr_multipliers", "batch_tokens", "batch_multipliers", "aspect_ratio")
VARIANT_AXES = ("tie_embeddings",)
REPLICATE_AXES = ("seed",)  # repeats of one configuration: the same rung, not a rung of their own
RUNG_RTOL = 0.05  # runs whose params and tokens agree within 5% share a rung (tables without axis columns)
HERO_REASON = "the hero run (scored by `ladder forecast score`, not fitted)"

NO_VARIANT = "(no variant)"  # the variant of a --runs row whose variant cell is empty
ADDED_COLUMNS = "ladder_added_columns"  # DataFrame.attrs key: the columns ladder added to a read table (run_id)


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
            raise FitError("fit: the runs table has both batch_size and batch_tokens; batch_size is an alias, keep one")
        df = df.rename(columns={"batch_size": "batch_tokens"})
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        added = set(df.attrs.get(ADDED_COLUMNS) or [])
        own = [c for c in df.columns if c not in added]
        have = ", ".join(own) or "none"
        raise FitError(
            f"fit: the runs table lacks column(s) {', '.join(missing)}; it needs params, tokens and loss "
            f"(optional: flops, lr, batch_tokens or batch_size, variant, status); it has {have}" + _separator_hint(own)
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
    """:func:`content_hash` of the rows a fit uses (every row but the hero runs'), without the columns that are
    empty in all of them: the hero's own row (planned, then training, then done) and the columns only it fills
    never make a fit or a frozen forecast look older than the data it was made from."""
    df = runs if isinstance(runs, pd.DataFrame) else pd.DataFrame(runs)
    df = df[~is_hero(df)].reset_index(drop=True).dropna(axis=1, how="all")
    return content_hash(df)


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
        rung = _text(df[rung_cols]).agg(" ".join, axis=1) if rung_cols else _cluster_key(df)
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


def _text(frame: pd.DataFrame) -> pd.DataFrame:
    """Every cell as text, a missing one as ``?``: a row of a damaged run (collect's row of a run whose spec.json
    is gone has no axis values) joins into a key like any other (``astype(str)`` keeps NaN under pandas' string
    dtype)."""
    return frame.astype(object).where(frame.notna(), "?").astype(str)


def _tie_or_single(df: pd.DataFrame) -> tuple[pd.Series, str]:
    """Variants from the tie_embeddings column when it varies, else one variant for every run."""
    if "tie_embeddings" in df.columns and df["tie_embeddings"].nunique() > 1:
        return df["tie_embeddings"].map(tie_kind), "the tie_embeddings column"
    return pd.Series("all", index=df.index), "a single variant"


def _cluster_key(df: pd.DataFrame) -> pd.Series:
    """Rungs of a table without axis columns: params and tokens each clustered within RUNG_RTOL."""
    out = []
    for col in ("params", "tokens"):
        v = df[col].to_numpy(dtype=float)
        good = np.isfinite(v) & (v > 0)
        lab = np.full(len(v), -1)
        if good.any():
            lab[good], _ = group_budgets(v[good], RUNG_RTOL)
        out.append(lab)
    return pd.Series([f"N{a}/D{b}" for a, b in zip(*out)], index=df.index)


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


def loss_rises_with_compute(df: pd.DataFrame) -> float | None:
    """The rank correlation of loss with compute (6ND) when it is clearly positive over runs spanning >= 2 sizes
    (a larger model or budget that scores a higher loss: an accuracy column read as the loss?), else None."""
    if len(df) < 3 or df["params"].nunique() < 2:
        return None
    compute = (df["params"] * df["tokens"]).rank()
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
        return order[0], (
            f"the first variant in the table: the variants ({', '.join(order)}) share no rung (params x tokens) "
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


MAPPABLE = (
    "params",
    "tokens",
    "loss",
    "flops",
    "lr",
    "batch_tokens",
    "batch_size",
    "variant",
    "status",
    "run_id",
    "tie_embeddings",
    "aspect_ratio",
    "seed",
    "param_convention",
)
"""The columns a ``--columns`` mapping may fill (the fit's required, optional and label columns)."""
JSON_SUFFIXES = (".jsonl", ".ndjson", ".json")


def read_runs_file(path: str | Path, columns: str | dict[str, str] | None = None) -> pd.DataFrame:
    """A runs table from a CSV (``.csv``, ``.tsv``), parquet (``.parquet``, ``.pq``) or JSON-lines (``.jsonl``,
    ``.ndjson``, ``.json``: one run per line, nested objects flattened to dotted names) file.

    ``columns`` maps the fit's names to the file's (``"params=config.n_params,loss=summary.eval/loss"``), as a
    W&B runs export needs: JSON lines of ``wandb.Api().runs`` (``config.*`` and ``summary.*`` keys) or the CSV
    of the UI's runs table (the same keys without the prefix, which are found too). With a mapping, the table
    holds the mapped columns only, and W&B's ``state`` column serves as ``status`` (``finished`` runs are fitted,
    crashed ones are excluded and listed) and its ``name`` as ``run_id`` unless mapped. Rows without a ``run_id``
    are named by their line in the file, so that a message about a row points at it."""
    path = Path(path)
    if not path.is_file():
        if not path.exists():
            raise FitError(f"{path}: no such runs file")
        kind = "a directory" if path.is_dir() else "not a regular file"
        raise FitError(f"{path} is {kind}; give a runs file (.csv, .parquet or .jsonl)")
    suffix = path.suffix.lower()
    first_line = 1
    repeated: list[str] = []
    try:
        if suffix in (".parquet", ".pq"):
            import pyarrow.parquet as pq

            names = pq.read_schema(path).names
            if len(set(names)) < len(names):  # pyarrow reads none of such a table's columns by name
                _refuse_repeated(path, list(dict.fromkeys(n for n in names if names.count(n) > 1)))
            df, first_line = pd.read_parquet(path), 0
        elif suffix in (".csv", ".tsv", ".txt"):
            sep = "\t" if suffix == ".tsv" else ","
            df, first_line = pd.read_csv(path, sep=sep), 2
            df.columns = [c.strip() if isinstance(c, str) else c for c in df.columns]  # ' loss' is the loss column
            repeated = _repeated_header_names(path, sep)
        elif suffix in JSON_SUFFIXES:
            df = _read_json_runs(path)
        else:
            raise FitError(f"{path}: unsupported runs file type {suffix or '(none)'}; use .csv, .parquet or .jsonl")
    except FitError:
        raise
    except UnicodeDecodeError as exc:
        raise FitError(
            f"{path}: cannot read the runs table: it is not UTF-8 text (byte {exc.object[exc.start : exc.start + 1]!r} "
            f"at offset {exc.start}); save it as UTF-8"
        ) from None
    except Exception as exc:  # noqa: BLE001 - any reader error is the file's problem
        first = (str(exc).strip().splitlines() or [""])[0]  # one line: pyarrow's messages go on for many
        raise FitError(f"{path}: cannot read the runs table ({type(exc).__name__}: {first})") from None
    df = _cells_as_values(df)
    repeated += [str(c) for c in df.columns[df.columns.duplicated()].unique() if str(c) not in repeated]
    if repeated and columns is None:  # every column is read (the axes, the variant, ...): one name, one column
        _refuse_repeated(path, repeated)
    if columns is not None:
        df = _mapped(df, _parse_columns(columns), path, repeated)
    if "run_id" not in df.columns and first_line:
        df.insert(0, "run_id", [f"line {first_line + i}" for i in range(len(df))])
        df.attrs[ADDED_COLUMNS] = ["run_id"]  # ladder's, not the file's: never listed as a column the file has
    _refuse_true_false(df, path)
    _counts_and_text(df, path)
    _refuse_beyond_counts(df, path)
    _refuse_not_positive(df, path)
    return df


NUMERIC = ("params", "tokens", "loss", "flops", "lr", "batch_tokens", "batch_size", "aspect_ratio", "seed")
"""The columns of a runs table that hold numbers (true/false in them is a mistake, not 1 and 0)."""
MAX_COUNT = 1e15  # params or tokens per run beyond this are a typo (1P), as for `ladder fit --predict`


def _labels(df: pd.DataFrame, rows: pd.Series) -> str:
    names = [str(x) for x in (df.loc[rows, "run_id"] if "run_id" in df.columns else df.index[rows])]
    return ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")


def _refuse_true_false(df: pd.DataFrame, path: Path) -> None:
    """A JSON ``true`` or a CSV ``True`` in a numeric column: pandas would read it as 1."""
    for name in NUMERIC:
        if name not in df.columns:
            continue
        col = df[name]
        rows = col.map(lambda v: isinstance(v, (bool, np.bool_))) if col.dtype != bool else col.notna()
        if rows.any():
            raise FitError(
                f"{path}: column {name} holds true/false in {int(rows.sum())} row(s) ({_labels(df, rows)}); "
                "give numbers"
            )


COUNT_COLUMNS = ("params", "tokens", "flops")
"""The columns of counts: a cell such as ``1.2B`` or ``64M`` reads as the count it is, as ``--predict`` reads it."""


def _is_number(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def _counts_and_text(df: pd.DataFrame, path: Path) -> None:
    """Counts written with a unit (``1.2B``) as numbers, in place; text that is no number in a numeric column
    refused, naming the rows and a value (pandas said "Unable to parse string '1,000' at position 0")."""
    from ladder.model.config import read_count

    for name in NUMERIC:
        if name not in df.columns or pd.api.types.is_numeric_dtype(df[name]):
            continue
        col = df[name].astype(object)
        if name in COUNT_COLUMNS:
            col = col.map(
                lambda v: (
                    float(read_count(v.strip())) if isinstance(v, str) and read_count(v.strip()) is not None else v
                )
            )
            df[name] = col
        rows = col.map(lambda v: isinstance(v, str) and not _is_number(v))
        if rows.any():
            value = str(col[rows].iloc[0])
            how = (
                "numbers such as 64000000 or 6.4e7, or counts such as 64M"
                if name in COUNT_COLUMNS
                else "plain numbers such as 3.21 or 1e-3"
            )
            raise FitError(
                f"{path}: column {name} holds text that is not a number in {int(rows.sum())} row(s) "
                f"({_labels(df, rows)}; e.g. {value!r}): write {how}"
                + (", without thousands separators" if "," in value else "")
            )


POSITIVE = ("lr", "batch_tokens", "batch_size", "aspect_ratio")
"""Optional columns whose values are positive or nothing: a zero or negative LR is a typo, which the hyperparameter
laws (in log space) would leave out without a word."""


def _refuse_not_positive(df: pd.DataFrame, path: Path) -> None:
    for name in POSITIVE:
        if name not in df.columns:
            continue
        values = pd.to_numeric(df[name], errors="coerce")
        rows = values <= 0
        if rows.any():
            raise FitError(
                f"{path}: column {name} must be positive; {int(rows.sum())} row(s) are not ({_labels(df, rows)}; "
                f"e.g. {values[rows].iloc[0]:g}): fix them, or leave the cell empty where it is not known"
            )


def _refuse_beyond_counts(df: pd.DataFrame, path: Path) -> None:
    """Params or tokens beyond :data:`MAX_COUNT` (infinite ones are refused by the fit, with the others)."""
    for name in ("params", "tokens"):
        if name not in df.columns:
            continue
        values = pd.to_numeric(df[name], errors="coerce")
        rows = (values > MAX_COUNT) & np.isfinite(values)
        if rows.any():
            raise FitError(
                f"{path}: column {name} is beyond {MAX_COUNT:.0e} in {int(rows.sum())} row(s) "
                f"({_labels(df, rows)}): not a model a law can fit; give plain counts"
            )


def _hashable(value: Any) -> Any:
    """A cell as the fit can compare it: a list or object (W&B ``tags``, a nested config) as its JSON text, an
    integer beyond a float's range as infinity (JSON allows any number of digits; the fit refuses it then)."""
    import json

    if isinstance(value, (list, dict, tuple, set, np.ndarray)):
        return json.dumps(value.tolist() if isinstance(value, np.ndarray) else value, sort_keys=True, default=str)
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 2**1023:
        return math.inf if value > 0 else -math.inf
    return value


def _cells_as_values(df: pd.DataFrame) -> pd.DataFrame:
    """Every object column's cells through :func:`_hashable` (by position: a file may repeat a column name)."""
    for i in range(df.shape[1]):
        if df.iloc[:, i].dtype == object:
            df.isetitem(i, df.iloc[:, i].map(_hashable))
    return df


def _repeated_header_names(path: Path, sep: str) -> list[str]:
    """The names that head more than one column of a CSV file, as written (pandas renames the second ``loss`` to
    ``loss.1``, and the fit would read the first without a word)."""
    import csv
    from collections import Counter

    with open(path, newline="", encoding="utf-8-sig", errors="replace") as f:
        header = next((row for row in csv.reader(f, delimiter=sep) if any(cell.strip() for cell in row)), [])
    counts = Counter(cell.strip() for cell in header)
    return [name for name, n in counts.items() if n > 1]


def _refuse_repeated(path: Path, names: list[str]) -> None:
    raise FitError(
        f"{path}: more than one column is named {' or '.join(repr(n) for n in names)}; "
        "give each column its own name (or remove the repeats), so that the fit reads the one you mean"
    )


def _repeated_key(path: Path, where: str, key: str) -> FitError:
    return FitError(
        f"{path}: {where} gives the key {key!r} twice (JSON would keep only the last); "
        "remove one, so that the fit reads the value you mean"
    )


def _read_json_runs(path: Path) -> pd.DataFrame:
    import json

    text = path.read_text(encoding="utf-8-sig")  # a byte-order mark (Windows tools write one) is no JSON
    array = text.lstrip().startswith("[")
    if array:  # one JSON array of runs
        try:
            records = json.loads(text, object_pairs_hook=no_repeated_keys)
        except RepeatedKey as exc:
            raise _repeated_key(path, "a run", exc.key) from None
        where = [f"run {n} of the array" for n in range(1, len(records) + 1)]
    else:
        records, where = [], []
        for n, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line, object_pairs_hook=no_repeated_keys))
            except RepeatedKey as exc:
                raise _repeated_key(path, f"line {n}", exc.key) from None
            except ValueError as exc:
                raise FitError(f"{path}: line {n} is not JSON ({exc})") from None
            where.append(f"line {n}")
    if not records:
        raise FitError(f"{path}: holds no runs (write one JSON object per line, one run each)")
    for at, record in zip(where, records):
        if not isinstance(record, dict):
            raise FitError(
                f"{path}: {at} is {json.dumps(record)[:40]}, not a JSON object: every "
                f"{'element' if array else 'line'} must be one run, e.g. "
                '{"params": 1e6, "tokens": 2e7, "loss": 3.2}'
            )
        twice = _flattened_twice(record)
        if twice:
            raise FitError(
                f"{path}: {at} gives {twice!r} both as a dotted key and nested (flattened, one would hide "
                "the other); keep one"
            )
    return pd.json_normalize(records, sep=".")


def _flattened_twice(record: dict, prefix: str = "", seen: set | None = None) -> str | None:
    """A dotted name that a record gives twice once flattened (``{"config.n": 1, "config": {"n": 2}}``)."""
    seen = set() if seen is None else seen
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            found = _flattened_twice(value, f"{name}.", seen)
            if found:
                return found
        elif name in seen:
            return name
        else:
            seen.add(name)
    return None


def _parse_columns(columns: str | dict[str, str]) -> dict[str, str]:
    if isinstance(columns, dict):
        pairs = dict(columns)
    else:
        pairs = {}
        for item in (p.strip() for p in columns.split(",")):
            name, sep, source = item.partition("=")
            if not item or not sep or not name.strip() or not source.strip():
                raise FitError(
                    f"--columns {columns!r}: write NAME=COLUMN pairs separated by commas, e.g. "
                    "params=config.n_params,tokens=config.tokens,loss=summary.eval/loss"
                )
            if name.strip() in pairs:
                raise FitError(f"--columns {columns!r}: {name.strip()} is given twice; map each name once")
            pairs[name.strip()] = source.strip()
    by_source: dict[str, str] = {}
    for name, source in pairs.items():
        if source in by_source:
            raise FitError(
                f"--columns: {by_source[source]} and {name} both read column {source!r}; map each name to its own "
                "column"
            )
        by_source[source] = name
    unknown = [n for n in pairs if n not in MAPPABLE]
    if unknown:
        raise FitError(
            f"--columns: {', '.join(unknown)} is not a column the fit reads (choose from {', '.join(MAPPABLE)})"
        )
    return pairs


def _source(df: pd.DataFrame, name: str) -> str | None:
    """The file's column for ``name``: itself, or without a W&B ``config.``/``summary.`` prefix (the UI's CSV),
    or with one (JSON lines); case-insensitive as a last resort."""
    candidates = [name]
    for prefix in ("config.", "summary."):
        candidates.append(name.removeprefix(prefix) if name.startswith(prefix) else prefix + name)
    for c in candidates:
        if c in df.columns:
            return c
    lower = {str(c).lower(): c for c in df.columns}
    return next((lower[c.lower()] for c in candidates if c.lower() in lower), None)


def _mapped(df: pd.DataFrame, mapping: dict[str, str], path: Path, repeated: list[str] = ()) -> pd.DataFrame:
    """The mapped columns of ``df``; a mapped column whose name heads more than one column (``repeated``) is
    refused (a W&B UI export may repeat a name the mapping does not read: that is no matter)."""
    out = {}
    for name, column in mapping.items():
        found = _source(df, column)
        if found is None:
            have = ", ".join(map(str, list(df.columns)[:12])) + (", ..." if len(df.columns) > 12 else "")
            raise FitError(f"--columns {name}={column}: {path} has no column {column!r} (it has {have})")
        if str(found) in repeated:
            _refuse_repeated(path, [str(found)])
        out[name] = df[found]
    for name, wandb_names in (("status", ("state", "State")), ("run_id", ("name", "Name", "id", "ID"))):
        found = next((c for c in wandb_names if c in df.columns), None)
        if name not in out and found is not None and (name != "run_id" or df[found].is_unique):
            out[name] = df[found]
    return pd.DataFrame(out)
