"""A tenth new-user trial: paths with a ``~`` that cannot be expanded, names in another encoding than UTF-8, a
Ctrl-C while the command line is read, ... Each answer is one line ``error: ...`` naming the problem and exit 2,
or the command's own work; never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.cli_helpers import one_line, run_cli


def _micro(tmp_path: Path, source: Path, **data: str) -> Path:
    from tests.micro import write_study

    path = write_study(tmp_path / "micro.yaml", source, sizes=("4K", "8K", "16K", "32K"))
    spec = yaml.safe_load(path.read_text())
    spec["data"].update(data)
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.mark.parametrize("field", ["corpus", "tokenizer"])
@pytest.mark.parametrize("command", [("studies", "validate"), ("plan", "--dry-run"), ("data", "prepare")])
def test_a_tilde_of_no_user_in_a_study_path_is_named(tmp_path, capsys, tiny_jsonl_corpus, field, command):
    """`data.corpus: ~bob/corpus` (a user this machine does not know) died of "RuntimeError: Could not determine
    home directory." in validate, plan and data prepare."""
    study = _micro(tmp_path, tiny_jsonl_corpus, **{field: "~nosuchuser-ladder/x"})
    args = [command[0], *command[1:2], study] if command[0] != "plan" else ["plan", study, "--dry-run"]
    one_line(run_cli(capsys, *args), f"{field} '~nosuchuser-ladder/x'", "no user")


def test_a_tilde_of_no_user_in_a_command_s_path_is_named(tmp_path, capsys, monkeypatch):
    """`data tokenizer train '~bob/c'` died of the RuntimeError; `eval --include-path '~bob/tasks'` said "a link
    that leads back to itself (a loop of links)" of a path that is no link."""
    from tests.fake_runs import plan_micro

    monkeypatch.chdir(tmp_path)
    args = ("data", "tokenizer", "train", "--vocab-size", "300", "--out", "tok", "~nosuchuser-ladder/c")
    one_line(run_cli(capsys, *args), "~nosuchuser-ladder", "no user")
    plan_micro(tmp_path / "study")
    line = one_line(run_cli(capsys, "eval", "study", "--include-path", "~nosuchuser-ladder/t", "--tasks", "x"))
    assert "no user" in line and "loop" not in line, line


def test_no_home_directory_asks_for_ladder_cache(tmp_path, capsys, monkeypatch, tiny_jsonl_corpus):
    """With HOME unset and no passwd entry for the user (a container run as an arbitrary uid), the data cache's
    default ~/.cache/ladder died of "RuntimeError: Could not determine home directory."."""
    import pwd

    def no_entry(uid):
        raise KeyError(uid)

    study = _micro(tmp_path, tiny_jsonl_corpus)
    monkeypatch.delenv("LADDER_CACHE")
    monkeypatch.delenv("HOME", raising=False)
    monkeypatch.setattr(pwd, "getpwuid", no_entry)
    one_line(run_cli(capsys, "data", "prepare", study), "home directory", "LADDER_CACHE")
    assert not (tmp_path / "~").exists()


@pytest.mark.parametrize("command", ["collect", "fit", "report"])
def test_a_study_path_that_is_not_utf8_is_named(fitted, tmp_path, capsys, command):
    """A study folder named in another encoding than UTF-8 (``S\\xff``, Latin-1 say): `collect` died of pyarrow's
    "UnicodeEncodeError: 'utf-8' codec can't encode character '\\udcff'", and fit, report and hero called the
    good results.parquet "unreadable" and sent the user to `ladder collect`, which died so."""
    import shutil

    root = tmp_path / "S\udcff"
    shutil.copytree(fitted, root)
    before = sorted(p.name for p in root.iterdir())
    line = one_line(run_cli(capsys, command, root), "S\\xff' is not valid UTF-8")
    assert "ladder collect" not in line, line
    assert sorted(p.name for p in root.iterdir()) == before


def test_ctrl_c_while_the_command_line_is_read_is_said(tmp_path, capsys, monkeypatch):
    """A Ctrl-C landing before a command's own code runs (typer reading its arguments) ended in a silent exit 130:
    typer turns it into Exit(130) itself."""
    from ladder.cli import _command

    def ctrl_c(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(_command(), "make_context", ctrl_c)
    r = run_cli(capsys, "status", tmp_path)
    assert r.code == 130 and r.stderr == "interrupted: run the same command to continue\n", r


@pytest.mark.parametrize(
    "command", [("fit", "--bootstrap", "3"), ("report", "--format", "html"), ("forecast", "freeze")]
)
def test_a_full_disk_names_the_file_it_could_not_write(study, capsys, monkeypatch, command):
    """A study on a full disk: `fit` said "error: No space left on device (OSError)", no path, as if standard
    output were full (ENOSPC from a write names no file); the file being written is named now."""
    import errno
    import os

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    before = {p: p.read_bytes() for p in study.iterdir() if p.is_file()}
    monkeypatch.setattr(os, "fsync", full)
    args = [*command[:-2], study, *command[-2:]] if command[0] != "forecast" else [*command, study]
    one_line(run_cli(capsys, *args), f"cannot use {study}/", ": No space left on device")
    assert {p: p.read_bytes() for p in study.iterdir() if p.is_file()} == before
    assert not [p for p in study.rglob("*.tmp")]


def test_a_study_file_nested_too_deeply_is_one_line(tmp_path, capsys):
    """`notes: [[[[...]]]]` 5,000 deep died of "RecursionError: maximum recursion depth exceeded" in PyYAML."""
    study = tmp_path / "deep.yaml"
    study.write_text("name: deep\nnotes: " + "[" * 5000 + "]" * 5000 + "\n")
    one_line(run_cli(capsys, "studies", "validate", study), "deep.yaml", "nested too deeply")
    one_line(run_cli(capsys, "plan", study, "--out", tmp_path / "out"), "deep.yaml", "nested too deeply")
    assert not (tmp_path / "out").exists()


def test_train_threads_beyond_any_machine_is_refused(tmp_path, capsys):
    """`train RUN --threads 99999999999` died of torch's "ValueError: Overflow when unpacking long" (a smaller
    absurd count went to torch.set_num_threads as it was); it has --cpus-per-run's bound."""
    from tests.fake_runs import plan_micro

    run = tmp_path / "study" / "runs" / plan_micro(tmp_path / "study")[0].run_id
    before = sorted(p.name for p in run.iterdir())
    for n in ("99999999999", "65537"):
        one_line(run_cli(capsys, "train", run, "--threads", n), f"--threads {n}", "65,536")
    assert sorted(p.name for p in run.iterdir()) == before


def test_the_slurm_executor_on_a_machine_without_slurm_is_one_line(tmp_path, capsys, monkeypatch, tiny_jsonl_corpus):
    """`submit S --executor slurm` (or a study whose executor.kind is slurm) on a laptop died of submitit's
    "RuntimeError: Could not detect "srun", are you indeed on a slurm cluster?"; `ladder run` planned the study,
    prepared its data, then died so. Nothing is written now, and the other executors are named."""
    import shutil

    from tests.fake_runs import plan_micro

    monkeypatch.setattr(shutil, "which", lambda *a, **k: None)  # as submitit looks for srun: nowhere on PATH
    study = tmp_path / "study"
    plan_micro(study)
    before = sorted(str(p) for p in study.rglob("*"))
    for args in (["submit", study, "--executor", "slurm"], ["submit", study, "--executor", "slurm", "--retry-failed"]):
        one_line(run_cli(capsys, *args), "srun", "--executor local")
    assert sorted(str(p) for p in study.rglob("*") if p.name != ".jobs.lock") == before
    spec = _micro(tmp_path, tiny_jsonl_corpus)
    r = run_cli(capsys, "run", spec, "--out", tmp_path / "out", "--executor", "slurm")
    assert r.code == 2 and "Traceback" not in r.stderr, r.stderr  # after the plan's warning about the rollout
    assert r.stderr.splitlines()[-1].startswith("error: the slurm executor") and "srun" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("value", ["312T", "3.12e14"])
def test_ladder_peak_flops_reads_a_count(value):
    """LADDER_PEAK_FLOPS=312T (as every other count of ladder is written) failed inside training with "ValueError:
    could not convert string to float: '312T'" (a traceback, the run recorded as failed)."""
    from ladder.model.hardware import peak_flops

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LADDER_PEAK_FLOPS", value)
        assert peak_flops("cpu").flops == 3.12e14


@pytest.mark.parametrize("value", ["abc", "0", "-1e12", "nan", "inf"])
def test_a_bad_ladder_peak_flops_is_refused_before_the_run_is_touched(tmp_path, capsys, monkeypatch, value):
    from tests.fake_runs import plan_micro

    run = tmp_path / "study" / "runs" / plan_micro(tmp_path / "study")[0].run_id
    before = sorted(p.name for p in run.iterdir())
    monkeypatch.setenv("LADDER_PEAK_FLOPS", value)
    one_line(run_cli(capsys, "train", run, "--device", "cpu"), f"LADDER_PEAK_FLOPS={value!r}", "312T")
    assert sorted(p.name for p in run.iterdir()) == before


def test_hero_after_the_study_file_was_edited_names_the_edit(study, capsys):
    """S/study.yaml edited after the fit (model.vocab_size 256 -> 512): `hero` said the fit's shape "is not what
    this version of ladder sizes from it", blaming an upgrade that never happened."""
    path = study / "study.yaml"
    path.write_text(path.read_text().replace("vocab_size: 256", "vocab_size: 512"))
    runs = sorted(p.name for p in (study / "runs").iterdir())
    line = one_line(run_cli(capsys, "hero", study), "study.yaml", "since the fit", f"ladder fit {study}")
    assert "version of ladder" not in line, line
    assert sorted(p.name for p in (study / "runs").iterdir()) == runs


DEEP = "[" * 100_000 + "]" * 100_000  # deeper than Python's recursion: json.loads raised RecursionError


@pytest.mark.parametrize(
    "damaged, commands",
    [
        ("fit.json", [("hero",), ("forecast", "freeze"), ("report", "--format", "html")]),
        ("plan.json", [("status",), ("collect",)]),
        ("jobs.json", [("status",), ("cancel",)]),
        ("forecast.json", [("forecast", "show"), ("forecast", "score", "--loss", "3")]),
        ("runs/*/result.json", [("status",), ("collect",)]),
        ("runs/*/metrics.jsonl", [("status",), ("collect",)]),
    ],
)
def test_a_study_file_nested_too_deeply_is_damage_not_a_traceback(study, capsys, damaged, commands):
    """A study's JSON file holding [[[[...]]]] 100,000 deep (garbage where the file was) died of "RecursionError:
    maximum recursion depth exceeded while decoding a JSON array" in every command that read it; it is damage
    like any other now: named by the command that needs the file, skipped by those that go on without it."""
    from tests.cli_helpers import taken_or_refused

    if damaged == "forecast.json":
        assert run_cli(capsys, "forecast", "freeze", study).code == 0
    next(iter(study.glob(damaged)), study / damaged).write_text(DEEP + "\n")
    for command in commands:
        args = [*command[:1], study, *command[1:]] if command[0] != "forecast" else [*command[:2], study, *command[2:]]
        r = run_cli(capsys, *args)
        assert taken_or_refused(r) is None, (command, taken_or_refused(r))


def test_a_result_json_nested_too_deeply_has_no_status_as_status_reads_it(study):
    """layout.result_status, which plan, submit, hero and score ask of a run, read result.json with json.loads: a
    RecursionError where status and collect (through layout.loads_json) see a damaged file."""
    from ladder import layout

    rd = layout.RunDir(next(iter(study.glob("runs/*/result.json"))).parent)
    rd.result.write_text(DEEP + "\n")
    assert layout.result_status(rd) is None


@pytest.mark.parametrize("what", ["folder", "link to /dev/null"])
def test_a_plan_json_that_is_no_file_is_named_not_called_missing(study, capsys, what):
    """S/plan.json a folder (or a link to a device): status said "S is not a planned study directory (no
    plan.json); run `ladder plan S`", of a plan.json that `ls` shows; the plan then refused the folder itself."""
    import shutil

    plan = study / "plan.json"
    plan.unlink()
    plan.mkdir() if what == "folder" else plan.symlink_to("/dev/null")
    line = one_line(run_cli(capsys, "status", study), f"{plan} is not a file", f"rm -r {plan}", f"ladder plan {study}")
    assert "no plan.json" not in line, line
    shutil.rmtree(plan) if what == "folder" else plan.unlink()


def test_a_relative_corpus_that_is_not_found_names_where_it_was_looked_for(tmp_path, capsys, monkeypatch):
    """`data.corpus: corpus` beside the study file, run from another folder: "corpus 'corpus' does not exist" of a
    folder that `ls` shows beside the study; a relative path is read from the current directory, said now."""
    from tests.micro import write_study

    (tmp_path / "project" / "corpus").mkdir(parents=True)
    study = write_study(tmp_path / "project" / "micro.yaml", Path("corpus"), sizes=("4K", "8K", "16K", "32K"))
    monkeypatch.chdir(tmp_path)
    one_line(run_cli(capsys, "studies", "validate", study), "'corpus' does not exist", f"current directory {tmp_path}")
