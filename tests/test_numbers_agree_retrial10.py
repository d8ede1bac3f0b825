"""Issue 28, retrial 10: the numbers the tool prints agree with each other (fake-trained ladders, no training).

- `forecast show`'s kind column calls a freeze a prediction only where the report and `forecast score` do: its
  hero forecast checked by the hero's final loss, frozen before the hero trained;
- the published-ladder floor is said in the measure of the ± beside it;
- the report's sizes have the terminal's digits (4.144K, never 4.14K), its rollout table says which forecasts it
  judged the forms on, and the copy ratio's trend and seed spread read in one set of digits everywhere.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ladder import layout
from tests.cli_helpers import run_cli
from tests.hero_fixture import hero_spec, train


def _show_kinds(study, capsys) -> dict[int, str]:
    r = run_cli(capsys, "forecast", "show", study, "--json")
    assert r.code == 0, r.stderr
    return {f["number"]: f["kind"] for f in r.json()["forecasts"]}


def test_show_never_calls_a_freeze_made_after_the_hero_a_prediction(study, capsys):
    """`forecast score` says of a freeze made after the hero trained "not a prediction made first", and the report
    never headlines it as one; `forecast show` called it "prediction" because it had a final score."""
    assert run_cli(capsys, "forecast", "freeze", study).code == 0
    assert run_cli(capsys, "hero", study).code == 0
    train(layout.StudyDir(study), hero_spec(study), 3.5)
    assert run_cli(capsys, "forecast", "freeze", study, "--note", "late").code == 0
    r = run_cli(capsys, "forecast", "score", study)
    assert r.code == 0, r.stderr
    kinds = _show_kinds(study, capsys)
    assert kinds[1] == "prediction"
    assert kinds[2] != "prediction", kinds
    human = run_cli(capsys, "forecast", "show", study)
    assert human.code == 0, human.stderr
    row2 = next(line for line in human.stdout.splitlines() if line.lstrip("│┃ ").startswith("2 "))
    assert "prediction" not in row2, row2


def test_show_calls_the_hero_forecast_a_projection_when_only_another_point_was_scored(study, capsys):
    """A hero planned at another size is scored at the freeze's --predict point; the hero forecast beside the kind
    (the fit's own hero, far beyond) was never checked, so it stays a projection, as the report says."""
    assert run_cli(capsys, "forecast", "freeze", study, "--predict", "100K:2M").code == 0
    assert run_cli(capsys, "hero", study, "--params", "100K", "--tokens", "2M").code == 0
    spec = hero_spec(study)
    train(layout.StudyDir(study), spec, 3.5)
    r = run_cli(capsys, "forecast", "score", study, "--json")
    assert r.code == 0, r.stderr
    [s] = r.json()["scores"]
    assert s["final"] and s["point"] != "hero", s
    assert _show_kinds(study, capsys)[1] == "projection"


def test_the_published_ladder_floor_is_in_the_measure_of_the_printed_half_width():
    """A hero far beyond the ladder gets at least the published-ladder floor on both sides of its interval; fit
    said "at least the published-ladder floor of 4.8%" of an interval it printed as ±4.67% (the floor as
    e^f - 1, the half-width as (hi - lo) / 2 / loss)."""
    import math

    import numpy as np

    from ladder.reports.fits.loss import forecast_loss
    from ladder.reports.fits.runs import Runs

    rng = np.random.default_rng(0)
    budgets = np.geomspace(1e17, 3e18, 5)
    n = np.concatenate([np.sqrt(c / 120) * np.geomspace(0.3, 3, 5) for c in budgets])
    d = np.repeat(budgets, 5) / (6 * n)
    loss = (1.82 + 482.0 * n**-0.34 + 2085.0 * d**-0.37) * np.exp(rng.normal(0, 0.001, len(n)))
    c = budgets[-1] * 3000
    hero_n = math.sqrt(c / 120)
    fc = forecast_loss(Runs(n, d, loss, [f"r{i}" for i in range(len(n))]), hero_n, c / (6 * hero_n), n_boot=10)
    p = fc.points[0]
    floor = p.distance["public_floor_pct"]
    assert floor > 2  # the floor is what widened this interval
    assert p.half_width_pct >= floor - 1e-9, (p.half_width_pct, floor)


@pytest.fixture(scope="module")
def budgets_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """Four sizes at two budgets (fake-trained, fitted) and its report's text: (study, text)."""
    import html
    import re

    from ladder.cli import main
    from tests.hero_fixture import make_ladder

    root = make_ladder(
        tmp_path_factory.mktemp("budgets") / "s", budgets=[1, 2], sizes=["25K", "50K", "100K", "200K"], split=True
    )
    old = sys.argv
    sys.argv = ["ladder", "report", str(root), "--format", "html"]
    try:
        main()
    except SystemExit as exc:
        assert not exc.code, exc.code
    finally:
        sys.argv = old
    page = (root / "report" / "report.html").read_text()
    return root, html.unescape(" ".join(re.sub(r"<[^>]+>", " ", page).split()))


def test_the_forms_rollout_table_says_on_which_forecasts_it_judged_them(budgets_report):
    """Four sizes at two budgets: too few forecasts every form made (fit.json ``common: false``), so each form is
    judged on its own; the report's table was still titled "on the forecasts every form made"."""
    import json
    import re

    root, text = budgets_report
    scores = json.loads((root / layout.FIT).read_text())["loss"]["rollout"]["scores"]
    assert scores and not any(v["common"] for v in scores.values()), scores
    title = re.search(r"Each form's rollout record \(([^)]*)\)", text)
    assert title, "no table of each form's rollout record"
    assert "every form made" not in title.group(1), title.group(0)
    assert "its own" in title.group(1), title.group(0)


def test_the_reports_ladder_table_gives_sizes_in_the_digits_of_the_terminal(budgets_report, capsys):
    """`ladder plan` and `ladder status` give a run's params and tokens as 4.144K and 82.94K; the report's tables
    gave the same run 4.14K and 82.9K."""
    import pandas as pd

    from ladder.model.config import format_count

    root, text = budgets_report
    runs = pd.read_csv(root / "results.csv")
    row = runs.iloc[0]
    status = run_cli(capsys, "status", root)
    line = next(x for x in status.stdout.splitlines() if x.startswith(row["run_id"]))
    assert format_count(row["tokens"]) in line.split()
    cells = text.split(row["run_id"], 1)[1].split()[:16]
    assert format_count(row["params"]) in cells and format_count(row["tokens"]) in cells, (
        cells,
        format_count(row["params"]),
        format_count(row["tokens"]),
    )


def test_the_copy_ratios_trend_has_the_reports_digits_in_the_terminal(budgets_report, capsys):
    """`ladder fit` gave the copy ratio's trend as "0.200 -> 0.229 (slope +0.028 [-0.0431, 0.0993])", the report
    as "0.2 at the smallest compute, 0.229 at the largest; slope 0.0281"."""
    import re

    root, text = budgets_report
    r = run_cli(capsys, "fit", root)
    assert r.code == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("in-context repeats"))
    said = re.search(r"log-log trend (\S+) -> (\S+) over .*\((?:6ND; )?slope ([^ ]+) \[", line)
    shown = re.search(r"below\), (\S+) at the smallest compute, (\S+) at the largest .*?slope (\S+) per e-fold", text)
    assert said and shown, (line, text[text.find("Copy ratio") :][:300])
    assert said.group(1, 2) == shown.group(1, 2), (line, shown.group(0))
    assert said.group(3).lstrip("+") == shown.group(3).lstrip("+"), (line, shown.group(0))


def test_the_seed_spread_warning_and_the_slope_have_the_reports_digits():
    """The warning said "sd of log loss 0.051 ... novel tokens (0.005)" beside the report's table of the same
    spread, "repeats 0.0507, novel 0.00539"; the terminal's slope +0.028 beside the report's 0.0281."""
    import pandas as pd

    from ladder.reports.fits.in_context import fit_in_context
    from ladder.reports.render.fmt import fmt_g
    from ladder.reports.summary import _slope

    rows = []
    for n in (25e3, 50e3, 100e3, 200e3):
        for seed, sign in ((0, -1), (1, 1)):
            novel = 1.9 + 40 / n**0.33 + 120 / (20 * n) ** 0.3
            rows.append(
                {
                    "params": n,
                    "tokens": 20 * n,
                    "loss": novel,
                    "loss_novel": novel * (1 + 0.002 * sign),
                    "loss_repeats": 0.35 * novel * (1 + 0.06 * sign),
                    "repeat_share": 0.03,
                    "seed": seed,
                }
            )
    ic = fit_in_context(pd.DataFrame(rows), "all", 1e6, 2e7, n_boot=5)
    [warning] = [w for w in ic.warnings if "seed replicates differ" in w]
    assert f"sd of log loss {fmt_g(ic.seeds['repeats'], 3)})" in warning, (warning, ic.seeds)
    assert f"novel tokens ({fmt_g(ic.seeds['novel'], 3)})" in warning, (warning, ic.seeds)
    assert _slope(0.0281, [-0.0431, 0.0993]) == "+0.0281 [-0.0431, 0.0993]"


def test_a_budgets_rung_is_named_by_its_multiple_as_plan_names_it():
    """fit and the report named a rung "4K 2.0" where `ladder plan` (and the tracker) say "4K ... 2x"."""
    import pandas as pd

    from ladder.reports.fits.study.table import rung_variant_keys

    df = pd.DataFrame(
        {
            "axis/size": ["4K", "4K", "8K"],
            "axis/multiplier": [1.0, 2.0, 0.5],
            "axis/tie_embeddings": [True, False, True],
            "params": [4144, 4144, 8272],
            "tokens": [41472, 82944, 41360],
        }
    )
    rung, variant, _, _ = rung_variant_keys(df)
    assert list(rung) == ["4K 1x", "4K 2x", "8K 0.5x"]
    assert list(variant) == ["tied", "untied", "tied"]


def test_status_says_the_ladders_cost_fit_gives_once_the_hero_has_trained(study, capsys):
    """`ladder status` summed the hero run into its FLOPs spent (8.02e11) while fit and the report give the
    ladder's cost without it (5.46e11), and neither said why they differ."""
    import json

    from ladder.model.config import format_flops

    assert run_cli(capsys, "hero", study).code == 0
    train(layout.StudyDir(study), hero_spec(study), 3.5)
    ladder = json.loads((study / layout.FIT).read_text())["hero"]["ladder_flops"]
    r = run_cli(capsys, "status", study)
    assert r.code == 0, r.stderr
    total = r.stdout.strip().splitlines()[-1]
    assert f"the ladder's cost {format_flops(ladder)} without it" in total, (total, format_flops(ladder))
    assert run_cli(capsys, "status", study, "--json").json()["totals"]["hero_flops_spent"] > 0


def test_a_score_at_a_predict_point_is_never_shown_as_the_hero_forecasts(study, capsys):
    """`forecast show` and the report's table of freezes put "actual 3.5: error -0.86%" beside the hero forecast
    (the fit's own hero, far beyond) when the score was at a --predict point: that error is not the hero
    forecast's."""
    import html
    import re

    assert run_cli(capsys, "forecast", "freeze", study, "--predict", "100K:2M").code == 0
    assert run_cli(capsys, "hero", study, "--params", "100K", "--tokens", "2M").code == 0
    train(layout.StudyDir(study), hero_spec(study), 3.5)
    r = run_cli(capsys, "forecast", "score", study, "--json")
    assert r.code == 0, r.stderr
    [s] = r.json()["scores"]
    assert s["point"] != "hero"
    show = run_cli(capsys, "forecast", "show", study)
    assert show.code == 0, show.stderr
    cells = " ".join(show.stdout.replace("│", " ").split())
    assert f"at {s['point']}" in cells, cells
    assert run_cli(capsys, "report", study, "--format", "html").code == 0
    page = html.unescape(" ".join(re.sub(r"<[^>]+>", " ", (study / "report" / "report.html").read_text()).split()))
    table = page.split("Every frozen forecast of the study", 1)[1][:400]
    assert "prediction 100K params" in table, table


def test_the_far_hero_warning_gives_the_multiple_the_reach_warning_gives():
    """`ladder fit` warned "the hero is 31.9x the ladder's largest model, ..." and, two lines on, "the hero is 32x
    the largest ladder model"."""
    from types import SimpleNamespace

    from ladder.reports.fits.study.study_hero import reach_warnings

    dist = {
        "params_x": 31.9,
        "tokens_x": 15.9,
        "compute_x": 507.0,
        "tested": {"params_x": 2.0, "tokens_x": 2.0, "compute_x": 3.99},
        "beyond_tested": True,
        "beyond_tested_axes": ["params", "tokens", "compute"],
        "drift_widening_pct": 0.0,
        "public_floor_pct": 4.67,
    }
    hero = {"extrapolation": {"params": 31.9}, "distance": dist, "beyond_tested": True, "beyond_reach": True}
    warnings: list[str] = []
    reach_warnings(hero, SimpleNamespace(mixture_rows=[1], reach={}, lean={}), warnings)
    far = next(w for w in warnings if "a forecast this far out is fragile" in w)
    assert "31.9x the largest ladder model" in far, far
    assert "32x" not in " ".join(warnings)
    # the floor in the digits of the ± it bounds (fit printed "±4.67%" and "the published-ladder floor of 4.7%")
    assert "published-ladder floor of ±4.67%" in " ".join(warnings)


def test_the_reports_floor_has_the_digits_of_the_half_width(budgets_report):
    """The rollout section said "at least the published-ladder floor of 0.5%" beside the headline's ±0.56%."""
    import re

    _, text = budgets_report
    assert re.search(r"published-ladder floor of ±\d+\.\d\d%", text), re.findall(r"floor of \S+", text)


def test_each_kinds_rollout_error_has_the_reports_digits_in_the_terminal(budgets_report):
    """fit gave the repeats' rollout error as "rollout RMS 1.8%", the report's table of the same forecast 1.79%."""
    import io

    from rich.console import Console

    from ladder.reports.render.builder import Builder
    from ladder.reports.render.sections.in_context import in_context
    from ladder.reports.render.study import load_study
    from ladder.reports.summary import print_fit
    from tests.reports.texts import texts

    root, _ = budgets_report
    ctx = Builder(load_study(root))
    ctx.fit_json.in_context.forecasts.repeats.rollout_rms_pct = 1.7912
    buf = io.StringIO()
    print_fit(ctx.fit_json, Console(file=buf, width=400, color_system=None))
    assert "(rollout RMS 1.79%)" in buf.getvalue(), buf.getvalue()
    assert "1.79% over" in texts(in_context(ctx))


def test_a_number_in_the_thousands_never_reads_as_pythons_e_notation_in_the_report():
    """The report's compute-optimal allocation said "at the hero's 6ND = 6.00e13: 12.2K parameters (90%: 0 -
    92.1M), 6.7e+04 tokens/param": fmt_g kept e-notation for 1e5 and up, but Python's g used it from 1e3."""
    from ladder.reports.render.fmt import fmt_g

    assert fmt_g(66960.0) == "67,000" and fmt_g(4058) == "4,060" and fmt_g(-1234.5) == "-1,230"
    assert fmt_g(999.4) == "999" and fmt_g(12.5) == "12.5" and fmt_g(0.0281) == "0.0281"
    assert fmt_g(4058, 4) == "4,058"


def test_a_law_bound_in_the_thousands_reads_with_commas_in_fit_and_the_report():
    """fit printed a law's interval as "A = 0.1685 [3.063e-22, 8.846e+04]": Python's e-notation from 1e3 up,
    where every other count in fit and the report has commas; a degenerate loss keeps one form in both."""
    from ladder.reports.render.fmt import fmt_loss
    from ladder.reports.summary import _ci, _num

    assert _num(88456.6) == "88,460" and _num(4058.2) == "4,058" and _num(1.4269) == "1.427"
    assert _num(1.454e17) == "1.454e+17" and _num(3.063e-22) == "3.063e-22"
    assert "e+04" not in _ci([3.063e-22, 88456.6])
    assert fmt_loss(12231.0718) == _num(12231.0718) == "12,230"
