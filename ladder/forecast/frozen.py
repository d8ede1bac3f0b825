"""Frozen forecasts (``ladder forecast freeze``/``show``): the fit's hero forecast put on record before the hero
trains, so that it can be checked against the hero afterwards (``ladder forecast score``).

A freeze is one JSON file in the study directory (``forecast.json``, then ``forecast-2.json``, ...: names from
:mod:`ladder.layout`). It is written once, atomically and never over another freeze (a temporary file hard-linked
to a name no freeze holds yet); only its ``scores`` list grows afterwards (each score appended by an atomic
rewrite that leaves everything else as it was). What a freeze holds:

- ``hero``: params, tokens, exact FLOPs, shape, tied, loss, the calibrated 90% interval (``lo``, ``hi``,
  ``level``, ``half_width_pct``) and ``kind`` (a projection until a score checks it);
- ``predictions``: the fit's ``--predict`` points and the freeze's own, with their intervals;
- the law forms with their parameters, 90% intervals and weights, the selection text, the calibration and reach;
- ``results_sha256`` (the results the fit was made from), ``study_sha256`` (the study spec), the ladder version,
  the git revision of the ladder source (null outside a checkout), the UTC time, a note.

A freeze whose ``results_sha256`` is not the hash of the study's results now was made from other data: ``show``
and ``score`` say so ("the data changed after this forecast"). Freezes are read through their contract
(:mod:`ladder.reports.fits.study.forecast_json`): one that is not JSON, or not what ``freeze`` writes (a hand edit:
text for a number, a negative size), is damaged: ``show`` lists it with its problem, and ``score`` refuses the
study in one line, naming the file, until it is restored or moved out.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from ladder import layout
from ladder.console import on_record
from ladder.errors import SpecError, StateError
from ladder.forecast.fitted import current_fit, refit, results_hashes_of, study_hash
from ladder.model.config import read_count
from ladder.plan.study_lock import editing_study
from ladder.reports.fits.runs import MAX_LOSS, MIN_LOSS  # the plausible range of a loss, the fit's too
from ladder.reports.fits.study import forecast_json

if TYPE_CHECKING:
    from ladder.reports.fits.study import fit_json

HERO_KEYS = ("params", "tokens", "flops", "shape", "tied", "loss", "lo", "hi", "level", "half_width_pct", "kind")
POINT_KEYS = (
    "label", "params", "tokens", "loss", "lo", "hi", "level", "half_width_pct", "params_x", "beyond_reach",
    "beyond_tested",
)  # fmt: skip
DATA_CHANGED = "the data changed after this forecast: the study's results are not the ones it was fitted on"
TOO_LARGE = (
    f"above {MAX_LOSS:g} nats/token, far worse than a uniform guess over any vocabulary (ln V: 22 for 2^32 tokens)"
)
TOO_SMALL = (
    f"below {MIN_LOSS:g} nats/token (perplexity {math.exp(MIN_LOSS):.3f}), far below any model of held-out text "
    "(about 0.5 on code, 1.5 or more on web text)"
)


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def git_revision() -> str | None:
    """``git rev-parse HEAD`` of the ladder source, or None when it is not a git checkout."""
    import ladder

    try:
        head = subprocess.run(
            ["git", "-C", str(Path(ladder.__file__).resolve().parent), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0"},
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() or None


@dataclass
class Frozen:
    number: int
    path: Path
    record: dict  # the file's content as written ({} when unreadable or damaged)
    problem: str | None = None  # why it could not be read
    forecast: forecast_json.FrozenForecast | None = None  # the content read through its contract (None: damaged)

    @property
    def scores(self) -> list[dict]:
        scores = self.record.get("scores")
        return [s for s in scores if isinstance(s, dict)] if isinstance(scores, list) else []

    @property
    def latest_score(self) -> dict | None:
        return self.scores[-1] if self.scores else None

    @property
    def final_score(self) -> dict | None:
        """The latest score against the hero's final loss (a prediction checked), if any."""
        final = [s for s in self.scores if s.get("final")]
        return final[-1] if final else None


def read_frozen(study_dir: Path) -> list[Frozen]:
    """Every freeze of the study, oldest first; one that cannot be read or whose content is not what ``freeze``
    writes is listed with its problem (``unreadable (...)``, ``damaged (field: problem)``), never raised."""
    out = []
    for number, path in layout.StudyDir(Path(study_dir)).forecasts():
        try:
            record = layout.loads_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            out.append(Frozen(number, path, {}, f"unreadable ({exc})"))
            continue
        forecast, problem = forecast_json.parse(record)
        if forecast is None:
            out.append(Frozen(number, path, {}, f"damaged ({problem})"))
        else:
            out.append(Frozen(number, path, record, None, forecast))
    return out


def damaged_freezes(frozen: list[Frozen], study_dir: Path) -> str:
    """One line naming the freezes that cannot be read and the way out (for a command that refuses them)."""
    bad = [f for f in frozen if f.problem]
    them = "it" if len(bad) == 1 else "them"
    return (
        "; ".join(f"{f.path} is {f.problem}" for f in bad)
        # the command with its directory: typed as printed, a bare `ladder forecast freeze` is a usage error
        + f": restore {them} from a copy, or move {them} out of {study_dir} (`ladder forecast freeze {layout.shell_word(study_dir)}` "
        "makes a new freeze, best before the hero trains)"
    )


def _point(p: fit_json.Prediction) -> dict:
    return {k: getattr(p, k) for k in POINT_KEYS}


def _in_context(*sections: fit_json.InContext) -> dict | None:
    """The fits' forecasts of each kind of target (in-context repeats, novel tokens) at the hero and their
    predictions, if they have them; a later section adds the points an earlier one lacks (by label)."""
    from ladder.reports.fits.study.fit_json import KindForecasts

    out: dict | None = None

    def point(p: fit_json.KindPoint) -> dict:
        kinds = {
            k: {"loss": kind.loss, "lo": kind.lo, "hi": kind.hi}
            for k, kind in (("novel", p.novel), ("repeats", p.repeats))
            if kind is not None and kind.available
        }
        return {"label": p.label, "params": p.params, "tokens": p.tokens, **kinds}

    for sec in sections:
        if not sec.available:
            continue
        fc = sec.forecasts or KindForecasts()
        points = [point(fc), *(point(p) for p in fc.predictions)]
        if out is None:
            out = {"repeat_share": sec.repeat_share, "points": points}
        else:
            have = {p["label"] for p in out["points"]}
            out["points"] += [p for p in points if p["label"] not in have]
    return out


def hero_started(study_dir: Path) -> list[str]:
    """The study's hero runs that have already trained (done) or begun to (an eval point in their metrics): a
    freeze made now is no forecast made before the hero."""
    from ladder.plan.planner import readable_runs

    sd = layout.StudyDir(Path(study_dir))
    started = []
    for spec in readable_runs(sd.path):
        if spec.role != "hero":
            continue
        rd = sd.run(spec.run_id)
        if layout.result_status(rd) in ("done", "failed", "diverged"):
            started.append(spec.run_id)
            continue
        try:
            lines = list(layout.read_jsonl(rd.metrics)) if rd.metrics.is_file() else []
        except (OSError, ValueError):
            lines = []
        if any(isinstance(r, dict) and r.get("kind") == "eval" for r in lines):
            started.append(spec.run_id)
    return started


def frozen_record(
    current,
    predictions: list[dict],
    note: str | None,
    number: int,
    in_context: dict | None = None,
    after_hero: list[str] | None = None,
) -> dict:
    """What a freeze holds (see the module doc), from the current fit (``in_context``: the kinds' forecasts, when
    the freeze fitted its own points)."""
    fit, hero, law = current.fit, current.hero, current.fit.loss
    from ladder import __version__
    from ladder.reports.fits.study.fit_json import written

    return {
        "number": number,
        "frozen_at": utc_now(),
        "study": current.study.name,
        "hero": {k: getattr(hero, k) for k in HERO_KEYS},
        "predictions": predictions,
        "variant": law.variant,
        "laws": {
            k: {"title": f.title, "formula": f.formula, "params": f.params, "ci90": f.ci90, "weight": f.weight}
            for k, f in (law.forms or {}).items()
        },
        "weights": law.weights,
        "selection": law.selection,
        # copied as fit.json holds them (their keys in the file's order)
        "calibration": written(law.calibration),
        "reach": written(law.reach),
        "in_context": in_context if in_context is not None else _in_context(fit.in_context),
        "results_sha256": current.meta.results_sha256,
        "study_sha256": study_hash(current.study),
        "fit_created_at": current.meta.created_at,
        "n_boot": current.meta.n_boot,
        "ladder_version": __version__,
        "git_revision": git_revision(),
        "note": note,
        # the hero runs that had trained (or begun to) when this was frozen: then it is no prediction made first
        "after_hero": bool(after_hero),
        "hero_runs_started": list(after_hero or []),
        "scores": [],
    }


def _claim(sd: layout.StudyDir, build) -> tuple[int, Path]:
    """Write the next free freeze number's file, never over an existing one: a temporary file hard-linked to the
    name (link fails when the name is taken; then the next number), so a reader sees the whole file or none."""
    number = max((n for n, _ in sd.forecasts()), default=0) + 1
    while True:
        path = sd.forecast(number)
        fd, tmp = tempfile.mkstemp(dir=sd.path, prefix=f".{path.name}.", suffix=".tmp")
        try:
            os.fchmod(fd, 0o644)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    f.write(json.dumps(layout.jsonable(build(number)), indent=2) + "\n")
                    f.flush()
                    os.fsync(f.fileno())
            except OSError as exc:
                layout.raise_naming(exc, path)
                raise
            on_record()  # the freeze is made from here on: a Ctrl-C would get it made twice
            try:
                os.link(tmp, path)
            except FileExistsError:
                number += 1
                continue
            return number, path
        finally:
            Path(tmp).unlink(missing_ok=True)


def freeze(study_dir: Path, *, predict: list[str] | None = None, note: str | None = None) -> Frozen:
    """Freeze the current fit's hero forecast (and ``predict`` points: ``PARAMS:TOKENS``) as the next numbered
    forecast file. Refuses a fit that is not of the study's current results, and a fit without a hero forecast."""
    current = current_fit(study_dir)
    hero = current.hero
    if hero.loss is None:
        raise StateError(f"the fit has no hero forecast to freeze ({hero.loss_reason or hero.reason})")
    sd = layout.StudyDir(Path(study_dir))
    for key in ("params", "tokens", "loss"):  # what the freeze prints and scores against: read before writing
        v = getattr(hero, key)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise StateError(
                f"{sd.fit} is damaged (hero.{key}: {v!r}, but the hero has a forecast): refit with "
                f"`ladder fit {layout.shell_word(sd.path)}`; nothing written"
            )
    points = [_point(p) for p in current.fit.predictions if p.label != "hero"]
    in_context = None
    if predict:
        from ladder.reports.fits.study.fit_json import validate
        from ladder.reports.fits.study.study_hero import parse_predict

        given = parse_predict(predict)  # a bad point is the user's error before anything is fitted
        result = validate(refit(current, predict=predict).to_dict())  # as fit.json would hold it
        for _n, _d, label in given:  # a point no law forecasts would be frozen as nothing to score against
            row = next((p for p in result.predictions if p.label == label), None)
            if row is not None and row.loss is None:
                raise SpecError(
                    f"--predict {label}: {row.reason or 'the fit gives no forecast there'}: no forecast to freeze, "
                    "nothing written"
                )
        have = {p["label"] for p in points}
        points += [_point(p) for p in result.predictions if p.label != "hero" and p.label not in have]
        # the kinds at the freeze's own points come from the same refit
        in_context = _in_context(current.fit.in_context, result.in_context)
    started = hero_started(sd.path)
    number, path = _claim(sd, lambda n: frozen_record(current, points, note, n, in_context, started))
    return read_frozen_one(number, path)


def read_frozen_one(number: int, path: Path) -> Frozen:
    record = json.loads(path.read_text(encoding="utf-8"))
    forecast, problem = forecast_json.parse(record)
    return Frozen(number, path, record, f"damaged ({problem})" if problem else None, forecast)


def append_score(frozen: Frozen, score: dict, *, same: Callable[[dict, dict], bool] | None = None) -> bool:
    """Append ``score`` to the freeze's ``scores``: :func:`append_scores` of one score."""
    return append_scores(frozen, [score], same=same)


def append_scores(frozen: Frozen, new: list[dict], *, same: Callable[[dict, dict], bool] | None = None) -> bool:
    """Append the scores one ``forecast score`` took of this freeze (one per hero run it scored) to its ``scores``
    (an atomic rewrite; nothing else in the file changes), under the study's lock: a second ``forecast score`` at
    the same time appends to this one's list, never drops it. ``same(last, score)``: whether a score says what a
    score of the file says; when each of ``new`` says what the file's last ``len(new)`` scores say, in order
    (read under the lock, so that two identical scores at once are one), nothing is written and False is
    returned. Compared as a whole, not each with the file's last score: two heroes' scores would otherwise each
    differ from the other's and be appended again at every call."""
    with editing_study(frozen.path.parent):
        record = json.loads(frozen.path.read_text(encoding="utf-8"))
        scores = record.setdefault("scores", [])
        tail = scores[-len(new) :] if new else []
        repeated = (
            same is not None
            and len(tail) == len(new)
            and all(isinstance(last, dict) and same(last, score) for last, score in zip(tail, new))
        )
        if not repeated and new:
            scores.extend(layout.jsonable(score) for score in new)
            layout.atomic_write_text(frozen.path, json.dumps(record, indent=2) + "\n")
    frozen.record, frozen.forecast = record, forecast_json.FrozenForecast.model_validate(record)
    return not repeated


def _kind(f: Frozen) -> str:
    """What the freeze's hero forecast is, in the words of `forecast score` and the report: a prediction only once
    the hero's final loss checked that very point (not a --predict point beside it) and the freeze came first."""
    checked = [s for s in f.scores if s.get("final") and s.get("point") == "hero"]
    if not checked:
        return "projection"
    if f.record.get("after_hero") is True or checked[-1].get("frozen_before_training") is False:
        return "late check"  # frozen after the hero had trained: a check of the fit, not a prediction made first
    return "prediction"


def show_rows(study_dir: Path) -> list[dict]:
    """One row per freeze: number, time, hero forecast and interval, latest score, and whether the data changed."""
    now = results_hashes_of(study_dir)
    rows = []
    for f in read_frozen(study_dir):
        if f.problem:
            rows.append({"number": f.number, "file": f.path.name, "problem": f.problem})
            continue
        fc = f.forecast
        changed = now is not None and fc.results_sha256 not in now
        rows.append(
            {
                "number": f.number,
                "file": f.path.name,
                "frozen_at": fc.frozen_at,
                "note": fc.note,
                "hero": f.record["hero"],  # as the file holds them
                "predictions": f.record.get("predictions") or [],
                "scores": len(f.scores),
                "latest_score": f.latest_score,
                "final_score": f.final_score,
                "kind": _kind(f),
                "data_changed": changed,
                "warning": DATA_CHANGED if changed else None,
            }
        )
    return rows


def _curve_records(path: Path) -> list[dict]:
    """The records of a jsonl curve file. A line that is not a JSON object, or gives a key twice (JSON keeps the
    last), is refused, naming it: a curve that silently loses points scores the wrong forecast. A torn last line
    (a live metrics.jsonl being written) is the one line left out."""
    found = layout.read_jsonl_lines(path, unique_keys=True)
    bad = [(n, why) for n, why in found.bad if n != found.torn_tail]
    if bad:
        n, why = bad[0]
        raise SpecError(f"--curve {path}: line {n} is {why}; fix or remove it")
    # a NaN written as such (a diverged run's loss) is a value to refuse, not a missing one (null) to skip
    return [
        {k: "NaN" if isinstance(v, float) and math.isnan(v) else v for k, v in r.items()} if isinstance(r, dict) else r
        for r in found.records
    ]


class CurvePoint(NamedTuple):
    """One point of a hero's loss curve: ``kind`` (``tokens`` or ``step``: what ``x`` counts), ``x``, the eval
    loss, and where it is in the file it came from (``line 5``, ``record 3``; empty for a run's own books)."""

    kind: str
    x: float
    loss: float
    where: str = ""


def _cell(value: object) -> str:
    """A cell as the user wrote it, cut short when it is long (an integer of 400 digits)."""
    text = repr(value.item() if hasattr(value, "item") else value)  # 1e-300, not np.float64(1e-300)
    return text if len(text) <= 40 else f"{text[:12]}...{text[-4:]} ({len(text)} characters)"


def _numbers(column) -> tuple[Any, Any]:
    """The column as floats (NaN where a cell is empty or not a number; +-inf where it is an integer too large
    for a float, 10**400 written out: pandas raises OverflowError on the whole column) and where it is such a
    number."""
    import numpy as np
    import pandas as pd

    truth = np.array([isinstance(v, (bool, np.bool_)) for v in column], bool)  # True is no loss of 1
    if truth.any():
        column = column.astype(object).where(~truth, "")
    try:
        values = pd.to_numeric(column, errors="coerce").to_numpy(float)
        return values, np.zeros(len(values), bool)
    except OverflowError:
        pass
    values, huge = np.full(len(column), np.nan), np.zeros(len(column), bool)
    for i, v in enumerate(column):
        try:
            values[i] = float(pd.to_numeric(v, errors="coerce"))
        except OverflowError:
            huge[i], values[i] = True, -np.inf if str(v).lstrip().startswith("-") else np.inf
        except (TypeError, ValueError):
            pass
    return values, huge


def _refuse_repeated_columns(path: Path, sep: str) -> None:
    """A CSV header that names a column twice: pandas would read the second as ``eval_loss.1`` and score the first
    without a word."""
    import csv

    with path.open(encoding="utf-8", errors="replace", newline="") as f:
        header = next(csv.reader(f, delimiter=sep), [])
    names = [h.strip().lower() for h in header]  # read as the same column: " Tokens " is tokens
    twice = sorted({h for h in names if h and names.count(h) > 1})
    if twice:
        raise SpecError(
            f"--curve {path}: its header names column {', '.join(twice)} twice; keep one, nothing was scored"
        )


def curve_file_problem(given: str | Path) -> str | None:
    """Why ``--curve`` names no file to read (an empty path, a directory, a device), or None."""
    import stat

    if str(given) == "":
        return "an empty path: give the curve file"
    path = Path(given)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "no such file"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory, not a curve file"
    kind = (
        "a character device"
        if stat.S_ISCHR(mode)
        else "a block device"
        if stat.S_ISBLK(mode)
        else "a named pipe"
        if stat.S_ISFIFO(mode)
        else "a socket"
        if stat.S_ISSOCK(mode)
        else "not a file"
    )
    return f"not a regular file ({kind}): give the curve file"


def read_curve_points(path: str | Path) -> list[CurvePoint]:
    """The points of a hero's loss curve file (``forecast score --curve``), in order: (``tokens`` or ``step``, x,
    loss, where), from its ``tokens`` (or ``step``) and ``eval_loss`` (or ``loss``) columns. An empty cell is a
    row without that value (a train record of metrics.jsonl); any other value that is not a positive number, or
    a loss outside [:data:`MIN_LOSS`, :data:`MAX_LOSS`], is refused, naming its row; so are two rows with
    different losses at one x (a curve has one loss per point: keeping either would score a guess)."""
    import numpy as np
    import pandas as pd

    problem = curve_file_problem(path)
    if problem:
        raise SpecError(f"--curve {str(path)!r}: {problem}" if str(path) == "" else f"--curve {path}: {problem}")
    path = Path(path)
    suffix = path.suffix.lower()
    sep = "\t" if suffix == ".tsv" else ","
    try:
        if suffix in (".jsonl", ".json", ".ndjson"):
            df = pd.DataFrame(_curve_records(path))
        elif suffix in (".parquet", ".pq"):
            df = pd.read_parquet(path)
        else:
            _refuse_repeated_columns(path, sep)
            # only an empty cell is a row without that value: "nan" (a diverged run's loss) is read as written and
            # refused below, never dropped as if the row had no loss (the curve before it would be scored)
            df = pd.read_csv(path, sep=sep, keep_default_na=False, na_values=[""])
    except SpecError:
        raise
    except pd.errors.ParserError as exc:  # pandas' words ran over two lines, of a value written 1,000
        from ladder.reports.fits.study.runs_file import parser_error_words

        raise SpecError(f"--curve {path}: {parser_error_words(exc, sep, 'it')}") from None
    except Exception as exc:  # noqa: BLE001 - any reader error is the file's problem
        first = (str(exc).strip().splitlines() or [""])[0]
        raise SpecError(f"--curve {path}: cannot read it ({type(exc).__name__}: {first})") from None
    names = {str(c).strip().lower(): c for c in df.columns}  # " Tokens " is tokens
    if len(names) == len(df.columns):
        df = df.rename(columns={c: n for n, c in names.items()})
    if "run_id" in df.columns and df["run_id"].nunique() > 1:  # a study's curves.parquet or results table
        ids = [str(i) for i in df["run_id"].dropna().unique()]
        shown = ", ".join(ids[:3]) + (", ..." if len(ids) > 3 else "")
        raise SpecError(
            f"--curve {path}: holds the rows of {len(ids)} runs (run_id {shown}), read as one curve they mix the "
            "runs' points; give the hero's curve alone, nothing was scored"
        )
    x = next((c for c in ("tokens", "step") if c in df.columns), None)
    y = next((c for c in ("eval_loss", "loss") if c in df.columns), None)
    if x is None or y is None:
        own = [str(c) for c in df.columns]
        hint = ""
        if len(own) == 1 and any(ch in own[0] for ch in ",;\t"):  # one column: another separator than read
            hint = f" (one column: is the file separated by another character than {'a tab' if suffix == '.tsv' else 'commas'}?)"
        raise SpecError(
            f"--curve {path}: needs a tokens (or step) column and an eval_loss (or loss) column; it has "
            f"{', '.join(own) or 'none'}{hint}"
        )
    xs, x_huge = _numbers(df[x])
    # tokens written as counts, as everywhere else in ladder (4M, 1.5B): read as the numbers they name
    xs = np.array(
        [n if np.isfinite(n) or not isinstance(v, str) else (read_count(v.strip()) or n) for v, n in zip(df[x], xs)],
        float,
    )
    ys, y_huge = _numbers(df[y])
    json_or_parquet = suffix in (".jsonl", ".json", ".ndjson", ".parquet", ".pq")

    def where(i: int) -> str:
        return f"record {i + 1}" if json_or_parquet else f"line {i + 2}"  # the header is line 1

    checks = [  # an empty cell is a row without it; anything else must be a positive number, a loss a plausible one
        (x, xs, x_huge & (xs > 0), "is too large to be a number (beyond 1.8e308)"),
        (y, ys, y_huge & (ys > 0), f"is {TOO_LARGE}"),
        (x, xs, ~(np.isfinite(xs) & (xs > 0)), "is not a positive number"),
        (y, ys, ~(np.isfinite(ys) & (ys > 0)), "is not a positive number"),
        (y, ys, np.isfinite(ys) & (ys > MAX_LOSS), f"is {TOO_LARGE}"),
        (y, ys, np.isfinite(ys) & (ys > 0) & (ys < MIN_LOSS), f"is {TOO_SMALL}"),
    ]
    for col, _values, wrong, why in checks:
        bad = np.flatnonzero(df[col].notna().to_numpy() & wrong)
        if len(bad):
            raise SpecError(
                f"--curve {path}: {where(bad[0])}, column {col}: {_cell(df[col].iloc[bad[0]])} {why} "
                f"({len(bad)} such row{'s' if len(bad) > 1 else ''}); fix the file, nothing was scored"
            )
    good = np.isfinite(xs) & np.isfinite(ys) & (xs > 0) & (ys > 0)
    if not good.any():
        raise SpecError(f"--curve {path}: no row with a positive {x} and {y}")
    kind = "step" if x == "step" else "tokens"
    first: dict[float, int] = {}
    points = []
    for i in np.flatnonzero(good):
        at, loss = float(xs[i]), float(ys[i])
        if at in first:
            j = first[at]
            if float(ys[j]) == loss:
                continue  # the same point written twice (a resumed run's log): one point
            raise SpecError(
                f"--curve {path}: {where(j)} and {where(i)} both give {x} {_cell(df[x].iloc[i])}, with losses "
                f"{_cell(df[y].iloc[j])} and {_cell(df[y].iloc[i])}: a curve has one loss per point; keep the "
                "right one, nothing was scored"
            )
        first[at] = i
        points.append(CurvePoint(kind, at, loss, where(i)))
    return sorted(points)
