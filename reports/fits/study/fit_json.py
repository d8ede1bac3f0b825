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

tests/reports/fits/golden/fit_json.schema.json holds the schema these models describe; any change to it is
deliberate. ``SCHEMA_VERSION`` is raised when a file the previous models accepted would be refused or read
differently (a key renamed, retyped or made required); typing a key the writer already wrote, as an optional
field, keeps it.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from ladder.errors import FitError

SCHEMA_VERSION = 3


def _finite(v):
    if v is not None and (isinstance(v, bool) or not math.isfinite(v)):
        raise ValueError(f"{v!r} is not a finite number")
    return v


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")
    _written: dict | None = PrivateAttr(default=None)

    @model_validator(mode="wrap")
    @classmethod
    def _keep_as_written(cls, data: Any, handler):
        model = handler(data)
        if isinstance(data, dict) and isinstance(model, _Open):
            model._written = data
        return model

    def as_written(self) -> dict:
        """This part of fit.json as the file holds it (validated): its keys in the file's order, its numbers as
        written (an int stays an int), for a record that copies it verbatim."""
        if self._written is not None:
            return copy.deepcopy(self._written)
        return self.model_dump(mode="json", exclude_unset=True)


def written(value: Any) -> Any:
    """``value`` (a part of a validated fit.json: a model, a dict or list of them, or a plain value) as the file
    holds it; see :meth:`_Open.as_written`."""
    if isinstance(value, _Open):
        return value.as_written()
    if isinstance(value, dict):
        return {k: written(v) for k, v in value.items()}
    if isinstance(value, list):
        return [written(v) for v in value]
    return value


class Section(_Open):
    """A section that may be unavailable: ``available`` and, when it is not, the ``reason``."""

    available: bool
    reason: str | None = None


class Reach(_Open):
    params_x: float = 1.0
    compute_x: float = 1.0
    tokens_x: float = 1.0


class Calibration(_Open):
    level: float | None = None  # the intervals' nominal coverage
    coverage: float | None = None
    factor: float = 1.0
    n: int | None = None


class RolloutError(_Open):
    """The rollout's error at the farthest distances it tested (the top third): ``n`` forecasts between
    ``min_distance_x`` and ``max_distance_x``, their median and worst absolute error in percent."""

    n: int | None = None
    min_distance_x: float | None = None
    max_distance_x: float | None = None
    median_abs_err_pct: float | None = None
    worst_abs_err_pct: float | None = None
    coverage: float | None = None


class Distance(_Open):
    """How far a forecast lies beyond the ladder, what the rollout tested, and how the interval was widened."""

    params_x: float
    tokens_x: float
    compute_x: float
    distance_x: float
    tested_distance_x: float
    beyond_tested: bool
    beyond_tested_axes: list[str] = Field(default_factory=list)
    drift_rate: float
    drift_widening_pct: float
    public_floor_pct: float
    rollout_error: RolloutError | None = None


class TrackRecord(_Open):
    band: str
    n: int
    ladders: int
    median_abs_err_pct: float
    worst_abs_err_pct: float
    coverage: float
    median_half_width_pct: float
    source: str


class Point(_Open):
    """A forecast point: the hero's loss fields, or a prediction row."""

    params: float | None = None
    tokens: float | None = None
    loss: float | None = None
    lo: float | None = None
    hi: float | None = None
    level: float | None = None
    half_width_pct: float | None = None

    _check = field_validator("params", "tokens", "loss", "lo", "hi", "level", "half_width_pct")(_finite)


class Prediction(Point):
    label: str
    variant: str | None = None
    params_x: float | None = None
    tokens_x: float | None = None
    compute_x: float | None = None
    beyond_reach: bool = False
    beyond_tested: bool = False
    distance: Distance | dict = Field(default_factory=dict)
    reason: str | None = None
    # the hyperparameter laws at the point: LR* and B* with their 90% intervals, or why there is none
    lr: float | None = None
    lr_ci90: list[float | None] | None = None
    lr_reason: str | None = None
    batch_tokens: float | None = None
    batch_ci90: list[float | None] | None = None
    batch_reason: str | None = None


class Hero(Point):
    available: bool | None = None
    reason: str | None = None
    loss_reason: str | None = None  # why there is no loss forecast (the hero is sized, the law is not)
    kind: str | None = None  # "projection" until a score checks it
    allocation: str | None = None  # how the tokens were chosen ("rule", "law", ...)
    tokens_per_param: float | None = None
    compute: float | None = None
    flops: float | None = None  # the shape's exact FLOPs (FLOPs per token x tokens)
    tied: bool | None = None
    aspect_ratio: float | None = None
    seq_len: int | None = None
    shape: dict[str, Any] | None = None  # ModelShape.public_dict()
    beyond_reach: bool | None = None
    beyond_tested: bool | None = None
    distance: Distance | None = None
    track_record: TrackRecord | None = None
    reach: dict[str, Reach] | None = None
    calibration: Calibration | None = None
    extrapolation: dict[str, float] | None = None
    ladder_flops: float | None = None
    ladder_pct_of_hero: float | None = None

    _check2 = field_validator(
        "tokens_per_param", "compute", "flops", "aspect_ratio", "ladder_flops", "ladder_pct_of_hero"
    )(_finite)


class FormRollout(_Open):
    """A law form's score in the rollout: its (distance-weighted) RMS error in percent."""

    rms_pct: float | None = None


class FormScore(FormRollout):
    """A law form's record in the loss rollout: ``n`` forecasts judged, their mean absolute error and interval
    coverage, and the farthest distance in parameters it was tested at."""

    n: int | None = None
    mae_pct: float | None = None
    coverage: float | None = None
    max_params_x: float | None = None


class RolloutForecast(_Open):
    """One rollout forecast: a law fitted on the smallest ``prefix`` sizes, at a larger run: the observed loss,
    the forecast with its 90% interval and error in percent, and how far it reached."""

    prefix: int | None = None
    run_id: Any = None
    params: float | None = None
    tokens: float | None = None
    actual: float | None = None
    forecast: float | None = None
    interval: list[float | None] | None = None
    err_pct: float | None = None
    inside: bool | None = None
    params_x: float | None = None
    tokens_x: float | None = None
    compute_x: float | None = None


class FormForecast(RolloutForecast):
    """A rollout forecast of one law ``form``."""

    form: str | None = None


class LossRollout(_Open):
    """The loss law's rollout: every form's forecasts (``rows``), the weighted forecasts (``mixture``), and each
    form's record (``scores``)."""

    rows: list[FormForecast] = Field(default_factory=list)
    mixture: list[RolloutForecast] = Field(default_factory=list)
    scores: dict[str, FormScore] = Field(default_factory=dict)


class FormResidual(_Open):
    """A run a law form was fitted to, and its residual: (observed - fitted) / fitted in percent."""

    run: Any = None
    pct: float | None = None


class LawForm(_Open):
    """One law form of the loss section: its parameters with their 90% intervals, its weight and its rollout
    score."""

    title: str | None = None
    formula: str | None = None
    params: dict[str, float | None] | None = None
    ci90: dict[str, list[float | None] | None] | None = None
    weight: float | None = None
    rollout: FormRollout | None = None
    n: int | None = None  # the runs it was fitted to
    residuals: list[FormResidual] = Field(default_factory=list)


class Lean(_Open):
    """Which side the rollout's forecasts erred to: ``n_high`` of ``n`` too high, the mean error in percent, and
    the ``direction`` they lean when a sign test finds one."""

    n: int | None = None
    n_high: int | None = None
    mean_err_pct: float | None = None
    direction: str | None = None


class LossLaw(Section):
    variant: str
    variant_choice: str
    n_runs: int | None = None
    forms: dict[str, LawForm] | None = None
    skipped: dict[str, str] | None = None  # a form not fitted: why
    weights: dict[str, float] | None = None
    selection: str | None = None
    calibration: Calibration | None = None
    reach: dict[str, Reach] | None = None
    lean: Lean | None = None
    rollout: LossRollout | None = None
    points: list[dict] | None = None
    left_out: dict | None = None
    seed_sigma: float | None = None  # the seed replicates' scatter (sd of log loss); 0 without replicates


class VariantLaw(Section):
    """A variant's own loss law (``loss_by_variant``): its forecast at the hero (``target``) and form weights."""

    primary: bool | None = None
    target: Point | None = None
    weights: dict[str, float | None] | None = None


class IsoflopExponents(_Open):
    a: float | None = None
    b: float | None = None


class ExponentsCI90(_Open):
    """The 90% intervals of the exponents ``a`` (of N*) and ``b`` (of D*); None without bootstrap refits."""

    a: list[float | None] | None = None
    b: list[float | None] | None = None


class AllocationCI90(ExponentsCI90):
    params: list[float | None] | None = None
    tokens: list[float | None] | None = None
    tokens_per_param: list[float | None] | None = None


class Allocation(_Open):
    """The allocating law's split of a compute (``compute_6nd``, 6ND) into N* and D*, with 90% intervals."""

    form: str | None = None
    compute_6nd: float | None = None
    params: float | None = None
    tokens: float | None = None
    tokens_per_param: float | None = None
    a: float | None = None
    b: float | None = None
    ci90: AllocationCI90 | None = None


class ComputeOptimal(_Open):
    """How N* and D* grow with compute (``N* ~ C^a``, ``D* ~ C^b``), from the allocating law and from IsoFLOP,
    or why the split is not identifiable; ``determined`` False when the law's interval is too wide for advice."""

    identifiable: bool | None = None
    source: str | None = None
    a: float | None = None
    b: float | None = None
    determined: bool | None = None
    reason: str | None = None
    assumption: str | None = None
    isoflop: IsoflopExponents | None = None
    ci90: ExponentsCI90 | None = None
    at_hero: Allocation | None = None  # the split at the hero's 6ND; None without a hero


class BudgetCI90(_Open):
    """A budget's optimum's 90% intervals; empty without bootstrap refits."""

    params_opt: list[float | None] | None = None
    tokens_opt: list[float | None] | None = None


class IsoflopBudget(_Open):
    """One compute budget's IsoFLOP profile: its runs and sizes, the optimum (N, D and the loss there), and
    whether the optimum lies within the sizes tried (``interior``)."""

    flops: float | None = None
    n_runs: int | None = None
    n_sizes: int | None = None
    params_opt: float | None = None
    tokens_opt: float | None = None
    loss_opt: float | None = None
    interior: bool | None = None
    ci90: BudgetCI90 | None = None


class SkippedBudget(_Open):
    """A compute budget left out of the IsoFLOP fit, and why."""

    flops: float | None = None
    n_runs: int | None = None
    n_sizes: int | None = None
    reason: str | None = None


class IsoflopLaw(_Open):
    """``N_opt = k C^a`` (or ``D_opt``) through the budgets' optima."""

    k: float | None = None
    a: float | None = None


class IsoflopShape(_Open):
    """The exponents the IsoFLOP curves share (method ``shape``)."""

    alpha: float | None = None
    beta: float | None = None


class IsoflopResidual(_Open):
    """A run of the IsoFLOP fit: its loss and the loss its budget's fitted curve gives (``predicted``)."""

    run: Any = None
    params: float | None = None
    tokens: float | None = None
    flops: float | None = None
    loss: float | None = None
    predicted: float | None = None


class Isoflop(Section):
    a: float | None = None
    n_budgets: int | None = None
    method: str | None = None  # "shape" or "parabola"
    b: float | None = None
    ci90: ExponentsCI90 | None = None
    n_opt: IsoflopLaw | None = None
    d_opt: IsoflopLaw | None = None
    budgets: list[IsoflopBudget] = Field(default_factory=list)
    n_runs: int | None = None
    n_boot: int | None = None
    shape: IsoflopShape | None = None  # None for parabolas
    skipped_budgets: list[SkippedBudget] = Field(default_factory=list)
    residuals: list[IsoflopResidual] = Field(default_factory=list)
    note: str | None = None


class HparamsAtHero(_Open):
    """The hyperparameter laws at the hero: LR* and B* with their 90% intervals and formulas."""

    lr: float | None = None
    lr_ci90: list[float | None] | None = None
    lr_law: str | None = None
    batch_tokens: float | None = None
    batch_tokens_ci90: list[float | None] | None = None
    batch_tokens_law: str | None = None
    flops: float | None = None
    params: float | None = None
    tokens: float | None = None
    lr_penalty_2x: float | None = None  # the loss cost of a 2x wrong LR
    lr_penalty_2x_ci90: list[float | None] | None = None
    lr_penalty_2x_law: str | None = None
    batch_penalty_2x: float | None = None  # the loss cost of a 2x wrong batch size
    batch_penalty_2x_ci90: list[float | None] | None = None
    batch_penalty_2x_law: str | None = None


class SweepPoint(_Open):
    """One run of an LR (x batch) sweep rung: its LR, batch size (None without a batch column) and final loss
    (None when it diverged), and whether it lies inside the fit window."""

    lr: float | None = None
    batch_tokens: float | None = None
    loss: float | None = None
    used: bool | None = None


class SweepParabola(_Open):
    """A quadratic in ln x (``poly``: b0, b1, b2) of ln loss (``poly_of``)."""

    poly: list[float | None] | None = None
    poly_of: str | None = None
    loss_min: float | None = None
    curvature: float | None = None


class SweepOptimum(SweepParabola):
    """A rung's optimum on one axis (LR or batch): ``opt`` with its 90% interval, the 2x penalty, and ``status``
    (``ok``, ``edge``, ``no_minimum``) with its ``message``."""

    name: str | None = None
    opt: float | None = None
    ci90: list[float | None] | None = None
    penalty_2x: float | None = None
    penalty_2x_ci90: list[float | None] | None = None
    status: str | None = None
    message: str | None = None


class LrCurve(SweepParabola):
    """The LR parabola of a rung at one of its batch sizes (None when the rung has one batch)."""

    batch_tokens: float | None = None
    lr_opt: float | None = None


class HparamRung(_Open):
    """One rung of the LR (x batch) sweep: its runs (``points``), the optima (``lr``, ``batch``), the LR
    parabola at each batch size (``lr_curves``), or why it has no fit (``skipped``)."""

    scale: str | None = None
    flops: float | None = None
    params: float | None = None
    tokens: float | None = None
    params_non_embedding: float | None = None
    n_runs: int | None = None
    n_diverged: int | None = None
    points: list[SweepPoint] = Field(default_factory=list)
    lr: SweepOptimum | None = None
    batch: SweepOptimum | None = None
    lr_curves: list[LrCurve] = Field(default_factory=list)
    skipped: str | None = None
    notes: list[str] = Field(default_factory=list)


class HparamLawFit(_Open):
    """The fitted power law of a per-rung optimum: its constants with their 90% intervals, on ``n`` rungs."""

    form: str | None = None
    formula: str | None = None
    params: dict[str, float | None] | None = None
    ci90: dict[str, list[float | None] | None] | None = None
    n: int | None = None


class HparamLawPoint(_Open):
    """A rung the law was fitted on: its optimum ``y`` (90% interval), weight and the law's value there."""

    scale: str | None = None
    params: float | None = None
    tokens: float | None = None
    flops: float | None = None
    params_non_embedding: float | None = None
    y: float | None = None
    y_ci90: list[float | None] | None = None
    weight: float | None = None
    fitted: float | None = None


class HparamLawHero(_Open):
    """The law at the hero: its value with the 90% interval (or why there is none) and the hero's distance."""

    params: float | None = None
    tokens: float | None = None
    flops: float | None = None
    value: float | None = None
    ci90: list[float | None] | None = None
    reason: str | None = None
    compute_x: float | None = None
    params_x: float | None = None
    tokens_x: float | None = None


class HparamCurvePoint(_Open):
    """A point of the law along the hero's tokens/param, with its 90% band."""

    params: float | None = None
    tokens: float | None = None
    flops: float | None = None
    y: float | None = None
    lo: float | None = None
    hi: float | None = None


class HparamRollout(_Open):
    """The law's backtest: fitted on the smaller rungs, ``n`` forecasts of larger rungs' optima; their RMS and
    worst error in percent, coverage, and the compute reach (covered; within 10%)."""

    n: int | None = None
    rms_pct: float | None = None
    max_abs_pct: float | None = None
    coverage: float | None = None
    reach: float | None = None
    reach_within_10pct: float | None = None


class HparamLaw(_Open):
    """A per-rung quantity (LR*, B* or a 2x penalty) as a power law (``law``), or why there is none
    (``reason``); its rungs, its value at the hero, its curve to the hero and its backtest."""

    quantity: str | None = None
    form: str | None = None
    formula: str | None = None
    law: HparamLawFit | None = None
    reason: str | None = None
    points: list[HparamLawPoint] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    hero: HparamLawHero | None = None
    hero_value: float | None = None
    hero_ci90: list[float | None] | None = None
    extrapolation: float | None = None
    curve: list[HparamCurvePoint] = Field(default_factory=list)
    rollout: HparamRollout | None = None


class Hparams(Section):
    hero: HparamsAtHero | None = None
    method: str | None = None
    has_lr_sweep: bool | None = None
    has_batch_sweep: bool | None = None
    hero_flops: float | None = None
    hero_params: float | None = None
    hero_tokens: float | None = None
    scales: list[HparamRung] = Field(default_factory=list)
    lr: HparamLaw | None = None
    lr_penalty: HparamLaw | None = None
    batch: HparamLaw | None = None
    batch_penalty: HparamLaw | None = None
    notes: list[str] = Field(default_factory=list)


class Message(_Open):
    """A part read for its one-line ``message`` (the tied-vs-untied call at the hero, its crossover); the rest of
    it passes through."""

    message: str | None = None


class TiedCall(Message):
    """The tied-vs-untied call at the hero: its message and the variant that wins there."""

    winner: str | None = None
    flops: float | None = None
    gap: float | None = None  # ln L_untied - ln L_tied at the hero (> 0: tied better)
    gap_ci90: list[float | None] | None = None
    p_winner: float | None = None
    call: str | None = None  # "certain", "likely" or "undetermined"
    compute_x: float | None = None  # the hero's compute over the largest rung's
    reach_compute_x: float | None = None  # how far the rollout showed the gap forecasts right
    compute_multiplier: float | None = None  # the untied compute to reach the tied loss, over C
    compute_multiplier_ci90: list[float | None] | None = None


class TieRung(_Open):
    """One rung of the tie ablation: each variant's best loss, the gap with its noise ``gap_se``, and the
    effective-compute multiplier; ``skipped`` says why a rung lacks a variant."""

    scale: str | None = None
    flops: float | None = None
    loss_tied: float | None = None
    loss_untied: float | None = None
    gap: float | None = None
    gap_se: float | None = None
    beyond_noise: bool | None = None
    winner: str | None = None
    compute_multiplier: float | None = None
    compute_multiplier_ci90: list[float | None] | None = None
    skipped: str | None = None


class TieNoise(_Open):
    """Where the rungs' noise comes from (seed replicates, given, or the trend's scatter)."""

    source: str | None = None


class CurveParams(_Open):
    """An L(C) law's parameters: ``E + A C^-alpha``, or the pure power law ``exp(a) C^b``."""

    E: float | None = None
    A: float | None = None
    alpha: float | None = None
    a: float | None = None
    b: float | None = None


class CurveLaw(_Open):
    """A variant's loss-vs-compute law as the ablation shows it."""

    formula: str | None = None
    params: CurveParams | None = None


class AblationFormScore(_Open):
    """A trend form's record in the ablation's rollout: ``n`` forecasts judged and their distance-weighted RMS
    error (in the effect's own log units)."""

    n: int | None = None
    rms: float | None = None


class AblationForm(_Open):
    """One trend form of an ablation's effect across scale: its weight and its rollout score (None when it made
    no rollout forecast)."""

    title: str | None = None
    formula: str | None = None
    weight: float | None = None
    rollout: AblationFormScore | None = None


class AblationReach(_Open):
    """The compute distance up to which the trend's calibrated intervals covered the effect, and the farthest
    the rollout tested."""

    compute_x: float | None = None
    tested_compute_x: float | None = None


class AblationTrend(_Open):
    """An ablation's effect across scale: the rollout-weighted forms, their calibration and reach."""

    forms: dict[str, AblationForm] | None = None
    calibration: Calibration | None = None
    reach: AblationReach | None = None


class AblationBand(_Open):
    """The trend's calibrated 90% band on a grid of computes."""

    compute: list[float | None] = Field(default_factory=list)
    point: list[float | None] = Field(default_factory=list)
    lo: list[float | None] = Field(default_factory=list)
    hi: list[float | None] = Field(default_factory=list)


class Crossover(Message):
    """Where the tied-vs-untied winner flips: its ``status``, and the compute with its 90% interval when it
    crosses."""

    status: str | None = None
    flops: float | None = None
    ci90: list[float | None] | None = None


class TiedVsUntied(Section):
    """The tied-vs-untied ablation: the call at the hero (``hero``, the dict :func:`tied_uncertainty` and
    :func:`paired_forecast` read, :meth:`~_Open.as_written`) and where the winner flips (``crossover``)."""

    hero: TiedCall | None = None
    crossover: Crossover | None = None
    method: str | None = None
    scales: list[TieRung] = Field(default_factory=list)
    noise: TieNoise | None = None
    trend: AblationTrend | None = None
    band: AblationBand | None = None
    laws: dict[str, CurveLaw | None] | None = None  # each variant's L(C), None where it has none
    hero_flops: float | None = None


class AspectAtHero(_Open):
    aspect_ratio: float | None = None
    aspect_ratio_ci90: list[float | None] | None = None
    flops: float | None = None
    compute_x: float | None = None  # the hero's compute over the largest rung's
    reach_compute_x: float | None = None  # how far the rollout showed the trend forecasts right
    penalty_2x: float | None = None  # the loss cost of a 2x wrong aspect ratio
    penalty_2x_ci90: list[float | None] | None = None


class AspectPoint(_Open):
    """One shape of a depth-vs-width rung: its aspect ratio, its loss moved to the rung's compute, and whether
    the rung's quadratic was fitted on it."""

    aspect_ratio: float | None = None
    loss_compared: float | None = None
    used: bool | None = None


class AspectOptimum(_Open):
    """A rung's quadratic of ln loss in ln aspect ratio (``poly``: b0, b1, b2), its optimum ``opt`` with its 90%
    interval, the 2x penalty, and ``status`` (``ok``, ``edge``, ``no_minimum``) with its ``message``."""

    opt: float | None = None
    ci90: list[float | None] | None = None
    poly: list[float | None] | None = None
    penalty_2x: float | None = None
    penalty_2x_ci90: list[float | None] | None = None
    status: str | None = None
    message: str | None = None


class AspectRung(_Open):
    """One rung of the depth-vs-width sweep: its shapes (``points``) and the fitted quadratic (``fit``), or why
    there is none (``skipped``)."""

    scale: str | None = None
    flops: float | None = None
    n_runs: int | None = None
    points: list[AspectPoint] = Field(default_factory=list)
    fit: AspectOptimum | None = None
    skipped: str | None = None


class DepthVsWidth(Section):
    hero: AspectAtHero | None = None
    method: str | None = None
    scales: list[AspectRung] = Field(default_factory=list)
    aspect: AblationTrend | None = None  # the trend of the best aspect ratio
    aspect_band: AblationBand | None = None
    excluded: dict[str, str] | None = None  # a rung left out of the trends: why


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
