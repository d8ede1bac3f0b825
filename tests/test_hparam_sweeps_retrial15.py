"""Re-trial 15: a user who sweeps learning rate and batch size to get the hero's hyperparameters. What plan and
fit say about the sweep must be true of the runs the fit reads, and its advice must lead where the loss does."""

from __future__ import annotations

from tests import hero_fixture as hf


def _sweep_plan(**ablations):
    from ladder.plan.planner import expand
    from ladder.studies.spec import parse_study

    d = hf.study_dict(name="sweep", sizes=["4K", "8K", "16K"], ablations=ablations)
    d["data"]["seq_len"] = 32
    d["ladder"]["tokens_per_param"] = 5
    study = parse_study(d)
    return study, expand(study).runs


def test_a_batch_sweeps_rungs_are_counted_once_as_the_fit_keeps_one_run_per_rung():
    """`ladder plan sweep.yaml` (3 sizes, lr_multipliers x batch_multipliers) said "the ladder has 5 runs at 3 sizes
    ...: no rollout backtest", so the loss law looked fittable; `ladder fit` then kept the best run of each rung
    (3) and refused: "ratio: needs >= 4 runs for 3 parameters (has 3)". A batch variant trains whole steps, so its
    tokens/param read 5 or 4.97 and were counted as two rungs."""
    from ladder.plan.requirements import fit_requirements

    study, runs = _sweep_plan(lr_multipliers=[0.5, 1, 2], batch_multipliers=[0.5, 1, 2])
    assert len({f"{r.tokens / r.params:.3g}" for r in runs}) > 1  # the batch variants' tokens differ by a step
    refuse, partly = fit_requirements(study, runs)
    said = " ".join(refuse + partly)
    assert "has 3 runs at 3 sizes" in said and "no loss law" in said, said
    assert "no rollout backtest" not in said, said


# the 4K rung of a trained micro sweep (lr x0.25..x4 at batches 256, 384, 736 tokens): at every batch the loss
# is lowest at lr 0.04 and turns up at 0.08, and it falls towards the smallest batch
MICRO_4K_LR = [0.005, 0.01, 0.02, 0.04, 0.08] * 3
MICRO_4K_BATCH = [256.0] * 5 + [384.0] * 5 + [736.0] * 5
MICRO_4K_LOSS = [3.6528, 2.8133, 2.1272, 1.8902, 2.2725, 3.9423, 3.3332, 2.4431, 2.2334, 2.3729]
MICRO_4K_LOSS += [4.488, 3.8961, 3.2957, 2.5602, 3.682]


def test_an_lr_read_at_a_batch_off_its_grid_says_to_widen_the_batch_sweep_not_the_lr_sweep():
    """`ladder fit S` said "the lr* law leaves out 1 rung(s): 4K (lr optimum at grid edge (high end; fitted 0.468,
    grid 0.005..0.08)): widen the sweep", though the loss turned up inside the LR grid at every batch: the LR* is
    read at the fitted batch optimum, 0.0625 tokens, far below the batch grid. Widening the LR sweep upwards, as
    told, would not have moved it."""
    import numpy as np

    from ladder.model.config import format_count
    from ladder.reports.fits.hparams import fit_sweep

    res = fit_sweep(
        np.array(MICRO_4K_LR), np.array(MICRO_4K_LOSS), batch_tokens=np.array(MICRO_4K_BATCH), label="4K", n_boot=50
    )
    lr, batch = res.lr, res.batch
    assert lr.status == "edge" and batch.status == "edge" and batch.opt < min(batch.grid)  # the numbers as fitted
    assert "widen the batch_tokens sweep, not the lr sweep" in lr.message, lr.message
    assert f"batch_tokens optimum {format_count(batch.opt)}" in lr.message, lr.message
    assert "at 0.0301..0.041)" in lr.message, lr.message
    assert lr.message in res.notes


def _diverging_sweep():
    """Two rungs whose loss still falls at lr 0.04 (optimum near 0.06) and whose lr 0.08 diverged (no loss)."""
    import math

    import numpy as np
    import pandas as pd

    rows = []
    for i, c in enumerate((1e12, 4e12)):
        for lr in (0.005, 0.01, 0.02, 0.04, 0.08):
            loss = 3.0 - 0.1 * i + 0.05 * math.log(lr / 0.06) ** 2 if lr < 0.05 else np.nan
            rows.append({"scale": f"r{i}", "params": c / 6e5, "tokens": 1e5, "flops": c, "loss": loss, "lr": lr})
    return pd.DataFrame(rows)


def test_an_lr_optimum_above_the_grid_where_the_next_lr_diverged_is_not_told_to_widen_upwards():
    """`ladder fit S` (lr_multipliers 0.5..4, every x4 run diverged) said of each rung "lr optimum at grid edge
    (high end; fitted 0.0644, grid 0.01..0.04): widen the sweep", and the recommendation "Widen
    ablations.lr_multipliers (or lr) upwards": upwards is the LR that diverged. The optimum is between the two."""
    from ladder.reports.fits.hparams import fit_hparams
    from ladder.reports.fits.recommend import beyond_every_sweep

    res = fit_hparams(_diverging_sweep(), hero_flops=1e14, n_boot=50)
    for sc in res.scales:
        lr = sc.fit.lr
        assert lr.edge_side == "high" and lr.opt > 0.04, lr  # the numbers as fitted
        assert "the next LR it tried, 0.08, diverged: add LRs between 0.04 and 0.08, not above" in lr.message
        assert "widen the sweep" not in lr.message and lr.message in res.notes
    note = beyond_every_sweep(res, "lr", 0.02)
    assert "diverged at the next LR it tried (0.08 at r0, 0.08 at r1)" in note, note
    assert "the highest peak LR every rung's sweep trained to the end (0.04 at r0, 0.04 at r1)" in note, note
    assert "upwards" not in note, note
    # a sweep whose next LR did not diverge (it was never tried) is still told to widen upwards
    df = _diverging_sweep()
    plain = fit_hparams(df[df["lr"] < 0.05], hero_flops=1e14, n_boot=50)
    assert "widen the sweep" in plain.scales[0].fit.lr.message
    assert "upwards" in beyond_every_sweep(plain, "lr", 0.02)


def _fitted(root, ablations, penalty=lambda spec: 0.0):
    """A hero_fixture study with ``ablations``, every run at the fixture's law times ``1 + penalty(spec)``,
    collected and fitted."""
    from ladder import layout
    from ladder.plan.planner import expand, write_plan
    from ladder.studies.spec import parse_study

    plan = expand(parse_study(hf.study_dict(name=root.name, ablations=ablations)))
    write_plan(plan, root)
    for spec in plan.runs:
        hf.train(layout.StudyDir(root), spec, hf.law_loss(spec.params, spec.tokens) * (1 + penalty(spec)))
    hf.refresh(root, n_boot=10)
    return plan, layout.StudyDir(root)


def test_a_single_valued_lr_or_batch_ablation_is_the_heros_recipe_as_it_was_every_rungs(tmp_path):
    """`lr_multipliers: [2]` trains every rung at twice the rule's LR (0.04), and the fit forecasts the loss of
    that recipe; `ladder fit` and `ladder hero` gave the hero the bare rule, 0.02, an LR no run trained at, with
    "no LR law: this study has no LR sweep". The same for one batch multiplier."""
    from ladder.reports.fits.study.fit_json import read_fit_json

    plan, sd = _fitted(tmp_path / "one", {"lr_multipliers": [2], "batch_multipliers": [2]})
    assert {r.lr for r in plan.runs} == {0.04}  # the rule is clamped at lr_max 0.02 at every rung
    rec = read_fit_json(sd.fit).recommendation
    assert rec.lr == 0.04 and "ablations.lr_multipliers [2]" in rec.sources["lr"], rec.sources["lr"]
    assert "ablations.batch_multipliers [2]" in rec.sources["batch_tokens"], rec.sources["batch_tokens"]
    _, plain = _fitted(tmp_path / "rule", {})
    rule = read_fit_json(plain.fit).recommendation
    assert rule.lr == 0.02 and rule.sources["lr"].startswith("study rule")
    assert abs(rec.batch_tokens - 2 * rule.batch_tokens) <= 64, (rec.batch_tokens, rule.batch_tokens)  # a sequence
    _, absolute = _fitted(tmp_path / "abs", {"lr": [0.03]})  # one absolute LR: the same
    rec = read_fit_json(absolute.fit).recommendation
    assert rec.lr == 0.03 and "ablations.lr [0.03]" in rec.sources["lr"], rec.sources["lr"]


def _runs_rows(best_batch: float = 1.1) -> list[dict]:
    """A table trained elsewhere: 4 sizes at 20 tokens/param, each an lr x batch_size (tokens) grid of 5 x 3."""
    import math

    from tests.test_own_ladder_retrial13 import law

    rows = []
    for n in (1e8, 2e8, 4e8, 8e8):
        c = 6 * n * 20 * n
        lr0, b0 = 3.6e-3 * (c / 1e19) ** -0.1, 2**20 * (c / 1e19) ** 0.3
        for m in (0.25, 0.5, 1, 2, 4):
            for b in (0.5, 1, 2):
                pen = 0.02 * math.log2(m) ** 2 + 0.01 * math.log2(b / best_batch) ** 2 + 0.001 * math.sin(7 * m + b)
                row = {"params": n, "tokens": 20 * n, "loss": round(law(n, 20 * n) * (1 + pen), 5), "lr": lr0 * m}
                rows.append({**row, "batch_size": int(b0 * b)})
    return rows


def test_fit_runs_gives_a_predictions_batch_interval_in_the_digits_of_its_batch(tmp_path, capsys):
    """`ladder fit --runs runs.csv --predict 7e9:1.4e11` on a table with lr and batch_size columns printed
    "B* (tokens) 7.402M [6.08e+06, 8.69e+06]": Python's e-notation beside the optimum's own 7.402M."""
    from ladder.reports.render.fmt import fmt_count
    from tests.cli_helpers import run_cli
    from tests.test_own_ladder_retrial13 import write

    path = write(tmp_path / "runs.csv", _runs_rows())
    args = ("fit", "--runs", path, "--predict", "7e9:1.4e11", "--bootstrap", "20")
    pred = next(p for p in run_cli(capsys, *args, "--json").json()["predictions"] if p["label"] != "hero")
    r = run_cli(capsys, *args)
    assert r.code == 0, r.stderr
    lo, hi = pred["batch_ci90"]
    table = r.stdout[r.stdout.index("prediction ") : r.stdout.index("  7e9:1.4e11: ")]  # the cells may wrap
    cells = table.split()
    assert fmt_count(pred["batch_tokens"]) in cells and f"[{fmt_count(lo)}," in cells, table
    assert f"{fmt_count(hi)}]" in cells and "e+0" not in table, table


def test_a_batch_sweeps_notes_give_batches_in_the_digits_of_the_tables():
    """`ladder fit S` said "the optimum is beyond the low end of the grid 288..1.18e+03" and "fitted 0.0625" of
    batches that the report's table gives as 1.184K and 0.06251."""
    import numpy as np

    from ladder.reports.fits.hparams import fit_sweep
    from ladder.reports.render.fmt import fmt_count

    batch = np.array(MICRO_4K_BATCH) * 2  # 512, 768, 1.472K tokens
    res = fit_sweep(np.array(MICRO_4K_LR), np.array(MICRO_4K_LOSS), batch_tokens=batch, label="4K", n_boot=20)
    b = res.batch
    assert f"fitted {fmt_count(b.opt)}, grid 512..1.472K)" in b.message, b.message
    assert "e+0" not in " ".join(res.notes), res.notes


def test_a_sweep_panels_off_grid_optimum_reads_as_the_per_rung_table_gives_it():
    """The LR sweep figure marked an optimum beyond its panel as "optimum 2.6e-4 ←" and a batch one as "optimum
    1.23e6 →", where the per-rung table beside it gives 0.00026 and 1.235M."""
    from matplotlib.figure import Figure

    from ladder.reports.fits.study.fit_json import HparamRung
    from ladder.reports.render.figures.sweeps import draw_sweeps
    from ladder.reports.render.fmt import fmt_count, fmt_lr

    points = [
        {"lr": lr, "batch_tokens": b, "loss": 3.0 + lr * 100 + b / 1e7, "used": True}
        for lr in (1e-3, 2e-3, 4e-3)
        for b in (6e4, 1.2e5, 2.4e5)
    ]
    rung = HparamRung.model_validate(
        {
            "scale": "8K",
            "flops": 1e12,
            "points": points,
            "lr": {"name": "lr", "opt": 2.6e-4, "status": "edge", "poly": [1.0, 0.01, 0.01], "poly_of": "ln loss"},
            "batch": {"name": "batch_tokens", "opt": 1234567.0, "status": "edge", "poly": [1.0, 0.0, 0.01]},
        }
    )
    for axis, want in (("lr", f"optimum {fmt_lr(2.6e-4)} ←"), ("batch", f"optimum {fmt_count(1234567.0)} →")):
        fig = Figure(figsize=(4, 3))
        draw_sweeps(fig, [rung], axis)
        said = [t.get_text() for ax in fig.axes for t in ax.texts]
        assert want in said, (axis, said)


def _sweep_penalty(spec) -> float:
    import math

    lr, batch = float(spec.axes["lr_multipliers"]), float(spec.axes["batch_multipliers"])
    return 0.03 * math.log2(lr / 1.2) ** 2 + 0.02 * math.log2(batch / 0.8) ** 2


SWEEP = {"lr_multipliers": [0.5, 1, 2], "batch_multipliers": [0.5, 1, 2]}


def test_fits_recommended_batch_has_its_interval_as_the_peak_lr_and_the_report_have(tmp_path, capsys):
    """`ladder fit S` gave "peak LR 0.0233 [0.0217, 0.0251]" but "batch 5.952K tokens" with no interval, where
    the report's recommendation says "5.952K tokens (90%: 5.243K – 6.803K)"."""
    from ladder.reports.fits.study.fit_json import read_fit_json
    from ladder.reports.render.fmt import fmt_count
    from tests.cli_helpers import run_cli

    _, sd = _fitted(tmp_path / "sweep", SWEEP, _sweep_penalty)
    out = run_cli(capsys, "fit", sd.path, "--bootstrap", "10").stdout
    rec = read_fit_json(sd.fit).recommendation
    lo, hi = rec.batch_tokens_ci90
    row = next(x for x in out.splitlines() if x.startswith("batch "))
    assert f"{fmt_count(rec.batch_tokens)} tokens [{fmt_count(lo)}, {fmt_count(hi)}]" in row, row


def test_a_sweeps_in_context_split_is_not_said_to_be_missing_from_runs_that_carry_it():
    """`ladder fit S` on a trained 45-run LR x batch sweep, every run with its repeats/novel split, said "in-context
    repeats: 3 run(s) carry the repeats/novel split (needs >= 4)": the loss laws keep the best run of each of its
    3 rungs, and all 3 carry it."""
    import pandas as pd

    from ladder.reports.fits.in_context import available

    split = {"loss_repeats": 2.0, "loss_novel": 3.0, "repeat_share": 0.3}
    law_df = pd.DataFrame([{"params": n, "tokens": 5 * n, "loss": 3.0, **split} for n in (4e3, 8e3, 16e3)])
    why = available(law_df)
    assert why == "the loss laws use 3 run(s), and the repeats/novel split needs >= 4", why
    mixed = pd.concat([law_df, law_df.assign(loss_repeats=None, params=[3e4, 6e4, 1.2e5])], ignore_index=True)
    assert available(mixed).startswith("3 run(s) carry the repeats/novel split (needs >= 4); the other 3")


def test_a_rung_whose_batches_round_together_is_warned_at_plan_time():
    """`ladder plan bs.yaml` (batch_multipliers [0.25, 0.5, 1] at 4K, 8K, 16K) merged 4K's x0.25 and x0.5 (both
    round up to batch_min_sequences) and warned of nothing about the batch sweep; `ladder fit` then said "4K: 2
    batch_tokens value(s): no batch optimum". The guide says a sweep with fewer than 3 values at a rung is warned."""
    from ladder.plan.requirements import ablation_requirements

    study, runs = _sweep_plan(lr_multipliers=[0.5, 1, 2], batch_multipliers=[0.25, 0.5, 1])
    said = [w for w in ablation_requirements(study, runs) if "batch" in w]
    assert len(said) == 1 and "no batch optimum at 4K, which has fewer than 3 distinct batch sizes" in said[0], said
    assert "the batch law uses the other sizes" in said[0], said
    study, runs = _sweep_plan(lr_multipliers=[0.5, 1, 2], batch_multipliers=[0.5, 1, 2])
    assert not [w for w in ablation_requirements(study, runs) if "batch" in w]


def test_fit_runs_names_a_rung_of_a_table_by_its_params_and_tokens(tmp_path, capsys):
    """`ladder fit --runs runs.csv` (lr and batch_size columns, no axis columns) said "the batch* law leaves out 1
    rung(s): N0/D0 (batch_tokens optimum at grid edge ...)": a cluster index no user can place in the table."""
    from tests.cli_helpers import run_cli
    from tests.test_own_ladder_retrial13 import write

    rows = _runs_rows(best_batch=3.0)  # every rung's best batch is beyond its grid's high end
    r = run_cli(capsys, "fit", "--runs", write(tmp_path / "runs.csv", rows), "--bootstrap", "5", "--json")
    assert r.code == 0, r.stderr
    names = [sc["scale"] for sc in r.json()["hparams"]["scales"]]
    assert names == ["100M x 2B", "200M x 4B", "400M x 8B", "800M x 16B"], names
    assert any(n.startswith("100M x 2B: batch_tokens") for n in r.json()["hparams"]["notes"]), r.json()["hparams"]


def test_an_optimum_inside_the_grid_called_at_its_edge_says_its_best_run_is_at_the_end():
    """`ladder fit --runs` said "batch_tokens optimum at grid edge (high end; fitted 629.3K, grid 277.5K..1.11M)":
    a fitted optimum inside the grid, called one at its edge with no word of why (its best run is at the end)."""
    import numpy as np

    from ladder.reports.fits.hparams import fit_sweep

    lr = np.array([1.0, 2.0, 4.0, 8.0]) * 1e-3
    opt = fit_sweep(lr, 3 + 0.05 * np.log(lr / 1.2e-3) ** 2, label="r0").lr
    assert opt.status == "edge" and min(opt.grid) < opt.opt < max(opt.grid)  # as fitted
    assert "(low end; its best run is at that end, 0.001; fitted 0.00" in opt.message, opt.message
    above = fit_sweep(lr * 16, 3 + 0.05 * np.log(lr * 16 / 1.2e-3) ** 2, label="r1").lr  # vertex below the grid
    assert above.opt < min(above.grid) and "its best run" not in above.message, above.message


def test_fit_runs_says_which_runs_an_empty_lr_cell_leaves_out_of_the_sweep(tmp_path, capsys):
    """`ladder fit --runs` of a table whose lr cell is empty for 9 of its 60 runs (the refusal of a bad lr says
    "leave the cell empty where it is not known") fitted the LR and batch laws without them and said nothing."""
    from tests.cli_helpers import run_cli
    from tests.test_own_ladder_retrial13 import write

    rows = [{**r, "lr": None} if i % 7 == 0 else r for i, r in enumerate(_runs_rows())]
    r = run_cli(capsys, "fit", "--runs", write(tmp_path / "runs.csv", rows), "--bootstrap", "5")
    assert r.code == 0, r.stderr
    said = [x for x in r.stderr.splitlines() + r.stdout.splitlines() if "empty lr or batch cell" in x]
    assert len(said) == 1 and "9 run(s)" in said[0] and "left out of the LR and batch fits" in said[0], said
    full = run_cli(capsys, "fit", "--runs", write(tmp_path / "full.csv", _runs_rows()), "--bootstrap", "5")
    assert "empty" not in full.stdout + full.stderr


def test_fit_predicts_the_lr_and_batch_that_hero_plans_at_the_same_point(tmp_path, capsys):
    """`ladder fit S --predict 1M:20M` gave B* 11.32K [9.285K, 13.86K], and `ladder hero S --params 1M --tokens
    20M` planned 10.88K from the same law (90% [8.975K, 13.28K]): fit read the law in compute at 6ND scaled by the
    largest rung's FLOPs per 6ND, the hero at the exact FLOPs of the shape it plans."""
    from ladder.reports.render.fmt import fmt_count
    from tests.cli_helpers import run_cli

    _, sd = _fitted(tmp_path / "sweep", SWEEP, _sweep_penalty)
    fit = run_cli(capsys, "fit", sd.path, "--predict", "1M:20M", "--bootstrap", "10", "--json")
    pred = next(p for p in fit.json()["predictions"] if p["label"] == "1M:20M")
    hero = run_cli(capsys, "hero", sd.path, "--params", "1M", "--tokens", "20M", "--dry-run", "--json")
    assert hero.code == 0, hero.stderr
    batch_source, lr_source = hero.json()["sources"]["batch_tokens"], hero.json()["sources"]["lr"]
    lo, hi = pred["batch_ci90"]
    assert f"(90% [{fmt_count(lo)}, {fmt_count(hi)}])" in batch_source, (pred, batch_source)
    lo, hi = pred["lr_ci90"]
    assert f"(90% [{lo:.3g}, {hi:.3g}])" in lr_source, (pred, lr_source)
