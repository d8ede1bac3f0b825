"""`ladder plan`: expand a study into run directories and show what they cost."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from ladder.cli.options import JSON_OPT, flag, out_path
from ladder.console import err, human_seconds, out, print_json, sci
from ladder.errors import SpecError
from ladder.model.config import format_count, share_of_hero

if TYPE_CHECKING:
    from pathlib import Path

    from ladder.plan.planner import Plan
    from ladder.studies.spec import StudySpec

FIT_CHECK_HELP = (
    "Refuse, before anything is written, a ladder that `ladder fit` cannot fit: too few sizes, runs or budgets "
    "per variant (the default). --no-fit-check {verb} it anyway, with a warning: for a trial run of the "
    "machinery, or a ladder you will grow (more sizes or budgets, then plan again) before you fit it.{more}"
)


def fit_check_flag(verb: str, more: str = "") -> bool:
    """``--fit-check/--no-fit-check`` of `plan`, `run` and `studies validate`; ``verb`` says what the escape
    hatch does in that command."""
    return flag("fit-check", FIT_CHECK_HELP.format(verb=verb, more=more), default=True)


def fit_refusal(refuse: list[str], verb: str) -> str:
    """The one line that refuses a ladder `ladder fit` cannot fit: the whole requirement, and the escape hatch."""
    return (
        f"`ladder fit` will refuse this ladder: {'; '.join(refuse)}; to {verb} it anyway (a trial run, or a ladder "
        "you will grow before fitting), pass --no-fit-check"
    )


def fit_check(refuse: list[str], check: bool, verb: str) -> list[str]:
    """What `ladder fit` will refuse (``fit_requirements``): a SpecError naming the whole requirement and the
    escape hatch when ``check``, else the warnings to print."""
    if refuse and check:
        raise SpecError(fit_refusal(refuse, verb))
    return [f"`ladder fit` will refuse this ladder: {w}" for w in refuse]


def checked_plan(study: str, spec: StudySpec, check_fit: bool, verb: str) -> tuple[Plan, list[str]]:
    """``spec`` expanded, after the checks beyond the schema (machine, data, what `ladder fit` will refuse), which
    refuse in one line naming the study file; and the warnings the checks add (`studies validate` and `plan`)."""
    from ladder.plan.planner import expand
    from ladder.plan.plausibility import (
        check_machine,
        corpus_bytes,
        corpus_size_problem,
        data_reuse,
        hub_warning,
        unused_settings,
    )
    from ladder.plan.requirements import (
        ablation_requirements,
        data_requirements,
        fit_requirements,
        hero_requirements,
    )
    from ladder.studies import naming_the_file

    with naming_the_file(study):
        check_machine(spec)
        p = expand(spec)
        refuse, partly = fit_requirements(spec, p.runs)
        # what data preparation or `ladder fit` will refuse is refused now, before anything is written
        bound = corpus_bytes(spec)  # listed and sized once: a local corpus folder may hold thousands of files
        too_small = corpus_size_problem(spec, bound)
        problems = data_requirements(spec) + ([too_small] if too_small else [])
        if refuse and check_fit:
            problems.append(fit_refusal(refuse, verb))
        if problems:
            raise SpecError("; ".join(problems))
    partly += hero_requirements(spec, p.runs, p.hero.tokens_per_param) + ablation_requirements(spec, p.runs)
    partly += unused_settings(spec) + data_reuse(spec, p.runs, p.hero.tokens, bound) + hub_warning(spec)
    return p, fit_check(refuse, check_fit, verb) + partly


def _mib(n_bytes: float | None) -> str:
    """A memory estimate in the table: MiB below 10 GiB, GiB above (the JSON has the bytes)."""
    if not n_bytes:
        return ""
    return f"{n_bytes / 2**20:,.0f} MiB" if n_bytes < 10 * 2**30 else f"{n_bytes / 2**30:,.1f} GiB"


def plan(
    study: str = typer.Argument(
        ...,
        help="A study YAML file, a built-in study name (see `ladder studies list`), or a planned study directory "
        "(planned again in place).",
    ),
    out_dir: str | None = typer.Option(
        None,
        "--out",
        metavar="PATH",
        help="Study directory (default ./ladder-runs/<name>, or STUDY itself when it is one).",
    ),
    dry_run: bool = flag("dry-run", "Print the plan, write nothing."),
    suggest: bool = flag(
        "suggest",
        "Of a fitted STUDY directory: the one or two runs that would shrink the hero's interval most per FLOP.",
    ),
    budget: str | None = typer.Option(
        None,
        "--budget",
        help="With --suggest: the most exact FLOPs the suggested runs may cost together, e.g. 1e14 (default: no "
        "limit: the best one or two runs, whatever they cost).",
    ),
    add: bool = flag("add", "With --suggest: add them to the study (ladder.extra_runs) and plan them."),
    check_fit: bool = fit_check_flag("plans"),
    as_json: bool = JSON_OPT,
) -> None:
    """Expand a study into runs and write a directory per run, named by the hash of its spec.

    Prints each run's shape, size, tokens, FLOPs, batch, LR, steps, estimated wall time and memory, and the
    ladder's cost as a percentage of the hero's compute. Every FLOP number is exact counted FLOPs (FLOPs per
    token x tokens; the JSON's `conventions` say so per number); notes say which parameter count a size holds
    fixed and how the embedding and the LM head decay. Under a wsd schedule the budgets of a size are one
    trunk and cooldown branches off it (shown under their trunk, with the FLOPs of their own steps); the
    totals count each trunk once. Planning again (`ladder plan STUDY_DIR`: in place) is a no-op that rewrites
    what is missing (unfinished runs take a new micro-batch, interval or compile setting, and runs not started
    yet the trunk or branch role of new budgets; a run's id is its science only); adding a value to an axis
    adds only the new runs; nothing is ever deleted. A ladder that `ladder fit` cannot fit is refused before
    anything is written (--no-fit-check plans it anyway), and so is a vocabulary or corpus cap that data
    preparation refuses.

    --suggest values a larger size, another budget and a seed replicate by refitting the forecast with outcomes
    drawn from it, and prints each with its cost and the hero's expected interval after; --add plans the best.

    Example:

    ladder plan ladder-runs/default --suggest --budget 1e14 --add
    """
    from ladder.plan.planner import check_target, run_row, study_dir_for, write_plan
    from ladder.studies import load_study

    if not suggest:
        for opt, given in (("--budget", budget is not None), ("--add", add)):
            if given:
                raise SpecError(f"{opt} goes with --suggest (e.g. `ladder plan STUDY_DIR --suggest {opt} ...`)")
    elif out_dir is not None:
        raise SpecError("--out does not go with --suggest: the suggested runs are planned into STUDY_DIR itself")
    else:
        from ladder.cli.suggest import print_suggestion

        print_suggestion(study, budget, add, dry_run, as_json)
        return

    spec = load_study(study)
    p, warnings = checked_plan(study, spec, check_fit, "plan")
    p.warnings += warnings
    target = study_dir_for(study, spec, out_path(out_dir))
    if dry_run:  # refuses what writing would refuse (another study's folder, a file): a dry run that passes holds
        check_target(p, target)
    if not dry_run:  # queued or running runs the new plan would drop are refused before anything is written
        from ladder.books.run_status import refuse_dropping_live_runs

        refuse_dropping_live_runs(target, [r.run_id for r in p.runs])
    written = None if dry_run else write_plan(p, target)
    p.warnings += _branches_from_step_0(p, target)
    rows = [run_row(r, None if dry_run else target, p.estimates_s[r.run_id], p.memory.get(r.run_id)) for r in p.runs]
    totals = p.totals()
    if as_json:
        payload = {
            "study": spec.name,
            "study_dir": None if dry_run else str(target),
            "dry_run": dry_run,
            "runs": rows,
            "totals": totals,
            "hero": p.hero.to_dict(),
            "conventions": p.conventions(),
            "notes": p.notes,
            "warnings": p.warnings,
        }
        if written:
            payload.update(
                new=written.new,
                existing=written.existing,
                orphans=written.orphans,
                earlier=written.earlier.strip(" ()") or None,
                refreshed=written.refreshed,
                relinked=written.relinked,
            )
        print_json(payload)
        return
    conv = spec.ladder.param_count
    # 120 columns in a log: run ids and numbers never wrap, the labels do (a trunk's snapshot steps: the JSON)
    table = Table(
        title=f"plan: {spec.name} (params: {conv}; FLOPs: exact, a branch its own steps; est. time, memory)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=(0, 0),
    )
    for name in (
        "run",
        "variant",
        "axes",
        "shape",
        "params",
        "tokens",
        "D/N",
        "FLOPs",
        "batch",
        "LR",
        "steps",
        "time",
        "memory",
    ):
        table.add_column(
            name,
            no_wrap=name not in ("variant", "axes"),
            min_width={"variant": 8, "axes": 10}.get(name),
            justify="left" if name in ("run", "variant", "axes", "shape") else "right",
        )
    for r, run in zip(rows, p.runs):  # the variant names the ablation axes; size is in params
        # an isoFLOP budget as every compute is printed (C=3.00e9), not as its axis value holds it (3e+09)
        axes = ", ".join(
            f"C={sci(float(v))}" if k == "budget" else f"{k}={v}"
            for k, v in r["axes"].items()
            if k in ("seed", "budget")
        )
        run_cell = r["run_id"]
        mult = r["axes"].get("multiplier")
        if r["trunk_run_id"]:
            run_cell = f"  └ {r['run_id']}"
            axes = ", ".join(filter(None, [f"{mult:g}x@{r['branch_step']:,}", axes]))
        elif r["branch_steps"]:
            axes = ", ".join(filter(None, [f"trunk {mult:g}x", axes]))
        elif mult is not None:
            axes = ", ".join(filter(None, [f"{mult:g}x", axes]))
        table.add_row(
            run_cell,
            r["variant"],
            axes,
            f"{run.shape.d_model}x{run.shape.n_layers} h{run.shape.n_heads}/{run.shape.n_kv_heads}",
            format_count(r["params"]),
            format_count(r["tokens"]),
            f"{r['tokens_per_param']:.1f}",
            sci(r["flops_own"]),
            format_count(r["batch_tokens"]),
            f"{r['lr']:.3g}",
            f"{r['steps']:,}",
            human_seconds(r["est_wall_s"]),
            _mib(r["est_memory_bytes"]),
        )
    out.print(table)
    for line in _budget_and_seed_lines(spec, p):
        out.print(line)
    if p.packing is not None:
        k = p.packing
        out.print(f"packing: {k.runs_at_once} run(s) at once, {k.threads_per_run} thread(s) each ({k.rule})")
    h = p.hero
    runs, flops = f"{totals['runs']} runs", f"{sci(totals['flops'])} FLOPs (exact)"
    if totals["branches"]:
        # one figure for the cost (the one fit and the report give); the independent-runs sum only beside it
        alone = totals["runs"] - totals["trunks"] - totals["branches"]
        runs += f" ({totals['trunks']} trunks, {totals['branches']} branches" + (
            f", {alone} run(s) without branches)" if alone else ")"
        )
        flops = (
            f"{sci(totals['flops'])} FLOPs (exact; each trunk counted once, each branch its own steps: "
            f"{sci(totals['flops_if_independent'])} if they were independent runs)"
        )
    out.print(
        f"totals: {runs}, {flops}, {format_count(totals['tokens'])} tokens, "
        f"~{human_seconds(totals['est_wall_s'])} of {spec.executor.hardware} time (one run at a time)"
    )
    out.print(
        f"hero: {format_count(h.params)} params ({conv}), {format_count(h.tokens)} tokens, {sci(h.compute)} FLOPs; "
        f"the ladder costs {' '.join(share_of_hero(totals['ladder_pct_of_hero']))} (exact FLOPs / exact FLOPs)"
    )
    out.print(f"FLOPs: {p.conventions()['flops']}")
    for note in p.notes:
        out.print(f"note: {escape(note)}")
    for warning in p.warnings:
        err.print(f"[yellow]warning[/]: {escape(warning)}")
    if dry_run:
        out.print("[yellow]dry run[/]: nothing written")
    elif written is not None:
        out.print(
            f"wrote {written.study_dir}: {len(written.new)} new run{'' if len(written.new) == 1 else 's'}, {len(written.existing)} already planned"
            + (
                f" ({len(written.refreshed)} unfinished ones take the new micro-batch, interval or compile settings)"
                if written.refreshed
                else ""
            )
            + (
                f", {len(written.relinked)} relinked to the trunks and branch steps of the new budgets"
                if written.relinked
                else ""
            )
            + (
                f", {len(written.orphans)} run directories of earlier plans kept{escape(written.earlier)}"
                if written.orphans
                else ""
            )
        )


def _branches_from_step_0(p: Plan, target: Path) -> list[str]:
    """A branch whose trunk finished without a snapshot at its branch step (a budget added after the trunk trained)
    trains from step 0 as an independent run: said when it is planned, with what it will cost, since the FLOPs
    column and the totals count a branch's own steps only."""
    from ladder import layout
    from ladder.books.run_books import trains_from_step_0

    sd, out = layout.StudyDir(target), []
    for run in p.runs:
        if run.trunk is None or not sd.path.is_dir():
            continue
        rd = sd.run(run.run_id)
        started = rd.metrics.is_file() or rd.checkpoint_pointer.is_file() or rd.result.is_file()
        if started or not trains_from_step_0(rd, run):
            continue
        out.append(
            f"branch {run.run_id} ({format_count(run.tokens)} tokens): its trunk {run.trunk.run_id} finished without a "
            f"snapshot at step {run.trunk.step:,} (it trained before this budget was planned), so the branch will "
            f"train from step 0 as an independent run: {sci(run.flops)} FLOPs, not the {sci(run.own_flops)} of its "
            "own steps that the FLOPs column and the totals count"
        )
    return out


def _budget_and_seed_lines(spec, p) -> list[str]:
    """What the study's budgets and seeds mean for its runs, in words."""
    from ladder.plan.rung_runs import branches_off_a_trunk

    lines = []
    lad = spec.ladder
    if lad.mode == "chinchilla" and len(lad.budgets) > 1:
        names = ", ".join(f"{b:g}x" for b in sorted(lad.budgets))
        if branches_off_a_trunk(spec):
            lines.append(
                f"budgets {names} of {lad.tokens_per_param:g} tokens/param: one wsd trunk per size, variant and seed "
                f"trains to {max(lad.budgets):g}x; each smaller budget branches off it at its first cooldown step "
                "(same batch, LR and warmup as the trunk)"
            )
        else:
            cost = {b: 0.0 for b in lad.budgets}
            for r in p.runs:
                cost[r.axes.get("multiplier", 1.0)] = cost.get(r.axes.get("multiplier", 1.0), 0.0) + r.flops
            each = ", ".join(f"{b:g}x {sci(cost[b])} FLOPs" for b in sorted(cost))
            lines.append(
                f"budgets {names}: independent runs (a {spec.training.schedule.kind} schedule decays over the whole "
                f"run; schedule.kind: wsd would branch them off one trunk per size): {each}"
            )
    if spec.seeds_vary:
        seeds = sorted({r.seed for r in p.runs})
        rep = lad.replicates
        where = (
            f"; replicates at {', '.join(map(format_count, rep.sizes))} with seeds {', '.join(map(str, rep.seeds))}"
            if rep
            else ""
        )
        lines.append(
            f"seeds {', '.join(map(str, seeds))}{where}: one seed per run drives both its initialisation "
            "and its data order; runs that differ only by seed are repeats of one configuration"
        )
    return lines
