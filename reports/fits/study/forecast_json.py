"""The contract of a frozen forecast (``forecast.json``, ``forecast-2.json``, ...: ``ladder forecast freeze``):
pydantic models that every reader (``forecast show`` and ``score``, the report's forecast section) reads a freeze
through, and that say what is wrong with a damaged one (:func:`problem`).

A freeze copies the fit's hero forecast and predictions (:mod:`ladder.forecast.frozen` writes it) and grows a list
of scores (:mod:`ladder.forecast.score` appends them). The models type what the readers read: the hero and the
predictions (sizes, tokens, losses and intervals: finite positive numbers), the forecasts of each kind of target
(in-context repeats, novel tokens), the time it was frozen, the results it was fitted on, and each score (against a
final loss, its replicates and kinds of target, or a partial curve's early warning). The copied law forms,
calibration and reach are data of the freeze and pass through as they are (``extra="allow"``), as does anything a
later ladder adds. A hand edit (text for a number, a negative size, a list for an object) is named as ``field:
problem``, e.g. ``hero.loss: 'abc' is not a finite positive number``.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError


def _shown(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _positive(v: Any) -> Any:
    if v is not None and not (_is_number(v) and v > 0):
        raise ValueError(f"{_shown(v)} is not a finite positive number")
    return v


def _number(v: Any) -> Any:
    if v is not None and not _is_number(v):
        raise ValueError(f"{_shown(v)} is not a finite number")
    return v


def _time(v: Any) -> Any:
    if v is not None and not isinstance(v, str):
        raise ValueError(f"{_shown(v)} is not a time")
    return v


# Text is never taken for a number here (pydantic would read "3.5" as 3.5): a freeze holds what freeze wrote.
PositiveNumber = Annotated[float | None, BeforeValidator(_positive)]
Number = Annotated[float | None, BeforeValidator(_number)]
Time = Annotated[str | None, BeforeValidator(_time)]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class Interval(_Open):
    """A forecast with its calibrated interval."""

    loss: PositiveNumber = None
    lo: PositiveNumber = None
    hi: PositiveNumber = None
    level: Number = None
    half_width_pct: Number = None


class FrozenPoint(Interval):
    """A prediction (``--predict`` of the fit or of the freeze) as frozen."""

    label: str | None = None
    params: PositiveNumber = None
    tokens: PositiveNumber = None
    params_x: Number = None
    beyond_reach: bool | None = None
    beyond_tested: bool | None = None  # absent from freezes before it was recorded


class FrozenHero(FrozenPoint):
    """The hero's forecast as frozen: it must say at what size and tokens, and what loss."""

    params: Annotated[float, BeforeValidator(_positive)]
    tokens: Annotated[float, BeforeValidator(_positive)]
    loss: Annotated[float, BeforeValidator(_positive)]
    flops: PositiveNumber = None
    tied: bool | None = None
    kind: str | None = None


class KindPoint(FrozenPoint):
    """A point's forecast on each kind of target."""

    novel: Interval | None = None
    repeats: Interval | None = None


class InContext(_Open):
    repeat_share: Number = None
    points: list[KindPoint]


class Comparison(_Open):
    """A frozen point against an actual (or a forecast final) loss (:func:`ladder.forecast.score.compare`)."""

    forecast: Number = None
    lo: Number = None
    hi: Number = None
    level: Number = None
    actual: Number = None
    error_pct: Number = None
    inside: bool | None = None
    z: Number = None


class Source(_Open):
    kind: str | None = None
    run_id: str | None = None
    file: str | None = None


class KindScore(_Open):
    """The hero's loss on each kind of target against the freeze's forecast of it."""

    actual: dict[str, Number] | None = None
    point: str | None = None
    novel: Comparison | None = None
    repeats: Comparison | None = None


class Replicate(_Open):
    run_id: str | None = None
    seed: int | None = None
    final: Number = None
    split: dict[str, Number] | None = None


class Replicates(_Open):
    """The hero's finished seed replicates: their losses, geometric mean and spread."""

    runs: list[Replicate] = Field(default_factory=list)
    n: Number = None
    mean: Number = None
    sd_log_pct: Number = None
    sd_log_pct_by_kind: dict[str, Number] | None = None
    vs_mean: Comparison | None = None


class Partial(_Open):
    """The early warning of a hero still training: the forecast of its final loss from its curve so far."""

    available: bool = False
    reason: str | None = None
    fraction: Number = None
    final_forecast: Number = None
    lo: Number = None
    hi: Number = None
    references: list[Any] = Field(default_factory=list)
    vs_frozen: Comparison | None = None
    warning: str | None = None


class Score(Comparison):
    """One score of the freeze: ``final`` against the hero's final loss (the comparison's fields), else a partial
    curve's early warning (``partial``)."""

    final: bool = False
    point: str = "hero"
    scored_at: Time = None
    source: Source = Field(default_factory=Source)
    offset: dict[str, Number] = Field(default_factory=dict)
    in_context: KindScore | None = None
    replicates: Replicates | None = None
    partial: Partial | None = None
    frozen_before_training: bool | None = None
    data_changed: bool | None = None


class FrozenForecast(_Open):
    """One freeze (see the module doc)."""

    number: int | None = None
    frozen_at: Time = None
    study: str | None = None
    note: str | None = None
    hero: FrozenHero
    predictions: list[FrozenPoint] = Field(default_factory=list)
    in_context: InContext | None = None
    results_sha256: str | None = None
    scores: list[Score] = Field(default_factory=list)

    @property
    def final_scores(self) -> list[Score]:
        return [s for s in self.scores if s.final]

    def point(self, label: str) -> FrozenPoint | None:
        """The frozen hero (``hero``) or the prediction of that label."""
        if label == "hero":
            return self.hero
        return next((p for p in self.predictions if p.label == label), None)


def _where(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "the file"


def _problem(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where, kind = _where(tuple(err["loc"])), err["type"]
    if kind == "missing":
        return f"{where}: missing"
    if kind == "value_error":
        return f"{where}: {err['msg'].removeprefix('Value error, ')}"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"{where}: {_shown(err['input'])} is not an object"
    if kind == "list_type":
        return f"{where}: {_shown(err['input'])} is not a list"
    if kind == "string_type":
        return f"{where}: {_shown(err['input'])} is not a text"
    if kind in ("bool_type", "bool_parsing"):
        return f"{where}: {_shown(err['input'])} is not true or false"
    if kind.startswith("int_"):
        return f"{where}: {_shown(err['input'])} is not a whole number"
    return f"{where}: {_shown(err['input'])} is not what freeze writes ({err['msg']})"


def parse(record: Any) -> tuple[FrozenForecast | None, str | None]:
    """A freeze's content read through the contract: (the freeze, None), or (None, ``field: problem``) when it is
    not what ``freeze`` writes (a hand edit, a torn copy)."""
    if not isinstance(record, dict):
        return None, f"not a JSON object but a JSON {type(record).__name__}"
    try:
        return FrozenForecast.model_validate(record), None
    except ValidationError as exc:
        return None, _problem(exc)


def problem(record: Any) -> str | None:
    """Why ``record`` is not a sound freeze, as ``field: problem``; None when it is."""
    return parse(record)[1]
