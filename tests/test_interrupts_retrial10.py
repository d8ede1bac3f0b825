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
