"""Re-trial 12 of issue 28, item 3 (refuse early): a new user's own studies, validated, planned, fake-trained
(no training), fitted. What `ladder fit` leaves out or refuses for a reason the design already holds must be said by
`studies validate` and `plan` before any run trains, in the fit's own terms; and neither may refuse or deny what the
fit does."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests import hero_fixture as hf
from tests.cli_helpers import run_cli


def _study_file(tmp_path: Path, name: str = "s", **kw) -> Path:
    """A hero_fixture study a user could run (a vocabulary data preparation accepts) as a YAML file."""
    d = hf.study_dict(name=name, **kw)
    d["model"]["vocab_size"] = 320
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(d), encoding="utf-8")
    return path


def _said(r) -> str:
    return " ".join(r.stderr.split())


def _rollout_rows(root: Path) -> list:
    return (json.loads((root / "fit.json").read_text())["loss"].get("rollout") or {}).get("rows") or []


def test_three_sizes_whose_budgets_share_compute_levels_are_not_denied_a_rollout(tmp_path, capsys):
    """3 sizes 1.4x apart at budgets 0.5x, 1x, 2x (a wsd trunk and its branches): validate and plan warned "no rollout
    backtest, which needs >= 4 sizes", and `ladder fit` on the trained ladder ran one (4 forecasts): the fit grows
    such a ladder by compute level, not by size."""
    sizes, budgets = hf.SIZES[:3], [0.5, 1, 2]
    spec = _study_file(tmp_path, sizes=sizes, budgets=budgets)
    for command in (("studies", "validate"), ("plan", "--dry-run")):
        r = run_cli(capsys, *command, spec)
        assert r.code == 0 and "rollout" not in r.stderr, _said(r)
    root = hf.make_ladder(tmp_path / "fitted", sizes=sizes, budgets=budgets, n_boot=5)
    assert _rollout_rows(root)
    # 3 sizes 2x apart at the same budgets share no compute level: neither has a rollout, and the plan says so
    wide = ["25K", "50K", "100K"]
    r = run_cli(capsys, "studies", "validate", _study_file(tmp_path, "wide", sizes=wide, budgets=budgets))
    assert r.code == 0 and "no rollout backtest, which needs >= 4 sizes" in _said(r), _said(r)
    assert not _rollout_rows(hf.make_ladder(tmp_path / "wide", sizes=wide, budgets=budgets, n_boot=5))


def _isoflop_file(tmp_path: Path, name: str, points: int, span: float = 8.0) -> Path:
    d = hf.study_dict(name=name)
    d["model"]["vocab_size"] = 320
    d["ladder"] = {"mode": "isoflop", "compute_budgets": [1e12], "isoflop_points": points, "isoflop_span": span}
    d["hero"] = {"compute": 1e14}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(d), encoding="utf-8")
    return path


def _fake_fit(tmp_path: Path, spec: Path, capsys):
    """Plan ``spec`` (past the fit check), give every run the fixture's law as its loss, collect and fit."""
    from ladder import layout
    from ladder.plan.planner import read_plan

    root = tmp_path / (spec.stem + "-study")
    assert run_cli(capsys, "plan", spec, "--out", root, "--no-fit-check").code == 0
    sd = layout.StudyDir(root)
    for run in read_plan(root)[1]:
        hf.train(sd, run, hf.law_loss(run.params, run.tokens))
    assert run_cli(capsys, "collect", root).code == 0
    return run_cli(capsys, "fit", root, "--bootstrap", "5")


def test_an_isoflop_budget_of_five_sizes_is_not_refused_when_the_fit_fits_it(tmp_path, capsys):
    """One isoFLOP budget of 5 sizes (5 runs, 5 tokens/param ratios): validate and plan refused it ("either >= 2
    tokens/param ratios with >= 6 runs for the Chinchilla law"), and `ladder fit` fitted it: the overtrain law has
    4 constants and needs 5 runs. With 4 sizes both refuse, and the refusal names the isoflop fields to grow."""
    five = _isoflop_file(tmp_path, "five", 5)
    for command in (("studies", "validate"), ("plan", "--dry-run")):
        r = run_cli(capsys, *command, five)
        assert r.code == 0, _said(r)
    r = _fake_fit(tmp_path, five, capsys)
    assert r.code == 0 and "overtrain" in r.stdout, r.stderr
    four = _isoflop_file(tmp_path, "four", 4, span=2.0)
    r = run_cli(capsys, "studies", "validate", four)
    assert r.code == 2 and ">= 5 runs for its (N, D) laws" in r.stderr, r.stderr
    assert "ladder.compute_budgets" in r.stderr and "ladder.sizes" not in r.stderr, r.stderr
    r = _fake_fit(tmp_path, four, capsys)
    assert r.code == 2 and "overtrain: needs >= 5 runs" in r.stderr, r.stderr


def test_the_fewest_constants_of_an_n_d_law_validate_counts_are_the_fits():
    from ladder.plan import plausibility
    from ladder.reports.fits.loss import loss_forms
    from ladder.reports.fits.runs import SIZE_TOL

    nd = [f.engine.n_params for f in loss_forms.LOSS_FORMS.values() if not f.on_compute]
    assert plausibility.FIT_ND_PARAMS == min(nd) and plausibility.FIT_MIN_SPREAD == loss_forms.MIN_SPREAD
    assert plausibility.FIT_SIZE_TOL == SIZE_TOL and plausibility.FIT_LEVEL_TOL == loss_forms.LEVEL_TOL
