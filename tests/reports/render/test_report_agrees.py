"""The report agrees with itself and with `ladder fit` (issue 28's user trial):

- every section says the hero's forecast as the score stands: checked once the hero run's final loss is scored,
  not checked yet while it trains, a projection before (the headline said "checked" while the warnings and the
  rollout still said "a projection, not a checked prediction");
- the ladder's runs are counted as `ladder fit` counts them, the hero run(s) apart (the report counted the hero as
  a second variant: "7 runs in 2 variant(s)" beside fit's "variant all, 6 runs");
- no section says a sentence twice ("this study has no tied-vs-untied ablation (this study has no tied-vs-untied
  ablation (all runs are tied))"), checked over the whole HTML of several studies, a tie_embeddings ablation among
  them.

The forecast loop runs without training: a fake-trained ladder (``tests.hero_fixture``), a freeze, the hero run
planned and given a fake curve and result, then scored.
"""

from __future__ import annotations

import collections
import html as html_lib
import json
import re
import shutil
from pathlib import Path

import pytest

from ladder import layout
from ladder.reports.render import render_report
from tests.cli_helpers import run_cli
from tests.hero_fixture import hero_spec, law_loss, make_ladder, refresh, train

STATES = ("none", "partial", "final")
WORD = re.compile(r"[A-Za-z][A-Za-z'-]+")


# --- the report's prose, as a reader sees it ---------------------------------------------------------------------


def prose(page: str) -> dict[str, list[str]]:
    """Each section's prose, one string per HTML element: paragraphs, bullets, tiles, key-value rows, captions.
    Left out: figures, preformatted text, data tables and the configuration's source column (a table's cells
    may repeat: two rows with one source)."""
    out = {}
    for sid, body in re.findall(r'<section id="([^"]+)"[^>]*>(.*?)</section>', page, flags=re.S):
        body = re.sub(
            r'<svg.*?</svg>|<pre>.*?</pre>|<table class="data.*?</table>|<td class="source">.*?</td>',
            " ",
            body,
            flags=re.S,
        )
        chunks = (html_lib.unescape(re.sub(r"\s+", " ", c)).strip() for c in re.split(r"<[^>]+>", body))
        out[sid] = [c for c in chunks if c]
    return out


def sentences(text: str) -> list[str]:
    return [s.strip(" .") for s in re.split(r"(?<=[.!?])\s+", text) if s.strip(" .")]


def _said(sentence: str) -> str:
    """What a sentence says, without its label ("law form A not fitted: why" says "why")."""
    label, sep, rest = sentence.lower().partition(": ")
    return rest if sep and rest else sentence.lower()


def _enough(text: str) -> bool:
    return len(WORD.findall(text)) >= 5  # a sentence, not a number or a name


def said_twice(page: str) -> dict[str, list[str]]:
    """Per section: each sentence it says twice (after its label), and each clause a sentence says twice within
    itself (a stutter: "no ablation (no ablation (all tied))")."""
    bad: dict[str, list[str]] = {}
    for sid, chunks in prose(page).items():
        said = [_said(s) for c in chunks for s in sentences(c)]
        twice = [s for s, n in collections.Counter(x for x in said if _enough(x)).items() if n > 1]
        for s in said:
            clauses = collections.Counter(p.strip(" ,.") for p in re.split(r"\s*[():;]\s*", s) if _enough(p))
            twice += [f"{s!r} says {p!r} twice" for p, n in clauses.items() if n > 1]
        if twice:
            bad[sid] = twice
    return bad


def text_of(page: str) -> str:
    return " ".join(c for chunks in prose(page).values() for c in chunks)


def section(page: str, sid: str) -> str:
    return " ".join(prose(page).get(sid, []))


# --- the studies -------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def frozen(tmp_path_factory) -> Path:
    """A fitted ladder (every rung has the same tokens/param, so three law forms are not fitted for one reason;
    all runs tied), a frozen forecast and the hero run planned: 6 rungs, 1 hero."""
    from ladder.forecast.frozen import freeze
    from ladder.forecast.hero_run import plan_hero_run

    root = make_ladder(tmp_path_factory.mktemp("agrees") / "study", split=True)
    freeze(root, note="before the hero")
    plan_hero_run(root)
    refresh(root, fit=False)
    return root


def _state(frozen: Path, where: Path, state: str) -> tuple[Path, str]:
    """The study as the score stands, and its report's HTML: ``none`` (the hero planned, nothing scored),
    ``partial`` (the hero at half its tokens, scored) or ``final`` (the hero finished and scored)."""
    from ladder.forecast.score import score_study

    root = Path(shutil.copytree(frozen, where / "study"))
    if state != "none":
        hero = hero_spec(root)
        upto = 1.0 if state == "final" else 0.5
        train(layout.StudyDir(root), hero, law_loss(hero.params, hero.tokens), upto=upto, split=True)
        refresh(root, fit=False)
        [(_, score)] = score_study(root).scored
        assert score["final"] is (state == "final")
    return root, render_report(root, where / "out", formats="html")["html"].read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def states(frozen, tmp_path_factory) -> dict[str, tuple[Path, str]]:
    return {s: _state(frozen, tmp_path_factory.mktemp(s), s) for s in STATES}


@pytest.fixture(scope="module")
def tied_ablation(tmp_path_factory) -> tuple[Path, str]:
    """A study with a tie_embeddings ablation (tied and untied at every rung), and its report."""
    from tests.reports.fixture_study import make_study

    root = make_study(
        tmp_path_factory.mktemp("tied") / "study",
        budgets=(3e11, 1e12),
        points=3,
        lr_multipliers=None,
        aspect_ratios=(8, 16, 32),
        tasks=False,
        n_failed=0,
        n_diverged=0,
        n_boot=20,
    )
    return root, render_report(root, root / "out", formats="html")["html"].read_text(encoding="utf-8")


# --- 1. every section says the score's state ---------------------------------------------------------------------


def test_the_study_has_what_the_checks_need(states):
    """The hero lies beyond what the rollout tested, so fit.json's warning and the rollout section speak of
    checking at all: without them the checks below would pass on nothing."""
    root, page = states["none"]
    fit = json.loads(layout.StudyDir(root).fit.read_text())
    assert fit["hero"]["beyond_tested"]
    assert any(w.endswith("a projection, not a checked prediction") for w in fit["warnings"])
    assert "not a checked prediction" in section(page, "headline")
    assert "Its interval is a projection, not a checked prediction" in section(page, "rollout")


def test_before_any_score_every_section_says_projection(states):
    _, page = states["none"]
    text = text_of(page)
    assert '<section id="forecast"' not in page
    assert "Forecast loss (projection)" in section(page, "headline")
    for claim in ("Forecast loss (prediction)", "Checked against the hero run", "since checked", "still training"):
        assert claim not in text, claim


def test_while_the_hero_trains_every_section_says_not_checked_yet(states):
    _, page = states["partial"]
    text = text_of(page)
    assert "The hero run is still training, so the headline stays a projection" in section(page, "forecast")
    headline = section(page, "headline")
    assert "Forecast loss (projection)" in headline
    assert "Not checked yet: the hero run is still training (Forecast vs actual)" in headline
    until = "until the hero's final loss is scored: the hero run is still training"
    assert f"not a checked prediction {until}" in headline  # the warning
    assert f"not a checked prediction, {until}" in section(page, "rollout")
    for claim in ("Forecast loss (prediction)", "Checked against the hero run", "since checked"):
        assert claim not in text, claim
    # no sentence calls the forecast unchecked without saying that the hero is on its way
    for s in sentences(text):
        if "not a checked prediction" in s:
            assert "still training" in s, s


def test_once_the_hero_is_scored_every_section_says_checked(states):
    """After freeze, the hero run and the score: the headline says prediction and no section calls the forecast
    unchecked (before: "Forecast loss (prediction) ... Checked against the hero run" in the headline, and "a
    projection, not a checked prediction" in its warnings and in the rollout section)."""
    root, page = states["final"]
    score = json.loads((root / "forecast.json").read_text())["scores"][-1]
    assert score["final"] and score["point"] == "hero"
    text = text_of(page)
    assert "A prediction checked against a real run" in section(page, "forecast")
    headline = section(page, "headline")
    assert "Forecast loss (prediction)" in headline and "Checked against the hero run: actual" in headline
    assert "a projection when fitted, since checked against the hero run (Forecast vs actual)" in headline
    rollout = section(page, "rollout")
    assert f"the hero run has since checked it: actual {score['actual']:.3f}" in rollout
    for claim in ("not a checked prediction", "(projection)", "stays a projection", "still training", "unchecked"):
        assert claim not in text, claim
    for s in sentences(text):  # a projection only as it was when fitted
        if "projection" in s:
            assert "when fitted" in s or "When fitted" in s, s


# --- 2. the ladder counted as fit counts it ----------------------------------------------------------------------


def test_the_report_counts_the_ladder_as_fit_does_and_says_the_hero_apart(frozen, tmp_path, capsys):
    """`ladder fit` and `ladder report` on a study whose hero finished: the same number of runs and variants, the
    hero said apart (before: "7 runs in 2 variant(s)", the hero a variant of its own, "7 / 7" runs done)."""
    root, _ = _state(frozen, tmp_path, "final")
    r = run_cli(capsys, "fit", root, "--bootstrap", "20")
    assert r.code == 0, r.stderr
    variant, n = re.search(r"loss laws \((?:variant (\S+), )?(\d+) runs", r.stdout).groups()
    variant = variant or "all"  # one variant: the terminal names none ("variant all" read as a variant's name)
    meta = json.loads(layout.StudyDir(root).fit.read_text())["meta"]
    assert (int(n), meta["n_runs"], meta["n_hero_runs"], meta["variants"]) == (6, 6, 1, [variant])
    r = run_cli(capsys, "report", root, "--format", "html", "--out", tmp_path / "report")
    assert r.code == 0, r.stderr
    page = (tmp_path / "report" / "report.html").read_text(encoding="utf-8")
    ladder = section(page, "ladder")
    assert (
        f"{n} runs in {len(meta['variants'])} variant(s): {n} done; besides, 1 hero run (done) in the table" in ladder
    )
    headline = section(page, "headline")
    assert f"Runs {n} / {n} all the ladder's runs done; besides, 1 hero run (done), not counted" in headline
    assert f"of {n} ladder runs and 1 hero run against tokens" in section(page, "curves")
    assert "2 variant(s)" not in page and f"{int(n) + 1} runs" not in page


# --- 3. no section says a sentence twice -------------------------------------------------------------------------


def test_said_twice_finds_a_stutter_and_a_repeat():
    page = (
        '<section id="a"><p>this study has no tied-vs-untied ablation (this study has no tied-vs-untied ablation '
        "(all runs are tied))</p></section>"
        '<section id="b"><table class="kv"><tr><th>Crossover</th><td>the tie trend needs at least 2 rungs, got 1'
        "</td></tr><tr><th>Trend</th><td>the tie trend needs at least 2 rungs, got 1</td></tr></table></section>"
        '<section id="c"><ul><li>law form a not fitted: every run has the same ratio of tokens</li>'
        "<li>law form b not fitted: every run has the same ratio of tokens</li></ul></section>"
        '<section id="d"><p>One sentence of five words. Another one, not the same.</p>'
        '<table class="data"><tr><td>a cell may repeat itself here</td><td>a cell may repeat itself here</td>'
        "</tr></table></section>"
    )
    assert sorted(said_twice(page)) == ["a", "b", "c"]


@pytest.mark.parametrize("state", STATES)
def test_no_section_says_a_sentence_twice_in_the_forecast_loop(states, state):
    """All runs tied: the tied section said "this study has no tied-vs-untied ablation (this study has no
    tied-vs-untied ablation (all runs are tied))"; three law forms not fitted for one reason were three notes."""
    _, page = states[state]
    assert said_twice(page) == {}
    tied = section(page, "tied")
    assert tied.count("this study has no tied-vs-untied ablation") == 1 and "(all runs are tied)" in tied
    assert "law form chinchilla, overtrain, bounded not fitted: every run has the same" in section(page, "headline")


def test_no_section_says_a_sentence_twice_with_a_tie_embeddings_ablation(tied_ablation):
    root, page = tied_ablation
    assert json.loads(layout.StudyDir(root).fit.read_text())["tied_vs_untied"]["available"]
    assert said_twice(page) == {}


def test_no_section_says_a_sentence_twice_when_the_tie_trend_has_too_few_rungs(tied_ablation, tmp_path):
    """An ablation too short for a trend: fit.json gives the reason as the crossover's message too, and the section
    said it twice (as "Crossover" and as "Trend")."""
    root = Path(shutil.copytree(tied_ablation[0], tmp_path / "study"))
    sd = layout.StudyDir(root)
    fit = json.loads(sd.fit.read_text())
    tie = fit["tied_vs_untied"]
    why = "the tie trend needs at least 2 rungs with both variants, got 1"
    tie.update(hero=None, trend=None, band=None, reason=why)
    tie["crossover"] = {"flops": None, "ci90": None, "status": "unknown", "message": why}
    layout.atomic_write_json(sd.fit, fit)
    page = render_report(root, tmp_path / "out", formats="html")["html"].read_text(encoding="utf-8")
    tied = section(page, "tied")
    assert "Crossover" in tied and "no fit.json" not in tied and tied.count(why) == 1, tied
    assert said_twice(page) == {}


def test_the_rollouts_farthest_error_is_not_called_the_error_at_the_hero(states):
    """retrial7 (fxb): 'The rollout's error there: median 3.33% ... at 15.5-31x' read as the error at the hero's
    distance (the hero was at 0.199x compute). The row says where it was measured and where the hero lies."""
    _, page = states["none"]
    text = text_of(page)
    assert "The rollout's error there" not in text
    assert "The rollout's error at its farthest forecasts" in text
    assert "no rollout error was measured at the hero's own distance" in text


def test_a_rollout_without_forecasts_says_why_not_that_the_ladder_has_fewer_sizes_than_it_has(tmp_path):
    """User retrial (issue 28): 4 sizes at one tokens/param ratio; the report's ladder table listed the 4 sizes and
    its rollout section said "the ladder has fewer than 4 sizes, so no prefix of 3 sizes leaves a larger run to
    forecast". The prefix of 3 sizes was there (fit.json's rollout prefixes): its 3 runs fit no L(C) form, which
    needs 4. The section now says that, from fit.json."""
    root = make_ladder(tmp_path / "study", sizes=["25K", "35K", "50K", "71K"], n_boot=10)
    fit = json.loads((root / "fit.json").read_text())
    assert fit["loss"]["rollout"]["rows"] == [] and fit["loss"]["rollout"]["prefixes"]
    section = " ".join(prose(render_report(root, tmp_path / "out", formats="html")["html"].read_text())["rollout"])
    assert "fewer than 4 sizes" not in section, section
    assert "no law form fitted on the smallest 3 sizes (3 runs) could forecast a larger run" in section, section
    assert "needs >= 4 runs" in section, section


def test_the_copy_ratio_at_the_ends_says_it_is_the_trends(tmp_path):
    """User retrial (issue 28): fit said "repeats/novel loss 0.429 -> 0.356 over 8.19x compute" and the report's
    in-context section "Copy ratio 0.429 at the smallest compute, 0.356 at the largest", beside its table of the
    runs whose smallest-compute run had a copy ratio of 0.449 (its largest 0.377): the two ends are the log-log
    trend's, which neither said. Both say so now."""
    import io

    from rich.console import Console

    from ladder.reports.render.builder import Builder
    from ladder.reports.render.study import load_study
    from ladder.reports.summary import print_fit

    root = make_ladder(tmp_path / "study", split=True, n_boot=10)
    buf = io.StringIO()
    print_fit(Builder(load_study(root)).fit_json, Console(file=buf, width=400, color_system=None))
    [line] = [ln for ln in buf.getvalue().splitlines() if "repeats/novel loss" in ln]
    assert "repeats/novel loss by its log-log trend " in line, line
    section = prose(render_report(root, tmp_path / "out", formats="html")["html"].read_text())["in-context"]
    [row] = [c for c in section if "at the smallest compute" in c]
    assert row.startswith("by its log-log trend (not a run's own"), row


def test_the_kinds_recombined_at_the_hero_have_one_name_in_fit_and_the_report(tmp_path):
    """User retrial (issue 28): at the hero fit printed "combined 1.637 [1.325, 1.89]" below the hero's own
    forecast "1.636 (90% [1.374, 1.877])"; the report's in-context table calls that number "share-weighted". The
    terminal now gives it the report's name."""
    import io

    from rich.console import Console

    from ladder.reports.render.builder import Builder
    from ladder.reports.render.study import load_study
    from ladder.reports.summary import print_fit

    root = make_ladder(tmp_path / "study", split=True, n_boot=10)
    buf = io.StringIO()
    print_fit(Builder(load_study(root)).fit_json, Console(file=buf, width=400, color_system=None))
    [line] = [ln for ln in buf.getvalue().splitlines() if ln.strip().startswith("at ") and "novel" in ln]
    assert "; share-weighted " in line and "combined" not in line, line
    page = render_report(root, tmp_path / "out", formats="html")["html"].read_text()
    assert ">share-weighted<" in page


def test_the_recommended_configurations_compute_is_its_own_runs(tmp_path):
    """User retrial (issue 28): a hero given as 32K params x 320K tokens; the report's recommended configuration
    said "Parameters 31.39K, Training tokens 319.7K, Compute 8.36e10 FLOPs", where that run does 8.35e10 (`ladder
    hero`: "FLOPs (exact) 8.35e10"): the row gave the fit's hero point (320K tokens), not the run whose shape and
    tokens (rounded to whole steps) stand above it. It now gives the run's own exact FLOPs."""
    from ladder.reports.render.fmt import fmt_flops

    root = make_ladder(tmp_path / "study", n_boot=10)
    fit = json.loads((root / "fit.json").read_text())
    rec = fit["recommendation"]
    assert rec["flops"] and fit["hero"]["compute"]
    fit["hero"]["compute"] = fit["hero"]["flops"] = 1.02 * rec["flops"]  # the point's tokens, before rounding
    (root / "fit.json").write_text(json.dumps(fit))
    page = render_report(root, tmp_path / "out", formats="html")["html"].read_text()
    [row] = [c for c in re.findall(r"<tr>(.*?)</tr>", page, flags=re.S) if ">Compute<" in c]
    assert f"{fmt_flops(rec['flops'])} FLOPs" in row, row


def test_the_forecasts_distance_has_the_digits_fit_gives(tmp_path):
    """User retrial (issue 28): `ladder fit --predict 64K:640K` gave the prediction's distance as "4.07x (beyond
    reach)" and the hero's as "2.04x the ladder's largest model"; the report's Forecasts table said "4.1×" and
    "2×". It now gives fit's 3 significant figures."""
    root = make_ladder(tmp_path / "study", n_boot=10)
    fit = json.loads((root / "fit.json").read_text())
    page = render_report(root, tmp_path / "out", formats="html")["html"].read_text()
    rows = [re.sub(r"<[^>]+>", "|", r) for r in re.findall(r"<tr>(.*?)</tr>", page, flags=re.S)]
    [hero] = [r for r in rows if "|hero|" in r and "×" in r]
    x = fit["hero"]["extrapolation"]["params"]
    assert f"{x:.3g}" != f"{x:.2g}"  # the digits tell the two apart
    assert f"|{x:.3g}×" in hero, hero


def test_the_law_forms_table_gives_every_parameter_fit_prints():
    """User retrial (issue 28): `ladder fit` printed the bounded law's plateau "U = 2.214 [1.638, 831.7]"; the
    report's law forms table gave its formula, E + 1/(1/(A/N^alpha + B/D^beta) + 1/(U - E)), with every parameter
    but U. A parameter outside the usual names is now listed too."""
    from ladder.reports.render.sections.scaling import _params_text

    p = {"E": 1.672, "A": 8.757e-27, "B": 5.184e21, "alpha": 0.0, "beta": 5.0, "U": 2.214}
    ci = {"E": [1.538, 1.835], "U": [1.638, 831.7]}
    text = _params_text(p, ci)
    assert text.startswith("E 1.672 [1.54, 1.83], A ") and text.endswith(", U 2.214 [1.64, 832]"), text


def test_fit_after_the_hero_is_scored_says_what_the_report_says(states, tmp_path, capsys):
    """User retrial (issue 28): once the hero run's final loss had scored the frozen forecast, the report said
    "Forecast loss (prediction) ... Checked against the hero run: actual 1.567, error +4.41%" and `forecast show`
    "prediction", while `ladder fit` on the same study still said "loss 1.636 (...), a projection" and warned "a
    projection, not a checked prediction". fit now says it as the report does."""
    from tests.cli_helpers import run_cli

    root = Path(shutil.copytree(states["final"][0], tmp_path / "study"))
    r = run_cli(capsys, "fit", root, "--bootstrap", "30")
    assert r.code == 0, r.stderr
    said = " ".join((r.stdout + r.stderr).split())
    [hero] = [ln for ln in r.stdout.splitlines() if ln.startswith("hero ")]
    assert hero.endswith(" interval") and ", a prediction, checked against the hero run: actual " in hero, hero
    assert "a projection, not a checked prediction" not in said and ", a projection" not in hero
    none = Path(shutil.copytree(states["none"][0], tmp_path / "unscored"))
    r = run_cli(capsys, "fit", none, "--bootstrap", "30")
    [hero] = [ln for ln in r.stdout.splitlines() if ln.startswith("hero ")]
    assert "checked against the hero run" not in hero, hero


def test_a_hero_given_as_compute_reads_its_flops_as_every_flops_figure(tmp_path, capsys):
    """User retrial (issue 28): a hero given as compute (hero.compute 1e14) on a ladder of one tokens/param: `ladder
    fit` warned "hero compute 1e+14 split by the study's tokens_per_param rule", where every other compute reads
    1.00e14 (the hero's "C = 1.00e14 FLOPs" on the line above)."""
    from ladder.plan.planner import expand, write_plan
    from ladder.studies.spec import parse_study
    from tests.cli_helpers import run_cli
    from tests.hero_fixture import study_dict

    spec = study_dict()
    spec["hero"] = {"compute": "1e14"}
    root = tmp_path / "study"
    plan = expand(parse_study(spec))
    write_plan(plan, root)
    sd = layout.StudyDir(root)
    for run in plan.runs:
        train(sd, run, law_loss(run.params, run.tokens))
    refresh(root, fit=False)
    r = run_cli(capsys, "fit", root, "--bootstrap", "20")
    assert r.code == 0, r.stderr
    said = " ".join((r.stdout + r.stderr).split())
    assert "hero compute 1.00e14 FLOPs split by" in said, said
    assert "e+14" not in said, said


def test_hero_after_the_hero_is_scored_calls_its_forecast_what_fit_calls_it(states, tmp_path, capsys):
    """User retrial (issue 28): with the hero trained and scored, `ladder fit`, `forecast show` and the report call
    its forecast a prediction checked against the hero run; `ladder hero` still said "the fit forecasts 1.636
    nats/token, 90% interval [1.425, 1.854] (projection)"."""
    from tests.cli_helpers import run_cli

    root = Path(shutil.copytree(states["final"][0], tmp_path / "study"))
    r = run_cli(capsys, "hero", root)
    assert r.code == 0, r.stderr
    [line] = [ln for ln in r.stdout.splitlines() if ln.startswith("the fit forecasts")]
    assert "(a prediction, checked against the hero run: actual " in line and "(projection)" not in line, line


def test_a_small_learning_rate_reads_as_fit_gives_it():
    """User retrial (issue 28): a hero whose peak LR is below 1e-3: `ladder fit` and `ladder hero` said "peak LR
    0.000312", the report's recommended configuration "3.12e-04". The report now gives fit's digits."""
    from ladder.reports.render.fmt import fmt_lr
    from ladder.reports.summary import _num

    for lr in (3.12e-4, 6e-5, 0.0047, 0.02):
        assert fmt_lr(lr) == _num(lr, 3) == f"{lr:.3g}", lr


def test_a_study_with_one_variant_is_never_called_variant_all(tmp_path, capsys):
    """User retrial (issue 28): a study without variants read "fit: 3 law form(s) of variant all weighted ..." in
    fit's recommendation, "the laws of variant all" under Figure 2 and "Variant all." in the in-context section:
    "all" is the fit's label for every run, not a variant's name."""
    root = make_ladder(tmp_path / "study", sizes=["25K", "35K", "50K", "71K"], n_boot=10)
    fit = json.loads((root / "fit.json").read_text())
    assert fit["meta"]["variants"] == ["all"] and fit["loss"]["rollout"]["rows"] == []  # the source is said
    assert "law form(s) weighted" in fit["hero"]["loss_source"], fit["hero"]["loss_source"]
    r = run_cli(capsys, "fit", root, "--bootstrap", "10")
    assert r.code == 0, r.stderr
    page = render_report(root, tmp_path / "out", formats="html")["html"].read_text()
    for text in (r.stdout, fit["hero"]["loss_source"], text_of(page), page):
        assert "variant all" not in text.lower(), [s for s in sentences(text) if "variant all" in s.lower()][:3]
