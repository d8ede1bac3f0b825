"""One number per quantity (issue 28): the ladder's cost is one figure with a stated meaning in the plan, the
report's headline and its section on the ladder (the section used to add up every run's point FLOPs, a branch's
trunk prefix included: 3.63e13 against the headline's 2.63e13); sizes and compute in human units (a
``--predict`` point's label ``397680:7999488`` reads 397.7K x 7.999M)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ladder import layout
from ladder.model.config import format_count
from ladder.reports.render.builder import Builder
from ladder.reports.render.sections.headline import headline
from ladder.reports.render.sections.runs import ladder
from ladder.reports.render.study import load_study
from tests.reports.fits.synthetic import fit_dict_of, fit_json_of
from tests.reports.texts import texts as _texts


@pytest.fixture(scope="module")
def wsd_study(tmp_path_factory) -> tuple[Path, float, float]:
    """A trained (fake) wsd ladder: trunks with cooldown branches, a seed replicate, one failed run."""
    from ladder.books.collect import collect, write_collected
    from ladder.plan.planner import expand, write_plan
    from ladder.studies.spec import parse_study
    from tests.fake_runs import done_result, metrics_lines

    study = parse_study(
        {
            "name": "cost",
            "data": {"seq_len": 32, "validation_tokens": 1024},
            "model": {"vocab_size": 320, "head_dim": 16, "ffn_multiple": 8, "aspect_ratio": 16},
            "ladder": {
                "sizes": ["4K", "8K", "16K"],
                "tokens_per_param": 10,
                "budgets": [0.5, 1, 2],
                "replicates": {"sizes": ["4K"], "seeds": [1]},
            },
            "training": {
                "batch_min_sequences": 8,
                "logs_per_run": 10,
                "evals_per_run": 4,
                "schedule": {"kind": "wsd", "warmup_fraction": 0.1, "cooldown_fraction": 0.2},
            },
            "hero": {"params": "1M"},
            "sanity_check": False,
        }
    )
    root = tmp_path_factory.mktemp("cost") / "study"
    plan = expand(study)
    write_plan(plan, root)
    assert plan.totals()["branches"] > 0
    sd = layout.StudyDir(root)
    for spec in plan.runs:  # every run done, spending what the trainer says it spent (a branch its own steps)
        rd = sd.run(spec.run_id)
        rd.metrics.write_text("".join(metrics_lines(spec, spec.steps)))
        layout.atomic_write_json(rd.result, {**done_result(spec, 4.0), "flops_spent": spec.own_flops})
    write_collected(root, collect(root))
    return root, plan.totals()["flops"], plan.totals()["flops_if_independent"]


def test_the_headline_and_the_ladder_section_give_one_cost_saying_what_it_counts(wsd_study):
    from ladder.reports.render.fmt import fmt_flops

    root, planned, independent = wsd_study
    assert independent > 1.2 * planned  # the two figures the report used to show
    ctx = Builder(load_study(root))
    head, section = _texts(headline(ctx)), _texts(ladder(ctx))
    assert fmt_flops(planned) in head and fmt_flops(planned) in section
    assert fmt_flops(independent) not in section and fmt_flops(independent) not in head
    for text in (head, section):
        assert "each trunk once" in text and "cooldown branch only its steps after its branch point" in text
        assert "seed replicate" in text and "failed and cancelled runs" in text and "not the hero" in text


def test_a_fits_ladder_flops_is_the_one_figure_in_both(wsd_study):
    from ladder.reports.render.fmt import fmt_flops

    root, planned, _ = wsd_study
    data = load_study(root)
    data.fit = fit_dict_of({"hero": {"ladder_flops": 2.63e12, "compute": 1e13, "ladder_pct_of_hero": 26.3}})
    ctx = Builder(data)
    head, section = _texts(headline(ctx)), _texts(ladder(ctx))
    assert fmt_flops(2.63e12) in head and fmt_flops(2.63e12) in section and fmt_flops(planned) not in section
    assert "26.3% of the hero's compute (2.63e12 of 1.00e13 FLOPs" in head
    data.fit = fit_dict_of({"hero": {"ladder_flops": 1.234e9, "compute": 1e13}})
    assert "0.012% of the hero's compute" in _texts(headline(Builder(data)))  # never "0.0%"


def test_a_ladder_that_has_spent_part_of_its_plan_says_so_beside_the_plan(wsd_study, tmp_path):
    """A fresh study's report said "Ladder cost 0% of the hero's compute" where `ladder plan` had said 27.5%:
    the spent figure stays the one figure, and says it is so far, of the plan's total."""
    import shutil

    from ladder.books.collect import collect, write_collected
    from ladder.reports.render.fmt import fmt_flops

    root, planned, _ = wsd_study
    fresh = tmp_path / "fresh"
    shutil.copytree(root, fresh)
    for rd in (fresh / "runs").iterdir():  # nothing trained yet
        for name in ("result.json", "metrics.jsonl"):
            (rd / name).unlink(missing_ok=True)
    write_collected(fresh, collect(fresh))
    ctx = Builder(load_study(fresh))
    head, section = _texts(headline(ctx)), _texts(ladder(ctx))
    for text in (head, section):
        assert f"spent so far, of {fmt_flops(planned)} planned" in text, text
    full = Builder(load_study(root))  # every run done: the spent figure is the plan's, and says nothing more
    assert "so far" not in _texts(headline(full)) and "so far" not in _texts(ladder(full))


def test_a_ladder_dearer_than_the_hero_is_the_same_multiple_in_the_headline_as_in_the_terminal(wsd_study):
    """Issue 28: the headline said "3861.5%" where `ladder fit` says "38.6x the hero's compute"."""
    from ladder.reports.summary import _share_of_hero

    root, _, _ = wsd_study
    data = load_study(root)
    data.fit = fit_dict_of({"hero": {"ladder_flops": 3.8615e14, "compute": 1e13, "ladder_pct_of_hero": 3861.5}})
    head = _texts(headline(Builder(data)))
    assert "38.6x the hero's compute (3.86e14 of 1.00e13 FLOPs" in head and "3861.5%" not in head
    assert _share_of_hero(3861.5) == "38.6x the hero's compute"
    data.fit = fit_dict_of({"hero": {"ladder_flops": 2.63e12, "compute": 1e13, "ladder_pct_of_hero": 26.3}})
    assert _share_of_hero(26.3) in _texts(headline(Builder(data)))  # "26.3% of the hero's compute" in both


def test_the_plan_says_what_its_cost_counts(capsys):
    from tests.cli_helpers import run_cli

    r = run_cli(capsys, "plan", "default", "--dry-run")
    assert r.code == 0
    text = " ".join(r.stdout.split())
    assert "each trunk once, each cooldown branch only its steps after its branch point, every seed replicate" in text
    j = run_cli(capsys, "plan", "default", "--dry-run", "--json").json()
    assert "not the hero" in j["conventions"]["ladder_cost"]


def test_fit_summary_says_what_the_ladder_cost_counts_in_human_units():
    from rich.console import Console

    from ladder.reports.summary import print_fit

    console = Console(record=True, width=200, file=open("/dev/null", "w"))
    print_fit(
        fit_json_of(
            {
                "hero": {
                    "params": 8e5,
                    "tokens": 1.6e7,
                    "allocation": "rule",
                    "compute": 9.58e13,
                    "loss": 2.0,
                    "lo": 1.9,
                    "hi": 2.1,
                    "half_width_pct": 5.0,
                    "ladder_flops": 2.63e13,
                    "ladder_pct_of_hero": 27.5,
                },
            }
        ),
        console,
    )
    text = console.export_text()
    assert "ladder cost 2.63e13 FLOPs" in text and "each trunk once" in text
    assert "C = 9.58e13 FLOPs" in text and "e+13" not in text


def test_a_predicted_point_reads_in_human_units():
    from ladder.reports.render.fmt import fmt_label, fmt_point

    assert fmt_point("397680:7999488") == "397.7K params × 7.999M tokens"
    assert fmt_label("397680:7999488") == "397.7K:7.999M"
    assert fmt_label("hero") == "hero" and fmt_label("my point") == "my point"
    assert fmt_point(None, 8e5, 1.6e7) == "800K params × 16M tokens"


def test_the_forecast_of_row_is_in_human_units(tmp_path):
    from ladder.reports.fits.study.forecast_json import FrozenForecast
    from ladder.reports.render.sections.forecast import forecast_vs_actual
    from ladder.reports.render.study import StudyData

    data = StudyData(path=tmp_path, name="s")
    data.forecasts = [
        {
            "number": 1,
            "frozen_at": "2026-01-01T00:00:00",
            "hero": {"params": 8e5, "tokens": 1.6e7, "loss": 2.0},
            "predictions": [
                {"label": "397680:7999488", "params": 397680, "tokens": 7999488, "loss": 2.5, "lo": 2.4, "hi": 2.6}
            ],
            "scores": [
                {
                    "final": True,
                    "point": "397680:7999488",
                    "actual": 2.45,
                    "forecast": 2.5,
                    "lo": 2.4,
                    "hi": 2.6,
                    "error_pct": 2.0,
                    "inside": True,
                    "z": 0.5,
                    "source": {"kind": "loss"},
                }
            ],
        }
    ]
    data.forecasts = [FrozenForecast.model_validate(r) for r in data.forecasts]  # as load_study reads them
    sec = forecast_vs_actual(Builder(data))
    if sec is None:
        pytest.skip("this forecast record does not open the section")
    text = _texts(sec)
    assert "397680:7999488" not in text and "397.7K params × 7.999M tokens" in text


def test_no_rollout_claim_without_rollout_rows():
    """A 3-size ladder has no rollout forecast: the summary and the headline say so instead of claiming that
    forecasts stayed within 2% up to 1x (issue 28); with rows, both give the reach in parameters and compute, and a
    reach of 1x in every axis is said as the miss it is."""
    from rich.console import Console

    from ladder.reports.render.study import StudyData
    from ladder.reports.summary import print_fit

    hero = {
        "params": 8e5,
        "tokens": 1.6e7,
        "allocation": "rule",
        "compute": 9.58e13,
        "loss": 2.0,
        "lo": 1.9,
        "hi": 2.1,
        "half_width_pct": 5.0,
        "ladder_flops": 2.63e13,
        "ladder_pct_of_hero": 27.5,
        "extrapolation": {"params": 4.0, "tokens": 8.0, "compute_6nd": 32.0},
    }
    none = {
        "reach": {"2%": {"params_x": 1.0, "compute_x": 1.0}, "tested": {"params_x": 1.0, "compute_x": 1.0}},
        "calibration": {"n": 0},
    }
    some = {
        "reach": {"2%": {"params_x": 2.0, "compute_x": 5.0}, "tested": {"params_x": 3.0, "compute_x": 9.0}},
        "calibration": {"n": 12, "coverage": 0.9, "factor": 1.0},
    }
    # rows, but the nearest forecast in every axis missed by more than 2%: the reach is 1x, and "forecasts stayed
    # within 2% up to 1x params" read as a reach the rollout had shown (the main job's fit said it)
    missed = {
        "reach": {
            "2%": {"params_x": 1.0, "tokens_x": 1.0, "compute_x": 1.0},
            "tested": {"params_x": 2.04, "tokens_x": 4.24, "compute_x": 16.6},
        },
        "calibration": {"n": 24, "coverage": 1.0, "factor": 1.0},
    }
    texts = {}
    for key, law in (("none", none), ("some", some), ("missed", missed)):
        console = Console(record=True, width=300, file=open("/dev/null", "w"))
        far = {"beyond_tested": True, "beyond_reach": True} if key == "missed" else {}
        print_fit(fit_json_of({"loss": law, "hero": {**hero, **far, "reach": law["reach"]}}), console)
        data = StudyData(path=Path("."), name="s")
        data.fit = fit_dict_of({"loss": law, "hero": {**hero, **far, "reach": law["reach"]}})
        texts[key] = console.export_text() + " " + _texts(headline(Builder(data)))
    assert "stayed within 2%" not in texts["none"] and "no rollout forecast" in texts["none"]
    assert "stayed within 2% up to 2x params, 5x compute" in texts["some"]
    assert "no rollout forecast" not in texts["some"]
    assert "stayed within 2%" not in texts["missed"], texts["missed"]
    assert texts["missed"].count("nearest forecasts already erred by more than 2%") == 2  # terminal, headline
    assert "tested up to 2.04x params, 4.24x tokens, 16.6x compute" in texts["missed"]
    # the headline's forecast tile said the weaker "Beyond the ladder's demonstrated reach." where fit said the hero
    # lies beyond what the rollout tested
    assert "Beyond what the rollout tested." in texts["missed"] and "demonstrated reach." not in texts["missed"]


def test_without_a_fit_the_headline_gives_the_true_reason_for_no_rollout(wsd_study):
    """A study with no fit.json: the headline's reach tile says there is no fit yet (run `ladder fit`), as section 5
    does, and never blames the ladder's sizes or budgets (issue 28)."""
    root, _, _ = wsd_study
    data = load_study(root)
    assert not data.fit
    tile = next(t for t in headline(Builder(data)).blocks[0].tiles if t.label == "Demonstrated reach")
    assert "too few sizes or budgets" not in _texts(tile)
    assert "no fit yet" in _texts(tile) and "ladder fit" in _texts(tile)
    data.fit = fit_dict_of({})  # a fit without a loss law: its reason, not the ladder's sizes
    tile = next(t for t in headline(Builder(data)).blocks[0].tiles if t.label == "Demonstrated reach")
    assert "too few sizes or budgets" not in _texts(tile) and "not in this test" in _texts(tile)


def test_the_headline_gives_the_hero_and_the_reach_in_the_digits_ladder_fit_gives(tmp_path):
    """Issue 28 (user trial): `ladder fit` said "params 397.7K", "tokens 8.003M", "2.82x the ladder's largest
    model" and "within 2% up to 2.04x params"; the report's headline said 398K, 8M, 2.8x and 2x."""
    import io

    from rich.console import Console

    from ladder.reports.summary import print_fit
    from tests.hero_fixture import make_ladder

    ctx = Builder(load_study(make_ladder(tmp_path / "s", n_boot=10)))
    head = _texts(headline(ctx))
    buf = io.StringIO()
    print_fit(ctx.fit_json, Console(file=buf, width=400, color_system=None))
    terminal = buf.getvalue()
    fit = ctx.fit_json
    rec, ext, reach = fit.recommendation, fit.hero.extrapolation, fit.loss.reach["2%"]
    for said in (
        format_count(rec.params),
        format_count(rec.tokens),
        f"{ext['params']:.3g}",
        f"{reach.params_x:.3g}",
        f"{reach.compute_x:.3g}",
    ):
        assert said in terminal and said in head, (said, head)
    # the hero's half-width: `ladder fit` said "±1.6%" where the report, the freeze and forecast show say "±1.56%"
    half = f"±{fit.hero.half_width_pct:.2f}%"
    assert half in terminal and half in head, (half, terminal, head)


def test_a_degenerate_loss_reads_in_the_digits_fit_prints_it_in():
    """User retrial (issue 28): a tied-vs-untied gap of -8.96 at the hero; `ladder fit` printed the paired tied
    forecast as 1.223e+04 [4.554e-56, 1.027e+129], the report's table as "12231.0718 (0.0000 - 10268281642...
    (130 digits).0000)". A loss too large or too small for 4 decimals now reads as fit prints it."""
    from ladder.reports.render.fmt import fmt_loss
    from ladder.reports.summary import _num

    for x in (12231.0718, 4.554e-56, 1.0268e129):
        assert fmt_loss(x) == _num(x), x
    assert fmt_loss(1.57844) == "1.5784" and fmt_loss(0.0003) == "0.0003" and fmt_loss(0.0) == "0.0000"
    assert fmt_loss(9999.5) == "9999.5000"


def test_the_heros_compute_multiple_says_it_is_6nd_beside_exact_flops(tmp_path):
    """User retrial (issue 28): `ladder fit` said "C = 6.31e13 FLOPs ... 7.11e+03x in compute" and the report's
    headline "7.11e+03x in compute", while the ladder's largest run did 1.64e10 exact FLOPs (status, the report's
    table): 3.85e+03x, which the tied-vs-untied section gave. The multiple is the law's 6ND; it now says so."""
    import io

    from rich.console import Console

    from ladder.reports.summary import print_fit
    from tests.hero_fixture import make_ladder

    ctx = Builder(load_study(make_ladder(tmp_path / "s", n_boot=10)))
    fit = ctx.fit_json
    ext = fit.hero.extrapolation
    exact = fit.hero.compute / ctx.d.runs["flops"].max()
    assert f"{exact:.3g}" != f"{ext['compute_6nd']:.3g}"  # the two measures differ: the label matters
    buf = io.StringIO()
    print_fit(fit, Console(file=buf, width=400, color_system=None))
    terminal, head = buf.getvalue(), _texts(headline(ctx))
    assert f"{ext['compute_6nd']:.3g}x in compute (6ND)" in terminal, terminal
    assert f"{ext['compute_6nd']:.3g}× in compute (6ND)" in head, head
    assert " in compute;" not in terminal and "× in compute;" not in head


def test_a_far_reach_reads_as_a_multiple_not_a_python_exponent():
    """The rollout section said "4.06e+03× in compute" (fmt_g), where `ladder fit` says 4,058x: one formatter now
    writes every multiple, in the terminal and the report."""
    from ladder.model.config import format_multiple
    from ladder.reports.fits.study.fit_json import Reach
    from ladder.reports.render.sections.rollout import _reach_text

    said = _reach_text(Reach(params_x=2.5, compute_x=4058.2))
    assert said == "2.5× in parameters, 4,058× in compute"
    assert format_multiple(4058.2) == "4,058x" and "e+" not in said


def test_the_law_forms_weights_have_the_digits_ladder_fit_prints(tmp_path):
    """`ladder fit` printed "weight 0.50" where the report's law-forms table said "0.5" (and "0" for a form not
    fitted): one quantity, two spellings."""
    import io
    import re

    from rich.console import Console

    from ladder.reports.render.sections.scaling import scaling
    from ladder.reports.summary import print_fit
    from tests.hero_fixture import make_ladder

    ctx = Builder(load_study(make_ladder(tmp_path / "s", n_boot=10)))
    buf = io.StringIO()
    print_fit(ctx.fit_json, Console(file=buf, width=400, color_system=None))
    printed = re.findall(r"weight (\d\.\d\d)", buf.getvalue())
    assert printed, buf.getvalue()
    table = _texts(scaling(ctx))
    for w in printed:
        assert f" {w} " in f" {table} ", (w, table)
    # no one-decimal weight beside the others (a percentage, such as the track record's 0.6%, is no weight)
    assert not re.search(r"(?<![\d.])0\.[1-9](?![\d%])", table), table


def test_the_recommended_runs_compute_says_why_it_is_not_the_cost_tiles(tmp_path):
    """The main job's headline: "Ladder cost 27.5% of the hero's compute (2.63e13 of 9.58e13 FLOPs)" and, in the
    recommended configuration, "Compute 9.59e13 FLOPs" with no word: the run rounds its tokens to whole steps
    (16M -> 16.01M) and its shape to 803K parameters, and the cost is a share of the forecast's hero point."""
    from ladder.reports.render.fmt import fmt_flops
    from tests.hero_fixture import make_ladder

    # a hero whose run, in whole steps, shows other digits than the forecast's point (most heroes do not)
    ctx = Builder(load_study(make_ladder(tmp_path / "s", n_boot=10, hero="594K")))
    rec, hero = ctx.fit_json.recommendation, ctx.fit_json.hero
    assert fmt_flops(rec.flops) != fmt_flops(hero.compute), "the fixture's hero needs no rounding: nothing to test"
    head = _texts(headline(ctx))
    assert f"of {fmt_flops(hero.compute)} FLOPs" in head and f"{fmt_flops(rec.flops)} FLOPs" in head
    assert "the forecast's hero point" in head and f"is {fmt_flops(hero.compute)} FLOPs" in head, head
