"""Loss-vs-compute laws of the ablation variants, fitted by the engine: the local slope ``d ln L / d ln C`` of
the effective-compute multiplier, the law-difference trend form of the tie gap, and the ladder's law that moves
a depth-vs-width rung's shapes to one compute.

The pair law (:class:`SharedFloor`, :func:`fit_pair`): both variants' compute-optimal rungs (no cheaper rung of
the variant reached a lower loss; on a ladder of one rung per compute, every rung) fitted at once as
``L_v(C) = E + A_v C^-alpha`` with one floor and one exponent: the irreducible loss is the entropy of the data,
which tying the embeddings does not change, and with one exponent one variant is the other at a constant
compute multiplier ``(A_b / A_a)^(1/alpha)`` (Marin's and Kaplan's effective-compute view). Separate floors or
exponents, each fitted on a few rungs, made the difference of the laws diverge far beyond the ladder; a gap
that changes sign is the log-linear trend form's to find. Its gap ``ln L_b - ln L_a`` is one trend form of the
tie gap (:class:`LawDifferenceForm`). A single law (:func:`fit_law`): the L(C) form of the loss
laws (``LOSS_FORMS["frontier"]``) on one set of rungs; with too few rungs for three parameters a pure power law
(``ln L = a + b ln C``, slope constant).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ladder.reports.fits.ablations.trend_forms import EffectData
from ladder.reports.fits.engine import LawFit, Linear, fit
from ladder.reports.fits.engine.law_forms import EXP_GRID
from ladder.reports.fits.loss.loss_forms import LOSS_FORMS, frontier_mask
from ladder.reports.fits.runs import group_labels

SLOPE_STEP = 0.01  # ln C step of the numerical slope
POWER = Linear("power_law", ("a", "b"), lambda raw: np.c_[np.ones(len(raw)), np.log(raw[:, 0])])


def _levels(c: np.ndarray) -> int:
    return len(np.unique(group_labels(c, 0.10))) if len(c) else 0


def law_unidentifiable(compute, loss, *, saturating: bool = True) -> str | None:
    c, y = np.asarray(compute, dtype=float), np.asarray(loss, dtype=float)
    keep = frontier_mask(c, y)
    n, k = int(keep.sum()), _levels(c[keep])
    if saturating:
        return (
            None if (n >= 4 and k >= 3) else f"L(C) needs >= 4 compute-optimal rungs at >= 3 computes (has {n} at {k})"
        )
    return None if k >= 2 else f"a loss-vs-compute slope needs rungs at >= 2 computes (has {k})"


def fit_law(compute, loss, *, n_boot: int, seed: int) -> LawFit | None:
    """One set of rungs' L(C) (saturating when identifiable, else a pure power law), or None below 2 computes."""
    c, y = np.asarray(compute, dtype=float), np.asarray(loss, dtype=float)
    keep = frontier_mask(c, y)
    if law_unidentifiable(c, y) is None:
        return fit(LOSS_FORMS["frontier"].engine, c[keep][:, None], np.log(y[keep]), n_boot=n_boot, seed=seed)
    if law_unidentifiable(c, y, saturating=False) is None:
        return fit(POWER, c[keep][:, None], np.log(y[keep]), n_boot=n_boot, seed=seed)
    return None


def slope(law: LawFit, c: float, variant: float | None = None) -> tuple[float, np.ndarray | None]:
    """``d ln L / d ln C`` at ``c`` and its bootstrap draws (negative where the loss falls); ``variant``: the
    pair law's variant flag (0: a, 1: b)."""
    cs = [c * math.exp(-SLOPE_STEP), c * math.exp(SLOPE_STEP)]
    raw = np.array([[x] if variant is None else [x, variant] for x in cs])
    p = law.predict(raw)
    point = float((p[1] - p[0]) / (2 * SLOPE_STEP))
    if law.boot is None:
        return point, None
    b = law.predict_boot(raw)
    return point, (b[:, 1] - b[:, 0]) / (2 * SLOPE_STEP)


def law_dict(law: LawFit | None) -> dict | None:
    if law is None:
        return None
    p = law.params
    text = (
        f"L = {p['E']:.4g} + {p['A']:.4g} C^-{p['alpha']:.4g}"
        if "E" in p
        else f"L = {math.exp(p['a']):.4g} C^{p['b']:.4g}"
    )
    return {"formula": text, **law.to_dict()}


class SharedFloor:
    """``ln L = LSE(e, a_v - alpha x)``, x the centred ln C, v the variant flag (raw columns: C, flag): two L(C)
    laws with one floor and one exponent, so that one variant is the other at a constant compute multiplier
    ``(A_b / A_a)^(1/alpha)``. Parameters (internal): ``[e, a_a, a_b, alpha]``."""

    name = "shared_floor"
    param_names = ("E", "A_a", "A_b", "alpha")
    n_params = 4

    def prepare(self, raw, center=None):
        raw = np.atleast_2d(np.asarray(raw, dtype=float))
        lx = np.log(raw[:, 0])
        c = float(lx.mean()) if center is None else float(np.asarray(center)[0])
        return np.c_[lx - c, raw[:, 1] > 0.5], np.array([c])

    def _terms(self, th: np.ndarray, x: np.ndarray):
        b = x[:, 1] > 0.5
        return th[:, :1], np.where(b, th[:, 2:3], th[:, 1:2]) - th[:, 3:4] * x[None, :, 0], b

    def predict_many(self, thetas, x):
        e, t, _ = self._terms(np.atleast_2d(thetas), x)
        m = np.maximum(e, t)
        return m + np.log(np.exp(e - m) + np.exp(t - m))

    def resid_jac_many(self, thetas, x, y):
        e, t, b = self._terms(thetas, x)
        m = np.maximum(e, t)
        lse = m + np.log(np.exp(e - m) + np.exp(t - m))
        se, st = np.exp(e - lse), np.exp(t - lse)
        jac = np.stack([se, st * ~b, st * b, -st * x[None, :, 0]], axis=2)
        return lse - y, jac

    def bounds(self, y):
        return np.array([-30.0, -60.0, -60.0, 0.0]), np.array([float(np.max(y)) + 1.0, 60.0, 60.0, 5.0])

    def candidates(self, x, y):
        """Variable projection over an exponent grid: for each alpha, the least-squares ``(E, A_a, A_b)`` of
        ``(E + A_v exp(-alpha x)) / L ~ 1``, non-positive ones clipped."""
        b = x[:, 1] > 0.5
        z = np.exp(-EXP_GRID[:, None] * x[None, :, 0])  # (G, n)
        loss = np.exp(y)
        design = np.stack([np.ones_like(z), z * ~b, z * b], axis=2) / loss[None, :, None]
        gram = np.einsum("gni,gnj->gij", design, design)
        gram += 1e-10 * np.trace(gram, axis1=1, axis2=2)[:, None, None] * np.eye(3)
        coef = np.linalg.solve(gram, design.sum(axis=1)[..., None])[..., 0]
        coef = np.maximum(coef, 1e-6 * loss.min())
        return np.concatenate([np.log(coef), EXP_GRID[:, None]], axis=1)

    def public(self, thetas, center):
        th = np.atleast_2d(np.asarray(thetas, dtype=float))
        c = float(np.asarray(center)[0])
        out = {
            "E": np.exp(th[:, 0]),
            "A_a": np.exp(th[:, 1] + th[:, 3] * c),
            "A_b": np.exp(th[:, 2] + th[:, 3] * c),
            "alpha": th[:, 3],
        }
        return {k: (v[0] if np.ndim(thetas) == 1 else v) for k, v in out.items()}


SHARED_FLOOR = SharedFloor()


def pair_unidentifiable(c_a, l_a, c_b, l_b) -> str | None:
    for name, c, y in (("a", c_a, l_a), ("b", c_b, l_b)):
        c, y = np.asarray(c, dtype=float), np.asarray(y, dtype=float)
        keep = frontier_mask(c, y)
        if _levels(c[keep]) < 3:
            return f"each variant's L(C) needs compute-optimal rungs at >= 3 computes ({name} has {_levels(c[keep])})"
    return None


def fit_pair(c_a, l_a, c_b, l_b, *, n_boot: int, seed: int) -> LawFit | None:
    """The shared-floor pair law on both variants' compute-optimal rungs, or None when not identifiable."""
    if pair_unidentifiable(c_a, l_a, c_b, l_b):
        return None
    raws, ys = [], []
    for flag, c, y in ((0.0, c_a, l_a), (1.0, c_b, l_b)):
        c, y = np.asarray(c, dtype=float), np.asarray(y, dtype=float)
        keep = frontier_mask(c, y)
        raws.append(np.c_[c[keep], np.full(int(keep.sum()), flag)])
        ys.append(np.log(y[keep]))
    return fit(SHARED_FLOOR, np.concatenate(raws), np.concatenate(ys), n_boot=n_boot, seed=seed)


def pair_variant_dict(law: LawFit, flag: int) -> dict:
    """One variant's view of the pair law, in the single law's keys (E, A, alpha)."""
    p, ci = law.params, law.intervals()
    v = "ab"[flag]
    keys = {"E": "E", "A": f"A_{v}", "alpha": "alpha"}
    params = {k: p[src] for k, src in keys.items()}
    return {
        "formula": f"L = {params['E']:.4g} + {params['A']:.4g} C^-{params['alpha']:.4g} (floor and exponent shared)",
        "form": law.form.name,
        "params": params,
        "ci90": {k: (list(ci[src]) if ci[src] else None) for k, src in keys.items()},
        "n": law.n,
        "sigma": law.sigma,
    }


@dataclass
class LawDifference:
    """The gap as the difference of the pair law's two variants: ``ln L_b(C) - ln L_a(C)``."""

    law: LawFit
    formula: str

    @property
    def sigma(self) -> float:
        return math.sqrt(2.0) * self.law.sigma

    def _raw(self, c):
        c = np.asarray(c, dtype=float)
        return np.r_[np.c_[c, np.zeros(len(c))], np.c_[c, np.ones(len(c))]]

    def predict(self, c):
        p = self.law.predict(self._raw(c))
        return p[len(p) // 2 :] - p[: len(p) // 2]

    def draws(self, c, *, n_draws, seed, noise, sigma_floor):
        # one call: each draw row uses one bootstrap replicate for both variants, with independent run noise
        p, d = self.law.draws(
            self._raw(c), n_draws=n_draws, seed=seed, noise=noise, sigma_floor=sigma_floor / math.sqrt(2.0)
        )
        m = len(p) // 2
        return p[m:] - p[:m], d[:, m:] - d[:, :m]

    def to_dict(self) -> dict:
        return {"formula": self.formula, **self.law.to_dict()}


@dataclass(frozen=True)
class LawDifferenceForm:
    """The trend form fitted from the rungs' variant losses (``columns`` ``loss_a``, ``loss_b``)."""

    key: str = "variant_laws"
    title: str = "difference of the variants' L(C) laws (one floor, one exponent; never changes sign)"
    formula: str = "g = ln L_b(C) - ln L_a(C), L_v = E + A_v C^-alpha"

    def unidentifiable(self, data: EffectData) -> str | None:
        return pair_unidentifiable(data.compute, data.columns["loss_a"], data.compute, data.columns["loss_b"])

    def fit(self, data: EffectData, *, n_boot: int, seed: int) -> LawDifference:
        law = fit_pair(
            data.compute, data.columns["loss_a"], data.compute, data.columns["loss_b"], n_boot=n_boot, seed=seed
        )
        return LawDifference(law, self.formula)
