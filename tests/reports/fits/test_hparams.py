"""Hyperparameter laws recover known truths from synthetic sweeps."""

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
            rows.append(
                {"scale": f"r{i}", "params": c / 1e11, "tokens": 1e11 / 6, "flops": c, "loss": loss, "lr": lr}
            )
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
                    {"scale": f"r{i}", "params": c / 1e11, "tokens": 1e11 / 6, "flops": c, "loss": loss, "lr": lr,
                     "batch_tokens": b}
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
    law = res.lr.law
    assert law.a == pytest.approx(A_LR, abs=0.015)
    assert law.ci90["a"][0] < law.a < law.ci90["a"][1]
    lo, hi = res.lr.hero_ci90
    assert lo < res.lr.hero_value < hi
    assert res.lr.hero_value == pytest.approx(lr_star(1e21), rel=0.12)
    assert res.lr.extrapolation == pytest.approx(100.0)
    assert res.lr_penalty.hero_value == pytest.approx(CURV_LR * LN2_SQ, rel=0.2)
    assert res.lr_vs_params.law is not None and res.lr_vs_params.hero_value is not None
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
        assert row.fit.batch.extra["curvature_fixed_lr"] == pytest.approx(CURV_B + CURV_LR / 4, rel=0.1)
        assert len(row.fit.lr_curves) == 5  # one parabola per batch size
        # the per-batch LR optimum moves as sqrt(B)
        lrs = [c["lr_opt"] for c in row.fit.lr_curves]
        assert lrs[-1] / lrs[0] == pytest.approx(2.0**2, rel=0.15)
    assert res.batch.law.a == pytest.approx(A_B, abs=0.03)
    assert res.lr.law.a == pytest.approx(A_LR, abs=0.03)
    lo, hi = res.batch.hero_ci90
    assert lo < b_star(1e21) * 1.1 and hi > b_star(1e21) * 0.9


def test_edge_of_grid_is_flagged_and_left_out():
    df = lr_sweep(shift={3: 16.0})  # the largest rung's grid starts 16x above its optimum
    res = fit_hparams(df, hero_flops=1e21)
    edge = res.scales[3].fit.lr
    assert edge.status == "edge" and edge.edge_side == "low"
    assert "optimum at grid edge" in edge.message and "widen the sweep" in edge.message
    assert edge.opt < min(edge.grid)  # the vertex extrapolates beyond the grid
    assert "r3" in res.lr.excluded and res.lr.law.n_points == 3
    assert res.lr.law.a == pytest.approx(A_LR, abs=0.03)
    kept = fit_hparams(df, hero_flops=1e21, use_edge=True)
    assert kept.lr.law.n_points == 4
    assert any("widen the sweep" in n for n in res.notes)


def test_best_point_at_grid_end_is_flagged_even_when_vertex_inside():
    lr = np.array([1.0, 2.0, 4.0, 8.0]) * 1e-3
    loss = 3 + CURV_LR * np.log(lr / 1.2e-3) ** 2
    opt = fit_sweep(lr, loss).lr
    assert opt.opt == pytest.approx(1.2e-3, rel=1e-6)
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
    assert "r1" in res.lr.excluded and res.lr.law.n_points == 3
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
    assert res.lr.law.a == pytest.approx(A_LR, abs=0.02)


def test_log_quadratic_helper_and_json():
    x = np.array([8.0, 16.0, 32.0, 64.0, 128.0])
    opt = fit_log_quadratic(x, 2.5 + 0.04 * np.log(x / 27.0) ** 2, name="aspect_ratio")
    assert opt.opt == pytest.approx(27.0, rel=1e-6)
    assert opt.curve(27.0) == pytest.approx(2.5)
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
    assert hero["lr_from_params"] is not None
