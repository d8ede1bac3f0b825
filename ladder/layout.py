"""The one module that knows the names of files in a study directory and a run directory.

A study directory::

    <study>/study.yaml         the study spec as planned (re-planning compares against it)
    <study>/plan.json          run ids of the current plan, in plan order
    <study>/jobs.json          every job ever submitted, per run (executor, job id, time)
    <study>/.jobs.lock         serialises writers of jobs.json
    <study>/submitit/          submitit's own job folders (pickles, stdout/stderr of each job's runs)
    <study>/logs/              local workers' own output (worker-<job id>.log), never the caller's terminal
    <study>/results.parquet    one row per run (``ladder collect``); also results.csv
    <study>/curves.parquet     per-step metrics of every run, long format
    <study>/fit.json           the fit result (``ladder fit``)
    <study>/forecast.json      the first frozen forecast (``ladder forecast freeze``) and its scores; a later
                               freeze is forecast-2.json, forecast-3.json, ... (none is ever overwritten)
    <study>/report/            report.html, report.pdf
    <study>/tensorboard/       TensorBoard logs, one folder per run (``tracking.kind: tensorboard``)
    <study>/runs/<run_id>/     one directory per run, named by the hash of its spec

A run directory::

    spec.json          the run spec, written once by ``ladder plan``
    .lock              held (flock) by the process training the run; holds its pid
    metrics.jsonl      appended while training: {"kind": "train"|"eval", "step", "tokens", ...}
    result.json        written atomically when the run ends (done, diverged or failed)
    error.json         written when the job raised (traceback), removed when a later attempt starts
    checkpoint.json    points at the newest complete checkpoint directory
    ckpt-<step>/       a resumable checkpoint (model, optimizer, schedule, data position, RNG)
    branch-<step>/     a trunk's snapshot for its cooldown branches: a checkpoint kept after the run ends
    model/             the final model and tokenizer (``save_pretrained``), loadable by transformers
    lm_eval/           lm-evaluation-harness results
    tracker.json       W&B (``tracking.kind: wandb``): the W&B run id and the last step logged to it
    wandb/             W&B's own files of the run (offline runs: ``wandb sync`` uploads them)
    result.unusable-<time>.json   a result.json the books found unusable, set aside when the run was retried
"""

from __future__ import annotations

import errno
import json
import math
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any

from ladder.errors import LadderError, StateError, shell_word  # shell_word: layout.shell_word to its readers

if TYPE_CHECKING:
    from ladder.model.config import RunSpec

SPEC = "spec.json"
METRICS = "metrics.jsonl"
RESULT = "result.json"
ERROR = "error.json"
CHECKPOINT_POINTER = "checkpoint.json"
CHECKPOINT_PREFIX = "ckpt-"
SNAPSHOT_PREFIX = "branch-"
MODEL = "model"
LM_EVAL = "lm_eval"
LOCK = ".lock"
TRACKER = "tracker.json"
TENSORBOARD = "tensorboard"

STUDY = "study.yaml"
PLAN = "plan.json"
JOBS = "jobs.json"
SUBMITIT = "submitit"
LOGS = "logs"
RESULTS_PARQUET = "results.parquet"
RESULTS_CSV = "results.csv"
CURVES = "curves.parquet"
FIT = "fit.json"
FORECAST = "forecast.json"
FORECAST_STEM, FORECAST_SUFFIX = "forecast", ".json"
REPORT = "report"
RUNS = "runs"
RUNS_TABLE_SUFFIXES = (".csv", ".tsv", ".parquet", ".pq", ".jsonl", ".ndjson", ".json")  # `ladder fit --runs` files


@dataclass(frozen=True)
class RunDir:
    path: Path

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def spec(self) -> Path:
        return self.path / SPEC

    @property
    def metrics(self) -> Path:
        return self.path / METRICS

    @property
    def result(self) -> Path:
        return self.path / RESULT

    @property
    def error(self) -> Path:
        return self.path / ERROR

    def set_aside_result(self) -> Path:
        """Move an unusable result.json out of the trainer's way (it would take the run for finished) to
        ``result.unusable-<UTC time>.json`` beside it, kept for the books; returns the new path."""
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
        target = self.path / f"{Path(RESULT).stem}.unusable-{stamp}{Path(RESULT).suffix}"
        os.replace(self.result, target)
        return target

    @property
    def checkpoint_pointer(self) -> Path:
        return self.path / CHECKPOINT_POINTER

    def checkpoint_dir(self, step: int) -> Path:
        return self.path / f"{CHECKPOINT_PREFIX}{step:09d}"

    def checkpoint_dirs(self) -> list[Path]:
        return sorted(p for p in self.path.glob(f"{CHECKPOINT_PREFIX}*") if p.is_dir())

    def snapshot_dir(self, step: int) -> Path:
        """Where a trunk keeps its state after ``step`` updates for the branches that start there."""
        return self.path / f"{SNAPSHOT_PREFIX}{step:09d}"

    def sibling(self, run_id: str) -> RunDir:
        """Another run of the same study (a branch's trunk)."""
        return RunDir(self.path.parent / run_id)

    @property
    def model(self) -> Path:
        return self.path / MODEL

    @property
    def lock(self) -> Path:
        return self.path / LOCK

    @property
    def lm_eval(self) -> Path:
        return self.path / LM_EVAL

    @property
    def tracker(self) -> Path:
        return self.path / TRACKER

    def read_spec(self, *, same_run: bool = False) -> RunSpec:
        """The run's ``spec.json`` as a :class:`~ladder.model.config.RunSpec`: every reader of a run's spec goes
        through here. Raises :class:`UnreadableSpec` when the run directory or its spec.json is missing, cannot be
        read or is not a valid run spec, and (``same_run``) when it is the spec of another run than the
        directory's; the original error, if any, is its ``__cause__``."""
        from ladder.model.config import RunSpec  # lazy: the layout stays a leaf that loads no model code

        if not self.path.is_dir():
            # a file where the folder goes: the repair, planning again, stopped at it ("File exists")
            in_the_way = next((p for p in (self.path, self.path.parent) if os.path.lexists(p) and not p.is_dir()), None)
            if in_the_way is not None:
                why = f"{in_the_way} is a file where a folder goes (remove it first: `rm {shell_word(in_the_way)}`)"
                raise UnreadableSpec(self, why, missing=True)
            raise UnreadableSpec(self, "its run directory is missing", missing=True)
        if os.path.exists(self.spec) and not os.path.isfile(self.spec) and not os.path.isdir(self.spec):  # a pipe waits
            raise UnreadableSpec(self, f"its {SPEC} is not a regular file (a pipe or a device: it would never be read)")
        try:
            text = self.spec.read_text(encoding="utf-8")
        except FileNotFoundError as exc:
            raise UnreadableSpec(self, f"its {SPEC} is missing", missing=True) from exc
        except IsADirectoryError as exc:  # the repair, planning again, stopped at it too ("not a file")
            why = f"{self.spec} is a folder where a file goes (remove it first: `rm -r {shell_word(self.spec)}`)"
            raise UnreadableSpec(self, why) from exc
        except (OSError, UnicodeDecodeError) as exc:
            raise UnreadableSpec(self, f"its {SPEC} cannot be read ({exc})") from exc
        try:
            spec = RunSpec.model_validate_json(text)
        except ValueError as exc:
            first = str(exc).strip().splitlines()
            why = f"its {SPEC} is not a valid run spec ({first[0] if first else type(exc).__name__})"
            raise UnreadableSpec(self, why) from exc
        beyond = _beyond_int64(spec.model_dump(mode="python"))
        if beyond:
            where, value = beyond
            raise UnreadableSpec(
                self, f"its {SPEC} is not a valid run spec ({where} is {float(value):.3g}, beyond a 64-bit count)"
            )
        if same_run and spec.run_id != self.run_id:
            raise UnreadableSpec(self, f"its {SPEC} is the spec of another run ({spec.run_id})")
        return spec

    def spec_or_none(self) -> RunSpec | None:
        """:meth:`read_spec`, or None when the spec cannot be read (for readers that pass over a damaged run)."""
        try:
            return self.read_spec()
        except UnreadableSpec:
            return None


INT64_MAX = 2**63 - 1  # the largest count a results table (int64 columns) holds


def _beyond_int64(value: Any, where: str = "") -> tuple[str, int] | None:
    """(the dotted field, the value) of the first integer in ``value`` (a spec's fields, nested) that no int64
    holds (a hand-edited ``params: 10**30`` once broke ``collect`` with pyarrow's OverflowError), or None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return (where or "value", value) if abs(value) > INT64_MAX else None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, (list, tuple)) else ()
    for key, item in items:
        found = _beyond_int64(item, f"{where}.{key}" if where else str(key))
        if found:
            return found
    return None


class UnreadableSpec(LadderError):
    """A run directory's ``spec.json`` is missing, cannot be read, or is not a valid run spec (of that run), from
    :meth:`RunDir.read_spec`. ``why`` says which, as a phrase about the run ("its spec.json is missing");
    ``missing`` is True when there is no run directory or no spec.json at all."""

    def __init__(self, run_dir: RunDir, why: str, *, missing: bool = False) -> None:
        super().__init__(f"run {run_dir.run_id} ({run_dir.path}): {why}")
        self.run_dir = run_dir
        self.why = why
        self.missing = missing


@dataclass(frozen=True)
class StudyDir:
    path: Path

    @property
    def study(self) -> Path:
        return self.path / STUDY

    @property
    def plan(self) -> Path:
        return self.path / PLAN

    def not_planned(self) -> str | None:
        """Why this is not a planned study directory, said for the user (the study file given instead of its
        folder, most often); None when it is one."""
        if self.path.is_file():  # `ladder status study.yaml`: the study file, not the folder its plan wrote
            if self.path.suffix.lower() in (".yaml", ".yml"):
                return (
                    f"{self.path} is a study file; give the directory `ladder plan {shell_word(self.path)}` writes "
                    "(./ladder-runs/<name>, or its --out)"
                )
            table = self.path.suffix.lower() in RUNS_TABLE_SUFFIXES  # a ladder trained elsewhere, as a runs table
            hint = f", or fit a table of runs trained elsewhere with `ladder fit --runs {shell_word(self.path)}`"
            return f"{self.path} is a file; give a study directory (the folder `ladder plan` writes)" + (
                hint if table else ""
            )
        if self.path.exists() and not self.path.is_dir():  # /dev/null, a socket, a fifo
            return (
                f"{self.path} is not a directory (nor a file); give a study directory (the folder `ladder plan` writes)"
            )
        if (self.path / SPEC).is_file() and not self.plan.is_file():  # a run's folder, STUDY/runs/<id>
            return f"{self.path} is a run directory; give its study directory ({self.path.parent.parent})"
        if not self.plan.is_file():
            w = shell_word(self.path)  # the study as a command to paste names it
            # `ladder plan` first is the wrong advice for a folder inside a planned study (its runs/, logs/) and
            # for a path that is not there (often a typo of the study directory's name)
            outer = enclosing_study(self.path)
            if outer is not None:
                return f"{self.path} is inside the study directory {outer}; give that directory"
            link = broken_link(self.path)
            if link:
                return f"{link}; give a study directory (the folder `ladder plan STUDY` writes) or mend the link"
            if not self.path.exists():
                return (
                    f"{self.path} does not exist; give a study directory (the folder `ladder plan STUDY` writes: "
                    "./ladder-runs/<name>, or its --out)"
                )
            if os.path.lexists(self.plan):  # a folder or a device where plan.json goes: "no plan.json" denied `ls`
                kind = "a directory" if self.plan.is_dir() else "not a regular file"
                # a bare `ladder plan` is a usage error, and with a study alone it plans into ./ladder-runs/<name>
                again = f"`ladder plan {w}`" if self.study.is_file() else f"`ladder plan STUDY --out {w}`"
                return f"{self.plan} is not a file ({kind}): remove it (`rm -r {w}/{PLAN}`), then run {again}"
            if self.study.is_file():  # planning it again in place rewrites plan.json
                return f"{self.path} is not a planned study directory (no {PLAN}); run `ladder plan {w}`"
            return (
                f"{self.path} is not a planned study directory (no {PLAN}); plan a study into it with "
                f"`ladder plan STUDY --out {w}`, or give the directory `ladder plan` wrote"
            )
        return None

    @property
    def jobs(self) -> Path:
        return self.path / JOBS

    @property
    def jobs_lock(self) -> Path:
        return self.path / ".jobs.lock"

    @property
    def submitit(self) -> Path:
        return self.path / SUBMITIT

    @property
    def logs(self) -> Path:
        return self.path / LOGS

    @property
    def results_parquet(self) -> Path:
        return self.path / RESULTS_PARQUET

    @property
    def results_csv(self) -> Path:
        return self.path / RESULTS_CSV

    @property
    def curves(self) -> Path:
        return self.path / CURVES

    @property
    def fit(self) -> Path:
        return self.path / FIT

    def forecast(self, number: int) -> Path:
        """The ``number``-th frozen forecast: ``forecast.json`` for the first, ``forecast-<n>.json`` after it."""
        if number < 1:
            raise ValueError(f"forecast numbers start at 1, got {number}")
        return self.path / (FORECAST if number == 1 else f"{FORECAST_STEM}-{number}{FORECAST_SUFFIX}")

    def forecasts(self) -> list[tuple[int, Path]]:
        """Every frozen forecast of the study as (number, path), oldest first."""
        found = []
        for p in self.path.glob(f"{FORECAST_STEM}*{FORECAST_SUFFIX}"):
            stem = p.name[len(FORECAST_STEM) : -len(FORECAST_SUFFIX)]
            if stem == "":
                found.append((1, p))
            elif stem.startswith("-") and stem[1:].isdigit() and int(stem[1:]) >= 2 and stem[1] != "0":
                found.append((int(stem[1:]), p))
        return sorted(found)

    @property
    def report(self) -> Path:
        return self.path / REPORT

    @property
    def runs(self) -> Path:
        return self.path / RUNS

    def run(self, run_id: str) -> RunDir:
        return RunDir(self.runs / run_id)

    def all_run_dirs(self) -> list[RunDir]:
        if not self.runs.is_dir():
            return []
        return [RunDir(p) for p in sorted(self.runs.iterdir()) if (p / SPEC).is_file()]


def broken_link(path: Path, *, named: bool = True) -> str | None:
    """What a symbolic link that leads nowhere is (``S -> S2`` with S2 deleted, or a loop of links), said so that
    "does not exist" does not contradict what ``ls`` shows: "S is a link to S2, which does not exist" (``named``
    False: from "a link to" on); None for any other path."""
    path = Path(path)
    if not os.path.islink(path) or os.path.exists(path):
        return None
    try:
        target = os.readlink(path)
        os.stat(path)
    except OSError as exc:
        why = "which links back to it in a loop" if exc.errno == errno.ELOOP else "which does not exist"
        return f"{path} is a link to {target}, {why}" if named else f"a link to {target}, {why}"
    return None


def expand_user(path: str | os.PathLike, what: str) -> Path:
    """``path`` with a leading ``~`` or ``~user`` expanded, as the shell would have; a LadderError naming ``what``
    and ``path`` where it cannot be (pathlib's bare "RuntimeError: Could not determine home directory.")."""
    try:
        return Path(path).expanduser()
    except RuntimeError:
        head = Path(path).parts[0]
        why = (
            f"{head} names no user of this machine"
            if head != "~"
            else f"~ has no home directory to stand for (HOME is unset and user id {os.getuid()} has no passwd entry)"
        )
        raise LadderError(f"{what} {str(path)!r}: {why}; give the path without ~") from None


def enclosing_study(path: Path) -> Path | None:
    """The planned study directory that ``path`` lies inside (an ancestor holding both study.yaml and plan.json: a
    study's runs/ folder or one of its run folders, say), or None. A folder with a study.yaml alone is a user's
    folder of study files, not a study."""
    path = Path(path)
    cwd = Path.cwd()
    for parent in Path(os.path.abspath(path)).parents:  # abspath folds "..": S/runs/../../T is not inside S
        sd = StudyDir(parent)
        if sd.study.is_file() and sd.plan.is_file():
            relative = not path.is_absolute() and (parent == cwd or cwd in parent.parents)
            return Path(os.path.relpath(parent, cwd)) if relative else parent  # as the user would type it
    return None


def refuse_if_not_a_file(path: Path, remedy: str) -> None:
    """Refuse (:class:`StateError`, one line) a study file that exists but is not a regular file (a directory in
    its place, say): reading it, or writing it anew, would fail with "Is a directory". ``remedy`` says what to run
    once it is removed."""
    path = Path(path)
    if not path.exists() or path.is_file():
        return
    kind = "a directory" if path.is_dir() else "not a regular file"
    raise StateError(f"{path} is not a file ({kind}): remove it (`rm -r {shell_word(path)}`), then {remedy}")


def result_status(rd: RunDir) -> str | None:
    """The ``status`` a finished run wrote to its ``result.json`` (done, diverged, failed); None while there is
    none or it cannot be read."""
    try:
        return loads_json(rd.result.read_text()).get("status") if rd.result.is_file() else None  # no pipe's wait
    except (OSError, ValueError, AttributeError):
        return None


def atomic_write_text(path: Path, text: str, *, remedy: str = "run the command again") -> None:
    """Write ``text`` so that readers see the old file or the new one, never a half-written one."""

    def write(tmp: Path) -> None:
        with tmp.open("w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())

    atomic_write(path, write, remedy=remedy)


def atomic_write(path: Path, write: Callable[[Path], None], *, remedy: str = "run the command again") -> None:
    """Write ``path`` through a temporary file beside it (``write`` writes the path it is given), renamed into
    place. A directory (or other non-file) in the file's place is refused before anything is written
    (:func:`refuse_if_not_a_file`: one line naming the ``rm -r``, then ``remedy``), and the temporary file never
    stays behind, whatever fails."""
    path = Path(path)
    refuse_if_not_a_file(path, remedy)
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = stat.S_IMODE(path.stat().st_mode) if path.is_file() else None  # a read-only freeze stays read-only
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    tmp = Path(name)
    try:
        try:
            os.fchmod(fd, 0o644)  # mkstemp makes files private; a shared cache or study must stay readable
        finally:
            os.close(fd)
        write(tmp)
        if mode not in (None, 0o644):  # the rewritten file's mode, set once written (0o444 allows no write)
            tmp.chmod(mode)
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, IsADirectoryError):  # a directory made in its place meanwhile
            refuse_if_not_a_file(path, remedy)
        if isinstance(exc, OSError):
            raise_naming(exc, path)
        raise


def raise_naming(exc: OSError, path: Path) -> None:
    """Raise ``exc`` again naming ``path`` when it names no file (a full disk's ENOSPC from a write or fsync said
    "No space left on device (OSError)", with no path); return when it names one already."""
    if exc.errno and exc.filename is None:
        raise type(exc)(exc.errno, exc.strerror, str(path)) from None


def check_writable(folder: Path) -> None:
    """Raise now the OSError that writing into ``folder`` (or, while it does not exist, its parent) would raise
    later: before work whose results could not be kept (a read-only study: an hour of lm-eval, then a
    PermissionError). A temporary file is made there and removed; nothing is left behind."""
    folder = Path(folder)
    fd, tmp = tempfile.mkstemp(dir=folder if folder.is_dir() else folder.parent, prefix=".ladder-probe.")
    os.close(fd)
    os.unlink(tmp)


def atomic_write_json(path: Path, obj: Any) -> None:
    """Write ``obj`` as JSON every parser reads: a NaN or inf in it is written null (:func:`jsonable`), never the
    NaN/Infinity tokens that jq, JavaScript and strict parsers refuse."""
    atomic_write_text(path, json.dumps(jsonable(obj), indent=2, sort_keys=False) + "\n")


def jsonable(obj: Any) -> Any:
    """Plain JSON types, so that every JSON the project writes parses everywhere: numpy scalars and arrays and
    pandas series to Python, tuples and sets to lists, NaN and inf to None, paths to str, objects with a
    ``to_dict()`` through it. Anything else is returned as it is."""
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return float(obj) if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, PurePath):
        return str(obj)
    if hasattr(obj, "tolist"):  # numpy arrays and scalars, pandas series
        return jsonable(obj.tolist())
    if hasattr(obj, "to_dict"):
        return jsonable(obj.to_dict())
    if hasattr(obj, "item"):
        return jsonable(obj.item())
    return obj


def append_jsonl(path: Path, record: dict[str, Any]) -> None:
    """Append one record as one line; flushed to disk so a kill -9 loses at most the line being written. A NaN or
    inf in it (an evaluation that overflowed) is written null, as :func:`atomic_write_json` writes it."""
    line = json.dumps(jsonable(record)) + "\n"
    with open(path, "a", encoding="utf-8") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Yield the complete records of a jsonl file. A torn last line (the writer was killed) is skipped, and so
    is a corrupt line anywhere: one bad line costs that line, never the file (:func:`read_jsonl_lines` says
    which lines it skipped)."""
    yield from read_jsonl_lines(path).records


@dataclass(frozen=True)
class JsonlLines:
    """What :func:`read_jsonl_lines` found: the good records (with their line numbers) and every line it skipped."""

    records: list[dict[str, Any]]
    line_numbers: list[int]
    bad: list[tuple[int, str]]  # (line number, what is wrong) of each skipped line, torn last line included
    torn_tail: int | None  # line number of a last line without its newline (a writer stopped mid-line), if any


class RepeatedKey(ValueError):
    """A JSON object that gives one key twice (JSON itself would keep the last, silently)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"gives the key {key!r} twice (JSON would keep only the last)")
        self.key = key


def no_repeated_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` for files a user hands in: a key given twice is refused (:class:`RepeatedKey`),
    never read as its last value."""
    record: dict[str, Any] = {}
    for key, value in pairs:
        if key in record:
            raise RepeatedKey(key)
        record[key] = value
    return record


def loads_json(text: str | bytes, **kwargs: Any) -> Any:
    """``json.loads``, except that a document nested deeper than Python's recursion allows (a file of [[[[...) is
    the ValueError that every reader of a damaged file catches, not a RecursionError traceback."""
    try:
        return json.loads(text, **kwargs)
    except RecursionError:
        raise ValueError("nested too deeply (thousands of [ or {) to be a file ladder wrote") from None


def read_jsonl_lines(path: Path, *, unique_keys: bool = False) -> JsonlLines:
    """Every record of a jsonl file that parses as a JSON object, never raising on a bad line: a line that is
    not UTF-8, not JSON or not an object is skipped and named (1-based line number). A last line without its
    newline is skipped too and reported as torn: a live writer may be in the middle of it. ``unique_keys``: a
    line that gives a key twice is a bad line too (a user's file; the run's own books never repeat one). Raises
    OSError only when the file itself cannot be read."""
    hook = no_repeated_keys if unique_keys else None
    records: list[dict[str, Any]] = []
    numbers: list[int] = []
    bad: list[tuple[int, str]] = []
    torn = None
    with open(path, "rb") as f:
        raw_lines = f.read().split(b"\n")
    tail = raw_lines.pop()  # after the last newline: b"" when the file ends with one
    if tail:
        torn = len(raw_lines) + 1
        bad.append((torn, f"torn last line, no newline ({len(tail)} bytes; the writer stopped mid-line)"))
    for i, raw in enumerate(raw_lines, start=1):
        if not raw.strip():
            continue
        try:
            rec = loads_json(raw.decode("utf-8"), object_pairs_hook=hook)
        except UnicodeDecodeError:
            bad.append((i, "not UTF-8 text"))
            continue
        except RepeatedKey as exc:
            bad.append((i, f"a record that {exc}"))
            continue
        except ValueError as exc:
            bad.append((i, f"unreadable JSON ({exc})"))
            continue
        if not isinstance(rec, dict):
            bad.append((i, f"a JSON {type(rec).__name__}, not an object"))
            continue
        records.append(rec)
        numbers.append(i)
    bad.sort()
    return JsonlLines(records=records, line_numbers=numbers, bad=bad, torn_tail=torn)
