"""retrial10: Ctrl-C (SIGINT), `kill` (SIGTERM) or a closed terminal (SIGHUP) at a random moment of a command, found
by sending the signal at random delays to real commands on a micro study; each case here is that moment made
deterministic. The promise: the shell's code for the signal, one line saying to run the same command again, no
traceback, nothing half-written."""

from __future__ import annotations

import signal

import pytest

from tests.cli_helpers import run_cli


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
def test_a_signal_inside_an_extension_module_s_import_is_said_like_a_ctrl_c(tmp_path, capsys, monkeypatch, name):
    """`ladder fit` killed while it imported matplotlib: the signal's exception went off inside ft2font's
    initialization, which turned it into "ImportError: initialization failed": a traceback, then a fatal error in
    the interpreter's teardown (exit -6) instead of "stopped by SIGTERM: run the same command to continue"."""
    import ladder.books.run_status as run_status
    from ladder.cli import Stopped
    from tests.fake_runs import plan_micro

    signum = getattr(signal, name)

    def import_an_extension(*a, **k):  # what a C extension's init does with an exception raised inside it
        try:
            raise KeyboardInterrupt if signum == signal.SIGINT else Stopped(signum)
        except KeyboardInterrupt as exc:
            raise ImportError("initialization failed") from exc

    plan_micro(tmp_path / "s")
    monkeypatch.setattr(run_status, "study_status", import_an_extension)
    r = run_cli(capsys, "status", tmp_path / "s")
    said = "interrupted" if signum == signal.SIGINT else f"stopped by {name}"
    assert r.code == 128 + signum, (r.code, r.stderr[-2000:])
    assert "Traceback" not in r.stderr + r.stdout, r.stderr
    assert r.stderr.strip().splitlines()[-1] == f"{said}: run the same command to continue", r.stderr


def test_a_kill_whose_clean_up_fails_is_still_said_like_a_ctrl_c(tmp_path, capsys, monkeypatch):
    """`ladder data prepare` killed (SIGTERM to its process group) while datatrove's worker pool ran: the pool's
    clean-up then failed on its semaphores, already gone, and the command said "error: No such file or directory
    (FileNotFoundError)", exit 2, as if the study were wrong, instead of the kill's one line."""
    import ladder.books.run_status as run_status
    from ladder.cli import Stopped
    from tests.fake_runs import plan_micro

    def killed_and_cleaned_up_badly(*a, **k):
        try:
            raise Stopped(signal.SIGTERM)
        finally:
            raise FileNotFoundError(2, "No such file or directory")

    plan_micro(tmp_path / "s")
    monkeypatch.setattr(run_status, "study_status", killed_and_cleaned_up_badly)
    r = run_cli(capsys, "status", tmp_path / "s")
    assert r.code == 128 + signal.SIGTERM, (r.code, r.stderr[-2000:])
    assert r.stderr.strip().splitlines()[-1] == "stopped by SIGTERM: run the same command to continue", r.stderr


def test_a_kill_that_ends_in_an_eof_error_is_not_a_silent_exit_1(tmp_path, capsys, monkeypatch):
    """`ladder data prepare` killed (SIGTERM to its process group) while datatrove's worker pool ran: the pool's
    pipe to its killed workers then raised EOFError, which typer turns into an Abort, and the process ended with
    exit 1 and not a word."""
    import ladder.books.run_status as run_status
    from ladder.cli import Stopped
    from tests.fake_runs import plan_micro

    def killed_with_the_workers(*a, **k):
        try:
            raise Stopped(signal.SIGTERM)
        finally:
            raise EOFError

    plan_micro(tmp_path / "s")
    monkeypatch.setattr(run_status, "study_status", killed_with_the_workers)
    r = run_cli(capsys, "status", tmp_path / "s")
    assert r.code == 128 + signal.SIGTERM, (r.code, r.stderr[-2000:])
    assert r.stderr.strip().splitlines()[-1] == "stopped by SIGTERM: run the same command to continue", r.stderr


def _ctrl_c_after(module, name: str, monkeypatch) -> None:
    """A real Ctrl-C (SIGINT to this process) the moment ``module.name`` has returned, once."""
    import os

    original = getattr(module, name)
    pressed = []

    def then_ctrl_c(*a, **k):
        value = original(*a, **k)
        if not pressed:
            pressed.append(True)
            os.kill(os.getpid(), signal.SIGINT)
        return value

    monkeypatch.setattr(module, name, then_ctrl_c)


def _as_told(capsys, *argv):
    """The command, and once more if it said to run it again: what a user who follows its word ends with."""
    r = run_cli(capsys, *argv)
    if r.code == 130:
        assert r.stderr.strip().splitlines()[-1] == "interrupted: run the same command to continue", r.stderr
        r = run_cli(capsys, *argv)
    assert r.code == 0, (r.code, r.stderr[-2000:])


def test_ctrl_c_once_a_freeze_is_on_record_does_not_freeze_twice(study, capsys, monkeypatch):
    """`ladder forecast freeze` pressed Ctrl-C as it said what it froze: the freeze was on record, but it said
    "interrupted: run the same command to continue", and the same command froze the forecast a second time."""
    import ladder.forecast.frozen as frozen

    before = {p.name for p in study.glob("forecast*.json")}
    _ctrl_c_after(frozen, "read_frozen_one", monkeypatch)
    _as_told(capsys, "forecast", "freeze", study)
    assert len({p.name for p in study.glob("forecast*.json")} - before) == 1


def test_ctrl_c_once_a_score_is_on_record_does_not_score_twice(study, capsys, monkeypatch):
    """`ladder forecast score` pressed Ctrl-C right after it appended the score: it said to run the same command
    again, which appended the same score a second time."""
    import json

    import ladder.forecast.score as score

    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    [path] = [p for p in study.glob("forecast*.json") if not json.loads(p.read_text())["scores"]][-1:]
    _ctrl_c_after(score, "append_scores", monkeypatch)
    _as_told(capsys, "forecast", "score", study, "--loss", "3.5")
    assert [s["actual"] for s in json.loads(path.read_text())["scores"]] == [3.5]


def test_a_kill_while_the_command_line_is_read_is_said_as_a_kill(tmp_path, capsys, monkeypatch):
    """`kill` (SIGTERM) landing as typer read the command line, before ladder's guard around the command: typer
    turned it into its exit 130, and the command said "interrupted", exit 130, as for a Ctrl-C, not "stopped by
    SIGTERM", exit 143."""
    import typer._click.core as click_core

    from ladder.cli import _stop_on
    from tests.fake_runs import plan_micro

    make_context = click_core.Command.make_context

    def killed_while_reading(self, *a, **k):
        make_context(self, *a, **k)
        _stop_on(signal.SIGTERM, None)

    plan_micro(tmp_path / "s")
    monkeypatch.setattr(click_core.Command, "make_context", killed_while_reading)
    r = run_cli(capsys, "status", tmp_path / "s")
    assert r.code == 128 + signal.SIGTERM, (r.code, r.stderr[-2000:])
    assert r.stderr.strip().splitlines()[-1] == "stopped by SIGTERM: run the same command to continue", r.stderr


def test_the_data_pools_workers_leave_a_ctrl_c_to_the_command(tmp_path):
    """Ctrl-C during `ladder data prepare` (and the main job's data stage) reaches the whole process group: each of
    datatrove's pool workers printed its own KeyboardInterrupt traceback above the command's one line. The fork
    server the workers come from is started deaf to SIGINT, so the workers inherit that and the command alone
    stops (ending the pool). In a fresh interpreter: a fork server started earlier by another test would be reused."""
    import subprocess
    import sys
    from pathlib import Path

    probe = (
        "import signal, multiprocess\n"
        "from ladder.model.data.executors import start_forkserver_deaf_to_ctrl_c\n"
        "if __name__ == '__main__':\n"
        "    start_forkserver_deaf_to_ctrl_c()\n"
        "    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the command still hears it\n"
        "    with multiprocess.get_context('forkserver').Pool(1) as pool:\n"
        "        print(pool.apply(signal.getsignal, (signal.SIGINT,)) == signal.SIG_IGN)\n"
    )
    script = tmp_path / "probe.py"  # forkserver re-imports __main__ from its file
    script.write_text(probe)
    root = str(Path(__file__).resolve().parents[1])
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                       env={**__import__("os").environ, "PYTHONPATH": root})  # fmt: skip
    assert r.returncode == 0 and r.stdout.strip() == "True", (r.stdout, r.stderr)
