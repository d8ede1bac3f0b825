"""Re-trial 17a of the forecast loop: freeze, hero (moved, twice), submit, score (two heroes, a hero queued, a partial
curve), run by the command that found each case, on the fake-trained ladder of :mod:`tests.hero_fixture`."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from ladder import layout
from ladder.model.config import RunSpec
from tests.cli_helpers import one_line, run_cli
from tests.hero_fixture import make_ladder, train


@pytest.fixture(scope="module")
def fitted(tmp_path_factory) -> Path:
    """A fitted ladder with forecast 1 frozen (with --predict 200K:4M), no hero planned."""
    from ladder.forecast.frozen import freeze

    root = make_ladder(tmp_path_factory.mktemp("r17") / "study")
    freeze(root, predict=["200K:4M"])
    return root


@pytest.fixture
def study(fitted, tmp_path) -> Path:
    return Path(shutil.copytree(fitted, tmp_path / "study"))


def _heroes(study: Path) -> list[RunSpec]:
    from ladder.plan.planner import read_plan

    return [s for s in read_plan(study)[1] if s.role == "hero"]


def _scores(study: Path) -> list[dict]:
    return json.loads((study / "forecast.json").read_text())["scores"]


def test_scoring_two_trained_heroes_twice_appends_nothing_the_second_time(study, capsys):
    """`ladder hero S`, `ladder hero S --params 200K` (now with --keep), both trained: every `forecast score S` appended both scores
    again (13 -> 15 -> 17 in the trial), each compared with the freeze's last score, the other hero's; and the
    line "the same as its last score: not appended again" was printed under a score that had been appended."""
    sd = layout.StudyDir(study)
    assert run_cli(capsys, "hero", study).code == 0
    assert run_cli(capsys, "hero", study, "--params", "200K", "--keep").code == 0
    for h, loss in zip(_heroes(study), (3.45, 3.6)):
        train(sd, h, loss)
    first = run_cli(capsys, "forecast", "score", study)
    assert first.code == 0, first.stderr
    assert "not appended" not in first.stdout, first.stdout
    assert len(_scores(study)) == 2
    again = run_cli(capsys, "forecast", "score", study)
    assert again.code == 0, again.stderr
    assert len(_scores(study)) == 2, [s["source"] for s in _scores(study)]
    assert " ".join(again.stdout.split()).count("not appended again") == 2, again.stdout
    assert run_cli(capsys, "forecast", "score", study, "--json").json()["not_appended_again"] == [1]


def test_a_hero_submitted_but_not_yet_evaluated_is_not_sent_to_submit_again(study, capsys):
    """`ladder submit S --executor local`, then at once `ladder forecast score S`: "the hero run X has no eval point
    yet: nothing to score (train it with `ladder submit S`)", of a hero that was queued, then running; that submit
    skips it. Now it says the run is queued and when it will first have a point to score."""
    import os

    from tests.fake_runs import record_job

    assert run_cli(capsys, "hero", study).code == 0
    [hero] = _heroes(study)
    record_job(layout.StudyDir(study), hero.run_id, cancelled=False, job_id=str(os.getpid()))
    r = run_cli(capsys, "forecast", "score", study)
    line = one_line(r, f"the hero run {hero.run_id} is queued and has no eval point yet")
    assert "ladder submit" not in line and f"every {hero.eval_interval:,} of its {hero.steps:,} steps" in line, line


def test_a_curve_that_stops_before_every_rungs_first_eval_says_when_it_can_be_scored(study, tmp_path, capsys):
    """`ladder forecast score S --curve hero-10pct.csv` (a hero curve at 10% of its tokens, the rungs' first eval
    at 12.3%): "the curve forecasts no final loss yet (no finished rung of the hero's schedule has a curve through
    10% of its tokens)", which reads as if no rung had a curve at all. Now it names where the rungs' curves start
    and when to score again."""
    assert run_cli(capsys, "hero", study).code == 0
    [hero] = _heroes(study)
    (tmp_path / "early.csv").write_text(f"tokens,eval_loss\n{hero.tokens * 0.05:.0f},5.0\n")
    r = run_cli(capsys, "forecast", "score", study, "--curve", tmp_path / "early.csv")
    line = one_line(r, "stops at 5% of the hero's tokens, before the first eval point of every finished rung")
    at = re.search(
        r"\(the earliest at (\d+(?:\.\d)?)% of the rung's tokens\): score again once the curve reaches ", line
    )
    assert at and line.split("reaches ")[1].startswith(f"{at[1]}%"), line
    (tmp_path / "then.csv").write_text(f"tokens,eval_loss\n{hero.tokens * float(at[1]) / 100:.0f},5.0\n")
    assert run_cli(capsys, "forecast", "score", study, "--curve", tmp_path / "then.csv").code == 0  # as promised


def _hero_ids(study: Path) -> list[str]:
    return [h.run_id for h in _heroes(study)]


def test_moving_a_hero_never_submitted_replaces_it_and_never_one_that_began(study, capsys):
    """`ladder hero S`, `ladder hero S --seed 1`, `ladder hero S --params 200K`: the plan held all three heroes and
    `ladder submit S` trained the two the hero had moved from too ("hero runs pile up"; a note said so). Now the
    hero a move leaves behind, never submitted, leaves the plan and its folder (a spec.json) goes; --dry-run says
    it would; a hero that was submitted or trained a step stays, and --keep keeps any."""
    from tests.fake_runs import partial, record_job

    assert run_cli(capsys, "hero", study).code == 0
    r = run_cli(capsys, "hero", study, "--seed", "1")
    assert r.code == 0 and "other hero run" not in r.stdout, r.stdout  # a replicate is planned beside its hero
    old = _hero_ids(study)
    dry = run_cli(capsys, "hero", study, "--params", "200K", "--dry-run")
    assert dry.code == 0 and _hero_ids(study) == old, dry.stderr
    line = next(x for x in dry.stdout.splitlines() if x.startswith("would replace: hero run(s) "))
    assert all(i in line for i in old) and "never submitted: would leave the plan" in line, line
    moved = run_cli(capsys, "hero", study, "--params", "200K", "--json")
    assert moved.code == 0, moved.stderr
    assert moved.json()["replaced"] == old and _hero_ids(study) == [moved.json()["run_id"]]
    assert not any((study / "runs" / i).exists() for i in old)
    # back to the fit's hero: the 200K hero goes in its turn, unless kept
    kept = run_cli(capsys, "hero", study, "--keep")
    assert kept.code == 0 and "other hero run(s) not trained yet" in kept.stdout, kept.stdout
    assert len(_heroes(study)) == 2
    sd = layout.StudyDir(study)
    small, big = sorted(_heroes(study), key=lambda h: h.params)
    record_job(sd, small.run_id, cancelled=True)  # submitted, then cancelled before its first step
    partial(sd, big, 2)  # interrupted after 2 steps (Ctrl-C), with a checkpoint to resume from
    r = run_cli(capsys, "hero", study, "--params", "300K")
    assert r.code == 0 and "replaced" not in r.stdout, r.stdout
    assert _hero_ids(study)[:2] == [small.run_id, big.run_id] and len(_heroes(study)) == 3
    assert all((study / "runs" / h.run_id / "spec.json").is_file() for h in (small, big))
    note = " ".join(r.stdout.split())
    assert f"2 other hero run(s) not trained yet ({small.run_id}" in note and big.run_id in note, r.stdout


def test_hero_asked_for_again_while_it_trains_does_not_send_it_to_submit(study, capsys):
    """`ladder submit S --run HERO --executor local`, then `ladder hero S --params 50K` (the hero already planned
    there) while it ran: "already planned: S/runs/X; train it with `ladder submit S`", and the note on the other
    hero "`ladder submit S --run X` trains this one alone", of a run already training, which submit skips."""
    import os

    from tests.fake_runs import record_job

    assert run_cli(capsys, "hero", study, "--params", "200K").code == 0
    assert run_cli(capsys, "hero", study, "--keep").code == 0
    small = min(_heroes(study), key=lambda h: h.params)
    record_job(layout.StudyDir(study), small.run_id, cancelled=False, job_id=str(os.getpid()))
    r = run_cli(capsys, "hero", study, "--params", "200K")
    assert r.code == 0, r.stderr
    text = " ".join(r.stdout.split())
    assert f"already submitted (queued): {study / 'runs' / small.run_id}; `ladder status {study}` follows it" in text
    assert "train it with" not in text and "trains this one alone" not in text, r.stdout
    assert f"`ladder submit {study}` trains them (this one is queued already)" in text, r.stdout


def test_hero_says_a_freeze_differs_from_the_fit_because_the_results_changed(study, capsys):
    """`ladder plan S --suggest --add`, submit, collect, fit, then `ladder hero S`: "on record: forecast 1 froze
    3.247 [2.896, 3.647] at its hero (not the fit's forecast above: see the note on the forecast)", and no note
    said anything of it: the results had changed since the freeze, which is why the fit's number differs."""
    from ladder.plan.planner import read_plan
    from tests.hero_fixture import refresh

    rung = next(s for s in read_plan(study)[1] if s.role == "rung" and s.trunk is None)
    train(layout.StudyDir(study), rung, 3.9)  # its result changed: another loss
    refresh(study)
    r = run_cli(capsys, "hero", study)
    assert r.code == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("on record: forecast 1 froze"))
    assert "(not the fit's forecast above: the study's results changed after it was frozen)" in line, line


def test_a_ctrl_c_as_a_moved_hero_is_written_never_leaves_both_heroes_planned(study, capsys, monkeypatch):
    """The move wrote plan.json twice (the new hero in, then the old one out): a Ctrl-C between the two left both
    planned, and `ladder hero S --params 200K` again found its hero "already planned" and replaced nothing."""
    import signal

    import ladder.forecast.hero_run as hero_run

    assert run_cli(capsys, "hero", study).code == 0
    [old] = _hero_ids(study)
    write = hero_run._write_hero

    def then_ctrl_c(*a, **k):
        write(*a, **k)
        signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(hero_run, "_write_hero", then_ctrl_c)
    assert run_cli(capsys, "hero", study, "--params", "200K").code == 130
    assert old not in _hero_ids(study) and len(_hero_ids(study)) == 1


def test_a_curve_with_two_hero_runs_planned_is_refused_until_run_names_its_hero(study, tmp_path, capsys):
    """Two heroes planned (100.6K x 1M, then 50.93K x 500K), `ladder forecast score S --curve curve30.csv` of the
    first's curve up to 250.9K tokens: scored as the last planned hero's, "partial at 50%", against the 50K:500K
    point, with no word of which hero it took. Now it is refused, naming the heroes, until --run says which."""
    assert run_cli(capsys, "hero", study, "--params", "200K").code == 0
    assert run_cli(capsys, "hero", study, "--keep").code == 0
    small, big = _heroes(study)
    (tmp_path / "c.csv").write_text(f"tokens,eval_loss\n{big.tokens * 0.3:.0f},4.0\n")
    before = (study / "forecast.json").read_text()
    line = one_line(run_cli(capsys, "forecast", "score", study, "--curve", tmp_path / "c.csv"), "2 hero runs")
    assert small.run_id in line and big.run_id in line and "--run ID" in line, line
    assert (study / "forecast.json").read_text() == before
    r = run_cli(capsys, "forecast", "score", study, "--curve", tmp_path / "c.csv", "--run", big.run_id, "--json")
    assert r.code == 0 and r.json()["scores"][0]["partial"]["fraction"] == pytest.approx(0.3, abs=1e-3), r.stderr


def test_a_damaged_jobs_json_replaces_no_hero(study, capsys):
    """A hero submitted (its job in jobs.json) but not started, then jobs.json damaged: it read as never submitted,
    and moving the hero dropped it while its worker was about to train it. Now no hero is replaced then."""
    assert run_cli(capsys, "hero", study).code == 0
    [old] = _hero_ids(study)
    (study / "jobs.json").write_text("{not json")
    r = run_cli(capsys, "hero", study, "--params", "200K")
    assert r.code == 0 and "replaced" not in r.stdout, r.stdout
    assert old in _hero_ids(study) and (study / "runs" / old / "spec.json").is_file()
