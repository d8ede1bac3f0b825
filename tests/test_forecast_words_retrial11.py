"""Re-trial 11c: `ladder fit --runs FILE --predict` on a user's own ladder. Every forecast states its distance
in parameters, tokens and compute (6ND), how far the rollout tested and its error there, and the track record
on published ladders at that distance (issue 26 item 5), alike in the terminal and in --json (issue 28)."""

from __future__ import annotations

import json
import random
from pathlib import Path

from tests.cli_helpers import run_cli


def _ladder(path: Path) -> Path:
    """Five sizes x three budgets of a Chinchilla-like law, with a little noise: enough sizes for a rollout."""
    rng = random.Random(1)
    text = "params,tokens,loss\n"
    for n in (1e6, 2e6, 4e6, 8e6, 16e6):
        for r in (10, 20, 40):
            loss = (1.7 + 400 / n**0.34 + 410 / (n * r) ** 0.28) * (1 + rng.gauss(0, 0.003))
            text += f"{n:g},{n * r:g},{loss:.5f}\n"
    path.write_text(text)
    return path


def test_every_prediction_says_its_distance_the_rollouts_reach_and_the_track_record(tmp_path, capsys):
    """retrial11c: the predictions of a runs table (no hero) were the only forecasts, and none said how far the
    rollout tested, its error there, or the published ladders' record at that distance: the table gave the
    multiple in params alone ("1.88x"), and a warning "beyond what the rollout tested" with no tested distance."""
    from ladder.reports.fits.loss import track_record

    runs = str(_ladder(tmp_path / "runs.csv"))
    args = ("fit", "--runs", runs, "--bootstrap", "20", "--predict", "3e7:6e8", "--predict", "1e9:2e10")
    r = run_cli(capsys, *args)
    assert r.code == 0, r.stderr
    j = run_cli(capsys, *args, "--json")
    assert j.code == 0, j.stderr
    fit = json.loads(j.stdout)
    near, far = fit["predictions"]
    out = " ".join(r.stdout.split())
    # the distance in all three axes, 6ND compute recomputed here: 3e7 x 6e8 over 16M x 640M
    assert abs(near["compute_x"] - 6 * 3e7 * 6e8 / (6 * 16e6 * 640e6)) < 1e-9
    assert "1.88x params, 0.938x tokens, 1.76x compute (6ND)" in out, r.stdout
    assert "62.5x params, 31.2x tokens, 1,953x compute (6ND)" in out, r.stdout
    tested = fit["loss"]["reach"]["tested"]
    assert f"the rollout tested up to {tested['params_x']:.3g}x params" in out, r.stdout
    for p in (near, far):
        assert p["track_record"] == track_record.at(p["compute_x"]), p.get("track_record")
        assert p["track_record"]["band"] == track_record.band_of(p["compute_x"])
        assert track_record.sentence(p["track_record"]) in out, (p["label"], r.stdout)
    # beyond what was tested: the warning says how far the rollout tested and its error there
    warn = next(w for w in fit["warnings"] if w.startswith("prediction 1e9:2e10"))
    assert "beyond what the rollout tested" in warn and "the rollout tested up to" in warn, warn
    assert "erred by a median of" in warn and "the hero" not in warn, warn
    assert not any(w.startswith("prediction 3e7:6e8") for w in fit["warnings"]), fit["warnings"]


def _isoflop(path: Path) -> Path:
    """Four isoFLOP budgets of seven sizes each: the sizes far from each budget's optimum are left out of the law."""
    text = "params,tokens,loss\n"
    for c in (1e14, 4e14, 1.6e15, 6.4e15):
        for k in range(7):
            n = 2e5 * 2**k
            text += f"{n:g},{c / (6 * n):.6g},{1.7 + 400 / n**0.34 + 410 / (c / (6 * n)) ** 0.28:.5f}\n"
    path.write_text(text)
    return path


def test_runs_left_out_of_the_law_are_said_where_the_law_is(tmp_path, capsys):
    """retrial11c: a table of 28 runs printed "loss laws (15 runs, ...)" and nothing said why 13 were dropped; the
    forecasts' distances (from the runs fitted) then said "2.06x the ladder's largest model" of a size the table has
    (Porian et al.'s RefinedWeb, whose 455M runs lie far from their budgets' optimum)."""
    runs = str(_isoflop(tmp_path / "iso.csv"))
    args = ("fit", "--runs", runs, "--bootstrap", "10", "--predict", "2e7:1e9")
    fit = json.loads(run_cli(capsys, *args, "--json").stdout)
    left = fit["loss"]["left_out"]
    assert len(left["runs"]) == 13 and fit["loss"]["n_runs"] == 15, left
    r = run_cli(capsys, *args)
    assert r.code == 0, r.stderr
    out = " ".join(r.stdout.split())
    assert f"left out of the loss laws: 13 of the 28 runs, {left['why']}" in out, r.stdout


def test_the_report_says_the_runs_left_out_of_the_law_in_fits_words(tmp_path):
    """The report's scaling section gave the law's run count and no word of the runs it left out either."""
    import io

    from rich.console import Console

    from ladder.reports.fits.study.fit_json import read_fit_json
    from ladder.reports.render.builder import Builder
    from ladder.reports.render.sections.scaling import scaling
    from ladder.reports.render.study import load_study
    from ladder.reports.summary import print_fit
    from tests.hero_fixture import make_ladder
    from tests.reports.texts import texts

    root = make_ladder(tmp_path / "s", n_boot=10)
    fit = json.loads((root / "fit.json").read_text())
    why = "more than 5% above their isoFLOP budget's lowest loss"
    fit["loss"]["left_out"] = {"runs": ["r1", "r2"], "why": why, "below_span": {"runs": [], "why": None}}
    (root / "fit.json").write_text(json.dumps(fit))
    said = f"left out of the loss laws: 2 of the {fit['loss']['n_runs'] + 2} runs, {why}"
    buf = io.StringIO()
    print_fit(read_fit_json(root / "fit.json"), Console(file=buf, width=400, color_system=None))
    assert said in buf.getvalue(), buf.getvalue()
    assert f"L{said[1:]}" in texts(scaling(Builder(load_study(root))))


def test_columns_mapping_one_name_keeps_the_columns_already_named(tmp_path, capsys):
    """retrial11c: a table "N,tokens,loss" with --columns params=N said "the runs table lacks column(s) tokens,
    loss ... it has params": a mapping dropped every column it did not name, those the fit reads by name too
    (Epoch's Chinchilla extraction has a "loss" column beside "Model Size")."""
    path = _ladder(tmp_path / "runs.csv")
    path.write_text(path.read_text().replace("params,", "N,", 1))
    r = run_cli(capsys, "fit", "--runs", str(path), "--columns", "params=N", "--bootstrap", "5", "--json")
    assert r.code == 0, r.stderr
    assert json.loads(r.stdout)["loss"]["n_runs"] == 15
    # a mapped name wins over a column of that name: loss=val_loss reads val_loss, not the file's loss
    text = path.read_text().splitlines()
    path.write_text("\n".join([text[0] + ",val_loss"] + [f"{x},{float(x.split(',')[2]) * 2}" for x in text[1:]]))
    r = run_cli(capsys, "fit", "--runs", str(path), "--columns", "params=N,loss=val_loss", "--bootstrap", "5", "--json")
    assert r.code == 0, r.stderr
    e = json.loads(r.stdout)["loss"]["forms"]["overtrain"]["params"]["E"]
    assert e > 2.5, e  # twice the loss of a law whose E is 1.7


def test_an_axis_passed_by_less_than_its_digits_says_the_digits_that_differ():
    """retrial11c: "beyond what the rollout tested (...; compute: the hero at 3.98x, the rollout tested up to
    3.98x; ...)": 3.982x against 3.975x, one and the same number as printed."""
    from ladder.reports.fits.study.study_hero import tested_words

    dist = {
        "params_x": 2.82,
        "tokens_x": 1.41,
        "compute_x": 3.9821704783875056,
        "tested": {"params_x": 1.4097, "tokens_x": 2.041, "compute_x": 3.9753079909373374},
        "beyond_tested_axes": ["params", "compute"],
    }
    words = tested_words(dist)
    assert "compute: the hero at 3.982x, the rollout tested up to 3.975x" in words, words
    assert "params: the hero at 2.82x, the rollout tested up to 1.41x" in words, words


def test_the_heros_distance_is_said_in_every_axis_by_hero_and_the_report(tmp_path):
    """retrial11c: fit said "2.82x the ladder's largest model in parameters, 1.41x in tokens, 3.98x in compute";
    the report's headline left the tokens out, and `ladder hero`'s caveat gave the parameters alone, in digits of
    its own (1,234,567x where fit writes 1.23e6x)."""
    from ladder.forecast.hero_run import _caveat
    from ladder.reports.fits.study.fit_json import Hero
    from ladder.reports.render.builder import Builder
    from ladder.reports.render.sections.headline import headline
    from ladder.reports.render.study import load_study
    from tests.hero_fixture import make_ladder
    from tests.reports.texts import texts

    root = make_ladder(tmp_path / "s", n_boot=10)
    ext = json.loads((root / "fit.json").read_text())["hero"]["extrapolation"]
    said = texts(headline(Builder(load_study(root))))
    assert f"{ext['tokens']:.3g}× in tokens" in said, said
    far = Hero(extrapolation={"params": 1234567.0, "tokens": 2.5, "compute_6nd": 3086417.5}, beyond_tested=True)
    words = _caveat(far, 512)
    assert words.startswith(
        "the hero is 1.23e6x the largest model fitted, 2.5x its most tokens and 3.09e6x its largest compute (6ND)"
    ), words


def test_a_track_record_of_one_forecast_is_not_said_as_a_median_and_a_coverage():
    """retrial11c: a forecast at 9.77e6x compute got "on 1 published ladder(s), 1 forecasts at 64x or more compute
    erred by a median of 2.9% (worst 2.9%), and their 90% intervals covered 100%": one forecast, said as a record."""
    from ladder.reports.fits.loss import track_record

    one = {**track_record.at(100.0), "n": 1, "ladders": 1, "coverage": 1.0, "median_abs_err_pct": 2.93}
    words = track_record.sentence(one)
    assert words == "on 1 published ladder, 1 forecast at 64x or more compute erred by 2.9%, inside its 90% interval"
    assert "ladder(s)" not in track_record.sentence(track_record.at(2.0))


def test_a_prediction_below_the_ladder_gives_the_ladders_smallest_as_counts(tmp_path, capsys):
    """retrial11c: "--predict 1e5:1e6: below the ladder (its smallest run has 1e+06 params and 1e+07 tokens)":
    Python's e-notation where every other line says 1M; and the fewest params and tokens need not be one run's."""
    runs = str(_ladder(tmp_path / "runs.csv"))
    r = run_cli(capsys, "fit", "--runs", runs, "--bootstrap", "5", "--predict", "1e5:1e6", "--json")
    assert r.code == 0, r.stderr
    warn = next(w for w in json.loads(r.stdout)["warnings"] if "below the ladder" in w)
    assert "e+" not in warn and "its smallest model has 1M params and its shortest run 10M tokens" in warn, warn


def test_the_count_bound_of_predict_and_runs_is_a_count_not_pythons_e_notation(tmp_path, capsys):
    """retrial11c: "--predict '1e30:1e30': params '1e30' is beyond 1e+15", and the same bound of a runs table."""
    from tests.cli_helpers import one_line

    runs = str(_ladder(tmp_path / "runs.csv"))
    line = one_line(run_cli(capsys, "fit", "--runs", runs, "--predict", "1e30:1e30"), "is beyond 1P")
    assert "e+" not in line, line
    big = tmp_path / "big.csv"
    big.write_text("params,tokens,loss\n1e16,1e9,3.0\n")
    line = one_line(run_cli(capsys, "fit", "--runs", str(big)), "params is beyond 1P")
    assert "e+" not in line, line


def test_the_rollouts_coverage_says_on_which_forecasts_it_was_measured(tmp_path, capsys):
    """retrial11c: on Li et al.'s best-LR runs, "rollout: 196 weighted forecasts, 100% inside their 90% interval"
    where 175 of the 196 were inside: the coverage (and the calibration) is of the 22 at the target's tokens/param."""
    runs = str(_ladder(tmp_path / "runs.csv"))
    args = ("fit", "--runs", runs, "--bootstrap", "20", "--predict", "3e7:6e8")
    fit = json.loads(run_cli(capsys, *args, "--json").stdout)
    cal, rows = fit["loss"]["calibration"], fit["loss"]["rollout"]["mixture"]
    judged = [r for r in rows if r["at_target_ratio"]]
    assert 0 < len(judged) < len(rows) and cal["n_judged"] == len(judged), (cal, len(judged))
    share = 100 * sum(r["inside"] for r in judged) / len(judged)
    assert abs(100 * cal["coverage"] - share) < 1e-9
    out = " ".join(run_cli(capsys, *args).stdout.split())
    assert (
        f"rollout: {len(rows)} weighted forecasts; of the {len(judged)} at the target's tokens/param, "
        f"{share:.0f}% inside their 90% interval"
    ) in out, out


def test_a_rollout_that_leans_is_warned_of_for_the_predictions_of_a_runs_table(tmp_path, capsys):
    """retrial11c: on Li et al.'s best-LR runs every rollout forecast leaned low (mean -3.6%, p 6e-6): a study's
    hero is warned that its forecast probably runs low too, the --predict points of a runs table were not."""
    import math

    path = tmp_path / "lean.csv"
    text = "params,tokens,loss\n"
    for n in (1e6, 2e6, 4e6, 8e6, 16e6, 32e6):  # the larger rungs fall ever shorter of the smaller ones' law
        for r in (10, 20, 40):
            text += (
                f"{n:g},{n * r:g},{1.7 + 400 / n**0.34 + 410 / (n * r) ** 0.28 + 0.02 * math.log2(n / 1e6) ** 2:.5f}\n"
            )
    path.write_text(text)
    fit = json.loads(
        run_cli(capsys, "fit", "--runs", str(path), "--bootstrap", "10", "--predict", "1e8:2e9", "--json").stdout
    )
    assert fit["loss"]["lean"]["direction"] == "low", fit["loss"]["lean"]
    # each prediction is warned of the lean at its own distance, which the warning names
    band = fit["predictions"][0]["distance"]["lean"]
    assert band["direction"] == "low" and 0 < band["n"] <= band["of"], band
    lean = [w for w in fit["warnings"] if "ran low" in w]
    assert len(lean) == 1 and lean[0].startswith("prediction 1e8:2e9: the rollout's forecasts at "), lean
    assert "so it probably runs low too" in lean[0] and "hero" not in lean[0], lean


def test_a_json_lines_loss_written_as_the_string_nan_is_named_by_its_line(tmp_path, capsys):
    """retrial11c: a W&B export whose diverged run has "eval/loss": "NaN" said "column loss is not numeric (Unable
    to parse string 'NaN' at position 8)": pandas' words and a 0-based row, where a CSV's NaN names its run."""
    from tests.cli_helpers import one_line

    examples = Path(__file__).resolve().parents[1] / "docs" / "examples"
    rows = [json.loads(x) for x in (examples / "wandb-runs.jsonl").read_text().splitlines()]
    rows[8]["summary"]["eval/loss"] = "NaN"
    path = tmp_path / "runs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cols = "params=config.n_params,tokens=config.tokens,loss=summary.eval/loss"
    line = one_line(run_cli(capsys, "fit", "--runs", str(path), "--columns", cols), "NaN or infinite", rows[8]["name"])
    assert "position" not in line and "Unable to parse" not in line, line


def test_the_predictions_table_says_a_runs_table_has_no_sweep_not_a_study(tmp_path, capsys):
    """retrial11c: Li et al.'s runs, with an LR sweep and no batch sweep: the predictions' B* column said "this study
    has no batch sweep" under a CSV of runs, where every section says "the runs have no ..."."""
    import io

    from rich.console import Console

    from ladder.reports.fits.study.fit_json import validate
    from ladder.reports.summary import print_fit

    runs = str(_ladder(tmp_path / "runs.csv"))
    fit = json.loads(
        run_cli(capsys, "fit", "--runs", runs, "--bootstrap", "5", "--predict", "3e7:6e8", "--json").stdout
    )
    # as Li et al.'s runs give it: an LR law, and no batch sweep
    why = "this study has no batch sweep (no rung has 3 or more batch sizes)"
    fit["predictions"][0].update(lr=1e-3, lr_ci90=[8e-4, 1.2e-3], batch_reason=why)
    buf = io.StringIO()
    print_fit(validate(fit), Console(file=buf, width=400, color_system=None))
    assert "the runs have no batch sweep" in buf.getvalue() and "this study" not in buf.getvalue(), buf.getvalue()
