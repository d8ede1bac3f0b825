"""Retrial 15 of issue 28, two people on one study at once: commands that read a shared book whole, change it and
write it back (plan.json by ``ladder plan`` and ``ladder hero``, a freeze's scores by ``ladder forecast score``)
do so one at a time, so that neither drops what the other wrote.

Each race is played deterministically: the first command is stopped just before its write, the second runs then
(in a thread) until it finishes or waits for the first, and only then does the first write."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from ladder import layout
from tests.cli_helpers import run_cli


def _waiting_on_a_lock(pid: int | None = None) -> bool:
    """Whether a thread of this process (or of ``pid``) waits for a ``flock`` (a "->" line of /proc/locks)."""
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return False
    return any("->" in line and f" {pid or os.getpid()} " in line for line in lines)


def _meanwhile(second) -> threading.Thread:
    """Run ``second`` in a thread until it has finished or waits for a lock (what another process would do while
    the first command is between its read and its write); its exception, if any, is raised by ``join``."""
    box: dict = {}

    def body():
        try:
            box["value"] = second()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc

    t = threading.Thread(target=body, daemon=True)
    t.start()
    deadline = time.monotonic() + 20
    while t.is_alive() and not _waiting_on_a_lock() and time.monotonic() < deadline:
        time.sleep(0.01)

    def join():
        t.join(30)
        assert not t.is_alive(), "the second command never finished"
        if "error" in box:
            raise box["error"]
        return box.get("value")

    t.result = join  # type: ignore[attr-defined]
    return t


def _plan_runs(study: Path) -> list[str]:
    return json.loads((study / layout.PLAN).read_text())["runs"]


def _two_heroes(study: Path, monkeypatch, first_seed: int, second_seed: int):
    from ladder.forecast import hero_run

    real = hero_run._write_hero
    started: list[threading.Thread] = []

    def write_hero(*args, **kwargs):
        if not started:
            started.append(_meanwhile(lambda: hero_run.plan_hero_run(study, seed=second_seed)))
        return real(*args, **kwargs)

    monkeypatch.setattr(hero_run, "_write_hero", write_hero)
    first = hero_run.plan_hero_run(study, seed=first_seed)
    second = started[0].result()
    return first, second


def test_two_heroes_planned_at_once_are_both_in_the_plan(study, monkeypatch):
    """`ladder hero S --seed 5` and `ladder hero S --seed 6` from two terminals: each read plan.json, added its
    run and wrote it back, so the later write dropped the other's hero (its folder left, listed nowhere: status,
    submit and the score never saw it). Now both are listed."""
    before = _plan_runs(study)
    first, second = _two_heroes(study, monkeypatch, 5, 6)
    runs = _plan_runs(study)
    assert runs == [*before, first.spec.run_id, second.spec.run_id] or runs == [
        *before,
        second.spec.run_id,
        first.spec.run_id,
    ], runs
    assert {first.state, second.state} == {"new"}
    listed = set(runs)
    folders = {p.name for p in (study / layout.RUNS).iterdir()}
    assert folders <= listed, f"run folders the plan does not list: {folders - listed}"


def test_the_same_hero_planned_twice_at_once_is_listed_once(study, monkeypatch):
    """The same `ladder hero S` twice at once (a cron job and a person): plan.json listed the hero twice, and
    both said "new". Now it is listed once and the second says it is planned already."""
    before = _plan_runs(study)
    first, second = _two_heroes(study, monkeypatch, 5, 5)
    assert _plan_runs(study) == [*before, first.spec.run_id]
    assert (first.state, second.state) == ("new", "planned already")


def test_a_hero_planned_while_the_study_is_planned_again_stays_in_the_plan(study, monkeypatch):
    """`ladder plan` (re-planning the study) while `ladder hero` runs: plan read the heroes plan.json listed, the
    hero was added, then plan wrote plan.json without it. Now the hero stays listed."""
    from ladder.forecast import hero_run
    from ladder.plan import planner

    real = planner.planned_heroes
    started: list[threading.Thread] = []

    def planned_heroes(sd):
        out = real(sd)
        if not started:
            started.append(_meanwhile(lambda: hero_run.plan_hero_run(study, seed=7)))
        return out

    monkeypatch.setattr(planner, "planned_heroes", planned_heroes)
    planner.write_plan(planner.expand(planner.read_study(study)), study)
    hero = started[0].result()
    assert hero.state == "new" and hero.spec.run_id in _plan_runs(study)


def test_two_scores_at_once_are_both_kept(study, capsys, monkeypatch):
    """`ladder forecast score S --loss 3.0` and `--loss 3.1` from two terminals: one of the two scores was lost
    from forecast.json (both read the freeze, appended one score and wrote it back; found in 1 of 5 tries).
    Now both are kept, in the order they were made."""
    from ladder.forecast import frozen

    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    real = layout.atomic_write_text
    started: list[threading.Thread] = []

    def write(path, text, **kwargs):
        if Path(path).name == layout.FORECAST and not started:
            second = frozen.read_frozen(study)[0]
            started.append(_meanwhile(lambda: frozen.append_score(second, {"actual": 3.1, "final": True})))
        return real(path, text, **kwargs)

    monkeypatch.setattr(layout, "atomic_write_text", write)
    frozen.append_score(frozen.read_frozen(study)[0], {"actual": 3.0, "final": True})
    started[0].result()
    scores = json.loads((study / layout.FORECAST).read_text())["scores"]
    assert [s["actual"] for s in scores] == [3.0, 3.1]


def test_the_same_score_twice_at_once_is_kept_once(study, capsys, monkeypatch):
    """`ladder forecast score S --loss 3.0` twice at once (a cron job and a person): forecast.json held the same
    score twice (3 of 3 tries), though scoring again one after the other says "the same as its last score: not
    appended again". Now the comparison is made with the file's last score under the lock: one score, and the
    second command says it was not appended."""
    from ladder.forecast.score import score_study

    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    real = layout.atomic_write_text
    started: list[threading.Thread] = []

    def write(path, text, **kwargs):
        if Path(path).name == layout.FORECAST and not started:
            started.append(_meanwhile(lambda: score_study(study, loss=3.0)))
        return real(path, text, **kwargs)

    monkeypatch.setattr(layout, "atomic_write_text", write)
    first = score_study(study, loss=3.0)
    second = started[0].result()
    assert (first.repeated, second.repeated) == (set(), {1})
    assert len(json.loads((study / layout.FORECAST).read_text())["scores"]) == 1


def test_suggest_add_never_writes_over_a_plan_made_meanwhile(study, monkeypatch):
    """`ladder plan S --suggest --add` (seconds of refits) while a colleague plans a change of the study (here:
    an extra run of their own): the add wrote study.yaml and plan.json from the study it had read before, so the
    colleague's run was dropped from both (its folder left, listed nowhere). Now the add finds study.yaml changed
    under the lock, writes nothing and says to run it again; the colleague's plan stays."""
    from ladder.errors import StateError
    from ladder.forecast import next_runs
    from ladder.plan import planner

    real = next_runs.write_plan
    theirs: list[str] = []

    def write_plan(plan, study_dir, **kwargs):
        if not theirs:  # the colleague's `ladder plan`, done while the suggestion was being chosen
            colleague = next_runs.with_extra_runs(planner.read_study(study), [{"size": "18K"}])
            theirs.extend(real(planner.expand(colleague), study).new)
        return real(plan, study_dir, **kwargs)

    monkeypatch.setattr(next_runs, "write_plan", write_plan)
    before = {p.name for p in (study / layout.RUNS).iterdir()}
    with pytest.raises(StateError, match="changed while the runs to add were chosen .*: nothing added; run the same"):
        next_runs.suggest(study, budget=1e14, add=True, k=2, n_boot=5)
    assert len(theirs) == 1 and theirs[0] in _plan_runs(study), "the colleague's planned run was dropped"
    assert "18000" in (study / layout.STUDY).read_text()
    assert {p.name for p in (study / layout.RUNS).iterdir()} == before | set(theirs), "the add wrote a run folder"


def test_an_older_collect_never_writes_over_a_newer_one(study, capsys, monkeypatch):
    """`ladder collect S` (a cron job) read a run still training, was descheduled, and meanwhile the run finished
    and a person's `ladder collect S` said "6 done"; the older collect then wrote results.parquet last, with the
    run "interrupted" (found with SIGSTOP on real processes), and `fit` would have left it out. Now the second
    collect waits for the first and reads the runs after it, so the tables say what the later collect said."""
    from ladder.books import collect as collect_mod

    first = json.loads((study / layout.PLAN).read_text())["runs"][0]
    rd = layout.StudyDir(study).run(first)
    finished = rd.result.read_bytes(), rd.metrics.read_bytes()
    rd.result.unlink()
    rd.metrics.write_bytes(b"".join(finished[1].splitlines(keepends=True)[:4]))  # still training
    real = collect_mod.write_collected
    started: list[subprocess.Popen] = []

    def write_collected(study_dir, collected):
        if not started:
            rd.result.write_bytes(finished[0])  # the run finishes, and the person collects
            rd.metrics.write_bytes(finished[1])
            person = subprocess.Popen(
                [sys.executable, "-m", "ladder", "collect", str(study), "--json"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            deadline = time.monotonic() + 60
            while person.poll() is None and not _waiting_on_a_lock(person.pid) and time.monotonic() < deadline:
                time.sleep(0.02)
            started.append(person)
        return real(study_dir, collected)

    monkeypatch.setattr(collect_mod, "write_collected", write_collected)
    cron = run_cli(capsys, "collect", study, "--json")
    said, why = started[0].communicate(timeout=60)
    assert cron.code == 0 and started[0].returncode == 0, (cron.stderr, why)
    assert cron.json()["states"].get("done") == 5 and json.loads(said)["states"] == {"done": 6}
    results = pd.read_parquet(study / layout.RESULTS_PARQUET)
    assert results.set_index("run_id").loc[first, "status"] == "done"


class _CancelledMidway:
    """submitit's debug executor, whose first job is cancelled from another terminal while it trains: `ladder
    cancel` marks the run cancelled in jobs.json, then its SIGTERM stops the training at a step boundary."""

    def __init__(self, *args, **kwargs):
        self.study = Path(kwargs["folder"]).parent.parent

    def submit(self, job):
        return self

    def exception(self):
        from ladder.books import job_records
        from ladder.model.training.preemption import Preempted

        sd = layout.StudyDir(self.study)
        with job_records.editing(sd) as book:
            first = json.loads(sd.plan.read_text())["runs"][0]
            book[first][-1].cancelled = True
        return Preempted(15, 3, None)


def test_a_debug_submit_cancelled_from_another_terminal_says_so(planned_micro, capsys, monkeypatch):
    """`ladder submit S --executor debug` in one terminal, `ladder cancel S` in another: the submit said "stopped
    by SIGTERM: run the same command to continue", as for a kill or a preemption, and the same command would have
    trained the cancelled run again behind the canceller's back. Now it says that `ladder cancel` cancelled the
    run, that the runs after it did not train, and what `ladder submit` would do."""
    import submitit

    study, ids = planned_micro("cancelled")
    monkeypatch.setattr(submitit, "AutoExecutor", _CancelledMidway)
    r = run_cli(capsys, "submit", study, "--executor", "debug")
    assert r.code == 128 + 15, r.stderr
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith(f"stopped by SIGTERM: `ladder cancel` (another command) cancelled run {ids[0]}"), line
    assert "the 1 run after it did not train" in line and f"`ladder submit {study}` trains" in line, line
    assert "run the same command to continue" not in line and "Traceback" not in r.stderr


def test_a_second_eval_of_a_run_waits_for_the_first(tmp_path, monkeypatch):
    """Two `ladder eval S` at once (two terminals) both ran lm-eval on every run (20 s instead of 14 on the micro
    study; hours on a real one), each writing the same results. Now an evaluation holds the run folder's lock: the
    second waits, then finds the results written and skips them (evaluate_run skips a finished task)."""
    from ladder.jobs.on_node import evaluate_runs
    from ladder.model.evaluation import downstream
    from ladder.plan.study_lock import editing_study

    run_dir = tmp_path / "runs" / "abc"
    run_dir.mkdir(parents=True)
    calls: list[str] = []
    monkeypatch.setattr(downstream, "evaluate_run", lambda rd, *a, **k: calls.append(rd) or {"results": {}})
    with editing_study(run_dir):  # the first eval, evaluating the run
        second = _meanwhile(lambda: evaluate_runs([str(run_dir)], None, None, None))
        assert calls == [], "the second eval ran lm-eval on a run the first was evaluating"
    assert dict(second.result()) == {"abc": {}} and calls == [str(run_dir)]


def test_the_study_lock_makes_nothing_and_lets_a_read_only_study_say_its_own_error(tmp_path):
    """The lock is the study folder's own flock: no file is added to the study, and where the folder cannot be
    opened (not there yet) the command goes on, so its own write says what is wrong."""
    from ladder.plan.study_lock import editing_study

    with editing_study(tmp_path):
        pass
    assert list(tmp_path.iterdir()) == []
    with editing_study(tmp_path / "not-yet"):
        (tmp_path / "not-yet").mkdir()
    assert [p.name for p in tmp_path.iterdir()] == ["not-yet"]


def test_a_command_that_waits_for_the_study_lock_says_so(tmp_path, capsys):
    """A second command behind a long collect (or an eval of the same run) waited with no word: it looked hung."""
    import fcntl

    from ladder.plan.study_lock import editing_study

    holder = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(holder, fcntl.LOCK_EX)
    entered = threading.Event()

    def second():
        with editing_study(tmp_path):
            entered.set()

    t = threading.Thread(target=second)
    t.start()
    deadline = time.monotonic() + 10
    while not _waiting_on_a_lock() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not entered.is_set()
    fcntl.flock(holder, fcntl.LOCK_UN)
    os.close(holder)
    t.join(10)
    assert entered.is_set()
    assert f"waiting for another ladder command working on {tmp_path}" in capsys.readouterr().err
    with editing_study(tmp_path):  # a free lock: not a word
        pass
    assert capsys.readouterr().err == ""
