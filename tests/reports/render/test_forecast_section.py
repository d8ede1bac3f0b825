"""The report's "Forecast vs actual": it opens the report once a frozen forecast is scored, with the frozen number,
the actual, the error, the interval, z and the time of the freeze, every user string escaped; the headline then
says prediction, and the scaling figure shows the hero run's real loss. Unscored, there is no such section."""

from __future__ import annotations

import html as html_lib
import json
import re
import shutil
from pathlib import Path

import pytest
from matplotlib.figure import Figure

from ladder import layout
from ladder.reports.render import render_report
from ladder.reports.render.blocks import Fig
from ladder.reports.render.report import build_sections
from tests.hero_fixture import hero_spec, law_loss, make_ladder, refresh, shape_r, train
from tests.reports.fixture_study import HOSTILE

CURVE = "<img src=x onerror=alert(1)> & curve.csv"  # a file name is a user string too (no slash in a name)


@pytest.fixture(scope="module")
def frozen(tmp_path_factory) -> Path:
    """A ladder with a hostile name, a freeze with a hostile note and a hero run that trained."""
    from ladder.forecast.frozen import freeze
    from ladder.forecast.hero_run import plan_hero_run

    root = make_ladder(tmp_path_factory.mktemp("ladder") / "study", name=f"hero {HOSTILE}")
    freeze(root, note=f"note {HOSTILE} & more")
    plan_hero_run(root)
    refresh(root, fit=False)
    return root


@pytest.fixture(scope="module")
def scored(frozen, tmp_path_factory) -> tuple[Path, dict, str]:
    """The hero scored from its run, then from a curve file with a hostile name; rendered once."""
    from ladder.forecast.score import score_study

    root = Path(shutil.copytree(frozen, tmp_path_factory.mktemp("scored") / "study"))
    hero = hero_spec(root)
    train(layout.StudyDir(root), hero, law_loss(hero.params, hero.tokens))
    refresh(root, fit=False)
    score_study(root)
    curve = root.parent / CURVE
    actual = 1.01 * law_loss(hero.params, hero.tokens)
    curve.write_text(
        "tokens,loss\n" + "".join(f"{t},{actual * shape_r(t / hero.tokens)}\n" for t in (hero.tokens / 2, hero.tokens))
    )
    score_study(root, curve=curve)
    rec = json.loads((root / "forecast.json").read_text())
    out = render_report(root)
    return root, rec, out["html"].read_text(encoding="utf-8")


def test_forecast_vs_actual_opens_the_report_with_the_right_numbers(scored):
    root, rec, html = scored
    score = rec["scores"][-1]
    assert score["final"] and score["source"]["kind"] == "curve"
    assert html.index('<section id="forecast"') < html.index('<section id="headline"')
    sec = html[html.index('<section id="forecast"') : html.index('<section id="headline"')]
    text = html_lib.unescape(re.sub(r"<[^>]+>", " ", sec))
    text = re.sub(r"\s+", " ", text)
    assert "Forecast vs actual" in text and "A prediction checked against a real run" in text
    h = rec["hero"]
    assert f"was {h['loss']:.4f} nats/token (90% interval {h['lo']:.4f} – {h['hi']:.4f})" in text
    assert f"final eval loss is {score['actual']:.4f}" in text
    assert f"{score['error_pct']:+.2f}% off it" in text
    assert f"{'inside' if score['inside'] else 'outside'} its interval (z = {score['z']:+.2f})" in text
    assert (
        f"frozen at {rec['frozen_at']} UTC" in text and f"Error (forecast − actual) {score['error_pct']:+.2f}%" in text
    )
    assert score["error_pct"] == pytest.approx(100 * (h["loss"] - score["actual"]) / score["actual"])
    assert f"note {HOSTILE} & more" in text  # the note, shown as text
    assert f"the loss curve {root.parent / CURVE}" in text
    # both earlier and latest scores are in the history table
    assert "Every frozen forecast of the study" in text and f"actual {score['actual']:.4f}" in text
    headline = html[html.index('<section id="headline"') : html.index('<section id="ladder"')]
    assert "Forecast loss (prediction)" in headline and "Checked against the hero run" in headline


def test_the_reports_z_is_the_one_forecast_score_and_show_print(scored):
    """User retrial (issue 28): `ladder forecast score` and `forecast show` said "z +0.54"; the report said
    "z = 0.54" in its sentence, "z 0.539" in its table of the score and "z 0.54" in its history. One z now, as the
    terminal gives it."""
    from ladder.cli.forecast import _score_words

    _, rec, html = scored
    score = rec["scores"][-1]
    terminal = _score_words(score)
    said = re.search(r", z ([-+]\d+\.\d\d)", terminal).group(1)
    sec = html[html.index('<section id="forecast"') : html.index('<section id="headline"')]
    text = re.sub(r"\s+", " ", html_lib.unescape(re.sub(r"<[^>]+>", " ", sec)))
    zs = re.findall(r"\bz =? ?([-+]?\d+(?:\.\d+)?)\b", text)
    assert len(zs) >= 3 and set(zs) == {said}, (zs, said, terminal)


def test_every_user_string_is_escaped(scored):
    _, _, html = scored
    assert "<script" not in html.lower() and "<img" not in html.lower()
    assert html_lib.escape(CURVE, quote=False) in html or html_lib.escape(CURVE) in html
    assert html.count(html_lib.escape(HOSTILE, quote=False)) + html.count(html_lib.escape(HOSTILE)) >= 3


def test_the_scaling_figure_shows_the_hero_runs_real_loss(scored):
    root, rec, _ = scored
    _, sections = build_sections(root)
    [fig_block] = [b for s in sections for b in s.blocks if isinstance(b, Fig) and b.spec.key == "fig-scaling"]
    fig = Figure(figsize=(9, 4))
    fig_block.spec.draw(fig)
    labels = [t.get_text() for leg in fig.legends for t in leg.get_texts()]
    assert "hero run (actual)" in labels and "hero forecast (90%)" in labels
    actual = rec["scores"][-1]["actual"]
    hero = hero_spec(root)
    for ax, x in zip(fig.axes[:2], (hero.flops, hero.params)):
        [line] = [ln for ln in ax.get_lines() if ln.get_label() == "hero run (actual)"]
        assert list(line.get_ydata()) == [pytest.approx(actual)] and list(line.get_xdata()) == [pytest.approx(x)]
    # the hero run is not drawn as a rung of the ladder: no run marker at its size but the actual's
    markers = [
        ln
        for ln in fig.axes[1].get_lines()
        if ln.get_linestyle() == "None" and ln.get_label() not in ("hero run (actual)", "hero forecast (90%)")
    ]
    assert markers and not any(x == pytest.approx(hero.params) for ln in markers for x in ln.get_xdata())


def test_no_section_and_a_projection_before_any_score(frozen, tmp_path):
    root = Path(shutil.copytree(frozen, tmp_path / "study"))
    html = render_report(root, formats="html")["html"].read_text(encoding="utf-8")
    assert '<section id="forecast"' not in html and "Forecast vs actual" not in html
    assert "Forecast loss (projection)" in html


def test_a_partial_score_is_shown_as_an_early_warning(frozen, tmp_path):
    from ladder.forecast.score import score_study

    root = Path(shutil.copytree(frozen, tmp_path / "study"))
    hero = hero_spec(root)
    train(layout.StudyDir(root), hero, 1.2 * law_loss(hero.params, hero.tokens), upto=0.5)
    [(_, s)] = score_study(root).scored
    html = render_report(root, formats="html")["html"].read_text(encoding="utf-8")
    sec = html_lib.unescape(html[html.index('<section id="forecast"') : html.index('<section id="headline"')])
    assert "The hero run is still training, so the headline stays a projection" in sec
    assert f"heads for a final loss of {s['partial']['final_forecast']:.4f}" in sec and "outside its" in sec
    assert "Forecast loss (projection)" in html


def test_a_partial_curve_given_by_hand_is_not_called_a_hero_still_training(frozen, tmp_path):
    """`forecast score --curve` of a hero trained elsewhere, its curve stopping at 50%: the report said "The hero is
    still training" in the forecast section, the headline and the rollout section, which nothing here knows (the
    run may have stopped). They now say the curve stops early."""
    from ladder.forecast.score import score_study

    root = Path(shutil.copytree(frozen, tmp_path / "study"))
    hero = hero_spec(root)
    curve = tmp_path / "elsewhere.csv"
    curve.write_text(f"tokens,eval_loss\n{hero.tokens // 2},{1.1 * law_loss(hero.params, hero.tokens):.4f}\n")
    [(_, s)] = score_study(root, curve=curve).scored
    assert not s["final"] and s["source"]["kind"] == "curve"
    html = html_lib.unescape(render_report(root, formats="html")["html"].read_text(encoding="utf-8"))
    text = " ".join(re.sub(r"<[^>]+>", " ", html).split())
    assert "still training" not in text
    stops = "the hero's curve (--curve) stops at 50% of its tokens, before its final loss"
    assert f"{stops[0].upper()}{stops[1:]}, so the headline stays a projection" in text
    assert f"Not checked yet: {stops} (Forecast vs actual)" in text
    assert f"until the hero's final loss is scored: {stops} (Forecast vs actual); a larger rung" in text


def test_seed_replicates_of_the_hero_are_shown_with_the_error_against_their_mean(frozen, tmp_path):
    from ladder.forecast.hero_run import plan_hero_run
    from ladder.forecast.score import score_study
    from ladder.reports.render.blocks import KV

    root = Path(shutil.copytree(frozen, tmp_path / "study"))
    first = hero_spec(root)
    plan_hero_run(root, seed=7)
    second = hero_spec(root)
    assert second.seed == 7 and second.run_id != first.run_id
    sd = layout.StudyDir(root)
    train(sd, first, 3.4)
    train(sd, second, 3.6)
    refresh(root, fit=False)
    score_study(root, run_id=first.run_id)
    _, sections = build_sections(root)
    [section] = [s for s in sections if s.id == "forecast"]
    items = dict(next(b for b in section.blocks if isinstance(b, KV)).items)
    assert items["Seed replicates of the hero"].startswith("2 done: seed 0 3.4")
    assert "seed 7 3.6" in items["Seed replicates of the hero"]
    assert items["Error against their mean"].startswith(
        f"{100 * (json.loads((root / 'forecast.json').read_text())['hero']['loss'] / (3.4 * 3.6) ** 0.5 - 1):+.2f}%"
    )


def test_a_damaged_freeze_is_named_in_the_report_and_left_out(scored, tmp_path):
    """A freeze is read through its contract: a hand edit is named among the report's problems, and the report
    leads with no score from it (before: the section read the damaged numbers as they were)."""
    study = Path(shutil.copytree(scored[0], tmp_path / "study"))
    path = study / "forecast.json"
    record = json.loads(path.read_text())
    record["hero"]["loss"] = "abc"
    path.write_text(json.dumps(record))
    page = render_report(study, tmp_path / "out", formats="html")["html"].read_text(encoding="utf-8")
    assert "forecast.json is damaged (hero.loss: &#39;abc&#39; is not a finite positive number)" in page
    assert '<section id="forecast"' not in page  # its only freeze is damaged: nothing scored to lead with
