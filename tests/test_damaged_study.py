"""A damaged study (issue 28): one run whose directory or spec.json is missing or corrupt, or whose result.json is
corrupt, is reported by `ladder status` and `ladder collect` and never blocks the rest of the study. The advice
names the command that repairs it in place (`ladder plan STUDY_DIR/study.yaml --out STUDY_DIR`), and that command
does repair it (a bare `ladder plan NAME` would plan a new study under ./ladder-runs)."""

from __future__ import annotations

import json
import shutil

import pytest

from ladder import layout
from ladder.errors import StateError
from tests.cli_helpers import run_cli
from tests.fake_runs import damage_run, finish, plan_micro

DAMAGE = {
    "deleted_dir": "run directory is missing",
    "deleted_spec": "spec.json is missing",
    "corrupt_spec": "spec.json is not a valid run spec",
    "wrong_spec": "spec.json is not a valid run spec",
}


@pytest.fixture()
def planned(tmp_path):
    root = tmp_path / "S2"
    specs = plan_micro(root)
    sd = layout.StudyDir(root)
    finish(sd, specs[0], 3.5)
    finish(sd, specs[2], 3.4)
    return root, specs


@pytest.mark.parametrize("how", sorted(DAMAGE))
def test_status_shows_a_damaged_run_and_every_other_run(planned, capsys, how):
    root, specs = planned
    damage_run(root, specs[2].run_id, how)
    r = run_cli(capsys, "status", root, "--json")
    assert r.code == 0, r.stderr
    rows = {row["run_id"]: row for row in r.json()["runs"]}
    assert list(rows) == [s.run_id for s in specs]  # every run, in plan order
    bad = rows[specs[2].run_id]
    assert bad["state"] == "damaged" and DAMAGE[how] in bad["error"]
    assert f"ladder plan {root / 'study.yaml'} --out {root}" in bad["error"]
    assert rows[specs[0].run_id]["state"] == "done" and rows[specs[1].run_id]["state"] == "planned"
    assert r.json()["totals"]["states"]["damaged"] == 1
    human = run_cli(capsys, "status", root)
    assert human.code == 0
    assert f"{specs[2].run_id} damaged: " in " ".join(human.stdout.split())
    check = run_cli(capsys, "status", root, "--check")
    assert check.code == 1 and specs[2].run_id in check.stderr
    assert "1 run failed, diverged, is corrupt or damaged" in check.stderr, check.stderr  # was "1 runs ... are"


@pytest.mark.parametrize("how", sorted(DAMAGE))
def test_collect_warns_about_a_damaged_run_and_collects_the_rest(planned, capsys, how):
    root, specs = planned
    damage_run(root, specs[2].run_id, how)
    r = run_cli(capsys, "collect", root)
    assert r.code == 0, r.stderr
    err = " ".join(r.stderr.split())
    assert specs[2].run_id in err and DAMAGE[how] in err and f"--out {root}" in err
    from ladder.books.collect import read_results

    df = read_results(root).set_index("run_id")
    assert list(df.index) == [s.run_id for s in specs]
    assert df.loc[specs[2].run_id, "status"] == "damaged"
    assert df.loc[specs[0].run_id, "status"] == "done" and df.loc[specs[0].run_id, "loss"] == 3.5


def test_a_corrupt_result_never_blocks_the_rest(planned, capsys):
    root, specs = planned
    layout.StudyDir(root).run(specs[0].run_id).result.write_text("{not json")
    r = run_cli(capsys, "status", root, "--json")
    assert r.code == 0
    states = [row["state"] for row in r.json()["runs"]]
    assert states[0] == "corrupt" and states[2] == "done"
    c = run_cli(capsys, "collect", root)
    assert c.code == 0 and specs[0].run_id in c.stderr


@pytest.mark.parametrize("how", sorted(DAMAGE))
def test_the_advised_command_repairs_the_study_in_place(planned, capsys, how, monkeypatch, tmp_path):
    root, specs = planned
    damage_run(root, specs[2].run_id, how)
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    r = run_cli(capsys, "plan", root / "study.yaml", "--out", root)
    assert r.code == 0, r.stderr
    assert not (elsewhere / "ladder-runs").exists()  # no new study anywhere else
    rows = {row["run_id"]: row["state"] for row in run_cli(capsys, "status", root, "--json").json()["runs"]}
    assert "damaged" not in rows.values()
    # a finished run whose spec.json was damaged has it rewritten and stays done
    assert rows[specs[0].run_id] == "done"


def test_a_done_run_with_a_corrupt_spec_is_repaired_and_stays_done(planned, capsys):
    root, specs = planned
    damage_run(root, specs[0].run_id, "corrupt_spec")
    assert run_cli(capsys, "plan", root / "study.yaml", "--out", root).code == 0
    rows = {row["run_id"]: row["state"] for row in run_cli(capsys, "status", root, "--json").json()["runs"]}
    assert rows[specs[0].run_id] == "done"


def test_what_needs_every_run_refuses_naming_the_repair(planned):
    from ladder.plan.planner import read_plan

    root, specs = planned
    damage_run(root, specs[1].run_id, "deleted_dir")
    with pytest.raises(StateError) as exc:
        read_plan(root)
    assert specs[1].run_id in str(exc.value) and f"ladder plan {root / 'study.yaml'} --out {root}" in str(exc.value)
    assert "run `ladder plan` again" not in str(exc.value)


@pytest.mark.parametrize("how", sorted(DAMAGE))
def test_every_spec_read_raises_one_error_naming_the_damage(planned, how):
    """`RunDir.read_spec` is the one reader of a run's spec.json: a damaged one raises `UnreadableSpec` (what
    `ladder status`/`collect` report), `spec_or_none` passes over it, and the trainer's reader keeps its errors."""
    root, specs = planned
    rd = layout.StudyDir(root).run(specs[2].run_id)
    assert rd.read_spec(same_run=True) == specs[2]
    damage_run(root, specs[2].run_id, how)
    with pytest.raises(layout.UnreadableSpec) as info:
        rd.read_spec()
    assert DAMAGE[how] in info.value.why and info.value.missing == how.startswith("deleted")
    assert rd.spec_or_none() is None


def test_a_spec_of_another_run_is_unreadable_only_where_the_id_is_checked(planned):
    root, specs = planned
    sd = layout.StudyDir(root)
    sd.run(specs[2].run_id).spec.write_text(sd.run(specs[1].run_id).spec.read_text())
    assert sd.run(specs[2].run_id).read_spec() == specs[1]
    with pytest.raises(layout.UnreadableSpec, match="the spec of another run"):
        sd.run(specs[2].run_id).read_spec(same_run=True)


# A result.json whose numbers are not numbers (issue 28): text, an infinite or a negative loss. The run is corrupt
# (its file and field named) in `ladder status` and `ladder collect`, never done and never a traceback, and
# `ladder fit` fits the rest.
BAD_LOSS = {"text": "abc", "infinite": float("inf"), "negative": -3, "null": None}


def _edit_result(root, spec, **fields) -> None:
    import json

    rd = layout.StudyDir(root).run(spec.run_id)
    result = json.loads(rd.result.read_text())
    result.update(fields)
    rd.result.write_text(json.dumps(result))  # json writes inf as Infinity, as a hand edit would


@pytest.fixture()
def finished(tmp_path):
    root = tmp_path / "S"
    specs = plan_micro(root)
    sd = layout.StudyDir(root)
    for i, spec in enumerate(specs):
        finish(sd, spec, 4.0 - 0.05 * i)
    return root, specs


@pytest.mark.parametrize("what", sorted(BAD_LOSS))
def test_status_shows_a_result_with_a_bad_loss_as_corrupt_naming_the_field(finished, capsys, what):
    root, specs = finished
    _edit_result(root, specs[1], final_eval_loss=BAD_LOSS[what])
    human = run_cli(capsys, "status", root)
    assert human.code == 0, human.stderr
    flat = " ".join(human.stdout.split())
    assert f"{specs[1].run_id} corrupt: result.json: final_eval_loss is" in flat
    rows = {r["run_id"]: r for r in run_cli(capsys, "status", root, "--json").json()["runs"]}
    assert rows[specs[1].run_id]["state"] == "corrupt" and "final_eval_loss" in rows[specs[1].run_id]["error"]
    assert all(rows[s.run_id]["state"] == "done" for s in specs if s != specs[1])
    check = run_cli(capsys, "status", root, "--check")
    assert check.code == 1 and specs[1].run_id in check.stderr


@pytest.mark.parametrize("what", sorted(BAD_LOSS))
def test_collect_reports_a_result_with_a_bad_loss_and_collects_the_rest(finished, capsys, what):
    from ladder.books.collect import read_results

    root, specs = finished
    _edit_result(root, specs[1], final_eval_loss=BAD_LOSS[what])
    r = run_cli(capsys, "collect", root)
    assert r.code == 0, r.stderr
    assert f"problem {specs[1].run_id}: result.json: final_eval_loss is" in " ".join(r.stderr.split())
    df = read_results(root).set_index("run_id")
    assert list(df.index) == [s.run_id for s in specs]
    assert df.loc[specs[1].run_id, "status"] == "corrupt" and "final_eval_loss" in df.loc[specs[1].run_id, "error"]
    assert (df.drop(index=specs[1].run_id)["status"] == "done").all()


def test_fit_fits_the_rest_of_a_study_with_an_infinite_loss(finished, capsys):
    import json

    root, specs = finished
    _edit_result(root, specs[1], final_eval_loss=float("inf"))
    assert run_cli(capsys, "collect", root).code == 0
    r = run_cli(capsys, "fit", root, "--bootstrap", "20")
    assert r.code == 0, r.stderr
    excluded = {e["run"]: e for e in json.loads((root / "fit.json").read_text())["excluded"]}
    assert excluded[specs[1].run_id]["status"] == "corrupt"
    assert "result.json: final_eval_loss is inf" in excluded[specs[1].run_id]["reason"]
    assert f"{specs[1].run_id} (corrupt: result.json: final_eval_loss is inf" in " ".join((r.stdout + r.stderr).split())


@pytest.mark.parametrize("loss", [1e9, 150.0, 0.0005])
def test_an_implausible_loss_of_a_done_run_is_corrupt_and_the_fit_goes_on(finished, capsys, loss):
    """A done run's final eval loss outside the fit's plausible range (0.001 to 100 nats/token): status and
    collect call the run corrupt, naming the field and the range, and fit fits the other runs (it once refused the
    whole study: "column loss holds 1 value(s) outside 0.001 to 100 nats/token")."""
    import json

    from ladder.books import run_books
    from ladder.reports.fits import runs

    assert (run_books.MIN_LOSS, run_books.MAX_LOSS) == (runs.MIN_LOSS, runs.MAX_LOSS)
    root, specs = finished
    bad = specs[1].run_id
    _edit_result(root, specs[1], final_eval_loss=loss)
    rows = {r["run_id"]: r for r in run_cli(capsys, "status", root, "--json").json()["runs"]}
    assert rows[bad]["state"] == "corrupt"
    assert f"final_eval_loss is {loss:g}, outside 0.001 to 100 nats/token" in rows[bad]["error"]
    c = run_cli(capsys, "collect", root)
    assert c.code == 0, c.stderr
    assert f"problem {bad}: result.json: final_eval_loss is {loss:g}" in " ".join(c.stderr.split())
    r = run_cli(capsys, "fit", root, "--bootstrap", "20")
    assert r.code == 0, r.stderr
    excluded = {e["run"]: e for e in json.loads((root / "fit.json").read_text())["excluded"]}
    assert excluded[bad]["status"] == "corrupt"


@pytest.mark.parametrize(
    "field,value",
    [("tokens", "many"), ("tokens", float("inf")), ("flops", -1.0), ("wall_time_s", True), ("final_train_loss", "x")],
)
def test_every_number_of_a_result_is_checked_by_status_and_collect_alike(finished, capsys, field, value):
    root, specs = finished
    _edit_result(root, specs[1], **{field: value})
    rows = {r["run_id"]: r for r in run_cli(capsys, "status", root, "--json").json()["runs"]}
    assert rows[specs[1].run_id]["state"] == "corrupt" and f"result.json: {field} is" in rows[specs[1].run_id]["error"]
    r = run_cli(capsys, "collect", root)
    assert r.code == 0, r.stderr
    assert f"{specs[1].run_id}: result.json: {field} is" in " ".join(r.stderr.split())


@pytest.mark.parametrize("field", ["params", "tokens", "steps"])
def test_a_spec_number_beyond_int64_is_damage_not_a_traceback(finished, capsys, field):
    """spec.json with ``params`` (tokens, steps) = 10**30: collect once raised pyarrow's OverflowError (exit 1),
    status called the run done with absurd totals, and fit fitted the stale results.parquet. Now the run is
    damaged (the field named), like any other spec damage, and the rest is collected."""
    import json

    from ladder.books.collect import read_results

    root, specs = finished
    rd = layout.StudyDir(root).run(specs[1].run_id)
    spec = json.loads(rd.spec.read_text())
    spec[field] = 10**30
    rd.spec.write_text(json.dumps(spec))
    rows = {r["run_id"]: r for r in run_cli(capsys, "status", root, "--json").json()["runs"]}
    assert rows[specs[1].run_id]["state"] == "damaged"
    assert f"{field} is 1e+30, beyond a 64-bit count" in rows[specs[1].run_id]["error"]
    c = run_cli(capsys, "collect", root)
    assert c.code == 0, c.stderr
    assert f"{specs[1].run_id}: spec.json: its spec.json is not a valid run spec ({field} is 1e+30" in " ".join(
        c.stderr.split()
    )
    df = read_results(root).set_index("run_id")
    assert df.loc[specs[1].run_id, "status"] == "damaged"
    assert (df.drop(index=specs[1].run_id)["status"] == "done").all()


@pytest.mark.parametrize(
    "field,value", [("tokens", 10**30), ("restarts", 10**20), ("flops", 10**40), ("tokens_per_s", 10**30)]
)
def test_a_result_number_beyond_int64_is_corrupt_not_a_traceback(finished, capsys, field, value):
    root, specs = finished
    _edit_result(root, specs[1], **{field: value})
    rows = {r["run_id"]: r for r in run_cli(capsys, "status", root, "--json").json()["runs"]}
    assert rows[specs[1].run_id]["state"] == "corrupt" and f"{field} is" in rows[specs[1].run_id]["error"]
    c = run_cli(capsys, "collect", root)
    assert c.code == 0, c.stderr
    assert f"{specs[1].run_id}: result.json: {field} is {float(value):.3g}, beyond a 64-bit count" in c.stderr


def test_a_metrics_line_beyond_int64_costs_that_line(finished, capsys):
    import json

    root, specs = finished
    rd = layout.StudyDir(root).run(specs[1].run_id)
    with rd.metrics.open("a") as f:
        f.write(json.dumps({"kind": "eval", "step": 10**20, "tokens": 10**30, "eval_loss": 3.0}) + "\n")
    c = run_cli(capsys, "collect", root)
    assert c.code == 0, c.stderr
    assert f"{specs[1].run_id}: metrics.jsonl line" in c.stderr and "step is 1e+20, beyond a 64-bit count" in c.stderr


def test_a_failed_or_diverged_result_may_have_no_loss(finished, capsys):
    root, specs = finished
    _edit_result(root, specs[1], status="diverged", final_eval_loss=None, final_train_loss=float("nan"))
    rows = {r["run_id"]: r["state"] for r in run_cli(capsys, "status", root, "--json").json()["runs"]}
    assert rows[specs[1].run_id] == "diverged"


def test_text_in_a_metrics_line_costs_that_line(finished, capsys):
    """The same class in metrics.jsonl: a live or interrupted run's record with text for a number is skipped and
    named, never shown as a loss (status) or written into curves.parquet (collect)."""
    import json

    from tests.fake_runs import partial

    root, specs = finished
    sd = layout.StudyDir(root)
    shutil.rmtree(sd.run(specs[1].run_id).model)
    sd.run(specs[1].run_id).result.unlink()
    rd = partial(sd, specs[1], specs[1].steps // 2)
    records = [json.loads(line) for line in rd.metrics.read_text().splitlines()]
    for rec in records:
        rec["loss" if rec["kind"] == "train" else "eval_loss"] = "abc"
    rd.metrics.write_text("".join(json.dumps(rec) + "\n" for rec in records))
    s = run_cli(capsys, "status", root)
    assert s.code == 0, s.stderr
    assert f"{specs[1].run_id}: metrics.jsonl line 1: " in " ".join(s.stdout.split())
    c = run_cli(capsys, "collect", root)
    assert c.code == 0, c.stderr
    assert f"{specs[1].run_id}: metrics.jsonl line 1: " in " ".join(c.stderr.split())


def test_fit_fits_the_good_runs_of_a_study_with_a_deleted_run(finished, capsys):
    """collect writes the deleted run's row as damaged (no variant, no axes: NaN under pandas' string dtype); fit
    excludes it and fits the rest (the row once raised a TypeError building the rung keys; before that, fit refused
    the whole study because one run's folder was gone)."""
    import json

    root, specs = finished
    damage_run(root, specs[1].run_id, "deleted_dir")
    assert run_cli(capsys, "collect", root).code == 0
    for args in (["fit", root], ["fit", "--runs", root / "results.csv"]):
        r = run_cli(capsys, *args, "--bootstrap", "20")
        said = " ".join((r.stdout + r.stderr).split())
        assert "Traceback" not in said
        assert r.code == 0, r.stderr
        assert f"{specs[1].run_id} (damaged: its run directory is missing" in said
        if args[1] == root:
            excluded = {e["run"]: e for e in json.loads((root / "fit.json").read_text())["excluded"]}
            assert excluded[specs[1].run_id]["status"] == "damaged"


def test_one_damaged_run_blocks_none_of_the_forecast_loop(tmp_path, capsys):
    """A fitted study with one run folder deleted: collect, fit, report, freeze, hero, score and eval all go on with
    the other runs (status and the report show the damaged one); only submit, which trains every run, names the
    repair."""
    from tests.reports.fixture_study import make_study

    root = make_study(tmp_path / "study", points=3, tie=False, lr_multipliers=None, tasks=False, n_boot=10)
    import json

    run_id = json.loads((root / layout.PLAN).read_text(encoding="utf-8"))["runs"][1]
    damage_run(root, run_id, "deleted_dir")
    for args in (
        ["collect", root],
        ["fit", root, "--bootstrap", "10"],
        ["report", root, "--format", "html"],
        ["forecast", "freeze", root],
        ["hero", root, "--dry-run"],
        ["forecast", "score", root, "--loss", "3.0"],
        ["eval", root, "--executor", "debug"],  # no trained model here: nothing to evaluate, and no refusal
    ):
        r = run_cli(capsys, *args)
        assert r.code == 0, (args, r.stderr)
    status = {row["run_id"]: row["state"] for row in run_cli(capsys, "status", root, "--json").json()["runs"]}
    assert status[run_id] == "damaged"
    assert run_id in (layout.StudyDir(root).report / "report.html").read_text(encoding="utf-8")
    r = run_cli(capsys, "submit", root, "--executor", "debug")
    assert r.code == 2 and run_id in r.stderr and f"--out {root}" in r.stderr


@pytest.mark.parametrize("damage", ["folder gone", "torn pointer"])
def test_an_interrupted_run_that_cannot_resume_says_so_in_status_and_collect(planned, capsys, damage):
    """An interrupted run whose checkpoint folder was deleted (or whose checkpoint.json was torn) showed as
    "interrupted" with no word, and its next job failed at once: status and collect name the pointer and the
    repair."""
    from tests.fake_runs import partial

    planned, specs = planned
    spec = specs[1]  # not finished by the fixture
    rd = partial(layout.StudyDir(planned), spec, 2)
    if damage == "folder gone":
        name = json.loads(rd.checkpoint_pointer.read_text())["path"]
        shutil.rmtree(rd.path / name)
    else:
        rd.checkpoint_pointer.write_text('{"step": 2, "pa')
    r = run_cli(capsys, "status", planned)
    assert r.code == 0 and f"{spec.run_id}: checkpoint.json:" in r.stdout + r.stderr
    assert f"delete {rd.checkpoint_pointer} to restart" in r.stdout + r.stderr
    problems = run_cli(capsys, "collect", planned, "--json").json()["problems"]
    assert any(p["run_id"] == spec.run_id and p["file"] == "checkpoint.json" for p in problems), problems
