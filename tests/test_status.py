"""`ladder status`: every planned run with its state and error, the losses of result.json for a finished run,
the tokens and FLOPs each consumed; a run that trained but lost its result is `corrupt`, never `interrupted`."""

from __future__ import annotations

import pytest

from ladder import layout
from ladder.books import job_records
from ladder.books.collect import collect
from ladder.books.run_status import study_status, totals
from ladder.jobs.submit import _select
from tests.cli_helpers import run_cli
from tests.fake_runs import STATE_OF, outcomes, per_step, steps_of


@pytest.fixture()
def study(tmp_path):
    root = tmp_path / "study"
    return root, outcomes(root)


def test_every_run_shows_its_state_and_error(study):
    root, by = study
    rows = {r.run_id: r for r in study_status(root)}
    assert len(rows) == len(by)
    state = {k: rows[s.run_id].state for k, s in by.items()}
    assert state == STATE_OF
    assert rows[by["crashed"].run_id].error == "boom"
    assert rows[by["raised"].run_id].error == "DataError: no such corpus /x"
    assert rows[by["diverged"].run_id].error == "non-finite loss at step 4"
    deleted = rows[by["deleted_result"].run_id]
    assert "result.json is missing" in deleted.error and deleted.progress == 1.0
    assert "unreadable JSON" in rows[by["garbage_result"].run_id].error
    for key in ("done", "cancelled", "planned", "interrupted"):
        assert rows[by[key].run_id].error is None, key


def test_a_finished_run_shows_the_losses_of_its_result(study):
    root, by = study
    torn = {r.run_id: r for r in study_status(root)}[by["torn"].run_id]
    assert torn.eval_loss == 3.25 and torn.train_loss == 3.35  # result.json, not the cut metrics file
    assert any("torn last line" in p for p in torn.problems)
    assert any("curve ends at step" in p for p in torn.problems)


def test_partial_runs_carry_the_tokens_and_flops_they_consumed(study):
    root, by = study
    rows = {r.run_id: r for r in study_status(root)}
    for key in ("crashed", "cancelled", "interrupted"):
        spec, row = by[key], rows[by[key].run_id]
        assert row.tokens_done == steps_of(spec) * per_step(spec) > 0
        assert row.flops_spent == spec.flops_per_token * row.tokens_done
    assert rows[by["deleted_result"].run_id].flops_spent == by["deleted_result"].flops
    t = totals(list(rows.values()))
    assert t["states"]["corrupt"] == 2 and t["states"]["failed"] == 2
    assert t["flops_spent"] == pytest.approx(collect(root).runs["flops_spent"].sum())
    assert t["flops_planned"] == pytest.approx(sum(s.flops for s in by.values()))
    assert not t["all_ended"]  # a planned and an interrupted run remain


def test_status_cli_shows_errors_and_json(study, capsys):
    root, by = study
    r = run_cli(capsys, "status", root, "--json")
    assert r.code == 0, r.stderr
    runs = {row["run_id"]: row for row in r.json()["runs"]}
    assert runs[by["crashed"].run_id]["error"] == "boom" and runs[by["crashed"].run_id]["flops_spent"] > 0
    assert runs[by["garbage_result"].run_id]["state"] == "corrupt"
    assert r.json()["totals"]["flops_spent"] > 0
    human = run_cli(capsys, "status", root)
    assert human.code == 0 and "boom" in human.stdout and "corrupt" in human.stdout
    assert "DataError: no such corpus /x" in human.stdout


def test_submit_leaves_corrupt_runs_alone_unless_asked(study):
    root, by = study
    from ladder.plan.planner import read_plan

    sd = layout.StudyDir(root)
    _, specs = read_plan(root)
    chosen, skipped = _select(sd, specs, None, retry_failed=False)
    for key in ("deleted_result", "garbage_result"):
        assert "corrupt" in skipped[by[key].run_id] and "--retry-failed" in skipped[by[key].run_id]
    assert {s.run_id for s in chosen} == {by[k].run_id for k in ("planned", "interrupted", "cancelled")}
    chosen, _ = _select(sd, specs, None, retry_failed=True)
    assert {by["deleted_result"].run_id, by["crashed"].run_id} <= {s.run_id for s in chosen}
    assert job_records.read(sd)[by["cancelled"].run_id][-1].cancelled


def test_a_run_that_failed_under_a_live_local_worker_is_failed_until_it_is_resubmitted(tmp_path):
    """A local worker lives on with the rest of its queue after one of its runs failed: that run is failed,
    not queued; once resubmitted (a job newer than the failure) it is queued again."""
    import datetime as dt
    import os

    from tests.fake_runs import plan_micro

    root = tmp_path / "s"
    spec = plan_micro(root)[0]
    sd = layout.StudyDir(root)
    rd = sd.run(spec.run_id)

    def submit_at(when: dt.datetime) -> None:
        with job_records.editing(sd) as book:
            book.setdefault(spec.run_id, []).append(
                job_records.JobRecord(
                    executor="local",
                    job_ids=[str(os.getpid())],
                    folder="submitit/local/%j",
                    submitted_at=when.isoformat(timespec="seconds"),
                )
            )

    now = dt.datetime.now(dt.timezone.utc)
    submit_at(now - dt.timedelta(minutes=5))
    layout.atomic_write_json(rd.result, {"status": "failed", "reason": "RuntimeError: boom"})
    row = study_status(root)[0]
    assert row.run_id == spec.run_id and (row.state, row.error) == ("failed", "RuntimeError: boom")
    submit_at(now + dt.timedelta(minutes=5))  # --retry-failed: the worker will train it again
    assert study_status(root)[0].state == "queued"


def test_the_totals_count_a_branchs_prefix_once_as_the_plan_does(tmp_path, capsys):
    """A cooldown branch's first updates are its trunk's: the study's token totals add only the tokens after its
    branch step, so that `ladder run`'s progress and ETA match the plan's totals (the default study: 37 runs, 24
    of them branches)."""
    root = tmp_path / "default"
    plan = run_cli(capsys, "plan", "default", "--out", root, "--json").json()
    rows = study_status(root)
    t = totals(rows)
    assert t["tokens_planned"] == plan["totals"]["tokens"] and t["tokens_done"] == 0
    branches = [r for r in rows if r.trunk_run_id]
    assert len(branches) == plan["totals"]["branches"] == 24
    assert all(r.own_tokens_planned < r.tokens_planned for r in branches)
    assert sum(r.tokens_planned for r in rows) > t["tokens_planned"]  # what the totals showed before

    # the table's FLOPs are spent ones (a branch: its own steps), not its tokens column x flops_per_token (the
    # report's point C): the main job's status showed a branch at 236.8K tokens with 1.60e10 FLOPs under "FLOPs",
    # and its footer said "flops_per_token x tokens"
    said = run_cli(capsys, "status", root).stdout
    assert "FLOPs spent" in said.splitlines()[1], said.splitlines()[:2]
    assert "flops_per_token x the tokens each run trained itself, a cooldown branch only those after" in said


def test_cancel_with_nothing_running_writes_nothing(tmp_path, capsys):
    """`ladder cancel` of a study with no job on record wrote an empty jobs.json and a lock file; with only ended
    jobs on record, it rewrote jobs.json. Nothing to cancel: nothing written."""
    from tests.fake_runs import plan_micro, record_job

    root = tmp_path / "s"
    spec = plan_micro(root)[0]

    def files():
        return {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}

    before = files()
    r = run_cli(capsys, "cancel", root)
    assert r.code == 0 and "nothing to cancel: no run of this study has a queued or running job" in r.stdout, r.stderr
    assert "cancelled 0 runs" not in r.stdout  # read as if cancel had failed
    assert files() == before and not (root / "jobs.json").exists()
    record_job(layout.StudyDir(root), spec.run_id, cancelled=True)  # a job on record, cancelled before
    before = files()
    assert run_cli(capsys, "cancel", root).code == 0
    assert files() == before


def test_watch_refuses_an_interval_time_sleep_cannot_take(study, capsys):
    """`ladder status S --watch --interval 1e308` on a study with a live run ended in time.sleep's OverflowError
    traceback; any interval beyond a day is refused in one line, before the watch starts."""
    from tests.cli_helpers import one_line

    root, _ = study
    for value in ("1e308", "86401"):
        one_line(run_cli(capsys, "status", root, "--watch", "--interval", value), "--interval", "at most 86400")
    assert run_cli(capsys, "status", root, "--interval", "86400", "--watch", "--json").code == 0


def test_an_interval_without_watch_is_refused_not_ignored(study, capsys):
    """`ladder status S --interval 5` printed the table once and ignored the option in silence."""
    from tests.cli_helpers import one_line

    root, _ = study
    one_line(run_cli(capsys, "status", root, "--interval", "5"), "--interval 5", "--watch")
    assert run_cli(capsys, "status", root).code == 0


def test_the_totals_name_the_hero_runs_they_include_by_their_count():
    """Re-trial 17a: a study with a hero and its seed replicate said "the hero run's 1.5e12 included", of two runs."""
    from ladder.cli.status import totals_line

    t = {"runs": 14, "states": {"completed": 14}, "tokens_done": 1e6, "tokens_planned": 1e6, "progress": 1.0}
    t |= {"flops_spent": 3e12, "flops_planned": 3e12, "hero_flops_spent": 1.5e12}
    assert "; the 2 hero runs' 1.50e12 included: the ladder's cost 1.50e12" in totals_line({**t, "heroes": 2})
    assert "; the hero run's 1.50e12 included" in totals_line({**t, "heroes": 1})
    assert "hero" not in totals_line({**t, "hero_flops_spent": 0.0, "heroes": 0})
