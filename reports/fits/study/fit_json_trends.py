"""fit.json's contract, part two (see :mod:`ladder.reports.fits.study.fit_json`): the hyperparameter laws (LR*
and B* at the hero, their sweeps and rungs) and the ablations (tied vs untied embeddings, depth vs width)."""

from __future__ import annotations

from pydantic import Field

from ladder.reports.fits.study.fit_json_laws import Calibration, Section, _Open


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
