"""Scoring a frozen forecast: the error, the interval and z against a final loss, and, while the hero trains, the
forecast of its final loss from its partial curve (synthetic curves whose final loss is known)."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from ladder import layout
from ladder.forecast.score import compare, in_context_score
from ladder.reports.fits.scoring import partial_forecast, z_score
from ladder.reports.fits.study.forecast_json import InContext, Interval
from tests.cli_helpers import one_line, run_cli
from tests.hero_fixture import hero_spec, law_loss, make_ladder, refresh, shape_r, train


@pytest.fixture(scope="module")
def planned(tmp_path_factory) -> Path:
    """A fitted ladder with a frozen forecast and a hero run planned (not trained)."""
    from ladder.forecast.frozen import freeze
    from ladder.forecast.hero_run import plan_hero_run

    root = make_ladder(tmp_path_factory.mktemp("ladder") / "study")
    freeze(root, note="before the hero")
    plan_hero_run(root)
    refresh(root, fit=False)
    return root


@pytest.fixture
def study(planned, tmp_path) -> Path:
    return Path(shutil.copytree(planned, tmp_path / "study"))


def test_error_inside_and_z_of_a_final_loss():
    point = Interval(loss=2.0, lo=1.8, hi=2.2, level=0.9)
    s = compare(point, 2.1)
    assert s["error_pct"] == pytest.approx(100 * (2.0 - 2.1) / 2.1)
    assert s["inside"] is True
    assert s["z"] == pytest.approx(math.log(2.0 / 2.1) / (math.log(2.2 / 1.8) / 2 / 1.645))
    assert compare(point, 2.3)["inside"] is False and compare(point, 1.7)["z"] > 1.645
    assert z_score(2.0, 2.0, 1.8, 2.2) == 0


@pytest.mark.parametrize("actual", [0.07, 1.7, 1.95, 2.05, 2.3, 57.0])
def test_the_error_and_z_have_one_sign(actual):
    """Both say forecast minus actual: a forecast far below the hero was once 'error -96.51%, z +354.62'."""
    s = compare(Interval(loss=2.0, lo=1.8, hi=2.2, level=0.9), actual)
    assert np.sign(s["error_pct"]) == np.sign(s["z"]) != 0


def test_a_score_line_shows_the_error_and_z_with_one_sign(study, capsys):
    for loss, sign in (("2.9", "+"), ("5.5", "-")):
        r = run_cli(capsys, "forecast", "score", study, "--loss", loss)
        assert r.code == 0, r.stderr
        error, z = re.search(r"error ([+-])[\d.]+%, OUTSIDE, z ([+-])", r.stdout).groups()
        assert error == z == sign, r.stdout


def test_the_hero_loss_by_kind_is_scored_against_the_frozen_point_it_matches():
    record = {
        "in_context": {
            "repeat_share": 0.3,
            "points": [
                {
                    "label": "hero",
                    "params": 8e5,
                    "tokens": 16e6,
                    "novel": {"loss": 2.3, "lo": 2.1, "hi": 2.5},
                    "repeats": {"loss": 1.7, "lo": 1.5, "hi": 1.9},
                },
                {
                    "label": "400K:8M",
                    "params": 4e5,
                    "tokens": 8e6,
                    "novel": {"loss": 2.55, "lo": 2.37, "hi": 2.76},
                    "repeats": {"loss": 1.98, "lo": 1.80, "hi": 2.19},
                },
            ],
        }
    }
    split = {"repeats": 1.158, "novel": 2.495}
    frozen = InContext.model_validate(record["in_context"])
    got = in_context_score(frozen, split, 3.98e5, 8.0e6)  # the check run: the prediction, not the hero
    assert got["point"] == "400K:8M" and got["actual"] == split
    assert got["novel"]["error_pct"] == pytest.approx(100 * (2.55 - 2.495) / 2.495) and got["novel"]["inside"]
    assert got["repeats"]["error_pct"] == pytest.approx(100 * (1.98 - 1.158) / 1.158) and not got["repeats"]["inside"]
    assert in_context_score(frozen, split, 1.6e6, 32e6) == {"actual": split}  # no frozen point there
    assert in_context_score(None, split, 4e5, 8e6) == {"actual": split}  # a freeze from before the split


def test_a_partial_curve_forecasts_the_final_loss():
    """References of several sizes with one curve shape; the hero at 40% of its tokens has a known final."""
    rng = np.random.default_rng(0)
    f = np.linspace(0.1, 1.0, 10)
    refs = []
    for i, final in enumerate((3.1, 2.9, 2.7)):
        wiggle = np.exp(rng.normal(0, 0.002, len(f)))
        wiggle[-1] = 1.0
        refs.append(
            {
                "run_id": f"r{i}",
                "params": 1e5 * (i + 1),
                "f": f,
                "log_r": np.log(np.array([shape_r(x) for x in f]) * wiggle),
            }
        )
    final = 2.5
    curve = [(x, final * shape_r(x)) for x in (0.1, 0.2, 0.3, 0.4)]
    p = partial_forecast(curve, refs)
    assert p["available"] and p["fraction"] == 0.4 and len(p["references"]) == 3
    assert p["final_forecast"] == pytest.approx(final, rel=5e-3)
    assert p["lo"] < final < p["hi"] and p["hi"] / p["lo"] < 1.05
    # past the references' curves there is nothing to interpolate: no forecast, a reason
    late = partial_forecast([(0.05, 3.0)], refs)
    assert late["available"] is False and "5%" in late["reason"]


def test_a_training_hero_gets_an_early_warning_from_its_curve(study, capsys):
    hero = hero_spec(study)
    final = law_loss(hero.params, hero.tokens)
    train(layout.StudyDir(study), hero, final, upto=0.5)  # still training: half its eval points
    r = run_cli(capsys, "forecast", "score", study, "--json")
    assert r.code == 0, r.stderr
    [s] = r.json()["scores"]
    p = s["partial"]
    assert s["final"] is False and p["available"]
    assert 0.3 < p["fraction"] <= 0.5
    assert p["final_forecast"] == pytest.approx(final, rel=5e-3)  # the references' curves have the hero's shape
    frozen = json.loads((study / "forecast.json").read_text())["hero"]
    assert p["vs_frozen"]["forecast"] == frozen["loss"]
    assert p["vs_frozen"]["error_pct"] == pytest.approx(
        100 * (frozen["loss"] - p["final_forecast"]) / p["final_forecast"]
    )
    r = run_cli(capsys, "forecast", "show", study, "--json")
    assert r.json()["forecasts"][0]["kind"] == "projection"  # a partial score checks nothing yet

    train(layout.StudyDir(study), hero, final)  # the hero finishes
    r = run_cli(capsys, "forecast", "score", study, "--json")
    [s] = r.json()["scores"]
    assert s["final"] is True and s["actual"] == pytest.approx(final) and s["source"]["run_id"] == hero.run_id
    assert s["error_pct"] == pytest.approx(100 * (frozen["loss"] - final) / final)
    assert s["inside"] == (frozen["lo"] <= final <= frozen["hi"])
    assert [x["final"] for x in json.loads((study / "forecast.json").read_text())["scores"]] == [False, True]


def test_a_curve_file_that_stops_early(study, tmp_path, capsys):
    hero = hero_spec(study)
    final = 3.3
    steps = [hero.steps * k // 10 for k in range(1, 7)]
    text = "step,loss\n" + "".join(f"{s},{final * shape_r(s / hero.steps)}\n" for s in steps)
    (tmp_path / "curve.csv").write_text(text)
    r = run_cli(capsys, "forecast", "score", study, "--curve", tmp_path / "curve.csv", "--json")
    assert r.code == 0, r.stderr
    [s] = r.json()["scores"]
    assert s["final"] is False and s["partial"]["final_forecast"] == pytest.approx(final, rel=5e-3)
    # the whole curve: its last point is the final loss
    lines = [
        {"kind": "eval", "tokens": t, "eval_loss": final * shape_r(t / hero.tokens)}
        for t in (hero.tokens / 2, hero.tokens)
    ]
    (tmp_path / "curve.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    [s] = run_cli(capsys, "forecast", "score", study, "--curve", tmp_path / "curve.jsonl", "--json").json()["scores"]
    assert s["final"] is True and s["actual"] == pytest.approx(final)


def test_a_freeze_without_a_forecast_at_the_hero_run_is_not_scored(study, capsys):
    """A hero planned elsewhere than the frozen point is not scored against the wrong forecast; when no freeze is
    scored, that is one line saying why for each (it once exited 0 with nothing on stdout), and nothing written."""
    assert run_cli(capsys, "forecast", "freeze", study).code == 0  # a second freeze, at the same hero
    assert run_cli(capsys, "hero", study, "--params", "250K").code == 0
    hero = hero_spec(study)
    train(layout.StudyDir(study), hero, 3.7)
    before = {p.name: p.read_bytes() for p in study.glob("forecast*.json")}
    for extra in ((), ("--json",)):
        r = run_cli(capsys, "forecast", "score", study, *extra)
        line = one_line(r, "nothing scored", "forecast 1: no frozen point", "forecast 2: no frozen point")
        assert "--predict 250.4K:5M" in line and "nothing written" in line
        assert r.stdout == ""
    assert {p.name: p.read_bytes() for p in study.glob("forecast*.json")} == before
    # a freeze at the new hero's point is scored; the old ones say on stderr why they are not
    assert run_cli(capsys, "forecast", "freeze", study, "--predict", "250.4K:5M").code == 0
    r = run_cli(capsys, "forecast", "score", study, "--json")
    assert r.code == 0, r.stderr
    assert [s["number"] for s in r.json()["scores"]] == [3] and set(r.json()["not_scored"]) == {"1", "2"}
    r = run_cli(capsys, "forecast", "score", study)
    assert r.code == 0 and "forecast 3" in r.stdout
    assert r.stderr.count("not scored: forecast") == 2, r.stderr


@pytest.mark.parametrize("loss", ['"abc"', "Infinity", "-3"])
def test_a_hero_whose_result_is_corrupt_is_not_scored(study, capsys, loss):
    hero = hero_spec(study)
    train(layout.StudyDir(study), hero, law_loss(hero.params, hero.tokens))
    rd = layout.StudyDir(study).run(hero.run_id)
    text = rd.result.read_text(encoding="utf-8")
    rd.result.write_text(re.sub(r'"final_eval_loss": [^,}]+', f'"final_eval_loss": {loss}', text), encoding="utf-8")
    before = (study / "forecast.json").read_bytes()
    r = run_cli(capsys, "forecast", "score", study)
    assert r.code == 2 and r.stderr.count("\n") == 1, r.stderr
    assert hero.run_id in r.stderr and "result.json is corrupt" in r.stderr and "final_eval_loss" in r.stderr
    assert (study / "forecast.json").read_bytes() == before


def _listing(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_curve_past_the_hero_tokens_is_refused_naming_the_first_row_past_them(study, tmp_path, capsys):
    """Issue 28: a curve running on past the hero's planned tokens was scored as final (its last point, of a
    longer run); it is refused, naming the first row past the end, and nothing is written."""
    hero = hero_spec(study)
    before = _listing(study)
    rows = [(hero.tokens // 2, 3.6), (hero.tokens, 3.4), (hero.tokens * 9 // 8, 3.35), (hero.tokens * 2, 3.3)]
    (tmp_path / "long.csv").write_text("tokens,loss\n" + "".join(f"{t},{loss}\n" for t, loss in rows))
    line = one_line(
        run_cli(capsys, "forecast", "score", study, "--curve", tmp_path / "long.csv"),
        "line 4 is at",
        f"past the hero run {hero.run_id}'s planned",
        "nothing was scored",
    )
    assert "line 5" not in line
    steps = [(hero.steps // 2, 3.6), (hero.steps + 1, 3.3)]
    (tmp_path / "long.jsonl").write_text("".join(json.dumps({"step": s, "loss": x}) + "\n" for s, x in steps))
    one_line(
        run_cli(capsys, "forecast", "score", study, "--curve", tmp_path / "long.jsonl"),
        "record 2 is at",
        f"planned {hero.steps:,} steps",
    )
    assert _listing(study) == before
    # up to the planned tokens exactly: its last point is the final loss
    (tmp_path / "done.csv").write_text("tokens,loss\n" + "".join(f"{t},{x}\n" for t, x in rows[:2]))
    [s] = run_cli(capsys, "forecast", "score", study, "--curve", tmp_path / "done.csv", "--json").json()["scores"]
    assert s["final"] is True and s["actual"] == 3.4


def test_a_curve_of_a_hero_trained_elsewhere_may_not_run_far_past_the_frozen_tokens(fitted, tmp_path, capsys):
    """Without a hero run, the frozen hero's tokens are the end, within the 10% a frozen point matches in."""
    study = Path(shutil.copytree(fitted, tmp_path / "study"))
    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    tokens = json.loads((study / "forecast.json").read_text())["hero"]["tokens"]
    before = _listing(study)
    (tmp_path / "long.csv").write_text(f"tokens,loss\n{tokens / 2:.0f},3.6\n{tokens * 1.2:.0f},3.3\n")
    one_line(
        run_cli(capsys, "forecast", "score", study, "--curve", tmp_path / "long.csv"),
        "line 3 is at",
        "past forecast 1's hero at 8M tokens by more than 10%",
    )
    assert _listing(study) == before
    (tmp_path / "near.csv").write_text(f"tokens,loss\n{tokens / 2:.0f},3.6\n{tokens * 1.0004:.0f},3.3\n")
    [s] = run_cli(capsys, "forecast", "score", study, "--curve", tmp_path / "near.csv", "--json").json()["scores"]
    assert s["final"] is True and s["actual"] == 3.3  # a few steps' rounding past the frozen tokens is the end


def test_two_losses_at_one_point_of_a_curve_are_refused_naming_both_lines(study, tmp_path, capsys):
    """Issue 28: the curve kept one of them silently."""
    hero = hero_spec(study)
    before = _listing(study)
    half = hero.tokens // 2
    (tmp_path / "dup.csv").write_text(f"tokens,loss\n{half // 2},4.0\n{half},3.6\n{half},3.7\n")
    one_line(
        run_cli(capsys, "forecast", "score", study, "--curve", tmp_path / "dup.csv"),
        f"line 3 and line 4 both give tokens {half}",
        "losses 3.6 and 3.7",
    )
    (tmp_path / "dup.jsonl").write_text(
        "".join(json.dumps({"kind": "eval", "step": s, "eval_loss": x}) + "\n" for s, x in [(5, 4.0), (5, 4.5)])
    )
    one_line(run_cli(capsys, "forecast", "score", study, "--curve", tmp_path / "dup.jsonl"), "record 1 and record 2")
    assert _listing(study) == before
    # the same point written twice (a resumed run's log) is one point
    (tmp_path / "twice.csv").write_text(f"tokens,loss\n{half // 2},4.0\n{half},3.6\n{half},3.6\n")
    r = run_cli(capsys, "forecast", "score", study, "--curve", tmp_path / "twice.csv")
    assert r.code == 0, r.stderr


def test_a_curve_just_short_of_the_end_is_not_shown_at_100_percent(study, tmp_path, capsys):
    """Issue 28: a curve at 99.96% of the hero's tokens was shown "partial at 100%"."""
    hero = hero_spec(study)
    final = 3.3
    ts = [hero.tokens // 4, hero.tokens // 2, hero.tokens - hero.batch_tokens // 4]
    (tmp_path / "short.csv").write_text(
        "tokens,loss\n" + "".join(f"{t},{final * shape_r(t / hero.tokens)}\n" for t in ts)
    )
    r = run_cli(capsys, "forecast", "score", study, "--curve", tmp_path / "short.csv")
    assert r.code == 0, r.stderr
    assert re.search(r"partial at 99\.\d+%", r.stdout) and "100%" not in r.stdout + r.stderr, r.stdout
    from ladder.reports.fits.scoring import pct_of_tokens

    assert [pct_of_tokens(f) for f in (0.5, 0.994, 0.9996, 0.999999, 1.0, 1.2)] == [
        "50%",
        "99%",
        "99.96%",
        "99.9999%",
        "100%",
        "120%",
    ]


BIG = 10**400  # an integer of 401 digits: no float holds it


@pytest.mark.parametrize(
    ("name", "text", "where", "why"),
    [
        ("tokens.csv", f"tokens,loss\n1000,3.5\n{BIG},3.4\n", "line 3, column tokens", "too large to be a"),
        ("loss.csv", f"tokens,loss\n1000,{BIG}\n", "line 2, column loss", "above 100 nats/token"),
        ("tokens.jsonl", f'{{"tokens": 1000, "loss": 3.5}}\n{{"tokens": {BIG}, "loss": 3.4}}\n', "record 2", "large"),
        ("loss.jsonl", f'{{"tokens": 1000, "loss": -{BIG}}}\n', "record 1, column loss", "not a positive number"),
    ],
    ids=["tokens.csv", "loss.csv", "tokens.jsonl", "negative-loss.jsonl"],
)
def test_an_integer_too_large_for_a_float_in_a_curve_is_one_line(study, tmp_path, capsys, name, text, where, why):
    """Issue 28: 10**400 written out in a cell was an OverflowError traceback."""
    before = _listing(study)
    (tmp_path / name).write_text(text)
    line = one_line(run_cli(capsys, "forecast", "score", study, "--curve", tmp_path / name), where, why, "characters)")
    assert len(line) < 400 and "nothing was scored" in line
    assert _listing(study) == before


def test_a_curve_path_that_is_no_file_says_what_it_is(study, tmp_path, capsys):
    """Issue 28: '' was reported as ".", and /dev/null, a directory or /proc/self as "no such file"."""
    before = _listing(study)
    cases = [
        ("", "--curve '': an empty path"),
        ("/dev/null", "--curve /dev/null: not a regular file (a character device)"),
        (str(tmp_path), f"--curve {tmp_path}: a directory"),
        (".", "--curve .: a directory"),
        (str(tmp_path / "nope.csv"), "nope.csv: no such file"),
    ]
    if Path("/proc/self").is_dir():
        cases.append(("/proc/self", "--curve /proc/self: a directory"))
    for given, words in cases:
        one_line(run_cli(capsys, "forecast", "score", study, "--curve", given), words)
    assert _listing(study) == before


def test_a_curve_whose_only_point_forecasts_nothing_is_not_scored(study, tmp_path, capsys):
    """Retrial 7: a curve with one point at 1 token appended a 'partial: no finished rung ... through 0%' score."""
    (tmp_path / "one.csv").write_text("tokens,loss\n1,5.0\n")
    before = _listing(study)
    one_line(
        run_cli(capsys, "forecast", "score", study, "--curve", tmp_path / "one.csv"),
        "nothing scored",
        "forecast 1: the curve forecasts no final loss yet",
    )
    assert _listing(study) == before


def test_a_loss_worse_than_a_uniform_guess_over_the_vocabulary_is_refused(study, capsys):
    """Retrial 7: `--loss 50` on a study with a small vocabulary was stored as 'error -93%, OUTSIDE'."""
    before = _listing(study)
    one_line(run_cli(capsys, "forecast", "score", study, "--loss", "50"), "--loss 50", "ln(V) = 5.545", "256-token")
    assert _listing(study) == before


def test_a_seed_replicate_never_displaces_the_hero(study, capsys):
    """Retrial 7: after `hero --seed 1`, score took the replicate as 'the hero' (and refused while it had not
    trained, although the seed-0 hero had a curve)."""
    from ladder.model.config import RunSpec

    sd = layout.StudyDir(study)
    hero = hero_spec(study)
    rep = run_cli(capsys, "hero", study, "--seed", "1", "--json").json()
    train(sd, hero, 3.4)
    r = run_cli(capsys, "forecast", "score", study, "--json")
    assert r.code == 0, r.stderr
    [s] = r.json()["scores"]
    assert s["source"]["run_id"] == hero.run_id and s["actual"] == 3.4 and "replicates" not in s
    train(sd, RunSpec.model_validate_json(sd.run(rep["run_id"]).spec.read_text()), 3.6)
    [s] = run_cli(capsys, "forecast", "score", study, "--json").json()["scores"]
    assert s["source"]["run_id"] == hero.run_id and s["actual"] == 3.4 and s["replicates"]["n"] == 2


def test_every_done_hero_with_a_frozen_point_is_scored(tmp_path, capsys):
    """Retrial 7: with two heroes (the default and an 800K one frozen with --predict), only the last planned was
    scored."""
    from ladder.forecast.frozen import freeze
    from ladder.forecast.hero_run import plan_hero_run
    from ladder.plan.planner import read_plan

    root = make_ladder(tmp_path / "study")
    freeze(root, predict=["800K:16M"])
    plan_hero_run(root)
    plan_hero_run(root, params=800e3, keep=True)
    sd = layout.StudyDir(root)
    heroes = [s for s in read_plan(root)[1] if s.role == "hero"]
    assert len(heroes) == 2
    for h, loss in zip(heroes, (3.45, 3.2)):
        train(sd, h, loss)
    r = run_cli(capsys, "forecast", "score", root, "--json")
    assert r.code == 0, r.stderr
    got = {s["source"]["run_id"]: (s["point"], s["actual"]) for s in r.json()["scores"]}
    assert got == {heroes[0].run_id: ("hero", 3.45), heroes[1].run_id: ("800K:16M", 3.2)}


def test_a_training_hero_whose_curve_holds_an_impossible_loss_is_not_scored(study, capsys):
    """Issue 28: a hero's metrics.jsonl with eval_loss 1e300 was scored "heads for 7.969e+299, -100% off";
    --curve refuses the same point."""
    hero = hero_spec(study)
    train(layout.StudyDir(study), hero, law_loss(hero.params, hero.tokens), upto=0.5)
    rd = layout.StudyDir(study).run(hero.run_id)
    lines = rd.metrics.read_text(encoding="utf-8").splitlines()
    last = max(i for i, line in enumerate(lines) if '"eval"' in line)
    lines[last] = re.sub(r'"eval_loss": [^,}]+', '"eval_loss": 1e300', lines[last])
    rd.metrics.write_text("\n".join(lines) + "\n", encoding="utf-8")
    before = (study / "forecast.json").read_bytes()
    line = one_line(run_cli(capsys, "forecast", "score", study), hero.run_id, f"metrics.jsonl line {last + 1}")
    assert "eval_loss 1e+300" in line and "above 100 nats/token" in line and "--loss" in line
    assert (study / "forecast.json").read_bytes() == before


@pytest.mark.parametrize(
    ("name", "text", "words"),
    [
        ("bool.csv", "tokens,eval_loss\n1000,True\n", ("line 2, column eval_loss: True", "not a positive")),
        ("bool.jsonl", '{"tokens": 1000, "eval_loss": true}\n', ("record 1, column eval_loss: True", "not a positive")),
        ("twice.csv", "tokens,eval_loss,eval_loss\n1000,3.5,3.6\n", ("column eval_loss twice",)),
    ],
    ids=["true-in-csv", "true-in-jsonl", "a-column-twice"],
)
def test_a_curve_with_a_truth_value_for_a_loss_or_a_column_twice_is_refused(study, tmp_path, capsys, name, text, words):
    """Issue 28 (user trial): a loss of True was scored as an actual loss of 1 (error +249%), and a header naming
    eval_loss twice scored the first silently (pandas renamed the second eval_loss.1)."""
    before = _listing(study)
    (tmp_path / name).write_text(text)
    line = one_line(run_cli(capsys, "forecast", "score", study, "--curve", tmp_path / name), *words)
    assert "nothing was scored" in line and _listing(study) == before


@pytest.mark.parametrize(("given", "shown"), [("1e400", "--loss 1e400:"), ("abc", "--loss abc:"), ("", "--loss '':")])
def test_a_loss_that_is_no_finite_number_is_named_as_typed(study, capsys, given, shown):
    """Issue 28 (user trial): `--loss 1e400` was refused as "--loss inf", and `--loss abc` with typer's "Input
    should be a valid number"."""
    before = _listing(study)
    one_line(run_cli(capsys, "forecast", "score", study, "--loss", given), shown, "a positive loss in nats/token")
    assert _listing(study) == before


def test_a_curve_header_is_read_without_case_or_padding_and_a_wrong_separator_is_hinted(study, tmp_path, capsys):
    """Issue 28 (user trial): " Tokens , Eval_Loss " was "needs a tokens column ... it has  Tokens ,  Eval_Loss ",
    and a ';'-separated CSV was refused without a word about its separator."""
    hero = hero_spec(study)
    (tmp_path / "padded.csv").write_text(f" Tokens , Eval_Loss \n{hero.tokens},3.5\n")
    r = run_cli(capsys, "forecast", "score", study, "--curve", tmp_path / "padded.csv", "--json")
    assert r.code == 0, r.stderr
    assert [s["actual"] for s in r.json()["scores"]] == [3.5]
    (tmp_path / "semi.csv").write_text(f"tokens;eval_loss\n{hero.tokens};3.5\n")
    one_line(run_cli(capsys, "forecast", "score", study, "--curve", tmp_path / "semi.csv"), "separated by another")
    (tmp_path / "twice.csv").write_text(f"tokens,eval_loss,Eval_Loss\n{hero.tokens},3.5,3.6\n")
    one_line(run_cli(capsys, "forecast", "score", study, "--curve", tmp_path / "twice.csv"), "eval_loss twice")


def test_scoring_again_on_the_same_results_appends_no_second_copy(study, capsys):
    """`forecast score` run twice on unchanged results appended the same score twice: `forecast show` then counted
    2 scores of one observation."""
    from ladder.forecast.frozen import read_frozen

    first = run_cli(capsys, "forecast", "score", study, "--loss", "3.1")
    assert first.code == 0, first.stderr
    again = run_cli(capsys, "forecast", "score", study, "--loss", "3.1")
    assert again.code == 0, again.stderr
    assert "the same as its last score: not appended again" in " ".join(again.stdout.split()), again.stdout
    assert [len(f.scores) for f in read_frozen(study)] == [1]
    other = run_cli(capsys, "forecast", "score", study, "--loss", "3.2")  # a new observation is appended
    assert other.code == 0 and "not appended" not in other.stdout, other.stdout
    assert [len(f.scores) for f in read_frozen(study)] == [2]


def test_a_curve_gives_its_tokens_as_counts_as_every_other_file_may(tmp_path):
    """A curve whose tokens column reads 4M, 8M was refused ("4M is not a positive number"), where a study file,
    --predict and fit --runs all read counts."""
    from ladder.errors import SpecError
    from ladder.forecast.frozen import read_curve_points

    good = tmp_path / "c.csv"
    good.write_text("tokens,eval_loss\n4M,3.5\n8.5M,3.3\n16000000,3.2\n")
    assert [p[1] for p in read_curve_points(good)] == [4e6, 8.5e6, 16e6]
    bad = tmp_path / "b.csv"
    bad.write_text("tokens,eval_loss\n4Q,3.5\n")
    with pytest.raises(SpecError, match="'4Q' is not a positive number"):
        read_curve_points(bad)


def test_the_curves_that_forecast_a_hero_include_branches_at_its_tokens_per_param(tmp_path):
    """Re-trial 17a: a hero at 10 tokens/param scored at 75% of its tokens heads for 3.214 [3.157, 3.272]; it ended
    at 3.063. Its references were the rungs' trunks at 20 tokens/param (a branch was never read: "its curve starts
    at its trunk's step", though a branch copies its trunk's records up to its start and its curve is whole), whose
    cooldown comes at another point of their run. The branches at the hero's tokens/param are its schedule."""
    from ladder.forecast.score import reference_curves
    from ladder.plan.planner import expand, write_plan
    from ladder.studies.spec import parse_study
    from tests.hero_fixture import study_dict

    training = {"lr_max": 0.02, "batch_min_sequences": 8, "evals_per_run": 10, "schedule": {"kind": "wsd"}}
    plan = expand(parse_study(study_dict(budgets=[0.5, 1, 2], training=training)))
    write_plan(plan, tmp_path)
    sd = layout.StudyDir(tmp_path)
    rungs = [s for s in plan.runs if s.role == "rung"]
    for spec in rungs:
        train(sd, spec, law_loss(spec.params, spec.tokens))
    branches = [s for s in rungs if s.trunk is not None]
    assert branches, "a wsd study with budgets plans cooldown branches"
    ratio = branches[0].tokens / branches[0].params
    refs = reference_curves(sd, rungs, ratio, "wsd")
    assert refs and {r["run_id"] for r in refs} <= {s.run_id for s in branches}, refs
    assert all(abs(r["ratio"] / ratio - 1) < 0.1 and r["f"][0] < 0.2 for r in refs), refs  # whole curves


def test_a_curve_line_with_an_unquoted_comma_is_one_line_naming_it(tmp_path):
    """Fuzzing forecast score --curve: a tokens cell written 1,000 said "cannot read it (ParserError: Error
    tokenizing data. C error: Expected 2 fields in line 5, saw 3" and, on a second line of its own, ")"."""
    from ladder.errors import SpecError
    from ladder.forecast.frozen import read_curve_points

    path = tmp_path / "c.csv"
    path.write_text("tokens,eval_loss\n125440,4.7\n250880,4.4\n1,000,4.1\n")
    with pytest.raises(SpecError) as err:
        read_curve_points(path)
    words = str(err.value)
    assert "\n" not in words and "line 4 has 3 fields where the header names 2 columns" in words, words
    assert "ParserError" not in words and "double quotes" in words
