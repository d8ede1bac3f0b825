"""Each variant's own loss-vs-compute law, fitted by the engine on its rungs: what gives the local slope
``d ln L / d ln C`` of the effective-compute multiplier, and the law-difference trend form of the tie gap.

The law is the L(C) form of the loss laws (``E + A C^-alpha`` in Epoch's log-sum-exp form on ``ln L``,
``LOSS_FORMS["frontier"]`` of :mod:`ladder.reports.fits.loss.forms`) on the variant's compute-optimal rungs (no
cheaper rung reached a lower loss; on a ladder of one rung per compute, every rung); with too few rungs for its
three parameters, a pure power law (``ln L = a + b ln C``: the slope is constant).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ladder.reports.fits.ablations.forms import EffectData
from ladder.reports.fits.engine import LawFit, Linear, fit
from ladder.reports.fits.loss.forms import LOSS_FORMS, frontier_mask, groups

SLOPE_STEP = 0.01  # ln C step of the numerical slope
POWER = Linear("power_law", ("a", "b"), lambda raw: np.c_[np.ones(len(raw)), np.log(raw[:, 0])])


def _levels(c: np.ndarray) -> int:
    return len(np.unique(groups(c, 0.10))) if len(c) else 0


def law_unidentifiable(compute, loss, *, saturating: bool = True) -> str | None:
    c, y = np.asarray(compute, dtype=float), np.asarray(loss, dtype=float)
    keep = frontier_mask(c, y)
    n, k = int(keep.sum()), _levels(c[keep])
    if saturating:
        return None if (n >= 4 and k >= 3) else f"L(C) needs >= 4 compute-optimal rungs at >= 3 computes (has {n} at {k})"
    return None if k >= 2 else f"a loss-vs-compute slope needs rungs at >= 2 computes (has {k})"


def fit_law(compute, loss, *, n_boot: int, seed: int, labels=None) -> LawFit | None:
    """The variant's L(C) (saturating when identifiable, else a pure power law), or None below 2 computes."""
    c, y = np.asarray(compute, dtype=float), np.asarray(loss, dtype=float)
    keep = frontier_mask(c, y)
    lab = None if labels is None else [x for x, m in zip(labels, keep) if m]
    if law_unidentifiable(c, y) is None:
        return fit(LOSS_FORMS["frontier"].engine, c[keep][:, None], np.log(y[keep]), n_boot=n_boot, seed=seed,
                   labels=lab)
    if law_unidentifiable(c, y, saturating=False) is None:
        return fit(POWER, c[keep][:, None], np.log(y[keep]), n_boot=n_boot, seed=seed, labels=lab)
    return None


def law_dict(law: LawFit | None) -> dict | None:
    if law is None:
        return None
    p = law.params
    if "E" in p:
        text = f"L = {p['E']:.4g} + {p['A']:.4g} C^-{p['alpha']:.4g}"
    else:
        text = f"L = {math.exp(p['a']):.4g} C^{p['b']:.4g}"
    return {"formula": text, **law.to_dict()}


def law_loss(law: LawFit | None, c) -> np.ndarray | None:
    return None if law is None else np.exp(law.predict(np.asarray(c, dtype=float)[:, None]))


def slope(law: LawFit, c: float) -> tuple[float, np.ndarray | None]:
    """``d ln L / d ln C`` at ``c`` and its bootstrap draws (negative where the loss falls)."""
    raw = np.array([[c * math.exp(-SLOPE_STEP)], [c * math.exp(SLOPE_STEP)]])
    p = law.predict(raw)
    point = float((p[1] - p[0]) / (2 * SLOPE_STEP))
    if law.boot is None:
        return point, None
    b = law.predict_boot(raw)
    return point, (b[:, 1] - b[:, 0]) / (2 * SLOPE_STEP)


@dataclass
class LawDifference:
    """The gap as the difference of the two variants' own laws: ``ln L_b(C) - ln L_a(C)``."""

    a: LawFit
    b: LawFit
    formula: str = "g = ln L_b(C) - ln L_a(C), each L = E + A C^-alpha"

    @property
    def sigma(self) -> float:
        return math.hypot(self.a.sigma, self.b.sigma)

    def predict(self, c):
        c = np.asarray(c, dtype=float)[:, None]
        return self.b.predict(c) - self.a.predict(c)

    def draws(self, c, *, n_draws, seed, noise, sigma_floor):
        c = np.asarray(c, dtype=float)[:, None]
        floor = sigma_floor / math.sqrt(2)
        pa, da = self.a.draws(c, n_draws=n_draws, seed=seed, noise=noise, sigma_floor=floor)
        pb, db = self.b.draws(c, n_draws=n_draws, seed=seed + 1, noise=noise, sigma_floor=floor)
        return pb - pa, db - da

    def to_dict(self) -> dict:
        return {"formula": self.formula, "a": law_dict(self.a),
                "b": law_dict(self.b), "sigma": self.sigma, "n": self.a.n + self.b.n}


@dataclass(frozen=True)
class LawDifferenceForm:
    """The trend form that fits each variant's L(C) on the rungs (``columns`` ``loss_a``, ``loss_b``)."""

    key: str = "variant_laws"
    title: str = "difference of the variants' own L(C) laws"
    formula: str = "g = ln L_b(C) - ln L_a(C), each L = E + A C^-alpha"

    def unidentifiable(self, data: EffectData) -> str | None:
        for name in ("loss_a", "loss_b"):
            why = law_unidentifiable(data.compute, data.columns[name])
            if why:
                return why
        return None

    def fit(self, data: EffectData, *, n_boot: int, seed: int) -> LawDifference:
        kw = dict(n_boot=n_boot, seed=seed)
        la = fit(LOSS_FORMS["frontier"].engine, *_xy(data, "loss_a"), **kw)
        lb = fit(LOSS_FORMS["frontier"].engine, *_xy(data, "loss_b"), **kw)
        return LawDifference(la, lb, self.formula)


def _xy(data: EffectData, name: str):
    y = np.asarray(data.columns[name], dtype=float)
    keep = frontier_mask(data.compute, y)
    return data.compute[keep][:, None], np.log(y[keep])
