"""`ladder eval` end to end: lm-eval runs offline on the checkpoints of a tiny trained study through the
executors, the results reach the results table, the fit forecasts the hero's task loss and the report shows
the section."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from tests.cli_helpers import run_cli
from tests.micro import write_study

pytestmark = pytest.mark.slow


def test_eval_collect_fit_report(tmp_path, tiny_jsonl_corpus, capsys):
    spec = write_study(
        tmp_path / "s.yaml",
        tiny_jsonl_corpus,
        name="evalstudy",
        sizes=("4K", "6K", "8K", "11K", "16K"),
        tokens_per_param=8,
    )
    study = tmp_path / "study"
    assert run_cli(capsys, "plan", spec, "--out", study).code == 0
    assert run_cli(capsys, "submit", study, "--executor", "debug").code == 0

    r = run_cli(capsys, "eval", study, "--executor", "debug", "--limit", "8", "--json")
    assert r.code == 0, r.stderr
    first = r.json()
    assert len(first["evaluated"]) == 5
    some_run = next(iter(first["results"].values()))
    assert {"ladder_py_next_line", "ladder_py_ppl"} <= set(some_run)
    again = run_cli(capsys, "eval", study, "--executor", "debug", "--limit", "8", "--json").json()
    assert again["evaluated"] == []  # finished evaluations are not redone

    assert run_cli(capsys, "collect", study).code == 0
    df = pd.read_parquet(study / "results.parquet")
    for col in ("task/ladder_py_next_line/acc", "task/ladder_py_next_line/bpb", "task/ladder_py_ppl/bits_per_byte"):
        assert col in df.columns and df[col].notna().all(), col
    assert df["task/ladder_py_next_line/acc"].between(0, 1).all()

    fit = run_cli(capsys, "fit", study, "--bootstrap", "20", "--json")
    assert fit.code == 0, fit.stderr
    tasks = fit.json()["tasks"]
    assert tasks["available"] is True
    assert {"ladder_py_next_line", "ladder_py_ppl"} <= set(tasks["tasks"]) and tasks["errors"] == {}
    for fitted in tasks["tasks"].values():
        assert fitted["hero"]["loss"] > 0  # task loss (bits per byte) forecast at the hero

    rep = run_cli(capsys, "report", study, "--format", "html", "--json")
    assert rep.code == 0, rep.stderr
    html = open(rep.json()["html"], encoding="utf-8").read()
    assert 'id="tasks"' in html and "ladder_py_ppl" in html
    assert json.loads((study / "fit.json").read_text())["tasks"]["available"] is True


def test_eval_rejects_unknown_task(tmp_path, tiny_jsonl_corpus, capsys):
    spec = write_study(tmp_path / "s.yaml", tiny_jsonl_corpus, name="evalbad", sizes=("4K",), tokens_per_param=4)
    study = tmp_path / "study"
    assert run_cli(capsys, "plan", spec, "--out", study, "--no-fit-check").code == 0
    before = sorted(p.relative_to(study) for p in study.rglob("*"))
    # the names are checked before any job is submitted, so no run needs to have trained
    r = run_cli(capsys, "eval", study, "--executor", "debug", "--tasks", "no_such_task_xyz")
    assert r.code == 2 and "no_such_task_xyz" in r.stderr and "unknown lm-eval task" in r.stderr
    assert sorted(p.relative_to(study) for p in study.rglob("*")) == before


def test_a_finished_run_without_its_model_is_named_not_passed_over(tmp_path, capsys):
    """After a done run's model/ was removed, `ladder eval` said "nothing to evaluate: every finished run already
    has these results" although it had none: the run is named as skipped, and the JSON lists it."""
    import shutil

    from ladder import layout
    from tests.fake_runs import finish, plan_micro

    root = tmp_path / "study"
    runs = plan_micro(root)
    for spec in runs:
        shutil.rmtree(finish(layout.StudyDir(root), spec).model)
    r = run_cli(capsys, "eval", root, "--executor", "debug")
    assert r.code == 0 and "no run has finished training with its model/ folder" in r.stdout, r.stdout
    for spec in runs:
        assert f"skipped {spec.run_id}: done, but its model/ folder is missing" in r.stderr
    r = run_cli(capsys, "eval", root, "--executor", "debug", "--json")
    assert r.code == 0 and r.json()["no_model"] == [s.run_id for s in sorted(runs, key=lambda s: s.run_id)]


def test_a_study_with_no_finished_run_says_so_not_that_every_run_has_its_results(tmp_path, capsys):
    """`ladder eval` of a freshly planned study said "nothing to evaluate: every finished run already has these
    results", of a study with no finished run."""
    from tests.fake_runs import plan_micro

    root = tmp_path / "study"
    plan_micro(root)
    r = run_cli(capsys, "eval", root, "--executor", "debug")
    assert r.code == 0, r.stderr
    assert "nothing to evaluate: no run has finished training yet" in r.stdout and "already has" not in r.stdout


@pytest.mark.parametrize("limit", ["1e308", "2.5", "1e13"])
def test_a_limit_lm_eval_would_truncate_or_overflow_is_refused(tmp_path, capsys, limit):
    """`ladder eval S --limit 1e308` ended in lm-eval's islice ValueError traceback; 2.5 was silently 2."""
    from tests.cli_helpers import one_line
    from tests.fake_runs import plan_micro

    plan_micro(tmp_path / "study")
    one_line(run_cli(capsys, "eval", tmp_path / "study", "--limit", limit), "--limit", "whole number")


def test_the_main_jobs_eval_line_says_when_every_run_was_evaluated_before():
    """`ladder run` of a study whose runs all had their lm-eval results said "eval: 0 runs evaluated with lm-eval",
    as if the evaluations had been skipped or had failed."""
    from ladder.pipeline import eval_line

    again = eval_line({"evaluated": [], "failed": {}}, None)
    assert "0 runs" not in again and "already has its lm-eval results" in again, again
    assert eval_line({"evaluated": ["a", "b"], "failed": {}}, ["t"]) == "eval: 2 runs evaluated with lm-eval (t)"
    assert eval_line({"evaluated": [], "failed": {"a": "why"}}, None).endswith(", 1 failed")
