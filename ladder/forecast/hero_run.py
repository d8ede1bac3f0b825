"""The hero as a planned run of the study (``ladder hero``): the fit's recommendation made into a run directory
of its own, listed in plan.json, so that ``ladder submit`` trains it like any rung on any executor.

The run is the recommendation exactly: its shape (``recommend.hero_shape`` at the recommended size, tying and
aspect ratio: the rules that size a rung), tokens, batch and peak LR, the study's schedule (warmup: the study's
``warmup_tokens`` when given, else ``warmup_fraction`` of the hero's steps) and the study's seed, evaluated on
the same validation tokens as the rungs so that its eval loss is the number the forecast is about. Its spec says
``role: hero`` (not part of the run id): the fits never use it, ``ladder forecast score`` scores it.

``--params``/``--tokens`` move the hero: the fit is made again with the study's hero at that size (the same
results, bootstrap count and seed), so the shape follows the same rules as the recommendation and the LR and
batch come from the fit's hyperparameter laws where it has them, else from the study's rules; the sources say
which. A hero with the science of a rung of the ladder would be scored against a run it was fitted on: refused.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ladder import layout
from ladder.books import job_records
from ladder.console import sci
from ladder.errors import SpecError, StateError
from ladder.forecast.fitted import CurrentFit, current_fit, refit
from ladder.model.config import RunSpec, format_count, positive_count
from ladder.plan.compiling import resolve_compile
from ladder.plan.planner import estimate_wall_s
from ladder.plan.rung_runs import make_run
from ladder.plan.study_lock import editing_study
from ladder.studies.spec import StudySpec

if TYPE_CHECKING:
    from ladder.reports.fits.study.fit_json import Hero, Recommendation

HERO_VARIANT = "hero"
SHAPE_KEYS = ("d_model", "n_layers", "n_heads", "n_kv_heads", "ffn_dim", "vocab_size")
FORECAST_KEYS = ("loss", "lo", "hi", "level", "half_width_pct", "kind")


@dataclass
class HeroRun:
    spec: RunSpec
    run_dir: Path
    sources: dict[str, str]  # where each choice came from
    state: str  # "new", "planned already", "trained already", "replanned" or "dry run"
    est_wall_s: float
    overrides: dict[str, Any] = field(default_factory=dict)
    forecast: dict = field(default_factory=dict)  # the fit's forecast at this hero (loss, lo, hi)
    notes: list[str] = field(default_factory=list)
    frozen: list[dict] = field(default_factory=list)  # the freezes' forecasts of this run: what a score checks
    replaced: list[RunSpec] = field(default_factory=list)  # heroes planned elsewhere, never started: dropped

    def to_dict(self) -> dict[str, Any]:
        from ladder.plan.planner import run_row

        return {
            "run_id": self.spec.run_id,
            "run_dir": str(self.run_dir),
            "state": self.state,
            "role": self.spec.role,
            "run": run_row(self.spec, None, self.est_wall_s) | {"run_dir": str(self.run_dir)},
            "precision": self.spec.precision,
            "sources": self.sources,
            "overrides": self.overrides,
            "forecast": self.forecast,
            "frozen": self.frozen,
            "notes": self.notes,
            "replaced": [r.run_id for r in self.replaced],
        }


def parse_override(value: str | None, flag: str) -> float | None:
    """A ``--params``/``--tokens`` count (``800K``, ``3.2M``, ``1.6e7``); SpecError naming the flag otherwise."""
    if value is None:
        return None
    # below infinity: 1e400 reads as inf, which was then shown as "-" ("--params -: beyond what this family builds")
    n = float(positive_count(value, flag, "a positive count such as 800K, 3.2M or 1.6e7", below=math.inf))
    if n < 1:  # --params 1e-3 said "target size must be positive, got 0", naming neither the option nor the value
        raise SpecError(f"{flag} {value!r}: less than one; must be a positive count such as 800K, 3.2M or 1.6e7")
    return n


def _caveat(forecast: Hero, vocab_size: int) -> str | None:
    """What a person must know before trusting the forecast at this hero, as ``ladder fit`` warns it: a loss worse
    than a uniform guess over the vocabulary (the law taken far below the ladder), or a hero beyond what the
    rollout tested or the ladder's demonstrated reach."""
    from ladder.reports.fits.study.study_hero import beyond_words, where_words

    if forecast.loss is not None and forecast.loss > math.log(vocab_size):
        return (
            f"the forecast {forecast.loss:.4g} nats/token is above ln(V) = {math.log(vocab_size):.3f}, the loss of a "
            f"uniform guess over the {vocab_size:,}-token vocabulary: the law does not hold this far from the ladder"
        )
    beyond = beyond_words(forecast.beyond_tested, forecast.beyond_reach)
    if beyond is None:
        return None
    ext = forecast.extrapolation or {}
    axes = [ext.get(k) for k in ("params", "tokens", "compute_6nd")]
    where = ""
    if all(isinstance(x, (int, float)) and math.isfinite(x) for x in axes):  # fit's words and digits, every axis
        where = f"{where_words(*axes)}: "
    return f"the hero is {where}{beyond}: a projection, not a checked prediction"


def _recommendation(
    current: CurrentFit, params: float | None, tokens: float | None
) -> tuple[Recommendation, Hero, dict[str, Any], list[str]]:
    """(recommendation, hero forecast, overrides, notes): fit.json's, or a fit made again with the study's hero at
    the given size (read as fit.json would hold it)."""
    from ladder.reports.fits.study.fit_json import validate

    study = current.study
    if params is None and tokens is None:
        rec = current.fit.recommendation
        if not rec.available:
            raise StateError(f"the fit has no recommendation to plan ({rec.reason})")
        return rec, current.hero, {}, []
    n = params if params is not None else float(current.hero.params or 0)
    if not n > 0:
        raise StateError("the fit has no hero size to train --tokens at: give --params too")
    d = tokens if tokens is not None else study.ladder.tokens_per_param * n
    _check_override(study, n, d, params is not None, tokens is not None)
    overrides = {"params": n, "tokens": d}
    notes = (
        []
        if tokens is not None
        else [f"tokens: the study's rule, ladder.tokens_per_param {study.ladder.tokens_per_param:g} x --params"]
    )
    if params is None:
        notes.append(f"params: the fit's hero ({format_count(n)}), --tokens moves only its tokens")
    hero = study.hero.model_copy(update={"params": int(round(n)), "tokens": int(round(d)), "compute": None})
    result = refit(current, study=study.model_copy(update={"hero": hero}))
    if result.recommendation is None:
        raise StateError(
            f"the fit gives no recommendation at {format_count(n)} params, {format_count(d)} tokens "
            f"({result.reasons.get('recommendation', 'no reason given')})"
        )
    refitted = validate(result.to_dict())
    if refitted.hero.loss is not None:  # a point no law forecasts has no forecast to compare with a freeze's
        notes.append(_refit_note(current, n, d))
    return refitted.recommendation, refitted.hero, overrides, notes


def _refit_note(current: CurrentFit, n: float, d: float) -> str:
    """Why the forecast of a moved hero can differ from a `--predict` of the same point: the rollout that weighs
    the law forms and calibrates the interval is taken at the target's tokens/param, the moved hero's here, the
    study hero's for `ladder fit --predict` and `ladder forecast freeze --predict`."""
    at = f"the laws fitted again with the hero at {format_count(n)} params x {format_count(d)} tokens"
    hero = current.hero
    if not (hero.params and hero.tokens):
        return f"forecast: {at}"
    ratio, study_ratio = d / n, float(hero.tokens) / float(hero.params)
    if abs(ratio / study_ratio - 1) < 1e-9:
        return (
            f"forecast: {at}, the study hero's {study_ratio:.3g} tokens/param: the forecast `ladder forecast freeze "
            f"--predict` and `ladder fit --predict` give this point"
        )
    digits = next((k for k in range(3, 10) if f"{ratio:.{k}g}" != f"{study_ratio:.{k}g}"), 10)  # 20.008, not 20
    return (
        f"forecast: {at}: what depends on the target's tokens/param (the law forms fitted at it, the rollout that "
        f"weighs the forms and calibrates the interval) is taken at its {ratio:.{digits}g}, where `ladder forecast "
        f"freeze --predict` and `ladder fit --predict` take it at the study hero's {study_ratio:.{digits}g}, so their "
        "forecasts of this point can differ; `ladder forecast score` scores the frozen one"
    )


def frozen_here(study_dir: Path, params: float, tokens: float) -> list[dict]:
    """The freezes' forecasts of a hero run at (params, tokens): each readable freeze's point that
    `ladder forecast score` would score the run against (the frozen hero or a --predict point within 10%)."""
    from ladder.forecast.fitted import results_hashes_of
    from ladder.forecast.frozen import read_frozen
    from ladder.forecast.score import match_point

    now = results_hashes_of(study_dir)
    out = []
    for f in read_frozen(study_dir):
        if f.forecast is None:
            continue
        point, label, _ = match_point(f.forecast, params, tokens)
        if point is None or point.loss is None:
            continue
        out.append(
            {
                "number": f.number,
                "file": f.path.name,
                "point": label,
                "params": point.params,
                "tokens": point.tokens,
                "loss": point.loss,
                "lo": point.lo,
                "hi": point.hi,
                # fitted on other results than the study's now (`forecast show` warns): why a refit differs
                "data_changed": now is not None and f.forecast.results_sha256 not in now,
            }
        )
    return out


def _check_override(study: StudySpec, n: float, d: float, params_given: bool, tokens_given: bool) -> None:
    """The same bounds as a study's hero (``studies validate``): a size the family builds, at least one sequence
    of tokens, at most MAX_TOKENS_PER_PARAM tokens per parameter."""
    from ladder.plan.plausibility import check_target
    from ladder.studies.spec import MAX_TOKENS_PER_PARAM

    h = study.hero
    seq_len = h.seq_len or study.data.seq_len
    tied = study.model.tie_embeddings if h.tied is None else h.tied
    size = format_count(n) if n < 1e18 else sci(n)
    label = f"--params {size}" if params_given else f"the fit's hero ({size} parameters)"
    check_target(
        label,
        n,
        None,
        conv=study.ladder.param_count,
        aspect=h.aspect_ratio or study.model.aspect_ratio,
        rules=study.model.rules(seq_len),
        tied=tied,
    )
    what = (
        f"--tokens {format_count(d) if d < 1e18 else sci(d)}"
        if tokens_given
        else (f"{format_count(d)} tokens (ladder.tokens_per_param {study.ladder.tokens_per_param:g} x --params)")
    )
    if d < seq_len:
        raise SpecError(f"{what}: less than one sequence of {seq_len} tokens")
    if d > MAX_TOKENS_PER_PARAM * n:
        raise SpecError(
            f"{what}: {sci(d / n) if d / n >= 1e6 else f'{d / n:,.0f}'} tokens per parameter, beyond "
            f"{MAX_TOKENS_PER_PARAM:,.0f} (Chinchilla's rule is 20)"
        )


def hero_spec(
    study: StudySpec, rec: Recommendation, seed: int | None = None, *, study_dir: Path | None = None
) -> RunSpec:
    """The run of a recommendation (fit.json's ``recommendation`` entry), ``role: hero``; ``seed``: a replicate
    that differs only in its seed (initialisation and data order); ``study_dir``: named in a refusal."""
    from ladder.reports.fits.recommend import hero_shape

    shape = hero_shape(
        study, float(rec.params_target), tied=bool(rec.tied), aspect_ratio=float(rec.aspect_ratio_target)
    )
    want = {k: getattr(rec, k) for k in SHAPE_KEYS}
    have = {k: getattr(shape, k) for k in want}
    if want != have:  # most often S/study.yaml edited since the fit ("this version of ladder" blamed an upgrade)
        sd = layout.StudyDir(Path(study_dir or "STUDY"))
        raise StateError(
            f"{layout.FIT}'s recommended shape {want} is not the one the study sizes from it now ({have}): "
            f"{sd.study} (or ladder's sizing) changed since the fit; run `ladder fit {layout.shell_word(sd.path)}` again"
        )
    seq_len = int(rec.seq_len or study.data.seq_len)
    if seq_len != study.data.seq_len:  # the hero's own context length (hero.seq_len): its data windows too
        study = study.model_copy(update={"data": study.data.model_copy(update={"seq_len": seq_len})})
    sched = study.training.schedule
    batch = int(rec.batch_tokens)
    warmup = int(round(sched.warmup_tokens / batch)) if sched.warmup_tokens is not None else None
    axes: dict = {"size": format_count(shape.params(study.ladder.param_count))}
    if seed is not None:
        axes["seed"] = seed
    run = make_run(
        study,
        shape,
        {},
        axes,
        study.training.seed if seed is None else seed,
        float(rec.tokens),
        batch,
        float(rec.lr),
        warmup,
    )
    run = run.model_copy(update={"role": "hero", "variant": HERO_VARIANT})
    hw = study.executor.hardware
    return resolve_compile([run], study.training.compile, hw, {run.run_id: estimate_wall_s(run, hw)})[0][0]


def _sources(
    study: StudySpec,
    rec: Recommendation,
    overrides: dict,
    seed: int | None = None,
    given: tuple[bool, bool] = (True, True),
) -> dict[str, str]:
    """Where each choice came from; ``given``: whether --params and --tokens were given (the refit holds both as
    the study's hero, so its own sources would say ``study: hero.tokens`` for either)."""
    out = {k: str(v) for k, v in rec.sources.items() if k != "loss"}
    if overrides:
        n, d = format_count(overrides["params"]), format_count(overrides["tokens"])
        params_given, tokens_given = given
        out["params"] = f"--params {n}" if params_given else f"the fit's hero ({n})"
        out["tokens"] = (
            f"--tokens {d}"
            if tokens_given
            else f"study: ladder.tokens_per_param {study.ladder.tokens_per_param:g} x --params"
        )
    sched = study.training.schedule
    out["warmup"] = (
        f"study: training.schedule.warmup_tokens {sched.warmup_tokens:,}"
        if sched.warmup_tokens is not None
        else f"study: training.schedule.warmup_fraction {sched.warmup_fraction:g} of the steps"
    )
    out["seed"] = (
        f"study: training.seed {study.training.seed}"
        if seed is None
        else f"--seed {seed}: a replicate of the hero (its initialisation and data order)"
    )
    return out


def _write_hero(sd: layout.StudyDir, rd: layout.RunDir, spec: RunSpec, plan: dict) -> None:
    """The hero's run directory and spec.json, then its entry in plan.json; when a write fails (a read-only
    study, a full disk), what this call created is removed again, so that no run folder is left that the plan
    does not list."""
    import shutil

    created = [p for p in (rd.path.parent, rd.path) if not p.exists()]
    wrote_spec = False
    try:
        rd.path.mkdir(parents=True, exist_ok=True)
        if not rd.spec.is_file():
            layout.atomic_write_json(rd.spec, spec.model_dump(mode="json"))
            wrote_spec = True
        plan["runs"] = [*plan.get("runs", []), spec.run_id]
        layout.atomic_write_json(sd.plan, plan)
    except BaseException:
        if wrote_spec:
            rd.spec.unlink(missing_ok=True)
        for path in reversed(created):
            shutil.rmtree(path, ignore_errors=True)
        raise


def _spec_on_disk(rd: layout.RunDir) -> dict | None:
    """The run's spec.json as a dict, or None when it is missing or unreadable (a deleted or damaged run)."""
    try:
        on_disk = json.loads(rd.spec.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return on_disk if isinstance(on_disk, dict) else None


def _rewrite_spec(rd: layout.RunDir, spec: RunSpec) -> None:
    """Write the spec of a planned run whose folder was deleted or whose spec.json is damaged (the plan already
    lists it)."""
    import shutil

    created = not rd.path.exists()
    try:
        rd.path.mkdir(parents=True, exist_ok=True)
        layout.atomic_write_json(rd.spec, spec.model_dump(mode="json"))
    except BaseException:
        if created:
            shutil.rmtree(rd.path, ignore_errors=True)
        raise


def _never_started(sd: layout.StudyDir, plan: dict, spec: RunSpec, keep: bool) -> list[RunSpec]:
    """The plan's hero runs that ``spec`` replaces (none with ``keep``): of another science than ``spec`` (not
    its seed replicates), never submitted, with nothing in their folder but spec.json. A hero that was ever
    submitted or trained a step is never among them."""
    from ladder.forecast.score import science

    if keep or job_records.problem(sd):  # a damaged jobs.json cannot say which heroes were submitted: none goes
        return []
    book = job_records.read(sd)
    out = []
    for run_id in plan.get("runs", []):
        rd = sd.run(run_id)
        on_disk = _spec_on_disk(rd)
        if run_id == spec.run_id or on_disk is None or on_disk.get("role") != "hero" or book.get(run_id):
            continue
        try:
            other = RunSpec.model_validate(on_disk)
            files = [p.name for p in rd.path.iterdir()]
        except (ValueError, OSError):
            continue
        if files == [layout.SPEC] and science(other) != science(spec):
            out.append(other)
    return out


def _drop(sd: layout.StudyDir, runs: list[RunSpec]) -> None:
    """Remove the folders (a spec.json each) of never-started hero runs that plan.json no longer lists."""
    import shutil

    for r in runs:
        shutil.rmtree(sd.run(r.run_id).path, ignore_errors=True)


def plan_hero_run(
    study_dir: Path,
    *,
    params: float | None = None,
    tokens: float | None = None,
    seed: int | None = None,
    dry_run: bool = False,
    keep: bool = False,
) -> HeroRun:
    """Plan the hero run in the study directory (``seed``: a replicate with that seed; ``dry_run``: only say
    what it would be). A hero planned before at another point (moved by --params/--tokens or the study file)
    that was never submitted is replaced: dropped from the plan, so that ``ladder submit`` does not train it too
    (``keep``: planned beside it)."""
    if seed is not None and seed < 0:
        raise SpecError(f"--seed {seed}: must be a non-negative integer")
    current = current_fit(study_dir)
    rec, forecast, overrides, notes = _recommendation(current, params, tokens)
    spec = hero_spec(current.study, rec, seed, study_dir=study_dir)
    sd = layout.StudyDir(Path(study_dir))
    rd = sd.run(spec.run_id)
    # read and written under the study's lock: a second `ladder hero` (or a `ladder plan`) at the same time reads
    # the plan.json this one wrote, so neither drops the other's run nor lists the same run twice
    with editing_study(sd.path):
        plan = json.loads(sd.plan.read_text(encoding="utf-8"))
        state = "dry run" if dry_run else "new"
        on_disk = _spec_on_disk(rd)
        if spec.run_id in plan.get("runs", []) and on_disk is None:  # the hero's own run, damaged: replanned in place
            state = "dry run" if dry_run else "replanned"
            if not dry_run:
                _rewrite_spec(rd, spec)
        elif spec.run_id in plan.get("runs", []):
            if on_disk.get("role", "rung") != "hero":
                raise StateError(
                    f"the hero at {format_count(spec.params)} params, {format_count(spec.tokens)} tokens trains "
                    f"exactly rung {spec.run_id} of the ladder (the same science): a forecast cannot be "
                    "checked against a run it was fitted on; choose another --params/--tokens"
                )
            # trained already (status, forecast show): not a run to submit again
            state = "trained already" if layout.result_status(rd) == "done" else "planned already"
        # a hero moved (a new run): the one it moves from goes, unless it ever began; a hero asked for again
        # (planned or trained already) leaves the others as they are
        replaced = _never_started(sd, plan, spec, keep) if spec.run_id not in plan.get("runs", []) else []
        if state == "new":  # one write of plan.json: the new hero in, the heroes it replaces out
            gone = {r.run_id for r in replaced}
            plan["runs"] = [r for r in plan.get("runs", []) if r not in gone]
            _write_hero(sd, rd, spec, plan)
            _drop(sd, replaced)
    fc = {k: getattr(forecast, k) for k in FORECAST_KEYS}
    # the point the law was evaluated at: the requested size and tokens, which the planned shape and whole
    # batches miss by a little (the score matches within 10% and says by how much)
    fc["params"], fc["tokens"] = forecast.params, forecast.tokens
    if fc["loss"] is None:  # a hero no law forecasts: `ladder forecast score` will have nothing to score it against
        fc["reason"] = forecast.loss_reason or forecast.reason or "the fit gives no forecast there"
    else:
        fc["caveat"] = _caveat(forecast, current.study.model.vocab_size)
    return HeroRun(
        spec=spec,
        run_dir=rd.path,
        sources=_sources(current.study, rec, overrides, seed, (params is not None, tokens is not None)),
        state=state,
        est_wall_s=estimate_wall_s(spec, current.study.executor.hardware),
        overrides=overrides,
        forecast=fc,
        notes=notes + [str(n) for n in rec.notes],
        frozen=frozen_here(sd.path, float(spec.params), float(spec.tokens)),
        replaced=replaced,
    )
