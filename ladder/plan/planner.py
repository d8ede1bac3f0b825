"""Expand a study into runs, and write them as run directories.

``expand`` is pure: study -> ``Plan`` (one ``RunSpec`` per run, the hero, totals, each run's memory estimate and
the packing of runs on devices, :mod:`ladder.plan.packing`; a run that cannot fit its device is refused here).
``write_plan`` puts it on disk: a directory per run named by the hash of its spec, written only if missing, so
planning again is a no-op, adding an axis value adds only the new runs, and nothing is ever deleted. A hero run
that ``ladder hero`` added (:mod:`ladder.forecast.hero_run`) stays in plan.json when the study is planned again.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ladder import layout
from ladder.errors import SpecError, StateError
from ladder.model.config import RunSpec, format_count, format_flops
from ladder.model.hardware import planning_seconds
from ladder.model.memory import MemoryEstimate
from ladder.plan.compiling import resolve_compile
from ladder.plan.earlier import earlier_words
from ladder.plan.hero_size import HeroPlan, plan_hero
from ladder.plan.notes import conventions, notes_and_warnings
from ladder.plan.packing import Packing, check_memory, packing
from ladder.plan.plausibility import (
    adjustments,
    check_runs,
    check_sizes,
    check_study,
    cost_warning,
)
from ladder.plan.rung_runs import axis_combos, extra_rungs, rung_runs, rungs, variant_matches, variant_names
from ladder.plan.study_lock import editing_study
from ladder.studies.spec import StudySpec


@dataclass
class Plan:
    study: StudySpec
    runs: list[RunSpec]
    hero: HeroPlan
    estimates_s: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # which count a size holds fixed, decay of embedding and head
    warnings: list[str] = field(default_factory=list)
    memory: dict[str, MemoryEstimate] = field(default_factory=dict)
    packing: Packing | None = None

    @property
    def total_flops(self) -> float:
        """FLOPs the ladder trains: each trunk once, each branch only the steps after its branch step."""
        return float(sum(r.own_flops for r in self.runs))

    def totals(self) -> dict[str, Any]:
        total_s = sum(self.estimates_s.values())
        return {
            "runs": len(self.runs),
            "trunks": sum(1 for r in self.runs if r.branch_steps),
            "branches": sum(1 for r in self.runs if r.trunk is not None),
            "flops": self.total_flops,
            "flops_if_independent": float(sum(r.flops for r in self.runs)),
            "tokens": sum(r.own_tokens for r in self.runs),
            "est_wall_s": total_s,
            "hero_flops": self.hero.compute,
            "ladder_pct_of_hero": 100.0 * self.total_flops / self.hero.compute,
            "param_convention": self.study.ladder.param_count,
            "flops_convention": "exact",  # every FLOP number of the plan; see conventions()
            "est_memory_max_bytes": max((m.total for m in self.memory.values()), default=None),
            "packing": self.packing.to_dict() if self.packing else None,
        }

    def conventions(self) -> dict[str, str]:
        return conventions(self.study, self.runs)


def estimate_wall_s(run: RunSpec, hardware: str) -> float:
    """What training the run itself takes (a branch: its steps after the branch step)."""
    return planning_seconds(run.own_flops, run.own_tokens, hardware)


def expand(study: StudySpec) -> Plan:
    """All runs of a study, in a stable order: rung by rung, ablation combinations within a rung, then seeds,
    then budgets (a trunk before its branches), then the study's ``ladder.extra_runs``; see
    :mod:`ladder.plan.rung_runs`.
    Nonsense that validates as a schema is refused here, and what the plan changed from what the study asked is
    noted (:mod:`ladder.plan.plausibility`)."""
    check_study(study)
    check_sizes(study)
    rules = study.model.rules(study.data.seq_len)
    runs: list[RunSpec] = []
    seen: dict[str, RunSpec] = {}
    merged: list[str] = []  # grid points that train a model planned already: said, so the run count adds up
    sized: list[str] = []  # isoFLOP size points that land on a model of another point of their budget
    grid = [(rung, None, None) for rung in rungs(study, rules)]
    combos = axis_combos(study)
    for i, (rung, variant, seeds) in enumerate(grid + extra_rungs(study)):
        mine = [combo for combo in combos if variant_matches(variant, combo, study)]
        if not mine:  # an extra run of no variant of the study would be planned as nothing, without a word
            raise SpecError(
                f"ladder.extra_runs[{i - len(grid)}].variant: {variant!r} is not a variant of this study (its "
                f"variants: {', '.join(variant_names(study, combos))}); name one of them, or leave variant out"
            )
        for combo in mine:
            for run in rung_runs(study, rules, rung, combo, seeds):
                # two axis values that train the identical model (e.g. lr 1x == the rule's value)
                if run.run_id in seen:
                    kept = seen[run.run_id]
                    if run.variant == kept.variant and "budget" in run.axes:
                        # two isoFLOP size points of one budget that land on one model: not an ablation's
                        # points ("base at 1.706K as base" said nothing a user could act on)
                        sized.append(
                            f"targets {kept.axes.get('size')} and {run.axes.get('size')} at C="
                            f"{format_flops(float(run.axes['budget']))} (both {format_count(run.params)})"
                        )
                    else:
                        merged.append(
                            f"{run.variant} at {run.axes.get('size', format_count(run.params))} as {kept.variant}"
                        )
                    continue
                seen[run.run_id] = run
                runs.append(run)
    plan = Plan(study=study, runs=runs, hero=plan_hero(study))
    plan.estimates_s = {r.run_id: estimate_wall_s(r, study.executor.hardware) for r in runs}
    plan.runs, compile_note = resolve_compile(runs, study.training.compile, study.executor.hardware, plan.estimates_s)
    plan.notes, plan.warnings = notes_and_warnings(study, runs)
    plan.notes += adjustments(study, runs) + ([compile_note] if compile_note else [])
    if merged:
        plan.notes.append(
            f"{len(merged)} point(s) of the ablation grid train the very model of another and are planned once "
            f"(the same shape, tokens, batch and LR): {', '.join(merged)}"
        )
    if sized:
        plan.notes.append(
            f"{len(sized)} isoFLOP size point(s) land on the model of another point of their budget (whole heads and "
            f"layers, from the family's smallest model up) and are planned once: {', '.join(sized)}"
        )
    plan.warnings += check_runs(study, runs, plan.estimates_s) + cost_warning(
        study, plan.totals()["ladder_pct_of_hero"]
    )
    plan.packing = packing(study.executor, runs)
    plan.memory = check_memory(runs, study.executor, plan.packing)  # refuses a run that cannot fit
    return plan


# ---- on disk -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WriteResult:
    study_dir: Path
    new: list[str]
    existing: list[str]
    orphans: list[str]  # run directories of earlier plans that this plan no longer has (kept, never deleted)
    refreshed: list[str] = field(default_factory=list)  # existing, unfinished runs whose spec.json took new settings
    relinked: list[str] = field(default_factory=list)  # planned runs whose trunk or branch steps were updated
    heroes: list[str] = field(default_factory=list)  # hero runs of `ladder hero`, kept in plan.json
    earlier: str = ""  # how the orphans differ from this plan's runs, said after their count (ladder.plan.earlier)


def default_study_dir(study: StudySpec) -> Path:
    return Path("ladder-runs") / study.slug


def study_dir_for(study_ref: str | Path, study: StudySpec, out_dir: Path | None = None) -> Path:
    """Where a study's runs go (`ladder plan` and `ladder run` alike): ``out_dir``; else ``study_ref`` itself when
    it is a planned study directory (it holds the study.yaml it was planned from: planning or running it again
    continues it in place, the no-op that also rewrites what is missing there, never a second copy under
    ./ladder-runs that trains every run again); else ./ladder-runs/<name>."""
    if out_dir:
        return Path(out_dir)
    path = Path(study_ref)
    if path.is_dir() and layout.StudyDir(path).study.is_file():
        return path
    return default_study_dir(study)


def check_target(plan: Plan, study_dir: Path) -> layout.StudyDir:
    """Refuse a study directory ``plan`` cannot be written to (a file, a folder inside another study, a folder of
    another study), before anything is written: `write_plan` and `ladder plan --dry-run` alike, so that a dry
    run that passes is a plan that can be written."""
    sd = layout.StudyDir(Path(study_dir))
    if sd.path.exists() and not sd.path.is_dir():
        raise StateError(f"{sd.path} exists and is not a directory")
    outer = layout.enclosing_study(sd.path)
    if outer is not None:
        raise StateError(
            f"{sd.path} is inside study {outer}: a study planned there would mix with that study's runs; "
            "choose an --out outside it"
        )
    if sd.path.is_dir() and not any(p.exists() for p in (sd.study, sd.plan, sd.path / "runs")):
        # `ladder plan S --out ..` (or `/`) wrote plan.json, study.yaml and runs/ among the user's own files
        others = sorted(p.name for p in sd.path.iterdir())
        if others:
            shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
            raise StateError(
                f"{sd.path} holds other files ({shown}) and no study: a plan would mix with them; choose a new or "
                "empty --out folder"
            )
    if sd.study.is_file():
        from ladder.studies.spec import read_study_file

        try:
            previous = read_study_file(sd.study).name
        except SpecError:
            previous = None
        if previous is not None and previous != plan.study.name:
            # a study renamed in its file while it grew: "choose another --out" alone trained every run again
            shared = sum(1 for r in plan.runs if sd.run(r.run_id).spec.is_file())
            renamed = (
                f"; the study file plans {shared} of its runs (renamed?): to carry on with them here, keep "
                f"name: {previous!r} in the study file (a run's id does not depend on the name)"
                if shared
                else ""
            )
            raise StateError(
                f"{sd.path} holds study {previous!r}, not {plan.study.name!r}{renamed}; for a new study, choose "
                "another --out directory"
            )
    return sd


def write_plan(plan: Plan, study_dir: Path, *, based_on: StudySpec | None = None) -> WriteResult:
    """Write the plan; existing run directories are left as they are. Under the study's lock from the first run
    directory to plan.json: a `ladder hero` meanwhile adds its run to plan.json, kept, never written over.
    ``based_on``: the study this plan changes (``plan --suggest --add``, after seconds of refits); when study.yaml
    is another study by now (another `ladder plan` wrote it meanwhile), nothing is written: a StateError says so,
    rather than one of the two changes being lost."""
    sd = check_target(plan, study_dir)
    with editing_study(sd.path):
        if based_on is not None and sd.study.is_file() and read_study(sd.path).to_yaml() != based_on.to_yaml():
            raise StateError(
                f"{sd.study} changed while the runs to add were chosen (another `ladder plan` wrote it meanwhile): "
                "nothing added; run the same command again to choose them for the study as it is now"
            )
        return _write_plan(plan, sd)


def _write_plan(plan: Plan, sd: layout.StudyDir) -> WriteResult:
    new, existing, refreshed, relinked = [], [], [], []
    for run in plan.runs:
        rd = sd.run(run.run_id)
        if rd.spec.is_file():
            existing.append(run.run_id)
            took_settings, took_links = _update_existing(rd, run)
            if took_settings:
                refreshed.append(run.run_id)
            if took_links:
                relinked.append(run.run_id)
            continue
        rd.path.mkdir(parents=True, exist_ok=True)
        layout.atomic_write_json(rd.spec, run.model_dump(mode="json"))
        new.append(run.run_id)
    planned = {r.run_id for r in plan.runs}
    heroes = [h for h in planned_heroes(sd) if h not in planned]
    orphans = [rd.run_id for rd in sd.all_run_dirs() if rd.run_id not in planned and rd.run_id not in heroes]
    layout.atomic_write_text(sd.study, plan.study.to_yaml())
    layout.atomic_write_json(
        sd.plan,
        {
            "study": plan.study.name,
            "runs": [r.run_id for r in plan.runs] + heroes,
            "hero": plan.hero.to_dict(),
            "totals": plan.totals(),
            "conventions": plan.conventions(),
            "notes": plan.notes,
            "warnings": plan.warnings,
        },
    )
    earlier = [s for s in (read_run_spec(sd.run(o)) for o in orphans) if not isinstance(s, str) and s.role != "hero"]
    done = sum(1 for s in earlier if layout.result_status(sd.run(s.run_id)) == "done")
    return WriteResult(
        study_dir=sd.path,
        new=new,
        existing=existing,
        orphans=orphans,
        refreshed=refreshed,
        relinked=relinked,
        heroes=heroes,
        earlier=earlier_words(earlier, done, plan.runs, len(new)),
    )


def planned_heroes(sd: layout.StudyDir) -> list[str]:
    """The hero runs (``role: hero``, added by ``ladder hero``) that the study's plan.json lists: planning again
    keeps them, since the study spec does not hold them."""
    try:
        ids = layout.loads_json(sd.plan.read_text(encoding="utf-8"))["runs"]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    out = []
    for run_id in ids if isinstance(ids, list) else []:
        try:
            spec = json.loads(sd.run(str(run_id)).spec.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(spec, dict) and spec.get("role") == "hero":
            out.append(str(run_id))
    return out


def _links(spec: RunSpec) -> tuple[Any, list[int]]:
    return spec.trunk, list(spec.branch_steps)


def _update_existing(rd: layout.RunDir, planned: RunSpec) -> tuple[bool, bool]:
    """Bring the spec.json of an existing run that has not finished up to date with the plan (its id, the
    science, is the same); a finished (done or diverged) run's spec.json stays the record of how it trained.

    Settings outside the science (a new micro-batch, intervals, compile, labels) are the plan's, so that the
    run resumes with them. Links follow a plan that changed the budgets: a run that has not started takes its
    new role (a trunk, a branch or independent); one that has started keeps the trunk it started from, and a
    trunk also snapshots at the new branch steps it reaches (the union of both). Returns whether the settings
    and whether the links changed."""
    read = read_run_spec(rd)
    on_disk: RunSpec | None = None if isinstance(read, str) else read  # unreadable: the plan's spec replaces it
    if on_disk is not None and layout.result_status(rd) in ("done", "diverged"):
        return False, False
    started = rd.metrics.is_file() or rd.checkpoint_pointer.is_file() or rd.result.is_file()
    if on_disk is None or not started:
        trunk, steps = _links(planned)
    else:
        trunk, steps = on_disk.trunk, sorted(set(on_disk.branch_steps) | set(planned.branch_steps))
    wanted = planned.model_copy(update={"trunk": trunk, "branch_steps": steps})
    if on_disk is not None and wanted.model_dump(mode="json") == on_disk.model_dump(mode="json"):
        return False, False
    layout.atomic_write_json(rd.spec, wanted.model_dump(mode="json"))
    if on_disk is None:
        return True, False
    relinked = _links(wanted) != _links(on_disk)
    same_settings = wanted.model_dump(mode="json", exclude={"trunk", "branch_steps"}) == \
        on_disk.model_dump(mode="json", exclude={"trunk", "branch_steps"})  # fmt: skip
    return not same_settings, relinked


def repair_command(study_dir: Path) -> str:
    """The command that rewrites a planned study's missing or unreadable files (plan.json, a run's spec.json) in
    place: the study's own study.yaml planned again into the same directory (a bare ``ladder plan NAME`` would
    plan a new study under ./ladder-runs instead)."""
    sd = layout.StudyDir(Path(study_dir))
    return f"ladder plan {layout.shell_word(sd.study)} --out {layout.shell_word(sd.path)}"


def edited_since_plan(study_dir: Path, study: StudySpec) -> str | None:
    """Why the study file no longer describes the planned ladder (it expands to runs plan.json does not hold:
    S/study.yaml edited after ``ladder plan``), said for the user; None when every run it expands to is planned.
    Fit and hero read the file as it is now, so a changed seq_len or vocab would size a hero unlike its ladder.
    A change to the hero section alone keeps the runs, and says nothing."""
    sd = layout.StudyDir(Path(study_dir))
    try:
        planned = set(_plan_ids(sd))
        now = [r.run_id for r in expand(study).runs]
    except Exception:  # noqa: BLE001 - a plan or study that cannot be read is named by the command's own checks
        return None
    new = [i for i in now if i not in planned]
    if not new:
        return None
    return (
        f"{sd.study} was edited since it was planned: {len(new)} of the {len(now)} runs it describes now are not in "
        f"the plan, whose runs were trained from the file as it was; the fit and the hero read it as it is now: "
        f"`{repair_command(sd.path)}` plans the new runs, or restore the file"
    )


@dataclass(frozen=True)
class Damaged:
    """A run of the plan whose run directory cannot be read as a run: what is wrong, and the command that
    repairs it."""

    run_id: str
    why: str
    repair: str

    def __str__(self) -> str:
        return f"{self.run_id}: {self.why}; `{self.repair}` rewrites it"


def _json_kind(value: object) -> str:
    if value is None:
        return "null"
    return {dict: "object", list: "list", str: "string", bool: "true/false"}.get(type(value), "number")


def _plan_ids(sd: layout.StudyDir) -> list[str]:
    why = sd.not_planned()
    if why:
        raise StateError(why)
    try:
        plan = layout.loads_json(sd.plan.read_text(encoding="utf-8"))
        if not isinstance(plan, dict):  # said "list indices must be integers or slices, not str"
            raise ValueError(f"not a JSON object but a JSON {_json_kind(plan)}")
        if "runs" not in plan:  # said "('runs')"
            raise ValueError("it has no 'runs' list")
        ids = plan["runs"]
        if not isinstance(ids, list):
            raise ValueError(f"'runs' is a JSON {_json_kind(ids)}, not a list")
        odd = [i for i in ids if not isinstance(i, str)]
        if odd:
            raise ValueError(f"'runs' holds {json.dumps(odd[0])[:40]}, not a run id")
    except (OSError, ValueError) as exc:
        raise StateError(f"{sd.plan} is unreadable ({exc}); `{repair_command(sd.path)}` rewrites it") from None
    return [str(i) for i in ids]


def read_run_spec(rd: layout.RunDir) -> RunSpec | str:
    """The run spec of run directory ``rd``, or why it cannot be read (the directory or spec.json is missing, or
    spec.json is not a valid run spec of this run)."""
    target = Path(os.path.realpath(rd.path))
    if rd.path.is_symlink() and target.parent == Path(os.path.realpath(rd.path.parent)) and target.name != rd.run_id:
        # planning again cannot mend a link to another run's folder (it would write into that run): say to remove it
        return f"it is a link to the folder of run {target.name}: remove the link (`rm {layout.shell_word(rd.path)}`)"
    try:
        return rd.read_spec(same_run=True)
    except layout.UnreadableSpec as exc:
        return exc.why


def plan_entries(study_dir: Path) -> list[RunSpec | Damaged]:
    """Every run of the current plan, in plan order: its spec, or a :class:`Damaged` entry saying what is wrong
    with its directory. One damaged run never hides the others (``ladder status`` and ``collect`` read this);
    only a missing or unreadable plan.json raises."""
    sd = layout.StudyDir(Path(study_dir))
    entries: list[RunSpec | Damaged] = []
    for run_id in _plan_ids(sd):
        spec = read_run_spec(sd.run(run_id))
        entries.append(Damaged(run_id, spec, repair_command(sd.path)) if isinstance(spec, str) else spec)
    damaged = [i for i, e in enumerate(entries) if isinstance(e, Damaged)]
    if damaged:  # a damaged run the study file does not plan (a hero) is rewritten by `ladder hero`, not by a plan
        studied = _studied_ids(sd)
        for i in damaged:
            entry = entries[i]
            if studied is not None and entry.run_id not in studied:
                entries[i] = Damaged(
                    entry.run_id, entry.why + _NOT_STUDIED, f"ladder hero {layout.shell_word(sd.path)}"
                )
    return entries


# `ladder plan` keeps the hero runs it can read and drops one whose spec.json is gone: not the command to name
_NOT_STUDIED = (
    " (a hero run: the study file does not plan it, and `ladder plan` would drop it; give `ladder hero` the "
    "--params, --tokens or --seed it was planned with, if any)"
)


def _studied_ids(sd: layout.StudyDir) -> set[str] | None:
    """The run ids the study's study.yaml plans, or None when it cannot be read (its own check names it)."""
    from ladder.studies import load_study

    try:
        return {r.run_id for r in expand(load_study(sd.path)).runs}
    except Exception:  # noqa: BLE001 - a study that cannot be read keeps the plan's repair command
        return None


def readable_runs(study_dir: Path) -> list[RunSpec]:
    """The specs of the plan's runs that can be read, in plan order: a damaged run passed over (``ladder status``
    shows it), for what acts on the runs it finds (``forecast score``, ``eval``)."""
    return [e for e in plan_entries(study_dir) if not isinstance(e, Damaged)]


def read_study(study_dir: Path) -> StudySpec:
    """The study spec of a planned study directory, for what reads the study as a whole (``fit``, ``report``, the
    forecast loop): a damaged run does not stop it (its row says so), a missing or unreadable plan.json does."""
    from ladder.studies import load_study

    sd = layout.StudyDir(Path(study_dir))
    _plan_ids(sd)
    return load_study(sd.path)  # a missing or damaged study.yaml is named with the command that rewrites it


def read_plan(study_dir: Path) -> tuple[StudySpec, list[RunSpec]]:
    """The study and run specs of a planned study directory (the current plan's runs, in plan order). Raises on
    the first damaged run, naming the command that repairs it (what acts on every run, like ``submit``, needs
    all of them; ``status`` and ``collect`` read :func:`plan_entries` instead)."""
    from ladder.studies import load_study

    sd = layout.StudyDir(Path(study_dir))
    entries = plan_entries(sd.path)
    study = load_study(sd.path)
    runs = []
    for entry in entries:
        if isinstance(entry, Damaged):
            raise StateError(f"run {entry.run_id} of {sd.path}: {entry.why}; `{entry.repair}` rewrites it")
        runs.append(entry)
    return study, runs


def run_row(run: RunSpec, study_dir: Path | None, est_wall_s: float | None = None,
            memory: MemoryEstimate | None = None) -> dict[str, Any]:  # fmt: skip
    """A run as the plan's table and JSON show it."""
    return {
        "run_id": run.run_id,
        "run_dir": str(layout.StudyDir(study_dir).run(run.run_id).path) if study_dir else None,
        "variant": run.variant,
        "axes": run.axes,
        "shape": run.shape.public_dict(),
        "params": run.params,
        "param_convention": run.param_convention,
        "params_total": run.shape.params_total,
        "params_non_embedding": run.shape.params_non_embedding,
        "tokens": run.tokens,
        "tokens_per_param": run.tokens / run.params,
        "flops": run.flops,
        "flops_own": run.own_flops,
        "trunk_run_id": run.trunk.run_id if run.trunk else None,
        "branch_step": run.trunk.step if run.trunk else None,
        "branch_steps": list(run.branch_steps),
        "seed": run.seed,
        "batch_tokens": run.batch_tokens,
        "lr": run.lr,
        "steps": run.steps,
        "warmup_steps": run.warmup_steps,
        "schedule": run.schedule.kind,
        "est_wall_s": est_wall_s,
        "micro_batch_size": run.micro_batch_size,
        "compile": run.compile,
        "est_memory_bytes": memory.total if memory else None,
        "est_memory": memory.to_dict() if memory else None,
    }
