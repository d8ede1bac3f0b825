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
