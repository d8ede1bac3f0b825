"""Expand a study into runs, and write them as run directories.

``expand`` is pure: study -> ``Plan`` (one ``RunSpec`` per run, the hero, totals, each run's memory estimate and
the packing of runs on devices, :mod:`ladder.packing`; a run that cannot fit its device is refused here). ``write_plan`` puts it on
disk: a directory per run named by the hash of its spec, written only if missing, so planning again is a
no-op, adding an axis value adds only the new runs, and nothing is ever deleted.
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ladder import layout
from ladder.errors import SpecError, StateError
from ladder.model.config import RunSpec, format_count
from ladder.model.hardware import planning_seconds
from ladder.model.memory import MemoryEstimate
from ladder.model.recipe import (
    every,
    plan_steps,
    round_batch,
    rule_batch_tokens,
    rule_lr,
)
from ladder.model.shape import ModelShape
from ladder.model.sizing import FamilyRules, shape_for_depth, shape_for_params
from ladder.packing import Packing, check_memory, packing
from ladder.studies.spec import StudySpec


@dataclass(frozen=True)
class HeroPlan:
    params: int | None
    tokens: int | None
    compute: float
    shape: ModelShape | None
    tokens_per_param: float | None
    allocation: str  # "given" or "rule" (tokens_per_param) until a fit refines it

    def to_dict(self) -> dict[str, Any]:
        return {
            "params": self.params,
            "tokens": self.tokens,
            "compute": self.compute,
            "tokens_per_param": self.tokens_per_param,
            "allocation": self.allocation,
            "shape": self.shape.public_dict() if self.shape else None,
        }


@dataclass
class Plan:
    study: StudySpec
    runs: list[RunSpec]
    hero: HeroPlan
    estimates_s: dict[str, float] = field(default_factory=dict)
    memory: dict[str, MemoryEstimate] = field(default_factory=dict)
    packing: Packing | None = None

    @property
    def total_flops(self) -> float:
        return float(sum(r.flops for r in self.runs))

    def totals(self) -> dict[str, Any]:
        total_s = sum(self.estimates_s.values())
        return {
            "runs": len(self.runs),
            "flops": self.total_flops,
            "tokens": int(sum(r.tokens for r in self.runs)),
            "est_wall_s": total_s,
            "hero_flops": self.hero.compute,
            "ladder_pct_of_hero": 100.0 * self.total_flops / self.hero.compute,
            "param_convention": self.study.ladder.param_count,
            "est_memory_max_bytes": max((m.total for m in self.memory.values()), default=None),
            "packing": self.packing.to_dict() if self.packing else None,
        }


def estimate_wall_s(run: RunSpec, hardware: str) -> float:
    return planning_seconds(run.flops, run.tokens, hardware)


@dataclass(frozen=True)
class _Rung:
    label: str
    axes: dict[str, Any]
    target: int | None = None  # parameter count, in the study's convention
    depth: int | None = None
    tokens_per_param: float | None = None
    budget: float | None = None


def _rungs(study: StudySpec, rules: FamilyRules) -> list[_Rung]:
    lad = study.ladder
    rungs: list[_Rung] = []
    if lad.mode == "chinchilla":
        many_mults = len(lad.multipliers) > 1
        sizes = [("size", s, format_count(s)) for s in lad.sizes] if lad.sizes else [
            ("depth", d, f"L{d}") for d in lad.depths or []
        ]
        for (kind, value, label), mult in itertools.product(sizes, lad.multipliers):
            axes: dict[str, Any] = {"size": label}
            if many_mults:
                axes["multiplier"] = mult
            rungs.append(
                _Rung(
                    label=label,
                    axes=axes,
                    target=value if kind == "size" else None,
                    depth=value if kind == "depth" else None,
                    tokens_per_param=lad.tokens_per_param * mult,
                )
            )
        return rungs
    for budget in lad.budgets or []:
        if lad.isoflop_sizes:
            grid = list(lad.isoflop_sizes)
        else:
            n_opt = math.sqrt(budget / (6 * lad.tokens_per_param))
            half = math.log(lad.isoflop_span) / 2
            grid = [
                int(round(n_opt * math.exp(-half + 2 * half * i / (lad.isoflop_points - 1))))
                for i in range(lad.isoflop_points)
            ]
        for n in grid:
            rungs.append(
                _Rung(label=format_count(n), axes={"budget": f"{budget:.3g}", "size": format_count(n)},
                      target=n, budget=budget)
            )
    return rungs


def _axis_combos(study: StudySpec) -> list[dict[str, Any]]:
    ab = study.ablations
    names = ab.active()
    values = [getattr(ab, n) for n in names]
    return [dict(zip(names, combo)) for combo in itertools.product(*values)] if names else [{}]


def _variant_label(combo: dict[str, Any]) -> str:
    parts = []
    for name, value in combo.items():
        if name == "tie_embeddings":
            parts.append("tied" if value else "untied")
        elif name == "aspect_ratio":
            parts.append(f"ar{value:g}")
        elif name == "lr":
            parts.append(f"lr{value:g}")
        elif name == "lr_multipliers":
            parts.append(f"lr x{value:g}")
        elif name == "batch_tokens":
            parts.append(f"bs{format_count(value)}")
        elif name == "batch_multipliers":
            parts.append(f"bs x{value:g}")
    return " ".join(parts) or "base"


def _ablated(rule_value: float, combo: dict[str, Any], absolute: str, multiplier: str) -> float:
    """The rule's value, replaced by an ablation axis that sets it (``lr``) or scaled by one that multiplies
    it (``lr_multipliers``)."""
    if absolute in combo:
        return float(combo[absolute])
    if multiplier in combo:
        return rule_value * combo[multiplier]
    return rule_value


def _build_run(study: StudySpec, rules: FamilyRules, rung: _Rung, combo: dict[str, Any]) -> RunSpec:
    conv = study.ladder.param_count
    tied = combo.get("tie_embeddings", study.model.tie_embeddings)
    aspect = combo.get("aspect_ratio", study.model.aspect_ratio)
    if rung.depth is not None:
        shape = shape_for_depth(rung.depth, aspect, rules, tied)
    else:
        assert rung.target is not None
        shape = shape_for_params(rung.target, conv, aspect, rules, tied)
    params = shape.params(conv)
    seq_len = study.data.seq_len
    fpt = shape.flops_per_token(seq_len)
    if rung.budget is not None:
        tokens_wanted = rung.budget / (6 * params)
    else:
        assert rung.tokens_per_param is not None
        tokens_wanted = rung.tokens_per_param * params
    approx_flops = fpt * tokens_wanted
    t = study.training

    batch, _ = rule_batch_tokens(study.training, shape.params_non_embedding, approx_flops)
    batch = _ablated(batch, combo, "batch_tokens", "batch_multipliers")
    batch_tokens = round_batch(batch, seq_len, t.batch_min_sequences, t.batch_max_tokens)

    lr, _ = rule_lr(study.training, shape.params_non_embedding, approx_flops)
    lr = _ablated(lr, combo, "lr", "lr_multipliers")

    st = plan_steps(tokens_wanted, batch_tokens, seq_len, t.schedule.warmup_fraction, t.micro_batch_tokens)
    axes = dict(rung.axes)
    axes.update(combo)
    return RunSpec(
        study=study.name,
        axes=axes,
        variant=_variant_label(combo),
        param_convention=conv,
        params=params,
        shape=shape,
        data=study.data,
        tokens=st.tokens,
        batch_tokens=st.batch_tokens,
        micro_batch_size=st.micro_batch_size,
        steps=st.steps,
        lr=lr,
        warmup_steps=st.warmup_steps,
        schedule=t.schedule,
        optimizer=t.optimizer,
        grad_clip=t.grad_clip,
        precision=t.precision,
        compile=t.compile,
        seed=t.seed,
        eval_interval=every(st.steps, t.evals_per_run),
        eval_tokens=min(t.eval_tokens, study.data.validation_tokens),
        log_interval=every(st.steps, t.logs_per_run),
        checkpoint_interval=every(st.steps, t.checkpoints_per_run),
        checkpoint_minutes=t.checkpoint_minutes,
        divergence=t.divergence,
        flops_per_token=fpt,
        flops=float(fpt) * st.tokens,
    ).with_id()


def _hero(study: StudySpec) -> HeroPlan:
    h, lad = study.hero, study.ladder
    seq_len = h.seq_len or study.data.seq_len
    rules = study.model.rules(seq_len)
    tied = study.model.tie_embeddings if h.tied is None else h.tied
    aspect = h.aspect_ratio or study.model.aspect_ratio
    if h.params is not None:
        tokens = h.tokens or int(round(lad.tokens_per_param * h.params))
        allocation = "given" if h.tokens else "rule"
        params = h.params
    else:
        assert h.compute is not None
        params = int(round(math.sqrt(h.compute / (6 * lad.tokens_per_param))))
        tokens = int(round(lad.tokens_per_param * params))
        allocation = "rule"
    shape = shape_for_params(params, lad.param_count, aspect, rules, tied)
    compute = h.compute if h.compute is not None else float(shape.flops_per_token(seq_len)) * tokens
    return HeroPlan(
        params=params,
        tokens=tokens,
        compute=compute,
        shape=shape,
        tokens_per_param=tokens / params,
        allocation=allocation,
    )


def expand(study: StudySpec) -> Plan:
    """All runs of a study, in a stable order: rung by rung, ablation combinations within a rung."""
    rules = study.model.rules(study.data.seq_len)
    runs: list[RunSpec] = []
    seen: dict[str, RunSpec] = {}
    for rung in _rungs(study, rules):
        for combo in _axis_combos(study):
            run = _build_run(study, rules, rung, combo)
            if run.run_id in seen:
                continue  # two axis values that train the identical model (e.g. lr 1x == the rule's value)
            seen[run.run_id] = run
            runs.append(run)
    plan = Plan(study=study, runs=runs, hero=_hero(study))
    plan.estimates_s = {r.run_id: estimate_wall_s(r, study.executor.hardware) for r in runs}
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


def default_study_dir(study: StudySpec) -> Path:
    return Path("ladder-runs") / study.slug


def write_plan(plan: Plan, study_dir: Path) -> WriteResult:
    """Write the plan; existing run directories are left as they are."""
    sd = layout.StudyDir(Path(study_dir))
    if sd.path.exists() and not sd.path.is_dir():
        raise StateError(f"{sd.path} exists and is not a directory")
    if sd.study.is_file():
        from ladder.studies.spec import read_study_file

        try:
            previous = read_study_file(sd.study).name
        except SpecError:
            previous = None
        if previous is not None and previous != plan.study.name:
            raise StateError(
                f"{sd.path} holds study {previous!r}, not {plan.study.name!r}: choose another --out directory"
            )
    new, existing = [], []
    for run in plan.runs:
        rd = sd.run(run.run_id)
        if rd.spec.is_file():
            existing.append(run.run_id)
            continue
        rd.path.mkdir(parents=True, exist_ok=True)
        layout.atomic_write_json(rd.spec, run.model_dump(mode="json"))
        new.append(run.run_id)
    planned = {r.run_id for r in plan.runs}
    orphans = [rd.run_id for rd in sd.all_run_dirs() if rd.run_id not in planned]
    layout.atomic_write_text(sd.study, plan.study.to_yaml())
    layout.atomic_write_json(
        sd.plan,
        {
            "study": plan.study.name,
            "runs": [r.run_id for r in plan.runs],
            "hero": plan.hero.to_dict(),
            "totals": plan.totals(),
        },
    )
    return WriteResult(study_dir=sd.path, new=new, existing=existing, orphans=orphans)


def read_plan(study_dir: Path) -> tuple[StudySpec, list[RunSpec]]:
    """The study and run specs of a planned study directory (the current plan's runs, in plan order)."""
    from ladder.studies.spec import read_study_file

    sd = layout.StudyDir(Path(study_dir))
    if not sd.plan.is_file():
        raise StateError(f"{sd.path} is not a planned study directory (no {layout.PLAN}); run `ladder plan` first")
    study = read_study_file(sd.study)
    try:
        ids = json.loads(sd.plan.read_text())["runs"]
    except (ValueError, KeyError) as exc:
        raise StateError(f"{sd.plan} is unreadable ({exc}); run `ladder plan` again") from None
    runs = []
    for run_id in ids:
        rd = sd.run(run_id)
        try:
            runs.append(RunSpec.model_validate_json(rd.spec.read_text()))
        except (OSError, ValueError) as exc:
            raise StateError(f"{rd.spec} is missing or unreadable ({exc}); run `ladder plan` again") from None
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
        "batch_tokens": run.batch_tokens,
        "lr": run.lr,
        "steps": run.steps,
        "warmup_steps": run.warmup_steps,
        "schedule": run.schedule.kind,
        "est_wall_s": est_wall_s,
        "micro_batch_size": run.micro_batch_size,
        "est_memory_bytes": memory.total if memory else None,
        "est_memory": memory.to_dict() if memory else None,
    }
