"""`ladder plan STUDY_DIR --suggest`: which run to add to the ladder next, printed (and `--add`: planned)."""

from __future__ import annotations

import math
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from ladder import layout
from ladder.console import err, out, print_json, sci
from ladder.errors import SpecError


def parse_budget(budget: str | None) -> float | None:
    """``--budget`` as exact FLOPs (``1e14``, ``300T``)."""
    if budget is None:
        return None
    from ladder.model.config import positive_count

    what = "a positive, finite number of exact FLOPs, e.g. 1e14 or 300T"
    n = float(positive_count(budget, "--budget", what))
    if not math.isfinite(n):  # 1e400 reads as inf: echo what was typed, not "inf"
        raise SpecError(f"--budget {budget!r}: must be {what}")
    return n


def _entry_text(entry: dict) -> str:
    """A ``ladder.extra_runs`` entry as a person reads it: ``size 141K, budget 2x, seed 3, variant tied``."""
    from ladder.model.config import format_count

    parts = []
    for key, value in entry.items():
        if key in ("size",) and isinstance(value, (int, float)):
            parts.append(f"size {format_count(value)}")
        elif key == "budget" and isinstance(value, (int, float)):
            parts.append(f"budget {sci(value)} FLOPs" if value >= 1e6 else f"budget {value:g}x")
        elif key == "depth":
            parts.append(f"depth {value} layers")
        else:
            parts.append(f"{key} {value}")
    return ", ".join(parts)


def print_suggestion(study: str, budget: str | None, add: bool, dry_run: bool, as_json: bool) -> None:
    from ladder.forecast.next_runs import pp_change, suggest
    from ladder.reports.render.fmt import share_of_hero

    path = Path(study)
    if not path.is_dir():
        raise SpecError(
            f"--suggest {study!r}: give a planned, collected and fitted study directory (it reads its "
            "fit.json), not a study file or name"
        )

    def progress(step: int, of: int, what: str) -> None:  # on stderr, so that --json stays JSON
        err.print(f"[dim]--suggest {step}/{of}: refitting {escape(what)}[/]", soft_wrap=True)

    s = suggest(path, budget=parse_budget(budget), add=add and not dry_run, progress=progress)
    if as_json:
        print_json({**s.to_dict(), "dry_run": dry_run})
        return
    now = s.current_half_width_pct
    pct = f"±{now:.2f}%" if now is not None else "-"
    base = f"±{s.baseline_half_width_pct:.2f}%" if s.baseline_half_width_pct is not None else "-"
    out.print(
        f"hero interval now: {pct} (90%, the fit's). Each candidate is refitted with and without it on the "
        f"same footing (fewer bootstrap refits: {base} without it), and its change is applied to {pct}."
    )
    table = Table(
        "candidate",
        "runs",
        "cost (exact FLOPs)",
        "half-width now -> after",
        "change",
        title=f"what to train next: {escape(str(path))} (* suggested; ranked by the change per FLOP)",
        title_justify="left",
    )
    chosen = {id(c) for c in s.suggested}
    for c in s.candidates:
        share = " ".join(share_of_hero(100 * c.flops / s.hero_flops)).replace("the hero's compute", "the hero")
        pct_hero = f" ({share})" if s.hero_flops else ""
        if c.after_pct is not None and now is not None:
            after, change = f"{now:.2f}% -> {c.after_pct:.2f}%", pp_change(c.after_pct - now)
        else:
            after, change = "[dim]not valued[/]", "-"
        mark = "[bold green]* [/]" if id(c) in chosen else "  "
        table.add_row(mark + escape(c.what), str(len(c.runs)), sci(c.flops) + pct_hero, after, change)
    out.print(table)
    out.print(
        "[dim]after: the mean over simulated outcomes drawn from the current forecast at the run; change: in "
        "percentage points (pp) of the hero's loss (negative: the interval narrows)[/]"
    )
    for c in s.candidates:
        if c.value is not None and c.value.reason:
            out.print(f"[dim]{escape(c.what)}: {escape(c.value.reason)}[/]", soft_wrap=True)
    if s.note:
        out.print(f"[yellow]{escape(s.note)}[/]")
    if not s.suggested:
        return
    out.print("suggested (*), as runs added to the study's ladder.extra_runs:")
    for c in s.suggested:
        out.print(f"  - {escape(_entry_text(c.entry))}: {escape(c.summary(now))}")
    if s.added:
        out.print(
            f"added to {path / 'study.yaml'} and planned: {len(s.added)} new run{'' if len(s.added) == 1 else 's'} "
            f"({', '.join(s.added)}); train them with `ladder submit {escape(layout.shell_word(path))}`"
        )
    elif add and dry_run:
        out.print("[yellow]dry run[/]: nothing written")
    else:
        given = f" --budget {escape(budget)}" if budget else ""
        out.print(f"add them with `ladder plan {escape(layout.shell_word(path))} --suggest{given} --add`")
