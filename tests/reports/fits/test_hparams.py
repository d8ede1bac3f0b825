"""Hyperparameter laws recover known truths from synthetic sweeps: per-rung optima of a surface of ln loss over
(ln lr, ln batch), their power laws in N and D (Step Law's constants), one-size sweeps that transfer by the
study's rule, and the LR and batch at a predicted (N, D) through ``ladder fit --runs ... --predict``."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from ladder.errors import FitError
from ladder.reports.fits.hparams import (
    fit_hparams,
    fit_log_quadratic,
    fit_sweep,
    group_scales,
)
from tests.reports.fits.synthetic import CU, STEP_A, STEP_B, STEP_BD, step_batch, step_law_grid, step_lr

LN2_SQ = math.log(2) ** 2
K_LR, A_LR = 3e-3, -0.12  # lr*(C) = K_LR (C / 1e17)^A_LR
K_B, A_B = 2.0**18, 0.3  # B*(C) = K_B (C / 1e17)^A_B
CURV_LR, CURV_B = 0.05, 0.03


def lr_star(c):
    return K_LR * (c / 1e17) ** A_LR


def b_star(c):
    return K_B * (c / 1e17) ** A_B


def lr_sweep(computes=(1e16, 1e17, 1e18, 1e19), *, noise=0.002, seed=0, offset=1.37, n_lr=7, shift=None):
    """loss = L0(C) + c (ln lr - ln lr*(C))^2 on a factor-2 grid that never hits lr* exactly."""
    rng = np.random.default_rng(seed)
    rows = []
    for i, c in enumerate(computes):
        grid = lr_star(c) * offset * 2.0 ** (np.arange(n_lr) - n_lr // 2)
        if shift and i in shift:
            grid = grid * shift[i]
        for lr in grid:
            loss = 3.5 - 0.15 * math.log10(c / 1e16) + CURV_LR * math.log(lr / lr_star(c)) ** 2 + rng.normal(0, noise)
            rows.append({"scale": f"r{i}", "params": c / 1e11, "tokens": 1e11 / 6, "flops": c, "loss": loss, "lr": lr})
    return pd.DataFrame(rows)


def lr_batch_sweep(computes=(1e17, 1e18, 1e19), *, noise=0.002, seed=0):
    """A 2-D grid; the LR optimum moves with batch (lr* ~ sqrt(B)), the batch optimum follows B*(C)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i, c in enumerate(computes):
        for lr in lr_star(c) * 1.3 * 2.0 ** np.arange(-3, 4):
            for b in b_star(c) * 0.8 * 2.0 ** np.arange(-2, 3):
                u, v = math.log(lr / lr_star(c)), math.log(b / b_star(c))
                loss = 3.0 - 0.1 * i + CURV_LR * (u - 0.5 * v) ** 2 + CURV_B * v**2 + rng.normal(0, noise)
                rows.append(
                    {
                        "scale": f"r{i}",
                        "params": c / 1e11,
                        "tokens": 1e11 / 6,
                        "flops": c,
                        "loss": loss,
                        "lr": lr,
                        "batch_tokens": b,
                    }
                )
    return pd.DataFrame(rows)


def test_recovers_lr_law_and_off_grid_optima():
    df = lr_sweep()
    res = fit_hparams(df, hero_flops=1e21, hero_params=1e10)
    assert res.has_lr_sweep and not res.has_batch_sweep
    for row in res.scales:
        opt = row.fit.lr
        truth = lr_star(row.flops)
        assert opt.status == "ok"
        assert opt.opt == pytest.approx(truth, rel=0.04)
        # a smooth optimum, not a grid point: the grid is offset by 1.37x from the truth
        assert min(abs(math.log(opt.opt / g)) for g in opt.grid) > 0.15
        assert opt.ci90[0] < opt.opt < opt.ci90[1]
        assert opt.penalty_2x == pytest.approx(CURV_LR * LN2_SQ, rel=0.1)
    a = res.lr.params["a"]
    assert a == pytest.approx(A_LR, abs=0.015)
    assert res.lr.ci90["a"][0] < a < res.lr.ci90["a"][1]
    lo, hi = res.lr.hero_ci90
    assert lo < res.lr.hero_value < hi
    assert res.lr.hero_value == pytest.approx(lr_star(1e21), rel=0.12)
    assert res.lr.extrapolation == pytest.approx(100.0)
    assert res.lr_penalty.hero_value == pytest.approx(CURV_LR * LN2_SQ, rel=0.2)
    # every rung has the same D: N and D cannot be separated, so the law is in compute and says so
    assert res.lr.form == "compute" and "cannot separate N from D" in res.lr.notes[0]
    assert "no batch sweep" in res.batch.reason


def test_recovers_lr_and_batch_from_a_surface():
    res = fit_hparams(lr_batch_sweep(), hero_flops=1e21)
    assert res.has_batch_sweep
    for row in res.scales:
        assert row.fit.lr.opt == pytest.approx(lr_star(row.flops), rel=0.05)
        assert row.fit.batch.opt == pytest.approx(b_star(row.flops), rel=0.05)
        assert row.fit.lr.penalty_2x == pytest.approx(CURV_LR * LN2_SQ, rel=0.1)
        # LR re-tuned: the profile curvature is CURV_B; at a fixed LR it is CURV_B + CURV_LR / 4
        assert row.fit.batch.penalty_2x == pytest.approx(CURV_B * LN2_SQ, rel=0.15)
        # curvatures are of ln loss: times the loss they are the loss-space ones
        fixed = row.fit.batch.extra["curvature_fixed_lr"] * row.fit.batch.loss_min
        assert fixed == pytest.approx(CURV_B + CURV_LR / 4, rel=0.1)
        assert len(row.fit.lr_curves) == 5  # one parabola per batch size
        # the per-batch LR optimum moves as sqrt(B)
        lrs = [c["lr_opt"] for c in row.fit.lr_curves]
        assert lrs[-1] / lrs[0] == pytest.approx(2.0**2, rel=0.15)
    assert res.batch.params["a"] == pytest.approx(A_B, abs=0.03)
    assert res.lr.params["a"] == pytest.approx(A_LR, abs=0.03)
    lo, hi = res.batch.hero_ci90
    assert lo < b_star(1e21) * 1.1 and hi > b_star(1e21) * 0.9


def test_edge_of_grid_is_flagged_and_left_out():
    df = lr_sweep(shift={3: 16.0})  # the largest rung's grid starts 16x above its optimum
    res = fit_hparams(df, hero_flops=1e21)
    edge = res.scales[3].fit.lr
    assert edge.status == "edge" and edge.edge_side == "low"
    assert "optimum at grid edge" in edge.message and "widen the sweep" in edge.message
    assert edge.opt < min(edge.grid)  # the vertex extrapolates beyond the grid
    assert "r3" in res.lr.excluded and res.lr.n_points == 3
    assert res.lr.params["a"] == pytest.approx(A_LR, abs=0.03)
    kept = fit_hparams(df, hero_flops=1e21, use_edge=True)
    assert kept.lr.n_points == 4
    assert any("widen the sweep" in n for n in res.notes)


def test_best_point_at_grid_end_is_flagged_even_when_vertex_inside():
    lr = np.array([1.0, 2.0, 4.0, 8.0]) * 1e-3
    loss = 3 + CURV_LR * np.log(lr / 1.2e-3) ** 2
    opt = fit_sweep(lr, loss).lr
    # a parabola of ln loss through a parabola of loss: the vertex moves by a little (was exact in loss)
    assert opt.opt == pytest.approx(1.2e-3, rel=0.03)
    assert opt.status == "edge" and opt.edge_side == "low"


def test_no_minimum_is_reported():
    opt = fit_sweep([1e-3, 2e-3, 4e-3, 8e-3], [3.3, 3.27, 3.18, 3.0]).lr
    assert opt.status == "no_minimum" and opt.opt is None
    assert "beyond the high end" in opt.message
    json.dumps(opt.to_dict(), allow_nan=False)


def test_window_limits_asymmetric_walls():
    """Far from the optimum the loss is not a parabola (a steep wall at high LR); the window keeps the fit local."""
    u = np.log(2.0) * np.arange(-6, 7)
    loss = 3 + CURV_LR * u**2 + 0.02 * np.clip(u, 0, None) ** 3
    lr = 1e-3 * np.exp(u)
    local = fit_sweep(lr, loss, window=4.0).lr
    everything = fit_sweep(lr, loss, window=None).lr
    assert abs(math.log(local.opt / 1e-3)) < abs(math.log(everything.opt / 1e-3))
    assert local.opt == pytest.approx(1e-3, rel=0.12)
    assert local.n_used < everything.n_used


def test_too_few_points_skip_a_scale_with_reason():
    df = lr_sweep()
    two = df[(df["scale"] != "r1") | df["lr"].isin(sorted(df.loc[df["scale"] == "r1", "lr"])[:2])]
    res = fit_hparams(two, hero_flops=1e21)
    r1 = next(s for s in res.scales if s.scale == "r1")
    assert r1.fit is None and "only 2 learning rate" in r1.skipped and "at least 3" in r1.skipped
    assert "r1" in res.lr.excluded and res.lr.n_points == 3
    with pytest.raises(FitError, match="at least 3"):
        fit_sweep([1e-3, 2e-3], [3.0, 3.1])


def test_fewer_than_two_scales_gives_no_law_with_reason():
    df = lr_sweep(computes=(1e17,))
    res = fit_hparams(df, hero_flops=1e21)
    assert res.has_lr_sweep and res.lr.law is None
    assert "at least 2 rungs" in res.lr.reason and res.lr.hero_value is None
    with pytest.raises(FitError, match="at least 2 rungs"):
        fit_hparams(df, hero_flops=1e21, require=True)
    json.dumps(res.to_dict(), allow_nan=False)


def test_study_without_lr_sweep_says_so():
    df = lr_sweep()
    res = fit_hparams(df.drop(columns="lr"))
    assert not res.has_lr_sweep and "no LR sweep" in res.lr.reason
    one_lr = df.groupby("scale").head(1)
    res = fit_hparams(one_lr)
    assert not res.has_lr_sweep and "no LR sweep" in res.lr.reason
    assert all(s.skipped for s in res.scales)
    with pytest.raises(FitError, match="no LR sweep"):
        fit_hparams(one_lr, require=True)


def test_missing_columns_are_named():
    with pytest.raises(FitError, match="flops"):
        fit_hparams(pd.DataFrame({"params": [1.0], "tokens": [1.0], "loss": [3.0], "lr": [1e-3]}))


def test_pooled_noise_gives_three_point_scales_an_interval():
    df = lr_sweep(n_lr=3, offset=1.2)
    alone = fit_sweep(df.loc[df.scale == "r0", "lr"], df.loc[df.scale == "r0", "loss"])
    assert alone.lr.ci90 is None and "no interval" in alone.notes[0]
    rich = lr_sweep(computes=(1e18, 1e19), n_lr=7, seed=3)
    rich["scale"] = rich["scale"] + "b"
    res = fit_hparams(pd.concat([df[df.scale == "r0"], rich]))
    r0 = next(s for s in res.scales if s.scale == "r0")
    assert r0.fit.lr.ci90 is not None and r0.fit.lr.dof is not None
    assert r0.fit.lr.ci90[0] < lr_star(1e16) < r0.fit.lr.ci90[1]
    known = fit_sweep(df.loc[df.scale == "r0", "lr"], df.loc[df.scale == "r0", "loss"], loss_noise=0.002)
    assert known.lr.ci90 is not None and known.lr.dof is None


def test_groups_by_compute_without_scale_column_and_drops_diverged_runs():
    df = lr_sweep().drop(columns="scale")
    df["flops"] = df["flops"] * np.random.default_rng(0).uniform(0.97, 1.03, len(df))
    df.loc[df.index[-1], "loss"] = np.nan  # diverged at the highest LR of the largest rung
    assert len(group_scales(df)) == 4
    res = fit_hparams(df, hero_flops=1e21)
    assert [s.scale.startswith("C=") for s in res.scales] == [True] * 4
    assert res.scales[-1].n_diverged == 1
    assert res.lr.params["a"] == pytest.approx(A_LR, abs=0.02)


def test_log_quadratic_helper_and_json():
    x = np.array([8.0, 16.0, 32.0, 64.0, 128.0])
    opt = fit_log_quadratic(x, 2.5 + 0.04 * np.log(x / 27.0) ** 2, name="aspect_ratio")
    # fitted in ln loss: near, not exactly at, the vertex of the loss parabola (was rel 1e-6)
    assert opt.opt == pytest.approx(27.0, rel=0.01)
    assert opt.curve(27.0) == pytest.approx(2.5, rel=1e-3)
    res = fit_hparams(lr_batch_sweep(), hero_flops=1e21, hero_params=1e10).to_dict()
    text = json.dumps(res, allow_nan=False)
    assert "NaN" not in text
    scale = res["scales"][0]
    assert {"scale", "flops", "points", "lr", "batch", "lr_curves"} <= set(scale)
    assert {"opt", "ci90", "poly", "curvature", "penalty_2x", "status", "grid"} <= set(scale["lr"])
    assert {"law", "hero_value", "hero_ci90", "points", "excluded", "reason"} <= set(res["lr"])
    assert isinstance(scale["points"][0]["used"], bool)
    hero = res["hero"]
    assert hero["lr"] == res["lr"]["hero_value"] and hero["batch_tokens_ci90"] == res["batch"]["hero_ci90"]
    assert hero["lr_law"] == res["lr"]["formula"] == "lr* = k C^a"


def test_step_law_exponents_are_recovered_within_their_intervals():
    df = step_law_grid().rename(columns={"batch_size": "batch_tokens"})
    df["flops"] = 6 * df["params"] * df["tokens"]
    hero = (1e9, 2e10)
    res = fit_hparams(df, hero_params=hero[0], hero_tokens=hero[1], hero_flops=6 * hero[0] * hero[1])
    assert len(res.scales) == 9 and all(s.fit.lr.status == "ok" and s.fit.batch.status == "ok" for s in res.scales)
    for s in res.scales:  # per-rung optima from the joint surface
        assert s.fit.lr.opt == pytest.approx(step_lr(s.params, s.tokens), rel=0.05)
        assert s.fit.batch.opt == pytest.approx(step_batch(s.tokens), rel=0.08)
        assert s.fit.lr.penalty_2x == pytest.approx(s.fit.lr.loss_min * math.expm1(CU * LN2_SQ), rel=0.15)
    lr, b = res.lr, res.batch
    assert lr.form == "n_d" and lr.formula == "lr* = k N^a D^b" and lr.weighted and lr.n_points == 9
    assert b.form == "d" and b.formula == "B* = k D^b"
    for name, truth in (("a", STEP_A), ("b", STEP_B)):
        assert lr.params[name] == pytest.approx(truth, abs=0.03)
        assert lr.ci90[name][0] < truth < lr.ci90[name][1], (name, lr.ci90[name])
    assert b.params["b"] == pytest.approx(STEP_BD, abs=0.04)
    assert b.ci90["b"][0] < STEP_BD < b.ci90["b"][1]
    # the hero: 5x the largest N at 20 tokens/param
    lo, hi = lr.hero_ci90
    assert lo < step_lr(*hero) < hi and lr.hero_value == pytest.approx(step_lr(*hero), rel=0.1)
    lo, hi = b.hero_ci90
    assert lo < step_batch(hero[1]) < hi
    at = res.at(*hero)
    assert at["lr"] == pytest.approx(lr.hero_value) and at["batch_ci90"] == pytest.approx(list(b.hero_ci90))
    assert res.hero()["lr_law"] == "lr* = k N^a D^b"


def test_one_tokens_per_param_falls_back_to_compute_and_says_so():
    df = step_law_grid(sizes=(2e7, 6e7, 2e8, 6e8), ratios=(20,)).rename(columns={"batch_size": "batch_tokens"})
    df["flops"] = 6 * df["params"] * df["tokens"]
    res = fit_hparams(df, hero_flops=6 * 2e9 * 4e10, hero_params=2e9, hero_tokens=4e10)
    for law in (res.lr, res.batch):
        assert law.form == "compute" and law.formula.endswith("= k C^a")
        assert "one tokens/param" in law.notes[0] and "cannot separate N from D" in law.notes[0]
    # along D = 20 N the compute exponent of Step Law's LR is (a + b) / 2, of its batch 0.571 / 2
    assert res.lr.params["a"] == pytest.approx((STEP_A + STEP_B) / 2, abs=0.03)
    assert res.batch.params["a"] == pytest.approx(STEP_BD / 2, abs=0.03)
    assert res.lr.hero_ci90[0] < step_lr(2e9, 4e10) < res.lr.hero_ci90[1]


def test_a_sweep_at_one_size_transfers_by_the_studys_rule():
    from ladder.model.recipe import olmo_lr
    from ladder.reports.fits import fit_study
    from tests.reports.fits.synthetic import make_study, study_table

    def lr_penalty(run):
        return 0.05 * math.log(run.lr / (0.05 * (run.flops / 1e12) ** -0.2)) ** 2

    study = make_study(ablations={"lr_multipliers": [0.25, 0.5, 1, 2, 4]})
    df = study_table(study, loss_fn=lr_penalty, noise=0.001)
    df = df[(df["scale"] == "100K") | (df["axis/lr_multipliers"] == 1)]  # the sweep at one rung only
    res = fit_study(df, study=study, n_boot=20)
    law = res.hparams.lr
    assert law.law is None and law.single["scale"] == "100K" and "one size only" in law.reason
    one = law.single
    r = res.recommendation
    m = one["y"] / olmo_lr(one["params_non_embedding"])
    assert r.lr == pytest.approx(m * olmo_lr(r.params_non_embedding), rel=1e-9)
    src = r.sources["lr"]
    assert src.startswith("transfer by rule: the lr sweep has a usable optimum at one size only (100K")
    assert "olmo LR = 0.0047 (N_non_embedding / 108M)^(-1/3)" in src and "Porian et al. 2024" in src
    assert r.lr_ci90[0] < r.lr < r.lr_ci90[1]
    assert r.sources["batch_tokens"].startswith("study rule: olmo batch")  # no batch sweep at all


def test_predict_on_a_csv_returns_lr_and_batch_with_intervals(tmp_path, capsys):
    from tests.cli_helpers import run_cli

    path = tmp_path / "grid.csv"
    step_law_grid().to_csv(path, index=False)
    out = run_cli(
        capsys, "fit", "--runs", path, "--predict", "1e9:2e10", "--predict", "3e8:1e10", "--bootstrap", "20", "--json"
    )
    assert out.code == 0, out.stderr
    d = out.json()
    assert d["hparams"]["available"] and d["hparams"]["lr"]["form"] == "n_d"
    rows = {p["label"]: p for p in d["predictions"]}
    for label, (n, t) in (("1e9:2e10", (1e9, 2e10)), ("3e8:1e10", (3e8, 1e10))):
        p = rows[label]
        assert p["lr_ci90"][0] < step_lr(n, t) < p["lr_ci90"][1], (label, p["lr"], p["lr_ci90"])
        assert p["batch_ci90"][0] < step_batch(t) < p["batch_ci90"][1], (label, p["batch_tokens"], p["batch_ci90"])
        assert p["lr_reason"] is None and p["batch_reason"] is None
    # the terminal summary's predictions table shows them (print_fit renders this fit, validated)
    from rich.console import Console

    from ladder.reports.fits.study.fit_json import validate
    from ladder.reports.summary import _print_predictions

    console = Console(record=True, width=200)
    _print_predictions(validate(d), console)
    text = console.export_text()
    p = rows["1e9:2e10"]
    assert "LR*" in text and "B* (tokens)" in text
    assert f"{p['lr']:.3g}" in text and f"[{p['lr_ci90'][0]:.3g}, {p['lr_ci90'][1]:.3g}]" in text


def test_rollout_backtests_the_law_on_the_smaller_rungs():
    df = step_law_grid().rename(columns={"batch_size": "batch_tokens"})
    df["flops"] = 6 * df["params"] * df["tokens"]
    ro = fit_hparams(df, hero_params=1e9, hero_tokens=2e10, hero_flops=1.2e20).lr.rollout
    # fitted on the smallest 4..8 rungs by compute, forecasting every larger one
    assert {r["prefix"] for r in ro["rows"]} == {4, 5, 6, 7, 8} and ro["n"] == 5 + 4 + 3 + 2 + 1
    assert ro["max_abs_pct"] < 5 and ro["coverage"] >= 0.8
    assert ro["reach"] is not None and ro["reach"] >= max(r["compute_x"] for r in ro["rows"] if r["prefix"] == 8)
    assert fit_hparams(lr_sweep(computes=(1e16, 1e17)), hero_flops=1e19).lr.rollout is None  # 2 rungs: nothing left
