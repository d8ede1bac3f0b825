"""Reading a runs table from a file for ``ladder fit --runs``: CSV, parquet or JSON lines, a W&B export through a
``--columns`` mapping, and every way a file people write goes wrong, refused in one line that names the rows."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ladder.errors import FitError
from ladder.layout import RepeatedKey, no_repeated_keys
from ladder.model.config import format_count

ADDED_COLUMNS = "ladder_added_columns"  # DataFrame.attrs key: the columns ladder added to a read table (run_id)


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
    labels: list[str] = []  # how each row is pointed at: its line in the file (none for parquet)
    repeated: list[str] = []
    sep = "\t" if suffix == ".tsv" else ","
    try:
        if suffix in (".parquet", ".pq"):
            import pyarrow.parquet as pq

            names = pq.read_schema(path).names
            if len(set(names)) < len(names):  # pyarrow reads none of such a table's columns by name
                _refuse_repeated(path, list(dict.fromkeys(n for n in names if names.count(n) > 1)))
            df = pd.read_parquet(path)
        elif suffix in (".csv", ".tsv", ".txt"):
            df = pd.read_csv(path, sep=sep)
            labels = _record_lines(path, sep, len(df))
            df.columns = [c.strip() if isinstance(c, str) else c for c in df.columns]  # ' loss' is the loss column
            repeated = _repeated_header_names(path, sep)
        elif suffix in JSON_SUFFIXES:
            df, labels = _read_json_runs(path)
        else:
            raise FitError(f"{path}: unsupported runs file type {suffix or '(none)'}; use .csv, .parquet or .jsonl")
    except FitError:
        raise
    except UnicodeDecodeError as exc:
        raise FitError(
            f"{path}: cannot read the runs table: it is not UTF-8 text (byte {exc.object[exc.start : exc.start + 1]!r} "
            f"at offset {exc.start}); save it as UTF-8"
        ) from None
    except pd.errors.ParserError as exc:
        raise FitError(f"{path}: {parser_error_words(exc, sep, 'the runs table')}") from None
    except Exception as exc:  # noqa: BLE001 - any reader error is the file's problem
        raise FitError(f"{path}: cannot read the runs table ({type(exc).__name__}: {_first_line(exc)})") from None
    df = _cells_as_values(df)
    repeated += [str(c) for c in df.columns[df.columns.duplicated()].unique() if str(c) not in repeated]
    if repeated and columns is None:  # every column is read (the axes, the variant, ...): one name, one column
        _refuse_repeated(path, repeated)
    if columns is not None:
        df = _mapped(df, _parse_columns(columns), path, repeated)
    if "run_id" not in df.columns and labels:
        df.insert(0, "run_id", labels)
        df.attrs[ADDED_COLUMNS] = ["run_id"]  # ladder's, not the file's: never listed as a column the file has
    elif "run_id" in df.columns and labels and not df["run_id"].is_unique:
        # names shared by several runs (a sweep's): each with its line, or the fit fell back to "row 14", counted
        # from 0 under the header, for the run on line 16
        df["run_id"] = [f"{v} ({label})" for v, label in zip(df["run_id"], labels)]
    _refuse_true_false(df, path)
    _counts_and_text(df, path)
    _refuse_beyond_counts(df, path)
    _refuse_not_positive(df, path)
    return df


NUMERIC = ("params", "tokens", "loss", "flops", "lr", "batch_tokens", "batch_size", "aspect_ratio", "seed")
"""The columns of a runs table that hold numbers (true/false in them is a mistake, not 1 and 0)."""
MAX_COUNT = 1e15  # params or tokens per run beyond this are a typo (1P), as for `ladder fit --predict`


def parser_error_words(exc: Exception, sep: str, what: str) -> str:
    """pandas' "Error tokenizing data. C error: Expected 5 fields in line 7, saw 6" (of a value written 1,000) in
    a person's words: the line, its fields, the header's columns and the cure."""
    m = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", str(exc))
    if not m:
        return f"cannot read {what} (ParserError: {_first_line(exc)})"
    want, line, saw = m.groups()
    mark = "comma" if sep == "," else "tab"
    return (
        f"line {line} has {saw} fields where the header names {want} columns: quote a value that holds a {mark} in "
        "double quotes, or write numbers without one (1000, not 1,000)"
    )


def _first_line(exc: Exception) -> str:
    """A reader's message in one line: pyarrow's go on for many."""
    return (str(exc).strip().splitlines() or [""])[0]


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
        # numbers written as strings (a W&B export's "NaN") as the numbers they are: pandas refused "NaN" "at
        # position 8", where the fit names a NaN loss by its line
        df[name] = col.map(lambda v: float(v) if isinstance(v, str) else v)


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
            # tokens of 1e16 to 1e19 are an isoFLOP table's budgets, put where its tokens go
            flops = "; a FLOP count? tokens = flops / (6 x params)" if name == "tokens" else ""
            raise FitError(
                f"{path}: column {name} is beyond {format_count(MAX_COUNT)} in {int(rows.sum())} row(s) "
                f"({_labels(df, rows)}): not a model a law can fit; give plain counts{flops}"
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


def _record_lines(path: Path, sep: str, n_rows: int) -> list[str]:
    """Each data row's line in a CSV file, as an editor numbers it: blank lines (which pandas skips) and quoted
    cells over several lines no longer shift the labels ("line 5" for the run on line 8)."""
    import csv

    starts = []
    with open(path, newline="", encoding="utf-8-sig", errors="replace") as f:
        reader = csv.reader(f, delimiter=sep)
        before = 0
        for row in reader:
            if any(cell.strip() for cell in row):
                starts.append(before + 1)
            before = reader.line_num
    starts = starts[1:]  # under the header
    if len(starts) != n_rows:  # a file pandas reads otherwise (comments, bad quoting): count under the header
        return [f"line {2 + i}" for i in range(n_rows)]
    return [f"line {n}" for n in starts]


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


def _read_json_runs(path: Path) -> tuple[pd.DataFrame, list[str]]:
    """The runs of a JSON-lines file or of one JSON array, and where each stands ("line 7", "run 3 of the array")."""
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
                _refuse_one_document(path, text)
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
    return pd.json_normalize(records, sep="."), where


def _refuse_one_document(path: Path, text: str) -> None:
    """A file that is one JSON value over many lines (a pretty-printed object: ladder's own fit.json, an export
    under a key) is refused as such: read as JSON lines, its first line ``{`` was "not JSON"."""
    import json

    try:
        whole = json.loads(text)
    except ValueError:
        return
    kind = "object" if isinstance(whole, dict) else type(whole).__name__
    raise FitError(
        f"{path}: one JSON {kind} over {len(text.splitlines())} lines, where JSON lines hold one run per line: "
        'write each run on one line (e.g. {"params": 1e6, "tokens": 2e7, "loss": 3.2}), or give a JSON array of runs'
    )


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
    have = ", ".join(map(str, list(df.columns)[:12])) + (", ..." if len(df.columns) > 12 else "")  # for a refusal
    for name, column in mapping.items():
        found = _source(df, column)
        if found is None:
            # the columns that hold the name (W&B's raw config nests each value: config.n_params.value), which a
            # list of the first 12 of a wide export never reached
            near = [str(c) for c in df.columns if column.lower() in str(c).lower() and str(c) != column][:3]
            hint = f"; did you mean {' or '.join(repr(c) for c in near)}?" if near else ""
            raise FitError(f"--columns {name}={column}: {path} has no column {column!r}{hint} (it has {have})")
        if str(found) in repeated:
            _refuse_repeated(path, [str(found)])
        out[name] = df[found]
    # a mapping names the columns that differ: those already named as the fit reads them are kept ("N,tokens,loss"
    # with params=N said it "lacks tokens, loss")
    aliases = {"batch_size": "batch_tokens", "batch_tokens": "batch_size"}  # one column, two names the fit reads
    for name in MAPPABLE:
        if name in aliases and aliases[name] in mapping:  # mapped under its alias: the file's own is another column
            continue
        if name not in out and name in df.columns and name not in mapping.values() and name not in repeated:
            out[name] = df[name]
    for name, wandb_names in (("status", ("state", "State")), ("run_id", ("name", "Name", "id", "ID"))):
        found = next((c for c in wandb_names if c in df.columns), None)
        if name not in out and found is not None and (name != "run_id" or df[found].is_unique):
            out[name] = df[found]
    unmapped = [n for n in ("params", "tokens", "loss") if n not in out]
    if unmapped:  # the fit said "the runs table lacks loss; it has params, tokens": the mapping's, not the file's
        raise FitError(
            f"--columns maps no {', '.join(unmapped)}, which the fit needs ({path} has {have}): "
            f"add {','.join(f'{n}=COLUMN' for n in unmapped)} to --columns"
            + (
                " (with FLOPs counted as 6ND, tokens = flops / (6 x params))"
                if unmapped == ["tokens"] and "flops" in out
                else ""
            )
        )
    return pd.DataFrame(out)
