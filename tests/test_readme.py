"""The README agrees with the code: its command examples that train nothing run as written (from the repository's
root, exit 0), its example study gets the default study's LR, and its numbers for the default study are the
plan's."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import yaml

from tests.cli_helpers import run_cli

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
# commands that train, submit or write into a study: the test leaves them alone unless they only ask for --help
TRAINS = {
    "run",
    "submit",
    "train",
    "sanity",
    "eval",
    "cancel",
    "collect",
    "report",
    "hero",
    "forecast",
    ("data", "prepare"),
    ("data", "tokenizer"),
}
SEPARATORS = {"&&", "||", ";", "|"}


def _blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", README, flags=re.S | re.M)


def _safe(argv: list[str]) -> bool:
    """Trains nothing, writes nothing, and needs no study that `make demo` made (a `$S` in the README)."""
    if any("$" in a for a in argv):
        return False
    return "--help" in argv or not (argv[0] in TRAINS or tuple(argv[:2]) in TRAINS)


def _commands(line: str) -> list[list[str]]:
    """The commands of a shell line (split at &&, ||, ; and |), as argument lists."""
    out, current = [], []
    for token in shlex.split(line, comments=True):
        if token in SEPARATORS:
            out.append(current)
            current = []
        else:
            current.append(token)
    return [c for c in [*out, current] if c]


def readme_commands() -> list[list[str]]:
    """The `ladder ...` lines of the README's bash blocks that train nothing, as argument lists."""
    commands = []
    for block in _blocks("bash") + _blocks("shell") + _blocks("sh"):
        for argv in (c for line in block.splitlines() for c in _commands(line)):
            if argv[:1] in (["ladder"], [".venv/bin/ladder"]) and len(argv) > 1 and _safe(argv[1:]):
                commands.append(argv[1:])
    return commands


def test_the_readme_shows_commands_to_try():
    commands = readme_commands()
    assert len(commands) >= 8 and {c[0] for c in commands} >= {"studies", "plan", "model", "fit"}, commands


@pytest.mark.parametrize("argv", readme_commands(), ids=lambda a: " ".join(a)[:60])
def test_a_readme_command_runs_as_written(argv, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("COLUMNS", "120")
    before = sorted(p.name for p in ROOT.iterdir())
    r = run_cli(capsys, *argv)
    assert r.code == 0, (argv, r.stderr)
    assert "Traceback" not in r.stdout + r.stderr
    if "--json" in argv:
        json.loads(r.stdout)
    assert sorted(p.name for p in ROOT.iterdir()) == before  # nothing written


def test_the_readme_example_study_gets_the_default_recipes_lr():
    from ladder.model.recipe import rule_lr
    from ladder.plan.planner import expand
    from ladder.studies import load_study
    from ladder.studies.spec import parse_study

    example = next(yaml.safe_load(b) for b in _blocks("yaml") if b.startswith("name: "))
    default = load_study("default").training
    runs = expand(parse_study(example)).runs
    assert len(runs) == 2 * len(example["ladder"]["sizes"])
    for run in runs:
        assert run.lr == pytest.approx(rule_lr(default, run.shape.params_non_embedding, run.flops)[0], rel=1e-12)
    assert max(run.lr for run in runs) < 0.016  # 7.8e-2 at 25K without lr_scale and lr_max


def test_the_readme_describes_the_default_plan():
    from ladder.plan.planner import expand
    from ladder.studies import load_study

    study = load_study("default")
    runs = expand(study).runs
    sizes = sorted({run.shape.params_non_embedding for run in runs})
    said = re.search(
        r"plans (\d+) runs: (\d+) rungs from (\S+) to (\S+) non-embedding\s+parameters \(([\d.]+)x\)", README
    )
    assert said, "the README's sentence on the default plan"
    n, rungs, lo, hi, ratio = said.groups()
    assert (int(n), int(rungs)) == (len(runs), len(sizes))
    assert (lo, hi) == (f"{round(sizes[0] / 1000)}K", f"{round(sizes[-1] / 1000)}K")
    assert ratio == f"{sizes[-1] / sizes[0]:.1f}"
    assert f"spanning {ratio}x" in " ".join(study.description.split())
