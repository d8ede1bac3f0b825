"""Power laws of the per-rung optima (step 5 of :mod:`ladder.reports.fits.hparams`): ``OptimumLaw`` and
``fit_optimum_law``, on the engine's :class:`Linear` form in log-log space.

Forms (``FORMS``): the LR optimum depends on both N and D, ``ln lr* = c + a ln N + b ln D``; the batch
optimum mostly on D, ``ln B* = c + b ln D`` (Step Law, Li et al. 2025: eta = 1.79 N^-0.713 D^0.307,
B = 0.58 D^0.571; DeepSeek LLM 2024 finds both grow with compute); a penalty (the loss cost of a factor 2
off) is a law in compute. When the rungs cannot separate N from D (every rung at one tokens/param, or one of
them constant: the part of ln D not explained by ln N spans less than a factor 2), an (N, D) or D law falls
back to a law in compute, ``ln y = c + a ln C``, and says so; a 3-parameter law also needs 4 rungs.

Points are weighted by the precision of each optimum (``1 / sd^2`` of ln opt, from its 90% interval) when
every optimum has a bounded interval. Intervals: a parametric bootstrap that redraws every optimum from its
own error, scaled up by the law's weighted scatter when that exceeds 1 (the law misses the optima by more than
their errors; ``n - p`` degrees of freedom then), each replicate refitted by the engine's minimizer
(:mod:`.draws`); unweighted, the engine's own bootstrap. Widened for few degrees of freedom. With one usable rung there is no
law: ``single`` holds that rung's optimum, which the recommendation transfers to the hero by the study's rule.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ladder.layout import jsonable
from ladder.reports.fits.engine import LawFit, Linear, fit
from ladder.reports.fits.hparams.draws import (
    Noise,
    draw_quantiles,
    finite_interval,
    log_sd,
    replicates,
    spread,
)

N_BOOT = 200
SEPARATE = math.log(2.0)  # the span of ln D beyond ln N that separates the two


@dataclass(frozen=True)
class LawForm:
    key: str
    columns: tuple[str, ...]  # the point keys the law reads: params, tokens, flops
    exponents: tuple[str, ...]  # the names of their exponents
    symbols: tuple[str, ...]


FORMS = {
    "n_d": LawForm("n_d", ("params", "tokens"), ("a", "b"), ("N", "D")),
    "d": LawForm("d", ("tokens",), ("b",), ("D",)),
    "compute": LawForm("compute", ("flops",), ("a",), ("C",)),
}
SYMBOL = {"lr": "lr*", "batch_tokens": "B*", "lr_penalty_2x": "cost(2x lr)", "batch_penalty_2x": "cost(2x B)"}


def _log_design(raw: np.ndarray) -> np.ndarray:
    return np.concatenate([np.ones((len(raw), 1)), np.log(raw)], axis=1)


def engine_form(lf: LawForm, quantity: str) -> Linear:
    return Linear(f"{quantity} power law ({lf.key})", ("ln_k",) + lf.exponents, _log_design)


def formula(lf: LawForm, quantity: str) -> str:
    return f"{SYMBOL.get(quantity, quantity)} = k " + " ".join(f"{s}^{e}" for s, e in zip(lf.symbols, lf.exponents))


@dataclass(frozen=True)
class OptimumLaw:
    """A per-rung quantity (an optimum or a penalty) as a power law, with 90% intervals.

    ``law`` is None when it could not be fitted, and ``reason`` says why; ``single`` is the one usable rung's
    point when a sweep covers one size only. ``points``: the rungs used (scale, params, tokens, flops, y,
    y_ci90, weight, fitted); ``excluded``: rung -> why it was left out; ``notes``: e.g. why the form fell back
    to compute. ``hero``: the law at the hero (value, ci90, its distance from the ladder); ``curve``: the law
    and its band along the hero's tokens/param, for the figure."""

    quantity: str
    form: str | None
    law: LawFit | None
    reason: str | None
    points: tuple[dict, ...] = ()
    excluded: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    params: dict[str, float] = field(default_factory=dict)
    ci90: dict[str, tuple[float | None, float | None] | None] = field(default_factory=dict)
    noise_source: str | None = None
    weighted: bool = False
    hero: dict | None = None
    curve: tuple[dict, ...] = ()
    single: dict | None = None
    rollout: dict | None = None  # backtest: fitted on the smaller rungs, forecasting the larger (.optimum_rollout)
    boot: np.ndarray | None = field(default=None, repr=False)  # internal replicates behind the intervals
    dof: float = math.inf  # behind the widening of the replicates' spread

    @property
    def n_points(self) -> int:
        return len(self.points)

    @property
    def formula(self) -> str | None:
        return None if self.form is None else formula(FORMS[self.form], self.quantity)

    @property
    def hero_value(self) -> float | None:
        return None if self.hero is None else self.hero.get("value")

    @property
    def hero_ci90(self) -> tuple[float | None, float | None] | None:
        return None if self.hero is None else self.hero.get("ci90")

    @property
    def extrapolation(self) -> float | None:
        return None if self.hero is None else self.hero.get("compute_x")

    def at(
        self, params: float | None, tokens: float | None, flops: float | None
    ) -> tuple[float | None, tuple[float | None, float | None] | None, str | None]:
        """(value, 90% interval, reason when None) of the law at one (N, D, C)."""
        if self.law is None:
            return None, None, self.reason
        lf = FORMS[self.form]
        given = {"params": params, "tokens": tokens, "flops": flops}
        missing = [c for c in lf.columns if not (given[c] and given[c] > 0)]
        if missing:
            return None, None, f"the {self.quantity} law needs {', '.join(missing)}"
        raw = np.array([[given[c] for c in lf.columns]], dtype=float)
        point = float(self.law.predict(raw)[0])
        if self.boot is None:
            return math.exp(point), None, None
        x = self.law.form.prepare(raw, self.law.center)[0]
        d = spread(np.array([point]), self.law.form.predict_many(self.boot, x), self.dof)[:, 0]
        lo, hi = draw_quantiles(d)
        return math.exp(point), (None if lo is None else math.exp(lo), None if hi is None else math.exp(hi)), None

    def to_dict(self) -> dict:
        law = None
        if self.law is not None:
            law = {
                "form": self.form,
                "formula": self.formula,
                "params": self.params,
                "ci90": self.ci90,
                "n": self.law.n,
                "dof": self.law.n - self.law.form.n_params,
                "sigma": self.law.sigma,
                "weighted": self.weighted,
                "noise_source": self.noise_source,
                "huber_delta": self.law.delta,
                "n_boot": 0 if self.boot is None else len(self.boot),
            }
        return jsonable(
            {
                "quantity": self.quantity,
                "form": self.form,
                "formula": self.formula,
                "law": law,
                "reason": self.reason,
                "points": list(self.points),
                "excluded": dict(self.excluded),
                "notes": list(self.notes),
                "hero": self.hero,
                "hero_value": self.hero_value,
                "hero_ci90": self.hero_ci90,
                "extrapolation": self.extrapolation,
                "curve": list(self.curve),
                "single": self.single,
                "rollout": self.rollout,
            }
        )


def separable(params: np.ndarray, tokens: np.ndarray) -> bool:
    """Whether the rungs separate N from D: ln D beyond what ln N explains spans at least a factor 2."""
    ln_n, ln_d = np.log(params), np.log(tokens)
    if len(ln_n) < 3 or np.ptp(ln_n) < SEPARATE or np.ptp(ln_d) < SEPARATE:
        return False
    design = np.stack([np.ones_like(ln_n), ln_n], axis=1)
    resid = ln_d - design @ np.linalg.lstsq(design, ln_d, rcond=None)[0]
    return bool(np.ptp(resid) >= SEPARATE)


def choose(prefer: str, pts: Sequence[dict]) -> tuple[str, str | None]:
    """The form to fit, and why it is not the preferred one."""
    if prefer == "compute":
        return "compute", None
    lf = FORMS[prefer]
    need = len(lf.exponents) + 2  # a residual degree of freedom beyond the compute law's
    if len(pts) < need:
        return "compute", (
            f"{len(pts)} rungs are too few for a law in {' and '.join(lf.symbols)} (needs {need}): "
            "a law in compute C instead"
        )
    n = np.array([p["params"] for p in pts], dtype=float)
    d = np.array([p["tokens"] for p in pts], dtype=float)
    if separable(n, d):
        return prefer, None
    ratio = d / n
    if np.ptp(np.log(n)) < SEPARATE:
        why = "N varies less than 2x over the rungs"
    elif np.ptp(np.log(d)) < SEPARATE:
        why = "D varies less than 2x over the rungs"
    else:
        why = f"the rungs lie at about one tokens/param, {ratio.min():.3g}..{ratio.max():.3g}"
    return "compute", (
        f"the rungs cannot separate N from D ({why}): a law in compute C instead of one in "
        f"{' and '.join(lf.symbols)}, valid along the ladder's own path in (N, D)"
    )


def _empty(quantity: str, reason: str, pts: Sequence[dict], excluded: dict, single: dict | None) -> OptimumLaw:
    return OptimumLaw(quantity, None, None, reason, tuple(jsonable(p) for p in pts), excluded, single=single)


def fit_optimum_law(
    points: Sequence[dict],
    *,
    quantity: str,
    prefer: str,
    hero: dict | None = None,
    excluded: dict[str, str] | None = None,
    no_data_reason: str | None = None,
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> OptimumLaw:
    """The power law of ``y`` over ``points`` ({scale, params, tokens, flops, y, y_ci90}); ``prefer``: the
    form when the rungs identify it (``n_d``, ``d`` or ``compute``). ``hero``: {params, tokens, flops}.
    Needs 2 rungs; otherwise ``law`` is None with a reason (``single`` set with exactly one)."""
    excluded = dict(excluded or {})
    good = [
        p
        for p in points
        if p.get("y") is not None
        and p["y"] > 0
        and all(p.get(c) is not None and p[c] > 0 for c in ("params", "tokens", "flops"))
    ]
    if len(good) < 2:
        single = dict(good[0]) if len(good) == 1 else None
        if no_data_reason:
            why = no_data_reason
        elif single is not None:
            why = (
                f"the {quantity} sweep has a usable optimum at one size only ({single['scale']}), and a law "
                "across scale needs at least 2 rungs: the optimum transfers to other sizes by the recipe's rule"
            )
        else:
            why = f"{quantity} law needs at least 2 rungs with a usable {quantity} value, got 0"
        if excluded and not no_data_reason:
            why += "; left out: " + "; ".join(
                v if str(v).startswith(f"{k}:") else f"{k}: {v}" for k, v in excluded.items()
            )
        return _empty(quantity, why, good, excluded, single)
    key, fallback = choose(prefer, good)
    if len({tuple(np.round(np.log([p[c] for c in FORMS[key].columns]), 9)) for p in good}) < 2:
        return _empty(quantity, f"{quantity} law needs at least 2 rungs of different size, got 1", good, excluded, None)
    res = fit_form(good, key, quantity, n_boot=n_boot, seed=seed)
    res = replace(res, excluded=excluded, notes=((fallback,) if fallback else ()) + res.notes)
    return _with_hero(res, good, hero)


def fit_form(good: Sequence[dict], key: str, quantity: str, *, n_boot: int = N_BOOT, seed: int = 0) -> OptimumLaw:
    """One form fitted to the points (weighted by precision when every optimum has a bounded interval), with
    the replicates behind its intervals; no hero yet."""
    lf = FORMS[key]
    raw = np.array([[p[c] for c in lf.columns] for p in good], dtype=float)
    y = np.log([p["y"] for p in good])
    sds = [log_sd(p.get("y_ci90")) for p in good]
    weighted = all(s is not None and s > 1e-9 for s in sds)
    w = 1.0 / np.square(np.array(sds, dtype=float)) if weighted else None
    notes = []
    if not weighted:
        lacking = [p["scale"] for p, s in zip(good, sds) if s is None or s <= 1e-9]
        notes.append(f"unweighted: no bounded interval for the optimum of {', '.join(map(str, lacking))}")
    form = engine_form(lf, quantity)
    # weighted: the replicates redraw each optimum from its own error (scaled up by the weighted scatter when
    # the law misses the optima by more than their errors), not from one pooled sigma, so no engine bootstrap
    law = fit(form, raw, y, weights=w, n_boot=0 if weighted else n_boot, seed=seed, labels=[p["scale"] for p in good])
    dof_res = law.n - form.n_params
    noise: Noise | None = None
    if weighted:
        scatter = float(np.sqrt((law.weights * law.residuals**2).sum() / dof_res)) if dof_res > 0 else 0.0
        if scatter > 1.0:
            noise = Noise(scatter * np.array(sds, dtype=float), float(dof_res), "residuals")
        else:
            noise = Noise(np.array(sds, dtype=float), math.inf, "optima")
    elif dof_res > 0:
        noise = Noise(np.zeros(law.n), float(dof_res), "own")
    else:
        notes.append(f"the {quantity} law passes exactly through its {law.n} points: no interval")
    boot = None if noise is None or n_boot <= 0 else replicates(law, noise, n_boot=n_boot, seed=seed)
    dof = math.inf if noise is None else noise.dof
    params, ci90 = _public(law, boot, dof)
    fitted = np.exp(law.fitted)
    pts = tuple(
        jsonable({**p, "weight": None if w is None else float(wi), "fitted": float(f)})
        for p, wi, f in zip(good, w if w is not None else [None] * len(good), fitted)
    )
    return OptimumLaw(
        quantity,
        key,
        law,
        None,
        pts,
        {},
        tuple(notes),
        params,
        ci90,
        None if noise is None else noise.source,
        weighted,
        boot=boot,
        dof=dof,
    )


def _public(law: LawFit, boot: np.ndarray | None, dof: float) -> tuple[dict, dict]:
    """``k`` and the exponents, and their 90% intervals from the widened replicates."""
    pub = law.params
    params = {"k": math.exp(pub["ln_k"]), **{k: v for k, v in pub.items() if k != "ln_k"}}
    ci90: dict = {k: None for k in params}
    if boot is not None:
        reps = law.form.public(boot, law.center)
        for name, values in reps.items():
            point = pub[name]
            d = spread(np.array([point]), np.asarray(values, dtype=float)[:, None], dof)[:, 0]
            lo, hi = draw_quantiles(d)
            if name == "ln_k":
                ci90["k"] = finite_interval(None if lo is None else math.exp(lo), None if hi is None else math.exp(hi))
            else:
                ci90[name] = (lo, hi)
    return params, ci90


def _with_hero(res: OptimumLaw, good: Sequence[dict], hero: dict | None) -> OptimumLaw:
    """The law at the hero and along the hero's tokens/param (the figure's curve)."""
    n = np.array([p["params"] for p in good], dtype=float)
    d = np.array([p["tokens"] for p in good], dtype=float)
    c = np.array([p["flops"] for p in good], dtype=float)
    h = {k: (hero or {}).get(k) for k in ("params", "tokens", "flops")}
    out = None
    if any(v for v in h.values()):
        value, ci, why = res.at(h["params"], h["tokens"], h["flops"])
        out = {
            **h,
            "value": value,
            "ci90": ci,
            "reason": why,
            "compute_x": h["flops"] / c.max() if h["flops"] else None,
            "params_x": h["params"] / n.max() if h["params"] else None,
            "tokens_x": h["tokens"] / d.max() if h["tokens"] else None,
        }
    # the path: the hero's tokens/param and FLOPs per 6ND, else the largest rung's
    ratio = h["tokens"] / h["params"] if h["params"] and h["tokens"] else float(d[-1] / n[-1])
    per = h["flops"] / (6 * h["params"] * h["tokens"]) if all(h.values()) else float(c[-1] / (6 * n[-1] * d[-1]))
    top = (
        h["params"] if h["params"] and h["tokens"] else (h["flops"] / (6 * per * ratio)) ** 0.5 if h["flops"] else None
    )
    curve = []
    for ni in np.geomspace(n.min() / 1.3, max(top or 0.0, n.max() * 1.05), 40):
        di = ratio * ni
        ci_ = 6 * per * ni * di
        value, band, _ = res.at(ni, di, ci_)
        if value is not None:
            curve.append(
                {
                    "params": float(ni),
                    "tokens": float(di),
                    "flops": float(ci_),
                    "y": value,
                    "lo": None if band is None else band[0],
                    "hi": None if band is None else band[1],
                }
            )
    return replace(res, hero=jsonable(out) if out else None, curve=tuple(jsonable(curve)))
