"""What a trend of an ablation's effect is fitted to and with: :class:`EffectData` (the effect per rung, a
log-space quantity, against the rung's compute) and the trend forms (:class:`TrendForm`; :class:`EngineTrend`
for a form the engine fits on (compute, effect): constant, linear in ln C, a scaled power that never
changes sign)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ladder.reports.fits.engine import LawFit, Linear, ScaledPower, fit
from ladder.reports.fits.runs import group_labels

LEVEL_TOL = 0.10  # rungs within 10% of compute are one level of the rollout


@dataclass
class EffectData:
    """An effect per rung: ``compute`` and ``y`` (log space), the rung labels, ``noise`` (the known sd of one
    point, from seed replicates; 0 when unknown) and per-rung ``columns`` a form may read (variant losses)."""

    compute: np.ndarray
    y: np.ndarray
    labels: list[str]
    noise: float = 0.0
    columns: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self):
        self.compute = np.asarray(self.compute, dtype=float)
        self.y = np.asarray(self.y, dtype=float)
        self.labels = [str(x) for x in self.labels]

    def __len__(self) -> int:
        return len(self.y)

    @property
    def levels(self) -> np.ndarray:
        return group_labels(self.compute, LEVEL_TOL) if len(self) else np.zeros(0, dtype=int)

    def subset(self, mask: np.ndarray) -> EffectData:
        mask = np.asarray(mask, dtype=bool)
        return EffectData(
            self.compute[mask],
            self.y[mask],
            [x for x, m in zip(self.labels, mask) if m],
            self.noise,
            {k: np.asarray(v)[mask] for k, v in self.columns.items()},
        )


class Fitted(Protocol):
    sigma: float

    def predict(self, c: np.ndarray) -> np.ndarray: ...

    def draws(
        self, c: np.ndarray, *, n_draws: int, seed: int, noise: bool, sigma_floor: float
    ) -> tuple[np.ndarray, np.ndarray]: ...

    def to_dict(self) -> dict: ...


class TrendForm(Protocol):
    key: str
    title: str
    formula: str

    def unidentifiable(self, data: EffectData) -> str | None: ...

    def fit(self, data: EffectData, *, n_boot: int, seed: int) -> Fitted: ...


@dataclass
class EngineFitted:
    """A form fitted by the engine on (compute, y): the LawFit and what a trend needs of it."""

    law: LawFit
    formula: str

    @property
    def sigma(self) -> float:
        return self.law.sigma

    def predict(self, c):
        return self.law.predict(np.asarray(c, dtype=float)[:, None])

    def draws(self, c, *, n_draws, seed, noise, sigma_floor):
        return self.law.draws(
            np.asarray(c, dtype=float)[:, None], n_draws=n_draws, seed=seed, noise=noise, sigma_floor=sigma_floor
        )

    def to_dict(self) -> dict:
        return {"formula": self.formula, **self.law.to_dict()}


@dataclass(frozen=True)
class EngineTrend:
    """A trend form of the effect against compute, fitted by the engine: ``y = f(C; theta)``."""

    key: str
    title: str
    formula: str
    engine: object
    n_levels: int  # distinct compute levels the form needs (its slope needs 2)

    def unidentifiable(self, data: EffectData) -> str | None:
        p = self.engine.n_params
        if len(data) < p + 1:
            return f"needs >= {p + 1} rungs for {p} parameters (has {len(data)})"
        n_levels = len(np.unique(data.levels))
        if n_levels < self.n_levels:
            return f"needs rungs at >= {self.n_levels} computes (has {n_levels})"
        return None

    def fit(self, data: EffectData, *, n_boot: int, seed: int) -> EngineFitted:
        law = fit(self.engine, data.compute[:, None], data.y, n_boot=n_boot, seed=seed, labels=data.labels)
        return EngineFitted(law, self.formula)


def _ones(raw: np.ndarray) -> np.ndarray:
    return np.ones((len(raw), 1))


def _log_linear(raw: np.ndarray) -> np.ndarray:
    return np.c_[np.ones(len(raw)), np.log(raw[:, 0])]


def constant(name: str = "constant", symbol: str = "y") -> EngineTrend:
    return EngineTrend(name, "constant", f"{symbol} = y0", Linear(name, ("y0",), _ones), 1)


def log_linear(name: str = "loglinear", symbol: str = "y", title: str = "linear in ln C") -> EngineTrend:
    return EngineTrend(name, title, f"{symbol} = a + b ln C", Linear(name, ("a", "b"), _log_linear), 2)


def scaled_power(name: str = "power", symbol: str = "y", max_rate: float = 1.0) -> EngineTrend:
    """``y = c C^-gamma``, ``|gamma| <= max_rate``: a gap of log losses shrinks or grows no faster than the
    reducible losses themselves change (their exponents in C are well below 1); unbounded, a gap near zero
    lets bootstrap refits pick a tiny c with an absurd growth that explodes far beyond the ladder."""
    return EngineTrend(
        name,
        "shrinking or growing power (never changes sign)",
        f"{symbol} = c C^-gamma",
        ScaledPower(name, ("c", "gamma"), gamma_bounds=(-max_rate, max_rate)),
        2,
    )
