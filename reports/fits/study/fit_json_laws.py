"""fit.json's contract, part one (:mod:`ladder.reports.fits.study.fit_json` holds the whole and reads the file):
the base types every part builds on, the hero's forecast and the predictions, the loss law with its forms,
rollout, calibration and reach, each variant's law, the compute-optimal split and the IsoFLOP section."""

from __future__ import annotations

import copy
import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator


def _finite(v):
    if v is not None and (isinstance(v, bool) or not math.isfinite(v)):
        raise ValueError(f"{v!r} is not a finite number")
    return v


def _positive(v):
    """A size, a FLOP count or a loss: a finite number above zero (a hand-edited -5 or 0 is a damaged file)."""
    _finite(v)
    if v is not None and v <= 0:
        raise ValueError(f"{v!r} is not a positive number")
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
    n_judged: int | None = None  # the rollout forecasts the coverage is of (those at the target's tokens/param)


def coverage_words(cal: Calibration, level: str = "90%") -> str:
    """The rollout's forecasts and their coverage, said of the forecasts it was measured on (fit and the report)."""
    pct = f"{100 * cal.coverage:.0f}%"
    if cal.n_judged is None or cal.n_judged == cal.n:
        return f"{cal.n:,} weighted forecasts, {pct} inside their {level} interval"
    return (
        f"{cal.n:,} weighted forecasts; of the {cal.n_judged:,} at the target's tokens/param, {pct} inside their "
        f"{level} interval"
    )


OUTSIDE = "outside its refits' 90% interval: the data do not pin it down"  # a point its bootstrap does not hold


class RolloutError(_Open):
    """The rollout's error at the farthest distances it tested (the top third): ``n`` forecasts between
    ``min_distance_x`` and ``max_distance_x``, their median and worst absolute error in percent."""

    n: int | None = None
    min_distance_x: float | None = None
    max_distance_x: float | None = None
    median_abs_err_pct: float | None = None
    worst_abs_err_pct: float | None = None
    coverage: float | None = None


class Lean(_Open):
    """Which side the rollout's forecasts near a forecast's distance (``distance_x``) erred to: ``n_high`` of the
    ``n`` between ``min_distance_x`` and ``max_distance_x`` too high (of ``of`` in all), the mean error in percent,
    and the ``direction`` they lean when a sign test finds one."""

    n: int | None = None
    n_high: int | None = None
    mean_err_pct: float | None = None
    direction: str | None = None
    distance_x: float | None = None  # absent before the lean was judged at the forecast's distance
    min_distance_x: float | None = None
    max_distance_x: float | None = None
    of: int | None = None


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
    # the half-width (half_width_pct's measure) that the rollout's farthest forecasts' median error, taken as a factor
    # either side, sets where it binds (absent before): 5.06 of a 5.19% median
    far_floor_pct: float | None = None
    rollout_error: RolloutError | None = None
    lean: Lean | None = None  # the rollout's lean near this forecast's distance (absent before)


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
    # sizes and losses (a forecast and its interval are exp of a log: never zero or negative when written by a fit)
    _check_positive = field_validator("params", "tokens", "loss", "lo", "hi")(_positive)


class Prediction(Point):
    label: str
    variant: str | None = None
    params_x: float | None = None
    tokens_x: float | None = None
    compute_x: float | None = None
    beyond_reach: bool = False
    beyond_tested: bool = False
    distance: Distance | dict = Field(default_factory=dict)
    track_record: TrackRecord | None = None
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
    _check_positive2 = field_validator("compute", "flops")(_positive)


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

    def left_out_runs(self) -> list[str]:
        """The runs the loss laws left out, far from their compute's optimum (``left_out.runs``)."""
        return list((self.left_out or {}).get("runs") or [])

    def weighted_by_rollout(self) -> bool:
        """Whether the forms were weighted by their rollout error: some fitted form was scored on at least one
        rollout forecast (else the fit counts every identifiable form equally)."""
        if self.rollout is None:
            return False
        fitted = set(self.forms or {}) or set(self.weights or {})
        return any((sc.n or 0) > 0 for k, sc in self.rollout.scores.items() if not fitted or k in fitted)


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
