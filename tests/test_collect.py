"""`ladder collect`: one row per planned run whatever its state, with its error, tokens and FLOPs; a bad line or
file costs only itself and is reported."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from ladder import layout
from ladder.books.collect import BOOK_COLUMNS, collect, run_record, write_collected
from ladder.books.run_lock import run_lock
from ladder.plan.planner import expand
from ladder.studies.spec import parse_study
from tests.cli_helpers import run_cli
from tests.fake_runs import (
    STATE_OF,
    done_result,
    finish,
    metrics_lines,
    outcomes,
    per_step,
    plan_micro,
    steps_of,
)


@pytest.fixture()
def study(tmp_path):
    root = tmp_path / "study"
    by = outcomes(root)
    return root, by


def rows_by_id(c) -> dict[str, dict]:
    return {r["run_id"]: r for r in c.runs.to_dict("records")}


def problems_of(c, run_id: str) -> list:
    return [p for p in c.problems if p.run_id == run_id]


def test_one_row_per_planned_run_in_plan_order_whatever_its_state(study):
    root, by = study
    c = collect(root)
    planned = [s.run_id for s in plan_micro(root)]
    assert list(c.runs["run_id"]) == planned
    rows = rows_by_id(c)
    want = STATE_OF
    assert {k: rows[by[k].run_id]["status"] for k in want} == want
    for column in BOOK_COLUMNS:
        assert column in c.runs.columns, column
    # loss only for done runs: NaN for every other state
    for key, spec in by.items():
        loss = rows[spec.run_id]["loss"]
        assert (want[key] == "done") == (not math.isnan(loss)), key
    assert rows[by["torn"].run_id]["loss"] == 3.25  # result.json is authoritative, not the cut curve
    assert pd.isna(rows[by["done"].run_id]["error"]) and pd.isna(rows[by["done"].run_id]["reason"])
    assert c.states == {
        "planned": 1,
        "interrupted": 1,
        "done": 4,
        "failed": 2,
        "diverged": 1,
        "cancelled": 1,
        "corrupt": 2,
    }
    assert sorted(c.pending) == sorted([by["planned"].run_id, by["interrupted"].run_id])
    assert sorted(c.failed) == sorted([by["crashed"].run_id, by["raised"].run_id])


def test_a_crashed_run_carries_its_error_tokens_and_flops(study):
    root, by = study
    spec = by["crashed"]
    row = rows_by_id(collect(root))[spec.run_id]
    assert row["status"] == "failed" and row["error"] == "boom" and row["reason"] == "boom"
    assert row["tokens_done"] == steps_of(spec) * per_step(spec)
    assert row["flops_spent"] == spec.flops_per_token * row["tokens_done"]
    assert row["flops_planned"] == spec.flops and row["tokens_planned"] == spec.tokens
    error_only = rows_by_id(collect(root))[by["raised"].run_id]
    assert error_only["status"] == "failed" and error_only["error"] == "DataError: no such corpus /x"
    raised = by["raised"]
    assert error_only["flops_spent"] == raised.flops_per_token * steps_of(raised) * per_step(raised) > 0


def test_a_cancelled_and_an_interrupted_run_carry_what_they_consumed(study):
    root, by = study
    rows = rows_by_id(collect(root))
    for key in ("cancelled", "interrupted"):
        spec, row = by[key], rows[by[key].run_id]
        assert row["tokens_done"] == steps_of(spec) * per_step(spec) > 0
        assert row["flops_spent"] == spec.flops_per_token * row["tokens_done"]
        assert key in row["reason"] and f"step {steps_of(spec)} of {spec.steps}" in row["reason"]
        assert pd.isna(row["error"]) and math.isnan(row["loss"])
    diverged = rows[by["diverged"].run_id]
    assert diverged["error"] == "non-finite loss at step 4" and diverged["tokens_done"] == 3 * per_step(by["diverged"])
    planned = rows[by["planned"].run_id]
    assert planned["tokens_done"] == 0 and planned["flops_spent"] == 0 and planned["reason"] == "planned, not started"
    # the run's point stays where it was planned; what it consumed is tokens_done / flops_spent
    assert planned["tokens"] == by["planned"].tokens and planned["flops"] == by["planned"].flops


def test_a_torn_metrics_line_costs_that_line_and_is_reported(study):
    root, by = study
    c = collect(root)
    spec = by["torn"]
    lines = metrics_lines(spec, spec.steps, eval_loss=3.25)
    kept = len(lines) // 2
    found = problems_of(c, spec.run_id)
    torn = [p for p in found if p.line is not None]
    assert [(p.file, p.line) for p in torn] == [(layout.METRICS, kept + 1)] and "torn" in torn[0].what
    assert any("curve ends at step" in p.what for p in found)  # a cut curve is never silently kept
    assert (c.curves["run_id"] == spec.run_id).sum() == kept
    row = rows_by_id(c)[spec.run_id]
    assert row["status"] == "done" and row["flops_spent"] == spec.flops and f"line {kept + 1}" in row["problems"]

    mid = by["corrupt_line"]
    (bad,) = problems_of(c, mid.run_id)
    assert (bad.file, bad.line) == (layout.METRICS, 2) and "JSON" in bad.what
    assert (c.curves["run_id"] == mid.run_id).sum() == len(metrics_lines(mid, mid.steps)) - 1
    assert rows_by_id(c)[mid.run_id]["loss"] == 3.4


def test_a_deleted_or_garbage_result_on_a_finished_run_is_corrupt_with_its_flops(study):
    root, by = study
    c = collect(root)
    rows = rows_by_id(c)
    for key in ("deleted_result", "garbage_result"):
        spec, row = by[key], rows[by[key].run_id]
        assert row["status"] == "corrupt" and math.isnan(row["loss"])
        assert row["tokens_done"] == spec.tokens and row["flops_spent"] == spec.flops
        (problem,) = problems_of(c, spec.run_id)
        assert problem.file == layout.RESULT and problem.what in row["error"]
    assert "missing" in rows[by["deleted_result"].run_id]["error"]
    assert "unreadable JSON" in rows[by["garbage_result"].run_id]["error"]


def test_an_unreadable_lm_eval_file_costs_that_file(study):
    root, by = study
    c = collect(root)
    spec = by["bad_lm_eval"]
    row = rows_by_id(c)[spec.run_id]
    assert row["status"] == "done" and row["task/task_a/acc"] == 0.5 and row["loss"] == 3.1
    (problem,) = problems_of(c, spec.run_id)
    assert problem.file == "lm_eval/results_b.json" and "JSON" in problem.what


def test_a_torn_last_line_of_a_live_run_is_no_problem(tmp_path):
    root = tmp_path / "live"
    spec = plan_micro(root)[0]
    rd = layout.StudyDir(root).run(spec.run_id)
    rd.metrics.write_text("".join(metrics_lines(spec, 4)) + '{"kind": "tr')
    with run_lock(rd) as held:
        assert held
        c = collect(root)
        assert rows_by_id(c)[spec.run_id]["status"] == "running" and problems_of(c, spec.run_id) == []
    c = collect(root)  # nobody writes it any more: the torn line is reported
    assert rows_by_id(c)[spec.run_id]["status"] == "interrupted"
    assert [p.line for p in problems_of(c, spec.run_id)] == [len(metrics_lines(spec, 4)) + 1]


def test_flops_spent_is_the_results_own_when_it_states_one(tmp_path):
    """A branch's result states the FLOPs of the steps it trained itself; collect takes them."""
    root = tmp_path / "s"
    spec = plan_micro(root)[0]
    sd = layout.StudyDir(root)
    rd = finish(sd, spec)
    layout.atomic_write_json(rd.result, {**done_result(spec, 4.0), "flops_spent": spec.flops / 4})
    row = rows_by_id(collect(root))[spec.run_id]
    assert row["flops_spent"] == spec.flops / 4 and row["flops"] == spec.flops


def test_run_record_of_a_result_alone_follows_the_result():
    spec = expand(
        parse_study(
            {
                "name": "r",
                "data": {"seq_len": 32},
                "model": {"vocab_size": 320, "head_dim": 16, "ffn_multiple": 8},
                "ladder": {"sizes": ["4K"]},
                "hero": {"params": "1M"},
            }
        )
    ).runs[0]
    row = run_record(spec, done_result(spec, 3.0))
    assert row["status"] == "done" and row["loss"] == 3.0 and row["tokens_done"] == spec.tokens
    assert row["flops_spent"] == spec.flops and row["error"] is None  # a plain dict, not a table
    failed = run_record(spec, {"status": "failed", "reason": "OOM", "tokens": 64, "flops": 1.0})
    assert math.isnan(failed["loss"]) and failed["reason"] == "OOM" and failed["flops_spent"] == 1.0


def test_the_tables_and_the_cli_keep_every_row(study, capsys):
    root, by = study
    r = run_cli(capsys, "collect", root, "--json")
    assert r.code == 0, r.stderr
    data = r.json()
    assert data["rows"] == len(plan_micro(root)) and data["states"]["corrupt"] == 2
    lines = {(p["run_id"], p["file"], p["line"]) for p in data["problems"]}
    assert (by["corrupt_line"].run_id, layout.METRICS, 2) in lines
    assert any(
        p["run_id"] == by["bad_lm_eval"].run_id and p["file"] == "lm_eval/results_b.json" for p in data["problems"]
    )
    table = pd.read_parquet(root / layout.RESULTS_PARQUET)
    assert len(table) == data["rows"] and len(pd.read_csv(root / layout.RESULTS_CSV)) == data["rows"]
    assert table.set_index("run_id").loc[by["crashed"].run_id, "error"] == "boom"
    human = run_cli(capsys, "collect", root)
    assert human.code == 0 and by["garbage_result"].run_id in human.stderr and "result.json" in human.stderr
    assert "metrics.jsonl line 2" in human.stderr
    write_collected(root, collect(root))  # twice is fine


def test_a_corrupt_line_costs_only_that_line_for_every_reader(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_bytes(b'{"step": 1}\n\xff\xfe\n{"step": 2\n[1, 2]\n\n{"step": 3}\n{"step": 4')
    got = layout.read_jsonl_lines(path)
    assert [r["step"] for r in got.records] == [1, 3] and got.line_numbers == [1, 6]
    assert [n for n, _ in got.bad] == [2, 3, 4, 7] and got.torn_tail == 7
    assert "UTF-8" in got.bad[0][1] and "JSON" in got.bad[1][1] and "list" in got.bad[2][1]
    assert [r["step"] for r in layout.read_jsonl(path)] == [1, 3]  # the trainer's reader (resume) too


def test_collect_counts_one_run_in_the_singular(tmp_path, capsys):
    """`collect` printed "1 runs not finished yet"."""
    from tests.fake_runs import finish

    root = tmp_path / "study"
    runs = plan_micro(root)
    for spec in runs[1:]:
        finish(layout.StudyDir(root), spec)
    r = run_cli(capsys, "collect", root)
    assert r.code == 0 and f"1 run not finished yet: {runs[0].run_id}" in r.stdout, r.stdout


def test_collect_lists_a_few_pending_runs_not_all_of_them(tmp_path, capsys):
    """A fresh 37-run study: collect printed all 37 run ids in one line; now a few and how many more."""
    from ladder.cli.status import SOME

    root = tmp_path / "study"
    runs = plan_micro(root)
    assert len(runs) > SOME + 1
    r = run_cli(capsys, "collect", root)
    line = next(x for x in r.stdout.splitlines() if "not finished yet" in x)
    assert f"{len(runs)} runs not finished yet: {runs[0].run_id}" in line
    assert f"and {len(runs) - SOME} more (`ladder status` lists them)" in line and runs[-1].run_id not in line
    assert len(run_cli(capsys, "collect", root, "--json").json()["pending"]) == len(runs)  # --json: every id
