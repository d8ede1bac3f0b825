"""`ladder fit` (scaling laws and the hero's forecast) and `ladder report` (HTML and PDF)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ladder.cli.options import JSON_OPT
from ladder.console import out, print_json


def fit(
    study_dir: Optional[Path] = typer.Argument(None, help="A collected study directory (writes its fit.json)."),
    runs: Optional[Path] = typer.Option(None, "--runs", help="Instead: any CSV or parquet of runs with columns "
                                        "params, tokens, loss (optional flops, lr, batch_size, variant, axes)."),
    predict: Optional[list[str]] = typer.Option(None, "--predict", help="Also forecast PARAMS:TOKENS, e.g. 7e9:4e12 "
                                                "(repeatable)."),
    bootstrap: int = typer.Option(200, "--bootstrap", help="Bootstrap resamples for the 90% intervals."),
    seed: int = typer.Option(0, "--seed"),
    as_json: bool = JSON_OPT,
) -> None:
    """Fit scaling laws and forecast the hero, with 90% intervals and a recommended configuration.

    Also: a backtest, hyperparameter laws and ablation effects across scale.

    L(N, D) = E + A/N^alpha + B/D^beta (Chinchilla Approach 3, Huber loss on log-loss, bootstrap over runs);
    IsoFLOP (Approach 2) when the study has budgets; L(C) on the compute-optimal frontier; a backtest that
    refits without the largest rung and reports its forecast error. N is in the study's parameter convention.
    """
    from ladder.errors import LadderError
    from ladder.reports.fits import fit_runs_file, fit_study
    from ladder.reports.summary import print_fit

    if (study_dir is None) == (runs is None):
        raise LadderError("give a study directory or --runs FILE (exactly one)")
    if runs is not None:
        result = fit_runs_file(runs, predict=predict or [], n_boot=bootstrap, seed=seed)
    else:
        from ladder import layout
        from ladder.collect import read_results
        from ladder.plan import read_plan

        study, _ = read_plan(study_dir)
        result = fit_study(read_results(study_dir), study=study, predict=predict or [], n_boot=bootstrap, seed=seed)
        result.write(layout.StudyDir(study_dir).fit)
    if as_json:
        print_json(result.to_dict())
        return
    print_fit(result, out)
    if study_dir is not None:
        out.print(f"wrote {study_dir / 'fit.json'}")


def report(
    study_dir: Path = typer.Argument(..., help="A study directory (collected and fitted for the full report)."),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="Where to write (default: <study>/report/)."),
    formats: str = typer.Option("html,pdf", "--format", help="html, pdf or html,pdf."),
    as_json: bool = JSON_OPT,
) -> None:
    """Render the study's report: one self-contained report.html (works offline) and a paginated report.pdf.

    Headline (recommended hero, forecast with its interval, ladder cost, backtest error), the ladder, loss
    curves, scaling fits with the hero extrapolation, IsoFLOP, LR/batch laws, ablations, residuals, run
    health, task forecasts and reproducibility. Sections without data say so in one line.
    """
    from ladder.errors import SpecError
    from ladder.reports.render import render_report

    try:
        paths = render_report(study_dir, out_dir, formats=formats)
    except ValueError as exc:
        raise SpecError(f"--format {formats!r}: {exc}") from None
    if as_json:
        print_json({k: str(v) for k, v in paths.items()})
        return
    for kind, path in paths.items():
        out.print(f"{kind}: {path}")
