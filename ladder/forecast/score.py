"""Scoring frozen forecasts against the hero (``ladder forecast score``).

What the hero shows (:class:`Observation`): the study's hero run (``role: hero``: its result.json's final eval
loss, or while it trains the eval points of its metrics.jsonl), a loss given with ``--loss`` (a hero trained
elsewhere, at the frozen hero's size), or a loss curve given with ``--curve`` (CSV, JSON lines or parquet with
a ``tokens`` or ``step`` column and an ``eval_loss`` or ``loss`` column). A loss above
:data:`~ladder.forecast.frozen.MAX_LOSS` (100 nats/token, far worse than a uniform guess over any vocabulary) or
below :data:`~ladder.forecast.frozen.MIN_LOSS` (0.001 nats/token, perplexity 1.001: far below any model of held-out
text) is refused as a mistyped number, and nothing is scored while any freeze of the study is damaged.

A freeze is scored at its forecast of the hero's point: its hero, or one of its predictions, whose params and
tokens are both within 10% of the hero run's (the nearest; the offset is recorded). Against a final loss:

- ``error_pct`` = 100 (forecast - actual) / actual (the sign convention of the rollout backtests);
- ``inside``: lo <= actual <= hi (the calibrated 90% interval);
- ``z`` = log(forecast / actual) / (log(hi / lo) / 2 / 1.645): the log error over the interval's half-width
  read as 1.645 normal standard deviations (|z| > 1.645 is outside a symmetric interval), with the sign of
  ``error_pct`` (positive: the forecast was too high).

A curve is the hero's only up to its planned tokens: a ``--curve`` point past them is of a longer run (another
schedule), and the curve is refused, naming the first such row; nothing is scored when no freeze forecasts the
hero's point (one line per freeze says why), and nothing is written until every freeze is scored.

A hero still training gets an early warning instead (:func:`ladder.reports.fits.scoring.partial_forecast`):
the forecast of its FINAL loss from its partial curve, compared with the frozen forecast in the same terms. A score is appended to each
freeze's ``scores`` (``final`` says which kind it is): a freeze with a final score is a *prediction* checked
against a real run; without one it stays a *projection*.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ladder import layout
from ladder.books import job_records
from ladder.books.run_books import read_result
from ladder.console import on_record
from ladder.errors import SpecError, StateError
from ladder.forecast.frozen import (
    DATA_CHANGED,
    MAX_LOSS,
    MIN_LOSS,
    TOO_LARGE,
    TOO_SMALL,
    CurvePoint,
    Frozen,
    append_scores,
    damaged_freezes,
    read_frozen,
    utc_now,
)
from ladder.model.config import RunSpec, format_count
from ladder.plan.planner import read_study, readable_runs
from ladder.reports.fits.scoring import partial_forecast, pct_of_tokens, same_digits, z_score
from ladder.reports.fits.study.forecast_json import FrozenForecast, FrozenPoint, InContext, Interval

P = TypeVar("P", bound=FrozenPoint)

MATCH_RTOL = 0.10  # a frozen point forecasts the hero when its params and tokens are within 10% of the hero's
REFERENCE_SIZES = 3  # the partial-curve forecast reads the curves of the ladder's largest 3 sizes
RATIO_RTOL = 0.10


@dataclass
class Observation:
    """What the hero shows: its final eval loss, and/or the eval points of its curve so far."""

    source: dict[str, Any]
    params: float | None = None  # the hero run's (None: a hero trained elsewhere, at the frozen hero's point)
    tokens: float | None = None  # its planned tokens
    steps: int | None = None  # its planned steps (for a curve in steps)
    schedule: str | None = None
    final: float | None = None
    split: dict[str, float] | None = None  # a finished hero run's final loss on each kind of target
    points: list[CurvePoint] = field(default_factory=list)  # (tokens|step, x, eval loss, where in the file)
    started_at: str | None = None  # the first submission of the hero run (jobs.json)

    def curve(self, tokens_planned: float | None) -> list[tuple[float, float]]:
        """(fraction of the planned tokens, loss) of each point."""
        out = []
        for kind, x, loss, _ in self.points:
            if kind == "step":
                if not self.steps:
                    raise StateError(
                        "the curve counts steps, but there is no hero run to say how many it plans: "
                        "give the curve a tokens column"
                    )
                out.append((x / self.steps, loss))
            elif tokens_planned:
                out.append((x / tokens_planned, loss))
        return sorted(out)


def compare(point: Interval, actual: float) -> dict[str, Any]:
    """A frozen point against an actual (or a forecast final) loss: error, inside, z."""
    f, lo, hi = float(point.loss), point.lo, point.hi
    inside = None if lo is None or hi is None else bool(lo <= actual <= hi)
    return {
        "forecast": f,
        "lo": lo,
        "hi": hi,
        "level": point.level if point.level is not None else 0.9,
        "actual": actual,
        "error_pct": 100.0 * (f - actual) / actual,
        "inside": inside,
        "z": None if lo is None or hi is None else z_score(actual, f, float(lo), float(hi)),
    }


# ---- what the hero shows ------------------------------------------------------------------------------


def _eval_points(rd: layout.RunDir) -> list[CurvePoint]:
    if not rd.metrics.is_file():
        return []
    lines = layout.read_jsonl_lines(rd.metrics)
    return [
        CurvePoint("tokens", float(r["tokens"]), float(r["eval_loss"]), f"line {n}")
        for n, r in zip(lines.line_numbers, lines.records)
        if r.get("kind") == "eval"
        and isinstance(r.get("eval_loss"), (int, float))
        and not isinstance(r.get("eval_loss"), bool)
        and isinstance(r.get("tokens"), (int, float))
        and math.isfinite(r["eval_loss"])
    ]


def _implausible(points: list[CurvePoint]) -> str | None:
    """The first eval point whose loss no language model has (a damaged or diverged curve), said for a person."""
    for p in points:
        if not MIN_LOSS <= p.loss <= MAX_LOSS:
            why = TOO_LARGE if p.loss > MAX_LOSS else TOO_SMALL
            return f"{p.where}: eval_loss {p.loss:.4g} at {format_count(p.x)} tokens is {why}"
    return None


def _split(result: dict) -> dict[str, float] | None:
    """A done run's final loss on the in-context repeats and on the novel targets, when its result has them."""
    kinds = {"repeats": result.get("final_eval_loss_repeats"), "novel": result.get("final_eval_loss_novel")}
    return {k: float(v) for k, v in kinds.items()} if all(isinstance(v, (int, float)) for v in kinds.values()) else None


def in_context_score(
    frozen: InContext | None, split: dict[str, float], params: float | None, tokens: float | None
) -> dict:
    """The hero's loss on each kind of target, against the freeze's forecast of that kind when it froze one at the
    hero's point: where the total's error comes from (a model that learned to copy misses on the repeats)."""
    out: dict[str, Any] = {"actual": split}
    near = _nearest(frozen.points if frozen is not None else [], params, tokens)
    if near is None:
        return out
    out["point"] = near.label
    for kind, actual in split.items():
        point = getattr(near, kind, None)
        if point is not None and point.loss is not None:
            out[kind] = compare(point, actual)
    return out


def observe_run(sd: layout.StudyDir, spec: RunSpec) -> Observation:
    """The hero run's final loss (result.json of a done run) or its eval points so far."""
    rd = sd.run(spec.run_id)
    status = layout.result_status(rd)
    book = job_records.read(sd).get(spec.run_id, [])
    obs = Observation(
        source={"kind": "run", "run_id": spec.run_id},
        params=float(spec.params),
        tokens=float(spec.tokens),
        steps=spec.steps,
        schedule=spec.schedule.kind,
        points=_eval_points(rd),
        started_at=min((r.submitted_at for r in book), default=None),
    )
    if status == "done":
        result, why = read_result(rd)
        if result is None:
            raise StateError(
                f"the hero run {spec.run_id}'s {layout.RESULT} is corrupt: {why or 'missing'} (see `ladder status {layout.shell_word(sd.path)}`; "
                "score a loss known otherwise with --loss X)"
            )
        obs.final, obs.split = float(result["final_eval_loss"]), _split(result)
    elif status in ("failed", "diverged"):
        raise StateError(
            f"the hero run {spec.run_id} ended {status}: no loss to score (see `ladder status "
            f"{layout.shell_word(sd.path)}`; `ladder submit {layout.shell_word(sd.path)} --retry-failed` trains it again)"  # typed as printed, it runs
        )
    elif not obs.points:
        from ladder.books.run_status import run_state

        state = run_state(sd, spec, {spec.run_id: book})[0]
        if state in ("queued", "running"):  # submitted: `ladder submit` again would skip it
            raise StateError(
                f"the hero run {spec.run_id} is {state} and has no eval point yet: nothing to score until its first "
                f"(every {spec.eval_interval:,} of its {spec.steps:,} steps); `ladder status "
                f"{layout.shell_word(sd.path)}` follows it"
            )
        raise StateError(
            f"the hero run {spec.run_id} has no eval point yet: nothing to score (train it with "
            f"`ladder submit {layout.shell_word(sd.path)}`)"
        )
    elif bad := _implausible(obs.points):  # its partial forecast would head for 1e300: the curve says nothing
        raise StateError(
            f"the hero run {spec.run_id}'s {layout.METRICS} {bad}: a damaged or diverged curve, nothing scored (see "
            f"`ladder status {layout.shell_word(sd.path)}`; score a loss known otherwise with --loss X)"
        )
    return obs


def observe_curve(path: str | Path, hero: RunSpec | None) -> Observation:
    """A loss curve file: ``tokens`` (or ``step``) and ``eval_loss`` (or ``loss``) columns; refused when it runs
    past the hero run's planned tokens (or steps)."""
    from ladder.forecast.frozen import read_curve_points

    points = read_curve_points(path)  # as given: Path("") would be "."
    obs = Observation(source={"kind": "curve", "file": str(path)}, points=points)
    if hero is not None:
        obs.params, obs.tokens, obs.steps = float(hero.params), float(hero.tokens), hero.steps
        obs.schedule, obs.source["run_id"] = hero.schedule.kind, hero.run_id
        refuse_past_the_end(obs, float(hero.tokens), f"the hero run {hero.run_id}'s planned", hero.steps)
    return obs


def refuse_past_the_end(
    obs: Observation, tokens: float, whose: str, steps: int | None = None, slack: float = 0.0
) -> None:
    """Refuse a curve with a point past the hero's ``tokens`` (``steps``) by more than ``slack`` (a fraction),
    naming the first: the loss at a point the hero never trains to is of another, longer run (another schedule),
    and its last point is not the hero's final loss."""
    for p in obs.points:  # in order of x
        end, unit = (steps, "steps") if p.kind == "step" else (tokens, "tokens")
        if end and p.x > end * (1 + slack) * (1 + 1e-9):
            count = format_count if unit == "tokens" else (lambda v: f"{v:,.0f}")
            by = f" by more than {100 * slack:.0f}%" if slack else ""
            raise SpecError(
                f"--curve {obs.source.get('file')}: {p.where or 'a point'} is at {count(p.x)} {unit}, past {whose} "
                f"{count(end)} {unit}{by}: a curve that goes on is of a longer run (another schedule), not the run "
                f"the forecast is of; give the curve up to {count(end)} {unit}, nothing was scored"
            )


# ---- the early warning ---------------------------------------------------------------------------------


def reference_curves(
    sd: layout.StudyDir, specs: list[RunSpec], ratio: float | None, schedule: str | None
) -> list[dict]:
    """The finished rungs whose curves forecast the hero's final loss: the hero's schedule, the hero's tokens/param
    within 10% when some are, the largest :data:`REFERENCE_SIZES` sizes. Each: run id, params, fractions and
    log(L(f) / L_final). Cooldown branches count: a branch copies its trunk's records up to its start, so its
    curve is whole, and at the hero's tokens/param it is the hero's schedule, where a trunk cools down at another
    point of its run (re-trial 17a: a hero at 10 tokens/param, read against trunks at 20, heads for 3.214 [3.157,
    3.272] at 75% of its tokens and ended at 3.063)."""
    cands = []
    for spec in specs:
        if spec.role != "rung" or (schedule and spec.schedule.kind != schedule):
            continue
        rd = sd.run(spec.run_id)
        if layout.result_status(rd) != "done":
            continue
        final = (read_result(rd)[0] or {}).get("final_eval_loss")
        pts = sorted((p.x / spec.tokens, p.loss) for p in _eval_points(rd))
        if not isinstance(final, (int, float)) or final <= 0 or len(pts) < 2:
            continue
        f = np.array([p[0] for p in pts])
        cands.append(
            {
                "run_id": spec.run_id,
                "params": float(spec.params),
                "ratio": spec.tokens / spec.params,
                "f": f,
                "log_r": np.log(np.array([p[1] for p in pts]) / final),
            }
        )
    if ratio:
        near = [c for c in cands if abs(math.log(c["ratio"] / ratio)) <= math.log1p(RATIO_RTOL)]
        cands = near or cands
    sizes = sorted({round(c["params"]) for c in cands}, reverse=True)[:REFERENCE_SIZES]
    return [c for c in cands if round(c["params"]) in sizes]


# ---- scoring -------------------------------------------------------------------------------------------


def match_point(
    frozen: FrozenForecast, params: float | None, tokens: float | None
) -> tuple[FrozenPoint | None, str, dict]:
    """The frozen point that forecasts the hero at (params, tokens): the nearest of the hero and the predictions
    within :data:`MATCH_RTOL` in both; without a hero run's point, the frozen hero. Returns (point, its label
    (``hero`` for the hero), offsets)."""
    if params is None or tokens is None:
        return frozen.hero, "hero", {}
    points = [frozen.hero, *(p for p in frozen.predictions if p.loss is not None)]
    best = _nearest(points, params, tokens)
    if best is None:
        return None, "", {}
    label = "hero" if best is frozen.hero else str(best.label)
    return best, label, {"params_pct": 100 * (params / best.params - 1), "tokens_pct": 100 * (tokens / best.tokens - 1)}


def _nearest(points: list[P], params: float | None, tokens: float | None) -> P | None:
    """The point nearest (params, tokens) among those within :data:`MATCH_RTOL` of it in both; None without one."""
    if params is None or tokens is None:
        return None
    best, best_d = None, math.inf
    for p in points:
        if not p.params or not p.tokens:
            continue
        dn, dd = abs(math.log(params / p.params)), abs(math.log(tokens / p.tokens))
        if max(dn, dd) <= math.log1p(MATCH_RTOL) and dn + dd < best_d:
            best, best_d = p, dn + dd
    return best


@dataclass
class ScoreOutcome:
    observation: Observation
    scored: list[tuple[Frozen, dict]] = field(default_factory=list)
    unmatched: dict[int, str] = field(default_factory=dict)  # freeze number -> why it was not scored
    skipped: dict[str, str] = field(default_factory=dict)  # hero run id -> why it was not observed (another was)
    repeated: set[int] = field(default_factory=set)  # freezes whose score equals their last one: not appended again

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.observation.source,
            "final": self.observation.final,
            "scores": [{"number": f.number, "file": f.path.name, **s} for f, s in self.scored],
            "not_scored": {str(k): v for k, v in self.unmatched.items()},
            "heroes_not_scored": self.skipped,
            "not_appended_again": sorted(self.repeated),
        }


def science(s: RunSpec) -> str:
    """A run's science but its seed: a hero and its seed replicates share it (``ladder hero`` plans a moved hero
    in place of another science's, never of its replicates')."""
    return s.model_copy(update={"seed": 0}).content_hash()


def _hero_specs(specs: list[RunSpec], run_id: str | None, study_dir: Path, seed: int) -> list[RunSpec]:
    """The heroes to score: the --run one, else one per hero science (a hero and its seed replicates), in plan
    order: the one with the study's seed (else the first planned). A replicate never displaces its hero; it
    counts toward the seeds' mean (:func:`replicates`)."""
    if run_id is not None:
        return [_hero_spec(specs, run_id, study_dir)]
    groups: dict[str, list[RunSpec]] = {}
    for s in specs:
        if s.role == "hero":
            groups.setdefault(science(s), []).append(s)
    return [next((s for s in g if s.seed == seed), g[0]) for g in groups.values()]


def _hero_spec(specs: list[RunSpec], run_id: str | None, study_dir: Path) -> RunSpec | None:
    heroes = [s for s in specs if s.role == "hero"]
    if run_id is None:
        return heroes[-1] if heroes else None
    for s in heroes:
        if s.run_id == run_id:
            return s
    raise SpecError(
        f"--run {run_id}: not a hero run of this study (hero runs: {', '.join(s.run_id for s in heroes) or 'none'}; "
        f"plan one with `ladder hero {layout.shell_word(study_dir)}`)"
    )


def _damaged_runs(study_dir: Path) -> list:
    """The runs of the plan that cannot be read (a deleted run folder, a corrupt spec.json): one may be the hero."""
    from ladder.plan.planner import Damaged, plan_entries

    return [e for e in plan_entries(study_dir) if isinstance(e, Damaged)]


def replicates(sd: layout.StudyDir, specs: list[RunSpec], hero: RunSpec) -> dict[str, Any] | None:
    """The finished seed replicates of ``hero`` (hero runs of the same science but the seed, ``ladder hero
    --seed``), ``hero`` included: their losses, mean and spread; None with fewer than two done."""
    mine = science(hero)
    runs = []
    for s in specs:
        if s.role != "hero" or science(s) != mine or layout.result_status(sd.run(s.run_id)) != "done":
            continue
        result, _ = read_result(sd.run(s.run_id))
        if result is None:  # corrupt: `ladder status` names it; it is no replicate's loss
            continue
        runs.append(
            {"run_id": s.run_id, "seed": s.seed, "final": float(result["final_eval_loss"]), "split": _split(result)}
        )
    if len(runs) < 2:
        return None

    def spread(values: list[float]) -> tuple[float, float]:
        logs = [math.log(v) for v in values]
        mean_log = sum(logs) / len(logs)
        return math.exp(mean_log), 100.0 * math.sqrt(sum((x - mean_log) ** 2 for x in logs) / (len(logs) - 1))

    mean, sd_pct = spread([r["final"] for r in runs])
    out = {
        "runs": runs,
        "n": len(runs),
        "mean": mean,
        "sd_log_pct": sd_pct,
        "note": "the mean is geometric (the mean of log losses); sd_log_pct: the seeds' spread, sd of log loss",
    }
    if all(r["split"] for r in runs):  # which kind of target the seeds disagree on
        out["sd_log_pct_by_kind"] = {k: spread([r["split"][k] for r in runs])[1] for k in ("repeats", "novel")}
    return out


def score_study(
    study_dir: Path, *, loss: float | None = None, curve: str | Path | None = None, run_id: str | None = None
) -> ScoreOutcome:
    """Score every frozen forecast of the study against its hero (see the module doc) and append each score."""
    from ladder.forecast.fitted import results_hashes_of

    sd = layout.StudyDir(Path(study_dir))
    if loss is not None and curve is not None:
        raise SpecError("give --loss or --curve, not both")
    if loss is not None and run_id is not None:  # --loss is a hero trained elsewhere: the run would be ignored
        raise SpecError(
            f"--run {run_id} with --loss: --loss scores a hero trained elsewhere at the frozen hero's point, never a "
            "run of the study; give --run alone (its own final loss or curve) or --loss alone, nothing was scored"
        )
    given = f"{loss:g}" if loss is not None and float(f"{loss:g}") == loss else repr(loss)  # 100.0001, not 100
    if loss is not None and not (math.isfinite(loss) and loss > 0):
        raise SpecError(f"--loss {given}: must be a positive loss in nats/token")
    if loss is not None and loss > MAX_LOSS:
        raise SpecError(f"--loss {given}: {TOO_LARGE}; give the hero's eval loss in nats/token")
    if loss is not None and loss < MIN_LOSS:
        raise SpecError(f"--loss {given}: {TOO_SMALL}; give the hero's eval loss in nats/token")
    study = read_study(sd.path)
    vocab = study.model.vocab_size
    if loss is not None and loss > math.log(vocab):  # worse than guessing uniformly over the study's vocabulary
        raise SpecError(
            f"--loss {given}: above ln(V) = {math.log(vocab):.3f} nats/token, the loss of a uniform guess over the "
            f"study's {vocab:,}-token vocabulary; give the hero's eval loss in nats/token, nothing was scored"
        )
    specs = readable_runs(sd.path)  # a damaged rung is no reason not to score the hero (status shows the damage)
    frozen = read_frozen(sd.path)
    if any(f.problem for f in frozen):  # nothing is scored while a freeze cannot be read: none is skipped unseen
        raise StateError(f"cannot score: {damaged_freezes(frozen, sd.path)}")
    if not frozen:
        raise StateError(
            f"{sd.path} has no frozen forecast to score: run `ladder forecast freeze {layout.shell_word(sd.path)}` (before "
            "the hero trains)"
        )
    heroes = _hero_specs(specs, run_id, sd.path, study.training.seed)
    if curve is not None and len(heroes) > 1:  # taken for the last one's, a curve was scored at another run's end
        listed = ", ".join(f"{h.run_id} ({format_count(h.params)} x {format_count(h.tokens)})" for h in heroes)
        raise SpecError(
            f"--curve {curve}: the study plans {len(heroes)} hero runs ({listed}): say which one the curve is of "
            "with --run ID, nothing was scored"
        )
    hero = heroes[-1] if heroes else None  # a --curve is the curve of the hero run
    skipped: dict[str, str] = {}
    if loss is not None:
        observed = [
            (Observation(source={"kind": "loss"}, final=float(loss), schedule=study.training.schedule.kind), None)
        ]
    elif curve is not None:
        obs = observe_curve(curve, hero)
        obs.schedule = obs.schedule or study.training.schedule.kind
        observed = [(obs, None)]
    elif hero is None and (damaged := _damaged_runs(sd.path)):
        ids = ", ".join(d.run_id for d in damaged)
        raise StateError(
            f"{sd.path} has no readable hero run, and run {ids} of its plan is damaged ({damaged[0].why}): if it is "
            f"the hero, the hero run is damaged; `ladder hero {layout.shell_word(sd.path)}` (with the --params/--tokens/--seed it was "
            "planned with) replans it in place, or score a loss known otherwise with --loss X"
        )
    elif hero is None:
        raise StateError(
            f"{sd.path} has no hero run: plan one with `ladder hero {layout.shell_word(sd.path)}`, or score a hero trained "
            "elsewhere with --loss X or --curve FILE"
        )
    else:  # every hero (a replicate counts toward its hero's mean, never as the hero)
        observed = []
        for h in heroes:
            try:
                observed.append((observe_run(sd, h), replicates(sd, specs, h)))
            except StateError as exc:
                if len(heroes) == 1:
                    raise
                skipped[h.run_id] = str(exc)
        if not observed:
            raise StateError("nothing scored: " + "; ".join(skipped.values()))
    now = results_hashes_of(sd.path)
    refs: dict[float, list[dict]] = {}
    outcome = ScoreOutcome(observation=observed[0][0], skipped=skipped)
    scores: list[tuple[Frozen, dict]] = []  # written only once every freeze is scored: a refusal writes nothing
    obs_why: dict[int, str] = {}  # why a hero run was not scored by a freeze (the first reason)
    for f in frozen:
        fc = f.forecast
        why_not: list[str] = []
        for obs, reps in observed:
            point, label, offset = match_point(fc, obs.params, obs.tokens)
            if point is None:
                n, d = format_count(obs.params), format_count(obs.tokens)
                why_not.append(
                    f"no frozen point at the hero run's {n} params, {d} tokens (it froze the hero at "
                    f"{format_count(fc.hero.params)} params, {format_count(fc.hero.tokens)} tokens); freeze with "
                    f"--predict {n}:{d} before the hero trains"
                )
                obs_why.setdefault(id(obs), f"no freeze holds a forecast at its {n} params, {d} tokens")
                continue
            score: dict[str, Any] = {
                "scored_at": utc_now(),
                "source": obs.source,
                "point": label,
                "offset": offset,
                "final": False,
            }
            tokens_planned = obs.tokens or point.tokens
            if curve is not None and obs.tokens is None:  # a hero trained elsewhere: the frozen point's tokens
                refuse_past_the_end(obs, point.tokens, f"forecast {f.number}'s hero at", slack=MATCH_RTOL)
            final = obs.final
            pts = obs.curve(tokens_planned) if final is None else []
            if final is None and pts and pts[-1][0] >= 1 - 1e-9:
                final = pts[-1][1]  # a curve that reached the planned tokens: its last point is the final loss
            if final is not None:
                score.update(final=True, **compare(point, final))
                if obs.split is not None:
                    score["in_context"] = in_context_score(fc.in_context, obs.split, obs.params, obs.tokens)
                if reps is not None:  # the forecast against the seeds' mean: one run's own noise is not its error
                    score["replicates"] = {**reps, "vs_mean": compare(point, reps["mean"])}
            else:
                ratio = tokens_planned / (obs.params or point.params) if tokens_planned else None
                key = round(ratio or 0, 6)
                if key not in refs:
                    refs[key] = reference_curves(sd, specs, ratio, obs.schedule)
                early = partial_forecast(pts, refs[key])
                if not early.get("available"):  # a partial score that forecasts nothing says nothing: not stored
                    why_not.append(f"the curve forecasts no final loss yet ({early.get('reason') or 'no forecast'})")
                    obs_why[id(obs)] = f"its curve forecasts no final loss yet ({early.get('reason') or 'no forecast'})"
                    continue
                if early.get("available"):
                    early["vs_frozen"] = compare(point, early["final_forecast"])
                    vs = early["vs_frozen"]
                    if vs["inside"] is False:
                        # each in the digits it has where it is shown: the curve's forecast beside its own
                        # interval (the score line), the frozen interval beside its forecast (freeze, show)
                        heads = same_digits(early["final_forecast"], early.get("lo"), early.get("hi"))[0]
                        lo, hi = same_digits(vs["forecast"], vs["lo"], vs["hi"])[1:]
                        early["warning"] = (
                            f"at {pct_of_tokens(early['fraction'])} of its tokens the hero's curve heads for "
                            f"{heads}, outside the frozen 90% interval [{lo}, {hi}]"
                        )
                score["partial"] = early
            if obs.started_at and fc.frozen_at:
                score["frozen_before_training"] = fc.frozen_at <= obs.started_at
            if f.record.get("after_hero") is True:  # frozen when a hero run had already trained or begun to
                score["frozen_before_training"] = False
            changed = now is not None and fc.results_sha256 not in now
            score["data_changed"] = changed
            if changed:
                score["warning"] = DATA_CHANGED
            scores.append((f, score))
        if why_not and not any(g is f for g, _ in scores):
            outcome.unmatched[f.number] = "; ".join(why_not)
    scored = [obs for obs, _ in observed if any(s["source"] is obs.source for _, s in scores)]
    if scored:  # the --json's source and final are of a hero that was scored, never of one passed over
        outcome.observation = scored[0]
    for obs, _ in observed:  # a hero run no freeze scored, beside one that was: said, never passed over silently
        run = obs.source.get("run_id")
        if scores and obs not in scored and obs.source.get("kind") == "run" and run:
            n, d = format_count(obs.params), format_count(obs.tokens)
            outcome.skipped[run] = (
                f"{obs_why.get(id(obs), 'no freeze scored it')}: `ladder forecast freeze "
                f"{layout.shell_word(sd.path)} --predict {n}:{d}` puts one on record (a late check, once it has trained)"
            )
    if not scores:
        raise StateError(
            "nothing scored: "
            + "; ".join(f"forecast {n}: {why}" for n, why in outcome.unmatched.items())
            + " (nothing written)"
        )
    on_record()  # every freeze's score or none: a Ctrl-C between them would get the first appended twice
    for f in {id(f): f for f, _ in scores}.values():
        # scoring unchanged results again observes nothing new: the freeze's scores of this call (one per hero
        # run) compared with its file's last ones under the study's lock, so that two `forecast score` at once (a
        # cron job and a person) append them once
        if not append_scores(f, [score for g, score in scores if g is f], same=_same_score):
            outcome.repeated.add(f.number)
    outcome.scored.extend(scores)
    return outcome


def _same_score(last: dict | None, score: dict) -> bool:
    """Whether ``score`` says what the freeze's last score says, all but the time it was taken."""
    if last is None:
        return False
    drop = ("scored_at",)
    return {k: v for k, v in last.items() if k not in drop} == {
        k: v for k, v in layout.jsonable(score).items() if k not in drop
    }
