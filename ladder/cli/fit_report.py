"""`ladder fit` (scaling laws and the hero's forecast) and `ladder report` (HTML and PDF)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ladder.cli.options import JSON_OPT
from ladder.console import out, print_json

RUNS_HELP = ("Instead of a study: a table of runs with columns params, tokens, loss (optional flops, lr, "
             "batch_size, variant, status): a CSV or parquet file, a W&B runs export (the CSV of the UI's runs "
             "table, or JSON lines of wandb.Api().runs) with --columns.")
COLUMNS_HELP = ("Where params, tokens and loss (and any optional column) are in the --runs file, as NAME=COLUMN "
                "pairs separated by commas; nested keys of a W&B export with dots, e.g. "
                "params=config.n_params,tokens=config.tokens,loss=summary.eval/loss.")


def _check_predictions(predict: list[str]) -> list[str]:
    """Each --predict PARAMS:TOKENS as given, once both are finite positive counts (the fit reads them)."""
    import math

    from ladder.errors import SpecError
    from ladder.model.config import parse_count

    for item in predict:
        parts = item.split(":")
        if len(parts) != 2:
            raise SpecError(f"--predict {item!r}: write PARAMS:TOKENS, e.g. 7e9:4e12 or 3.2M:64M")
        for what, text in zip(("params", "tokens"), parts):
            value = parse_count(text.strip())
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise SpecError(f"--predict {item!r}: {what} {text!r} is not a count (e.g. 7e9, 3.2M)")
            if not math.isfinite(value):
                raise SpecError(f"--predict {item!r}: {what} {text!r} is too large to be a number")
            if value <= 0:
                raise SpecError(f"--predict {item!r}: {what} must be positive")
    return predict


def fit(
    study_dir: Optional[Path] = typer.Argument(None, help="A collected study directory (writes its fit.json)."),
    runs: Optional[Path] = typer.Option(None, "--runs", help=RUNS_HELP),
    columns: Optional[str] = typer.Option(None, "--columns", help=COLUMNS_HELP),
    predict: Optional[list[str]] = typer.Option(None, "--predict", help="Also forecast PARAMS:TOKENS, e.g. 7e9:4e12 "
                                                "(repeatable)."),
    bootstrap: int = typer.Option(200, "--bootstrap", min=0, help="Bootstrap resamples for the 90% intervals."),
    seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap resampling (the same seed, the same fit)."),
    as_json: bool = JSON_OPT,
) -> None:
    """Fit scaling laws and forecast the hero, with 90% intervals and a recommended configuration.

    Also: rollout backtests, hyperparameter laws, ablation effects across scale, and the loss on in-context
    repeats and novel tokens apart.

    Law forms (Huber loss on log-loss, bootstrap from fresh starts): Chinchilla L(N, D) = E + A/N^alpha +
    B/D^beta, the over-training law, L(C) at the hero's tokens/param and on the compute-optimal frontier, and
    Chinchilla below a plateau; IsoFLOP (Approach 2) when the study has budgets. Rollout backtests (fit the
    smallest sizes, forecast the larger) weight the forms, show how far the ladder sees and calibrate the 90%
    intervals. N is in the study's parameter convention.

    A ladder trained elsewhere: `ladder fit --runs runs.jsonl --columns
    params=config.n_params,tokens=config.tokens,loss=summary.eval/loss` reads a W&B runs export (JSON lines
    of wandb.Api().runs, or the CSV of the UI's runs table, whose columns have no config./summary. prefix);
    its finished runs (W&B state) are fitted.
    """
    from ladder.errors import FitError, LadderError, SpecError
    from ladder.reports.fits import fit_study, read_runs_file
    from ladder.reports.summary import print_fit

    if (study_dir is None) == (runs is None):
        raise LadderError("give a study directory or --runs FILE (exactly one)")
    if columns is not None and runs is None:
        raise SpecError("--columns maps the columns of a --runs file; give --runs FILE too")
    predict = _check_predictions(predict or [])
    if runs is not None:
        table = read_runs_file(runs, columns=columns)
        try:
            result = fit_study(table, predict=predict, n_boot=bootstrap, seed=seed)
        except FitError as exc:
            raise FitError(f"{runs}: {exc}") from None
    else:
        from ladder import layout
        from ladder.collect import read_results
        from ladder.plan import read_plan

        study, _ = read_plan(study_dir)
        result = fit_study(read_results(study_dir), study=study, predict=predict, n_boot=bootstrap, seed=seed)
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

    if out_dir is not None and out_dir.exists() and not out_dir.is_dir():
        raise SpecError(f"--out {out_dir}: exists and is not a folder (the report is report.html and report.pdf in it)")
    try:
        paths = render_report(study_dir, out_dir, formats=formats)
    except ValueError as exc:
        raise SpecError(f"--format {formats!r}: {exc}") from None
    if as_json:
        print_json({k: str(v) for k, v in paths.items()})
        return
    for kind, path in paths.items():
        out.print(f"{kind}: {path}")
