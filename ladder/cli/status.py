"""`ladder status` (where every run stands, once or live) and `ladder collect` (the results table)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import typer
from rich import box
from rich.console import Group
from rich.markup import escape
from rich.table import Table

from ladder import layout
from ladder.cli.options import JSON_OPT, flag, positive_number
from ladder.console import err, human_seconds, out, print_json, sci
from ladder.errors import SpecError
from ladder.model.config import format_count

PROGRESS_EVERY_S = 60.0  # without a terminal: a progress line at least this often while runs go on
FAILED = ("failed", "diverged", "corrupt", "damaged")
COLOURS = {
    "done": "green",
    "failed": "red",
    "diverged": "red",
    "corrupt": "red",
    "damaged": "red",
    "running": "cyan",
    "queued": "yellow",
    "cancelled": "magenta",
    "interrupted": "yellow",
    "waiting": "blue",
}


def status_table(rows, title: str) -> Group:
    """The runs as a table that fits 120 columns, then a line per run with an error or skipped lines (a message
    never wraps inside a cell). tokens: the run's planned training tokens D (a cooldown branch: its trunk's prefix
    included, the tokens its model will have seen, as its progress counts them; the totals line counts a branch's
    own tokens); FLOPs spent: exact counted, a branch's own steps only; train, eval: the latest losses (a finished
    run: its result's); tok/s: tokens trained / seconds in training steps (result.json's definition)."""
    table = Table(
        title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True
    )
    # seed and planned tokens tell replicates apart; progress is the share of them trained. Not "budget": a
    # study's budgets are tokens/param multiples, and `plan --suggest --budget` is FLOPs
    for name in (
        "run",
        "variant",
        "size",
        "seed",
        "tokens",
        "state",
        "progress",
        "FLOPs spent",  # a branch's own steps: not its tokens column x flops_per_token, the report's point C
        "train",
        "eval",
        "tok/s",
        "ETA",
        "job",
    ):
        table.add_column(
            name,
            no_wrap=name not in ("variant", "job"),
            justify="left" if name in ("run", "variant", "size", "state", "job") else "right",
        )
    lines = []
    for r in rows:
        colour = COLOURS.get(r.state, "white")
        table.add_row(
            r.run_id,
            r.variant,
            r.size,
            "-" if r.seed is None else str(r.seed),
            format_count(r.tokens_planned) if r.tokens_planned else "-",
            f"[{colour}]{r.state}[/]",
            f"{100 * r.progress:.0f}%",
            sci(r.flops_spent),
            f"{r.train_loss:.4f}" if r.train_loss is not None else "-",
            f"{r.eval_loss:.4f}" if r.eval_loss is not None else "-",
            f"{r.tokens_per_s:,.0f}" if r.tokens_per_s else "-",
            human_seconds(r.eta_s),
            r.job_id or "-",
        )
        if r.error:
            lines.append(f"[{colour}]{r.run_id} {r.state}[/]: {escape(r.error)}")
        lines.extend(f"[yellow]{r.run_id}[/]: {escape(problem)}" for problem in r.problems)
    return Group(table, *lines)


def progress_line(rows, what: str, eta_s: float | None = None) -> str:
    """One compact line for a log: runs done and running, tokens (a branch: the ones it trains itself), and the
    time left (``eta_s``: an :class:`ladder.books.run_status.EtaClock`'s, from the measured throughput)."""
    from ladder.books.run_status import totals

    t = totals(rows)
    counts = t["states"]
    parts = [f"{counts.get('done', 0)}/{t['runs']} done"]
    parts += [f"{n} {state}" for state, n in counts.items() if n and state != "done"]
    left = t["tokens_planned"] - t["tokens_done"]
    eta = human_seconds(eta_s) if eta_s is not None and eta_s > 0 and left > 0 else "-"
    return (
        f"{time.strftime('%H:%M:%S')} {what}: {', '.join(parts)}; {format_count(t['tokens_done'])}/"
        f"{format_count(t['tokens_planned'])} tokens ({100 * t['progress']:.0f}%), ETA {eta}"
    )


class StatusLines:
    """Progress where there is no terminal to redraw (a log, CI): a :func:`progress_line` when the runs' states
    change, and otherwise about once a minute (``PROGRESS_EVERY_S``). The ETA is measured on every poll, printed
    or not (:class:`ladder.books.run_status.EtaClock`)."""

    def __init__(self, console, what: str, every_s: float | None = None, clock=time.monotonic) -> None:
        from ladder.books.run_status import EtaClock

        self.console, self.what, self.clock = console, what, clock
        self.every_s = PROGRESS_EVERY_S if every_s is None else every_s
        self.last_states: tuple | None = None
        self.last_at = -math.inf
        self.eta = EtaClock(clock=clock)

    def __call__(self, rows) -> None:
        eta_s = self.eta(rows)
        states = tuple(r.state for r in rows)
        now = self.clock()
        if states != self.last_states or now - self.last_at >= self.every_s:
            self.console.print(progress_line(rows, self.what, eta_s), soft_wrap=True)
            self.last_states, self.last_at = states, now


@contextmanager
def watching(console, title: str) -> Iterator[Callable[[list], None]]:
    """What shows the runs while a command waits for them: the live table on a terminal, :class:`StatusLines`
    elsewhere."""
    from ladder.books.run_status import totals

    if not console.is_terminal:
        yield StatusLines(console, title)
        return
    from rich.live import Live

    from ladder.books.run_status import EtaClock

    live = Live(console=console, refresh_per_second=2, transient=False)
    eta = EtaClock()

    def show(rows) -> None:
        if not live.is_started:
            live.start()
        live.update(Group(status_table(rows, title), totals_line(totals(rows), eta(rows))))

    try:
        yield show
    finally:
        if live.is_started:
            live.stop()


def totals_line(t: dict, eta_s: float | None = None) -> str:
    states = ", ".join(f"{n} {s}" for s, n in t["states"].items() if n)
    eta = f"; ETA {human_seconds(eta_s)}" if eta_s else ""
    hero = t.get("hero_flops_spent") or 0.0
    # fit and the report give the ladder's cost without the hero: say both, or the two totals seem to disagree
    n = t.get("heroes", 1)
    whose = "the hero run's" if n == 1 else f"the {n} hero runs'"  # a replicate or a moved hero makes several
    apart = (
        f"; {whose} {sci(hero)} included: the ladder's cost {sci(t['flops_spent'] - hero)} without it" if hero else ""
    )
    return (
        f"{t['runs']} runs: {states}; {format_count(t['tokens_done'])}/{format_count(t['tokens_planned'])} "
        f"tokens ({100 * t['progress']:.0f}%); {sci(t['flops_spent'])} of {sci(t['flops_planned'])} FLOPs spent "
        f"(exact counted: flops_per_token x the tokens each run trained itself, a cooldown branch only those after "
        f"its trunk's snapshot; failed and cancelled runs included{apart}){eta}"
    )


SOME = 8  # run ids listed in one line; `ladder status` and --json list them all


def _some(run_ids: list[str]) -> str:
    """Run ids for one line: a fresh study's 37 pending ids were a wall of text in collect's output."""
    if len(run_ids) <= SOME:
        return ", ".join(run_ids)
    return f"{', '.join(run_ids[:SOME])} and {len(run_ids) - SOME} more (`ladder status` lists them)"


def _warn_of_damaged_jobs(study_dir: Path) -> None:
    """One line on stderr when jobs.json is damaged: status and collect go on without it (the books come from the
    run folders), but a job still queued, or a run cancelled, is not seen."""
    from ladder.books.job_records import problem

    why = problem(layout.StudyDir(Path(study_dir)))
    if why:
        err.print(
            f"[yellow]warning[/]: {escape(why)}: ignored; the runs' states come from their folders alone (a queued "
            "job shows as planned or interrupted, a cancelled run as interrupted)",
            soft_wrap=True,
        )


def status(
    study_dir: Path = typer.Argument(..., help="A planned study directory."),
    watch: bool = flag(
        "watch",
        "Keep a live display until every run has ended, or no run is left queued or running to end (a run "
        "planned or interrupted with no live job is not waited for: submit it first); without a terminal: a "
        "progress line when a run changes state, else about once a minute.",
    ),
    interval: float | None = typer.Option(
        None,
        "--interval",
        help="Seconds between refreshes with --watch, above 0 and at most 86,400 (a day; default 2).",
        show_default=False,
    ),
    check: bool = flag(
        "check",
        "Exit 1 when a run failed, diverged, is corrupt or damaged (with --watch: once "
        "every run has ended), naming them; for scripts and CI.",
    ),
    as_json: bool = JSON_OPT,
) -> None:
    """Show each run's state, progress, losses, throughput, ETA and job id.

    States: planned, waiting (a cooldown branch whose trunk has not reached its branch step; it names the
    trunk), queued, running, interrupted (resumable), done, failed, diverged, cancelled, corrupt (trained, but
    result.json is missing or unusable), damaged (its run directory or spec.json is missing or unreadable: the
    command that repairs it is named); a failed, diverged, corrupt or damaged run shows its error, and a run whose
    files had lines to skip shows them. A finished run shows the losses of its result.json. Totals follow the
    table, with the FLOPs spent by every run (a branch: its own steps)."""
    from ladder.books.run_status import LIVE, EtaClock, earlier_runs, study_status, totals, wait

    given, interval = interval is not None, 2.0 if interval is None else interval
    # at most a day between refreshes: a bigger one (1e308) is a typo, and time.sleep overflows on it
    positive_number(interval, "--interval", "a positive number of seconds")
    if interval > 86400:
        raise SpecError(f"--interval {interval:g}: must be at most 86400 seconds (a day) between refreshes")
    if given and not watch:  # a one-shot status never refreshes: the option was meant for --watch
        raise SpecError(
            f"--interval {interval:g}: only refreshes with --watch (`ladder status {layout.shell_word(study_dir)} --watch`)"
        )
    if watch and not as_json:
        _warn_of_damaged_jobs(study_dir)
        with watching(out, f"status: {study_dir}") as show:
            rows = wait(study_dir, poll_s=interval, on_update=show)
    else:
        rows = wait(study_dir, poll_s=interval) if watch else study_status(study_dir)
        _warn_of_damaged_jobs(study_dir)
        # the study's time left, as `ladder run` and --watch give it, while something runs or waits its turn
        eta_s = EtaClock()(rows) if any(r.state in LIVE for r in rows) else None
        earlier = earlier_runs(study_dir)  # runs the study file planned before it was edited: kept, said
        if as_json:
            print_json(
                {
                    "runs": [r.to_dict() for r in rows],
                    "totals": {**totals(rows), "eta_s": eta_s},
                    "earlier_plans": earlier,
                }
            )
        else:
            out.print(status_table(rows, f"status: {study_dir}"))
            out.print(totals_line(totals(rows), eta_s))
            if earlier:
                out.print(earlier_line(study_dir, earlier))
    bad = [r.run_id for r in rows if r.state in FAILED]
    if check and bad:
        what = (
            "run failed, diverged, is corrupt or damaged"
            if len(bad) == 1
            else "runs failed, diverged, are corrupt or damaged"
        )
        err.print(f"[red]{len(bad)} {what}[/]: {', '.join(bad)}")
        raise typer.Exit(1)


def earlier_line(study_dir: Path, earlier: dict[str, int]) -> str:
    """The line under the totals that counts the run directories of earlier plans (kept, not in this plan). Their
    study file may be unedited: an older ladder planned them with defaults (a precision, a recipe) this one plans
    otherwise, and no study file takes them back then; `ladder plan` names the fields that differ."""
    n = sum(earlier.values())
    states = ", ".join(f"{k} {s}" for s, k in sorted(earlier.items(), key=lambda x: (-x[1], x[0])))
    where = layout.StudyDir(Path(study_dir))
    return (
        f"earlier plans: {n} more run director{'ies' if n != 1 else 'y'} in {escape(str(where.runs))} ({states}), "
        "planned before the study file was edited or by another version of ladder, not in the current plan: kept on "
        "disk, but neither collected nor fitted; `ladder plan STUDY_FILE --out "
        f"{escape(layout.shell_word(where.path))}` names the fields their specs differ in from the plan's, and a study "
        "file that plans them as they were takes them back"
    )


def collect(
    study_dir: Path = typer.Argument(..., help="A planned study directory."),
    as_json: bool = JSON_OPT,
) -> None:
    """Gather every planned run into results.parquet/.csv (one row per run, whatever its state) and the
    curves into curves.parquet.

    Reads only the files the runs wrote. A problem (an unusable result.json, a torn metrics line, an unreadable
    lm-eval file) costs only what it touches and is reported; the run's row stays, with its state and error."""
    from ladder.books.collect import collect_and_write, mixed_data

    c, paths = collect_and_write(study_dir)  # another collect at the same time waits its turn
    _warn_of_damaged_jobs(study_dir)
    mixed = mixed_data(c.runs, study_dir)  # runs trained on other preparations of the corpus, fitted as one
    payload = {
        "rows": len(c.runs),
        "files": [str(p) for p in paths],
        "states": c.states,
        "problems": [p.to_dict() for p in c.problems],
        "pending": c.pending,
        "failed": c.failed,
        "warnings": [mixed] if mixed else [],
    }
    if as_json:
        print_json(payload)
        return
    if mixed:
        err.print(f"[yellow]warning[/]: {escape(mixed)}", soft_wrap=True)
    for p in c.problems:
        err.print(f"[yellow]problem[/] {escape(str(p))}")
    if c.failed:
        err.print(
            f"[red]{len(c.failed)} run{'s' if len(c.failed) != 1 else ''} failed[/] (see `ladder status "
            f"{escape(layout.shell_word(study_dir))}`): {_some(c.failed)}"
        )
    if c.pending:
        n = len(c.pending)
        out.print(f"{n} run{'s' if n != 1 else ''} not finished yet: {_some(c.pending)}")
    states = ", ".join(f"{n} {s}" for s, n in c.states.items())
    out.print(f"collected {len(c.runs)} runs ({states}) into {paths[0]} (and .csv, {paths[2].name})")
