"""The contract of ``fit.json``: pydantic models that :class:`~ladder.reports.fits.study.result.FitResult` is
validated against before it is written, and that every reader (the forecast commands, the report, the summary)
reads it through (:func:`read_fit_json`).

The models type what the later stages read: the top-level sections, the hero's forecast, size and distance, each
prediction (with the hyperparameter laws' LR* and B* there), the loss law's forms (with their rollout scores),
selection, calibration, lean and reach, each variant's own law, the compute-optimal split, the calls of the
hyperparameter, tied-vs-untied, depth-vs-width and IsoFLOP sections (with the rows and figures the report draws
from them), the recommendation the hero run is planned from, the in-context trend, the task forecasts, the
forecasts of each kind of target, the excluded runs and ``meta``. The deep internals of a section (a law form's
bootstrap rows, an ablation's rollout) are data of that section and pass through as they are (``extra="allow"``).
A key renamed on the writer's side fails the write (and the golden test of the schema); an older file, or a
hand-damaged one, gets one line: refit with ``ladder fit``. A reader that copies a part of the file into a
record of its own (a freeze, the tied-vs-untied call the summary hands to
:func:`~ladder.reports.fits.recommend.tied_uncertainty`) takes it :meth:`~_Open.as_written` (:func:`written`): its
keys in the file's order, its numbers as the file holds them.

The models of the loss law and IsoFLOP are in :mod:`~ladder.reports.fits.study.fit_json_laws`, those of the
hyperparameter laws and ablations in :mod:`~ladder.reports.fits.study.fit_json_trends`; this module holds the rest
and the whole, and readers import every model from here.

tests/reports/fits/golden/fit_json.schema.json holds the schema these models describe; any change to it is
deliberate. ``SCHEMA_VERSION`` is raised when a file the previous models accepted would be refused or read
differently (a key renamed, retyped or made required); typing a key the writer already wrote, as an optional
field, keeps it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ladder.errors import FitError
from ladder.reports.fits.study.fit_json_laws import (
    OUTSIDE,
    Allocation,
    AllocationCI90,
    BudgetCI90,
    Calibration,
    ComputeOptimal,
    Distance,
    ExponentsCI90,
    FormForecast,
    FormResidual,
    FormRollout,
    FormScore,
    Hero,
    Isoflop,
    IsoflopBudget,
    IsoflopExponents,
    IsoflopLaw,
    IsoflopResidual,
    IsoflopShape,
    LawForm,
    Lean,
    LossLaw,
    LossRollout,
    Point,
    Prediction,
    Reach,
    RolloutError,
    RolloutForecast,
    Section,
    SkippedBudget,
    TrackRecord,
    VariantLaw,
    _finite,
    _Open,
    coverage_words,
    written,
)
from ladder.reports.fits.study.fit_json_trends import (
    AblationBand,
    AblationForm,
    AblationFormScore,
    AblationReach,
    AblationTrend,
    AspectAtHero,
    AspectOptimum,
    AspectPoint,
    AspectRung,
    Crossover,
    CurveLaw,
    CurveParams,
    DepthVsWidth,
    HparamCurvePoint,
    HparamLaw,
    HparamLawFit,
    HparamLawHero,
    HparamLawPoint,
    HparamRollout,
    HparamRung,
    Hparams,
    HparamsAtHero,
    LrCurve,
    Message,
    SweepOptimum,
    SweepParabola,
    SweepPoint,
    TiedCall,
    TiedVsUntied,
    TieNoise,
    TieRung,
)

SCHEMA_VERSION = 3


class Schedule(_Open):
    """The hero's LR schedule: its kind and the fractions of the run it warms up and cools down over."""

    kind: str | None = None
    warmup_fraction: float | None = None
    cooldown_fraction: float | None = None
    cooldown_shape: str | None = None
    final_lr_fraction: float | None = None


class Recommendation(Section):
    """The hero run the fit recommends (``ladder hero`` plans it): the size, shape, schedule inputs and sources."""

    params_target: float | None = None
    tokens: int | None = None
    tied: bool | None = None
    aspect_ratio_target: float | None = None
    d_model: int | None = None
    n_layers: int | None = None
    n_heads: int | None = None
    n_kv_heads: int | None = None
    head_dim: int | None = None
    ffn_dim: int | None = None
    vocab_size: int | None = None
    aspect_ratio: float | None = None
    params: float | None = None
    param_convention: str | None = None
    params_total: float | None = None
    tokens_per_param: float | None = None
    allocation: str | None = None  # how the tokens were chosen ("given", "compute_optimal", "rule")
    compute: float | None = None
    seq_len: int | None = None
    batch_tokens: int | None = None
    batch_tokens_ci90: list[float | None] | None = None
    lr: float | None = None
    lr_ci90: list[float | None] | None = None
    schedule: Schedule | None = None
    steps: int | None = None
    warmup_steps: int | None = None
    loss: float | None = None
    loss_interval: list[float | None] | None = None
    sources: dict[str, str] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)
    yaml: str | None = None  # the recommendation as study YAML to paste

    _check = field_validator("params_target", "aspect_ratio_target", "lr")(_finite)


class TaskPoint(_Open):
    """One run of a task: its task loss and accuracy, step 1's fitted loss, and step 2's accuracy at the observed
    loss (``acc_fit``) and at step 1's (``acc_chain``)."""

    run_id: str | None = None
    params: float | None = None
    tokens: float | None = None
    flops: float | None = None
    loss: float | None = None
    loss_fit: float | None = None
    acc: float | None = None
    acc_fit: float | None = None
    acc_chain: float | None = None


class TaskLossCurve(_Open):
    """Step 1's task loss against compute at one tokens-per-parameter ratio (``label``), with its 90% band."""

    label: str | None = None
    tokens_per_param: float | None = None
    params: list[float | None] = Field(default_factory=list)
    tokens: list[float | None] = Field(default_factory=list)
    flops: list[float | None] = Field(default_factory=list)
    loss: list[float | None] = Field(default_factory=list)
    loss_lo: list[float | None] = Field(default_factory=list)
    loss_hi: list[float | None] = Field(default_factory=list)


class TaskAccuracyCurve(_Open):
    """Step 2's accuracy against task loss, with its 90% band."""

    loss: list[float | None] = Field(default_factory=list)
    acc: list[float | None] = Field(default_factory=list)
    acc_lo: list[float | None] = Field(default_factory=list)
    acc_hi: list[float | None] = Field(default_factory=list)


class TaskCurves(_Open):
    step1: list[TaskLossCurve] = Field(default_factory=list)
    step2: TaskAccuracyCurve | None = None  # None without an accuracy metric


class TaskRollout(_Open):
    """Step 1's rollout: ``forecasts`` weighted forecasts (``mixture``) from ``prefixes`` prefixes, and each
    form's record."""

    prefixes: int | None = None
    forecasts: int | None = None
    scores: dict[str, FormScore] = Field(default_factory=dict)
    mixture: list[RolloutForecast] = Field(default_factory=list)


class TaskLossLaw(_Open):
    """Step 1, task loss against size and tokens: the ``primary`` form (the largest weight) in its family's
    ``formula``, every form with its weight and rollout score, and the calibration and reach of the mixture."""

    form: str | None = None
    primary: str | None = None
    params: dict[str, float | None] | None = None
    intervals: dict[str, list[float | None]] | None = None
    rmse_log: float | None = None
    reason: str | None = None
    formula: str | None = None
    forms: dict[str, LawForm] = Field(default_factory=dict)
    skipped: dict[str, str] | None = None
    calibration: Calibration | None = None
    reach: dict[str, Reach] | None = None
    rollout: TaskRollout | None = None


class TaskAccuracyLaw(_Open):
    """Step 2, accuracy against task loss: a sigmoid's parameters with their 90% intervals."""

    params: dict[str, float | None] | None = None
    intervals: dict[str, list[float | None]] | None = None
    rmse: float | None = None
    formula: str | None = None


class TaskHero(_Open):
    """A task forecast at the hero through both steps: the task loss and the accuracy with the 90% intervals of
    the curves and of one new evaluation, and how far beyond the ladder it lies."""

    params: float | None = None
    tokens: float | None = None
    flops: float | None = None
    loss: float | None = None
    loss_interval: list[float | None] | None = None
    loss_prediction_interval: list[float | None] | None = None
    acc: float | None = None
    acc_interval: list[float | None] | None = None
    acc_prediction_interval: list[float | None] | None = None
    flops_estimated: bool | None = None
    params_x: float | None = None
    compute_x: float | None = None
    beyond_reach: bool | None = None


class TaskFit(_Open):
    """One task's two-step forecast: its runs, both steps' laws and curves, and the hero's forecast."""

    task: str | None = None
    loss_metric: str | None = None
    acc_metric: str | None = None  # None: a loss forecast only
    loss_column: str | None = None
    acc_column: str | None = None
    level: float | None = None
    n_runs: int | None = None
    step1: TaskLossLaw | None = None
    step2: TaskAccuracyLaw | None = None
    points: list[TaskPoint] = Field(default_factory=list)
    curves: TaskCurves | None = None
    hero: TaskHero | None = None
    warnings: list[str] = Field(default_factory=list)


class Tasks(Section):
    """Task accuracy forecasts: each task's fit, and why a task could not be fitted (``errors``)."""

    hero: dict[str, float | None] | None = None  # the point forecast: params, tokens, flops
    tasks: dict[str, TaskFit] = Field(default_factory=dict)
    errors: dict[str, str] = Field(default_factory=dict)


class KindForecast(_Open):
    """One kind of target's forecast (in-context repeats, novel tokens) at a point, or why there is none."""

    available: bool
    reason: str | None = None
    loss: float | None = None
    lo: float | None = None
    hi: float | None = None
    rollout_rms_pct: float | None = None
    rollout_n: int | None = None  # the rollout forecasts that RMS is over


class KindPoint(_Open):
    """Each kind's forecast at a point: the hero (no label) or a prediction, and the two combined by the share
    of repeats."""

    label: str = "hero"
    params: float | None = None
    tokens: float | None = None
    novel: KindForecast | None = None
    repeats: KindForecast | None = None
    combined: KindForecast | None = None


class KindForecasts(KindPoint):
    predictions: list[KindPoint] = Field(default_factory=list)


class CopyTrend(_Open):
    """The trend of the repeats/novel loss ratio in compute: its slope (log-log) with a 90% interval, and the
    ratio at the smallest and largest compute of a span ``compute_span`` wide."""

    slope: float | None = None
    ci90: list[float | None] | None = None
    n: int | None = None
    ratio_at_smallest: float | None = None
    ratio_at_largest: float | None = None
    compute_span: float | None = None


class CopyRun(_Open):
    """One run's loss split by kind of target, and its copy ratio (repeats' loss over the novel tokens')."""

    run: str | None = None
    params: float | None = None
    tokens: float | None = None
    loss: float | None = None
    repeats: float | None = None
    novel: float | None = None
    copy_ratio: float | None = None
    seed: int | None = None


class SeedSpread(_Open):
    """The seed replicates' spread (pooled sd of log loss) of each kind, over ``configurations`` replicated
    configurations; None without replicates."""

    repeats: float | None = None
    novel: float | None = None
    configurations: int | None = None


class InContext(Section):
    """The loss on in-context repeats and on novel tokens, each forecast at the hero and the predictions."""

    repeat_share: float | None = None
    trend: CopyTrend | None = None
    forecasts: KindForecasts | None = None
    variant: str | None = None
    runs: list[CopyRun] = Field(default_factory=list)
    seeds: SeedSpread | None = None
    warnings: list[str] = Field(default_factory=list)


class Meta(_Open):
    schema_version: int
    n_runs: int
    n_used: int
    n_boot: int
    seed: int
    ladder_version: str
    created_at: str
    results_sha256: str | None = None
    study: str | None = None
    param_convention: str | None = None


class Excluded(_Open):
    """A run left out of every fit (not done, or a hero run), with its state and why."""

    run: str | None = None
    status: str | None = None
    reason: str | None = None


class FitJson(BaseModel):
    """fit.json, every top-level section typed; no other top-level key."""

    model_config = ConfigDict(extra="forbid")

    loss: LossLaw
    loss_by_variant: dict[str, VariantLaw]
    noise_floor: dict[str, list[dict]]
    predictions: list[Prediction]
    hero: Hero
    compute_optimal: ComputeOptimal
    isoflop: Isoflop
    hparams: Hparams
    tied_vs_untied: TiedVsUntied
    depth_vs_width: DepthVsWidth
    recommendation: Recommendation
    tasks: Tasks
    in_context: InContext
    forecast_curve: list[Point] | None = None  # the calibrated 90% band along the hero's tokens per parameter
    excluded: list[Excluded]
    warnings: list[str]
    notes: list[str]
    meta: Meta


def validate(d: dict) -> FitJson:
    """``FitResult.to_dict()`` as the contract; a ValidationError here is a bug in the writer."""
    return FitJson.model_validate(d)


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err.get("loc", ())) or "the file"
    return f"{where}: {err.get('msg', 'invalid')}"


def parse_fit_json(data: Any, where: str | Path = "fit.json") -> FitJson:
    """A fit.json already read as JSON, validated; an older file or a damaged one is one :class:`FitError`."""
    version = (
        data.get("meta", {}).get("schema_version")
        if isinstance(data, dict) and isinstance(data.get("meta"), dict)
        else None
    )
    if version != SCHEMA_VERSION:
        raise FitError(
            f"{where} was written by another version of ladder ("
            + (f"fit.json schema {version}" if version is not None else "one before fit.json had a schema version")
            + f"; this ladder reads schema {SCHEMA_VERSION}): refit with `ladder fit`"
        )
    try:
        return FitJson.model_validate(data)
    except ValidationError as exc:
        raise FitError(f"{where} is damaged ({_first_error(exc)}): refit with `ladder fit`") from None


def read_fit_json(path: str | Path) -> FitJson:
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise FitError(f"{path} is damaged (not JSON: {exc}): refit with `ladder fit`") from None
    return parse_fit_json(data, path)


__all__ = [
    "AblationBand",
    "AblationForm",
    "AblationFormScore",
    "AblationReach",
    "AblationTrend",
    "Allocation",
    "AllocationCI90",
    "AspectAtHero",
    "AspectOptimum",
    "AspectPoint",
    "AspectRung",
    "BudgetCI90",
    "Calibration",
    "ComputeOptimal",
    "CopyRun",
    "CopyTrend",
    "Crossover",
    "CurveLaw",
    "CurveParams",
    "DepthVsWidth",
    "Distance",
    "Excluded",
    "ExponentsCI90",
    "FitJson",
    "FormForecast",
    "FormResidual",
    "FormRollout",
    "FormScore",
    "Hero",
    "HparamCurvePoint",
    "HparamLaw",
    "HparamLawFit",
    "HparamLawHero",
    "HparamLawPoint",
    "HparamRollout",
    "HparamRung",
    "Hparams",
    "HparamsAtHero",
    "InContext",
    "Isoflop",
    "IsoflopBudget",
    "IsoflopExponents",
    "IsoflopLaw",
    "IsoflopResidual",
    "IsoflopShape",
    "KindForecast",
    "KindForecasts",
    "KindPoint",
    "LawForm",
    "Lean",
    "LossLaw",
    "LossRollout",
    "LrCurve",
    "Message",
    "Meta",
    "parse_fit_json",
    "Point",
    "Prediction",
    "Reach",
    "read_fit_json",
    "Recommendation",
    "RolloutError",
    "RolloutForecast",
    "Schedule",
    "SCHEMA_VERSION",
    "Section",
    "SeedSpread",
    "SkippedBudget",
    "SweepOptimum",
    "SweepParabola",
    "SweepPoint",
    "TaskAccuracyCurve",
    "TaskAccuracyLaw",
    "TaskCurves",
    "TaskFit",
    "TaskHero",
    "TaskLossCurve",
    "TaskLossLaw",
    "TaskPoint",
    "TaskRollout",
    "Tasks",
    "TiedCall",
    "TiedVsUntied",
    "TieNoise",
    "TieRung",
    "TrackRecord",
    "validate",
    "VariantLaw",
    "OUTSIDE",
    "coverage_words",
    "written",
]
