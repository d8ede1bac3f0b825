"""Re-trial 14 of issue 28, a study that grows and changes over weeks: the study file edited after runs trained
(another lr, corpus, name), planned again into the same folder, and carried on there. Whatever changed, the
runs already trained stay in the books, a result trained under another spec is never fitted as the new one
without a word, and every message says what to do.

Replanning with added or removed sizes, axes, budgets and micro-batches is tested in tests/test_plan.py and
tests/test_rungs.py; a study file edited without planning again in tests/test_user_errors_retrial10.py."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from ladder import layout
from ladder.books.run_lock import run_lock
from tests.cli_helpers import one_line, run_cli
from tests.fake_runs import record_job
from tests.micro import write_study


def _plan(capsys, spec: Path, out: Path) -> dict:
    r = run_cli(capsys, "plan", spec, "--out", out, "--no-fit-check", "--json")
    assert r.code == 0, r.stderr
    return r.json()


def _edit(spec: Path, **training) -> None:
    data = yaml.safe_load(spec.read_text())
    data["training"].update(training)
    spec.write_text(yaml.safe_dump(data))


def test_planning_again_never_drops_runs_that_still_train(tmp_path, capsys, tiny_jsonl_corpus):
    """`ladder submit S --executor local`, then lr_max edited in the study file and `ladder plan s.yaml --out S`
    while the workers trained: the plan dropped the running runs from plan.json, `ladder status S` showed none of
    them, `ladder cancel S` said "nothing to cancel" and the workers trained on for nothing. Now the plan is
    refused, naming the runs and the cancel that stops them, and nothing is written."""
    spec, out = write_study(tmp_path / "s.yaml", tiny_jsonl_corpus), tmp_path / "S"
    first = _plan(capsys, spec, out)
    running, queued = (r["run_id"] for r in first["runs"])
    sd = layout.StudyDir(out)
    record_job(sd, queued, cancelled=False, job_id=str(os.getpid()))  # a live local worker, not on it yet
    _edit(spec, lr_max=0.01)
    plan_before = sd.plan.read_bytes()
    with run_lock(sd.run(running)) as held:
        assert held
        words = ("still queued or running", f"{running} (running)", f"{queued} (queued)")
        one_line(
            run_cli(capsys, "plan", spec, "--out", out, "--no-fit-check", "--json"),
            *words,
            f"ladder cancel {out} --run {running} --run {queued}",
        )
        r = run_cli(capsys, "run", spec, "--out", out, "--no-fit-check")  # its plan warns first (2 sizes)
        assert r.code == 2 and "Traceback" not in r.stderr and all(w in r.stderr.splitlines()[-1] for w in words)
        assert sd.plan.read_bytes() == plan_before and len(sd.all_run_dirs()) == 2  # nothing written
    # once they ended (here: the lock let go, the job cancelled), the same plan goes through
    record_job(sd, queued, cancelled=True, job_id=str(os.getpid()))
    again = _plan(capsys, spec, out)
    assert sorted(again["orphans"]) == sorted([running, queued]) and len(again["new"]) == 2


def test_planning_again_over_a_damaged_jobs_json_does_not_drop_runs_it_cannot_see(tmp_path, capsys, tiny_jsonl_corpus):
    """With jobs.json damaged (a hand edit, a full disk), a queued job shows as planned: the plan that dropped the
    queued run went through in silence, and no command of the study would show or cancel it again. Now a plan that
    drops a run not ended is refused while jobs.json cannot be read, naming it; nothing is written."""
    spec, out = write_study(tmp_path / "s.yaml", tiny_jsonl_corpus), tmp_path / "S"
    first = _plan(capsys, spec, out)
    queued = first["runs"][0]["run_id"]
    sd = layout.StudyDir(out)
    record_job(sd, queued, cancelled=False, job_id=str(os.getpid()))
    sd.jobs.write_text('{"runs": {')  # torn
    _edit(spec, lr_max=0.01)
    plan_before = sd.plan.read_bytes()
    one_line(
        run_cli(capsys, "plan", spec, "--out", out, "--no-fit-check"),
        f"cannot plan {out} again: {sd.jobs} is damaged (not JSON",
        "are queued or running",
        queued,
        "check that none is alive (squeue, ps), remove it and plan again",
    )
    assert sd.plan.read_bytes() == plan_before and len(sd.all_run_dirs()) == 2
    sd.jobs.unlink()  # as the message says, once no job is alive
    assert sorted(_plan(capsys, spec, out)["orphans"]) == sorted(r["run_id"] for r in first["runs"])


def test_a_run_records_the_preparation_of_the_corpus_it_trained_on(tmp_path):
    """result.json says which preparation of the corpus a run trained on (the cache key, the tokenizer's hash and
    the token counts): what tells runs apart when the corpus changes in place under a growing study."""
    import dataclasses
    import hashlib
    import json
    from types import SimpleNamespace

    from ladder.model.training.inputs import _identity
    from tests.model.training.tiny_runs import make_run, make_spec, tiny_data, train

    tok = tmp_path / "tokenizer.json"
    tok.write_text('{"model": {}}')
    prepared = SimpleNamespace(key="ab" * 8, tokenizer_file=tok, train_tokens=41_985, val_tokens=4_669)
    identity = _identity(prepared)
    assert identity == {
        "key": "ab" * 8,
        "tokenizer_sha256": hashlib.sha256(tok.read_bytes()).hexdigest(),
        "train_tokens": 41_985,
        "val_tokens": 4_669,
    }
    run = make_run(tmp_path / "runs", make_spec(steps=4))
    result = train(run, dataset=dataclasses.replace(tiny_data(), identity=identity), device="cpu")
    assert result["status"] == "done" and result["data"] == identity
    assert json.loads((run / "result.json").read_text())["data"] == identity


def _two_preparations(study: Path) -> list[Path]:
    """The done runs of ``study``, the last one trained on another preparation of the corpus (result.json's
    ``data``) than the others."""
    import json

    runs = sorted(p for p in (study / "runs").iterdir() if (p / "result.json").is_file())
    for i, rd in enumerate(runs):
        result = json.loads((rd / "result.json").read_text())
        late = i == len(runs) - 1
        result["data"] = {
            "key": "b" * 16 if late else "a" * 16,
            "tokenizer_sha256": ("e68ea9b81499" if late else "9d73f1b7da59") + "0" * 52,
            "train_tokens": 55_721 if late else 41_985,
            "val_tokens": 4_669,
        }
        (rd / "result.json").write_text(json.dumps(result))
    return runs


def test_runs_trained_on_a_corpus_changed_in_place_are_not_fitted_as_one_ladder_without_a_word(study, capsys):
    """A study trained, then documents added to its corpus folder (same path, so the same run ids) and a size
    added: the new run trained on a new tokenizer and other tokens, and `ladder collect` and `ladder fit` fitted
    its loss with the others' as one ladder, without a word. Now both say which runs trained on which data, and
    fit.json (so the report) holds it."""
    import json

    runs = _two_preparations(study)
    words = ("2 different preparations of the corpus", "tokenizer e68ea9b81499", runs[-1].name, "--out NEW")
    r = run_cli(capsys, "collect", study)
    assert r.code == 0 and all(w in r.stderr for w in words), r.stderr
    r = run_cli(capsys, "fit", study)
    assert r.code == 0 and all(w in r.stderr for w in words), r.stderr
    assert any(all(w in x for w in words) for x in json.loads((study / "fit.json").read_text())["warnings"])


def test_status_counts_the_runs_of_earlier_plans_that_an_edit_left_out(tmp_path, capsys, tiny_jsonl_corpus):
    """Runs trained, then lr_max edited and the study planned again into its folder: `ladder status S` showed the
    new plan alone ("4 runs: 4 planned; 0 of ... FLOPs spent"), and the finished runs and the compute they spent
    left the books without a word. Now a line under the totals (and `earlier_plans` in --json) counts them by
    state, says they are neither collected nor fitted, and how to take them back."""
    from ladder.plan.planner import read_plan
    from tests.fake_runs import finish

    spec, out = write_study(tmp_path / "s.yaml", tiny_jsonl_corpus), tmp_path / "S"
    _plan(capsys, spec, out)
    sd = layout.StudyDir(out)
    finish(sd, read_plan(out)[1][0])
    r = run_cli(capsys, "status", out, "--json")
    assert r.code == 0 and r.json()["earlier_plans"] == {}
    _edit(spec, lr_max=0.01)
    assert len(_plan(capsys, spec, out)["orphans"]) == 2
    r = run_cli(capsys, "status", out, "--json")
    assert r.code == 0 and r.json()["earlier_plans"] == {"done": 1, "planned": 1}
    assert r.json()["totals"]["runs"] == 2  # the current plan's runs, as collect and fit count them
    r = run_cli(capsys, "status", out)
    line = r.stdout.strip().splitlines()[-1]
    assert r.code == 0 and "earlier plans: 2 more run directories" in line, r.stdout
    assert "(1 done, 1 planned)" in line and "neither collected nor fitted" in line


def test_a_study_renamed_in_its_file_is_told_how_to_carry_on_with_its_runs(tmp_path, capsys, tiny_jsonl_corpus):
    """The study file's name changed ('micro' -> 'micro v2') after its runs trained, then `ladder plan s.yaml
    --out S`: "S holds study 'micro', not 'micro v2': choose another --out directory", which trains every run
    again in a new folder. Now the refusal says the file plans runs of S and that keeping the old name carries on
    with them; a study that shares no run with the folder is told only to choose another folder."""
    spec, out = write_study(tmp_path / "s.yaml", tiny_jsonl_corpus), tmp_path / "S"
    _plan(capsys, spec, out)
    write_study(spec, tiny_jsonl_corpus, name="micro v2")
    runs = sorted(p.name for p in (out / "runs").iterdir())
    line = one_line(
        run_cli(capsys, "plan", spec, "--out", out, "--no-fit-check", "--json"),
        "holds study 'micro', not 'micro v2'",
        "plans 2 of its runs",
        "keep name: 'micro' in the study file",
        "choose another --out directory",
    )
    assert sorted(p.name for p in (out / "runs").iterdir()) == runs
    write_study(spec, tiny_jsonl_corpus, name="other", sizes=("5K",))
    line = one_line(run_cli(capsys, "plan", spec, "--out", out, "--no-fit-check", "--json"), "holds study 'micro'")
    assert "keep name" not in line and "choose another --out directory" in line


def test_fit_of_a_replanned_study_with_its_hero_counts_the_runs_as_status_does(study, capsys):
    """A study with its hero planned, then replanned with another tokens_per_param (every rung new): `ladder
    status` and `ladder collect` counted 6 runs, and `ladder fit` said "none of the 5 run(s) is done (planned)"
    without saying what became of the sixth. Now fit names the hero run beside them, never fitted."""
    assert run_cli(capsys, "hero", study).code == 0
    for rd in (study / "runs").iterdir():  # the rungs as the new plan has them: not trained yet
        for name in ("result.json", "metrics.jsonl"):
            (rd / name).unlink(missing_ok=True)
    r = run_cli(capsys, "collect", study, "--json")
    n = r.json()["rows"]
    line = one_line(run_cli(capsys, "fit", study), f"none of the {n - 1} run(s) is done (planned)")
    assert "besides the 1 hero run(s), which are never fitted" in line


def test_a_run_resumed_after_its_corpus_changed_in_place_is_stopped_not_finished_on_other_tokens(tmp_path):
    """A run interrupted, then documents added to the corpus folder (the same run id) and the run submitted again:
    it resumed from its checkpoint and finished on the new tokenizer's tokens, a loss of neither corpus, as if
    nothing had changed. Now it fails at once, saying what changed and how to go on; on the corpus it started
    with it resumes as before."""
    import dataclasses
    import json

    import pytest

    from ladder.errors import DataError
    from tests.model.training.tiny_runs import make_run, make_spec, tiny_data, train

    old = {"key": "a" * 16, "tokenizer_sha256": "9d73" + "0" * 60, "train_tokens": 41_985, "val_tokens": 4_669}
    new = {**old, "key": "b" * 16, "tokenizer_sha256": "e68e" + "0" * 60, "train_tokens": 55_721}
    run = make_run(tmp_path / "runs", make_spec(steps=8, checkpoint_interval=2, eval_interval=4))
    data = tiny_data()
    assert train(run, dataset=dataclasses.replace(data, identity=old), device="cpu", stop_after_steps=4)["status"]
    with pytest.raises(DataError, match="changed since its checkpoint was written") as exc:
        train(run, dataset=dataclasses.replace(data, identity=new), device="cpu")
    assert "tokenizer_sha256 9d73" in str(exc.value) and "--retry-failed" in str(exc.value)
    failed = json.loads((run / "result.json").read_text())
    assert failed["status"] == "failed" and "changed since its checkpoint" in failed["reason"]
    done = train(run, dataset=dataclasses.replace(data, identity=old), device="cpu")
    assert done["status"] == "done" and done["restarts"] >= 1 and done["data"] == old


def test_a_branch_never_starts_from_its_trunk_on_a_corpus_changed_since(tmp_path):
    """The trunk trained (its snapshot written), then the corpus changed in place, then the branch started: it
    cooled down on other tokens than its trunk trained on. Now it fails at once, saying so."""
    import dataclasses

    import pytest

    from ladder.errors import DataError
    from ladder.plan.planner import expand, write_plan
    from ladder.studies.spec import parse_study
    from tests.model.training.tiny_runs import tiny_data, train

    spec = parse_study(
        {
            "name": "branches",
            "data": {"seq_len": 32, "validation_tokens": 256},
            "model": {"vocab_size": 128, "head_dim": 16, "ffn_multiple": 8, "aspect_ratio": 16},
            "ladder": {"sizes": ["4K"], "tokens_per_param": 2.0, "budgets": [0.5, 1]},
            "training": {"batch_tokens": 256, "eval_tokens": 256, "lr_max": 0.02, "schedule": {"kind": "wsd"}},
            "hero": {"params": "1M"},
            "sanity_check": False,
        }
    )
    plan = expand(spec)
    write_plan(plan, tmp_path)
    trunk, branch = sorted(plan.runs, key=lambda r: r.trunk is not None)
    old = {"key": "a" * 16, "tokenizer_sha256": "9d73" + "0" * 60, "train_tokens": 41_985, "val_tokens": 4_669}
    new = {**old, "tokenizer_sha256": "e68e" + "0" * 60}
    data = tiny_data(128)
    runs = tmp_path / "runs"
    assert train(runs / trunk.run_id, dataset=dataclasses.replace(data, identity=old))["status"] == "done"
    with pytest.raises(DataError, match="changed since its trunk's snapshot was written"):
        train(runs / branch.run_id, dataset=dataclasses.replace(data, identity=new))
    assert train(runs / branch.run_id, dataset=dataclasses.replace(data, identity=old))["status"] == "done"


def test_a_score_of_the_old_hero_is_no_check_of_a_hero_moved_in_the_study_file(study, capsys):
    """Frozen and scored against the hero, then hero.params edited in S/study.yaml (1M -> 2M) and `ladder fit S`:
    the fit called the new hero's forecast (2M x 20M, never trained) "a prediction, checked against the hero run:
    actual 1.600", from the score of the old hero, and the report led with "Forecast loss (prediction)". Now the
    moved hero's forecast is a projection, in the fit and in the report alike."""
    r = run_cli(capsys, "forecast", "freeze", study)
    assert r.code == 0, r.stderr
    frozen = run_cli(capsys, "forecast", "show", study, "--json").json()
    loss = frozen["forecasts"][0]["hero"]["loss"]
    assert run_cli(capsys, "forecast", "score", study, "--loss", f"{loss:.4f}").code == 0
    r = run_cli(capsys, "fit", study)
    assert r.code == 0 and "checked against the hero run" in r.stdout  # the frozen hero: checked

    spec = yaml.safe_load((study / "study.yaml").read_text())
    spec["hero"]["params"] = 2 * float(spec["hero"]["params"])
    (study / "study.yaml").write_text(yaml.safe_dump(spec))
    r = run_cli(capsys, "fit", study)
    hero_line = next(x for x in r.stdout.splitlines() if x.startswith("hero "))
    assert "a projection" in hero_line and "checked against the hero run" not in hero_line, hero_line
    assert run_cli(capsys, "report", study, "--format", "html").code == 0
    html = (study / "report" / "report.html").read_text()
    assert "Forecast loss (projection)" in html and "Forecast loss (prediction)" not in html


def test_ladder_run_says_so_too_when_runs_trained_on_a_corpus_changed_in_place(study, monkeypatch):
    """`ladder run S` (plan, train, collect, fit, report in one) fitted runs trained on two preparations of the
    corpus as one ladder without a word, where `ladder collect` and `ladder fit` now say so. Now it says so too,
    and its fit.json holds it."""
    import json
    from types import SimpleNamespace

    import ladder.pipeline
    import ladder.reports.render

    runs = _two_preparations(study)
    monkeypatch.setattr(ladder.pipeline, "prepare", lambda s, **kw: SimpleNamespace(
        train_tokens=1, val_tokens=1, root="(no data prepared in this test)"))  # fmt: skip
    monkeypatch.setattr(ladder.reports.render, "render_report", lambda path, **kw: {})
    lines: list[str] = []
    outcome = ladder.pipeline.run_study(study, log=lines.append, skip_sanity=True)  # what `ladder run S` runs
    assert outcome.fit is not None
    said = [x for x in lines if "different preparations of the corpus" in x]
    assert said and said[0].startswith("warning: ") and runs[-1].name in said[0], lines
    assert any("different preparations" in w for w in json.loads((study / "fit.json").read_text())["warnings"])


def test_planning_an_edited_study_says_why_its_runs_are_new_and_what_becomes_of_the_old(
    tmp_path, capsys, tiny_jsonl_corpus
):
    """lr_max edited after a run finished, then `ladder plan s.yaml --out S`: "2 new runs, 0 already planned, 2 run
    directories of earlier plans kept", with no word of why every run is new, that one of the kept ones had
    trained, or that it will not be fitted. Now the plan says what differs (lr 0.02 -> 0.01), how many of the
    kept runs are done, and that they are neither collected nor fitted while the new runs train from their
    start."""
    from ladder.plan.planner import read_plan
    from tests.fake_runs import finish

    spec, out = write_study(tmp_path / "s.yaml", tiny_jsonl_corpus), tmp_path / "S"
    _plan(capsys, spec, out)
    finish(layout.StudyDir(out), read_plan(out)[1][0])
    _edit(spec, lr_max=0.01)
    r = run_cli(capsys, "plan", spec, "--out", out, "--no-fit-check")
    line = next(x for x in r.stdout.splitlines() if x.startswith("wrote "))
    for words in ("2 run directories of earlier plans kept", "1 of them done", "lr 0.02 -> 0.01", "not collected"):
        assert words in line, line
    assert "the new runs train from their start" in line
    again = _plan(capsys, spec, out)  # planned already: nothing new to train, the kept runs still said
    assert again["new"] == [] and "lr 0.02 -> 0.01" in again["earlier"] and "new runs" not in again["earlier"]


def test_ladder_run_of_an_edited_study_says_why_its_runs_train_again(study, monkeypatch):
    """`ladder run S` after lr_max was edited in S/study.yaml logged "plan: S (6 new runs, 0 already planned)" and
    trained every run again, without a word of the six done ones it left out, or why. Now its plan line says so,
    as `ladder plan` does."""
    from types import SimpleNamespace

    import ladder.jobs.submit
    import ladder.pipeline
    from ladder.errors import StateError

    spec = yaml.safe_load((study / "study.yaml").read_text())
    spec["training"]["lr_max"] = spec["training"]["lr_max"] / 2
    (study / "study.yaml").write_text(yaml.safe_dump(spec))
    monkeypatch.setattr(ladder.pipeline, "prepare", lambda s, **kw: SimpleNamespace(
        train_tokens=1, val_tokens=1, root="(no data prepared in this test)"))  # fmt: skip
    monkeypatch.setattr(ladder.jobs.submit, "submit", lambda *a, **kw: SimpleNamespace(submitted=[], skipped=[]))
    lines: list[str] = []
    try:  # nothing trains here: the run stops at the unfinished runs, after its plan line
        ladder.pipeline.run_study(study, log=lines.append, skip_sanity=True)
    except StateError:
        pass
    plan_line = next(x for x in lines if x.startswith("plan: "))
    assert "run directories of earlier plans kept" in plan_line and "of them done" in plan_line, plan_line
    assert "lr " in plan_line and "not collected or fitted" in plan_line


def test_a_study_given_budgets_says_its_schedule_changed_not_that_its_sizes_are_gone(
    tmp_path, capsys, tiny_jsonl_corpus
):
    """Budgets and a wsd schedule added to a trained study: the plan said the kept runs differ in "a size, budget,
    seed or variant the study file no longer plans" (a budget axis is a new label), of sizes it still plans. Now
    a kept run is compared with this plan's run of its variant, size and seed: "schedule.kind 'cosine' -> 'wsd'"."""
    spec, out = write_study(tmp_path / "s.yaml", tiny_jsonl_corpus), tmp_path / "S"
    _plan(capsys, spec, out)
    write_study(spec, tiny_jsonl_corpus, budgets=(0.5, 1), schedule={"kind": "wsd"})
    earlier = _plan(capsys, spec, out)["earlier"]
    assert "schedule.kind 'cosine' -> 'wsd'" in earlier and "no longer plans" not in earlier, earlier


def test_moving_the_hero_says_the_old_hero_still_trains_with_submit(study, capsys):
    """`ladder hero S`, then the hero moved (`ladder hero S --params 600K`, or hero.params edited in the study
    file): "planned: S/runs/<new>; train it with `ladder submit S`", and that submit trained the old hero too,
    the larger share of the study's compute, without a word. Now hero names the old hero still planned and the
    `--run` that trains the new one alone."""
    assert run_cli(capsys, "hero", study).code == 0
    old = next(p.name for p in (study / "runs").iterdir() if '"role": "hero"' in (p / "spec.json").read_text())
    r = run_cli(capsys, "hero", study, "--params", "600K", "--keep")  # by default the old hero is replaced
    assert r.code == 0, r.stderr
    new = next(
        p.name
        for p in (study / "runs").iterdir()
        if '"role": "hero"' in (p / "spec.json").read_text() and p.name != old
    )
    note = next(x for x in r.stdout.splitlines() if x.startswith("note: the plan also holds"))
    assert old in note and f"ladder submit {study} --run {new}" in note, note
