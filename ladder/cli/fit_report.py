"""`ladder fit` (scaling laws and the hero's forecast) and `ladder report` (HTML and PDF)."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import typer
from rich.markup import escape

from ladder.cli.options import JSON_OPT, check_seed, flag
from ladder.console import err, out, print_json

RUNS_HELP = (
    "Instead of a study: a table of runs with columns params, tokens, loss (optional flops, lr, "
    "batch_size in tokens, variant, status): a CSV, JSON lines or parquet file, or a W&B runs export (the CSV of the UI's runs "
    "table, or JSON lines of wandb.Api().runs) with --columns. Params and tokens as numbers or counts such as "
    "1.2B. At most 20,000 runs: average seed replicates "
    "beyond (from 3,000, the fit says each stage as it starts)."
)
COLUMNS_HELP = (
    "Where params, tokens and loss (and any optional column) are in the --runs file, as NAME=COLUMN "
    "pairs separated by commas; nested keys of a W&B export with dots, e.g. "
    "params=config.n_params,tokens=config.tokens,loss=summary.eval/loss."
)


MAX_BOOTSTRAP = 10_000  # each resample refits every law form: 10,000 is minutes and a few GB; more is neither
MAX_PREDICT = 1e15  # parameters or tokens per --predict point beyond this are a typo (1P)
MAX_RUNS_ROWS = 20_000  # runs a --runs fit takes: 1e4 took 80 s and 0.7 GB, 3e4 195 s and 1.4 GB, 1e5 9 min and 3.3 GB
MAX_RESAMPLED_RUNS = (
    4_000_000  # --bootstrap x runs to fit: each run's resample holds ~0.8 KB (500 runs x 4,000: 1.9 GB)
)
PROGRESS_ROWS = 3_000  # from this many runs to fit, each stage of the fit is said on stderr (3e3 take a minute or more)


def check_predictions(predict: list[str]) -> list[tuple[str, float, float]]:
    """Each --predict PARAMS:TOKENS as (text, params, tokens), once both are counts of at least one (a
    fraction of a parameter or token is no model) and at most 1P."""
    import math

    from ladder.errors import SpecError
    from ladder.model.config import format_count, read_count

    points = []
    for item in predict:
        parts = item.split(":")
        if len(parts) != 2:
            raise SpecError(f"--predict {item!r}: write PARAMS:TOKENS, e.g. 7e9:4e12 or 3.2M:64M")
        values = []
        for what, text in zip(("params", "tokens"), parts):
            value = read_count(text.strip())
            if value is None:
                raise SpecError(f"--predict {item!r}: {what} {text!r} is not a count (e.g. 7e9, 3.2M)")
            if not math.isfinite(value):
                raise SpecError(f"--predict {item!r}: {what} {text!r} is too large to be a number")
            if value <= 0:
                raise SpecError(f"--predict {item!r}: {what} must be positive")
            if value < 1:
                raise SpecError(
                    f"--predict {item!r}: {what} {text!r} is less than one {what[:-1]}: not a model "
                    "a law can forecast (write counts, e.g. 7e9:4e12)"
                )
            if value > MAX_PREDICT:
                raise SpecError(
                    f"--predict {item!r}: {what} {text!r} is beyond {format_count(MAX_PREDICT)}: not a model a law can forecast"
                )
            values.append(float(value))
        same = next((text for text, n, d in points if (n, d) == (values[0], values[1])), None)
        if same is not None:
            raise SpecError(f"--predict {item!r}: the same point as --predict {same!r}; give each point once")
        points.append((item, values[0], values[1]))
    return points


def check_predictions_in_family(points: list[tuple[str, float, float]], study) -> None:
    """With a study: a --predict size its family can build (the bounds `studies validate` applies to sizes)."""
    from ladder.plan.plausibility import check_target

    seq_len = study.hero.seq_len or study.data.seq_len
    for item, params, _ in points:
        check_target(
            f"--predict {item!r}: params",
            params,
            None,
            conv=study.ladder.param_count,
            aspect=study.model.aspect_ratio,
            rules=study.model.rules(seq_len),
            tied=study.model.tie_embeddings,
        )


def _far_from_the_ladder(points: list[tuple[str, float, float]], table) -> list[str]:
    """Warnings for --predict points below the ladder: a law of scale extrapolates up, not down."""
    import pandas as pd

    from ladder.reports.fits.study.table import is_hero, status_ok

    warnings = []
    try:
        # the runs the laws are fitted on: a crashed 1M run hid that 5M lies below a ladder that starts at 20M
        fitted = table[~is_hero(table) & status_ok(table)]
        params = pd.to_numeric(fitted["params"], errors="coerce").dropna()
        tokens = pd.to_numeric(fitted["tokens"], errors="coerce").dropna()
    except (KeyError, TypeError):
        return warnings
    if params.empty or tokens.empty:
        return warnings
    from ladder.model.config import format_count

    for item, n, d in points:
        if n < params.min() / 2 or d < tokens.min() / 2:
            warnings.append(
                # the fewest params and the fewest tokens may be two runs'; counts as every other line gives them
                f"--predict {item}: below the ladder (its smallest model has {format_count(params.min())} params and "
                f"its shortest run {format_count(tokens.min())} tokens): the laws are fitted to forecast larger runs, "
                "this forecast is not to be trusted"
            )
    return warnings


def _duplicates(table, source) -> tuple[object, list[str]]:
    """The rows of a --runs table that repeat an earlier row in every column (its line label aside): their labels."""
    cols = [c for c in table.columns if c != "run_id"]
    if not cols:
        return table, []
    dup = table.duplicated(subset=cols, keep="first")
    labels = (
        [str(x) for x in table.loc[dup, "run_id"]] if "run_id" in table.columns else [str(i) for i in table.index[dup]]
    )
    return table.loc[~dup].reset_index(drop=True), labels


def _fitted_rows(table) -> int:
    """The rows of a runs or results table that a fit uses: finished, not a hero run."""
    from ladder.reports.fits.study.table import is_hero, status_ok

    return int((~is_hero(table) & status_ok(table)).sum())


def _runs_to_fit(table, runs: Path, merged: bool) -> int:
    """How many rows of a --runs table the fit would use (finished, not a hero run); more than
    :data:`MAX_RUNS_ROWS` is refused before any fitting."""
    from ladder.errors import SpecError

    n = _fitted_rows(table)
    if n > MAX_RUNS_ROWS:
        raise SpecError(
            f"{runs}: {n:,} runs to fit{' after merging repeated rows' if merged else ''}, more than the "
            f"{MAX_RUNS_ROWS:,} a fit takes (its time and memory grow with the runs: 1e4 take minutes and a GB); "
            "average the seed replicates first (one row per params x tokens with its mean loss), or fit a subset"
        )
    return n


def _check_bootstrap(bootstrap: int, n_runs: int) -> None:
    """--bootstrap above the default on many runs: refused when resamples x runs would not fit in memory (the
    default, 200, is taken up to the row bound)."""
    from ladder.errors import SpecError

    if bootstrap > 200 and bootstrap * n_runs > MAX_RESAMPLED_RUNS:
        most = max(200, MAX_RESAMPLED_RUNS // max(n_runs, 1))
        # the option's values without commas, as typed: typer reads no "9,975" as an integer
        raise SpecError(
            f"--bootstrap {bootstrap} on {n_runs:,} runs to fit: {bootstrap * n_runs:,} resampled runs, more than the "
            f"{MAX_RESAMPLED_RUNS:,} a fit holds in memory (about 0.8 GB per million); give --bootstrap {most} or fewer"
        )


def _progress(n_runs: int):
    """The hook that says each stage of a large fit on stderr (so that --json stays JSON), or None."""
    if n_runs < PROGRESS_ROWS:
        return None
    err.print(f"[dim]fit: {n_runs:,} runs: a fit this large takes minutes; each stage as it starts[/]", soft_wrap=True)
    return lambda text: err.print(f"[dim]fit: {escape(text)}[/]", soft_wrap=True)


@contextmanager
def _quiet_numpy():
    """numpy's RuntimeWarnings off while the laws are fitted: a bootstrap draw's log of a negative loss (an
    IsoFLOP parabola's) is left out as NaN by design, and its "isoflop_fit.py:333: RuntimeWarning: invalid value
    encountered in log" with a source line was the first thing `fit --runs` printed of some published ladders."""
    import warnings

    import numpy as np

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def _few(labels: list[str], limit: int = 4) -> str:
    more = f" and {len(labels) - limit} more" if len(labels) > limit else ""
    return ", ".join(labels[:limit]) + more


def fit(
    study_dir: Path | None = typer.Argument(None, help="A collected study directory (writes its fit.json)."),
    runs: str | None = typer.Option(None, "--runs", metavar="FILE", help=RUNS_HELP),
    columns: str | None = typer.Option(None, "--columns", help=COLUMNS_HELP),
    predict: list[str] | None = typer.Option(
        None,
        "--predict",
        help="Also forecast PARAMS:TOKENS, e.g. 7e9:4e12 (repeatable). With --runs the first point is the target: "
        "the law forms are weighted for its tokens/param.",
    ),
    bootstrap: int = typer.Option(
        200,
        "--bootstrap",
        help=f"Bootstrap resamples for the 90% intervals, 1 to {MAX_BOOTSTRAP:,} (resamples x runs at most "
        f"{MAX_RESAMPLED_RUNS:,}, for memory).",
    ),
    seed: int = typer.Option(
        0, "--seed", help="Seed of the bootstrap resampling, 0 to 2^32-1 (the same seed, the same fit)."
    ),
    variant: str | None = typer.Option(
        None,
        "--variant",
        metavar="NAME",
        help="With --runs and a variant column: the variant whose law forecasts the --predict points (default: "
        "the lowest mean loss at the largest size every variant trained; the fit says which and why).",
    ),
    keep_duplicates: bool = flag(
        "keep-duplicates",
        "With --runs: fit rows that repeat an earlier row in every "
        "column too (by default each is counted once, with a warning).",
    ),
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
    from ladder.reports.fits import fit_study, progress, read_runs_file
    from ladder.reports.fits.study import fit_json
    from ladder.reports.summary import print_fit

    if (study_dir is None) == (runs is None):
        raise LadderError("give a study directory or --runs FILE (exactly one)")
    if runs is not None and not runs.strip():  # a Path would read '' as '.', and call it a directory
        raise SpecError(f"--runs {runs!r}: an empty path; give a runs file (.csv, .parquet or .jsonl)")
    runs = None if runs is None else Path(runs)
    if columns is not None and runs is None:
        raise SpecError("--columns maps the columns of a --runs file; give --runs FILE too")
    if not 1 <= bootstrap <= MAX_BOOTSTRAP:
        raise SpecError(
            f"--bootstrap {bootstrap}: must be from 1 to {MAX_BOOTSTRAP:,} resamples (each refits every "
            "law form; 200, the default, gives stable 90% intervals)"
        )
    check_seed(seed, what=" (the bootstrap's seed)")
    if keep_duplicates and runs is None:
        raise SpecError("--keep-duplicates is about the rows of a --runs file; give --runs FILE too")
    if variant is not None and runs is None:
        raise SpecError(
            "--variant picks a variant of a --runs file's variant column; a study's hero variant is its "
            "tied-vs-untied call (or hero.tied in the study)"
        )
    if variant is not None and not variant.strip():
        raise SpecError(f"--variant {variant!r}: an empty name; give a value of the variant column")
    points = check_predictions(predict or [])
    predict = [item for item, _, _ in points]
    warnings: list[str] = []
    if runs is not None:
        table = read_runs_file(runs, columns=columns)
        table, repeated = _duplicates(table, runs)
        if repeated and keep_duplicates:
            table = read_runs_file(runs, columns=columns)
            warnings.append(
                f"{runs}: {len(repeated)} rows repeat an earlier row in every column ({_few(repeated)}); "
                "fitted all the same (--keep-duplicates): the intervals count them as independent runs"
            )
        elif repeated:
            warnings.append(
                f"{runs}: {len(repeated)} rows repeat an earlier row in every column ({_few(repeated)}); "
                "each is counted once (--keep-duplicates fits them all)"
            )
        n_runs = _runs_to_fit(table, runs, merged=bool(repeated) and not keep_duplicates)
        _check_bootstrap(bootstrap, n_runs)
        warnings += _far_from_the_ladder(points, table)
        try:
            with progress.reporting(_progress(n_runs)), _quiet_numpy():
                result = fit_study(table, predict=predict, n_boot=bootstrap, seed=seed, variant=variant)
        except FitError as exc:
            # the warning that repeated rows were merged is said after the fit: a refusal must say it itself ("needs
            # >= 4 runs (has 3)" of a file of 6 rows, three of them repeats, gave no clue)
            merged = (
                f" ({len(repeated)} of the file's rows repeat an earlier row in every column and were counted once: "
                f"{_few(repeated)}; --keep-duplicates fits them all)"
                if repeated and not keep_duplicates
                else ""
            )
            raise FitError(f"{runs}: {exc}{merged}") from None
    else:
        from ladder import layout
        from ladder.books.collect import mixed_data, read_results
        from ladder.plan.planner import edited_since_plan, read_study

        study = read_study(study_dir)
        edited = edited_since_plan(study_dir, study)
        warnings += [edited] if edited else []
        layout.refuse_if_not_a_file(
            layout.StudyDir(study_dir).fit, f"run `ladder fit {layout.shell_word(study_dir)}` again"
        )
        check_predictions_in_family(points, study)
        table = read_results(study_dir)
        _check_bootstrap(bootstrap, _fitted_rows(table))
        mixed = mixed_data(table, study_dir)  # runs trained on other preparations of the corpus: said, in fit.json
        warnings += [mixed] if mixed else []
        warnings += _far_from_the_ladder(points, table)
        with _quiet_numpy():
            result = fit_study(table, study=study, predict=predict, n_boot=bootstrap, seed=seed, study_dir=study_dir)
        result.warnings[:0] = warnings  # fit.json holds every warning the command gave
        result.write(layout.StudyDir(study_dir).fit)
    for w in warnings:
        err.print(f"[yellow]warning[/]: {escape(w)}", soft_wrap=True)
    if runs is not None:
        result.warnings[:0] = warnings  # --json holds every warning the command gave, as fit.json does
    shown = result.to_dict()
    if as_json:
        print_json(shown)
        return
    said = {**shown, "warnings": shown["warnings"][len(warnings) :]}  # the command's own warnings: said above
    checked = checked_by_the_hero(study_dir) if study_dir is not None else None
    if checked is not None:  # as the report and `forecast show` say it once the hero run has checked it
        said = _as_checked(said, checked)
    print_fit(fit_json.validate(said), out)
    if study_dir is not None:
        out.print(f"wrote {study_dir / 'fit.json'}")


def checked_by_the_hero(study_dir: Path) -> str | None:
    """The hero run's check of this fit's hero forecast in one clause, when its final loss has scored the forecast
    frozen from these very results (the report then leads with "Forecast loss (prediction)"); else None."""
    from ladder.reports.render.builder import Builder
    from ladder.reports.render.sections.forecast import checked_words, is_prediction
    from ladder.reports.render.study import load_study

    try:
        score = is_prediction(Builder(load_study(study_dir)))
    except Exception:  # noqa: BLE001 - a damaged forecast.json or results are the report's and score's to name
        return None
    return None if score is None else checked_words(score)


def _as_checked(shown: dict, checked: str) -> dict:
    """fit.json's words on the hero's forecast as of the hero run's check: a prediction checked against it, not a
    projection, and no warning that still calls it unchecked (the report's :func:`as_scored`, in the terminal)."""
    from ladder.reports.render.sections.forecast import UNCHECKED

    hero = {**shown["hero"], "kind": f"prediction, checked against the hero run: {checked}"}
    warnings = []
    for w in shown["warnings"]:
        for phrase, now in UNCHECKED.items():
            if w.endswith(phrase):
                w = f"{w[: -len(phrase)]}{now} (`ladder forecast show`)"
        warnings.append(w)
    return {**shown, "hero": hero, "warnings": warnings}


def report(
    study_dir: Path = typer.Argument(..., help="A study directory (collected and fitted for the full report)."),
    out_text: str | None = typer.Option(
        None, "--out", metavar="DIR", help="Where to write (default: <study>/report/)."
    ),
    formats: str = typer.Option("html,pdf", "--format", help="html, pdf or html,pdf."),
    as_json: bool = JSON_OPT,
) -> None:
    """Render the study's report: one self-contained report.html (works offline) and a paginated report.pdf.

    Headline (recommended hero, forecast with its interval, ladder cost, backtest error), the ladder, loss
    curves, scaling fits with the hero extrapolation, IsoFLOP, LR/batch laws, ablations, residuals, run
    health, task forecasts and reproducibility. Sections without data say so in one line.
    """
    from ladder import layout
    from ladder.errors import SpecError
    from ladder.forecast.fitted import read_fit
    from ladder.reports.render import render_report

    if out_text is not None and not out_text.strip():  # Path('') is '.': the report would land in the cwd
        raise SpecError(
            f"--out {out_text!r}: an empty path; give a folder for report.html and report.pdf, or leave --out out "
            f"for {study_dir / 'report'}"
        )
    out_dir = Path(out_text) if out_text is not None else None
    if out_dir is not None and out_dir.exists() and not out_dir.is_dir():
        raise SpecError(f"--out {out_dir}: exists and is not a folder (the report is report.html and report.pdf in it)")
    if layout.StudyDir(study_dir).plan.is_file():  # a damaged plan.json or fit.json: refused, the report untouched
        from ladder.plan.planner import read_study

        read_study(study_dir)
    from ladder.books.collect import check_tables

    check_tables(study_dir)  # a torn results or curves table: refused, the report untouched (not one without runs)
    layout.refuse_if_not_a_file(
        layout.StudyDir(study_dir).fit, f"run `ladder fit {layout.shell_word(study_dir)}` and report again"
    )
    if layout.StudyDir(study_dir).fit.is_file():
        read_fit(study_dir)  # a damaged fit.json: refused, the report untouched
    stale: list[str] = []  # rendered all the same, with the warning at the top of its headline
    try:
        paths = render_report(study_dir, out_dir, formats=formats, warnings_out=stale)
    except ValueError as exc:
        raise SpecError(f"--format {formats!r}: {exc}") from None
    for why in stale:
        err.print(f"[yellow]warning[/]: {escape(why)}", soft_wrap=True)
    if as_json:
        print_json({k: str(v) for k, v in paths.items()})
        return
    for kind, path in paths.items():
        out.print(f"{kind}: {path}")
