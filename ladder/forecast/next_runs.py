"""What to train next (``ladder plan STUDY_DIR --suggest``): the one or two runs that would shrink the hero's 90%
interval most per FLOP, valued by :mod:`ladder.reports.fits.study.run_value`, and (``--add``) added to the study
as ``ladder.extra_runs`` and planned.

Candidates, each a ``ladder.extra_runs`` entry of the primary variant (the forecast's), planned like a rung
(every ablation combination of that variant, the study's rules and schedule), its cost the exact FLOPs of the
runs it adds:

- a larger size: the next rung up in the ladder's own spacing (the geometric mean ratio of its sizes, or its
  depths), at each of the ladder's budgets; an IsoFLOP ladder's next compute budget at the size its
  tokens-per-parameter rule gives it;
- another budget for the largest size: twice its largest budget (chinchilla ladders);
- a seed replicate of the largest size, at the budget nearest the hero's tokens per parameter.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ladder.console import sci
from ladder.errors import SpecError
from ladder.forecast.fitted import current_fit, refit
from ladder.model.config import RunSpec, format_count
from ladder.plan.planner import expand, write_plan
from ladder.studies.spec import StudySpec, parse_study

MAX_SUGGESTED = 2
# the least narrowing (pp of the hero's loss) that counts as a gain: a smaller one prints as "-0.00 pp" and is
# bootstrap noise, never a run worth its FLOPs
MIN_GAIN_PP = 0.005


@dataclass
class Candidate:
    kind: str  # "larger size", "another budget", "seed replicate"
    what: str
    entry: dict[str, Any]  # the ladder.extra_runs entry
    runs: list[RunSpec] = field(default_factory=list)  # the runs it adds
    value: Any = None  # reports.fits.study.run_value.Value
    gain_pct: float | None = None  # pp of the hero's loss the interval's half-width loses (on the fit's interval)
    gain_per_flop: float | None = None
    after_pct: float | None = None  # the hero's half-width after it, on the fit's interval (see Suggestion)
    widens_in: int | None = None  # of the simulated outcomes, how many refits widened the interval

    @property
    def flops(self) -> float:
        return float(sum(r.own_flops for r in self.runs))

    def to_dict(self, hero_flops: float | None) -> dict[str, Any]:
        v = self.value.to_dict() if self.value is not None else {}
        return {
            "kind": self.kind,
            "what": self.what,
            "entry": self.entry,
            "runs": [r.run_id for r in self.runs],
            "params": self.runs[0].params if self.runs else None,
            "tokens": self.runs[0].tokens if self.runs else None,
            "flops": self.flops,
            "pct_of_hero": 100 * self.flops / hero_flops if hero_flops else None,
            "expected_half_width_pct": v.get("half_width_pct"),
            "half_width_sd": v.get("half_width_sd"),
            "half_width_after_pct": self.after_pct,
            "gain_pct": self.gain_pct,
            "gain_per_flop": self.gain_per_flop,
            "widens_in": self.widens_in,
            "reason": v.get("reason"),
            "outcomes": v.get("outcomes"),
        }

    def summary(self, current_pct: float | None) -> str:
        """The candidate in words: the interval before and after, what it costs."""
        if self.after_pct is None or current_pct is None:
            return f"{self.what}: not valued ({self.value.reason if self.value is not None else 'no value'})"
        return (
            f"{self.what}: interval half-width {current_pct:.2f}% -> {self.after_pct:.2f}% "
            f"({pp_change(self.after_pct - current_pct)}) for {sci(self.flops)} FLOPs"
        )


def pp_change(change: float) -> str:
    """A change of the interval's half-width in percentage points: ``-0.42 pp``; one that rounds to nothing is
    ``0.00 pp``, never "-0.00 pp"."""
    return "0.00 pp" if round(change, 2) == 0 else f"{change:+.2f} pp"


@dataclass
class Suggestion:
    """One baseline: the fit's interval (``current_half_width_pct``). A candidate is valued by refitting the
    forecast with and without it on the same footing (fewer bootstrap refits than the fit's, the same seed): the
    refit without it is ``baseline_half_width_pct``, which differs from the fit's by the bootstrap's own noise,
    so the candidate's ratio (expected / baseline) is applied to the fit's interval: ``after_pct`` and
    ``gain_pct`` are on the interval the fit printed."""

    study_dir: Path
    current_half_width_pct: float | None  # the fit's
    baseline_half_width_pct: float | None  # refitted as every candidate is
    hero_flops: float | None
    candidates: list[Candidate]
    suggested: list[Candidate]
    budget: float | None = None
    added: list[str] = field(default_factory=list)  # run ids --add planned
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        from ladder.reports.fits.study import run_value as value

        return {
            "study_dir": str(self.study_dir),
            "current_half_width_pct": self.current_half_width_pct,
            "baseline_half_width_pct": self.baseline_half_width_pct,
            "hero_flops": self.hero_flops,
            "budget": self.budget,
            "candidates": [c.to_dict(self.hero_flops) for c in self.candidates],
            "suggested": [c.to_dict(self.hero_flops) for c in self.suggested],
            "extra_runs": [c.entry for c in self.suggested],
            "added": self.added,
            "note": self.note,
            "method": value.__doc__.split("\n\n", 1)[1].replace("\n", " ").strip(),
        }


def _spacing(values: list[float]) -> float:
    v = sorted(values)
    return (v[-1] / v[0]) ** (1 / (len(v) - 1)) if len(v) > 1 and v[0] > 0 else 2.0


def _entry(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


def _round3(x: float) -> int:
    return int(float(f"{x:.3g}"))


def candidates(study: StudySpec, variant: str | None, hero_ratio: float | None) -> list[Candidate]:
    """The candidate entries of the study (see the module doc); ``variant`` limits them to the primary one."""
    var = None if variant in (None, "all") else variant
    out = _candidates(study, var, hero_ratio)
    for c in out:  # the runs of one variant alone: "141K" would read as both
        c.what += f" (variant {var} only)" if var else ""
    return out


def _candidates(study: StudySpec, var: str | None, hero_ratio: float | None) -> list[Candidate]:
    lad = study.ladder
    out: list[Candidate] = []
    seed = (
        max([study.training.seed, *(study.ablations.seed or []), *(lad.replicates.seeds if lad.replicates else [])]) + 1
    )
    if lad.mode == "isoflop":
        from ladder.plan.rung_runs import rungs

        budgets = sorted(lad.compute_budgets or [])
        nxt = budgets[-1] * _spacing(budgets)
        out.append(
            Candidate(
                "larger size",
                f"a compute budget of {sci(nxt)} FLOPs (the next in the ladder's spacing)",
                _entry(size=_next_isoflop_size(study, nxt), budget=float(f"{nxt:.3g}"), variant=var),
            )
        )
        top = [r for r in rungs(study, study.model.rules(study.data.seq_len)) if r.compute == budgets[-1]]
        mid = top[len(top) // 2]
        out.append(
            Candidate(
                "seed replicate",
                f"{mid.label} at {sci(budgets[-1])} FLOPs again with seed {seed}",
                _entry(size=mid.target, budget=budgets[-1], seed=seed, variant=var),
            )
        )
        return out
    key = "depth" if lad.depths is not None else "size"
    grid = sorted(lad.depths or lad.sizes or [])
    step = _spacing(grid)
    nxt = max(grid[-1] + 1, round(grid[-1] * step)) if key == "depth" else _round3(grid[-1] * step)
    name = f"L{nxt}" if key == "depth" else format_count(nxt)
    budgets = sorted(lad.budgets)
    for b in budgets:
        entry = _entry(**{key: nxt}, budget=b if len(budgets) > 1 else None, variant=var)
        at = f" at {b:g}x {lad.tokens_per_param:g} tokens/param" if len(budgets) > 1 else ""
        out.append(Candidate("larger size", f"{name}{at} (the next rung up in the ladder's spacing)", entry))
    top = f"L{grid[-1]}" if key == "depth" else format_count(grid[-1])
    out.append(
        Candidate(
            "another budget",
            f"{top} at {2 * budgets[-1]:g}x {lad.tokens_per_param:g} tokens/param",
            _entry(**{key: grid[-1]}, budget=2 * budgets[-1], variant=var),
        )
    )
    near = min(budgets, key=lambda b: abs(math.log(b * lad.tokens_per_param / hero_ratio)) if hero_ratio else 0)
    out.append(
        Candidate(
            "seed replicate",
            f"{top} again with seed {seed}",
            _entry(**{key: grid[-1]}, budget=near if len(budgets) > 1 else None, seed=seed, variant=var),
        )
    )
    return out


def _next_isoflop_size(study: StudySpec, compute: float) -> int:
    from ladder.model.recipe import params_for_compute
    from ladder.model.sizing import shape_for_params

    lad, rules = study.ladder, study.model.rules(study.data.seq_len)
    return _round3(
        params_for_compute(
            compute,
            lad.tokens_per_param,
            lambda n: shape_for_params(n, lad.param_count, study.model.aspect_ratio, rules, study.model.tie_embeddings),
            lad.param_count,
            study.data.seq_len,
        )
    )


def with_extra_runs(study: StudySpec, entries: list[dict]) -> StudySpec:
    """The study with ``entries`` appended to its ``ladder.extra_runs`` (validated as any study is)."""
    data = study.model_dump(mode="json")
    data["ladder"]["extra_runs"] = [*(data["ladder"].get("extra_runs") or []), *entries]
    return parse_study(data, "the study with its suggested extra runs")


def suggest(
    study_dir: Path,
    *,
    budget: float | None = None,
    add: bool = False,
    k: int | None = None,
    n_boot: int | None = None,
    progress=None,
) -> Suggestion:
    """Value every candidate on the current fit and pick the best per FLOP (at most :data:`MAX_SUGGESTED`, their
    total cost within ``budget`` FLOPs); ``add`` plans them into the study. ``progress(step, of, what)`` is
    called before each refit stage (the baseline, then each candidate) so that a caller can show how far it is."""
    say = progress or (lambda *_: None)
    from ladder.reports.fits.study import run_value as value
    from ladder.reports.fits.study.fit_json import validate

    if budget is not None and not (math.isfinite(budget) and budget > 0):
        raise SpecError(f"--budget {budget}: must be a positive number of FLOPs, e.g. 1e14")
    current = current_fit(study_dir)
    study = current.study
    result = refit(current)
    fc, fit_hero = result.loss, validate(result.to_dict()).hero  # the hero as fit.json would hold it
    if fc is None or fit_hero.loss is None:
        raise SpecError(f"--suggest needs a hero forecast; the fit has none ({result.reasons.get('loss')})")
    hero = (float(fit_hero.params), float(fit_hero.tokens))
    law_df = result.law_runs[result.law_runs["law_variant"] == result.primary_variant]
    kw = {"k": k or value.K, "n_boot": n_boot or value.N_BOOT, "seed": int(current.meta.seed or 0)}
    planned = {r.run_id for r in expand(study).runs}
    todo = []
    for c in candidates(study, result.primary_variant, hero[1] / hero[0]):
        c.runs = [r for r in expand(with_extra_runs(study, [c.entry])).runs if r.run_id not in planned]
        if c.runs:  # else already planned
            todo.append(c)
    stages = len(todo) + 1
    say(1, stages, f"the current runs, as each candidate will be refitted ({kw['n_boot']} bootstrap refits)")
    base = value.baseline(law_df, hero, n_boot=kw["n_boot"], seed=kw["seed"])
    current_pct = fit_hero.half_width_pct
    cands = []
    for i, c in enumerate(todo, start=2):
        say(i, stages, f"{c.what} ({kw['k']} simulated outcomes, a refit each)")
        law_run = c.runs[0]
        c.value = value.value(fc, law_df, hero, value.Point(law_run.params, law_run.tokens, law_run.seed), **kw)
        if c.value.reason and c.kind == "another budget":
            c.value.reason += (
                "; such a run's worth is that it separates N from D (a law of both), which outcomes "
                "drawn from the current forms cannot measure"
            )
        if c.value.half_width_pct is not None and base:
            ref = current_pct if current_pct is not None else base
            c.after_pct = ref * c.value.half_width_pct / base  # the paired change, on the fit's interval
            c.gain_pct = ref - c.after_pct
            c.gain_per_flop = c.gain_pct / c.flops
            c.widens_in = sum(1 for w in c.value.half_widths if w > base)
            if c.gain_pct < 0:
                c.value.reason = (
                    f"widens the interval: in {c.widens_in} of {len(c.value.half_widths)} simulated outcomes the "
                    "refit's interval is wider than without it: an outcome drawn from the spread of the current "
                    "forms disagrees with some of them, which moves their weights or the rollout's calibration "
                    "apart; such a run would show that the present interval is too narrow rather than narrow it"
                )
        cands.append(c)
    ranked = sorted(
        (c for c in cands if c.gain_per_flop is not None and c.gain_pct is not None and c.gain_pct >= MIN_GAIN_PP),
        key=lambda c: -c.gain_per_flop,
    )
    chosen, spent = [], 0.0
    for c in ranked:
        if len(chosen) == MAX_SUGGESTED:
            break
        if budget is None or spent + c.flops <= budget:
            chosen.append(c)
            spent += c.flops
    note = ""
    if not ranked:
        note = (
            f"no candidate is expected to narrow the hero's interval (by at least {MIN_GAIN_PP:g} pp): more of "
            "the same ladder does not help it; nothing is suggested"
        )
    elif not chosen:
        note = (
            f"no candidate fits in --budget {sci(budget)} FLOPs (the cheapest useful one costs "
            f"{sci(min(c.flops for c in ranked))} FLOPs)"
        )
    out = Suggestion(
        study_dir=Path(study_dir),
        current_half_width_pct=current_pct,
        baseline_half_width_pct=base,
        hero_flops=fit_hero.compute,
        candidates=cands,
        suggested=chosen,
        budget=budget,
        note=note,
    )
    if add and chosen:
        new_study = with_extra_runs(study, [c.entry for c in chosen])
        written = write_plan(expand(new_study), study_dir, based_on=study)
        out.added = written.new
    return out
