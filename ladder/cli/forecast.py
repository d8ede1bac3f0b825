"""`ladder forecast`: freeze the hero forecast before the hero trains, show the freezes, score them against it."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from ladder import layout
from ladder.cli.options import JSON_OPT
from ladder.console import err, out, print_json

app = typer.Typer(
    help="Freeze the hero forecast, show the freezes, score them against the hero run.", no_args_is_help=True
)


def _interval(p: dict) -> str:
    """The 90% interval of ``p`` alone, in the digits :func:`_with_interval` gives it beside its point."""
    return _with_interval(p.get("loss"), p).split(" ", 1)[1]


def _with_interval(point: object, p: dict, *more: object) -> str:
    """``point [lo, hi]`` in one precision, enough digits to tell them apart (``3.000 [2.999, 3.001]``, never
    ``3 [2.999, 3.001]`` or ``3.5 [3.499, 3.5]``); ``point -`` without an interval. ``more``: values printed
    beside them (an actual), which the digits must tell apart too (see :func:`_digits_of`)."""
    from ladder.reports.fits.scoring import same_digits

    if p.get("lo") is None or p.get("hi") is None:
        return f"{same_digits(point, *more)[0]} -"
    a, lo, hi = same_digits(point, p["lo"], p["hi"], *more)[:3]
    return f"{a} [{lo}, {hi}]"


def _digits_of(s: dict, value: object) -> str:
    """A value of a final score (its actual, its replicates' mean) in the digits of the score's forecast and
    interval, as the score line prints them side by side."""
    from ladder.reports.fits.scoring import same_digits

    return same_digits(value, s.get("forecast"), s.get("lo"), s.get("hi"), s.get("actual"))[0]


def _score_text(s: dict | None) -> str:
    """A score in one line; one that lacks what ``forecast score`` writes (a hand edit the freeze's contract
    lets through) says so instead of a traceback."""
    try:
        return _score_words(s)
    except (KeyError, TypeError, ValueError, AttributeError):
        return "a score without the numbers `ladder forecast score` writes (edited by hand?): score again"


def _scored_point(s: dict | None) -> str:
    """Where a score beside the hero forecast was made when not at the hero (a --predict point): its error is
    that point's, never the hero forecast's."""
    if not isinstance(s, dict) or s.get("point") in (None, "hero"):
        return ""
    forecast = s.get("forecast")
    of = f" (forecast {_digits_of(s, forecast)})" if isinstance(forecast, (int, float)) else ""
    return f"at {s['point']}{of}: "


def _score_words(s: dict | None) -> str:
    if not s:
        return "-"
    inside = {True: "inside", False: "OUTSIDE", None: "no interval"}
    if s.get("final"):
        z = f", z {s['z']:+.2f}" if s.get("z") is not None else ""
        text = f"actual {_digits_of(s, s['actual'])}: error {s['error_pct']:+.2f}%, {inside[s.get('inside')]}{z}"
        reps = s.get("replicates")
        if reps:
            vs = reps["vs_mean"]
            text += (
                f"; {reps['n']} seeds: mean {_digits_of(s, reps['mean'])} (sd {reps['sd_log_pct']:.2g}%), error "
                f"{vs['error_pct']:+.2f}%, {inside[vs.get('inside')]}"
            )
            by_kind = reps.get("sd_log_pct_by_kind")
            if by_kind:
                text += f" (sd on repeats {by_kind['repeats']:.2g}%, on novel tokens {by_kind['novel']:.2g}%)"
        return text + _in_context_text(s.get("in_context"))
    p = s.get("partial") or {}
    if not p.get("available"):
        return f"partial: {p.get('reason', 'no forecast')}"
    from ladder.reports.fits.scoring import pct_of_tokens

    vs = p.get("vs_frozen") or {}
    return (
        f"partial at {pct_of_tokens(p['fraction'])}: heads for {_heads_for(p)}; frozen is "
        f"{vs.get('error_pct', 0):+.2f}% off it, {inside[vs.get('inside')]}"
    )


def _heads_for(p: dict) -> str:
    """A partial curve's forecast with its interval; with one reference curve it has none, and says why (not a
    bare "-")."""
    if p.get("lo") is None or p.get("hi") is None:
        from ladder.reports.fits.scoring import same_digits

        n = len(p.get("references") or [])
        return (
            f"{same_digits(p['final_forecast'])[0]} (no interval: the curve of {n} finished rung; an interval needs 2)"
        )
    return _with_interval(p["final_forecast"], p)


def _in_context_text(ic: dict | None) -> str:
    """The hero's loss on each kind of target, against its frozen forecast where there is one."""
    if not ic:
        return ""
    from ladder.reports.fits.scoring import same_digits

    parts = []
    for kind, label in (("novel", "novel tokens"), ("repeats", "in-context repeats")):
        vs = ic.get(kind)
        actual = (ic.get("actual") or {}).get(kind)
        if vs:
            a, f = same_digits(actual, vs["forecast"])
            parts.append(f"{label} {a} (forecast {f}, error {vs['error_pct']:+.2f}%)")
        elif actual is not None:
            parts.append(f"{label} {same_digits(actual)[0]}")
    return "; " + "; ".join(parts) if parts else ""


MAX_NOTE = 2000  # characters: a note, not a document


def check_note(note: str | None) -> None:
    """A --note is one piece of plain text: a control character (an escape sequence, a NUL) would be kept in the
    freeze and replayed to every terminal that shows it; a line break is refused too (the note is one line)."""
    import unicodedata

    if note is None:
        return
    from ladder.errors import SpecError

    bad = next((i for i, c in enumerate(note) if unicodedata.category(c) == "Cc"), None)
    if bad is not None:
        raise SpecError(
            f"--note: holds a control character ({note[bad]!r} at character {bad + 1}); write one line of plain text"
        )
    if len(note) > MAX_NOTE:
        raise SpecError(f"--note: {len(note):,} characters; keep it to {MAX_NOTE:,} (a note, kept with the freeze)")


@app.command("freeze")
def freeze(
    study_dir: Path = typer.Argument(..., help="A collected and fitted study directory (holds a current fit.json)."),
    predict: list[str] | None = typer.Option(
        None, "--predict", help="Also freeze a forecast at PARAMS:TOKENS, e.g. 800K:16M (repeatable)."
    ),
    note: str | None = typer.Option(None, "--note", help="A note kept with the freeze."),
    as_json: bool = JSON_OPT,
) -> None:
    """Put the fit's hero forecast on record before the hero trains: forecast.json (a later freeze is
    forecast-2.json, ...; none is overwritten).

    It holds the hero's loss with its calibrated 90% interval, any --predict points, the law forms with their
    parameters and weights, the hash of the results it was fitted on and of the study spec, the ladder version
    and git revision, and the UTC time. Refuses a fit that is older than the results (run `ladder fit`).

    Example:

    ladder forecast freeze ladder-runs/default --predict 800K:16M --note "before the hero"
    """
    from ladder.cli.fit_report import check_predictions, check_predictions_in_family
    from ladder.forecast.frozen import freeze as do_freeze
    from ladder.model.config import format_count
    from ladder.reports.fits.study.study_hero import beyond_mark

    check_note(note)
    points = check_predictions(predict or [])
    if points:  # the bounds `ladder fit --predict` applies, before anything is fitted
        from ladder.plan.planner import read_study

        check_predictions_in_family(points, read_study(study_dir))  # one damaged run does not stop the freeze
    f = do_freeze(study_dir, predict=predict or [], note=note)
    if as_json:
        print_json({"number": f.number, "file": str(f.path), **f.record})
        return
    h = f.record["hero"]
    loss, interval = _with_interval(h["loss"], h).split(" ", 1)
    out.print(
        f"froze forecast {f.number} in {f.path}: hero {format_count(h['params'])} x {format_count(h['tokens'])}: "
        f"{loss} nats/token, 90% interval {interval} (±{h['half_width_pct']:.2f}%)"
    )
    for p in f.record["predictions"]:
        out.print(
            # marked as `ladder fit --predict` marks it in its table
            f"  {escape(str(p['label']))}: {_with_interval(p['loss'], p)}"
            + beyond_mark(p.get("beyond_tested"), p.get("beyond_reach"))
            if p.get("loss") is not None
            else f"  {escape(str(p['label']))}: no forecast"
        )
    started = f.record.get("hero_runs_started") or []
    if started:
        err.print(
            f"[yellow]warning[/]: the hero has already trained or started ({escape(', '.join(started))}): forecast "
            f"{f.number} is marked after_hero, a check of the fit, not a prediction made before the run"
        )
        out.print(
            f"next: `ladder forecast score {escape(layout.shell_word(study_dir))}` scores the freezes against the hero"
        )
        return
    out.print(
        f"next: `ladder hero {escape(layout.shell_word(study_dir))}` plans the hero run; "
        f"`ladder forecast score {escape(layout.shell_word(study_dir))}` scores it"
    )


@app.command("show")
def show(
    study_dir: Path = typer.Argument(..., help="A study directory."),
    as_json: bool = JSON_OPT,
) -> None:
    """Every freeze of the study: its number, time, hero forecast and interval, latest score, and a warning when
    the study's results are no longer the ones it was fitted on.

    Example:

    ladder forecast show ladder-runs/default --json
    """
    from ladder.errors import StateError
    from ladder.forecast.frozen import show_rows

    why = layout.StudyDir(Path(study_dir)).not_planned()  # as status and score say it: S/runs names S
    if why:
        raise StateError(why)
    rows = show_rows(study_dir)
    if as_json:
        print_json({"study_dir": str(study_dir), "forecasts": rows})
        return
    if not rows:
        out.print(
            f"no frozen forecast in {study_dir}: `ladder forecast freeze {escape(layout.shell_word(study_dir))}` makes one"
        )
        return
    table = Table(
        "#",
        "frozen at (UTC)",
        "hero forecast",
        "90% interval",
        "kind",
        "latest score",
        title=f"frozen forecasts: {escape(str(study_dir))}",
        title_justify="left",
    )
    for r in rows:
        if r.get("problem"):
            table.add_row(
                str(r["number"]), "-", "-", "-", "-", f"[red]{escape(r['file'])} is {escape(r['problem'])}[/]"
            )
            continue
        h = r["hero"]
        table.add_row(
            str(r["number"]),
            str(r["frozen_at"]),
            *_with_interval(h.get("loss"), h).split(" ", 1),
            r["kind"],
            escape(_scored_point(r["latest_score"]) + _score_text(r["latest_score"])),
        )
    out.print(table)
    for r in rows:
        if r.get("note"):  # the freeze's --note, as --json and the report give it
            out.print(f"forecast {r['number']}: {escape(r['note'])}", soft_wrap=True)
    for r in rows:
        if r.get("warning"):
            err.print(f"[yellow]warning[/]: forecast {r['number']}: {r['warning']}")
        if r.get("problem"):
            err.print(
                f"[yellow]warning[/]: {escape(r['file'])} is {escape(r['problem'])}: `ladder forecast score` "
                "refuses the study until it is restored or moved out"
            )


def _loss_of(text: str | None) -> float | None:
    """``--loss`` as a number; text that is none, or one beyond a float (1e400), is named as typed."""
    import math

    from ladder.errors import SpecError

    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        shown = text if text.strip() and text == text.strip() else repr(text)
        raise SpecError(f"--loss {shown}: must be a positive loss in nats/token, e.g. 2.31")
    return value


@app.command("score")
def score(
    study_dir: Path = typer.Argument(..., help="A study directory with frozen forecasts."),
    loss_text: str | None = typer.Option(  # a str: 1e400 is echoed as typed, not as "inf"
        None,
        "--loss",
        metavar="LOSS",
        # not "0.001 to 100": no loss above ln V is taken, and ln V is 6.2 for the default study's 512 ids
        help="The final eval loss of a hero trained elsewhere (at the frozen hero's size), in nats/token: from 0.001 "
        "up to ln V, a uniform guess over the study's vocabulary.",
    ),
    curve: str | None = typer.Option(  # a str: typer makes a Path of '' into '.'
        None,
        "--curve",
        help="The hero's loss curve: CSV, JSON lines or parquet with tokens (or step; numbers or counts such as 4M) and "
        "eval_loss (or loss) columns.",
    ),
    run: str | None = typer.Option(
        None,
        "--run",
        help="The hero run to score against (default: every hero `ladder hero` planned, each with its own seed; a "
        "--seed replicate counts toward its hero's mean, never as the hero).",
    ),
    as_json: bool = JSON_OPT,
) -> None:
    """Score every frozen forecast against the hero: error % and z-score (both forecast minus actual: positive
    when the forecast was too high), inside the 90% interval or not.

    Each score is appended to its freeze's scores (one the same as its freeze's last score is not appended again,
    so scoring twice adds nothing); when no freeze has a forecast at the hero's point, nothing is scored and one
    line says why for each. A --curve ends at the hero's planned tokens: a point past them (a
    longer run) or two losses at one point is refused, naming the rows. While the hero still trains (or --curve
    stops before its planned tokens), its final loss is forecast from its partial curve, by the ladder's own
    finished curves at the same fraction of training, and compared with the frozen forecast: an early warning.
    When the hero has finished seed replicates (`ladder hero --seed N`), the forecast is also scored against their mean, with their
    spread: one run's own seed noise is not the forecast's error.

    Examples (the second: a hero trained elsewhere):

    ladder forecast score ladder-runs/default

    ladder forecast score ladder-runs/default --loss 2.31
    """
    from ladder.forecast.score import score_study

    outcome = score_study(study_dir, loss=_loss_of(loss_text), curve=curve, run_id=run)
    if as_json:
        print_json(outcome.to_dict())
        return

    def what_of(src: dict) -> str:
        return {"run": f"hero run {src.get('run_id')}", "loss": "--loss", "curve": f"--curve {src.get('file')}"}[
            src["kind"]
        ]

    for f, s in outcome.scored:
        what = what_of(s.get("source") or outcome.observation.source)
        p = s.get("partial") or {}
        line = f"forecast {f.number} ({f.forecast.frozen_at}), {escape(str(s['point']))}: "
        if s["final"]:
            shown = _with_interval(s["forecast"], s, s.get("actual"))
            out.print(line + f"forecast {shown}, {escape(_score_text(s))} ({escape(what)})")
        else:
            out.print(line + escape(_score_text(s)) + f" ({escape(what)})")
            if p.get("warning"):
                err.print(f"[yellow]early warning[/]: {p['warning']}")
        from ladder.reports.fits.scoring import offset_words

        off = offset_words(s.get("offset"))
        if off:
            out.print(f"  the hero run is {off} off the frozen point (scored within 10%)")
        if f.number in outcome.repeated:
            out.print(f"  forecast {f.number}: the same as its last score: not appended again")
        if s.get("frozen_before_training") is False:
            started = f.record.get("hero_runs_started") or []
            when = (  # what the freeze itself saw, else what jobs.json says
                f"after hero run{'s' if len(started) > 1 else ''} {', '.join(map(str, started))} had trained or begun to"
                if f.record.get("after_hero") is True
                else "after the hero was first submitted"
            )
            err.print(
                f"[yellow]warning[/]: forecast {f.number} was frozen {escape(when)}: a late check, not a prediction made "
                "first"
            )
        if s.get("warning"):
            err.print(f"[yellow]warning[/]: forecast {f.number}: {s['warning']}")
    for run_id, why in outcome.skipped.items():
        err.print(f"[yellow]not scored[/]: hero run {escape(run_id)}: {escape(why)}")
    for number, why in outcome.unmatched.items():
        err.print(f"[yellow]not scored[/]: forecast {number}: {why}")
    if outcome.scored:
        finals = [s for _, s in outcome.scored if s["final"]]
        source = outcome.observation.source.get("kind")
        unfinished = (
            "the curve stops before the hero's planned tokens" if source == "curve" else "the hero has not finished"
        )
        # a freeze that a final loss scored before stays checked (`forecast show` calls it so): no projection again
        checked = sorted(
            {f.number for f, _ in outcome.scored if any(s.get("final") and s.get("point") == "hero" for s in f.scores)}
        )
        # finals at --predict points only: `forecast show` keeps calling each freeze's hero forecast a projection
        points = (
            sorted({str(s["point"]) for s in finals}) if finals and all(s["point"] != "hero" for s in finals) else []
        )
        at = f" at --predict {', '.join(points)} (not the freezes' hero forecast)" if points else ""
        # freezes made before the hero trained are predictions; those made after it, late checks: say which is which
        late = sorted({f.number for f, s in outcome.scored if s["final"] and s.get("frozen_before_training") is False})
        early = sorted({f.number for f, s in outcome.scored if s["final"]} - set(late))
        kind = (
            f"a prediction checked against the hero{at}"
            + (
                f" (forecast {', '.join(map(str, early))}); forecast {', '.join(map(str, late))} was frozen after it "
                "had trained: a late check"
                if late
                else ""
            )
            if early
            else f"checked against the hero{at}, but frozen after it had trained: not a prediction made first"
            if finals
            else f"against a partial curve ({unfinished}); forecast {', '.join(map(str, checked))} stays checked by its "
            "earlier score of the hero's final loss (`ladder forecast show`)"
            if checked
            else f"still a projection ({unfinished})"
        )
        n = len({f.number for f, _ in outcome.scored})
        runs = {str((s.get("source") or {}).get("run_id")) for _, s in outcome.scored}
        against = f" against {len(runs)} hero runs" if len(runs) > 1 else ""
        out.print(f"scored {n} frozen forecast(s){against}: {kind}")
