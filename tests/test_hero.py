"""`ladder hero`: the fit's recommendation as a planned run of the study (role hero, in plan.json, never fitted),
kept when the study is planned again; and, end to end on a micro-study, a hero that trains through the debug and
the local executors and is scored."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ladder import layout
from ladder.model.config import RunSpec
from tests.cli_helpers import one_line, run_cli
from tests.hero_fixture import hero_spec, refresh, train


def _plan_ids(study: Path) -> list[str]:
    return json.loads((study / layout.PLAN).read_text())["runs"]


def test_hero_plans_the_recommendation_as_a_run_of_the_study(study, capsys):
    rec = json.loads((study / layout.FIT).read_text())["recommendation"]
    before = _plan_ids(study)
    r = run_cli(capsys, "hero", study, "--dry-run", "--json")
    assert r.code == 0, r.stderr
    dry = r.json()
    assert dry["state"] == "dry run" and _plan_ids(study) == before
    assert not (study / "runs" / dry["run_id"]).exists()  # --dry-run writes nothing

    r = run_cli(capsys, "hero", study, "--json")
    assert r.code == 0, r.stderr
    got = r.json()
    assert got["run_id"] == dry["run_id"] and got["state"] == "new"
    assert _plan_ids(study) == [*before, got["run_id"]]
    spec = RunSpec.model_validate_json((study / "runs" / got["run_id"] / "spec.json").read_text())
    assert spec.role == "hero" and spec.run_id == spec.content_hash()
    s = spec.shape
    assert (s.d_model, s.n_layers, s.n_heads, s.ffn_dim, s.tied) == (
        rec["d_model"],
        rec["n_layers"],
        rec["n_heads"],
        rec["ffn_dim"],
        rec["tied"],
    )
    assert (spec.tokens, spec.batch_tokens, spec.lr, spec.steps) == (
        rec["tokens"],
        rec["batch_tokens"],
        rec["lr"],
        rec["steps"],
    )
    assert spec.schedule.kind == rec["schedule"]["kind"] and spec.warmup_steps == rec["warmup_steps"]
    assert "lr" in got["sources"] and "batch_tokens" in got["sources"]
    assert run_cli(capsys, "hero", study, "--json").json()["state"] == "planned already"
    assert _plan_ids(study) == [*before, got["run_id"]]

    # planning the study again keeps the hero; collect books it with its role; the fits never use it
    from ladder.plan.planner import expand, read_plan, write_plan

    written = write_plan(expand(read_plan(study)[0]), study)
    assert written.heroes == [got["run_id"]] and got["run_id"] not in written.orphans
    assert _plan_ids(study)[-1] == got["run_id"]
    train(layout.StudyDir(study), spec, 3.0)
    refresh(study, fit=True)
    import pandas as pd

    runs = pd.read_parquet(study / layout.RESULTS_PARQUET)
    assert runs.set_index("run_id").loc[got["run_id"], "role"] == "hero"
    fit = json.loads((study / layout.FIT).read_text())
    [ex] = [e for e in fit["excluded"] if e["run"] == got["run_id"]]
    assert ex["reason"] == "the hero run (scored by `ladder forecast score`, not fitted)" and ex["status"] == "done"
    used = {r["run"] for f in fit["loss"]["forms"].values() for r in f["residuals"]}
    assert got["run_id"] not in used
    assert fit["meta"]["n_hero_runs"] == 1 and fit["meta"]["n_runs"] == len(runs) - 1
    assert fit["hero"]["ladder_flops"] == pytest.approx(runs[runs["role"] == "rung"]["flops_spent"].sum())


def test_hero_at_another_size_says_where_lr_and_batch_come_from(study, capsys):
    r = run_cli(capsys, "hero", study, "--params", "250K", "--json")
    assert r.code == 0, r.stderr
    got = r.json()
    assert got["overrides"]["params"] == 250_000 and got["overrides"]["tokens"] == 20 * 250_000
    assert abs(got["run"]["params"] / 250_000 - 1) < 0.1 and abs(got["run"]["tokens"] / 5e6 - 1) < 0.02
    assert got["sources"]["lr"].startswith("study rule") and "no LR law" in got["sources"]["lr"]
    assert any("tokens_per_param" in n for n in got["notes"])
    # the forecast is a refit with the hero here: `fit --predict 250K:5M` may differ, and hero says why
    assert any("fitted again with the hero at 250K params x 5M tokens" in n for n in got["notes"]), got["notes"]
    r = run_cli(capsys, "hero", study, "--params", "250K", "--tokens", "2M", "--dry-run", "--json")
    assert abs(r.json()["run"]["tokens"] / 2e6 - 1) < 0.02
    said = run_cli(capsys, "hero", study, "--params", "250K", "--tokens", "2M", "--dry-run").stdout
    rows = {
        line.split("│")[1].strip(): line.split("│")[2].strip() for line in said.splitlines() if line.count("│") >= 3
    }
    # sizes as the report writes them (issue 28: "397.7K / 8.0M", not 397,680)
    assert re.fullmatch(r"\d\.\d+M \(.*/param\)", rows["tokens"]) and rows["batch"].endswith("K tokens"), rows
    assert "," not in rows["params (non_embedding)"] and rows["params (non_embedding)"].endswith("K"), rows


def test_the_heros_batch_and_lr_read_as_fit_and_the_report_give_them(study, capsys):
    """User retrial (issue 28): one batch and one LR, three spellings: `ladder fit` said "batch 14,368 tokens",
    `ladder hero` "14.37K tokens" and the report "14.4K tokens"; fit and the report said "peak LR 0.02", hero
    "2.000e-02". Each now gives the batch in the CLI's count digits and the LR in fit's."""
    import io

    from rich.console import Console

    from ladder.model.config import format_count
    from ladder.reports.render.builder import Builder
    from ladder.reports.render.sections.headline import headline
    from ladder.reports.render.study import load_study
    from ladder.reports.summary import print_fit
    from tests.reports.texts import texts

    ctx = Builder(load_study(study))
    rec = ctx.fit_json.recommendation
    buf = io.StringIO()
    print_fit(ctx.fit_json, Console(file=buf, width=400, color_system=None))
    terminal, head = buf.getvalue(), texts(headline(ctx))
    said = run_cli(capsys, "hero", study, "--dry-run").stdout
    batch, lr = f"{format_count(rec.batch_tokens)} tokens", f"{rec.lr:.3g}"
    assert rec.batch_tokens >= 1000 and f"{rec.batch_tokens:,}" != format_count(rec.batch_tokens)
    for where, text in (("fit", terminal), ("report", head), ("hero", said)):
        assert batch in text, (where, batch, text)
    assert re.search(rf"peak LR\s+{re.escape(lr)}\b", terminal) and re.search(rf"peak LR\W+{re.escape(lr)}\b", said)
    assert f"Peak learning rate {lr}" in head or f"Peak learning rate: {lr}" in head, head


def test_a_trained_hero_is_not_sent_to_submit_again(study, capsys):
    """User retrial (issue 28): after the hero trained and was scored, `ladder status` said "hero ... done" and
    `forecast show` gave its score, while `ladder hero` said "run ... (planned already)" and "already planned: ...;
    train it with `ladder submit ...`". It now says the run trained already and points to its score."""
    from ladder.books.collect import collect, write_collected

    run_cli(capsys, "hero", study)
    spec = hero_spec(study)
    train(layout.StudyDir(study), spec, 3.0)
    write_collected(study, collect(study))
    r = run_cli(capsys, "hero", study)
    assert r.code == 0, r.stderr
    out = " ".join(r.stdout.split())
    assert f"{spec.run_id} (trained already)" in out, out
    assert "train it with" not in out and "ladder submit" not in out, out
    assert f"trained already: {study / 'runs' / spec.run_id}; score it with `ladder forecast score" in out, out
    assert run_cli(capsys, "hero", study, "--json").json()["state"] == "trained already"


def test_a_hero_with_the_science_of_a_rung_is_refused(study, capsys):
    from ladder.plan.planner import read_plan

    top = max(read_plan(study)[1], key=lambda s: s.params)
    before = _plan_ids(study)
    r = run_cli(capsys, "hero", study, "--params", str(top.params), "--tokens", str(top.tokens))
    assert r.code == 2 and f"rung {top.run_id}" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert _plan_ids(study) == before


def test_a_hero_no_law_forecasts_is_planned_with_a_one_line_warning_saying_why(study, capsys):
    """Issue 28: `hero S --tokens 16M` (40 tokens/param on a ladder of 20) was planned silently, with no forecast
    to score it against."""
    for args in (("--dry-run",), ("--dry-run", "--json"), ()):
        r = run_cli(capsys, "hero", study, "--tokens", "16M", *args)
        assert r.code == 0, r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("warning: no forecast of this hero's loss: "), r.stderr
        assert "no fitted law form can forecast" in lines[0] and "40 tokens/param" in lines[0]
        assert "nothing to check it against" in lines[0]
    assert "no fitted law form" in r.stderr  # planned all the same
    got = run_cli(capsys, "hero", study, "--tokens", "16M", "--json").json()
    assert got["forecast"]["loss"] is None and "no fitted law form can forecast" in got["forecast"]["reason"]
    r = run_cli(capsys, "hero", study, "--dry-run")  # the recommendation has a forecast: no warning
    assert r.code == 0 and "no forecast" not in r.stderr and "the fit forecasts" in r.stdout


def test_hero_errors_exit_2_naming_the_flag(study, tmp_path, capsys):
    before = _plan_ids(study)
    for args, words in [(("--params", "lots"), "--params 'lots'"), (("--tokens", "-5"), "--tokens"), ((), None)]:
        target = study if words else tmp_path / "nowhere"
        r = run_cli(capsys, "hero", target, *args)
        assert r.code == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert (words or "nowhere") in r.stderr
    (study / layout.FIT).unlink()
    r = run_cli(capsys, "hero", study)
    assert r.code == 2 and "ladder fit" in r.stderr
    assert _plan_ids(study) == before


@pytest.mark.slow
def test_a_planned_hero_trains_through_debug_and_local_executors_and_is_scored(tmp_path, tiny_jsonl_corpus, capsys):
    from tests.micro import write_study

    spec = write_study(
        tmp_path / "s.yaml",
        tiny_jsonl_corpus,
        name="hero",
        sizes=("4K", "6K", "8K", "11K"),
        tokens_per_param=5,  # 80 to 220 steps a rung, and a hero of 270: enough for a fit, a forecast and a score
        evals_per_run=5,
    )
    study = tmp_path / "hero"
    assert run_cli(capsys, "plan", spec, "--out", study).code == 0
    assert run_cli(capsys, "submit", study, "--executor", "debug").code == 0
    assert run_cli(capsys, "collect", study).code == 0
    r = run_cli(capsys, "fit", study, "--bootstrap", "30")
    assert r.code == 0, r.stderr
    assert run_cli(capsys, "forecast", "freeze", study, "--predict", "14K:70K").code == 0

    # one hero through the local executor (worker processes), another through the debug executor
    local = run_cli(capsys, "hero", study, "--params", "14K", "--json").json()
    assert run_cli(capsys, "submit", study, "--executor", "local", "--run", local["run_id"]).code == 0
    from tests.micro import result, wait_for

    wait_for(lambda: (study / "runs" / local["run_id"] / "result.json").is_file(), 600, "the local hero to finish")
    debug = run_cli(capsys, "hero", study, "--params", "16K", "--json").json()
    assert debug["run_id"] != local["run_id"]
    assert run_cli(capsys, "submit", study, "--executor", "debug", "--run", debug["run_id"]).code == 0
    for hero in (local, debug):
        assert result(study, hero["run_id"])["status"] == "done"
    assert run_cli(capsys, "collect", study).code == 0

    r = run_cli(capsys, "forecast", "score", study, "--run", local["run_id"], "--json")
    assert r.code == 0, r.stderr
    [s] = r.json()["scores"]
    actual = result(study, local["run_id"])["final_eval_loss"]
    assert s["final"] and s["actual"] == pytest.approx(actual) and s["point"] == "14K:70K"
    assert s["error_pct"] == pytest.approx(100 * (s["forecast"] - actual) / actual)
    assert s["frozen_before_training"] is True
    r = run_cli(capsys, "forecast", "score", study, "--run", debug["run_id"], "--json")
    one_line(r, "nothing scored: forecast 1: no frozen point")  # 16K is no frozen point: not scored against another
    assert run_cli(capsys, "report", study, "--format", "html").code == 0
    html = (study / "report" / "report.html").read_text()
    assert '<section id="forecast"' in html and "Forecast vs actual" in html
    assert hero_spec(study).run_id == debug["run_id"]


def test_compile_auto_compiles_a_hero_long_enough_to_repay_it(study, monkeypatch):
    import yaml

    from ladder.forecast.hero_run import plan_hero_run

    monkeypatch.setattr("ladder.plan.compiling.cxx_compiler", lambda: "g++")
    data = yaml.safe_load((study / layout.STUDY).read_text())
    data.setdefault("training", {})["compile"] = "auto"
    (study / layout.STUDY).write_text(yaml.safe_dump(data))
    short = plan_hero_run(study, dry_run=True)
    assert short.est_wall_s < 440 and not short.spec.compile  # this hero trains for seconds: eager
    monkeypatch.setattr("ladder.forecast.hero_run.estimate_wall_s", lambda spec, hw: 3600.0)
    long = plan_hero_run(study, dry_run=True)
    assert long.spec.run_id == short.spec.run_id and long.spec.compile  # an hour of training repays the compile


@pytest.mark.parametrize(
    ("flags", "params_from", "tokens_from"),
    [
        (("--tokens", "16M"), "the fit's hero (400K)", "--tokens 16M"),
        (("--params", "250K"), "--params 250K", "study: ladder.tokens_per_param 20 x --params"),
        (("--params", "250K", "--tokens", "2M"), "--params 250K", "--tokens 2M"),
    ],
)
def test_the_sources_of_a_moved_hero_say_which_flag_gave_each_size(study, capsys, flags, params_from, tokens_from):
    """Retrial 7: `hero --tokens 16M` said params came from '--params 400K' (never given) and tokens from
    'study: hero.tokens' (the study has none)."""
    r = run_cli(capsys, "hero", study, *flags, "--dry-run", "--json")
    assert r.code == 0, r.stderr
    src = r.json()["sources"]
    assert (src["params"], src["tokens"]) == (params_from, tokens_from)


def test_a_hero_no_law_forecasts_is_not_sent_to_forecast_score(study, capsys):
    """Retrial 7: `hero S --tokens 16M` (no law forecasts it) still said 'score it with `ladder forecast score`', a
    dead end: `forecast freeze --predict` refuses that point."""
    r = run_cli(capsys, "hero", study, "--tokens", "16M")
    assert r.code == 0, r.stderr
    assert "forecast score" not in r.stdout and "forecast freeze" not in r.stdout
    assert "cannot be scored against a forecast" in r.stdout


@pytest.mark.parametrize("damage", ["deleted", "corrupt_spec"])
def test_a_damaged_hero_run_is_named_by_score_and_replanned_in_place_by_hero(study, capsys, damage):
    """Retrial 7: with the hero's run folder deleted, score said 'has no hero run: plan one with `ladder hero`',
    and `ladder hero` then refused: the hero 'trains exactly rung <its own id> of the ladder'."""
    import shutil

    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    first = run_cli(capsys, "hero", study, "--json").json()
    rd = layout.StudyDir(study).run(first["run_id"])
    if damage == "deleted":
        shutil.rmtree(rd.path)
    else:
        rd.spec.write_text("{not json")
    one_line(
        run_cli(capsys, "forecast", "score", study), "hero run is damaged", f"`ladder hero {study}`", first["run_id"]
    )
    r = run_cli(capsys, "hero", study)
    assert r.code == 0, r.stderr
    assert "replanned" in r.stdout and "trains exactly rung" not in r.stderr
    assert _plan_ids(study).count(first["run_id"]) == 1
    assert RunSpec.model_validate_json(rd.spec.read_text()).role == "hero"
    train(layout.StudyDir(study), hero_spec(study), 3.5)
    assert run_cli(capsys, "forecast", "score", study).code == 0


@pytest.mark.parametrize("args", [("--params", "1e400"), ("--params", "250K", "--tokens", "1e400")])
def test_a_count_beyond_any_float_is_named_as_given(study, capsys, args):
    """Issue 28: `hero --params 1e400` said "--params -: beyond what this family builds" (inf shown as "-")."""
    before = _plan_ids(study)
    line = one_line(run_cli(capsys, "hero", study, *args), f"{args[-2]} '1e400'", "a positive count")
    assert " -:" not in line and _plan_ids(study) == before


@pytest.mark.parametrize("args", [("--params", "1e-3"), ("--params", "250K", "--tokens", "0.5")])
def test_a_count_below_one_is_named_as_given(study, capsys, args):
    """Fuzzing `hero`: `--params 1e-3` said "target size must be positive, got 0", naming neither the option nor
    the value given."""
    before = _plan_ids(study)
    one_line(run_cli(capsys, "hero", study, *args), f"{args[-2]} '{args[-1]}': less than one", "a positive count")
    assert _plan_ids(study) == before


@pytest.mark.parametrize(
    ("size", "words"),
    [("1.2B", ("x the largest model fitted", "beyond what the rollout tested")), ("3K", ("above ln(V)",))],
)
def test_a_hero_moved_far_from_the_ladder_is_warned_about_as_fit_warns(study, capsys, size, words):
    """Issue 28 (user trial): `hero --params 1.2B` on a 141K ladder printed a forecast of 2.06 with no word that
    it is thousands of times past what the rollout tested; `--params 3K` forecast 9.19 nats/token, worse than
    a uniform guess over the 256-token vocabulary, without a word."""
    r = run_cli(capsys, "hero", study, "--params", size, "--dry-run")
    assert r.code == 0, r.stderr
    warnings = [line for line in r.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1 and all(w in warnings[0] for w in words), r.stderr
    assert "e+" not in warnings[0]


def test_hero_says_at_which_point_the_fit_forecast_and_how_far_the_planned_run_lies(study, capsys):
    """The table showed params 397.7K while "the fit forecasts 3.492" was the law at the study's 400K x 8M: two
    meanings of the hero, side by side, with nothing to tell them apart."""
    r = run_cli(capsys, "hero", study, "--dry-run")
    got = run_cli(capsys, "hero", study, "--dry-run", "--json").json()
    fc = got["forecast"]
    assert (fc["params"], fc["tokens"]) == (400_000, 8_000_000), fc
    assert "the fit forecasts" in r.stdout and "at 400K params x 8M tokens" in r.stdout, r.stdout
    spec_params = got["run"]["params"]
    assert spec_params != 400_000  # the nearest shape misses the requested size: that is what must be said
    pct = 100 * (spec_params / 400_000 - 1)
    assert f"({pct:+.2g}% params)" in " ".join(r.stdout.split()), r.stdout


def test_fit_and_hero_warn_when_the_study_file_no_longer_describes_the_planned_ladder(study, capsys):
    """S/study.yaml edited after the ladder trained (data.seq_len 64 -> 32): fit and hero read the edited file in
    silence, and the hero would train at seq_len 32 beside a ladder trained at 64. An edit of the hero section
    alone keeps every run, and says nothing."""
    path = study / "study.yaml"
    original = path.read_text()
    path.write_text(original.replace("hero:\n  params: 400000", "hero:\n  params: 300000"))
    assert original != path.read_text()
    assert "edited since" not in run_cli(capsys, "hero", study, "--dry-run").stderr
    path.write_text(original.replace("seq_len: 64", "seq_len: 32"))
    assert original != path.read_text()
    said = " ".join(run_cli(capsys, "fit", study, "--bootstrap", "10").stderr.split())
    assert "study.yaml was edited since it was planned" in said and f"ladder plan {path} --out {study}" in said, said
    assert "edited since it was planned" in run_cli(capsys, "hero", study, "--dry-run").stderr
