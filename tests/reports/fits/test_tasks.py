"""Task scaling (two-step OLMo-ladder method): recovers known laws, covers the truth, says what is wrong."""

import json

import numpy as np
import pandas as pd
import pytest

from ladder.errors import FitError
from ladder.reports.fits.loss import forecast_loss
from ladder.reports.fits.runs import Runs
from ladder.reports.fits.tasks import (
    collinear,
    fit_task,
    fit_tasks,
    sigmoid,
    task_columns,
)
from tests.parallel import map_reps

SIG = (0.7, 0.25, -4.0, 2.5)  # a, b, k, L0
HERO = {"params": 1e9, "tokens": 2e10}


def nd_loss(n, d):
    return 0.8 + 400 / n**0.34 + 100 / d**0.28


def compute_loss(c):
    return 0.9 + (1e16 / c) ** 0.3


def ladder(seed=0, ratios=(10, 20, 40), law="nd", noise_loss=0.01, noise_acc=0.01, sizes=5):
    rng = np.random.default_rng(seed)
    rows = []
    for n in np.geomspace(1e6, 1e8, sizes):
        for r in ratios:
            d = r * n
            c = 6 * n * d
            loss = (nd_loss(n, d) if law == "nd" else compute_loss(c)) * np.exp(rng.normal(0, noise_loss))
            acc = sigmoid(SIG, np.array([loss]))[0] + rng.normal(0, noise_acc)
            rows.append(
                {
                    "run_id": f"r{len(rows)}",
                    "status": "done",
                    "params": n,
                    "tokens": d,
                    "flops": c,
                    "task/code/bpb": loss,
                    "task/code/acc": acc,
                    "task/code/acc_norm": acc,
                    "task/ppl/bits_per_byte": loss * 1.1,
                }
            )
    return pd.DataFrame(rows)


def test_two_step_fit_recovers_known_laws_and_the_interval_covers_the_hero():
    fit = fit_task(ladder(1), "code", hero=HERO, n_boot=100, seed=0)
    assert fit.step1.form == "nd" and fit.loss_metric == "bpb" and fit.acc_metric == "acc"
    p1, p2 = fit.step1.params, fit.step2.params
    assert p1["alpha"] == pytest.approx(0.34, abs=0.05)
    assert p1["E"] == pytest.approx(0.8, abs=0.15)
    assert p2["a"] == pytest.approx(0.7, abs=0.03) and p2["b"] == pytest.approx(0.25, abs=0.02)
    assert p2["k"] == pytest.approx(-4.0, rel=0.15) and p2["L0"] == pytest.approx(2.5, abs=0.05)
    true_loss = nd_loss(HERO["params"], HERO["tokens"])
    true_acc = sigmoid(SIG, np.array([true_loss]))[0]
    h = fit.hero
    assert h.loss == pytest.approx(true_loss, rel=0.05) and h.acc == pytest.approx(true_acc, abs=0.02)
    assert h.loss_interval[0] <= true_loss <= h.loss_interval[1]
    assert h.acc_interval[0] <= true_acc <= h.acc_interval[1]
    assert h.acc_prediction_interval[0] <= h.acc_interval[0] + 1e-9
    assert h.flops_estimated and h.flops == pytest.approx(6 * 1e9 * 2e10)
    assert fit.bootstrap["succeeded"] >= 90


def test_the_accuracy_prediction_interval_contains_the_interval():
    h = fit_task(ladder(1), "code", hero=HERO, n_boot=100, seed=0).hero
    assert (
        h.acc_prediction_interval[0] <= h.acc_interval[0] + 1e-9 and h.acc_prediction_interval[1] >= h.acc_interval[1]
    )


def _hero_intervals(seed):
    h = fit_task(ladder(200 + seed), "code", hero=HERO, n_boot=60, seed=seed).hero
    return h.loss_interval, h.acc_interval


def test_hero_intervals_cover_the_truth_about_as_often_as_they_claim():
    true_loss = nd_loss(HERO["params"], HERO["tokens"])
    true_acc = sigmoid(SIG, np.array([true_loss]))[0]
    trials = 12
    intervals = map_reps(_hero_intervals, [(seed,) for seed in range(trials)])
    covered_loss = sum(lo <= true_loss <= hi for (lo, hi), _ in intervals)
    covered_acc = sum(lo <= true_acc <= hi for _, (lo, hi) in intervals)
    # 90% intervals: 9 or more of 12 unless something is off (P(<= 8 | p = 0.9) is about 2.6%)
    assert covered_loss >= 9 and covered_acc >= 9, (covered_loss, covered_acc)


def test_fixed_ratio_ladder_uses_the_compute_form():
    runs = ladder(1, ratios=(20,), law="compute", sizes=6)
    assert collinear(runs["params"].to_numpy(), runs["tokens"].to_numpy())[0]
    hero = {"flops": 1e20}
    fit = fit_task(runs, "code", hero=hero, n_boot=100)
    assert fit.step1.form == "compute" and "collinear" in fit.step1.reason
    assert fit.step1.params["gamma"] == pytest.approx(0.3, abs=0.05)
    true_loss = compute_loss(1e20)
    true_acc = sigmoid(SIG, np.array([true_loss]))[0]
    assert fit.hero.loss == pytest.approx(true_loss, rel=0.08)
    assert fit.hero.acc_interval[0] <= true_acc <= fit.hero.acc_interval[1]
    assert not fit.hero.flops_estimated
    with pytest.raises(FitError, match="collinear"):
        fit_task(runs, "code", form="nd", n_boot=0)


def test_to_dict_is_plain_json_with_everything_to_plot():
    runs = ladder(2)
    runs.loc[0, "task/code/acc"] = np.nan  # a run without the accuracy is left out, with a warning
    d = fit_task(runs, "code", hero=HERO, n_boot=30).to_dict()
    text = json.dumps(d, allow_nan=False)
    assert json.loads(text) == d
    assert d["n_runs"] == 14 and any("left out" in w for w in d["warnings"])
    point_keys = {"run_id", "params", "tokens", "flops", "loss", "loss_fit", "acc", "acc_fit", "acc_chain"}
    assert point_keys <= set(d["points"][0])
    assert len(d["curves"]["step1"]) == 3  # one per tokens/param ratio (the hero's 20 is one of them)
    c = d["curves"]["step1"][0]
    assert len(c["flops"]) == len(c["loss"]) == len(c["loss_lo"])
    assert max(c["flops"]) >= 6 * 1e9 * 2e10
    s2 = d["curves"]["step2"]
    assert len(s2["loss"]) == len(s2["acc"]) == len(s2["acc_hi"]) and min(s2["loss"]) <= d["hero"]["loss"]
    assert d["hero"]["acc_interval"][0] <= d["hero"]["acc"] <= d["hero"]["acc_interval"][1]
    assert d["step1"]["formula"] and d["step2"]["formula"] and d["loss_column"] == "task/code/bpb"


def test_perplexity_task_gets_step_one_only_and_fit_tasks_collects_errors():
    runs = ladder(3)
    runs["task/broken/acc"] = 0.3  # accuracy but no loss column
    report = fit_tasks(runs, hero=HERO, n_boot=20)
    assert set(report.fits) == {"code", "ppl"}
    ppl = report.fits["ppl"]
    assert ppl.loss_metric == "bits_per_byte" and ppl.step2 is None and ppl.hero.acc is None
    assert ppl.curves["step2"] is None
    report = fit_tasks(runs, ["code", "broken", "nope"], hero=HERO, n_boot=0)
    assert "task loss" in report.errors["broken"] and "bpb" in report.errors["broken"]
    assert "tasks present" in report.errors["nope"]
    json.dumps(report.to_dict(), allow_nan=False)
    assert task_columns(runs)["code"] == ["bpb", "acc", "acc_norm"]


def test_error_messages():
    runs = ladder(4)
    with pytest.raises(FitError, match="at least 5"):
        fit_task(runs.iloc[:4], "code")
    with pytest.raises(FitError, match="step 1 needs at least 4"):
        fit_task(runs.iloc[:3], "ppl")
    with pytest.raises(FitError, match="no column 'task/code/exact_match'"):
        fit_task(runs, "code", acc_metric="exact_match")
    with pytest.raises(FitError, match="no task/"):
        fit_tasks(runs.drop(columns=[c for c in runs.columns if c.startswith("task/")]))
    with pytest.raises(FitError, match="hero needs flops, or params and tokens"):
        fit_task(runs.iloc[:5], "code", hero={"params": 1e9}, form="compute", n_boot=0)
    with pytest.raises(FitError, match="params and tokens"):
        fit_task(runs, "code", hero={"flops": 1e20}, form="nd", n_boot=0)
    failed = runs.copy()
    failed.loc[:10, "status"] = "diverged"
    with pytest.raises(FitError, match="4 runs"):
        fit_task(failed, "code")


def test_step_one_is_the_loss_laws_forecast_on_the_task_loss():
    runs = ladder(1)
    fit = fit_task(runs, "code", hero=HERO, n_boot=50, seed=0)
    s1 = fit.to_dict()["step1"]
    assert set(s1["forms"]) == {"chinchilla", "overtrain", "ratio", "frontier"}
    weights = {k: f["weight"] for k, f in s1["forms"].items()}
    assert sum(weights.values()) == pytest.approx(1.0) and s1["primary"] == max(weights, key=weights.get)
    assert all(f["rollout"]["rms_pct"] >= 0 and f["huber_delta"] == 1e-3 for f in s1["forms"].values())
    assert "weighted by rollout error" in s1["reason"] and s1["calibration"]["factor"] >= 1.0
    assert s1["rollout"]["forecasts"] == s1["calibration"]["n"] > 0 and "2%" in s1["reach"]
    # the same machinery as the loss laws: forecast_loss on the task loss gives the same hero forecast
    data = Runs(runs["params"], runs["tokens"], runs["task/code/bpb"], runs["run_id"])
    direct = forecast_loss(data, HERO["params"], HERO["tokens"], n_boot=50, seed=0)
    assert {k: direct.weights.get(k, 0.0) for k in weights} == pytest.approx(weights)
    assert fit.hero.loss == pytest.approx(direct.points[0].loss, rel=1e-9)
    assert set(fit.hero.by_form) == set(weights) and fit.hero.params_x == pytest.approx(10.0)
    assert fit.hero.loss_prediction_interval[0] <= fit.hero.loss_interval[0] <= fit.hero.loss
    assert fit.hero.loss <= fit.hero.loss_interval[1] <= fit.hero.loss_prediction_interval[1]


def test_too_few_sizes_to_backtest_fits_the_compute_law_by_the_engine_directly():
    fit = fit_task(ladder(5, sizes=2), "code", hero=HERO, n_boot=50)
    assert fit.step1.form == "compute" and fit.step1.primary == "compute"
    assert "no law form can be backtested" in fit.step1.reason and "needs runs at >= 3 model sizes" in fit.step1.reason
    assert set(fit.step1.params) == {"E", "C0", "gamma"} and fit.step1.calibration["factor"] == 1.0
    lo, hi = fit.hero.loss_interval
    assert lo < fit.hero.loss < hi and fit.hero.beyond_reach


def test_a_task_loss_that_rises_with_size_forecasts_without_a_numpy_warning():
    """`ladder fit` on a micro ladder too small to learn its tasks (the task loss rises with size) printed numpy's
    "RuntimeWarning: overflow encountered in exp" from the hero's prediction draws."""
    import warnings

    runs = pd.DataFrame(
        {
            "run_id": ["a", "b", "c", "d"],
            "status": "done",
            "params": [4144, 5968, 8272, 11104],
            "tokens": [33024, 47520, 66240, 88704],
            "flops": [1.93e9, 3.43e9, 5.70e9, 1.19e10],
            "task/ppl/bits_per_byte": [10.72, 11.31, 10.82, 13.86],
        }
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        report = fit_tasks(runs, hero={"params": 1e6, "tokens": 8e6}, n_boot=200)
    assert report.errors == {} and report.fits["ppl"].hero.loss > 0


def test_a_task_that_cannot_be_fitted_is_named_once_in_the_fits_warnings():
    """`ladder fit` warned "task ladder_py_next_line: task 'ladder_py_next_line': 4 runs with ...": the name twice."""
    from ladder.reports.fits.study.parts import tasks

    runs = ladder(0, ratios=(20,), sizes=4)
    warnings: list[str] = []
    tasks(runs, {"params": 1e9, "tokens": 2e10, "flops": 1.2e20}, {}, warnings, n_boot=20, seed=0)
    [said] = [w for w in warnings if "code" in w]
    assert said.count("code") == 1 + said.count("task/code/"), said


def test_the_reports_task_section_names_a_task_that_cannot_be_fitted_once(tmp_path):
    """The report said "ladder_py_next_line: no forecast (task 'ladder_py_next_line': 4 runs ...)"."""
    from ladder import layout
    from ladder.reports.render.builder import Builder
    from ladder.reports.render.sections.tasks import tasks as tasks_section
    from ladder.reports.render.study import load_study
    from tests.hero_fixture import make_ladder
    from tests.reports.texts import texts

    root = make_ladder(tmp_path / "s", n_boot=10)
    fit = json.loads(layout.StudyDir(root).fit.read_text())
    why = "4 runs with task/code/bpb and task/code/acc; the step-2 sigmoid has 4 parameters and needs at least 5 runs"
    fit["tasks"] = {"available": True, "tasks": {}, "errors": {"code": f"task 'code': {why}"}}
    layout.StudyDir(root).fit.write_text(json.dumps(fit))
    said = texts(tasks_section(Builder(load_study(root))))
    assert f"code: no forecast ({why})" in said, said


def test_task_laws_are_fitted_on_the_runs_of_the_loss_law_not_every_variant(tmp_path, capsys):
    """The main job's task laws were fitted on all 37 runs, tied and untied, while its loss law used the 18 tied
    ones: the tied hero's task forecast leaned on the untied rungs, and the report put the hero at 3.97x "the
    ladder's largest model" (the untied extra rung) in the task section and at 7.96x in the loss section."""
    from tests.cli_helpers import run_cli

    a = ladder(0).assign(variant="a")
    b = ladder(1).assign(variant="b", run_id=[f"b{i}" for i in range(15)])
    a["loss"], b["loss"] = a["task/code/bpb"], a["task/code/bpb"].to_numpy() * 1.3
    b["task/code/bpb"] *= 0.5  # another variant's task loss: far lower than the hero's variant's
    path = tmp_path / "runs.csv"
    pd.concat([a, b]).to_csv(path, index=False)
    r = run_cli(capsys, "fit", "--runs", str(path), "--json", "--bootstrap", "50")
    assert r.code == 0, r.stderr
    fit = r.json()
    assert fit["loss"]["variant"] == "a" and fit["meta"]["n_law_runs"] == 15
    code = fit["tasks"]["tasks"]["code"]
    assert code["n_runs"] == 15 and {p["run_id"] for p in code["points"]} == set(a["run_id"])
    assert code["step1"]["params"]["E"] == pytest.approx(0.8, abs=0.1)  # variant a's law (b's floor is 0.4)


@pytest.mark.parametrize("seed, reach", [(0, None), (1, "3.16x")])
def test_the_heros_task_warning_says_how_far_step_one_stayed_within_2_percent(seed, reach):
    """The main job's task warning read "beyond the distance at which step 1's rollout forecasts stayed within 2%"
    where no forecast had: the nearest had already erred by more (a reach of 1x)."""
    report = fit_tasks(ladder(seed, noise_loss=0.03), hero=HERO, n_boot=50)
    fit = report.fits["code"]
    assert fit.step1.reach["2%"]["params_x"] == pytest.approx(3.1623 if reach else 1.0, rel=1e-3)
    [said] = [w for w in fit.warnings if w.startswith("the hero is 10x")]
    if reach:
        assert said.endswith(f"beyond the distance at which step 1's rollout forecasts stayed within 2% ({reach})")
    else:
        assert said.endswith("step 1's rollout forecasts erred by more than 2% already at the nearest distance")
        assert "stayed within" not in said
