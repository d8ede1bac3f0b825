"""Step 1 of the task forecasts: the task loss against scale, fitted by the one engine with the loss laws' own
forms and machinery (:func:`ladder.reports.fits.loss.forecast_loss`): every identifiable form (Chinchilla
``L(N, D)``, the over-training law, ``L(C)`` at the hero's tokens/param, ``L(C)`` on the frontier) is fitted,
backtested by rollout, weighted by its rollout error, and its interval calibrated on the rollout. A task with
too few model sizes for that gets the engine's ``L(C) = E + A C^-alpha`` on all its runs directly.

:class:`Step1` holds the fitted forms and their weights and draws the task loss anywhere (the mixture of the
weighted forms, as the loss forecast draws the hero's loss); :class:`LossLaw` is its summary in fit.json.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ladder.layout import jsonable
from ladder.reports.fits.engine import LawFit, fit
from ladder.reports.fits.loss import LOSS_FORMS, Forecast, forecast_loss
from ladder.reports.fits.runs import Runs
from ladder.reports.fits.tasks.intervals import quantiles

CURVE_POINTS = 60
CURVE_DRAWS = 1000
MIN_BOOT = 50  # step 1 always bootstraps: its forms are weighted and calibrated on their intervals
ND_FORMS = ("chinchilla", "overtrain")
COMPUTE_FORMS = ("ratio", "frontier")
DIRECT = "compute"  # the key of L(C) fitted on all runs when the forms cannot be backtested
FORMULAS = {"nd": "E + A / N^alpha + B / D^beta", "compute": "E + (C0 / C)^gamma, C = 6ND"}


def family(key: str) -> str:
    """``"nd"`` for the laws in (N, D), ``"compute"`` for the laws in C = 6ND."""
    return "nd" if key in ND_FORMS else "compute"


def _raw(key: str, params, tokens) -> np.ndarray:
    return LOSS_FORMS["ratio" if key == DIRECT else key].raw(params, tokens)


def _as_family(key: str, pub: dict) -> dict:
    """A form's public parameters in its family's formula (:data:`FORMULAS`); arrays pass through."""
    if key in ND_FORMS:
        alpha = pub.get("alpha", pub.get("eta"))
        beta = pub.get("beta", pub.get("eta"))
        return {"E": pub["E"], "A": pub["A"], "alpha": alpha, "B": pub["B"], "beta": beta}
    alpha = np.asarray(pub["alpha"], dtype=float)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        c0 = np.exp(np.minimum(np.log(np.asarray(pub["A"], dtype=float)) / alpha, 709.0))
    return {"E": pub["E"], "C0": c0 if np.ndim(c0) else float(c0), "gamma": pub["alpha"]}


@dataclass
class Step1:
    """The fitted task-loss forms, their weights (from the rollout, or equal) and the interval factor."""

    laws: dict[str, LawFit]
    weights: dict[str, float]
    factor: float
    target_ratio: float
    forecast: Forecast | None  # None: L(C) fitted directly (too few sizes for the rollout)
    reason: str

    @property
    def primary(self) -> str:
        w = {k: v for k, v in self.weights.items() if k in self.laws}
        return max(w, key=w.get) if w else next(iter(self.laws))

    def applies(self, key: str, params: float, tokens: float) -> bool:
        fitted = self.forecast.data if self.forecast is not None else None
        return key == DIRECT or LOSS_FORMS[key].applies(params, tokens, fitted, self.target_ratio)

    def weights_at(self, params: float, tokens: float) -> dict[str, float]:
        """The weights of the forms that apply at (params, tokens) (the ratio form only at its ratio),
        renormalized; equal weights of the applicable forms when none of the weighted ones applies."""
        use = {k: w for k, w in self.weights.items() if w > 0 and k in self.laws and self.applies(k, params, tokens)}
        if not use:
            use = {k: 1.0 for k in self.laws if self.applies(k, params, tokens)}
        tot = sum(use.values())
        return {k: v / tot for k, v in use.items()}

    def by_form(self, params: float, tokens: float, *, seed: int = 0) -> dict[str, dict]:
        """Each form's own forecast (90% prediction interval) of a new run at (params, tokens), with its weight."""
        out = {}
        for k, law in self.laws.items():
            if not self.applies(k, params, tokens):
                out[k] = {"applies": False, "weight": self.weights.get(k, 0.0)}
                continue
            p, d = law.draws(_raw(k, params, tokens), n_draws=2000, seed=seed)
            lo, hi = np.quantile(d[:, 0], [0.05, 0.95])
            out[k] = {
                "applies": True,
                "loss": float(np.exp(p[0])),
                "lo": float(np.exp(lo)),
                "hi": float(np.exp(hi)),
                "weight": self.weights.get(k, 0.0),
            }
        return out

    def point(self, params, tokens) -> np.ndarray:
        """The mixture's log task loss at each (params, tokens): the weighted mean of the forms' log forecasts."""
        params, tokens = np.atleast_1d(params).astype(float), np.atleast_1d(tokens).astype(float)
        out = np.empty(len(params))
        for i, (p, t) in enumerate(zip(params, tokens)):
            w = self.weights_at(p, t)
            out[i] = sum(wk * float(self.laws[k].predict(_raw(k, p, t))[0]) for k, wk in w.items())
        return out

    def draws(self, params, tokens, *, n_draws: int, seed: int = 0, n_noise: int = 0, sigma_floor: float = 0.0):
        """``(point (m,), curve (n_draws, m), noise (n_draws, n_noise, m) or None)`` in log task loss at points
        of one tokens/param ratio. ``curve``: the law's uncertainty (each form's Student-t-widened bootstrap
        spread, the forms pooled by weight); ``noise``: a new run's scatter about its draw (the owning form's
        residual scatter, at least ``sigma_floor``, t-distributed), ``n_noise`` values per draw. Both are
        widened about the point by the rollout's calibration factor."""
        params, tokens = np.atleast_1d(params).astype(float), np.atleast_1d(tokens).astype(float)
        rng = np.random.default_rng(seed)
        w = self.weights_at(params[0], tokens[0])
        names = list(w)
        counts = rng.multinomial(n_draws, [w[k] for k in names])
        point = np.zeros(len(params))
        curves, noises = [], []
        for j, (k, c) in enumerate(zip(names, counts)):
            law = self.laws[k]
            raw = _raw(k, params, tokens)
            pk, dk = law.draws(raw, n_draws=max(int(c), 1), seed=seed + 7919 * (j + 1), noise=False)
            point += w[k] * pk
            if c == 0:
                continue
            curves.append(dk[:c])
            if n_noise:
                sigma = max(law.sigma, sigma_floor)
                noises.append(sigma * rng.standard_t(law.dof, size=(c, n_noise, len(params))))
        order = rng.permutation(n_draws)
        curve = np.concatenate(curves)[order]
        curve = point + self.factor * (curve - point)
        noise = self.factor * np.concatenate(noises)[order] if n_noise else None
        return point, curve, noise


def fit_step1(
    params,
    tokens,
    loss,
    run_ids,
    *,
    forms,
    target_params: float,
    target_tokens: float,
    n_boot: int,
    seed: int,
    reason: str,
) -> Step1:
    """Fit the task loss ``loss`` with the loss laws' ``forms`` (rollout, weights, calibration); when none is
    identifiable (too few sizes or runs), ``L(C) = E + A C^-alpha`` on all runs with the engine directly.
    Raises ValueError when even that cannot be fitted."""
    data = Runs(params, tokens, loss, [str(r) for r in run_ids])
    n_boot = max(int(n_boot), MIN_BOOT)
    try:
        fc = forecast_loss(data, target_params, target_tokens, n_boot=n_boot, seed=seed, forms=tuple(forms))
    except ValueError as exc:
        if set(forms) <= set(ND_FORMS):
            raise
        engine = LOSS_FORMS["ratio"].engine
        if len(data) < engine.n_params + 1 or np.ptp(np.log(data.compute)) < 1e-6:
            raise ValueError(f"{exc}; and L(C) needs >= {engine.n_params + 1} runs at more than one compute")
        law = fit(
            engine,
            _raw(DIRECT, data.params, data.tokens),
            np.log(data.loss),
            n_boot=n_boot,
            seed=seed,
            labels=data.labels,
        )
        why = (
            f"{reason}; no law form can be backtested ({exc}): L(C) = E + A C^-alpha fitted on all "
            f"{len(data)} runs directly, with no rollout evidence"
        )
        return Step1({DIRECT: law}, {DIRECT: 1.0}, 1.0, target_tokens / target_params, None, why)
    return Step1(dict(fc.laws), dict(fc.weights), fc.factor, fc.target_ratio, fc, f"{reason}; {fc.why}")


@dataclass
class LossLaw:
    """Step 1's summary: the primary form (the one with the largest weight) in its family's formula, every
    form fitted with its weight and rollout score, and the calibration and reach of the mixture."""

    form: str  # family of the primary form: "nd" (E + A/N^alpha + B/D^beta) or "compute" (E + (C0/C)^gamma)
    params: dict[str, float]
    intervals: dict[str, tuple[float | None, float | None]]  # per parameter, from the bootstrap
    rmse_log: float  # root mean square of log(L_fit / L) of the mixture
    reason: str  # which forms and why
    primary: str = ""
    forms: dict[str, dict] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    calibration: dict = field(default_factory=dict)
    reach: dict = field(default_factory=dict)
    rollout: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return jsonable(
            {
                "form": self.form,
                "primary": self.primary,
                "params": self.params,
                "intervals": self.intervals,
                "rmse_log": self.rmse_log,
                "reason": self.reason,
                "formula": FORMULAS[self.form],
                "forms": self.forms,
                "skipped": self.skipped,
                "calibration": self.calibration,
                "reach": self.reach,
                "rollout": self.rollout,
            }
        )


def summarize(s1: Step1, rmse_log: float) -> LossLaw:
    key = s1.primary
    law = s1.laws[key]
    named = _as_family(key, law.params)
    intervals: dict = {k: (None, None) for k in named}
    if law.boot is not None:
        boot = _as_family(key, law.form.public(law.boot, law.center))
        intervals = {k: quantiles(np.asarray(boot[k], dtype=float), 0.90) for k in named}
    fc = s1.forecast
    forms = {}
    for k, lf in s1.laws.items():
        title, formula = (
            (LOSS_FORMS[k].title, LOSS_FORMS[k].formula) if k in LOSS_FORMS else ("L(C) on every run", "E + A C^-alpha")
        )
        forms[k] = {
            "title": title,
            "formula": formula,
            **lf.to_dict(),
            "weight": s1.weights.get(k, 0.0),
            "rollout": fc.rollout.scores.get(k) if fc else None,
        }
    out = LossLaw(
        form=family(key),
        params={k: float(v) for k, v in named.items()},
        intervals=intervals,
        rmse_log=rmse_log,
        reason=s1.reason,
        primary=key,
        forms=forms,
    )
    if fc is not None:
        out.skipped = dict(fc.skipped)
        out.calibration = {"level": 0.90, "coverage": fc.coverage, "factor": fc.factor, "n": len(fc.mixture_rows)}
        out.reach = fc.reach
        out.rollout = {
            "prefixes": len(fc.rollout.prefixes),
            "forecasts": len(fc.mixture_rows),
            "scores": fc.rollout.scores,
            "mixture": fc.mixture_rows,
        }
    else:
        out.calibration = {"level": 0.90, "coverage": None, "factor": 1.0, "n": 0}
    return out


def step1_curves(s1: Step1, n, d, flops_per_nd: float, hero_nd, level: float) -> list[dict]:
    """Curves of the fitted task loss against compute, with the law's band: one per tokens-per-parameter ratio
    of the ladder (and the hero's) when a law in (N, D) was fitted on several ratios, else one at the target's
    ratio; over the ladder's sizes up to the hero's."""
    nmax = float(np.max(n))
    if hero_nd is not None:
        nmax = max(nmax, hero_nd[0])
    log_r = np.log(d / n)
    keys = np.round(log_r / 0.1)  # ratios within ~10% form one group, drawn at the group's median ratio
    groups = sorted(float(np.exp(np.median(log_r[keys == k]))) for k in np.unique(keys))
    if len(groups) > 1 and any(k in ND_FORMS for k in s1.laws):
        if hero_nd is not None:
            hr = hero_nd[1] / hero_nd[0]
            if all(abs(math.log(hr / g)) > 0.1 for g in groups):
                groups.append(hr)
        ratios, labels = groups, [f"{r:.3g} tokens/param" for r in groups]
    else:
        ratios, labels = [s1.target_ratio], ["fit"]
    out = []
    c_lo = float(np.min(6.0 * n * d)) / 1.5
    c_hi = max(float(np.max(6.0 * n * d)), 6.0 * hero_nd[0] * hero_nd[1] if hero_nd else 0.0) * 1.5
    for r, label in zip(ratios, labels):
        if label == "fit":  # one curve over the ladder's compute (and the hero's)
            pn = np.sqrt(np.geomspace(c_lo, c_hi, CURVE_POINTS) / (6.0 * r))
        else:
            pn = np.geomspace(float(np.min(n)) / 1.5, nmax * 1.5, CURVE_POINTS)
        pd_ = r * pn
        point, curve, _ = s1.draws(pn, pd_, n_draws=CURVE_DRAWS, seed=11)
        band = [quantiles(np.exp(curve[:, j]), level) for j in range(len(pn))]
        out.append(
            {
                "label": label,
                "tokens_per_param": float(r),
                "params": pn,
                "tokens": pd_,
                "flops": flops_per_nd * pn * pd_,
                "loss": np.exp(point),
                "loss_lo": [b[0] for b in band],
                "loss_hi": [b[1] for b in band],
            }
        )
    return out
