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
