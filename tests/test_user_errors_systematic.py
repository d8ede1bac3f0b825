"""Issue 28, closed by class: every command that reads or writes a study, tried against an unwritable or missing
target, Ctrl-C at a random moment, non-finite and absurd numbers in every numeric field and option, and a damaged
study. Each answer is one line ``error: ...`` on stderr and exit 2 (130 and "interrupted: run the same command to
continue" for Ctrl-C), never a traceback, and nothing written. No training: fake runs (tests.fake_runs,
tests.hero_fixture)."""

from __future__ import annotations

import builtins
import json
import math
import os
import random
import shutil
import signal
import sys
import tempfile
import typing
from pathlib import Path

import pytest
import yaml

from tests.cli_helpers import one_line, run_cli, taken_or_refused

BASE = {
    "name": "t",
    "data": {"seq_len": 64},
    "model": {"vocab_size": 320, "head_dim": 16},
    "ladder": {"sizes": ["10K", "20K", "40K", "80K", "160K"]},  # 5 at one ratio: the rollout has a law to fit
    "hero": {"params": "1M"},
    "sanity_check": False,
}


def _interrupted(r) -> None:
    assert r.code == 130, (r.code, r.stderr[-2000:])
    assert r.stderr.strip().splitlines()[-1] == "interrupted: run the same command to continue", r.stderr
    assert "Traceback" not in r.stderr + r.stdout


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _study_file(tmp_path: Path, spec: dict, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.fixture(scope="module")
def fitted_master(tmp_path_factory):
    from tests.hero_fixture import make_ladder

    return make_ladder(tmp_path_factory.mktemp("fitted") / "study", n_boot=10)


@pytest.fixture()
def fitted(fitted_master, tmp_path):
    root = tmp_path / "study"
    shutil.copytree(fitted_master, root)
    return root


# ---- Ctrl-C ------------------------------------------------------------------------------------------------

ROOT = str(Path(__file__).resolve().parents[1])


def _ctrl_c_after(n_lines: int):
    """A trace function that raises KeyboardInterrupt at the n-th line ladder's own code executes: Ctrl-C at a
    moment the test does not choose by hand."""
    count = [0]

    def local(frame, event, arg):
        if event == "line":
            count[0] += 1
            if count[0] == n_lines:
                sys.settrace(None)
                raise KeyboardInterrupt
        return local

    def global_(frame, event, arg):
        name = frame.f_code.co_filename
        if name.startswith(ROOT) and "/tests/" not in name and "/.venv/" not in name and count[0] < n_lines:
            return local
        return None

    return global_


CTRL_C_COMMANDS = {
    "collect": lambda s: ("collect", s),
    "fit": lambda s: ("fit", s, "--bootstrap", "3"),
    "forecast freeze": lambda s: ("forecast", "freeze", s),
    "hero": lambda s: ("hero", s),
    "status": lambda s: ("status", s),
    "forecast show": lambda s: ("forecast", "show", s),
}


@pytest.mark.parametrize("moment", [40, 400, 4000])
@pytest.mark.parametrize("command", list(CTRL_C_COMMANDS))
def test_ctrl_c_at_a_moment_is_one_line_and_the_same_command_continues(fitted, capsys, command, moment):
    import ladder.cli  # noqa: F401 - imported before the console script's main() runs: not part of a command

    args = CTRL_C_COMMANDS[command](fitted)
    old = sys.gettrace()
    sys.settrace(_ctrl_c_after(moment))
    try:
        r = run_cli(capsys, *args)
    finally:
        sys.settrace(old)
    if r.code != 130:  # the command finished before that many lines: nothing to interrupt
        assert r.code == 0, (r.code, r.stderr)
    else:
        _interrupted(r)
    again = run_cli(capsys, *args)  # nothing lost: the same command continues and ends well
    assert again.code == 0, (again.code, again.stderr)


@pytest.mark.parametrize("command", ["collect", "fit", "report"])
def test_ctrl_c_in_collect_fit_and_report_says_so(fitted, capsys, monkeypatch, command):
    import pandas as pd

    import ladder.reports.render as render

    def stop(*a, **k):
        raise KeyboardInterrupt

    import ladder.books.collect

    if command == "report":
        monkeypatch.setattr(render, "render_report", stop)
    elif command == "collect":
        monkeypatch.setattr(ladder.books.collect, "collect", stop)
    else:
        monkeypatch.setattr(pd, "read_parquet", stop)
    r = run_cli(capsys, command, fitted)
    _interrupted(r)
    assert "collected" not in r.stdout


def test_ctrl_c_while_submit_trains_in_process(capsys, monkeypatch, tmp_path):
    """`submit --executor debug` trains in this process: the training loop's SIGINT stop (a checkpoint written,
    Preempted raised) is one line and exit 130, not a traceback."""
    import ladder.jobs.on_node as node_jobs
    from ladder.model.training.preemption import Preempted
    from tests.fake_runs import plan_micro

    root = tmp_path / "study"
    plan_micro(root)

    def preempted(run_dir, **kw):
        raise Preempted(signal.SIGINT, 3, Path(run_dir) / "checkpoints" / "step_3")

    monkeypatch.setattr(node_jobs, "run_one", preempted)
    _interrupted(run_cli(capsys, "submit", root, "--executor", "debug"))


def test_sigterm_while_training_says_which_signal(capsys, monkeypatch, tmp_path):
    import ladder.jobs.on_node as node_jobs
    from ladder.model.training.preemption import Preempted
    from tests.fake_runs import plan_micro

    root = tmp_path / "study"
    plan_micro(root)
    monkeypatch.setattr(
        node_jobs, "run_one", lambda run_dir, **kw: (_ for _ in ()).throw(Preempted(signal.SIGTERM, 3, None))
    )
    r = run_cli(capsys, "submit", root, "--executor", "debug")
    assert r.code == 143 and r.stderr.strip().endswith("stopped by SIGTERM: run the same command to continue")


# ---- unwritable and missing targets ------------------------------------------------------------------------


def test_report_and_plan_to_places_that_cannot_be_written(fitted, capsys, tmp_path):
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    before = _files(tmp_path)
    one_line(run_cli(capsys, "report", fitted, "--out", "/proc/ladder-x", "--format", "html"), "/proc/ladder-x")
    one_line(
        run_cli(capsys, "report", fitted, "--out", a_file / "sub", "--format", "html"),
        str(a_file / "sub"),
        "not a folder",
    )
    spec = _study_file(tmp_path, BASE)
    one_line(run_cli(capsys, "plan", spec, "--out", "/proc/ladder-x"), "/proc/ladder-x")
    one_line(run_cli(capsys, "plan", spec, "--out", a_file / "sub"), str(a_file / "sub"))
    before[spec.name] = spec.read_bytes()
    assert _files(tmp_path) == before


class ReadOnly:
    """Writes under ``root`` fail with PermissionError, as in a study directory without write permission (the
    tests run as root, whom chmod does not stop). ``only``: just the files of that name."""

    def __init__(self, monkeypatch, root: Path, only: str | None = None):
        import pandas as pd

        self.root, self.only = str(Path(root).resolve()), only
        real_open, real_replace, real_mkdir, real_mkstemp = builtins.open, os.replace, os.mkdir, tempfile.mkstemp
        real_parquet = pd.DataFrame.to_parquet

        def check(path, write=True):
            if not write:
                return
            p = str(Path(os.fspath(path)).resolve())
            if p.startswith(self.root) and (self.only is None or Path(p).name == self.only):
                raise PermissionError(13, "Permission denied", os.fspath(path))

        def open_(file, mode="r", *a, **k):
            if isinstance(file, (str, os.PathLike)):
                check(file, any(c in mode for c in "wax+"))
            return real_open(file, mode, *a, **k)

        def replace(src, dst, *a, **k):
            check(dst)
            return real_replace(src, dst, *a, **k)

        def mkdir(path, *a, **k):
            check(path)
            return real_mkdir(path, *a, **k)

        def mkstemp(*a, dir=None, **k):
            if dir is not None and self.only is None:
                check(Path(dir) / "x")
            return real_mkstemp(*a, dir=dir, **k)

        def to_parquet(df, path, *a, **k):
            if isinstance(path, (str, os.PathLike)):
                check(path)
            return real_parquet(df, path, *a, **k)

        monkeypatch.setattr(builtins, "open", open_)
        monkeypatch.setattr(os, "replace", replace)
        monkeypatch.setattr(os, "mkdir", mkdir)
        monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
        monkeypatch.setattr(pd.DataFrame, "to_parquet", to_parquet)


READ_ONLY_COMMANDS = {
    "collect": lambda s: ("collect", s),
    "fit": lambda s: ("fit", s, "--bootstrap", "3"),
    "forecast freeze": lambda s: ("forecast", "freeze", s),
    "hero": lambda s: ("hero", s),
    "report": lambda s: ("report", s, "--format", "html"),
}


@pytest.mark.parametrize("command", list(READ_ONLY_COMMANDS))
def test_a_read_only_study_is_one_line_naming_the_path(fitted, capsys, monkeypatch, command):
    before = _files(fitted)
    with monkeypatch.context() as m:
        ReadOnly(m, fitted)
        r = run_cli(capsys, *READ_ONLY_COMMANDS[command](fitted))
    one_line(r, "cannot use", str(fitted), "Permission denied")
    assert _files(fitted) == before


def test_a_failed_hero_leaves_no_orphan_run_folder(fitted, capsys, monkeypatch):
    runs_before = sorted(p.name for p in (fitted / "runs").iterdir())
    with monkeypatch.context() as m:
        ReadOnly(m, fitted, only="plan.json")  # runs/ is writable, the study's plan.json is not
        one_line(run_cli(capsys, "hero", fitted), "plan.json", "Permission denied")
    assert sorted(p.name for p in (fitted / "runs").iterdir()) == runs_before
    r = run_cli(capsys, "hero", fitted)  # and it plans once it can write
    assert r.code == 0, r.stderr
    assert len(list((fitted / "runs").iterdir())) == len(runs_before) + 1


MISSING = [
    ("status", ["status"]),
    ("collect", ["collect"]),
    ("fit", ["fit"]),
    ("report", ["report"]),
    ("hero", ["hero"]),
    ("forecast freeze", ["forecast", "freeze"]),
    ("forecast show", ["forecast", "show"]),
    ("forecast score", ["forecast", "score"]),
    ("submit", ["submit"]),
    ("eval", ["eval"]),
    ("cancel", ["cancel"]),
]


@pytest.mark.parametrize("name,command", MISSING, ids=[n for n, _ in MISSING])
def test_a_missing_or_empty_study_is_one_line(tmp_path, capsys, name, command):
    one_line(run_cli(capsys, *command, tmp_path / "nosuch"))
    empty = tmp_path / "empty"
    empty.mkdir()
    one_line(run_cli(capsys, *command, empty))
    assert list(empty.iterdir()) == []


def test_forecast_show_of_no_study(tmp_path, capsys):
    """`forecast show S/runs` said "no study at S/runs (no plan.json)" where status and score name S."""
    one_line(run_cli(capsys, "forecast", "show", tmp_path / "notastudy"), "does not exist")
    one_line(run_cli(capsys, "forecast", "show", tmp_path), "not a planned study directory")
    study = tmp_path / "s"
    (study / "runs").mkdir(parents=True)
    (study / "study.yaml").write_text("name: s\n")
    (study / "plan.json").write_text("{}")
    for command in (("forecast", "show"), ("forecast", "score"), ("status",)):
        one_line(run_cli(capsys, *command, study / "runs"), f"inside the study directory {study}")


def test_commands_on_a_study_file_that_does_not_exist(tmp_path, capsys):
    for args in (("plan",), ("plan", "--dry-run"), ("studies", "validate"), ("sanity",), ("run",)):
        command, *rest = args
        full = (
            *([command] if command != "studies" else ["studies", "validate"]),
            tmp_path / "nosuch.yaml",
            *rest[: 1 if command != "studies" else 0],
        )
        one_line(run_cli(capsys, *full), "nosuch.yaml")


# ---- non-finite and absurd numbers in every numeric field ---------------------------------------------------


def _numeric_fields(model, prefix=()):
    from pydantic import BaseModel

    for name, f in model.model_fields.items():
        ann = f.annotation
        sub = next((a for a in (ann, *typing.get_args(ann)) if isinstance(a, type) and issubclass(a, BaseModel)), None)
        if sub is not None:
            yield from _numeric_fields(sub, prefix + (name,))
            continue
        text = repr(ann)
        if ("int" in text or "float" in text) and not text.startswith("<class 'bool'>"):
            yield prefix + (name,), "list" in text


ABSURD = [math.inf, -math.inf, math.nan, 1e300, 1e-300, 0, -1, 1e18, "1e400"]


def _with(spec: dict, path: tuple, value, is_list: bool) -> dict | None:
    spec = json.loads(json.dumps(spec))
    if path[:2] == ("ladder", "replicates"):
        spec["ladder"]["replicates"] = {"sizes": ["10K"], "seeds": [1]}
    if path == ("hero", "compute"):
        spec["hero"] = {}
    if path[0] == "ladder" and path[1] in ("compute_budgets", "isoflop_sizes", "isoflop_points", "isoflop_span"):
        spec["ladder"] = {"mode": "isoflop", "compute_budgets": [1e12, 4e12]}
    node = spec
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = [value] if is_list else value
    if path[-1] == "isoflop_sizes":
        node[path[-1]] = [value, 20000, 40000]
    return spec


def test_every_numeric_field_of_a_study_takes_any_number_without_a_traceback(tmp_path, capsys):
    """Every numeric field of the study schema, every absurd value: `studies validate` and `plan --dry-run`
    either accept it (exit 0) or refuse it in one line naming the field (exit 2)."""
    from ladder.studies.spec import StudySpec

    fields = list(_numeric_fields(StudySpec))
    assert len(fields) > 40
    bad = []
    for path, is_list in fields:
        for value in ABSURD:
            spec = _study_file(tmp_path, _with(BASE, path, value, is_list))
            for args in (("studies", "validate", spec), ("plan", spec, "--dry-run")):
                try:
                    r = run_cli(capsys, *args)
                except Exception as exc:  # noqa: BLE001 - what the old code did
                    bad.append(f"{'.'.join(path)} = {value!r}: {args[0]}: {type(exc).__name__}: {exc}"[:300])
                    continue
                problem = taken_or_refused(r)
                if problem:
                    bad.append(f"{'.'.join(path)} = {value!r}: {args[0]}: {problem}")
                elif r.code == 2 and value in (math.inf, -math.inf) and path[-1] not in r.stderr:
                    bad.append(f"{'.'.join(path)} = {value!r}: the line does not name the field: {r.stderr}")
    assert not bad, "\n".join(bad[:20])


def test_a_boolean_in_a_numeric_field_or_a_number_in_a_boolean_one_is_refused_naming_the_field(tmp_path, capsys):
    """pydantic reads `true` as 1 and `1` as true; a study once trained `tokens_per_param: true` at 1 token/param.
    Every numeric field refuses true and false, every true/false field refuses a number, naming the field."""
    from ladder.studies.spec import StudySpec

    bad = []
    for path, is_list in _numeric_fields(StudySpec):
        for value in (True, False):
            r = run_cli(capsys, "studies", "validate", _study_file(tmp_path, _with(BASE, path, value, is_list)))
            line = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
            refused = "give a number" in line or "must be a valid dictionary" in line  # slurm.additional: a mapping
            if r.code != 2 or path[-1] not in line or not refused:
                bad.append(f"{'.'.join(path)} = {value}: exit {r.code}: {line}")
    for path in (("ablations", "tie_embeddings"), ("model", "tie_embeddings"), ("hero", "tied"), ("sanity_check",)):
        spec = json.loads(json.dumps(BASE))
        node = spec
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = [True, 1] if path[-1] == "tie_embeddings" and path[0] == "ablations" else 1
        r = run_cli(capsys, "studies", "validate", _study_file(tmp_path, spec))
        if r.code != 2 or "give true or false" not in r.stderr or path[-1] not in r.stderr:
            bad.append(f"{'.'.join(path)} = 1: exit {r.code}: {r.stderr.strip()[-200:]}")
    assert not bad, "\n".join(bad[:20])


@pytest.mark.parametrize(
    "path,value,words",
    [
        (("sanity_check",), "yes", "give true or false"),  # lax pydantic read "yes" as true and "nein" as an error
        (("sanity_check",), "no", "give true or false"),
        (("hero", "tied"), "0", "give true or false"),
        (("training", "compile"), "yes", "give true or false (unquoted) or auto"),  # bool | "auto": "yes" was true
        (("executor", "slurm", "additional"), {"": "x"}, "additional"),  # an sbatch option without a name
        (("executor", "slurm", "additional"), {"--exclusive": True}, "additional"),
        (("tracking",), {"kind": "none", "project": "x"}, "project is a W&B field, and kind is 'none'"),
        (("tracking",), {"kind": "tensorboard", "entity": "e", "tags": ["a"]}, "entity, tags are W&B fields"),
    ],
    ids=[
        "yes",
        "no",
        "tied-0",
        "compile-yes",
        "empty-sbatch-key",
        "dashed-sbatch-key",
        "project-without-wandb",
        "tb-with-wandb",
    ],
)
def test_values_that_were_accepted_and_meant_nothing_are_refused_naming_the_field(tmp_path, capsys, path, value, words):
    """Found in a re-trial: these passed validate, and the run then ignored (or misread) them."""
    spec = json.loads(json.dumps(BASE))
    node = spec
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value
    r = run_cli(capsys, "studies", "validate", _study_file(tmp_path, spec))
    assert r.code == 2, r.stdout + r.stderr
    line = r.stderr.strip().splitlines()[-1]
    assert words in line and path[-1] in line, line


def _every_field(model, prefix=()):
    """Every field path of a pydantic model, its sections included (a section given a scalar is a case too)."""
    from pydantic import BaseModel

    for name, f in model.model_fields.items():
        ann = f.annotation
        yield prefix + (name,)
        sub = next((a for a in (ann, *typing.get_args(ann)) if isinstance(a, type) and issubclass(a, BaseModel)), None)
        if sub is not None:
            yield from _every_field(sub, prefix + (name,))


WEIRD = [
    None, "", " ", "x" * 5000, "\x00", "../../etc", "1e400", "-5K", "K", "nan", "2024-01-01", "auto", "yes",
    0, -1, 1, 3, 2**70, -(2**70), 1e308, -1e308, 1e-320, math.inf, -math.inf, math.nan, True, False,
    [], [None], [[]], [0.5, 0.5], ["a", 1], [1e308], {}, {"x": 1}, {"sizes": []},
]  # fmt: skip


def test_random_changes_to_a_study_are_taken_or_refused_in_one_line(tmp_path, capsys):
    """A seeded fuzz over the whole schema, beyond the lists above: 400 studies, each with one to three fields
    (or whole sections) set to odd values (text, nulls, lists, mappings, bytes, huge and non-finite numbers).
    `studies validate` and `plan --dry-run` take each (exit 0) or refuse it in one line (exit 2); never a
    traceback, and nothing written beside the study file."""
    from ladder.studies.spec import StudySpec

    rng = random.Random(28)
    fields = list(_every_field(StudySpec))
    assert len(fields) > 80
    bad = []
    for trial in range(400):
        spec = json.loads(json.dumps(BASE))
        changes = []
        for _ in range(rng.choice((1, 1, 2, 3))):
            path, value = rng.choice(fields), rng.choice(WEIRD)
            node = spec
            for key in path[:-1]:
                if not isinstance(node.get(key), dict):
                    node[key] = {}
                node = node[key]
            node[path[-1]] = value
            changes.append(f"{'.'.join(path)} = {value!r:.40}")
        study = _study_file(tmp_path, spec)
        for args in (("studies", "validate", study), ("plan", study, "--dry-run")):
            try:
                r = run_cli(capsys, *args)
            except Exception as exc:  # noqa: BLE001 - a bug: what the test is for
                bad.append(f"{'; '.join(changes)}: {args[0]}: {type(exc).__name__}: {exc}"[:300])
                continue
            problem = taken_or_refused(r)
            if problem:
                bad.append(f"{'; '.join(changes)}: {args[0]}: {problem}")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"], changes
    assert not bad, f"{len(bad)} of 800 answers:\n" + "\n".join(bad[:20])


ODD_JSON = [True, False, None, [], ["a"], {"k": 1}, 10**400, -(10**400), "3.1", "abc", 1e308, 0, -1]


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


ODD_CELLS = ["1", "0.5", "1e-3", "1e30", "", "nan", "inf", "-inf", "-1", "0", "1e400", "abc", "1e-300", "1e308",
             "  ", "true", "0x10", "2.5.1", '"x"', "9" * 400]  # fmt: skip


def test_random_damage_to_a_runs_file_is_fitted_or_refused_in_one_line(tmp_path, capsys):
    """A seeded fuzz of `fit --runs`: 150 copies of a good 15-run table, each with one or two cells (or the
    header) made odd. Each is fitted (exit 0) or refused in one line (exit 2), never a traceback; a token count of
    1e-300 once made the forecast's widening overflow."""
    e, a, b, alpha, beta = 1.7, 400.0, 410.0, 0.34, 0.28
    good = [
        [n, n * r, e + a * n**-alpha + b * (n * r) ** -beta] for n in (1e6, 2e6, 4e6, 8e6, 1.6e7) for r in (10, 20, 40)
    ]
    rng = random.Random(28)
    bad = []
    for trial in range(150):
        rows = [[f"{n:g}", f"{d:g}", f"{loss:.4f}"] for n, d, loss in good]
        changes = []
        for _ in range(rng.choice((1, 1, 2))):
            i, j, cell = rng.randrange(len(rows)), rng.randrange(3), rng.choice(ODD_CELLS)
            rows[i][j] = cell
            changes.append(f"row {i} col {j} = {cell[:12]!r}")
        header = "params,tokens,loss"
        if rng.random() < 0.15:
            header = rng.choice(["params,tokens,loss,loss", "params,tokens", "params,,loss", "Params,Tokens,Loss"])
            changes.append(f"header {header!r}")
        runs = tmp_path / "runs.csv"
        runs.write_text(header + "\n" + "\n".join(",".join(r) for r in rows) + "\n")
        if trial % 3 == 2:  # a JSON-lines table: cells of every JSON type (a W&B export's tags are lists)
            runs.unlink()
            runs = tmp_path / "runs.jsonl"
            names = header.split(",")
            cells = [[json.loads(c) if _is_json(c) else c for c in r] for r in rows]
            for _ in range(rng.choice((1, 2))):
                i, j, cell = rng.randrange(len(rows)), rng.randrange(3), rng.choice(ODD_JSON)
                cells[i][j] = cell
                changes.append(f"jsonl row {i} col {j} = {str(cell)[:12]!r}")
            runs.write_text("".join(json.dumps(dict(zip(names, r))) + "\n" for r in cells))
        try:
            r = run_cli(capsys, "fit", "--runs", runs, "--bootstrap", "5", "--predict", "1e8:2e9")
        except Exception as exc:  # noqa: BLE001 - a bug: what the test is for
            bad.append(f"{'; '.join(changes)}: {type(exc).__name__}: {exc}"[:300])
            continue
        problem = taken_or_refused(r)
        if problem:
            bad.append(f"{'; '.join(changes)}: {problem}")
    assert not bad, f"{len(bad)} of 150:\n" + "\n".join(bad[:20])


INF_CASES = [
    ({"ladder": {"sizes": ["10K", "20K", "40K", "80K"], "tokens_per_param": math.inf}}, "ladder.tokens_per_param"),
    ({"ladder": {"sizes": ["10K", "20K", "40K", "80K"], "budgets": [math.inf]}}, "ladder.budgets[0]"),
    ({"hero": {"compute": math.inf}}, "hero.compute"),
    ({"ladder": {"sizes": ["10K", "20K", "40K", "80K"], "tokens_per_param": 1e300}}, "tokens_per_param"),
    ({"hero": {"compute": 1e300}}, "hero.compute"),
    ({"hero": {"params": "1M", "aspect_ratio": 1e300}}, "hero.aspect_ratio"),
    ({"ablations": {"batch_multipliers": [1e300]}}, "ablations.batch_multipliers[0]"),
]


@pytest.mark.parametrize("command", ["validate", "plan", "run", "sanity"])
@pytest.mark.parametrize("changes,field", INF_CASES, ids=[f for _, f in INF_CASES])
def test_infinity_in_a_study_names_the_field(tmp_path, capsys, changes, field, command):
    spec = _study_file(tmp_path, {**BASE, **changes})
    before = _files(tmp_path)
    args = {
        "validate": ("studies", "validate", spec),
        "plan": ("plan", spec, "--out", tmp_path / "out"),
        "run": ("run", spec, "--out", tmp_path / "out"),
        "sanity": ("sanity", spec),
    }[command]
    one_line(run_cli(capsys, *args), field)
    assert _files(tmp_path) == before


OPTION_CASES = [
    (("fit", "{runs}", "--bootstrap", "0"), ["--bootstrap 0", "1 to 10,000"]),
    (("fit", "{runs}", "--bootstrap", "100000000"), ["--bootstrap 100000000"]),
    (("fit", "{runs}", "--seed", "-1"), ["--seed -1"]),
    (("fit", "{runs}", "--predict", "1e-3:1e-3"), ["--predict '1e-3:1e-3'", "less than one"]),
    (("fit", "{runs}", "--predict", "inf:1e9"), ["--predict 'inf:1e9'"]),
    (("fit", "{runs}", "--predict", "nan:1e9"), ["--predict 'nan:1e9'"]),
    (("fit", "{runs}", "--predict", "1e30:1e9"), ["--predict '1e30:1e9'"]),
    (("fit", "{study}", "--predict", "100:1e9"), ["--predict '100:1e9'", "below what this family builds"]),
    (("hero", "{study}", "--params", "1e30"), ["--params", "beyond what this family builds"]),
    (("hero", "{study}", "--params", "10"), ["--params 10", "below what this family builds"]),
    (("hero", "{study}", "--params", "inf"), ["--params 'inf'"]),
    (("hero", "{study}", "--params", "nan"), ["--params 'nan'"]),
    (("hero", "{study}", "--params", "800K", "--tokens", "1"), ["--tokens 1", "less than one sequence"]),
    (("hero", "{study}", "--params", "800K", "--tokens", "1e17"), ["--tokens", "tokens per parameter"]),
    (("hero", "{study}", "--params", "800K", "--tokens", "1e30"), ["--tokens 1.00e30: 1.25e24 tokens per param"]),
    (("hero", "{study}", "--seed", "-1"), ["--seed -1"]),
    (("forecast", "score", "{study}", "--loss", "inf"), ["--loss inf"]),
    (("forecast", "score", "{study}", "--loss", "nan"), ["--loss nan"]),
    (("forecast", "score", "{study}", "--loss", "-1"), ["--loss -1"]),
    (("forecast", "freeze", "{study}", "--predict", "1e-3:1e-3"), ["--predict"]),
    (("forecast", "freeze", "{study}", "--predict", "1M:20M", "--predict", "1e6:2e7"), ["'1e6:2e7'", "same point"]),
    (("fit", "{study}", "--predict", "1M:20M", "--predict", "1M:20M"), ["--predict '1M:20M': the same point"]),
    (("eval", "{study}", "--limit", "inf"), ["--limit inf"]),
    (("eval", "{study}", "--limit", "-1"), ["--limit -1"]),
    (("model", "info", "--params", "inf"), ["--params 'inf'"]),
    (("model", "info", "--params", "1e30"), ["--params '1e30'"]),
    (
        ("model", "info", "--d-model", "576", "--n-layers", "30", "--head-dim", "64", "--kv-ratio", "4"),
        ["--kv-ratio 4", "9 query heads"],
    ),
    (("status", "{study}", "--interval", "inf"), ["--interval"]),
    (("plan", "{study}", "--suggest", "--budget", "inf"), ["--budget 'inf'"]),
    (("plan", "{study}", "--suggest", "--budget", "nan"), ["--budget 'nan'"]),
    (("plan", "{study}", "--suggest", "--budget", "-1"), ["--budget '-1'"]),
    (("plan", "{study}", "--suggest", "--budget", "0"), ["--budget '0'"]),
]

HUGE = "99999999999999999999999"  # a whole number no option means: 1e23
# Every whole-number option of submit, run, eval, data and model info: 0 or -1, what is not a whole number
# (nan, inf, 1e30, text; refused by the option's parser, which names it) and HUGE. Issue 28: submit's and run's
# named the study's field (executor.slurm.time_min), not the option; HUGE was taken by all of them (data prepare
# --workers took 0 and -1 too), and model info named --params or "shape" for a HUGE --vocab-size or --d-model.
SHAPE = ("model", "info", "--d-model", "576", "--n-layers", "30")
WHOLE_NUMBER_OPTIONS = [
    *[(("submit", "{study}"), option, "0") for option in
      ("--time-min", "--cpus-per-task", "--array-parallelism", "--runs-per-gpu", "--cpus-per-run", "--parallel")],
    (("submit", "{study}"), "--gpus-per-task", "-1"),  # 0 GPUs is a CPU job
    (("submit", "{study}"), "--gpus", "-1"),
    (("run", "{yaml}", "--out", "{out}", "--executor", "local"), "--parallel", "0"),
    (("eval", "{study}"), "--batch-size", "0"),
    (("data", "prepare", "{yaml}"), "--workers", "0"),
    (("data", "tokenizer", "train", "embedded", "--out", "{out}"), "--vocab-size", "0"),
    *[(SHAPE, option, "0") for option in ("--n-heads", "--n-kv-heads", "--head-dim", "--ffn-dim")],
    *[(("model", "info", "--params", "1M"), option, "0") for option in ("--vocab-size", "--seq-len", "--kv-ratio")],
    (("model", "info", "--n-layers", "30"), "--d-model", "0"),
    (("model", "info", "--d-model", "576"), "--n-layers", "0"),
]  # fmt: skip
for _command, _option, _low in WHOLE_NUMBER_OPTIONS:
    _said = (
        [f"'{_option}'", "greater than or equal to 1"]
        if _option in ("--batch-size", "--workers")
        else [f"{_option} {_low}"]
    )  # click
    OPTION_CASES += [((*_command, _option, _low), _said), ((*_command, _option, HUGE), [_option])]
    if _option != "--gpus":  # a list of ids, parsed by ladder (its own line: test_user_errors)
        OPTION_CASES += [((*_command, _option, v), [f"'{_option}'"]) for v in ("nan", "inf", "1e30", "abc")]
OPTION_CASES += [
    (("submit", "{study}", "--mem-gb", v), [f"--mem-gb {v}"]) for v in ("0", "-1", "nan", "inf", "1e+30")
] + [(("submit", "{study}", "--mem-gb", "abc"), ["'--mem-gb'"])]


@pytest.mark.parametrize("args,words", OPTION_CASES, ids=[" ".join(a) for a, _ in OPTION_CASES])
def test_absurd_options_are_one_line(fitted, tmp_path, capsys, args, words):
    import pandas as pd

    runs = tmp_path / "runs.csv"
    pd.read_parquet(fitted / "results.parquet")[["params", "tokens", "loss"]].to_csv(runs, index=False)
    yaml_file = _study_file(tmp_path, BASE)
    args = [a.format(runs=runs, study=fitted, yaml=yaml_file, out=tmp_path / "out") for a in args]
    before, before_tmp = _files(fitted), _files(tmp_path)
    one_line(run_cli(capsys, *args), *words)
    assert _files(fitted) == before and _files(tmp_path) == before_tmp and not (tmp_path / "out").exists()


# ---- a damaged study -----------------------------------------------------------------------------------------

FIT_READERS = {
    "hero": lambda s: ("hero", s),
    "forecast freeze": lambda s: ("forecast", "freeze", s),
    "report": lambda s: ("report", s, "--format", "html"),
}
DAMAGE = {
    "missing": None,
    "not JSON": '{"loss": {',
    "hero.loss text": lambda fit: fit["hero"].update(loss="abc"),
    "recommendation.lr text": lambda fit: fit["recommendation"].update(lr="fast"),
    "hero a list": lambda fit: fit.update(hero=[1, 2]),
    "a JSON list": "[1, 2, 3]",
}


@pytest.mark.parametrize("damage", list(DAMAGE))
@pytest.mark.parametrize("command", list(FIT_READERS))
def test_a_damaged_fit_json_is_one_line_and_the_report_is_untouched(fitted, capsys, command, damage):
    report = fitted / "report" / "report.html"
    report.parent.mkdir(exist_ok=True)
    report.write_text("the good report")
    how = DAMAGE[damage]
    fit = fitted / "fit.json"
    if how is None:
        if command == "report":
            pytest.skip("a report without a fit is a report of the ladder alone")
        fit.unlink()
    elif isinstance(how, str):
        fit.write_text(how)
    else:
        data = json.loads(fit.read_text())
        how(data)
        fit.write_text(json.dumps(data))
    before = _files(fitted)
    words = ["fit.json"] + (["refit with `ladder fit"] if how is not None else [])
    one_line(run_cli(capsys, *FIT_READERS[command](fitted)), *words)
    assert _files(fitted) == before
    assert report.read_text() == "the good report"


@pytest.mark.parametrize("command", [*FIT_READERS, "fit", "plan --suggest"])
def test_a_fit_json_that_is_a_directory_is_one_line_naming_it(fitted, capsys, command):
    """Issue 28: with a directory where fit.json belongs, `hero` said "no fit.json: run `ladder fit`", and `fit`
    then failed with "Is a directory"; `report` exited 0. Each says that fit.json is not a file, to remove it and
    fit again, and writes nothing."""
    report = fitted / "report" / "report.html"
    report.parent.mkdir(exist_ok=True)
    report.write_text("the good report")
    (fitted / "fit.json").unlink()
    (fitted / "fit.json").mkdir()
    before = _files(fitted)
    args = FIT_READERS[command](fitted) if command in FIT_READERS else (*command.split(), fitted)
    one_line(run_cli(capsys, *args), "fit.json is not a file (a directory)", "rm -r", "ladder fit")
    assert _files(fitted) == before and report.read_text() == "the good report"


PLAN_READERS = [
    "status",
    "collect",
    "fit",
    "report",
    "hero",
    "forecast freeze",
    "forecast score",
    "submit",
    "eval",
    "cancel",
]


@pytest.mark.parametrize("command", PLAN_READERS)
def test_a_damaged_plan_json_is_one_line(fitted, capsys, command):
    (fitted / "plan.json").write_text('{"runs": [')
    before = _files(fitted)
    one_line(run_cli(capsys, *command.split(), fitted), "plan.json")
    assert _files(fitted) == before


JOBS_DAMAGE = {
    "not JSON": '{"runs": {',
    "a JSON list": "[1, 2]",
    "runs a list": '{"runs": [1]}',
    "a record without fields": '{"runs": {"x": [{"executor": 1}]}}',
    "job ids numbers": '{"runs": {"x": [{"executor": "local", "job_ids": [1], "folder": "f", "submitted_at": "t"}]}}',
}


@pytest.mark.parametrize("damage", list(JOBS_DAMAGE))
def test_a_damaged_jobs_json_is_named_status_and_collect_go_on_cancel_refuses(fitted, capsys, damage):
    """Issue 28: a jobs.json of the wrong shape gave an AttributeError or TypeError traceback in status, cancel and
    collect, and one that was not JSON was ignored without a word (cancel said "cancelled 0 runs"). status and
    collect warn in one line naming the file and go on from the run folders; cancel (and submit, which would write
    over it) refuse in one line: ladder cannot know the study's jobs. jobs.json is left as it was."""
    jobs = fitted / "jobs.json"
    jobs.write_text(JOBS_DAMAGE[damage])
    for command in ("status", "collect"):
        r = run_cli(capsys, command, fitted)
        assert r.code == 0 and "Traceback" not in r.stderr + r.stdout, (command, r.code, r.stderr[-2000:])
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"warning: {jobs} "), (command, r.stderr)
        assert "ignored" in lines[0] and "from their folders" in lines[0]
    before = _files(fitted)
    for command in ("cancel", "submit"):
        one_line(run_cli(capsys, command, fitted), f"cannot {command}: {jobs} ", "cannot know the study's jobs")
    assert _files(fitted) == before and jobs.read_text() == JOBS_DAMAGE[damage]


RESULTS_READERS = [("fit", "{s}"), ("hero", "{s}", "--dry-run"), ("forecast", "freeze", "{s}"),
                   ("plan", "{s}", "--suggest")]  # fmt: skip


@pytest.mark.parametrize("args", RESULTS_READERS, ids=[" ".join(a[:2]) for a in RESULTS_READERS])
def test_a_damaged_results_parquet_is_one_line_naming_the_repair(fitted, capsys, args):
    """Issue 28: a torn results.parquet gave a pyarrow ArrowInvalid traceback in fit, hero, forecast freeze and
    plan --suggest; it is one line naming the file and `ladder collect`, which writes it again."""
    (fitted / "results.parquet").write_text("garbage")
    before = _files(fitted)
    one_line(run_cli(capsys, *(a.format(s=fitted) for a in args)), "results.parquet is unreadable", "ladder collect")
    assert _files(fitted) == before


@pytest.mark.parametrize("table", ["results.parquet", "curves.parquet"])
def test_report_refuses_a_damaged_table_and_keeps_the_good_report(fitted, capsys, table):
    """Issue 28: with results.parquet (or curves.parquet) torn, `ladder report` exited 0 and overwrote the good
    report with one that had no runs (or no curves), saying nothing on the console; as with a damaged fit.json,
    it is now refused in one line naming `ladder collect`, and the report is left as it was."""
    report = fitted / "report" / "report.html"
    report.parent.mkdir(exist_ok=True)
    report.write_text("the good report")
    (fitted / table).write_text("garbage")
    before = _files(fitted)
    one_line(run_cli(capsys, "report", fitted, "--format", "html"), f"{table} is unreadable", "ladder collect")
    assert _files(fitted) == before and report.read_text() == "the good report"


# ---- refuse early: what data preparation and the fit would refuse later -----------------------------------------


REFUSED_EARLY = [
    ({"model": {"vocab_size": 3, "head_dim": 16}}, ["model.vocab_size = 3", "at least 259"]),
    ({"data": {"seq_len": 64, "max_bytes": 10}}, ["data.max_bytes = 10", "validation_tokens"]),
    ({"ladder": {"sizes": ["10K", "20K"]}}, ["runs at >= 3 sizes", "2 runs at 2 sizes"]),
    ({"ladder": {"sizes": ["10K", "20K", "40K"]}}, [">= 4 runs at one ratio", "3 runs at 3 sizes"]),
    ({"ladder": {"sizes": ["10K"]}}, ["runs at >= 3 sizes", "the ladder has 1 run at 1 size (10"]),
]


@pytest.mark.parametrize("changes,words", REFUSED_EARLY, ids=["vocab", "max_bytes", "2 sizes", "3 sizes", "1 size"])
def test_validate_refuses_what_data_preparation_or_fit_would_refuse(tmp_path, capsys, changes, words):
    spec = _study_file(tmp_path, {**BASE, **changes})
    one_line(run_cli(capsys, "studies", "validate", spec), *words)
    # plan refuses it too, so that a ladder is not trained for nothing (what the fit would refuse: unless
    # --no-fit-check; what data preparation would refuse: always, as validate)
    one_line(run_cli(capsys, "plan", spec, "--dry-run"), *words, *(["--no-fit-check"] if "ladder" in changes else []))


TWO_SIZES = {**BASE, "ladder": {"sizes": ["10K", "20K"]}}
FIT_REFUSES = ["`ladder fit` will refuse this ladder", "runs at >= 3 sizes", "2 runs at 2 sizes", "--no-fit-check"]


def test_plan_refuses_a_ladder_the_fit_would_refuse_and_writes_nothing(tmp_path, capsys):
    spec = _study_file(tmp_path, TWO_SIZES)
    before = _files(tmp_path)
    one_line(run_cli(capsys, "plan", spec, "--out", tmp_path / "out"), *FIT_REFUSES)
    one_line(run_cli(capsys, "plan", spec, "--dry-run"), *FIT_REFUSES)
    one_line(run_cli(capsys, "plan", spec, "--out", tmp_path / "out", "--json"), *FIT_REFUSES)
    assert _files(tmp_path) == before and not (tmp_path / "out").exists()


def test_plan_and_validate_take_such_a_ladder_with_no_fit_check_and_warn(tmp_path, capsys):
    spec = _study_file(tmp_path, TWO_SIZES)
    r = run_cli(capsys, "plan", spec, "--out", tmp_path / "out", "--no-fit-check")
    assert r.code == 0, r.stderr
    said = " ".join(r.stderr.split())
    assert "warning: `ladder fit` will refuse this ladder" in said and "runs at >= 3 sizes" in said
    assert "error" not in said and (tmp_path / "out" / "plan.json").is_file()
    assert len(list((tmp_path / "out" / "runs").iterdir())) == 2
    j = run_cli(capsys, "plan", spec, "--dry-run", "--no-fit-check", "--json")
    assert j.code == 0 and any(w.startswith("`ladder fit` will refuse this ladder") for w in j.json()["warnings"])
    v = run_cli(capsys, "studies", "validate", spec, "--no-fit-check", "--json")
    assert v.code == 0 and v.json()["valid"] is True
    assert any("runs at >= 3 sizes" in w for w in v.json()["warnings"])
    one_line(run_cli(capsys, "studies", "validate", spec), *FIT_REFUSES)


def test_run_refuses_a_ladder_the_fit_would_refuse_before_writing_anything(tmp_path, capsys, monkeypatch):
    """Nothing trains here: the refusal comes before the plan; with --no-fit-check the main job goes on (a stand-in
    for it records the call)."""
    from types import SimpleNamespace

    import ladder.pipeline

    called = []

    def run_study(study, **kw):
        called.append(kw["out_dir"])
        return SimpleNamespace(
            fit_result=None, report=None, stopped_after="plan", failures={}, runs_failed=[], fit_error=None
        )

    monkeypatch.setattr(ladder.pipeline, "run_study", run_study)
    spec = _study_file(tmp_path, TWO_SIZES)
    before = _files(tmp_path)
    one_line(run_cli(capsys, "run", spec, "--out", tmp_path / "out", "--executor", "debug"), *FIT_REFUSES)
    assert called == [] and _files(tmp_path) == before and not (tmp_path / "out").exists()
    r = run_cli(capsys, "run", spec, "--out", tmp_path / "out", "--executor", "debug", "--no-fit-check")
    assert r.code == 0, r.stderr
    assert called == [tmp_path / "out"] and "warning: `ladder fit` will refuse this ladder" in r.stderr


@pytest.mark.parametrize("command", [("plan",), ("run",), ("studies", "validate")])
def test_the_help_says_when_to_skip_the_fit_check(capsys, command):
    text = " ".join(run_cli(capsys, *command, "--help").stdout.replace("│", " ").split())
    assert "--no-fit-check" in text and "a trial run" in text and "before you fit it" in text, text


def test_a_ladder_the_fit_can_use_only_partly_is_warned(tmp_path, capsys):
    spec = _study_file(tmp_path, {**BASE, "ladder": {"sizes": ["10K", "20K", "40K"], "budgets": [0.5, 1]}})
    r = run_cli(capsys, "studies", "validate", spec)
    assert r.code == 0 and "no rollout backtest" in r.stderr and ">= 4 sizes" in r.stderr
    r = run_cli(capsys, "plan", spec, "--dry-run")  # a warning still, not a refusal
    assert r.code == 0 and "no rollout backtest" in " ".join(r.stderr.split())


def test_a_ladder_whose_rollout_has_no_law_to_fit_is_warned_before_it_trains(tmp_path, capsys):
    """User retrial 9: 4 sizes at one tokens/param ratio passed validate and plan in silence, and `ladder fit`
    then said "no rollout forecasts": the rollout fits the sizes below the largest (3 runs) and every law form
    needs 4. With a fifth size (or a second budget) the rollout has a law to fit, and nothing is said."""
    four = _study_file(tmp_path, {**BASE, "ladder": {"sizes": ["10K", "20K", "40K", "80K"]}}, "four.yaml")
    r = run_cli(capsys, "plan", four, "--dry-run")
    said = " ".join(r.stderr.split())
    assert r.code == 0 and "no rollout backtest: fitted on the sizes below the largest (3 runs)" in said, said
    assert "add a size or a budget" in said
    for ladder in ({"sizes": ["10K", "20K", "40K", "80K", "160K"]}, {"sizes": ["10K", "20K", "40K", "80K"],
                                                                       "budgets": [0.5, 1]}):  # fmt: skip
        r = run_cli(capsys, "plan", _study_file(tmp_path, {**BASE, "ladder": ladder}), "--dry-run")
        assert r.code == 0 and "rollout" not in r.stderr, (ladder, r.stderr)


def test_the_fit_requirement_is_checked_per_variant():
    """Issue 28, item 3: the requirement holds per law variant. A variant short of sizes gets no loss law (said
    once, naming it), while the other still fits; with every variant short, only the ablation's comparison is
    left, and the warning says so."""
    from ladder.plan.planner import expand
    from ladder.plan.requirements import fit_requirements
    from ladder.studies.spec import parse_study

    study = parse_study({**BASE, "ablations": {"tie_embeddings": [True, False]}})
    runs = expand(study).runs
    untied = [r for r in runs if not r.shape.tied]
    short = [r for r in runs if r.shape.tied or r in untied[:2]]  # untied at two sizes only
    refuse, partly = fit_requirements(study, short)
    assert refuse == [] and len(partly) == 1
    assert "variant 'untied' has 2 runs at 2 sizes" in partly[0] and "those variants get no loss law" in partly[0]
    assert "variant 'tied'" not in partly[0]
    tied = [r for r in runs if r.shape.tied]
    refuse, partly = fit_requirements(study, tied[:2] + untied[:2])  # both short: the ablation's comparison alone
    assert refuse == [] and "variant 'tied' has 2 runs" in partly[0] and "variant 'untied' has 2 runs" in partly[0]
    assert "no loss law and no hero forecast, only the ablations' comparisons (tie_embeddings)" in partly[0]


def test_an_extra_run_of_no_variant_of_the_study_is_refused_naming_it(tmp_path, capsys):
    """An extra run limited to a variant the study does not train was planned as nothing, without a word."""
    spec = _study_file(
        tmp_path,
        {**BASE, "ladder": {**BASE["ladder"], "extra_runs": [{"size": "20K"}, {"size": "40K", "variant": "untied"}]}},
    )
    for command in (("studies", "validate"), ("plan", "--dry-run")):
        one_line(run_cli(capsys, *command, spec), "ladder.extra_runs[1].variant: 'untied' is not a variant", "tied")


def test_the_fit_thresholds_validate_checks_are_the_fits():
    from ladder.plan import requirements
    from ladder.reports.fits.loss import loss_forms

    assert requirements.FIT_MIN_SIZES == loss_forms.MIN_SIZES and requirements.FIT_MIN_DOF == loss_forms.MIN_DOF
    assert requirements.FIT_RATIO_TOL == loss_forms.RATIO_TOL
    assert requirements.FIT_PARAMS == {k: loss_forms.LOSS_FORMS[k].engine.n_params for k in ("chinchilla", "ratio")}


def test_a_study_fit_refuses_is_refused_by_the_fit_too(capsys, tmp_path):
    """What validate refuses (3 sizes at one ratio) is what `ladder fit` refuses on the trained ladder."""
    from tests.hero_fixture import SIZES, make_ladder

    root = make_ladder(tmp_path / "three", sizes=SIZES[:3], fit=False)
    one_line(run_cli(capsys, "fit", root, "--bootstrap", "3"), "needs >= 4 runs")


# ---- the cases of issue 28, each by the command that found it ----------------------------------------------


def test_model_info_applies_kv_ratio_to_an_explicit_shape(capsys):
    r = run_cli(
        capsys, "model", "info", "--d-model", "576", "--n-layers", "30", "--head-dim", "64", "--kv-ratio", "3", "--json"
    )
    assert r.code == 0, r.stderr
    shape = r.json()["shape"]
    assert (shape["n_heads"], shape["n_kv_heads"]) == (9, 3)


def test_eval_refuses_an_unknown_task_before_submitting(fitted, capsys, monkeypatch):
    import ladder.jobs.submit as submit
    import ladder.model.evaluation.downstream as downstream
    from ladder.model.evaluation.tasks import SHIPPED_TASKS

    class Known:  # lm-eval's index of every task takes ~20 s to build: the shipped tasks stand in for it
        all_tasks = list(SHIPPED_TASKS)

    monkeypatch.setattr(downstream, "_task_manager", lambda include, defaults: Known())

    def job_fails(*a, **k):
        raise RuntimeError("submitit FailedJobError: ... SpecError: unknown lm-eval task(s): 'nosuchtask'")

    monkeypatch.setattr(submit, "submit_evals", job_fails)
    before = _files(fitted)
    one_line(run_cli(capsys, "eval", fitted, "--tasks", "nosuchtask"), "unknown lm-eval task", "nosuchtask")
    one_line(run_cli(capsys, "eval", fitted, "--tasks", " , "), "--tasks")
    assert _files(fitted) == before


def test_a_study_with_an_unknown_eval_task_is_refused_at_validate(tmp_path, capsys, monkeypatch):
    import ladder.model.evaluation.downstream as downstream
    from ladder.model.evaluation.tasks import SHIPPED_TASKS

    class Known:
        all_tasks = list(SHIPPED_TASKS)

    monkeypatch.setattr(downstream, "_task_manager", lambda include, defaults: Known())
    spec = _study_file(tmp_path, {**BASE, "evals": {"tasks": ["nosuchtask"]}})
    one_line(run_cli(capsys, "studies", "validate", spec), "evals:", "nosuchtask")
    one_line(run_cli(capsys, "plan", spec, "--out", tmp_path / "out"), "nosuchtask")
    assert not (tmp_path / "out").exists()


def _runs_csv(fitted: Path, path: Path, times: int = 1) -> Path:
    import pandas as pd

    table = pd.read_parquet(fitted / "results.parquet")[["params", "tokens", "loss"]]
    pd.concat([table] * times).to_csv(path, index=False)
    return path


def test_duplicate_runs_rows_are_warned_about_and_counted_once(fitted, tmp_path, capsys):
    good = _runs_csv(fitted, tmp_path / "good.csv")
    doubled = _runs_csv(fitted, tmp_path / "doubled.csv", times=2)
    point = ("--predict", "1M:20M", "--bootstrap", "20", "--json")
    once = run_cli(capsys, "fit", "--runs", good, *point)
    twice = run_cli(capsys, "fit", "--runs", doubled, *point)
    assert once.code == 0 and twice.code == 0, twice.stderr
    assert "repeat an earlier row" in twice.stderr and "counted once" in twice.stderr
    p1, p2 = once.json()["predictions"][-1], twice.json()["predictions"][-1]
    assert (p1["lo"], p1["hi"]) == (p2["lo"], p2["hi"])  # the interval does not shrink
    kept = run_cli(capsys, "fit", "--runs", doubled, "--keep-duplicates", *point)
    assert kept.code == 0 and "--keep-duplicates" in kept.stderr


def test_a_predict_point_below_the_ladder_is_warned_about(fitted, tmp_path, capsys):
    runs = _runs_csv(fitted, tmp_path / "runs.csv")
    r = run_cli(capsys, "fit", "--runs", runs, "--predict", "100:1e4", "--bootstrap", "3")
    assert r.code == 0 and "below the ladder" in r.stderr


def test_score_refuses_text_in_a_curve_and_appends_nothing(fitted, tmp_path, capsys):
    assert run_cli(capsys, "forecast", "freeze", fitted).code == 0
    curve = tmp_path / "curve.csv"
    curve.write_text("tokens,eval_loss\n1000000,4.0\n2000000,abc\n3000000,3.8\n")
    before = _files(fitted)
    one_line(run_cli(capsys, "forecast", "score", fitted, "--curve", curve), "line 3", "column eval_loss", "'abc'")
    assert _files(fitted) == before
    metrics = tmp_path / "metrics.jsonl"  # train records have no eval_loss: rows without it, not errors
    metrics.write_text(
        json.dumps({"kind": "train", "tokens": 1000, "loss": 5.0})
        + "\n"
        + json.dumps({"kind": "eval", "tokens": 2000, "eval_loss": "x"})
        + "\n"
    )
    one_line(run_cli(capsys, "forecast", "score", fitted, "--curve", metrics), "record 2", "eval_loss")


def test_score_refuses_a_curve_line_that_is_no_record_or_gives_a_key_twice(fitted, tmp_path, capsys):
    """A jsonl curve loses no point silently: a corrupt line or a repeated key is refused, naming the line; only a
    torn last line (a metrics.jsonl still being written) is left out."""
    assert run_cli(capsys, "forecast", "freeze", fitted).code == 0
    before = _files(fitted)
    good = json.dumps({"kind": "eval", "tokens": 1000, "eval_loss": 4.0})
    corrupt = tmp_path / "corrupt.jsonl"
    corrupt.write_text(good + "\n{not json\n" + good + "\n")
    one_line(run_cli(capsys, "forecast", "score", fitted, "--curve", corrupt), "line 2", "unreadable JSON")
    twice = tmp_path / "twice.jsonl"
    twice.write_text(good + "\n" + '{"tokens": 2000, "eval_loss": 3.9, "eval_loss": 9.9}\n')
    one_line(run_cli(capsys, "forecast", "score", fitted, "--curve", twice), "line 2", "'eval_loss' twice")
    assert _files(fitted) == before


def test_a_hero_compute_beyond_any_run_writes_its_bound_as_the_report_does(tmp_path, capsys):
    spec = _study_file(tmp_path, {**BASE, "hero": {"compute": 1e40}})
    one_line(run_cli(capsys, "studies", "validate", spec), "hero.compute = 1.00e40 FLOPs", "at most 1.00e35 FLOPs")


@pytest.mark.parametrize(
    "args, words",
    [
        (["--params", "135M", "--n-heads", "9"], ["--n-heads 9", "--params sizes the shape"]),
        (["--params", "135M", "--n-kv-heads", "3"], ["--n-kv-heads 3", "--params sizes the shape"]),
        (["--params", "135M", "--ffn-dim", "1536"], ["--ffn-dim 1536", "--params sizes the shape"]),
        (["--d-model", "64", "--n-layers", "2", "--aspect-ratio", "5"], ["--aspect-ratio 5", "goes with --params"]),
        (["--d-model", "64", "--n-layers", "2", "--convention", "total"], ["--convention total", "with --params"]),
    ],
)
def test_model_info_refuses_an_option_its_shape_does_not_read(capsys, args, words):
    """`model info --params 135M --n-heads 9` and `--d-model 64 --n-layers 2 --aspect-ratio 5` printed a shape
    that ignored the option, as --kv-ratio once was ignored."""
    one_line(run_cli(capsys, "model", "info", *args), *words)


def test_model_info_says_a_shape_error_without_pydantics_words(capsys):
    line = one_line(run_cli(capsys, "model", "info", "--d-model", "64", "--n-layers", "2", "--n-heads", "3"))
    assert "Value error" not in line and "not divisible by n_heads=3" in line
