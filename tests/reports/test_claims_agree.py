"""The tool never claims a backtest it never ran (issue 28): a 3-size x 3-budget ladder has no rollout forecast, so
``ladder fit``'s recommended-hero table does not say its law forms were "weighted by rollout" and the report's
forecast table is not "calibrated on the rollout"; a ladder with a rollout says both. And a fit made from other
results than the study's now is flagged at the top of the report's headline, as ``ladder hero`` refuses it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from ladder import layout
from ladder.reports.render.builder import Builder
from ladder.reports.render.sections.headline import headline
from ladder.reports.render.sections.scaling import scaling
from ladder.reports.render.study import load_study
from ladder.reports.summary import print_fit
from tests.reports.fits.synthetic import fit_json_of, make_study, study_table
from tests.reports.texts import texts as _texts


def _study_dir(root: Path, sizes: list[str]) -> Path:
    """``results.parquet`` of a synthetic ladder (``sizes`` x three budgets) and its real ``fit.json``."""
    from ladder.reports.fits import fit_study

    study = make_study(
        ladder={"sizes": sizes, "param_count": "non_embedding", "tokens_per_param": 20, "budgets": [0.5, 1, 2]},
        ablations={},
    )
    runs = study_table(study)
    root.mkdir(parents=True)
    runs.to_parquet(layout.StudyDir(root).results_parquet)
    layout.atomic_write_json(layout.StudyDir(root).fit, fit_study(runs, study=study, n_boot=20).to_dict())
    return root


@pytest.fixture(scope="module")
def studies(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("claims")
    return {
        "none": _study_dir(base / "three", ["25K", "50K", "100K"]),
        "some": _study_dir(base / "five", ["25K", "50K", "100K", "200K", "400K"]),
    }


def _summary(fit) -> str:
    console = Console(record=True, width=400, file=open("/dev/null", "w"))
    print_fit(fit, console)
    return console.export_text()


def test_no_rollout_rows_no_weighting_or_calibration_by_rollout(studies):
    data = load_study(studies["none"])
    assert data.fit["loss"]["rollout"]["rows"] == [] and data.fit["loss"]["calibration"]["n"] == 0
    ctx = Builder(data)
    summary, section = _summary(ctx.fit_json), _texts(scaling(ctx))
    assert "weighted by rollout" not in summary and "calibrated on the rollout" not in section
    assert "law form(s) weighted equally" in summary and "variant all" not in summary  # one variant: unnamed
    assert "no rollout forecasts to weight them by" in summary
    assert "no rollout forecasts to calibrate them on" in section
    # and fit.json itself, which `ladder hero` and the report quote
    assert "weighted by rollout" not in json.dumps(data.fit["hero"]) + json.dumps(data.fit["recommendation"])
    assert "weighted equally" in data.fit["hero"]["loss_source"]


def test_a_rollout_is_claimed_where_there_is_one(studies):
    data = load_study(studies["some"])
    assert data.fit["loss"]["calibration"]["n"] > 0
    ctx = Builder(data)
    summary, section = _summary(ctx.fit_json), _texts(scaling(ctx))
    assert "weighted by rollout (" in summary and "Forecasts (90% intervals, calibrated on the rollout)" in section
    assert "weighted by rollout (" in data.fit["hero"]["loss_source"]
    assert "weighted equally" not in summary


def test_a_hand_given_source_is_kept_when_there_is_no_rollout_claim():
    from ladder.reports.summary import loss_source

    fit = fit_json_of({})
    assert loss_source(fit, "") == "" and loss_source(fit, "given by hand") == "given by hand"
    assert "weighted by rollout" not in loss_source(fit, "fit: 2 law form(s) of variant x weighted by rollout (a 1)")


def test_a_fit_older_than_the_results_is_flagged_at_the_top_of_the_headline(studies, tmp_path):
    import pandas as pd

    fresh = load_study(studies["none"])
    assert fresh.stale_fit is None and "older than the results" not in _texts(headline(Builder(fresh)))
    root = tmp_path / "study"
    root.mkdir()
    sd = layout.StudyDir(root)
    for name in (layout.RESULTS_PARQUET, layout.FIT):
        (root / name).write_bytes((studies["none"] / name).read_bytes())
    runs = pd.read_parquet(sd.results_parquet)
    runs.loc[0, "final_eval_loss"] = float(runs.loc[0, "final_eval_loss"]) * 1.01  # a result changed, recollected
    runs.to_parquet(sd.results_parquet)
    data = load_study(root)
    assert data.stale_fit and "the fit is older than the results" in data.stale_fit
    assert "ladder fit" in data.stale_fit
    blocks = headline(Builder(data)).blocks
    assert "the fit is older than the results" in _texts(blocks[0])  # first thing in the headline
    fit = json.loads(sd.fit.read_text())
    fit["meta"].pop("results_sha256")  # a fit that does not record its results: nothing to compare, no claim
    sd.fit.write_text(json.dumps(fit))
    assert load_study(root).stale_fit is None


def test_ladder_report_on_a_stale_fit_says_so_on_stderr_and_renders(tmp_path, capsys):
    import pandas as pd

    from tests.cli_helpers import run_cli
    from tests.reports.fixture_study import make_study as planned_study

    root = planned_study(tmp_path / "study", points=3, tie=False, lr_multipliers=None, tasks=False, n_boot=10)
    fresh = run_cli(capsys, "report", root, "--format", "html")
    assert fresh.code == 0 and "older than the results" not in fresh.stderr
    sd = layout.StudyDir(root)
    runs = pd.read_parquet(sd.results_parquet)
    done = runs.index[runs["status"] == "done"][0]
    runs.loc[done, "loss"] = float(runs.loc[done, "loss"]) * 1.01  # a result changed and was collected again
    runs.to_parquet(sd.results_parquet)
    stale = run_cli(capsys, "report", root, "--format", "html")
    assert stale.code == 0, stale.stderr
    assert "the fit is older than the results" in stale.stderr and f"ladder fit {root}" in stale.stderr
    assert "the fit is older than the results" in (sd.report / "report.html").read_text(encoding="utf-8")


def test_ladder_report_says_when_runs_finished_after_the_last_collect(tmp_path, capsys):
    """Issue 28: a run that finished after the last collect was left out of the report's numbers without a word;
    the advice is collect, then fit, then report again (and once they have run, no warning)."""
    from ladder.plan.planner import read_plan
    from tests.cli_helpers import run_cli
    from tests.hero_fixture import law_loss, make_ladder, refresh, train

    root = make_ladder(tmp_path / "s", skip=("141K",))
    fresh = run_cli(capsys, "report", root, "--format", "html")
    assert fresh.code == 0 and "warning" not in fresh.stderr, fresh.stderr
    late = next(s for s in read_plan(root)[1] if s.axes.get("size") == "141K")
    train(layout.StudyDir(root), late, law_loss(late.params, late.tokens))  # finishes; nobody collects
    stale = run_cli(capsys, "report", root, "--format", "html")
    assert stale.code == 0 and "Traceback" not in stale.stderr
    (line,) = stale.stderr.strip().splitlines()
    assert f"1 run(s) finished after the last collect ({late.run_id})" in line
    assert f"ladder collect {root}" in line and f"ladder fit {root}" in line
    page = (layout.StudyDir(root).report / "report.html").read_text(encoding="utf-8")
    assert "finished after the last collect" in " ".join(page.split())
    refresh(root)  # collect and fit
    again = run_cli(capsys, "report", root, "--format", "html")
    assert again.code == 0 and "warning" not in again.stderr, again.stderr
    layout.StudyDir(root).results_parquet.unlink()  # a table deleted: no "after the last collect", no fit blamed
    gone = run_cli(capsys, "report", root, "--format", "html")
    assert gone.code == 0 and "finished, but the study has no readable results.parquet" in gone.stderr
    assert "leave them out" not in gone.stderr and f"ladder collect {root}" in gone.stderr
