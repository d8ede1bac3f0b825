"""The runs of a study, rung by rung: each size (or depth) with its token budgets, or each IsoFLOP point, crossed
with the ablation axes and the seeds.

A size with several budgets under a ``wsd`` schedule is one TRUNK (the largest budget) and one cooldown BRANCH
per smaller budget. Budget ``b`` has ``steps_b = round(tokens_b / batch_tokens)`` and branches off at
``cooldown_start(steps_b)``, the first update of its own cooldown; the trunk's cooldown starts after every
branch step, so up to there a branch and its trunk train at the same LR on the same data (the data order is a
function of the step and the seed). What has to be equal is computed once per size:

- batch and peak LR: the olmo rules read N only; the deepseek (compute) rules read the compute of the size's
  largest budget, for the trunk and every branch;
- warmup: ``schedule.warmup_tokens`` when given, else ``warmup_fraction`` of the steps of the size's 1x budget
  (``tokens_per_param`` x N): the share a hero or any run planned alone at the rule gets, so every size warms up
  for the same fraction of its reference run whatever the budgets (a warmup measured in the smallest budget's
  steps made each rung's warmup 4x shorter than the hero's: on the default study that alone cost the 200K rung
  0.15 nats of loss, and the ladder forecast the check run 2x above it 11% high). It must end before the
  smallest budget's cooldown starts.

A branch is an ordinary run of ``steps_b`` steps whose spec also names its trunk and branch step; neither is in
the run id, which is that of the independent run with the same science. Other schedules decay over the whole
run, so there each budget is an independent run (with its own warmup share and, under deepseek rules, its own
compute). A run's one seed drives both its initialisation and its data order.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

from ladder.errors import SpecError
from ladder.model.config import RunSpec, TrunkRef, format_count
from ladder.model.hardware import PLANNING
from ladder.model.recipe import (
    every,
    params_for_compute,
    plan_steps,
    round_batch,
    rule_batch_tokens,
    rule_lr,
    steps_for,
)
from ladder.model.schedule import cooldown_start
from ladder.model.shape import ModelShape
from ladder.model.sizing import FamilyRules, shape_for_depth, shape_for_params
from ladder.studies.spec import StudySpec


@dataclass(frozen=True)
class Rung:
    label: str
    axes: dict[str, Any]
    target: int | None = None  # parameter count, in the study's convention
    depth: int | None = None
    budgets: tuple[float, ...] = ()  # chinchilla: multiples of tokens_per_param
    compute: float | None = None  # isoflop: the FLOP budget (exact counted FLOPs)


def resolved_precision(precision: str, hardware: str) -> str:
    """``auto`` as the study's target hardware trains it (fp32 on ``cpu``, bf16 on the GPUs), so that the run's
    spec, and its id, say what it computes in."""
    return PLANNING[hardware][1] if precision == "auto" else precision


def rungs(study: StudySpec, rules: FamilyRules) -> list[Rung]:
    lad = study.ladder
    if lad.mode == "chinchilla":
        sizes = (
            [("size", s, format_count(s)) for s in lad.sizes]
            if lad.sizes
            else [("depth", d, f"L{d}") for d in lad.depths or []]
        )
        return [
            Rung(label=label, axes={"size": label}, target=value if kind == "size" else None,
                 depth=value if kind == "depth" else None, budgets=tuple(lad.budgets))
            for kind, value, label in sizes
        ]  # fmt: skip
    out: list[Rung] = []
    for budget in lad.compute_budgets or []:
        if lad.isoflop_sizes:
            grid = list(lad.isoflop_sizes)
        else:  # centred on the size that the budget, in exact FLOPs, trains at tokens_per_param
            n_opt = params_for_compute(
                budget,
                lad.tokens_per_param,
                lambda n: shape_for_params(
                    n, lad.param_count, study.model.aspect_ratio, rules, study.model.tie_embeddings
                ),
                lad.param_count,
                study.data.seq_len,
            )
            half = math.log(lad.isoflop_span) / 2
            grid = [
                int(round(n_opt * math.exp(-half + 2 * half * i / (lad.isoflop_points - 1))))
                for i in range(lad.isoflop_points)
            ]
        for n in grid:
            out.append(Rung(label=format_count(n), axes={"budget": f"{budget:.3g}", "size": format_count(n)},
                            target=n, compute=budget))  # fmt: skip
    return out


def axis_combos(study: StudySpec) -> list[dict[str, Any]]:
    ab = study.ablations
    names = ab.active()
    values = [getattr(ab, n) for n in names]
    return [dict(zip(names, combo)) for combo in itertools.product(*values)] if names else [{}]


def variant_label(combo: dict[str, Any]) -> str:
    """The label of an ablation combination; the seed is not part of it (runs that differ only by seed are
    repeats of one variant)."""
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


def branches_off_a_trunk(study: StudySpec) -> bool:
    """Whether a size's budgets share one trunk (``wsd`` with several budgets) or are independent runs."""
    return study.training.schedule.kind == "wsd" and study.ladder.mode == "chinchilla" and len(study.ladder.budgets) > 1


def _ablated(rule_value: float, combo: dict[str, Any], absolute: str, multiplier: str) -> float:
    """The rule's value, replaced by an ablation axis that sets it (``lr``) or scaled by one that multiplies
    it (``lr_multipliers``)."""
    if absolute in combo:
        return float(combo[absolute])
    if multiplier in combo:
        return rule_value * combo[multiplier]
    return rule_value


def _seeds(study: StudySpec, rung: Rung, combo: dict[str, Any]) -> list[int]:
    seeds = [int(combo.get("seed", study.training.seed))]
    rep = study.ladder.replicates
    if rep is not None and rung.target in rep.sizes:
        seeds += [s for s in rep.seeds if s not in seeds]
    return seeds


def _shape(study: StudySpec, rules: FamilyRules, rung: Rung, combo: dict[str, Any]) -> ModelShape:
    tied = combo.get("tie_embeddings", study.model.tie_embeddings)
    aspect = combo.get("aspect_ratio", study.model.aspect_ratio)
    if rung.depth is not None:
        return shape_for_depth(rung.depth, aspect, rules, tied)
    assert rung.target is not None
    return shape_for_params(rung.target, study.ladder.param_count, aspect, rules, tied)


def _batch_and_lr(study: StudySpec, shape: ModelShape, combo: dict[str, Any], approx_flops: float) -> tuple[int, float]:
    t = study.training
    batch, _ = rule_batch_tokens(t, shape.params_non_embedding, approx_flops)
    batch = _ablated(batch, combo, "batch_tokens", "batch_multipliers")
    batch_tokens = round_batch(batch, study.data.seq_len, t.batch_min_sequences, t.batch_max_tokens)
    lr, _ = rule_lr(t, shape.params_non_embedding, approx_flops)
    return batch_tokens, _ablated(lr, combo, "lr", "lr_multipliers")


def _warmup_steps(
    study: StudySpec, batch_tokens: int, all_steps: list[int], shared: bool, reference_steps: int
) -> int | None:
    """The warmup of every budget of a size when it must not depend on the budget (None: each run's own
    ``warmup_fraction`` share); ``reference_steps`` are the steps of the size's 1x budget at this batch."""
    sched = study.training.schedule
    if sched.warmup_tokens is not None:
        warmup = int(round(sched.warmup_tokens / batch_tokens))
        field = f"training.schedule.warmup_tokens = {sched.warmup_tokens}"
    elif sched.kind == "wsd" and study.ladder.mode == "chinchilla":  # alone or a branch: the same warmup
        warmup = int(round(sched.warmup_fraction * reference_steps))
        field = (
            f"training.schedule.warmup_fraction = {sched.warmup_fraction:g} (of the {reference_steps} steps "
            "of the 1x budget)"
        )
    else:
        return None
    if warmup > min(all_steps):
        raise SpecError(f"{field}: {warmup} warmup steps exceed the {min(all_steps)} steps of the smallest budget")
    if shared and len(all_steps) > 1:
        decay = cooldown_start(min(all_steps), sched)
        if warmup > decay:
            raise SpecError(
                f"{field}: {warmup} warmup steps run past step {decay}, where the smallest budget's "
                "cooldown starts (a branch must share its trunk's warmup): shorten the warmup or "
                "raise the smallest of ladder.budgets"
            )
    return warmup


def make_run(
    study: StudySpec,
    shape: ModelShape,
    combo: dict[str, Any],
    axes: dict[str, Any],
    seed: int,
    tokens_wanted: float,
    batch_tokens: int,
    lr: float,
    warmup: int | None,
) -> RunSpec:
    t, seq_len = study.training, study.data.seq_len
    fpt = shape.flops_per_token(seq_len)
    st = plan_steps(tokens_wanted, batch_tokens, seq_len, t.schedule.warmup_fraction, t.micro_batch_tokens, warmup)
    return RunSpec(
        study=study.name,
        axes=axes,
        variant=variant_label(combo),
        param_convention=study.ladder.param_count,
        params=shape.params(study.ladder.param_count),
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
        precision=resolved_precision(t.precision, study.executor.hardware),
        compile=t.compile is True,  # auto: decided for the whole plan (ladder.plan.compiling)
        seed=seed,
        eval_interval=every(st.steps, t.evals_per_run),
        eval_tokens=min(t.eval_tokens, study.data.validation_tokens),
        log_interval=every(st.steps, t.logs_per_run),
        checkpoint_interval=every(st.steps, t.checkpoints_per_run),
        checkpoint_minutes=t.checkpoint_minutes,
        divergence=t.divergence,
        flops_per_token=fpt,
        flops=float(fpt) * st.tokens,
        tracking=study.tracking,
    ).with_id()


def _link(study: StudySpec, runs: list[RunSpec]) -> list[RunSpec]:
    """The trunk (the longest run) and each shorter run as a branch off it at its first cooldown update;
    trunk first, then its branches."""
    sched = study.training.schedule
    trunk = max(runs, key=lambda r: r.steps)
    out: list[RunSpec] = []
    steps: set[int] = set()
    for r in runs:
        if r is trunk or r.run_id == trunk.run_id:
            continue  # a budget that rounds to the trunk's own steps is the trunk
        at = cooldown_start(r.steps, sched)
        if at == 0:  # the whole run cools down: nothing to share, it trains from scratch
            out.append(r)
            continue
        if at > cooldown_start(trunk.steps, sched):  # pragma: no cover - cooldown_start grows with the steps
            raise SpecError(f"budget of {r.steps} steps branches off after its trunk's own cooldown starts")
        steps.add(at)
        out.append(r.model_copy(update={"trunk": TrunkRef(run_id=trunk.run_id, step=at)}))
    return [trunk.model_copy(update={"branch_steps": sorted(steps)})] + out


def extra_rungs(study: StudySpec) -> list[tuple[Rung, str | None, list[int] | None]]:
    """The study's ``ladder.extra_runs`` as rungs: (rung, the variant it is limited to, its seeds). A budget off
    the ladder's own (one chinchilla budget of several, or another multiple) is an axis of the run
    (``multiplier``), so the fits never take it for the same rung as the size's other budgets; so is a seed
    given explicitly."""
    lad = study.ladder
    out = []
    for extra in lad.extra_runs or []:
        if extra.depth is not None:
            label, axes = f"L{extra.depth}", {"size": f"L{extra.depth}"}
        else:
            label = format_count(extra.size)
            axes = {"size": label}
        budgets: tuple[float, ...] = ()
        if lad.mode == "isoflop":
            axes = {"budget": f"{extra.budget:.3g}", **axes}
        else:
            budgets = tuple(lad.budgets) if extra.budget is None else (float(extra.budget),)
            if extra.budget is not None and (len(lad.budgets) > 1 or budgets != tuple(lad.budgets)):
                axes["multiplier"] = float(extra.budget)
        if extra.seed is not None:
            axes["seed"] = extra.seed
        rung = Rung(
            label=label,
            axes=axes,
            target=extra.size,
            depth=extra.depth,
            budgets=budgets,
            compute=float(extra.budget) if lad.mode == "isoflop" else None,
        )
        out.append((rung, extra.variant, None if extra.seed is None else [extra.seed]))
    return out


def variant_names(study: StudySpec, combos: list[dict[str, Any]]) -> list[str]:
    """The names an extra run's ``variant`` may take: each combination's plan label, and 'tied' / 'untied' for
    the tyings the study trains."""
    tyings = {"tied" if c.get("tie_embeddings", study.model.tie_embeddings) else "untied" for c in combos}
    return list(dict.fromkeys([*(variant_label(c) for c in combos), *sorted(tyings)]))


def variant_matches(variant: str | None, combo: dict[str, Any], study: StudySpec) -> bool:
    """Whether an ablation combination belongs to ``variant``: its plan label, or 'tied' / 'untied' for every
    combination with that tying (None: every combination)."""
    if variant is None or variant in ("all", variant_label(combo)):
        return True
    tied = combo.get("tie_embeddings", study.model.tie_embeddings)
    return variant == ("tied" if tied else "untied")


def rung_runs(
    study: StudySpec, rules: FamilyRules, rung: Rung, combo: dict[str, Any], seeds: list[int] | None = None
) -> list[RunSpec]:
    """The runs of one rung and ablation combination: for every seed (``seeds``, else the study's for this
    rung), one run per budget (a trunk and its branches under ``wsd``)."""
    shape = _shape(study, rules, rung, combo)
    params = shape.params(study.ladder.param_count)
    fpt = shape.flops_per_token(study.data.seq_len)
    if rung.compute is not None:  # a compute budget is exact counted FLOPs: every run of it costs the budget
        budgets: list[tuple[float, dict[str, Any]]] = [(rung.compute / fpt, {})]
    else:
        many = len(rung.budgets) > 1
        budgets = [(m * study.ladder.tokens_per_param * params, {"multiplier": m} if many else {})
                   for m in sorted(rung.budgets)]  # fmt: skip
    shared = branches_off_a_trunk(study)
    out: list[RunSpec] = []
    for seed in seeds or _seeds(study, rung, combo):
        axes_seed = {"seed": seed} if study.seeds_vary else {}
        if shared:  # one batch, LR and warmup for the trunk and every branch
            batch_tokens, lr = _batch_and_lr(study, shape, combo, fpt * max(t for t, _ in budgets))
            per_budget = [(batch_tokens, lr)] * len(budgets)
        else:
            per_budget = [_batch_and_lr(study, shape, combo, fpt * t) for t, _ in budgets]
        all_steps = [steps_for(t, b) for (t, _), (b, _) in zip(budgets, per_budget)]
        group = []
        for (tokens, extra), (batch_tokens, lr) in zip(budgets, per_budget):
            reference = steps_for(study.ladder.tokens_per_param * params, batch_tokens)
            warmup = _warmup_steps(study, batch_tokens, all_steps, shared, reference)
            axes = {**rung.axes, **extra, **combo, **axes_seed}
            group.append(make_run(study, shape, combo, axes, seed, tokens, batch_tokens, lr, warmup))
        out.extend(_link(study, group) if shared else group)
    return out
