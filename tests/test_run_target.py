"""Where `ladder run` puts a study: a planned study directory is continued in place."""

from __future__ import annotations

from pathlib import Path

from ladder.plan.planner import default_study_dir, read_study, study_dir_for
from tests.hero_fixture import make_ladder


def test_a_planned_study_directory_is_run_in_place_not_copied_under_ladder_runs(tmp_path, monkeypatch):
    """Issue 28 re-trial: `ladder run S` on a planned, trained study directory planned a second copy under
    ./ladder-runs/<name> and trained all its runs again."""
    monkeypatch.chdir(tmp_path)
    study = make_ladder(tmp_path / "s", fit=False)
    spec = read_study(study)
    assert study_dir_for(str(study), spec) == study
    assert study_dir_for(str(study), spec, tmp_path / "elsewhere") == tmp_path / "elsewhere"  # --out wins
    assert study_dir_for(str(study / "study.yaml"), spec) == default_study_dir(spec)  # a file: ./ladder-runs
    assert study_dir_for(str(tmp_path), spec) == default_study_dir(spec)  # a folder without a study.yaml
    assert not Path("ladder-runs").exists()
