"""A damaged study (issue 28), command by command: a run whose folder or spec.json is missing or corrupt, whose
result.json is corrupt, a corrupt fit.json (or a directory in its place) and a corrupt plan.json, against every
command that reads or writes a study that tests/test_damaged_study.py and tests/test_user_errors_systematic.py do
not already try. One damaged run is named and never blocks the rest; a command that needs every run (`submit`)
refuses in one line naming the repair; a damaged study file is one line naming it; never a traceback; what a
command should not write is left byte for byte. No training: fake runs (tests.hero_fixture), and `ladder run`'s
data preparation and submission stood in for where they would train."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from ladder import layout
from tests.cli_helpers import one_line, run_cli
from tests.fake_runs import damage_run

RUN_STATE = {
    "deleted_dir": "damaged",
    "deleted_spec": "damaged",
    "corrupt_spec": "damaged",
    "corrupt_result": "corrupt",
}
RUN_DAMAGE = {  # how -> the words that name it
    "deleted_dir": "its run directory is missing",
    "deleted_spec": "spec.json is missing",
    "corrupt_spec": "spec.json is not a valid run spec",
    "corrupt_result": "result.json",
}


@pytest.fixture(scope="module")
def master(tmp_path_factory):
    """A planned, fake-trained, collected and fitted ladder with one frozen forecast: tests.hero_fixture's, with a
    vocabulary that `ladder run` accepts (its tokenizer needs >= 259 ids)."""
    import numpy as np

    from ladder.forecast.frozen import freeze
    from ladder.plan.planner import expand, write_plan
    from ladder.studies.spec import parse_study
    from tests.hero_fixture import law_loss, refresh, study_dict, train

    root = tmp_path_factory.mktemp("damaged") / "study"
    spec = study_dict()
    spec["model"]["vocab_size"] = 320
    plan = expand(parse_study(spec))
    write_plan(plan, root)
    rng = np.random.default_rng(0)
    for run in plan.runs:
        train(layout.StudyDir(root), run, law_loss(run.params, run.tokens) * float(np.exp(rng.normal(0, 0.003))))
    refresh(root, n_boot=10)
    freeze(root)
    return root


def _frozen_loss(root: Path) -> str:
    return f"{json.loads((root / 'forecast.json').read_text())['hero']['loss']:.3f}"


@pytest.fixture()
def study(master, tmp_path):
    root = tmp_path / "study"
    shutil.copytree(master, root)
    return root


@pytest.fixture()
def quick_suggest(monkeypatch):
    """`plan --suggest` with fewer simulated outcomes and refits: the same code, in a second rather than five."""
    from ladder.reports.fits.study import run_value

    monkeypatch.setattr(run_value, "K", 2)
    monkeypatch.setattr(run_value, "N_BOOT", 6)


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _runs(root: Path) -> list[str]:
    return json.loads((root / layout.PLAN).read_text(encoding="utf-8"))["runs"]


def _damage(root: Path, how: str) -> str:
    """Damage the second run of the plan; its id."""
    run_id = _runs(root)[1]
    damage_run(root, run_id, how)
    return run_id


def _said(r) -> str:
    assert "Traceback" not in r.stdout + r.stderr, r.stderr[-3000:]
    return " ".join((r.stdout + r.stderr).split())


def _repair(root: Path) -> str:
    return f"ladder plan {root / 'study.yaml'} --out {root}"


# ---- commands that only read: they go on with the other runs and write nothing ---------------------------------

READ_ONLY = {
    "hero --dry-run": lambda s: ("hero", s, "--dry-run"),
    "forecast show": lambda s: ("forecast", "show", s),
    "plan --suggest": lambda s: ("plan", s, "--suggest"),
    "eval": lambda s: ("eval", s, "--executor", "debug"),
    "cancel": lambda s: ("cancel", s),
}
READ_ONLY_CASES = [
    ("hero --dry-run", "deleted_spec"),
    ("hero --dry-run", "corrupt_spec"),
    ("hero --dry-run", "corrupt_result"),
    *((c, how) for c in ("forecast show", "plan --suggest", "eval", "cancel") for how in RUN_DAMAGE),
]


@pytest.mark.parametrize("command,how", READ_ONLY_CASES)
def test_a_reading_command_goes_on_with_the_other_runs_and_writes_nothing(study, capsys, quick_suggest, command,
                                                                          how):  # fmt: skip
    run_id = _damage(study, how)
    before = _files(study)
    r = run_cli(capsys, *READ_ONLY[command](study))
    said = _said(r)
    assert r.code == 0, (r.code, r.stderr[-2000:])
    assert _files(study) == before
    if command == "cancel" and how != "corrupt_result":
        # its job (if it has one) cannot be told from its files: named, with the repair, on one line
        [line] = [ln for ln in r.stderr.splitlines() if run_id in ln]
        assert line.startswith("warning: ") and RUN_DAMAGE[how] in line and _repair(study) in " ".join(line.split())
        assert "nothing to cancel" in said
    if command == "plan --suggest":
        assert "suggested" in said or "no candidate" in said
    if command == "forecast show":
        assert _frozen_loss(study) in said


def test_cancel_of_a_damaged_run_by_id_names_the_damage_not_an_unknown_run(study, capsys):
    run_id = _damage(study, "deleted_dir")
    before = _files(study)
    r = run_cli(capsys, "cancel", study, "--run", run_id, "--json")
    assert r.code == 0, r.stderr
    assert r.json()["cancelled"] == [] and [d["run_id"] for d in r.json()["damaged"]] == [run_id]
    assert "not a run of this study" not in r.stderr and run_id in r.stderr
    assert _files(study) == before


@pytest.mark.parametrize("how", ["deleted_dir", "corrupt_spec"])
def test_cancel_cancels_the_other_runs_jobs(study, capsys, monkeypatch, how):
    """One damaged run once made `ladder cancel` refuse the whole study, leaving every live job running. (The job
    on record is a local one no process has: the executor is told to call it queued.)"""
    from ladder.books import job_records
    from tests.fake_runs import record_job

    run_id = _damage(study, how)
    live = _runs(study)[3]
    for name in ("result.json", "metrics.jsonl"):  # not started, with a job on record: queued
        (layout.StudyDir(study).run(live).path / name).unlink()
    record_job(layout.StudyDir(study), live, cancelled=False)
    monkeypatch.setattr(job_records, "job_state", lambda sd, rec: "queued")
    r = run_cli(capsys, "cancel", study)
    _said(r)
    assert r.code == 0, r.stderr
    assert f"cancelled 1 run: {live}" in " ".join(r.stdout.split())
    assert [ln.split()[2] for ln in r.stderr.strip().splitlines()] == [run_id]  # "warning: run ID not cancelled"
    assert job_records.latest(job_records.read(layout.StudyDir(study)), live).cancelled


# ---- commands that write: they go on with the other runs, naming the damaged one where they list runs ----------


def _collected(study: Path, capsys) -> None:
    r = run_cli(capsys, "collect", study)
    assert r.code == 0, r.stderr


@pytest.mark.parametrize("how", ["deleted_spec", "corrupt_spec", "corrupt_result"])
def test_fit_excludes_the_damaged_run_and_fits_the_rest(study, capsys, how):
    run_id = _damage(study, how)
    _collected(study, capsys)
    r = run_cli(capsys, "fit", study, "--bootstrap", "5")
    said = _said(r)
    assert r.code == 0, r.stderr[-2000:]
    fit = json.loads((study / "fit.json").read_text())
    excluded = {e["run"]: e for e in fit["excluded"]}
    assert excluded[run_id]["status"] == RUN_STATE[how]
    assert f"{run_id} (" in said
    used = {row["run"] for f in fit["loss"]["forms"].values() for row in f["residuals"]}
    assert used == set(_runs(study)) - {run_id}


@pytest.mark.parametrize("how", ["deleted_spec", "corrupt_spec", "corrupt_result"])
def test_report_shows_the_damaged_run_and_the_rest(study, capsys, how):
    run_id = _damage(study, how)
    _collected(study, capsys)
    r = run_cli(capsys, "report", study, "--format", "html")
    _said(r)
    assert r.code == 0, r.stderr[-2000:]
    html = (layout.StudyDir(study).report / "report.html").read_text(encoding="utf-8")
    status = {rid: _row(html, rid)[-1] for rid in _runs(study)}  # the runs table's last column
    assert status == {rid: "done" for rid in _runs(study)} | {run_id: RUN_STATE[how]}


def _row(html: str, run_id: str) -> list[str]:
    import re

    at = html.index(f">{run_id}<")
    row = html[html.rfind("<tr", 0, at) : html.index("</tr>", at)]
    return [cell.strip() for cell in re.split(r"<[^>]+>", row) if cell.strip()]


FORECAST_WRITERS = {
    "hero": lambda s: ("hero", s),
    "forecast freeze": lambda s: ("forecast", "freeze", s),
    "forecast freeze --predict": lambda s: ("forecast", "freeze", s, "--predict", "200K:4M"),
    "forecast score": lambda s: ("forecast", "score", s, "--loss", "3.5"),
}
FORECAST_CASES = [
    ("hero", "deleted_dir"),
    *((c, how) for c in FORECAST_WRITERS for how in ("deleted_spec", "corrupt_spec", "corrupt_result")),
    ("forecast freeze --predict", "deleted_dir"),
]


@pytest.mark.parametrize("command,how", FORECAST_CASES)
def test_the_forecast_loop_goes_on_and_leaves_the_runs_alone(study, capsys, command, how):
    """hero plans its run, freeze writes the next forecast, score appends to the freezes: none is blocked by one
    damaged rung, and none touches a rung's folder (the damaged one stays as it was, for `ladder status`)."""
    run_id = _damage(study, how)
    runs_before = _files(study / "runs")
    r = run_cli(capsys, *FORECAST_WRITERS[command](study))
    said = _said(r)
    assert r.code == 0, (r.code, r.stderr[-2000:])
    runs_after = _files(study / "runs")
    if command == "hero":
        new = sorted({k.split("/")[0] for k in runs_after} - {k.split("/")[0] for k in runs_before})
        assert len(new) == 1 and _runs(study)[-1] == new[0] and run_id in _runs(study)
        runs_after = {k: v for k, v in runs_after.items() if not k.startswith(new[0] + "/")}
        assert "planned: " in said
    elif command.startswith("forecast freeze"):
        assert (study / "forecast-2.json").is_file() and "froze forecast 2" in said
    else:
        assert "scored 1 frozen forecast" in said
    assert runs_after == runs_before


# ---- submit: it acts on every run --------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["deleted_spec", "corrupt_spec"])
def test_submit_refuses_a_run_it_cannot_read_naming_the_repair(study, capsys, how):
    run_id = _damage(study, how)
    before = _files(study)
    one_line(run_cli(capsys, "submit", study, "--executor", "debug"), run_id, RUN_DAMAGE[how], _repair(study))
    assert _files(study) == before


def test_submit_skips_a_corrupt_result_naming_it_and_trains_nothing(study, capsys):
    run_id = _damage(study, "corrupt_result")
    runs_before = _files(study / "runs")
    r = run_cli(capsys, "submit", study, "--executor", "debug")
    said = _said(r)
    assert r.code == 0, r.stderr[-2000:]
    assert f"skipped {run_id}: corrupt" in said and "0 submitted" in said and "--retry-failed" in said
    assert all(f"skipped {rid}: done" in said for rid in _runs(study) if rid != run_id)
    assert _files(study / "runs") == runs_before


# ---- ladder run: plan (which repairs a damaged run), data, submit, wait, collect, fit, report ----------------------


@pytest.fixture()
def no_training(monkeypatch):
    """`ladder run` without data preparation, with a submit that records the study it was given and trains nothing
    (a study whose runs all have results goes to the real one), and without rendering the report (its PDF takes
    seconds): the plan, wait, collect and fit stages are the real ones."""
    import ladder.jobs.submit
    import ladder.pipeline
    import ladder.reports.render

    seen = []
    real_submit = ladder.jobs.submit.submit

    def submit(study_dir, executor, **kw):
        from ladder.plan.planner import plan_entries

        seen.append(plan_entries(study_dir))
        unfinished = [s for s in seen[-1] if not layout.StudyDir(study_dir).run(s.run_id).result.is_file()]
        if unfinished:  # it would train them
            return SimpleNamespace(submitted=[s.run_id for s in unfinished], skipped=[])
        return real_submit(study_dir, executor, **kw)

    monkeypatch.setattr(ladder.pipeline, "prepare", lambda study, **kw: SimpleNamespace(
        train_tokens=1, val_tokens=1, root="(no data prepared in this test)"))  # fmt: skip
    monkeypatch.setattr(ladder.jobs.submit, "submit", submit)
    monkeypatch.setattr(ladder.reports.render, "render_report", lambda path: seen.append(("report", path)) or {})
    return seen


def _run(study: Path, capsys):
    return run_cli(capsys, "run", study / "study.yaml", "--out", study, "--executor", "debug", "--skip-sanity")


@pytest.mark.parametrize("how", ["deleted_dir", "deleted_spec", "corrupt_spec"])
def test_run_repairs_a_damaged_run_before_it_submits(study, capsys, no_training, how):
    """`ladder run` plans the study again first, which rewrites the damaged run (as the repair the other commands
    name does): what it submits is the whole ladder, every run readable, the finished ones kept."""
    from ladder.plan.planner import Damaged

    run_id = _damage(study, how)
    others = {rid: _files(study / "runs" / rid) for rid in _runs(study) if rid != run_id}
    r = _run(study, capsys)
    said = _said(r)
    [entries] = [e for e in no_training if not isinstance(e, tuple)]
    assert [e.run_id for e in entries] == _runs(study)
    assert not [e for e in entries if isinstance(e, Damaged)]
    assert {rid: _files(study / "runs" / rid) for rid in others} == others
    if how == "corrupt_spec" or how == "deleted_spec":  # its result survived: done again, nothing to train
        assert r.code == 0, r.stderr[-2000:]
    else:  # the stand-in trained nothing: the run says which run did not finish, in one line
        one_line(r, run_id, "ended without finishing")
    assert "plan: " in said


def test_run_names_a_corrupt_result_and_finishes_the_rest(study, capsys, no_training):
    run_id = _damage(study, "corrupt_result")
    r = _run(study, capsys)
    said = _said(r)
    assert r.code == 1, r.stderr[-2000:]
    assert f"{run_id} corrupt: result.json" in said and "1 run failed, diverged or is corrupt" in said
    assert ("report", study) in no_training
    assert layout.StudyDir(study).run(run_id).result.read_text() == "{not json"  # left for the user to look at
    fit = json.loads((study / "fit.json").read_text())
    assert {e["run"]: e["status"] for e in fit["excluded"]}[run_id] == "corrupt"


def test_run_refuses_a_directory_for_fit_json_before_writing_anything(study, capsys, no_training):
    (study / "fit.json").unlink()
    (study / "fit.json").mkdir()
    before = _files(study)
    one_line(_run(study, capsys), "fit.json is not a file (a directory)", "rm -r")
    assert _files(study) == before and no_training == []


@pytest.mark.parametrize("table", ["results.parquet", "results.csv", "curves.parquet"])
def test_collect_refuses_a_directory_for_a_table_naming_the_rm_and_leaves_no_tmp(study, capsys, table):
    """A directory in results.parquet's place: collect once said "cannot use S/.results.parquet.tmp ->
    S/results.parquet: Is a directory" and left the .tmp behind, and fit then said "run collect first" (a loop).
    Now both name the directory and its `rm -r`, and nothing is written."""
    (study / table).unlink()
    (study / table).mkdir()
    before = _files(study)
    one_line(
        run_cli(capsys, "collect", study), f"{study / table} is not a file (a directory)", f"rm -r {study / table}"
    )
    assert _files(study) == before and not list(study.glob(".*.tmp"))
    if table == "results.parquet":
        one_line(run_cli(capsys, "fit", study), "is not a file (a directory)", f"rm -r {study / table}")


def test_report_refuses_a_directory_for_report_html_and_leaves_no_tmp(study, capsys):
    html = study / "report" / "report.html"
    html.unlink(missing_ok=True)
    html.mkdir(parents=True)
    one_line(run_cli(capsys, "report", study, "--format", "html"), f"{html} is not a file (a directory)", "rm -r")
    assert not list((study / "report").glob(".*.tmp")) and html.is_dir()


def test_report_refuses_a_directory_for_report_pdf_before_rewriting_report_html(study, capsys):
    """A folder in report.pdf's place was found only after report.html had been rewritten, and the message named
    the temporary file (".report.pdf.tmp"). Now both targets are checked first: one line, nothing written."""
    assert run_cli(capsys, "report", study, "--format", "html").code == 0
    html, pdf = study / "report" / "report.html", study / "report" / "report.pdf"
    pdf.unlink(missing_ok=True)
    pdf.mkdir()
    before = _files(study)
    one_line(run_cli(capsys, "report", study), f"{pdf} is not a file (a directory)", f"rm -r {pdf}")
    assert _files(study) == before and html.is_file() and pdf.is_dir()
    assert not list((study / "report").glob(".*.tmp"))


def test_atomic_write_leaves_no_tmp_when_the_write_fails(tmp_path):
    def boom(tmp: Path) -> None:
        tmp.write_text("half")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        layout.atomic_write(tmp_path / "t.json", boom)
    assert list(tmp_path.iterdir()) == []


# ---- a damaged fit.json or plan.json ----------------------------------------------------------------------------


def test_plan_suggest_refuses_a_corrupt_fit_json_naming_the_refit(study, capsys):
    (study / "fit.json").write_text('{"loss": {')
    before = _files(study)
    one_line(run_cli(capsys, "plan", study, "--suggest"), "fit.json is damaged", f"ladder fit {study}")
    assert _files(study) == before


@pytest.mark.parametrize("command", ["forecast show", "plan --suggest", "run"])
def test_a_corrupt_plan_json(study, capsys, no_training, command):
    """`forecast show` shows the frozen forecasts (it reads no run); `plan --suggest` refuses naming the file and
    its repair; `ladder run` plans the study again, which rewrites plan.json."""
    (study / "plan.json").write_text('{"runs": [')
    before = _files(study)
    if command == "forecast show":
        r = run_cli(capsys, "forecast", "show", study)
        assert r.code == 0 and _frozen_loss(study) in _said(r)
        assert _files(study) == before
    elif command == "plan --suggest":
        one_line(run_cli(capsys, "plan", study, "--suggest"), "plan.json is unreadable", _repair(study))
        assert _files(study) == before
    else:
        r = _run(study, capsys)
        _said(r)
        assert r.code == 0, r.stderr[-2000:]
        assert len(_runs(study)) == 6 and len(no_training) == 2 and ("report", study) in no_training
