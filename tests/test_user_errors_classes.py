"""Issue 28, the classes closed for the commands tests/test_user_errors_systematic.py does not reach: an unwritable
or missing target, and Ctrl-C at a moment the test does not choose by hand, against every command that reads or
writes a study (submit, eval, forecast score, run, cancel, plan, plan --suggest, sanity, train, report, studies
validate and show, data prepare). Each answer is one line ``error: ...`` naming the path and exit 2, or exit 130
and "interrupted: run the same command to continue"; never a traceback, nothing written, nothing lost. Nothing
trains: where a command would, training is stood in for (it is interrupted or refused before)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests import test_user_errors_systematic as systematic
from tests.cli_helpers import one_line, run_cli
from tests.test_user_errors_systematic import BASE, ReadOnly, _files, _study_file

fitted_master = systematic.fitted_master  # the fixtures: a planned, fake-trained, collected and fitted ladder
fitted = systematic.fitted


# ---- an unwritable target -----------------------------------------------------------------------------------


class ReadOnlyLocks(ReadOnly):
    """:class:`ReadOnly`, and a lock file (``os.open`` with O_CREAT or for writing) cannot be made or opened for
    writing there either, as in a real read-only folder."""

    def __init__(self, monkeypatch, root: Path, only: str | None = None):
        import os

        super().__init__(monkeypatch, root, only)
        real_open = os.open

        def open_(path, flags, *a, **k):
            p = str(Path(os.fspath(path)).resolve())
            writes = flags & (os.O_CREAT | os.O_WRONLY | os.O_RDWR)
            if writes and p.startswith(self.root) and (self.only is None or Path(p).name == self.only):
                raise PermissionError(13, "Permission denied", os.fspath(path))
            return real_open(path, flags, *a, **k)

        monkeypatch.setattr(os, "open", open_)


def _cheap_suggest(monkeypatch) -> None:
    from ladder.reports.fits.study import run_value as value

    monkeypatch.setattr(value, "K", 2)  # fewer simulated outcomes and refits: the test's time, not its logic
    monkeypatch.setattr(value, "N_BOOT", 10)


def _no_training(monkeypatch) -> list:
    """Training and lm-eval stood in for: a command that reaches them records the call (the test then fails)."""
    import ladder.model.evaluation.downstream as downstream
    import ladder.model.training.loop as loop

    called: list = []

    def train(run_dir, **kw):
        called.append(("train", Path(run_dir)))
        raise AssertionError(f"trained {run_dir}")

    def load_lm(model_dir, **kw):
        called.append(("eval", Path(model_dir)))
        raise AssertionError(f"loaded {model_dir} for lm-eval")

    monkeypatch.setattr(loop, "train", train)
    monkeypatch.setattr(downstream, "_load_lm", load_lm)
    return called


def _micro(tmp_path: Path) -> Path:
    """A planned micro-study (vocab 320, nothing trained): the study of submit, cancel, plan and train."""
    from tests.fake_runs import plan_micro

    root = tmp_path / "micro"
    plan_micro(root)
    return root


def _first_run(study: Path) -> Path:
    return sorted(p for p in (study / "runs").iterdir() if (p / "spec.json").is_file())[0]


def _finished_with_a_model(study: Path) -> None:
    """A finished run with a model/ to evaluate (the fitted fixture's runs have none)."""
    for run in (study / "runs").iterdir():
        if (run / "result.json").is_file():
            (run / "model").mkdir(exist_ok=True)
            (run / "model" / "config.json").write_text("{}")
            (run / "model" / "model.safetensors").write_bytes(b"")
            (run / "model" / "tokenizer.json").write_text("{}")
            return


def _a_job(study: Path) -> None:
    """A queued job on record (a local job whose id no process has), for cancel to cancel."""
    from ladder import layout
    from tests.fake_runs import record_job

    record_job(layout.StudyDir(study), _first_run(study).name, cancelled=False)


# command -> (the study it takes: fitted or micro, what it needs first, its command line)
UNWRITABLE_STUDY = {
    "submit": ("micro", None, lambda s: ("submit", s, "--executor", "debug")),
    "cancel": ("micro", _a_job, lambda s: ("cancel", s)),
    "plan DIR": ("micro", lambda s: (s / "plan.json").unlink(), lambda s: ("plan", s)),
    "train": ("micro", None, lambda s: ("train", _first_run(s), "--device", "cpu")),
    "eval": ("fitted", _finished_with_a_model, lambda s: ("eval", s, "--executor", "debug", "--device", "cpu")),
    "forecast score": ("fitted", "freeze", lambda s: ("forecast", "score", s, "--loss", "2.5")),
    "plan --suggest --add": ("fitted", None, lambda s: ("plan", s, "--suggest", "--add")),
}


def _last_line(r, *words: str) -> None:
    """As ``one_line``, after the progress lines a long command prints on stderr as it goes."""
    assert r.code == 2, (r.code, r.stdout[-2000:], r.stderr[-2000:])
    assert "Traceback" not in r.stderr + r.stdout
    errors = [line for line in r.stderr.strip().splitlines() if not line.startswith("--suggest ")]
    assert len(errors) == 1 and errors[0].startswith("error: "), r.stderr
    for w in words:
        assert w in errors[0], (w, errors[0])


@pytest.mark.parametrize("how", ["stand-in", "mount"])
@pytest.mark.parametrize("command", list(UNWRITABLE_STUDY))
def test_a_read_only_study_is_one_line_naming_the_path(fitted, tmp_path, capsys, monkeypatch, command, how):
    """Through the stand-in (:class:`ReadOnlyLocks`), and on a real read-only bind mount where the machine allows
    one (the kernel refuses every write, the lock files included)."""
    which, first, args = UNWRITABLE_STUDY[command]
    study = fitted if which == "fitted" else _micro(tmp_path)
    if first == "freeze":
        assert run_cli(capsys, "forecast", "freeze", study).code == 0
    elif first is not None:
        first(study)
    _cheap_suggest(monkeypatch)
    called = _no_training(monkeypatch)
    before = _files(study)
    if how == "mount":
        with _mounted_read_only(study):
            r = run_cli(capsys, *args(study))
        _last_line(r, "cannot use", str(study), "Read-only file system")
    else:
        with monkeypatch.context() as m:
            ReadOnlyLocks(m, study)
            r = run_cli(capsys, *args(study))
        _last_line(r, "cannot use", str(study), "Permission denied")
    assert _files(study) == before and called == []


# command -> its command line, given the study file and the place it writes (a study folder, or the data cache)
UNWRITABLE_ELSEWHERE = {
    "run": ("out", lambda spec, out: ("run", spec, "--out", out, "--executor", "debug", "--skip-sanity")),
    "sanity": ("cache", lambda spec, out: ("sanity", spec)),
    "data prepare": ("cache", lambda spec, out: ("data", "prepare", spec)),
}


@pytest.mark.parametrize("command", list(UNWRITABLE_ELSEWHERE))
def test_a_read_only_out_folder_or_data_cache_is_one_line_naming_it(tmp_path, capsys, monkeypatch, command):
    """`run` into a study folder it cannot write; `sanity` and `data prepare` with a data cache they cannot write:
    refused before anything trains."""
    import os

    which, args = UNWRITABLE_ELSEWHERE[command]
    spec = _study_file(tmp_path, BASE)
    out = tmp_path / "out"
    out.mkdir()
    place = out if which == "out" else Path(os.environ["LADDER_CACHE"]) / "read-only"
    monkeypatch.setenv("LADDER_CACHE", str(place))
    place.mkdir(parents=True, exist_ok=True)
    called = _no_training(monkeypatch)
    before = _files(tmp_path)
    with monkeypatch.context() as m:
        ReadOnlyLocks(m, place)
        r = run_cli(capsys, *args(spec, out))
    _last_line(r, "cannot use", str(place), "Permission denied")
    assert _files(tmp_path) == before and called == []


MISSING_STUDY_FILE = [("data", "prepare"), ("studies", "show")]


@pytest.mark.parametrize("command", MISSING_STUDY_FILE, ids=" ".join)
def test_a_study_file_that_does_not_exist_is_one_line_naming_it(tmp_path, capsys, command):
    one_line(run_cli(capsys, *command, tmp_path / "nosuch.yaml"), str(tmp_path / "nosuch.yaml"))
    assert list(tmp_path.iterdir()) == []


# ---- Ctrl-C at a moment -----------------------------------------------------------------------------------------


def _stop_at_training(monkeypatch) -> None:
    """Training, lm-eval and the sanity overfit stood in for by a Ctrl-C: one pressed during them, at the latest
    (nothing trains in these tests)."""
    import ladder.model.evaluation.downstream as downstream
    import ladder.model.evaluation.sanity as sanity
    import ladder.model.training.loop as loop

    def ctrl_c(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(loop, "train", ctrl_c)
    monkeypatch.setattr(downstream, "_load_lm", ctrl_c)
    monkeypatch.setattr(sanity, "run_sanity", ctrl_c)


# command -> (the study it takes, what it needs first, its command line from the study (folder or file), whether
# the same command, run again without a Ctrl-C, ends well here: not those that would train or prepare data)
CTRL_C = {
    "report": ("fitted", None, lambda s: ("report", s, "--format", "html"), True),
    "forecast score": ("fitted", "freeze", lambda s: ("forecast", "score", s, "--loss", "2.5"), True),
    "plan --suggest": ("fitted", None, lambda s: ("plan", s, "--suggest"), True),
    "eval": ("fitted", _finished_with_a_model, lambda s: ("eval", s, "--executor", "debug", "--device", "cpu"), False),
    "plan": ("file", None, lambda f: ("plan", f, "--out", f.parent / "planned"), True),
    "studies validate": ("file", None, lambda f: ("studies", "validate", f), True),
    "cancel": ("micro", _a_job, lambda s: ("cancel", s), True),
    "submit": ("micro", None, lambda s: ("submit", s, "--executor", "debug"), False),
    "train": ("micro", None, lambda s: ("train", _first_run(s), "--device", "cpu"), False),
    "run": (
        "file",
        None,
        lambda f: ("run", f, "--out", f.parent / "out", "--executor", "debug", "--skip-sanity"),
        False,
    ),
    "sanity": ("file", None, lambda f: ("sanity", f), False),
    "data prepare": ("file", None, lambda f: ("data", "prepare", f), False),
}


def _interrupted_here(r, command: str) -> None:
    assert r.code == 130, (command, r.code, r.stdout[-2000:], r.stderr[-2000:])
    assert "Traceback" not in r.stderr + r.stdout, r.stderr
    assert r.stderr.strip().splitlines()[-1] == "interrupted: run the same command to continue", r.stderr


@pytest.mark.parametrize("moment", [40, 400, 4000])
@pytest.mark.parametrize("command", list(CTRL_C))
def test_ctrl_c_at_a_moment_is_one_line_and_nothing_is_lost(fitted, tmp_path, capsys, monkeypatch, command, moment):
    import sys

    import ladder.cli  # noqa: F401 - imported before main() runs: not part of a command

    which, first, args, again_ends_well = CTRL_C[command]
    study = {"fitted": fitted, "micro": _micro(tmp_path), "file": _study_file(tmp_path, BASE)}[which]
    if first == "freeze":
        assert run_cli(capsys, "forecast", "freeze", study).code == 0
    elif first is not None:
        first(study)
    _cheap_suggest(monkeypatch)
    _stop_at_training(monkeypatch)
    argv = args(study)
    old = sys.gettrace()
    sys.settrace(systematic._ctrl_c_after(moment))
    try:
        r = run_cli(capsys, *argv)
    finally:
        sys.settrace(old)
    if r.code != 130:  # the command finished before that many lines: nothing to interrupt
        assert moment > 40 and r.code == 0, (r.code, r.stderr[-2000:])
        assert "Traceback" not in r.stderr + r.stdout
    else:
        _interrupted_here(r, command)
    if again_ends_well:  # nothing lost: the same command continues and ends well
        again = run_cli(capsys, *argv)
        assert again.code == 0, (again.code, again.stderr[-2000:])


def test_ctrl_c_while_ladder_run_trains_is_the_same_one_line(tmp_path, capsys, monkeypatch):
    """`ladder run` says what every other command says on Ctrl-C, once its runs train: its workers checkpoint as
    they stop, and the same command continues."""
    from types import SimpleNamespace

    import ladder.jobs.submit
    import ladder.pipeline

    def submit(*a, **k):  # the Ctrl-C reaches the wait for the runs
        raise KeyboardInterrupt

    monkeypatch.setattr(ladder.pipeline, "prepare", lambda study, **kw: SimpleNamespace(
        train_tokens=1, val_tokens=1, root="(no data prepared in this test)"))  # fmt: skip
    monkeypatch.setattr(ladder.jobs.submit, "submit", submit)
    spec = _study_file(tmp_path, BASE)
    r = run_cli(capsys, "run", spec, "--out", tmp_path / "out", "--executor", "debug", "--skip-sanity")
    _interrupted_here(r, "run")


# ---- a really read-only study (a read-only bind mount, where the machine allows one) ------------------------


@contextlib.contextmanager
def _mounted_read_only(path: Path):
    """``path`` made read-only by the kernel (bind-mounted onto itself, then remounted ro): the real thing the
    monkeypatched :class:`ReadOnly` stands in for. Skips where mounting is not allowed (not root, a container
    without CAP_SYS_ADMIN); as root, permission bits alone would not stop a write."""
    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("a read-only bind mount needs root and mount(8)")
    bound = subprocess.run(["mount", "--bind", str(path), str(path)], capture_output=True)
    if bound.returncode:
        pytest.skip(f"mount --bind is not allowed here: {bound.stderr.decode(errors='replace').strip()}")
    try:
        ro = subprocess.run(["mount", "-o", "remount,bind,ro", str(path)], capture_output=True)
        if ro.returncode:
            pytest.skip(f"a read-only remount is not allowed here: {ro.stderr.decode(errors='replace').strip()}")
        yield
    finally:
        subprocess.run(["umount", str(path)], check=True)


@pytest.mark.parametrize("command", list(systematic.READ_ONLY_COMMANDS))
def test_a_study_on_a_read_only_mount_is_one_line_and_left_as_it_was(fitted, capsys, command):
    """The re-trial ran as root, where chmod does not stop a write, so an unwritable study for `fit` was only
    ever tested through a stand-in: here the kernel refuses (EROFS, 'Read-only file system')."""
    before = _files(fitted)
    with _mounted_read_only(fitted):
        r = run_cli(capsys, *systematic.READ_ONLY_COMMANDS[command](fitted))
    one_line(r, "cannot use", str(fitted), "Read-only file system")
    assert _files(fitted) == before
