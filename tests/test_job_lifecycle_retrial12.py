"""Issue 28, the job lifecycle's re-trial (12): submit, status, cancel, run and eval as a new user drives them on a
micro-study, each case by the command that found it. Nothing ends in a traceback, no message leads astray, every run
stays in the books whatever its fate."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ladder import layout
from ladder.books import job_records
from tests.cli_helpers import one_line, run_cli
from tests.micro import write_study


def _status(capsys, study_dir) -> dict[str, dict]:
    r = run_cli(capsys, "status", study_dir, "--json")
    assert r.code == 0, r.stderr
    return {row["run_id"]: row for row in r.json()["runs"]}


_HOLDER = textwrap.dedent(
    """
    import signal, sys, time
    from pathlib import Path
    from ladder import layout
    from ladder.books.run_lock import run_lock

    got = []
    signal.signal(signal.SIGTERM, lambda *a: got.append(1))  # a trainer finishing its step and checkpoint
    with run_lock(layout.RunDir(Path(sys.argv[1]))) as held:
        assert held
        print("held", flush=True)
        deadline = time.monotonic() + float(sys.argv[2])
        while time.monotonic() < deadline:
            time.sleep(0.05)
    """
)


def _hold_lock(run_dir: Path, seconds: float = 30.0) -> subprocess.Popen:
    """A process that trains ``run_dir`` as far as the books can tell (it holds its lock), and takes its time to
    stop on SIGTERM, as a run writing its checkpoint does."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(run_dir), str(seconds)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "held"
    return proc


def _record_local_job(study_dir: Path, run_id: str, pid: int) -> None:
    sd = layout.StudyDir(study_dir)
    with job_records.editing(sd) as book:
        book.setdefault(run_id, []).append(
            job_records.JobRecord(
                executor="local", job_ids=[str(pid)], folder="submitit/local/%j", submitted_at=job_records.now()
            )
        )


# ---- lead 1: a second `ladder cancel` while the first one's run checkpoints ------------------------------------


def test_a_second_cancel_while_the_run_checkpoints_does_not_cancel_it_again(planned_micro, capsys):
    """Two `ladder cancel S` (one after the other, or at once) both said "cancelled 1 run: X": the run still held
    its lock while it wrote its checkpoint, so the second took it for running and cancelled it again."""
    study, ids = planned_micro()
    holder = _hold_lock(study / "runs" / ids[0])
    try:
        _record_local_job(study, ids[0], holder.pid)
        first = run_cli(capsys, "cancel", study)
        assert first.code == 0 and f"cancelled 1 run: {ids[0]}" in first.stdout, first.stdout + first.stderr
        assert holder.poll() is None  # still "checkpointing"
        second = run_cli(capsys, "cancel", study)
        assert second.code == 0, second.stderr
        assert "cancelled 1 run" not in second.stdout and "already cancelled" in second.stdout, second.stdout
        assert ids[0] in second.stdout
        as_json = run_cli(capsys, "cancel", study, "--json").json()
        assert as_json["cancelled"] == [] and as_json["stopping"] == [ids[0]]
    finally:
        holder.kill()
        holder.wait()
    assert "nothing to cancel" in run_cli(capsys, "cancel", study).stdout


# ---- lead 2: a copy of a study, made while its worker trains ---------------------------------------------------


def _fake_worker(study: Path) -> subprocess.Popen:
    """A process with the command line of submitit's local controller for ``study`` (what jobs.json's job id is)."""
    code = "import time; time.sleep(60)"
    folder = study / layout.SUBMITIT / "local" / "%j"
    folder.parent.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen([sys.executable, "-c", code, "-m", "submitit.local._local", str(folder)])


def test_a_copy_of_a_study_does_not_claim_the_originals_live_worker(planned_micro, capsys):
    """`cp -r S S2` while S's worker trained: S2's status showed S's job as its own ("queued"), `submit S2`
    skipped every run ("queued (job alive)") and `cancel S2` said "cancelled 2 runs" and stopped nothing."""
    import shutil

    study, ids = planned_micro()
    worker = _fake_worker(study)
    try:
        for run_id in ids:
            _record_local_job(study, run_id, worker.pid)
        assert {row["state"] for row in _status(capsys, study).values()} == {"queued"}  # the original's own
        copy = study.parent / "copy"
        shutil.copytree(study, copy)
        rows = _status(capsys, copy)
        assert {row["state"] for row in rows.values()} == {"planned"}, rows
        assert not any(row["job_alive"] for row in rows.values())
        cancelled = run_cli(capsys, "cancel", copy, "--json").json()
        assert cancelled["cancelled"] == []
        assert worker.poll() is None
        from ladder.jobs.submit import _select
        from ladder.plan.planner import read_plan

        chosen, skipped = _select(layout.StudyDir(copy), read_plan(copy)[1], None, False)
        assert sorted(s.run_id for s in chosen) == sorted(ids) and not skipped
        assert {row["state"] for row in _status(capsys, study).values()} == {"queued"}  # the original unchanged
    finally:
        worker.kill()
        worker.wait()


# ---- lead 5: one local eval worker fails ----------------------------------------------------------------------


@pytest.mark.slow
def test_a_failing_eval_worker_names_its_run_and_the_others_are_evaluated(planned_micro, capsys):
    """`ladder eval S` with one run's model damaged: a submitit FailedJobError traceback (exit 1), the other worker
    left to itself, and no word of which run failed or whether the others were evaluated."""
    import psutil

    study, ids = planned_micro(executor="local")
    assert run_cli(capsys, "submit", study, "--executor", "debug").code == 0
    bad, good = ids
    (study / "runs" / bad / "model" / "model.safetensors").write_text("not a safetensors file")
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    r = run_cli(capsys, "eval", study, "--executor", "local", "--limit", "2")
    assert r.code == 1, r.stderr
    assert "Traceback" not in r.stdout + r.stderr
    line = next(line for line in r.stderr.splitlines() if line.startswith(bad))
    assert "lm-eval failed" in line and "header" in line, r.stderr
    assert "evaluated 1 run" in r.stdout and good in r.stdout, r.stdout
    assert list((study / "runs" / good / "lm_eval").glob("results_*.json"))
    assert not list((study / "runs" / bad).glob("lm_eval/results_*.json"))
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before  # no worker left behind


def test_a_run_whose_eval_fails_does_not_stop_the_jobs_other_runs(tmp_path, monkeypatch):
    """One job evaluates several runs (a local worker's share): the first one's failure cost the rest theirs."""
    import ladder.model.evaluation.downstream as downstream
    from ladder.jobs.on_node import evaluate_runs

    def evaluate_run(run_dir, *a, **k):
        if Path(run_dir).name == "bad":
            raise ValueError("Error while deserializing header: header too large\nmore")
        return {"results": {"task": {"acc": 0.5}}}

    monkeypatch.setattr(downstream, "evaluate_run", evaluate_run)
    done = evaluate_runs([str(tmp_path / "bad"), str(tmp_path / "good")], None, None, None)
    assert done == {"good": {"task": {"acc": 0.5}}}
    assert done.failed == {"bad": "ValueError: Error while deserializing header: header too large"}
    import pickle

    assert pickle.loads(pickle.dumps(done)).failed == done.failed  # as submitit hands it back from a worker


# ---- lead 3: the data cache cannot be written ------------------------------------------------------------------


def test_an_unwritable_data_cache_is_refused_up_front_and_books_no_failure(
    planned_micro, capsys, monkeypatch, tmp_path
):
    """With LADDER_CACHE under a file, `ladder submit S --executor debug` booked every run "failed" with
    "NotADirectoryError: [Errno 20] Not a directory: '.../cache/tokenizers'" (no word of the cache), and once the
    cache was mended a plain submit skipped them all: "failed (use --retry-failed)", though nothing had trained."""
    study, ids = planned_micro(sizes=("4K",), tokens_per_param=2)  # short runs: this is about the books, not training
    good = os.environ["LADDER_CACHE"]
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    monkeypatch.setenv("LADDER_CACHE", str(a_file / "cache"))
    r = run_cli(capsys, "submit", study, "--executor", "debug")
    one_line(r, "data cache", "LADDER_CACHE", str(a_file))
    assert not (study / layout.JOBS).exists()
    assert {row["state"] for row in _status(capsys, study).values()} == {"planned"}

    # a run trained by hand (or a job whose cache broke after it was submitted) says what happened ...
    r = run_cli(capsys, "train", study / "runs" / ids[0])
    one_line(r, "nothing was trained", str(a_file), "LADDER_CACHE")
    row = _status(capsys, study)[ids[0]]
    assert row["state"] == "failed" and "nothing was trained" in row["error"] and "LADDER_CACHE" in row["error"]
    # ... and, the cache mended, a plain submit trains it: no --retry-failed for a run that never started
    monkeypatch.setenv("LADDER_CACHE", good)
    again = run_cli(capsys, "submit", study, "--executor", "debug", "--json")
    assert again.code == 0 and again.json()["submitted"] == ids, again.stdout + again.stderr
    assert _status(capsys, study)[ids[0]]["state"] == "done"


# ---- lead 4: `ladder run` with a run folder it cannot write ------------------------------------------------------


def test_ladder_run_names_a_run_folder_it_cannot_write_not_resume(planned_micro, capsys, monkeypatch):
    """`ladder run S` with one run's folder unwritable: submit refused that run, `ladder run` trained the others
    and ended "1 runs ended without finishing (X); ... run the same command again to resume them", which refused
    it again, in silence, each time."""
    study, ids = planned_micro(tokens_per_param=2)
    locked = study / "runs" / ids[0]
    real = layout.check_writable

    def check_writable(folder):
        if Path(folder).resolve() == locked.resolve():
            raise PermissionError(13, "Permission denied", str(locked))
        return real(folder)

    monkeypatch.setattr(layout, "check_writable", check_writable)
    r = run_cli(capsys, "run", study, "--executor", "debug", "--skip-sanity", "--no-fit-check")
    assert r.code == 2 and "Traceback" not in r.stdout + r.stderr, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and ids[0] in last and "Permission denied" in last, last
    assert "resume" not in last and str(locked) in last
    assert "1 refused" in r.stdout
    assert _status(capsys, study)[ids[1]]["state"] == "done"  # the others trained all the same


# ---- new: `ladder cancel` while a local worker's run prepares its data -------------------------------------------

_SLOW_SETUP_WORKER = textwrap.dedent(
    """
    import signal, sys, time
    import ladder.model.training.loop as loop

    signal.signal(signal.SIGTERM, lambda *a: None)  # what submitit's job environment does with SIGTERM ("bypass")
    real = loop.resolve_data

    def slow(*a, **k):  # a data preparation that takes its time (a fresh cache, a big corpus)
        print("preparing", flush=True)
        time.sleep(float(sys.argv[3]))
        return real(*a, **k)

    loop.resolve_data = slow
    from ladder.jobs.on_node import WorkerJob

    print(WorkerJob(sys.argv[1], [sys.argv[2]])(), flush=True)
    """
)


def test_cancel_while_a_local_workers_run_prepares_its_data_stops_it(planned_micro, capsys):
    """`ladder cancel S` said "cancelled 1 run" while the run's worker prepared its data, and the run trained to its
    end: submitit only logs a SIGTERM, and the trainer had not yet taken the signal over."""
    study, ids = planned_micro(sizes=("4K",))
    worker = subprocess.Popen(
        [sys.executable, "-c", _SLOW_SETUP_WORKER, str(study), ids[0], "20"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert worker.stdout.readline().strip() == "preparing"
        _record_local_job(study, ids[0], worker.pid)
        assert _status(capsys, study)[ids[0]]["state"] == "running"
        r = run_cli(capsys, "cancel", study)
        assert r.code == 0 and f"cancelled 1 run: {ids[0]}" in r.stdout, r.stdout + r.stderr
        out, _ = worker.communicate(timeout=10)  # before: the 20 s of data, then the whole run
        assert worker.returncode == 0 and "cancelled" in out, out
    finally:
        worker.kill()
        worker.wait()
    row = _status(capsys, study)[ids[0]]
    assert row["state"] == "cancelled" and row["tokens_done"] == 0 and row["error"] is None, row
    assert not (study / "runs" / ids[0] / layout.ERROR).exists()


# ---- new: the debug executor's submit, once its runs have trained ------------------------------------------------


def test_a_debug_submit_says_its_runs_trained_not_to_watch_them(planned_micro, capsys):
    """`ladder submit S --executor debug` trained every run in the command, then said "1 submitted, 0 skipped;
    follow with `ladder status S --watch`": advice to watch runs that had all ended, and not a word of how each
    ended."""
    study, ids = planned_micro(sizes=("4K",), tokens_per_param=2)
    r = run_cli(capsys, "submit", study, "--executor", "debug")
    assert r.code == 0, r.stderr
    assert f"submitted {ids[0]} (debug, job debug-" in r.stdout and "): done" in r.stdout, r.stdout
    assert "--watch" not in r.stdout and "trained in this process" in r.stdout, r.stdout
    again = run_cli(capsys, "submit", study, "--executor", "debug")  # nothing trained now: nothing said of it
    assert "0 submitted, 1 skipped" in again.stdout and "trained in this process" not in again.stdout
    # nor "follow with `ladder status S --watch`": nothing was sent and nothing is in flight
    assert "--watch" not in again.stdout and "nothing is training" in again.stdout, again.stdout


# ---- new: submit right after cancel, while the run still stops -------------------------------------------------


def test_submit_right_after_cancel_says_the_run_is_stopping_not_alive(planned_micro, capsys):
    """`ladder cancel S; ladder submit S`: "skipped X: running (job alive)", as if the cancel had not worked."""
    study, ids = planned_micro()
    holder = _hold_lock(study / "runs" / ids[0])
    try:
        _record_local_job(study, ids[0], holder.pid)
        assert run_cli(capsys, "cancel", study).code == 0
        r = run_cli(capsys, "submit", study, "--executor", "local", "--run", ids[0], "--json")
        assert r.code == 0 and r.json()["submitted"] == [], r.stdout + r.stderr
        why = r.json()["reasons"][ids[0]]
        assert "stopping after `ladder cancel`" in why and "job alive" not in why, why
    finally:
        holder.kill()
        holder.wait()


def test_an_eval_worker_killed_outright_is_said_so_not_by_its_logs_last_line(planned_micro, monkeypatch):
    """kill -9 of a local eval worker: "lm-eval failed: submitit INFO (...) - Loading pickle: ..." (its log's last
    line), which says nothing of what happened."""
    from types import SimpleNamespace

    import submitit

    import ladder.jobs.submit as submit
    import ladder.model.evaluation.results as results
    from ladder.studies.spec import ExecutorSpec

    study, ids = planned_micro()

    class Killed:
        job_id = "4242"
        paths = SimpleNamespace(stderr=study / "submitit" / "eval" / "4242" / "4242_0_log.err")

        def result(self):
            raise submitit.core.utils.UncompletedJobError(
                "Job 4242 (task: 0) with path x/4242_0_result.pkl\nhas not produced any output (state: FAILED)\n"
                "Error stream produced:\n" + "-" * 40 + "\nsubmitit INFO (2026-12-06 10:08:56,501) - Loading pickle: x"
            )

    monkeypatch.setattr(results, "runs_to_evaluate", lambda *a, **k: [layout.RunDir(study / "runs" / i) for i in ids])
    monkeypatch.setattr(submit, "_local_executor", lambda *a, **k: SimpleNamespace(submit=lambda *a, **k: Killed()))
    out = submit.submit_evals(study, ExecutorSpec(kind="local"), tasks=None, include_path=None, limit=2)
    assert out["evaluated"] == [] and sorted(out["failed"]) == sorted(ids)
    for why in out["failed"].values():
        assert "ended without a result" in why and "Loading pickle" not in why and "4242_0_log.err" in why, why


@pytest.mark.slow  # the whole main job on one micro run: ~25 s
def test_ladder_run_names_a_run_whose_eval_failed(tmp_path, tiny_jsonl_corpus, capsys, monkeypatch):
    """The main job's eval stage: a run whose lm-eval failed was a FailedJobError traceback; it is named with why,
    the stages after it go on, and the exit is 1."""
    import yaml

    import ladder.jobs.submit as submit
    import ladder.reports.render as render

    spec = write_study(tmp_path / "ev.yaml", tiny_jsonl_corpus, name="ev", sizes=("4K",))
    spec.write_text(yaml.safe_dump({**yaml.safe_load(spec.read_text()), "evals": {"limit": 2}}))
    study = tmp_path / "ev"
    r = run_cli(capsys, "plan", spec, "--out", study, "--no-fit-check", "--json")
    (run_id,) = [run["run_id"] for run in r.json()["runs"]]
    failed = {run_id: "SafetensorError: header too large (its log: x.err)"}
    monkeypatch.setattr(submit, "submit_evals", lambda *a, **k: {"evaluated": [], "failed": failed, "results": {}})
    monkeypatch.setattr(render, "render_report", lambda *a, **k: {})
    r = run_cli(capsys, "run", study, "--executor", "debug", "--skip-sanity", "--no-fit-check", "--json")
    assert r.code == 1 and "Traceback" not in r.stdout + r.stderr, r.stderr
    assert f"{run_id}: lm-eval failed: SafetensorError: header too large" in r.stderr, r.stderr
    outcome = r.json()
    assert outcome["eval_failures"] == failed and not outcome["ok"] and "collect" in outcome["stages"]


# ---- new: kill -9 of a local job (the pid `ladder status` shows), while its worker goes on ---------------------

_CONTROLLER = textwrap.dedent(
    """
    import os, subprocess, sys

    env = {**os.environ, "SUBMITIT_EXECUTOR": "local"}  # as submitit's controller starts its task
    task = subprocess.Popen([sys.executable, "-c", sys.argv[1], *sys.argv[2:]], env=env)
    print(task.pid, flush=True)
    task.wait()
    """
)


def test_kill_9_of_a_local_job_stops_its_worker_too(planned_micro, capsys):
    """`kill -9 <job id>` (the pid status shows is submitit's controller): its worker trained on as an orphan, the
    runs it would take next showed as "planned", and `ladder cancel` stopped only the one in training: the orphan
    went on to the next."""
    import psutil

    study, ids = planned_micro()
    controller = subprocess.Popen(
        [sys.executable, "-c", _CONTROLLER, _SLOW_SETUP_WORKER.replace("[sys.argv[2]]", "sys.argv[2].split(',')"),
         str(study), ",".join(ids), "20"],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    task = psutil.Process(int(controller.stdout.readline()))
    try:
        assert controller.stdout.readline().strip() == "preparing"
        for run_id in ids:
            _record_local_job(study, run_id, controller.pid)
        assert {row["state"] for row in _status(capsys, study).values()} == {"running", "queued"}
        controller.kill()
        controller.wait()
        task.wait(timeout=10)  # before: it slept its 20 s of "data", then trained both runs
    finally:
        for proc in (controller, task):
            try:
                proc.kill()
            except (OSError, psutil.Error):
                pass
    rows = _status(capsys, study)
    assert {row["state"] for row in rows.values()} == {"planned"}, rows
    assert not any((study / "runs" / i / layout.METRICS).exists() for i in ids)


# ---- new: cancel while a run trains in a terminal (`ladder train`), with no job of the study -----------------


def test_cancel_names_a_run_trained_outside_any_job_and_leaves_it_alone(planned_micro, capsys):
    """`ladder train S/runs/X` in one terminal, `ladder cancel S` in another: "nothing to cancel: no run of this
    study has a queued or running job", while `ladder status S` showed X running."""
    study, ids = planned_micro()
    holder = _hold_lock(study / "runs" / ids[0])
    try:
        assert _status(capsys, study)[ids[0]]["state"] == "running"
        r = run_cli(capsys, "cancel", study)
        assert r.code == 0 and "no run of this study has a queued or running job" not in r.stdout, r.stdout
        assert f"run {ids[0]} not cancelled" in r.stderr and f"kill {holder.pid}" in r.stderr, r.stderr
        as_json = run_cli(capsys, "cancel", study, "--json").json()
        assert as_json["cancelled"] == [] and as_json["not_a_job"] == [{"run_id": ids[0], "pid": holder.pid}]
        assert holder.poll() is None  # left alone
        assert not (study / layout.JOBS).exists()  # nothing written
    finally:
        holder.kill()
        holder.wait()


# ---- new: Ctrl-C while `ladder submit` starts its local workers ------------------------------------------------


def test_ctrl_c_between_two_local_workers_leaves_no_unrecorded_worker(planned_micro, monkeypatch):
    """Ctrl-C after `ladder submit` started one local worker and before the next: jobs.json was not written, and
    the first worker trained on where `ladder cancel` could not see it (beside the workers of the submit run
    again)."""
    from types import SimpleNamespace

    import ladder.jobs.submit as submit
    from ladder.studies.spec import ExecutorSpec

    study, ids = planned_micro()
    started = []

    def start(*a, **k):
        if started:
            raise KeyboardInterrupt  # the Ctrl-C, as the second worker starts
        process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        started.append(process)
        return SimpleNamespace(_process=process, job_id=str(process.pid))

    monkeypatch.setattr(submit, "_local_slots", lambda ex, runs: [([], 1), ([], 1)])
    monkeypatch.setattr(submit, "_local_executor", lambda *a, **k: SimpleNamespace(submit=start))
    try:
        with pytest.raises(KeyboardInterrupt):
            submit.submit(study, ExecutorSpec(kind="local"))
        assert started and started[0].poll() is not None  # the worker it had started is gone, not left unrecorded
    finally:
        for process in started:
            process.kill()
            process.wait()
    assert not job_records.read(layout.StudyDir(study))
