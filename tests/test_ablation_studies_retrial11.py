"""Re-trial 11a: a user's own studies, one per ablation kind (tied vs untied, depth vs width, batch size and
learning rate), fake-trained, fitted and rendered; the numbers the terminal, fit.json and the report give must
read alike."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from ladder import layout
from tests import hero_fixture as hf
from tests.cli_helpers import run_cli


def _fake_study(
    root: Path, ablations: dict, penalty, budgets=None, sizes=hf.SIZES, param_count=None, trained=lambda spec: True
) -> Path:
    """Plan a hero_fixture study with ``ablations``, give each run that is ``trained`` the fixture's law times
    ``1 + penalty(spec)`` (the others stay planned), collect and fit."""
    from ladder.plan.planner import expand, write_plan
    from ladder.studies.spec import parse_study

    d = hf.study_dict(name=root.name, sizes=sizes, budgets=budgets, ablations=ablations)
    if param_count:
        d["ladder"]["param_count"] = param_count
    plan = expand(parse_study(d))
    write_plan(plan, root)
    sd = layout.StudyDir(root)
    rng = np.random.default_rng(0)
    for spec in plan.runs:
        noise = float(np.exp(rng.normal(0, 0.003)))
        if not trained(spec):
            continue
        hf.train(sd, spec, hf.law_loss(spec.params, spec.tokens) * (1 + penalty(spec)) * noise)
    hf.refresh(root, n_boot=20)
    return root


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An LR x batch sweep whose optimum sits inside the grid at every rung."""

    def penalty(spec):
        lr, batch = float(spec.axes["lr_multipliers"]), float(spec.axes["batch_multipliers"])
        return 0.03 * math.log2(lr / 1.2) ** 2 + 0.02 * math.log2(batch / 0.8) ** 2

    ablations = {"batch_multipliers": [0.5, 1, 2], "lr_multipliers": [0.5, 1, 2]}
    return _fake_study(tmp_path_factory.mktemp("sweep"), ablations, penalty)


@pytest.fixture(scope="module")
def aspects(tmp_path_factory: pytest.TempPathFactory) -> Path:
    def penalty(spec):
        return 0.02 * abs(math.log2(spec.shape.d_model / spec.shape.n_layers / 16))

    return _fake_study(tmp_path_factory.mktemp("aspects"), {"aspect_ratio": [8, 16, 32]}, penalty, budgets=[1, 2])


def test_the_batch_laws_interval_reads_in_the_digits_of_the_recommended_batch(sweep):
    """fit and the report's recommendation gave the batch as "5.952K tokens (90%: 5.243K - 6.803K)" and its source
    as "... extrapolated 7.35x in compute (90% [5.24e+03, 6.8e+03])": Python's e-notation for the same bounds."""
    from ladder.reports.fits.study.fit_json import read_fit_json
    from ladder.reports.render.fmt import fmt_count

    rec = read_fit_json(layout.StudyDir(sweep).fit).recommendation
    source = rec.sources["batch_tokens"]
    lo, hi = rec.batch_tokens_ci90
    assert "e+0" not in source and f"[{fmt_count(lo)}, {fmt_count(hi)}]" in source, source
    assert "e+0" not in rec.yaml


def _titles(draw, *args) -> list[str]:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 8))
    draw(fig, *args)
    return [ax.get_title() for ax in fig.axes if ax.get_title()]


def test_a_sweeps_panel_gives_its_rungs_compute_as_the_tables_do(sweep, aspects):
    """The per-rung panels of the LR, batch and aspect-ratio sweeps were titled "25K · C = 1.1e+11", where every
    table of the report and the terminal give that compute as 1.13e11."""
    from ladder.reports.fits.study.fit_json import read_fit_json
    from ladder.reports.render.figures.ablations import draw_aspects
    from ladder.reports.render.figures.sweeps import draw_sweeps
    from ladder.reports.render.fmt import fmt_flops

    hp = read_fit_json(layout.StudyDir(sweep).fit).hparams
    dw = read_fit_json(layout.StudyDir(aspects).fit).depth_vs_width
    for titles, scales in (
        (_titles(draw_sweeps, hp.scales, "lr"), hp.scales),
        (_titles(draw_sweeps, [s for s in hp.scales if s.batch is not None], "batch"), hp.scales),
        (_titles(draw_aspects, dw.scales[:9]), dw.scales[:9]),
    ):
        assert titles and not [t for t in titles if "e+" in t], titles
        assert titles[0].endswith(f"C = {fmt_flops(scales[0].flops)}"), (titles[0], scales[0].flops)


def test_the_plans_batch_rounding_note_names_the_batch_variant_it_rounded(tmp_path, capsys):
    """A batch sweep's plan said "batch rounded ...: 25K 622 -> 1,024" while its table gave the 25K "bs x1" runs
    a batch of 1.28K: the rounded batch was bs x0.5's, and the note did not say so."""
    import yaml

    from tests.cli_helpers import run_cli

    d = hf.study_dict(name="bs", sizes=["25K", "35K", "50K", "71K"])
    d["ablations"] = {"batch_multipliers": [0.5, 1, 2]}
    d["training"]["batch_min_sequences"] = 16
    d["model"]["vocab_size"] = 512
    path = tmp_path / "bs.yaml"
    path.write_text(yaml.safe_dump(d), encoding="utf-8")
    r = run_cli(capsys, "plan", path, "--dry-run")
    assert r.code == 0, r.stderr
    note = next(line for line in r.stdout.splitlines() if "batch (tokens) rounded" in line)
    assert "25K bs x0.5 " in note and "25K 6" not in note, note


@pytest.fixture(scope="module")
def one_rung_aspects(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A depth-vs-width sweep whose aspect ratios 8, 16 and 32 make 3 shapes at 71K only: at 25K-50K two of them
    round to one model, as `ladder plan` notes."""

    def penalty(spec):
        return 0.02 * abs(math.log2(spec.shape.d_model / spec.shape.n_layers / 16))

    root = tmp_path_factory.mktemp("one-rung")
    return _fake_study(root, {"aspect_ratio": [8, 16, 32]}, penalty, sizes=["25K", "35K", "50K", "71K"])


def test_a_depth_sweep_with_one_fitted_rung_says_a_trend_needs_two(one_rung_aspects, capsys):
    """fit said "no rung has a bracketed optimum to trend: 25K: 25K: needs at least 3 aspect ratios (has 2); ...",
    though 71K had one (16.8, in fit.json): one optimum makes no trend. And the terminal's line said only "best
    aspect at hero -"."""
    from ladder.reports.fits.study.fit_json import read_fit_json
    from tests.cli_helpers import run_cli

    dw = read_fit_json(layout.StudyDir(one_rung_aspects).fit).depth_vs_width
    assert [s.scale for s in dw.scales if s.fit is not None and s.fit.opt] == ["71K"]
    assert "no rung has a bracketed optimum" not in dw.reason and "71K" in dw.reason, dw.reason
    assert "25K: 25K:" not in dw.reason and "25K: needs at least 3 aspect ratios" in dw.reason, dw.reason
    r = run_cli(capsys, "fit", one_rung_aspects, "--bootstrap", "20")
    line = next(x for x in r.stdout.splitlines() if x.startswith("depth vs width"))
    assert "71K" in line and "best aspect at hero -" not in line, line


def test_a_tie_ablation_at_fixed_total_params_does_not_claim_matched_compute(tmp_path):
    """With `ladder.param_count: total` an untied rung's head takes V x d from its body (the plan says so), so
    tied trains ~20% more FLOPs per rung; the tied-vs-untied method still said "per rung (same shape, same
    tokens) ... at exactly matched compute", and the note on the FLOPs gap said "compared at the same shape"."""
    from ladder.reports.fits.study.fit_json import read_fit_json

    def penalty(spec):
        return 0.0 if spec.shape.tied else 0.01

    root = _fake_study(tmp_path, {"tie_embeddings": [True, False]}, penalty, sizes=["40K", "55K", "75K", "100K"],
                       param_count="total")  # fmt: skip
    tie = read_fit_json(layout.StudyDir(root).fit).tied_vs_untied
    assert "exactly matched compute" not in tie.method or "shapes differ" in tie.method, tie.method
    assert not [n for n in tie.notes if "compared at the same shape" in n], tie.notes


def test_fits_batch_optimum_at_the_hero_has_the_reports_digits(sweep, capsys):
    """`ladder fit` said "batch* 5,960 [5,240, 6,800]" where the report's "Batch size at the hero" and fit's own
    recommendation table say 5.962K (90%: 5.243K - 6.803K)."""
    from ladder.reports.fits.study.fit_json import read_fit_json
    from ladder.reports.render.fmt import fmt_count
    from tests.cli_helpers import run_cli

    r = run_cli(capsys, "fit", sweep, "--bootstrap", "20")
    line = next(x for x in r.stdout.splitlines() if x.startswith("hyperparameter laws"))
    h = read_fit_json(layout.StudyDir(sweep).fit).hparams.hero
    lo, hi = h.batch_tokens_ci90
    assert f"batch* {fmt_count(h.batch_tokens)} [{fmt_count(lo)}, {fmt_count(hi)}]" in line, line


def test_a_sweep_the_study_asks_for_is_never_called_absent_while_it_trains(tmp_path, capsys):
    """Mid-way through an LR x batch sweep (only bs x1 done) fit recommended "study rule: olmo batch ... (no batch
    law: this study has no batch sweep (...))", and of a depth sweep whose aspect ratios round to two shapes per
    rung it warned "this study has no depth-vs-width sweep": both studies sweep that axis."""
    from ladder.reports.fits.study.fit_json import read_fit_json

    def penalty(spec):
        return 0.03 * math.log2(float(spec.axes["lr_multipliers"]) / 1.2) ** 2

    sweep = _fake_study(
        tmp_path / "half", {"batch_multipliers": [0.5, 1, 2], "lr_multipliers": [0.5, 1, 2]}, penalty,
        trained=lambda spec: float(spec.axes["batch_multipliers"]) == 1,
    )  # fmt: skip
    fit = read_fit_json(layout.StudyDir(sweep).fit)
    said = [fit.recommendation.sources["batch_tokens"], fit.hparams.batch.reason]
    assert not [x for x in said if "this study has no batch sweep" in x], said
    assert "batch_multipliers" in said[0], said
    assert "this study has no batch sweep" not in _report_text(sweep)

    aspects = _fake_study(
        tmp_path / "collapsed", {"aspect_ratio": [8, 16, 32]}, lambda spec: 0.0, sizes=["25K", "35K", "50K", "60K"]
    )
    fit = read_fit_json(layout.StudyDir(aspects).fit)
    said = [w for w in fit.warnings if w.startswith("depth vs width")] + [fit.depth_vs_width.reason or ""]
    assert said and not [x for x in said if "this study has no" in x], said
    assert "aspect_ratio" in said[0], said
    assert "this study has no depth-vs-width sweep" not in _report_text(aspects)


def _report_text(root: Path) -> str:
    import html as htmllib

    from ladder.reports.render.report import render_report

    return htmllib.unescape(render_report(root, root / "out", formats=("html",))["html"].read_text(encoding="utf-8"))


def test_submit_after_the_study_file_gained_sweep_points_says_to_plan_them(tmp_path, capsys):
    """A user adds `lr_multipliers: [..., 8]` to the study's study.yaml and runs `ladder submit`: it said "0
    submitted, 30 skipped; follow with `ladder status --watch`" and nothing about the new points, which fit and
    hero then name as unplanned."""
    import yaml

    from tests.cli_helpers import run_cli

    root = _fake_study(tmp_path / "s", {"lr_multipliers": [0.5, 1, 2]}, lambda spec: 0.0, sizes=["25K", "35K", "50K"])
    path = layout.StudyDir(root).study
    d = yaml.safe_load(path.read_text(encoding="utf-8"))
    d["ablations"]["lr_multipliers"] = [0.5, 1, 2, 8]
    path.write_text(yaml.safe_dump(d), encoding="utf-8")
    r = run_cli(capsys, "submit", root, "--executor", "debug")
    assert r.code == 0 and "0 submitted" in r.stdout, r
    assert "was edited since it was planned" in r.stderr and f"--out {root}" in r.stderr, r.stderr


def test_a_rung_of_three_aspect_ratios_says_why_its_optimum_has_no_interval(aspects):
    """The built-in depth-vs-width sweep has 3 aspect ratios per rung: a quadratic through 3 points leaves no
    residual to bootstrap, so every rung's 90% column was "—" with an empty note, under a method that promises "a
    bootstrap interval"."""
    from ladder.reports.fits.study.fit_json import read_fit_json

    dw = read_fit_json(layout.StudyDir(aspects).fit).depth_vs_width
    bare = [s for s in dw.scales if s.fit is not None and s.fit.opt and s.fit.ci90 is None]
    assert bare, "the fixture should have rungs of exactly 3 aspect ratios"
    assert all(any("no interval" in n for n in s.notes) for s in bare), [(s.scale, s.notes) for s in bare]


def test_runs_not_trained_yet_are_not_called_diverged_in_the_lr_sweep(tmp_path):
    """Fit mid-way through a sweep noted "25K: 6 run(s) without a finite loss (diverged) left out of the fit":
    they were queued. And a rung of 3 batch sizes whose loss does not curve up in the LR was noted "3
    batch_tokens value(s): no batch optimum (needs 3)"."""
    from ladder.reports.fits.study.fit_json import read_fit_json

    def penalty(spec):
        return 0.03 * math.log2(float(spec.axes["lr_multipliers"]) / 1.2) ** 2

    root = _fake_study(
        tmp_path / "half", {"batch_multipliers": [0.5, 1, 2], "lr_multipliers": [0.5, 1, 2]}, penalty,
        trained=lambda spec: float(spec.axes["batch_multipliers"]) == 1,
    )  # fmt: skip
    notes = read_fit_json(layout.StudyDir(root).fit).hparams.notes
    assert not [n for n in notes if "diverged" in n], notes


def test_a_batch_sweep_without_an_lr_minimum_does_not_ask_for_the_batch_sizes_it_has():
    import numpy as np

    from ladder.reports.fits.hparams.sweep import fit_one, sweep_from_fit

    lr = np.repeat([0.01, 0.02, 0.04], 3)
    batch = np.tile([1024.0, 2048.0, 4096.0], 3)
    loss = 4.0 - 0.2 * np.log(lr / 0.01) + 0.05 * np.log(batch / 2048) ** 2  # falls all the way up the LR grid
    fit, u, v, y, ok = fit_one(lr, loss, batch, window=8.0, label="71K", n_boot=10, seed=0)
    notes = sweep_from_fit(fit, u, v, y, ok, None, label="71K", n_boot=10, seed=0).notes
    assert not [n for n in notes if "3 batch_tokens value(s): no batch optimum (needs 3)" in n], notes


def test_a_batch_law_missing_for_want_of_an_lr_minimum_does_not_say_the_batches_are_missing():
    """A rung with 3 batch sizes, each falling all the way up the LR grid: the batch law said "no rung has 3 or
    more batch sizes" (and left the rung out as "fewer than 3 batch sizes")."""
    import pandas as pd

    from ladder.reports.fits.hparams.hparam_laws import fit_hparams

    rows = []
    for n, scale in ((25e3, "25K"), (50e3, "50K")):
        for lr in (0.01, 0.02, 0.04):
            for b in (1024.0, 2048.0, 4096.0):
                loss = 4.0 - 0.2 * math.log(lr / 0.01) + 0.05 * math.log(b / 2048) ** 2 - 0.1 * math.log(n / 25e3)
                rows.append({"scale": scale, "params": n, "tokens": 20 * n, "flops": 120 * n * n, "lr": lr,
                             "batch_tokens": b, "loss": loss})  # fmt: skip
    res = fit_hparams(pd.DataFrame(rows), n_boot=10, swept={"batch": "batch_multipliers [0.5, 1, 2]"})
    assert "no rung has 3 or more batch sizes" not in (res.batch.reason or ""), res.batch.reason
    assert "fewer than 3 batch sizes" not in (res.batch.reason or ""), res.batch.reason


@pytest.fixture(scope="module")
def below_the_grid(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 4-rung LR x batch sweep whose loss keeps falling towards the lowest LR at every rung."""
    rng = np.random.default_rng(0)

    def penalty(spec):  # falling towards the lowest LR, as noisy as the CPU runs of re-trial 11
        x = math.log2(float(spec.axes["lr_multipliers"]))
        return 0.02 * x - 0.005 * x * x + rng.normal(0, 0.02)

    ablations = {"lr_multipliers": [0.5, 1, 2], "batch_multipliers": [0.5, 1, 2]}
    return _fake_study(tmp_path_factory.mktemp("low"), ablations, penalty, sizes=["25K", "35K", "50K", "71K"])


def test_an_lr_optimum_below_the_grid_is_not_bounded_by_minus_infinity(below_the_grid):
    """A rung whose loss keeps falling towards the lowest LR (no minimum) showed its LR* interval as
    "−∞ – 0.0182": a learning rate is positive; the bound says only that LR* is below 0.0182."""
    from ladder.reports.fits.study.fit_json import read_fit_json

    root = below_the_grid
    scales = read_fit_json(layout.StudyDir(root).fit).hparams.scales
    assert [s for s in scales if s.lr is not None and s.lr.ci90 and s.lr.ci90[0] is None], "no one-sided LR bound"
    text = _report_text(root)
    section = text[text.index("Learning rate and batch size") :]
    assert "−∞" not in section, section[section.index("−∞") - 200 : section.index("−∞") + 50]


def test_the_rules_lr_above_what_every_rung_found_too_high_is_called_out(below_the_grid, capsys):
    """Every rung's loss still fell at its lowest LR (0.01), and the recommendation gave the hero the OLMo rule's
    0.02 with no word beyond "no LR law": an LR the whole ladder measured as too high."""
    from ladder.reports.fits.study.fit_json import read_fit_json

    fit = read_fit_json(layout.StudyDir(below_the_grid).fit)
    assert fit.recommendation.sources["lr"].startswith("study rule") and fit.recommendation.lr > 0.01
    said = [w for w in fit.warnings if "every rung's sweep tried" in w and "peak LR" in w]
    assert len(said) == 1, fit.warnings
    assert "0.01 at 25K" in said[0] and "0.01 at 71K" in said[0] and "lr_multipliers" in said[0], said[0]
    out = run_cli(capsys, "fit", below_the_grid).stdout
    assert "peak LR the study gives the hero" in " ".join(out.split()), out


def test_a_batch_transferred_from_one_rung_reads_its_optimum_as_a_count_and_its_sweep_as_whole():
    """A real 4-size LR x batch sweep whose batch optimum was usable at 25K only: the recommendation said
    "transfer by rule: the batch sweep covers one size only (25K, optimum 1.66e+03 = 1.34x the rule there)": the
    sweep covered all four sizes, and the optimum is a batch of 1.66K tokens."""
    from types import SimpleNamespace

    from ladder.model.recipe import rule_batch_tokens
    from ladder.reports.fits.recommend import _transfer
    from ladder.studies.spec import parse_study

    study = parse_study(hf.study_dict(ablations={"batch_multipliers": [0.5, 1, 2]}))
    one = {"scale": "25K", "y": 1660.0, "params": 25248.0, "params_non_embedding": 25248.0, "flops": 3.77e10}
    law = SimpleNamespace(single=one)
    hero_value, hero_text = rule_batch_tokens(study.training, 400e3, 2e13)
    _, _, text = _transfer(study, law, "batch", rule_batch_tokens, hero_value, hero_text)
    assert "e+0" not in text and "optimum 1.66K" in text, text
    assert "covers one size only" not in text and "usable optimum at one size only (25K" in text, text


def test_the_plan_says_when_a_swept_aspect_ratio_lands_far_from_its_target(tmp_path, capsys):
    """`aspect_ratio: [0.5, 16]` planned "ar0.5" runs of shape 16x10 (aspect 1.6) at 25K, and the depth-vs-width
    fit reads the shapes' own aspect: the plan said nothing of the 3x miss (it says a size 10% off its target)."""
    import yaml

    from tests.cli_helpers import run_cli

    d = hf.study_dict(name="ar", sizes=["25K", "35K", "50K"], ablations={"aspect_ratio": [0.5, 16]})
    d["model"]["vocab_size"] = 512
    path = tmp_path / "ar.yaml"
    path.write_text(yaml.safe_dump(d), encoding="utf-8")
    r = run_cli(capsys, "plan", path, "--dry-run")
    assert r.code == 0, r.stderr
    note = [line for line in r.stdout.splitlines() if "aspect ratio" in line and line.startswith("note")]
    assert note and "ar0.5" in note[0] and "25K" in note[0] and "1.6" in note[0], r.stdout


def test_the_undetermined_split_reads_compute_and_params_as_everything_else_does():
    """Every ablation study with budgets printed "not advice: the chinchilla law's 90% interval for N_opt at 6ND =
    1.92e+13, [9.97e+04, 9.33e+05], spans 9.36x" beside "C = 2.13e13 FLOPs" and counts like 397.7K."""
    from ladder.reports.fits.loss.allocation import undetermined

    text = undetermined({"form": "chinchilla", "compute_6nd": 1.92e13, "ci90": {"params": [99700.0, 933000.0]}})
    assert "e+" not in text and "6ND = 1.92e13, [99.7K, 933K]" in text, text


def test_an_unbounded_compute_multiplier_reads_as_the_report_gives_it():
    """A real 4-rung tied-vs-untied ladder: fit said "untied reaches tied's loss with 0.00979x [<1e-06, >1e+06]
    the compute" where the report says "0.00979× (90%: unbounded)"."""
    from ladder.reports.fits.ablations.calls import multiplier_text

    assert multiplier_text(0.00979, [None, None]) == "untied reaches tied's loss with 0.00979x [unbounded] the compute"
    assert "e+" not in multiplier_text(0.5, [0.2, None]) and "e-0" not in multiplier_text(0.5, [None, 0.9])


def test_fit_runs_of_a_sweep_without_a_law_does_not_say_fitted(tmp_path, capsys):
    """`ladder fit --runs results.csv` of a real LR x batch sweep whose optimum lay below the grid at every rung
    said "hyperparameter laws: fitted (no hero to evaluate them at ...)": no law was fitted."""
    from tests.cli_helpers import run_cli

    def penalty(spec):  # the best LR lies above the grid at every rung: no rung has a bracketed optimum
        return 0.03 * math.log2(float(spec.axes["lr_multipliers"]) / 4) ** 2

    root = _fake_study(tmp_path / "edge", {"lr_multipliers": [0.25, 0.5, 1]}, penalty, sizes=["25K", "35K", "50K"])
    r = run_cli(capsys, "fit", "--runs", layout.StudyDir(root).path / "results.csv", "--bootstrap", "20")
    assert r.code == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("hyperparameter laws"))
    assert "fitted (" not in line and "no law" in line, line
