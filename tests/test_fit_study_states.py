"""`ladder fit` on a micro-study in odd states (fake runs, no training): nothing finished, one variant finished,
both; what the terminal prints must read the way fit.json says (issue 28)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.cli_helpers import one_line, run_cli
from tests.fake_runs import finish, plan_micro


def _study(root: Path, which: str) -> Path:
    from ladder import layout

    sd = layout.StudyDir(root)
    for spec in plan_micro(root):
        tied = bool(spec.axes.get("tie_embeddings"))
        if which == "none" or (which == "tied" and not tied):
            continue
        n, d = float(spec.params), float(spec.tokens)
        finish(sd, spec, loss=1.5 + 60 / n**0.34 + 90 / d**0.28 + (0.0 if tied else 0.02))
    return root


def test_a_study_with_no_finished_run_says_to_train_not_a_runs_table_status(tmp_path, capsys):
    study = _study(tmp_path / "s", "none")
    assert run_cli(capsys, "collect", study).code == 0
    line = one_line(run_cli(capsys, "fit", study), "no finished runs", "ladder submit", "ladder collect")
    assert "runs table" not in line and "status column" not in line


@pytest.mark.parametrize("which", ["all", "tied"])
def test_every_number_the_terminal_prints_lies_inside_its_printed_interval(tmp_path, capsys, which):
    """'variant untied at the hero: 3.062 [3.06, 3.06]': the point at 4 digits, its interval at 3, so that the
    point read outside its own interval; the recommendation's loss row gave the hero's interval at 3 digits, the
    hero line at 4."""
    study = _study(tmp_path / "s", which)
    assert run_cli(capsys, "collect", study).code == 0
    r = run_cli(capsys, "fit", study, "--bootstrap", "5")
    assert r.code == 0, r.stderr
    pairs = re.findall(r"(\d+\.\d+) \(?(?:90% )?\[(\d+\.?\d*), (\d+\.?\d*)\]", r.stdout)
    assert pairs, r.stdout
    for point, lo, hi in pairs:
        assert float(lo) <= float(point) <= float(hi), (point, lo, hi)
    fit = json.loads((study / "fit.json").read_text())
    h = fit["hero"]
    hero = f"{h['loss']:.4g} (90% [{h['lo']:.4g}, {h['hi']:.4g}]"
    assert hero in r.stdout
    assert f"{h['loss']:.4g} [{h['lo']:.4g}, {h['hi']:.4g}]" in r.stdout  # the recommendation's loss row


def test_fit_json_holds_the_below_the_ladder_warning(tmp_path, capsys):
    study = _study(tmp_path / "s", "all")
    assert run_cli(capsys, "collect", study).code == 0
    r = run_cli(capsys, "fit", study, "--bootstrap", "3", "--predict", "5K:1e4")
    assert r.code == 0 and "below the ladder" in r.stderr and "below the ladder" not in r.stdout
    fit = json.loads((study / "fit.json").read_text())
    assert any("below the ladder" in w for w in fit["warnings"])
