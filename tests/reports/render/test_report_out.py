"""`ladder report S --out ''` wrote report.html and report.pdf into the current folder (Path('') is '.'): an empty
--out is refused in one line, exit 2, and nothing is written (issue 28)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli_helpers import one_line, run_cli
from tests.hero_fixture import make_ladder


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Path:
    return make_ladder(tmp_path_factory.mktemp("out") / "study", n_boot=10)


@pytest.mark.parametrize("empty", ["", "  "])
def test_an_empty_out_is_refused_and_nothing_is_written(study, tmp_path, capsys, monkeypatch, empty):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    before = sorted((p.relative_to(study), p.stat().st_mtime_ns) for p in study.rglob("*"))
    line = one_line(run_cli(capsys, "report", study, "--out", empty), "an empty path", str(study / "report"))
    assert line.startswith(f"error: --out {empty!r}: ")
    assert list(cwd.iterdir()) == []
    assert sorted((p.relative_to(study), p.stat().st_mtime_ns) for p in study.rglob("*")) == before
    assert not (study / "report").exists()


def test_a_curve_point_of_1e300_draws_without_a_stray_warning(tmp_path):
    """Issue 28: `ladder report` printed numpy's "RuntimeWarning: overflow encountered in exp" (matplotlib's log
    scale of a 1e300 eval loss); the report renders with no warning reaching the terminal."""
    import warnings

    import pandas as pd

    from ladder import layout
    from ladder.reports.render import render_report
    from tests.hero_fixture import make_ladder

    root = make_ladder(tmp_path / "s", fit=False)
    sd = layout.StudyDir(root)
    curves = pd.read_parquet(sd.curves)
    curves.loc[curves.index[curves["kind"] == "eval"][0], "eval_loss"] = 1e300
    curves.to_parquet(sd.curves)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = render_report(root, tmp_path / "out", formats="html")
    assert [str(w.message) for w in caught] == []
    assert "could not be drawn" not in out["html"].read_text(encoding="utf-8")


def test_ctrl_c_while_the_report_is_built_leaves_no_empty_report_folder(study, tmp_path, capsys, monkeypatch):
    """Issue 28 (user trial): Ctrl-C during `ladder report` left an empty report/ folder behind."""
    from ladder.reports.render import report as report_module

    def interrupted(*_a, **_k):
        raise KeyboardInterrupt

    monkeypatch.setattr(report_module, "build_sections", interrupted)
    r = run_cli(capsys, "report", study, "--out", tmp_path / "new" / "report")
    assert r.code == 130 and "interrupted: run the same command to continue" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "new" / "report").exists()
