"""The report's learning-rate and batch section shows exactly the numbers of fit.json's ``hparams`` entry, and its
figures draw from that entry alone."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from matplotlib.figure import Figure

from ladder.reports.fits.hparams import fit_hparams
from ladder.reports.render.blocks import KV, Fig, Table
from ladder.reports.render.builder import Builder
from ladder.reports.render.fmt import (
    fmt_ci,
    fmt_count,
    fmt_g,
    fmt_int,
    fmt_loss,
    fmt_lr,
)
from ladder.reports.render.sections.hparams import hparams
from ladder.reports.render.study import StudyData
from tests.reports.fits.synthetic import fit_dict_of, step_law_grid


@pytest.fixture(scope="module")
def entry() -> dict:
    df = step_law_grid().rename(columns={"batch_size": "batch_tokens"})
    df["flops"] = 6 * df["params"] * df["tokens"]
    res = fit_hparams(df, hero_params=1e9, hero_tokens=2e10, hero_flops=1.2e20, n_boot=50)
    return {"available": True, **res.to_dict()}


def section(entry: dict, tmp_path):
    return hparams(
        Builder(StudyData(path=tmp_path, name="s", fit=fit_dict_of({"hparams": entry}), runs=pd.DataFrame()))
    )


def test_numbers_shown_are_fit_json_s(entry, tmp_path):
    s = section(entry, tmp_path)
    kv = dict(next(b for b in s.blocks if isinstance(b, KV)).items)
    h = entry["hero"]
    assert kv["Learning rate at the hero"] == f"{fmt_lr(h['lr'])} (90%: {fmt_ci(h['lr_ci90'], fmt_lr)})"
    assert kv["Batch size at the hero"] == (
        f"{fmt_count(h['batch_tokens'])} tokens (90%: {fmt_ci(h['batch_tokens_ci90'], fmt_count)})"
    )
    assert kv["Cost of a 2× LR error at the hero"] == (
        f"{fmt_loss(h['lr_penalty_2x'])} nats/token (90%: {fmt_ci(h['lr_penalty_2x_ci90'], fmt_loss)})"
    )
    for name, key in (("LR*", "lr"), ("B*", "batch")):
        law = entry[key]["law"]
        text = kv[f"{name} law"]
        assert text.startswith(entry[key]["formula"] + ": ") and text.endswith(f"; {fmt_int(law['n'])} rungs")
        for k, v in law["params"].items():
            assert f"{k} = {fmt_g(v, 4)} (90%: {fmt_ci(law['ci90'][k])})" in text
    table = next(b for b in s.blocks if isinstance(b, Table))
    assert len(table.rows) == len(entry["scales"])
    for row, sc in zip(table.cells(), entry["scales"]):
        cells = [c[0] for c in row]
        assert cells[0] == sc["scale"] and cells[2] == fmt_count(sc["params"])
        assert cells[4] == fmt_lr(sc["lr"]["opt"]) and cells[5] == fmt_ci(sc["lr"]["ci90"], fmt_lr)
        assert cells[7] == fmt_loss(sc["lr"]["penalty_2x"])
        assert cells[8] == fmt_count(sc["batch"]["opt"]) and cells[9] == fmt_ci(sc["batch"]["ci90"], fmt_count)


def test_figures_draw_from_the_entry(entry, tmp_path):
    figs = [b for b in section(entry, tmp_path).blocks if isinstance(b, Fig)]
    assert [f.spec.key for f in figs] == ["fig-lr-sweeps", "fig-batch-sweeps", "fig-hparam-laws"]
    for f in figs:
        fig = Figure(figsize=(7, f.spec.height))
        f.spec.draw(fig)
    laws = next(f for f in figs if f.spec.key == "fig-hparam-laws")
    fig = Figure(figsize=(7, 3))
    laws.spec.draw(fig)
    ax = fig.axes[0]
    # the star is the law's value at the hero as fit.json holds it; the band is fit.json's curve
    star = [ln for ln in ax.get_lines() if ln.get_label().startswith("hero")][0]
    assert star.get_xdata()[0] == entry["hero"]["flops"] and star.get_ydata()[0] == entry["hero"]["lr"]
    solid = [ln for ln in ax.get_lines() if ln.get_label().startswith("fit: ")][0]
    assert math.isclose(solid.get_ydata()[0], entry["lr"]["curve"][0]["y"])


def test_one_size_sweep_says_it_transfers_by_rule(tmp_path):
    df = step_law_grid(sizes=(6e7,), ratios=(32,)).rename(columns={"batch_size": "batch_tokens"})
    df["flops"] = 6 * df["params"] * df["tokens"]
    entry = {"available": True, **fit_hparams(df, hero_params=1e9, hero_tokens=2e10, n_boot=20).to_dict()}
    kv = dict(next(b for b in section(entry, tmp_path).blocks if isinstance(b, KV)).items)
    assert "one size only" in kv["LR* law"] and "transfers to other sizes by the recipe's rule" in kv["LR* law"]
    assert kv["LR* law"] == entry["lr"]["reason"]


def test_backtest_line_is_fit_json_s(entry, tmp_path):
    from ladder.reports.fits.study.fit_json import HparamRollout
    from ladder.reports.render.sections.hparams import backtest_text

    kv = dict(next(b for b in section(entry, tmp_path).blocks if isinstance(b, KV)).items)
    ro = entry["lr"]["rollout"]
    assert ro["n"] > 0 and kv["LR* law backtest"] == backtest_text(HparamRollout.model_validate(ro))
    assert f"RMS error {fmt_g(ro['rms_pct'], 2)}%" in kv["LR* law backtest"]
    assert f"reach {fmt_g(ro['reach'])}× in compute" in kv["LR* law backtest"]
