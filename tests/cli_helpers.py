"""Run the `ladder` CLI in-process the way the console script does (main(): LadderError -> exit 2)."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass

import pytest


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str

    def json(self):
        return json.loads(self.stdout)


def run_cli(capsys: pytest.CaptureFixture, *args: str) -> CliResult:
    from ladder.cli import main

    old = sys.argv
    sys.argv = ["ladder", *map(str, args)]
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv = old
    captured = capsys.readouterr()
    return CliResult(code, captured.out, captured.err)


def one_line(r: CliResult, *words: str) -> str:
    """A refusal: exit 2, one line on stderr starting ``error: `` and holding each of ``words``, no traceback;
    returns that line."""
    assert r.code == 2, (r.code, r.stdout[-2000:], r.stderr[-2000:])
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    assert "Traceback" not in r.stderr + r.stdout
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


def taken_or_refused(r: CliResult) -> str | None:
    """The house rule for odd input, for a test that tries many: ``None`` when the command answered (exit 0) or
    refused in one line (exit 2, one ``error:`` line on stderr), with no traceback; else what went wrong."""
    lines = r.stderr.strip().splitlines()
    refused = r.code == 2 and len(lines) == 1 and lines[0].startswith("error: ")
    if (r.code == 0 or refused) and "Traceback" not in r.stderr + r.stdout:
        return None
    return f"exit {r.code}: {r.stderr[-300:]}"
