"""The contract of ``fit.json``: pydantic models that :class:`~ladder.reports.fits.study.result.FitResult` is
validated against before it is written, and that every reader (the forecast commands, the report, the summary)
reads it through (:func:`read_fit_json`).

The models type what the later stages read: the top-level sections, the hero's forecast, size and distance, each
prediction (with the hyperparameter laws' LR* and B* there), the loss law's forms (with their rollout scores),
selection, calibration, lean and reach, each variant's own law, the compute-optimal split, the calls of the
hyperparameter, tied-vs-untied, depth-vs-width and IsoFLOP sections at the hero, the recommendation the hero run
is planned from, the in-context trend and forecasts of each kind of target, the excluded runs, and ``meta``. The
deep internals of a section (a law form's bootstrap rows, an ablation's rollout) are data of that section and
pass through as they are (``extra="allow"``). A key renamed on the writer's side fails the write (and the golden
test of the schema); an older file, or a hand-damaged one, gets one line: refit with ``ladder fit``. A reader
that copies a part of the file into a record of its own (a freeze, the tied-vs-untied call the summary hands to
:func:`~ladder.reports.fits.recommend.tied_uncertainty`) takes it :meth:`~_Open.as_written` (:func:`written`):
its keys in the file's order, its numbers as the file holds them.

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


class LawForm(_Open):
    """One law form of the loss section: its parameters with their 90% intervals, its weight and its rollout
    score."""

    title: str | None = None
    formula: str | None = None
    params: dict[str, float | None] | None = None
    ci90: dict[str, list[float | None] | None] | None = None
    weight: float | None = None
    rollout: FormRollout | None = None


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


class VariantLaw(Section):
    """A variant's own loss law (``loss_by_variant``): its forecast at the hero (``target``) and form weights."""

    primary: bool | None = None
    target: Point | None = None
    weights: dict[str, float | None] | None = None


class IsoflopExponents(_Open):
    a: float | None = None
    b: float | None = None


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


class Isoflop(Section):
    a: float | None = None
    n_budgets: int | None = None


class HparamsAtHero(_Open):
    """The hyperparameter laws at the hero: LR* and B* with their 90% intervals and formulas."""

    lr: float | None = None
    lr_ci90: list[float | None] | None = None
    lr_law: str | None = None
    batch_tokens: float | None = None
    batch_tokens_ci90: list[float | None] | None = None
    batch_tokens_law: str | None = None


class Hparams(Section):
    hero: HparamsAtHero | None = None


class Message(_Open):
    """A part read for its one-line ``message`` (the tied-vs-untied call at the hero, its crossover); the rest of
    it passes through."""

    message: str | None = None


class TiedCall(Message):
    """The tied-vs-untied call at the hero: its message and the variant that wins there."""

    winner: str | None = None


class TiedVsUntied(Section):
    """The tied-vs-untied ablation: the call at the hero (``hero``, the dict :func:`tied_uncertainty` and
    :func:`paired_forecast` read, :meth:`~_Open.as_written`) and where the winner flips (``crossover``)."""

    hero: TiedCall | None = None
    crossover: Message | None = None


class AspectAtHero(_Open):
    aspect_ratio: float | None = None
    aspect_ratio_ci90: list[float | None] | None = None


class DepthVsWidth(Section):
    hero: AspectAtHero | None = None


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


class KindForecast(_Open):
    """One kind of target's forecast (in-context repeats, novel tokens) at a point, or why there is none."""

    available: bool
    reason: str | None = None
    loss: float | None = None
    lo: float | None = None
    hi: float | None = None
    rollout_rms_pct: float | None = None


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


class InContext(Section):
    """The loss on in-context repeats and on novel tokens, each forecast at the hero and the predictions."""

    repeat_share: float | None = None
    trend: CopyTrend | None = None
    forecasts: KindForecasts | None = None


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
    tasks: Section
    in_context: InContext
    forecast_curve: list[dict] | None = None
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
