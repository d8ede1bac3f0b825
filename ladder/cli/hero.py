"""`ladder hero`: the fit's recommended hero as a planned run of the study, for `ladder submit` to train."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from ladder.cli.options import JSON_OPT, check_seed, flag
from ladder.console import err, human_seconds, out, print_json, sci
from ladder.model.config import RunSpec, format_count


def hero(
    study_dir: Path = typer.Argument(..., help="A collected and fitted study directory (holds fit.json)."),
    params: str | None = typer.Option(
        None, "--params", help="Train the hero at this size instead, e.g. 800K (in the study's param_count convention)."
    ),
    tokens: str | None = typer.Option(
        None,
        "--tokens",
        help="Train the hero on this many tokens instead, e.g. "
        "16M (default with --params: the study's tokens_per_param).",
    ),
    seed: int | None = typer.Option(
        None,
        "--seed",
        help="Plan a replicate of the hero with this seed, 0 to 2^32-1 (its "
        "initialisation and data order; the same run otherwise): `ladder forecast "
        "score` then scores the forecast against the replicates' mean too.",
    ),
    dry_run: bool = flag("dry-run", "Show the hero run, write nothing."),
    keep: bool = flag(
        "keep",
        "Keep a hero planned before at another point and never submitted, beside this one (by default this one "
        "replaces it: it leaves the plan, so that `ladder submit` does not train it too).",
    ),
    as_json: bool = JSON_OPT,
) -> None:
    """Plan the hero: the fit's recommendation (shape, tied or untied, tokens, batch, LR, schedule, seed) as a
    run directory of the study, `role: hero` in its spec, listed in plan.json so that `ladder submit` trains it
    on any executor. The fits never use it; `ladder forecast score` scores the frozen forecast against it.

    With --params/--tokens the fit is made again with the hero there: the shape by the same rules, the LR and
    batch by the fit's hyperparameter laws if it has them, else by the study's rules (the sources say which).
    Freeze the forecast before the hero trains, so that it is on record first.

    Examples (the loop; then a smaller hero, shown only):

    ladder forecast freeze ladder-runs/default && ladder hero ladder-runs/default && ladder submit ladder-runs/default

    ladder hero ladder-runs/default --params 800K --tokens 16M --dry-run

    A replicate, to see how far the hero's own seed moves its loss: ladder hero ladder-runs/default --seed 1
    """
    from ladder.forecast.hero_run import parse_override, plan_hero_run

    check_seed(seed, what=" (the replicate's initialisation and data order, as a study's training.seed)")
    n = parse_override(params, "--params")
    d = parse_override(tokens, "--tokens")
    run = plan_hero_run(study_dir, params=n, tokens=d, seed=seed, dry_run=dry_run, keep=keep)
    from ladder import layout

    sw = escape(layout.shell_word(study_dir))  # every command the output names, typed as printed, works
    if run.forecast.get("loss") is None:  # planned all the same (a run to learn from), but never silently
        err.print(
            f"[yellow]warning[/]: no forecast of this hero's loss: {escape(str(run.forecast.get('reason')))}; "
            f"`ladder forecast freeze {sw}` and `ladder forecast score {sw}` have nothing to check it against"
        )
    if run.forecast.get("caveat"):  # as `ladder fit` warns it: on stderr, --json or not
        err.print(f"[yellow]warning[/]: {escape(run.forecast['caveat'])}", soft_wrap=True)
    from ladder.plan.planner import edited_since_plan, read_study

    edited = edited_since_plan(study_dir, read_study(study_dir))
    if edited:  # the hero is sized and trained from the file as it is now, unlike its ladder
        err.print(f"[yellow]warning[/]: {escape(edited)}", soft_wrap=True)
    if as_json:
        print_json(run.to_dict())
        return
    s, spec = run.spec.shape, run.spec
    table = Table("", "hero run", "from", title=f"hero: {escape(spec.study)}", title_justify="left", show_header=False)
    src = run.sources
    rows = [
        ("run", f"{spec.run_id} ({run.state})", str(run.run_dir)),
        (f"params ({spec.param_convention})", format_count(spec.params), src.get("params", src.get("shape", ""))),
        (
            "shape",
            f"d_model {s.d_model}, {s.n_layers} layers, {s.n_heads}/{s.n_kv_heads} heads of {s.head_dim}, "
            f"ffn {s.ffn_dim}, {'tied' if s.tied else 'untied'}",
            src.get("aspect_ratio", ""),
        ),
        ("tied", "yes" if s.tied else "no", src.get("tied", "")),
        ("tokens", f"{format_count(spec.tokens)} ({spec.tokens / spec.params:.3g}/param)", src.get("tokens", "")),
        ("batch", f"{format_count(spec.batch_tokens)} tokens", src.get("batch_tokens", "")),
        ("peak LR", f"{spec.lr:.3g}", src.get("lr", "")),  # as `ladder fit` gives it
        ("steps / warmup", f"{spec.steps:,} / {spec.warmup_steps:,}", src.get("warmup", "")),
        ("schedule", spec.schedule.kind, src.get("schedule", "")),
        ("seed", str(spec.seed), src.get("seed", "")),
        ("FLOPs (exact)", sci(spec.flops), f"{spec.flops_per_token:,} per token x tokens"),
        ("est. time", human_seconds(run.est_wall_s), "the study's executor.hardware"),
    ]
    for label, value, where in rows:
        table.add_row(label, escape(value), f"[dim]{escape(where)}[/]")
    out.print(table)
    fc = run.forecast
    if fc.get("loss") is not None:
        kind = fc.get("kind") or "projection"
        if run.state == "trained already":  # scored: as `ladder fit`, `forecast show` and the report say it
            from ladder.cli.fit_report import checked_by_the_hero

            checked = checked_by_the_hero(Path(study_dir))
            kind = f"a prediction, checked against the hero run: {checked}" if checked else kind
        at = ""
        if fc.get("params") and fc.get("tokens"):
            at = f" at {format_count(fc['params'])} params x {format_count(fc['tokens'])} tokens"
        from ladder.reports.fits.scoring import same_digits

        loss, lo, hi = same_digits(fc["loss"], fc["lo"], fc["hi"])
        out.print(f"the fit forecasts {loss} nats/token{at}, 90% interval [{lo}, {hi}] ({kind})")
        for f in run.frozen:  # what `forecast score` checks: the freeze's number, which a refit may not repeat
            was, flo, fhi = same_digits(f["loss"], f["lo"], f["hi"])
            where = "its hero" if f["point"] == "hero" else f"--predict {f['point']}"
            same = (was, flo, fhi) == (loss, lo, hi)
            out.print(
                f"on record: forecast {f['number']} froze {was} [{flo}, {fhi}] at {escape(where)}"
                + ("" if same else f" (not the fit's forecast above: {_why_not_the_fits(f, run.notes)})")
                + f"; `ladder forecast score {sw}` scores this run against it"
            )
        off = _off_the_forecast_point(spec.params, spec.tokens, fc.get("params"), fc.get("tokens"))
        if off:
            out.print(
                f"this run, the nearest shape the family builds in whole batches, has {format_count(spec.params)} "
                f"params x {format_count(spec.tokens)} tokens ({off}): `ladder forecast score {sw}` scores the "
                "forecast against it and says the difference"
            )
    for note in run.notes:
        out.print(f"note: {escape(note)}")
    if run.replaced:  # the hero moved: the one it moved from, never submitted, leaves the plan (--keep keeps it)
        gone = ", ".join(f"{r.run_id} ({format_count(r.params)} x {format_count(r.tokens)})" for r in run.replaced)
        out.print(
            f"{'would replace' if run.state == 'dry run' else 'replaced'}: hero run(s) {gone}, planned before and "
            f"never submitted: {'would leave' if run.state == 'dry run' else 'dropped from'} the plan, so that "
            f"`ladder submit {sw}` trains this one alone (--keep plans this one beside it)"
        )
    if run.state == "dry run":
        out.print("[yellow]dry run[/]: nothing written")
        return
    from ladder import layout

    verb = {"new": "planned", "replanned": "replanned (its run folder was damaged)"}.get(run.state, "already planned")
    live = _live(study_dir, run.spec) if run.state == "planned already" else None
    train_it = f"train it with `ladder submit {sw}`"
    if live:  # submitted: `ladder submit` skips it, `ladder status` follows it
        verb, train_it = f"already submitted ({live})", f"`ladder status {sw}` follows it"
    if run.state == "trained already":  # status says done: submitting it again would do nothing
        out.print(
            f"trained already: {run.run_dir}; "
            + (
                "no law forecasts this point, so there is no forecast to score it against"
                if run.forecast.get("loss") is None
                else f"score it with `ladder forecast score {escape(layout.shell_word(study_dir))}` (`ladder forecast show "
                f"{escape(layout.shell_word(study_dir))}` lists the scores)"
            )
        )
        return
    if run.forecast.get("loss") is None:  # freeze --predict refuses this point: no score to point to
        out.print(
            f"{verb}: {run.run_dir}; {train_it}; it cannot be scored "
            "against a forecast (no law forecasts this point): a run to learn from, not a check of the fit"
        )
        return
    if not layout.StudyDir(study_dir).forecasts():
        out.print(
            f"[yellow]no frozen forecast yet[/]: `ladder forecast freeze {escape(layout.shell_word(study_dir))}` puts the "
            "forecast on record before the hero trains"
        )
    elif not run.frozen:  # `forecast score` would refuse it: no freeze holds a point at this run
        at = f"{format_count(run.forecast['params'])}:{format_count(run.forecast['tokens'])}"
        out.print(
            f"[yellow]no frozen forecast at this run[/] (each freeze holds other points): `ladder forecast freeze "
            f"{escape(layout.shell_word(study_dir))} --predict {at}` puts it on record before the hero trains; "
            f"`ladder forecast score {sw}` has nothing to score this run against until then"
        )
    out.print(f"{verb}: {run.run_dir}; {train_it}, score it with `ladder forecast score {sw}`")
    others = _other_heroes(study_dir, run.spec)
    if others:  # a hero moved (--params, or the study file's hero section edited): the old one trains too
        sw_ = escape(layout.shell_word(study_dir))
        out.print(
            f"note: the plan also holds {len(others)} other hero run(s) not trained yet ({', '.join(others)}), "
            f"planned before the hero moved: "
            + (
                f"`ladder submit {sw_}` trains them (this one is {live} already)"
                if live
                else f"`ladder submit {sw_}` trains them too; `ladder submit {sw_} --run {Path(run.run_dir).name}` "
                "trains this one alone"
            )
        )


def _why_not_the_fits(frozen: dict, notes: list[str]) -> str:
    """Why a freeze's forecast of the hero is not the number the fit gives now."""
    if frozen.get("data_changed"):
        return "the study's results changed after it was frozen"
    if any(n.startswith("forecast: ") for n in notes):  # a moved hero: the refit's note says why
        return "see the note on the forecast"
    return "the fit was made again after it was frozen"


def _live(study_dir: Path, spec: RunSpec) -> str | None:
    """``queued`` or ``running`` when the hero run's job is alive (`ladder submit` would skip it), else None."""
    from ladder import layout
    from ladder.books import job_records
    from ladder.books.run_status import run_state

    sd = layout.StudyDir(Path(study_dir))
    state = run_state(sd, spec, job_records.read(sd))[0]
    return state if state in ("queued", "running") else None


def _other_heroes(study_dir: Path, this: RunSpec) -> list[str]:
    """The study's hero runs at another point than ``this`` (not its seed replicates, which it is planned beside)
    that have not trained to their end (``id (params x tokens)``)."""
    from ladder import layout
    from ladder.forecast.score import science
    from ladder.plan.planner import readable_runs

    sd = layout.StudyDir(Path(study_dir))
    return [
        f"{r.run_id} ({format_count(r.params)} x {format_count(r.tokens)})"
        for r in readable_runs(sd.path)
        if r.role == "hero"
        and r.run_id != this.run_id
        and science(r) != science(this)
        and layout.result_status(sd.run(r.run_id)) != "done"
    ]


def _off_the_forecast_point(params: float, tokens: float, at_params: float | None, at_tokens: float | None) -> str:
    """How far the planned run lies from the point the law forecast ("-0.6% params, +0.04% tokens"); empty
    when both agree to 0.05%, which no printed digit shows."""
    if not at_params or not at_tokens:
        return ""
    parts = [
        f"{100 * (got / want - 1):+.2g}% {what}"
        for what, got, want in (("params", params, at_params), ("tokens", tokens, at_tokens))
        if abs(got / want - 1) >= 5e-4
    ]
    return ", ".join(parts)
