"""Re-trial 17c: one number per quantity, the same meaning everywhere (the default study's fit and report, read
side by side)."""

from __future__ import annotations

import pandas as pd
import pytest

from ladder.reports.fits.ablations import fit_tie_ablation
from tests.reports.fits.test_ablations import LADDER, log_gap, tie_runs


def test_a_rung_one_variant_trained_is_not_a_rung_whose_shapes_differ():
    """The default study's top rung (200K) trained untied only. fit.json's tied_vs_untied.method (and the report's
    Method paragraph) said "here the variants' shapes differ at 1 of 16 rungs (sizes hold total parameters fixed,
    so the untied head takes V x d from the body)", though the study holds non-embedding parameters fixed and both
    variants share the body at every one of the 15 rungs that has both; the 16th had no tied run to differ from."""
    df = tie_runs(log_gap(0.004, 3e17))
    top = df[(df["flops"] == LADDER[-1]) & ~df["tie_embeddings"]].assign(
        flops=LADDER[-1] * 4, params=LADDER[-1] * 4 / 1e11, d_model=1024, n_layers=12
    )
    res = fit_tie_ablation(pd.concat([df, top], ignore_index=True), hero_flops=1e21, n_boot=20)
    assert sum(1 for s in res.scales if s.skipped) == 1
    assert "shapes differ" not in res.method, res.method
    # a rung whose two variants do differ in body is still named, out of the rungs that compare both
    unlike = df.copy()
    unlike.loc[(unlike["flops"] == LADDER[0]) & ~unlike["tie_embeddings"], "d_model"] = 48
    res = fit_tie_ablation(pd.concat([unlike, top], ignore_index=True), hero_flops=1e21, n_boot=20)
    assert f"shapes differ at 1 of {len(LADDER)} rungs" in res.method, res.method


def _with_untied_top():
    df = tie_runs(log_gap(0.004, 3e17))
    top = df[(df["flops"] == LADDER[-1]) & ~df["tie_embeddings"]].assign(
        flops=LADDER[-1] * 4, params=LADDER[-1] * 4 / 1e11, d_model=1024, n_layers=12
    )
    return pd.concat([df, top], ignore_index=True)


def test_the_tie_distance_names_the_rung_it_divides_and_its_flops():
    """The default study's report, "Tied vs untied embeddings", Distance: "the hero is 24.6x the largest rung's
    compute", while its per-rung table lists 200K 1x (7.23e12 FLOPs, untied only) as the largest rung (13.2x), and
    the headline puts the hero 31.7x in compute (6ND) from the same 100K run the 24.6x divides (3.90e12 counted
    FLOPs). The row now names the rung and both FLOPs counts; the fit's crossover and call texts say "the largest
    rung with both variants"."""
    from types import SimpleNamespace

    from ladder.reports.fits.ablations import calls
    from ladder.reports.fits.study.fit_json_trends import TiedVsUntied
    from ladder.reports.render.blocks import KV, Para
    from ladder.reports.render.fmt import fmt_flops, fmt_times
    from ladder.reports.render.sections.ablations import tied

    res = fit_tie_ablation(_with_untied_top(), hero_flops=1e21, n_boot=20)
    tie = TiedVsUntied.model_validate({**res.to_dict(), "available": True})
    ctx = SimpleNamespace(fit_json=SimpleNamespace(tied_vs_untied=tie), figure=lambda *a, **k: Para("figure", "p"))
    kv = {k: v for b in tied(ctx).blocks if isinstance(b, KV) for k, v in b.items}
    top = max((r for r in tie.scales if r.gap is not None), key=lambda r: r.flops)
    dist = kv["Distance"]
    assert fmt_times(tie.hero.compute_x) in dist and fmt_flops(top.flops) in dist and top.scale in dist, dist
    assert fmt_flops(1e21) in dist and "largest rung with both variants" in dist and "6ND" in dist, dist
    assert "largest rung's compute" not in dist, dist
    h = {**res.hero, "call": "undetermined", "interval_excludes_zero": True}
    assert "beyond the largest rung with both variants" in calls.call_text(h)
    if "largest rung" in (res.crossover.get("message") or ""):
        assert "the largest rung with both variants" in res.crossover["message"]


def test_the_far_floor_gives_the_median_error_it_comes_from_beside_its_half_width():
    """S7 (a hero 2.81x beyond a 4-size ladder): fit's warning and the report's rollout section said the rollout's
    "farthest forecasts at 2.25x ... erred by a median of 5.2%" (the section: "median 5.19%") and, in the same
    sentence, "at least the median error of the rollout's farthest forecasts, ±5.06%": the floor is that median
    taken as a factor either side in log loss, whose half-width is 5.06%, not the median."""
    from ladder.reports.fits.study.study_hero import floor_words

    words = floor_words(1.5126, 5.0638, 5.1919)
    assert "median error of 5.2%" in words and "±5.06%" in words and "factor 1.052" in words, words
    assert "median error of the rollout's farthest forecasts, ±" not in words, words
    assert floor_words(3.8, 2.0, 2.02) == "at least the published-ladder floor of ±3.80%"


def test_the_heros_distance_names_the_runs_it_is_measured_from(tmp_path, capsys):
    """The default study: fit, its warning and the report's headline put the tied hero at "7.96x the ladder's
    largest model" (800K over tied's 100.6K), while the ladder's table lists the untied 201.3K (3.97x) and the
    study's own description says "8x the largest tied rung, 4x the untied top rung". The distance is measured from
    the runs the laws were fitted on; the words now say so."""
    from tests.cli_helpers import run_cli
    from tests.reports.fits.test_tasks import ladder

    a = ladder(0).assign(variant="a")
    b = ladder(1).assign(variant="b", run_id=[f"b{i}" for i in range(15)])
    b = b.assign(params=b["params"] * 4, flops=b["flops"] * 4, loss=b["task/code/bpb"] * 1.3)
    a["loss"] = a["task/code/bpb"]
    path = tmp_path / "runs.csv"
    pd.concat([a, b]).to_csv(path, index=False)
    r = run_cli(capsys, "fit", "--runs", str(path), "--predict", "1e10:2e11", "--bootstrap", "20")
    assert r.code == 0, r.stderr
    out = " ".join((r.stdout + r.stderr).split())
    assert "variant a" in out and "100x the largest model fitted" in out, out
    assert "the ladder's largest model" not in out, out


def test_the_copy_ratios_compute_span_says_it_is_6nd(tmp_path):
    """The default study: fit said the copy ratio falls "over 72x compute" (its warning "across 72x compute", the
    report "0.851 at the largest (72x apart) ... per e-fold of compute"), while the report's ladder table gives
    the tied runs' FLOPs from 8.00e10 to 3.90e12: 48.8x. The span is 6ND's (3.37e10 to 2.43e12); each place now
    says so."""
    import io
    import json

    from rich.console import Console

    from ladder.model.config import format_multiple
    from ladder.reports.render import render_report
    from ladder.reports.render.builder import Builder
    from ladder.reports.render.study import load_study
    from ladder.reports.summary import print_fit
    from tests.hero_fixture import make_ladder
    from tests.reports.render.test_report_agrees import prose

    root = make_ladder(tmp_path / "study", split=True, n_boot=10)
    ic = json.loads((root / "fit.json").read_text())["in_context"]
    nd = [6 * r["params"] * r["tokens"] for r in ic["runs"]]
    span = ic["trend"]["compute_span"]
    assert span == pytest.approx(max(nd) / min(nd))
    buf = io.StringIO()
    print_fit(Builder(load_study(root)).fit_json, Console(file=buf, width=400, color_system=None))
    [line] = [ln for ln in buf.getvalue().splitlines() if "repeats/novel loss" in ln]
    assert f"over {format_multiple(span)} compute (6ND" in line, line
    for w in ic["warnings"]:
        if "across" in w:
            assert f"across {format_multiple(span)} compute (6ND" in w, w
    section = prose(render_report(root, tmp_path / "out", formats="html")["html"].read_text())["in-context"]
    [row] = [c for c in section if "at the smallest compute" in c]
    assert "apart in 6ND" in row and "per e-fold of compute (6ND)" in row, row


def test_the_terminals_task_accuracy_names_its_two_intervals_as_the_report_does():
    """The default study: fit printed "ladder_py_next_line: ... acc 0.368 (90% [0.307, 1.000])" while the report's
    task table gives two 90% intervals of that accuracy, "(curve) 0.307 - 1.000" and "(prediction) 0.293 - 1.000":
    the terminal's did not say which it was. It now gives both, named as the report names them."""
    import io
    from types import SimpleNamespace

    from rich.console import Console

    from ladder.reports.fits.study.fit_json import Tasks
    from ladder.reports.summary import _print_tasks

    hero = {"loss": 1.4388, "loss_interval": [1.1653, 1.9702], "acc": 0.3683, "acc_interval": [0.30663, 1.0]}
    hero["acc_prediction_interval"] = [0.29291, 1.0]
    task = {"task": "next", "loss_metric": "bpb", "acc_metric": "acc", "hero": hero}
    tasks = Tasks.model_validate({"available": True, "tasks": {"next": task}})
    buf = io.StringIO()
    _print_tasks(SimpleNamespace(tasks=tasks), Console(file=buf, width=300, color_system=None))
    line = " ".join(buf.getvalue().split())
    assert "acc 0.368 (90% [0.307, 1.000] curve, [0.293, 1.000] prediction)" in line, line
    assert "bpb 1.4388 (90% [1.1653, 1.9702])" in line, line


def test_the_reports_fit_record_says_how_many_of_its_law_runs_were_fitted(tmp_path):
    """The default study's report: Reproducibility's Fit table said "n_law_runs 18" while the scaling section and
    fit said the loss laws were fitted on 17 runs (1 of the 18 left out, more than 5% above the lowest loss at its
    compute). The row now says what the 18 are."""
    import json

    from ladder.reports.render.blocks import KV
    from ladder.reports.render.builder import Builder
    from ladder.reports.render.study import load_study
    from tests.hero_fixture import make_ladder

    root = make_ladder(tmp_path / "s", n_boot=10)
    fit = json.loads((root / "fit.json").read_text())
    # as the default study's fit wrote it: one run of the law's variant left out, the rest fitted
    fit["loss"]["n_runs"], left = fit["meta"]["n_law_runs"] - 1, 1
    fit["loss"]["left_out"] = {"runs": ["r1"], "why": "more than 5% above the lowest loss at their compute"}
    (root / "fit.json").write_text(json.dumps(fit))
    [sec] = [x for x in Builder(load_study(root)).sections() if x.id == "reproducibility"]
    [kv] = [dict(b.items) for b in sec.blocks if isinstance(b, KV) and b.title == "Fit"]
    n, f = fit["meta"]["n_law_runs"], fit["loss"]["n_runs"]
    assert kv["n_law_runs"] == f"{n} (given to the loss laws: {f} fitted, {left} left out)", kv["n_law_runs"]


def test_the_task_table_says_why_its_runs_outnumber_the_loss_laws():
    """The default study's report: the task table said "Runs 18" for each task while the scaling section fitted
    the loss laws on 17 runs, and nothing said why: the task laws fit every run of the hero's variant, the one
    the loss laws left out (more than 5% above the lowest loss at its compute) included."""
    from types import SimpleNamespace

    from ladder.reports.fits.study.fit_json import LossLaw, Tasks
    from ladder.reports.render.blocks import Para
    from ladder.reports.render.sections.tasks import tasks

    hero = {"loss": 1.4388, "loss_interval": [1.1653, 1.9702]}
    task = {"task": "next", "loss_metric": "bpb", "n_runs": 18, "hero": hero}
    why = "more than 5% above the lowest loss at their compute (3 or more sizes within 10% of one compute)"
    loss = LossLaw.model_construct(n_runs=17, left_out={"runs": ["30f02815bede"], "why": why})
    fit = SimpleNamespace(tasks=Tasks.model_validate({"available": True, "tasks": {"next": task}}), loss=loss)
    ctx = SimpleNamespace(fit_json=fit, figure=lambda *a, **k: Para("figure", "p"))
    said = " ".join(b.text for b in tasks(ctx).blocks if isinstance(b, Para))
    assert "the loss laws fit 17" in said and "(18)" in said, said
    assert "with the 1 the loss laws left out (more than 5% above the lowest loss at their compute)" in said, said
    loss.left_out = None
    assert "the loss laws fit" not in " ".join(b.text for b in tasks(ctx).blocks if isinstance(b, Para))
