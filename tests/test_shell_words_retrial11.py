"""Re-trial 11: a command a message prints for the user to paste names its paths as shell words. A study folder
whose name holds a space and quotes (``my st'dy "x"``) gave "run `ladder fit /x/my st'dy "x"`", which the shell
splits or never closes; now each such path is quoted (``shlex.quote``: an ordinary path is printed as before), so
the command typed as printed names the study again.

Table-driven: each case damages or advances a copy of a small fitted study (or a planned micro-study), runs the
command whose message carries the hint, takes every backticked ``ladder ...`` or ``rm ...`` command from its
output, splits it as the shell would and checks that every path in it is the study folder or a path inside it.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from ladder import layout
from tests.cli_helpers import run_cli

ODD = """my st'dy "x\""""  # a space, a single and a double quote


@pytest.fixture(scope="module")
def fitted_odd(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.hero_fixture import make_ladder

    return make_ladder(tmp_path_factory.mktemp("odd") / ODD)


@pytest.fixture(scope="module")
def micro_odd(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The micro-study of tests.fake_runs with every outcome (done, failed, diverged, ...), in an odd folder."""
    from tests.fake_runs import outcomes

    root = tmp_path_factory.mktemp("micro") / ODD
    outcomes(root)
    return root


@pytest.fixture(scope="module")
def planned_odd(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The micro-study planned, no run trained, in an odd folder."""
    from tests.fake_runs import plan_micro

    root = tmp_path_factory.mktemp("planned") / ODD
    plan_micro(root)
    return root


def _runs(s: Path) -> list[str]:
    return sorted(p.name for p in (s / layout.RUNS).iterdir())


def _replace(path: Path, *, folder: bool = False, text: str | None = None) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()
    if folder:
        path.mkdir()
    elif text is not None:
        path.write_text(text)


def _stale_fit(s: Path) -> None:
    """results.parquet changed since the fit: the fit is of another results table."""
    table = pd.read_parquet(s / layout.RESULTS_PARQUET)
    table.loc[table.index[0], "final_eval_loss"] = float(table["final_eval_loss"].iloc[0]) + 0.01
    table.to_parquet(s / layout.RESULTS_PARQUET, index=False)


def _freeze(s: Path, capsys) -> None:
    assert run_cli(capsys, "forecast", "freeze", s).code == 0


def _hero(s: Path, capsys) -> None:
    assert run_cli(capsys, "hero", s).code == 0


def _failed_hero(s: Path, capsys) -> None:
    _freeze(s, capsys)
    _hero(s, capsys)
    from tests.hero_fixture import hero_spec

    rd = layout.StudyDir(s).run(hero_spec(s).run_id)
    layout.atomic_write_json(rd.result, {"status": "failed", "error": "boom"})


def _link_to_other_run(s: Path) -> None:
    first, second = _runs(s)[:2]
    _replace(s / layout.RUNS / first)
    os.symlink(s / layout.RUNS / second, s / layout.RUNS / first)


def _edit_study(s: Path) -> None:
    text = (s / layout.STUDY).read_text()
    assert "tokens_per_param: 20" in text
    (s / layout.STUDY).write_text(text.replace("tokens_per_param: 20", "tokens_per_param: 21"))


Setup = Callable[[Path, object], None]
# case: (which study, what is done to its copy, the command; "S" stands for the study folder), and a word the
# hint's line holds (that the case reaches the hint it is for)
CASES: dict[str, tuple[str, Setup, tuple[str, ...], str]] = {
    "forecast show, no freeze": ("fitted", lambda s, c: None, ("forecast", "show", "S"), "forecast freeze"),
    "forecast freeze: next steps": ("fitted", lambda s, c: None, ("forecast", "freeze", "S"), "ladder hero"),
    "hero, no freeze yet": ("fitted", lambda s, c: None, ("hero", "S"), "ladder submit"),
    "hero after a freeze": ("fitted", _freeze, ("hero", "S"), "forecast score"),
    "score, no freeze": ("fitted", lambda s, c: None, ("forecast", "score", "S"), "forecast freeze"),
    "score, no hero": ("fitted", _freeze, ("forecast", "score", "S"), "ladder hero"),
    "score, hero untrained": (
        "fitted",
        lambda s, c: (_freeze(s, c), _hero(s, c)),
        ("forecast", "score", "S"),
        "ladder submit",
    ),
    "score, hero failed": ("fitted", _failed_hero, ("forecast", "score", "S"), "--retry-failed"),
    "freeze, stale fit": ("fitted", lambda s, c: _stale_fit(s), ("forecast", "freeze", "S"), "ladder fit"),
    "freeze, no fit.json": (
        "fitted",
        lambda s, c: _replace(s / layout.FIT),
        ("forecast", "freeze", "S"),
        "ladder collect",
    ),
    "hero, damaged fit.json": (
        "fitted",
        lambda s, c: _replace(s / layout.FIT, text="{"),
        ("hero", "S"),
        "refit",
    ),
    "fit, fit.json a folder": ("fitted", lambda s, c: _replace(s / layout.FIT, folder=True), ("fit", "S"), "rm -r"),
    "freeze, fit.json a folder": (
        "fitted",
        lambda s, c: _replace(s / layout.FIT, folder=True),
        ("forecast", "freeze", "S"),
        "rm -r",
    ),
    "score, damaged forecast.json": (
        "fitted",
        lambda s, c: (s / layout.FORECAST).write_text("{"),
        ("forecast", "score", "S"),
        "forecast freeze",
    ),
    "hero, study.yaml edited": ("fitted", lambda s, c: _edit_study(s), ("hero", "S"), "--out"),
    "hero, study.yaml damaged": (
        "fitted",
        lambda s, c: (s / layout.STUDY).write_text("name: [\n"),
        ("hero", "S"),
        "--out",
    ),
    "status, no plan.json": ("fitted", lambda s, c: _replace(s / layout.PLAN), ("status", "S"), "ladder plan"),
    "status, plan.json a folder": (
        "fitted",
        lambda s, c: _replace(s / layout.PLAN, folder=True),
        ("status", "S"),
        "rm -r",
    ),
    "status, plan.json unreadable": (
        "fitted",
        lambda s, c: _replace(s / layout.PLAN, text="[]"),
        ("status", "S"),
        "--out",
    ),
    "status, a run's spec.json deleted": (
        "fitted",
        lambda s, c: _replace(s / layout.RUNS / _runs(s)[0] / layout.SPEC),
        ("status", "S"),
        "--out",
    ),
    "status, a run's spec.json a folder": (
        "fitted",
        lambda s, c: _replace(s / layout.RUNS / _runs(s)[0] / layout.SPEC, folder=True),
        ("status", "S"),
        "rm -r",
    ),
    "status, a run's folder a file": (
        "fitted",
        lambda s, c: _replace(s / layout.RUNS / _runs(s)[0], text="x"),
        ("status", "S"),
        "`rm ",
    ),
    "collect, a run's folder a link to another": (
        "fitted",
        lambda s, c: _link_to_other_run(s),
        ("collect", "S"),
        "`rm ",
    ),
    "collect, results.parquet a folder": (
        "fitted",
        lambda s, c: _replace(s / layout.RESULTS_PARQUET, folder=True),
        ("collect", "S"),
        "rm -r",
    ),
    "status --interval without --watch": ("fitted", lambda s, c: None, ("status", "S", "--interval", "5"), "--watch"),
    "submit --run of no run": ("fitted", lambda s, c: None, ("submit", "S", "--run", "nosuch"), "ladder status"),
    "cancel --run of no run": ("fitted", lambda s, c: None, ("cancel", "S", "--run", "nosuch"), "ladder status"),
    "train given the study": ("fitted", lambda s, c: None, ("train", "S"), "ladder submit"),
    "collect, failed runs": ("micro", lambda s, c: None, ("collect", "S"), "ladder status"),
    "fit, nothing done": (
        "planned",
        lambda s, c: run_cli(c, "collect", s),
        ("fit", "S"),
        "ladder submit",
    ),
    "eval, nothing done": ("planned", lambda s, c: None, ("eval", "S"), "ladder status"),
}

COMMAND = re.compile(r"`((?:ladder|rm) [^`]*)`")


def _commands(text: str) -> list[str]:
    return COMMAND.findall(text)


@pytest.mark.parametrize("case", list(CASES))
def test_a_pasted_command_names_the_study(case, fitted_odd, micro_odd, planned_odd, tmp_path, capsys):
    which, setup, args, word = CASES[case]
    base = {"fitted": fitted_odd, "micro": micro_odd, "planned": planned_odd}[which]
    s = Path(shutil.copytree(base, tmp_path / ODD, symlinks=True))
    setup(s, capsys)
    capsys.readouterr()
    r = run_cli(capsys, *(str(s) if a == "S" else a for a in args))
    text = r.stdout + r.stderr
    assert "Traceback" not in text, text[-2000:]
    lines = [line for line in text.splitlines() if word in line]
    assert lines, f"no hint with {word!r} in the output:\n{text[-3000:]}"
    with_paths = 0
    for command in (c for line in lines for c in _commands(line)):
        try:
            words = shlex.split(command)
        except ValueError as exc:
            pytest.fail(f"`{command}` cannot be typed as printed: {exc}")
        paths = [w for w in words[1:] if "/" in w and not w.startswith("<")]
        for p in paths:
            assert p == str(s) or p.startswith(str(s) + "/"), f"`{command}` names {p!r}, not a path in {s}"
            assert os.path.lexists(p) or os.path.lexists(os.path.dirname(p)), (command, p)
        with_paths += bool(paths)
    assert with_paths, f"no pasteable command with the study's path in: {lines}"


def test_an_ordinary_path_is_printed_as_before():
    """shlex.quote leaves a plain path as it is: the messages of every other study read as they did."""
    for plain in ("/tmp/ladder-runs/default", "runs/abc123", "S/fit.json", "./x_y-z.1"):
        assert layout.shell_word(plain) == plain
    assert shlex.split(layout.shell_word(f"/a/{ODD}")) == [f"/a/{ODD}"]
