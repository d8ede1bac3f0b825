"""`ladder plan STUDY_DIR --suggest`: which run to add to the ladder next, printed (and `--add`: planned)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from rich.markup import escape
from rich.table import Table

from ladder.console import out, print_json, sci
from ladder.errors import SpecError


def parse_budget(budget: Optional[str]) -> Optional[float]:
    """``--budget`` as exact FLOPs (``1e14``, ``300T``)."""
    if budget is None:
        return None
    from ladder.model.config import parse_count

    value = parse_count(budget)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise SpecError(f"--budget {budget!r}: must be a positive number of exact FLOPs, e.g. 1e14 or 300T")
    return float(value)


def print_suggestion(study: str, budget: Optional[str], add: bool, dry_run: bool, as_json: bool) -> None:
    from ladder.suggest import suggest

    path = Path(study)
    if not path.is_dir():
        raise SpecError(f"--suggest {study!r}: give a planned, collected and fitted study directory (it reads its "
                        "fit.json), not a study file or name")
    s = suggest(path, budget=parse_budget(budget), add=add and not dry_run)
    if as_json:
        print_json({**s.to_dict(), "dry_run": dry_run})
        return
    pct = f"{s.current_half_width_pct:.2f}%" if s.current_half_width_pct is not None else "-"
    base = f"{s.baseline_half_width_pct:.2f}%" if s.baseline_half_width_pct is not None else "-"
    out.print(f"hero interval now: ±{pct} (90%); refitted as each candidate is: ±{base}")
    table = Table("candidate", "runs", "FLOPs (exact)", "% of hero", "half-width after", "gain", "gain per FLOP",
                  title=f"what to train next: {escape(str(path))}", title_justify="left")
    chosen = {id(c) for c in s.suggested}
    for c in s.candidates:
        v = c.value
        after = f"±{v.half_width_pct:.2f}%" if v is not None and v.half_width_pct is not None else \
            f"[dim]{escape(v.reason if v is not None else '-')}[/]"
        pct_hero = f"{100 * c.flops / s.hero_flops:.2g}%" if s.hero_flops else "-"
        gain = f"{c.gain_pct:+.2f} pp" if c.gain_pct is not None else "-"
        mark = "[bold green]* [/]" if id(c) in chosen else "  "
        table.add_row(mark + escape(c.what), str(len(c.runs)), sci(c.flops), pct_hero, after, gain,
                      sci(c.gain_per_flop) + " pp" if c.gain_per_flop is not None else "-")
    out.print(table)
    out.print("[dim]half-width after: the mean over simulated outcomes drawn from the current forecast at the run; "
              "gain: the interval's half-width it removes, in percentage points (pp) of the hero's loss[/]")
    if s.note:
        out.print(f"[yellow]{escape(s.note)}[/]")
    if not s.suggested:
        return
    out.print("suggested (*), as ladder.extra_runs of the study:")
    for c in s.suggested:
        out.print(f"  - {escape(str(c.entry))}")
    if s.added:
        out.print(f"added to {path / 'study.yaml'} and planned: {len(s.added)} new runs "
                  f"({', '.join(s.added)}); train them with `ladder submit {escape(str(path))}`")
    elif add and dry_run:
        out.print("[yellow]dry run[/]: nothing written")
    else:
        out.print(f"add them with `ladder plan {escape(str(path))} --suggest --add`"
                  + (f" --budget {budget}" if budget else ""))
