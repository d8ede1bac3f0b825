"""Approach 2 (IsoFLOP profiles): per compute budget, the model size that minimizes loss; then
``N_opt = k C^a`` and ``D_opt = k' C^b`` across budgets.

Runs are grouped into budgets by FLOPs (within 5%, :func:`ladder.reports.fits.runs.group_budgets`);
a budget needs runs at >= 3 distinct model sizes. ``D_opt`` is read off the budget's own
tokens-vs-params line at ``N_opt`` (``C / 6 N_opt`` when FLOPs are ``6ND``).

How the minimum of each budget is found (``method``):

* ``"shape"`` (default): the IsoFLOP curve that the Chinchilla law implies. With ``D = C / 6N``,
  ``E + A N^-alpha + B D^-beta`` becomes, in ``x = log N``,
  ``L_c(x) = c_0 + u_c exp(-alpha x) + v_c exp(beta x)``: a sum of two exponentials whose
  asymmetry is set by ``alpha`` and ``beta``. The exponents are shared by all budgets and the three
  linear coefficients are free per budget; the fit is least squares in relative error (variable
  projection: a batched linear solve per exponent pair on a grid, then Nelder-Mead on the pair).
  The minimum is analytic: ``x* = log(alpha u / (beta v)) / (alpha + beta)``. A parabola in
  ``log N`` is symmetric about its vertex, so when the sizes tried sit asymmetrically around the
  optimum (the usual case: a grid fixed before the optimum is known) it pulls the vertex toward the
  side with more or further points (the bias Xu et al. 2026 describe); the shape model has the
  curve's real asymmetry and no such bias when the law holds. It needs some budget to have more than
  3 sizes (``sum(n_sizes - 3) >= 2``) to pin the exponents; otherwise the fit falls back to parabolas
  and says so in ``note``.
* ``"parabola"``: the classic quadratic in ``log N`` per budget (Hoffmann et al. 2022).

Across budgets, by the one engine (:mod:`ladder.reports.fits.isoflop.budget_laws`): ``N_opt = k C^a`` and
``D_opt = k' C^b`` with the :class:`~ladder.reports.fits.engine.Linear` form ``log y = log k + a log C`` and
its residual bootstrap over the budgets (the 90% intervals of ``a``, ``b``, ``k``); and the IsoFLOP loss
forecast, the minimum loss of each budget against compute ``L*(C) = E + A C^-alpha`` (the loss laws' frontier
form), with a rollout over the budgets; ``predict(compute)`` forecasts a compute-optimal run's loss.

Per-budget intervals (``ci90`` of each budget's optimum): residual bootstrap over runs. Each replicate perturbs
every run's fitted loss by a residual drawn from the pooled (dof-inflated) log residuals and refits every
budget (and, for ``shape``, the exponents, warm-started); the 90% intervals are the 5th/95th percentiles, and
their typical scatter of a budget's minimum loss is the least a new budget's minimum scatters about ``L*(C)``.
Resampling runs with replacement inside a budget of 3-7 sizes would too often leave fewer than 3 distinct
sizes, so residuals are resampled instead. When no residual degrees of freedom exist (each budget fitted
exactly) there are no per-budget intervals, and ``note`` says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ladder.errors import FitError
from ladder.model.config import format_flops
from ladder.reports.fits.backtest import interval
from ladder.reports.fits.engine.solve import single_threaded_blas
from ladder.reports.fits.isoflop.budget_laws import (
    MIN_PREFIX,
    AllocationLaw,
    MinimumLossLaw,
    fit_allocation,
    fit_minimum_loss,
    unfit_reason,
)
from ladder.reports.fits.isoflop.budget_profiles import (
    ParabolaFitter,
    ShapeFitter,
    residual_rows,
    residual_summary,
)
from ladder.reports.fits.runs import Runs, as_runs, group_budgets

METHODS = ("shape", "parabola")
MIN_SIZES = 3
MIN_BUDGETS = 2


@dataclass(frozen=True)
class IsoFlopFit:
    method: str
    budgets: list[dict]  # per budget: flops, n_runs, n_sizes, params_opt, tokens_opt, loss_opt, interior, ci90
    n_opt: AllocationLaw  # N_opt = k C^a
    d_opt: AllocationLaw  # D_opt = k' C^b
    n_runs: int
    n_boot: int
    residuals: list[dict]
    shape: dict | None = None  # method "shape": {"alpha": ..., "beta": ...} of the IsoFLOP curves
    skipped_budgets: list[dict] = field(default_factory=list)
    note: str | None = None
    loss_law: MinimumLossLaw | None = None  # L*(C) through the budgets' minima
    loss_law_reason: str | None = None  # why there is none

    @property
    def a(self) -> float:
        return self.n_opt.a

    @property
    def b(self) -> float:
        return self.d_opt.a

    def params_opt(self, flops) -> float | np.ndarray:
        return self.n_opt(flops)

    def tokens_opt(self, flops) -> float | np.ndarray:
        return self.d_opt(flops)

    def predict(self, compute: float) -> tuple[float, float, float]:
        """``(loss, lo, hi)``: Approach 2's forecast of a compute-optimal run at ``compute`` (the budgets' FLOPs
        convention) with its 90% prediction interval, from the law through the budgets' minima."""
        if self.loss_law is None:
            raise FitError(f"isoflop fit: no loss forecast ({self.loss_law_reason})")
        return self.loss_law.predict(compute)

    def to_dict(self) -> dict:
        return {
            "form": "isoflop",
            "method": self.method,
            "a": self.a,
            "b": self.b,
            "ci90": {"a": _pair(self.n_opt.ci90.get("a")), "b": _pair(self.d_opt.ci90.get("a"))},
            "n_opt": self.n_opt.to_dict(),
            "d_opt": self.d_opt.to_dict(),
            "budgets": [dict(b) for b in self.budgets],
            "n_budgets": len(self.budgets),
            "n_runs": self.n_runs,
            "n_boot": self.n_boot,
            "shape": self.shape,
            "skipped_budgets": [dict(s) for s in self.skipped_budgets],
            "residuals": [dict(r) for r in self.residuals],
            "residual_summary": residual_summary(self.residuals),
            "note": self.note,
            "loss_law": (
                self.loss_law.to_dict()
                if self.loss_law is not None
                else {"available": False, "reason": self.loss_law_reason}
            ),
        }


CLOSE_BUDGETS = 1.25  # budgets nearer than this are no design's steps (the ladder's, Chinchilla's, Porian et al.'s
# and Beck et al.'s are sqrt 2 to 3x apart), but one budget cut by the grouping's tolerance


def _close_budgets_note(r, budget_flops: np.ndarray, budget_rtol: float) -> list[str]:
    """A note when budgets lie nearer than ``CLOSE_BUDGETS`` and the FLOPs are 6ND: Beck et al.'s 4 isoFLOP groups,
    whose runs' 6ND spreads 19-37% within a group (they count attention), were fitted as 14 budgets."""
    close = [(a, b) for a, b in zip(budget_flops, budget_flops[1:]) if b / a < CLOSE_BUDGETS]
    if not close or not np.allclose(r.flops, r.compute, rtol=1e-9):
        return []
    a, b = close[0]
    return [
        f"the runs fall into {len(budget_flops)} budgets by 6ND (within {100 * budget_rtol:g}%), {len(close)} of them "
        f"within {CLOSE_BUDGETS:g}x of the next (first {format_flops(a)} and {format_flops(b)} FLOPs): if runs planned "
        f"as one budget differ by more than {100 * budget_rtol:g}% in 6ND (FLOPs counted another way), give each run "
        "its budget's FLOPs in a flops column"
    ]


@single_threaded_blas
def fit_isoflop(
    runs=None,
    *,
    params=None,
    tokens=None,
    loss=None,
    flops=None,
    method: str = "shape",
    n_boot: int = 200,
    seed: int = 0,
    budget_rtol: float = 0.05,
    strict: bool = True,
    allow_extrapolated: bool = False,
) -> IsoFlopFit:
    """Approach 2. ``strict=True`` raises ``FitError`` when any budget has fewer than 3 model sizes;
    ``strict=False`` skips such budgets (listed in ``skipped_budgets``). A budget whose fitted minimum
    lies outside the sizes it tried (beyond half a grid step) is skipped too, unless
    ``allow_extrapolated``; a curve without a minimum always is. Raises when fewer than 2 budgets
    remain."""
    if method not in METHODS:
        raise FitError(f"isoflop fit: method must be one of {', '.join(METHODS)}, got {method!r}")
    r = as_runs(runs, params=params, tokens=tokens, loss=loss, flops=flops, what="isoflop fit")
    labels, budget_flops = group_budgets(r.flops, budget_rtol)
    groups, skipped = [], []
    for g, c in enumerate(budget_flops):
        idx = np.flatnonzero(labels == g)
        n_sizes = len(np.unique(r.params[idx]))
        if n_sizes < MIN_SIZES:
            skipped.append(
                {
                    "flops": float(c),
                    "n_runs": len(idx),
                    "n_sizes": n_sizes,
                    "reason": f"needs >= {MIN_SIZES} model sizes",
                }
            )
        else:
            groups.append((float(c), idx))
    if len(groups) < MIN_BUDGETS:
        sizes = ", ".join(f"{format_flops(b)}: {_n_sizes(r, labels == g)}" for g, b in enumerate(budget_flops))
        raise FitError(
            f"isoflop fit: needs >= {MIN_BUDGETS} compute budgets with >= {MIN_SIZES} model sizes each, "
            f"got {len(groups)} (model sizes per budget, FLOPs: sizes = {sizes})"
        )
    if skipped and strict:
        s = ", ".join(f"{format_flops(b['flops'])} FLOPs has {b['n_sizes']}" for b in skipped)
        raise FitError(
            f"isoflop fit: every compute budget needs >= {MIN_SIZES} model sizes to locate its minimum; {s} "
            "(pass strict=False to skip such budgets)"
        )

    note = []
    used = method
    if method == "shape" and sum(_n_sizes(r, idx) - 3 for _, idx in groups) < 2:
        used = "parabola"
        note.append(
            "shape fit needs budgets with more than 3 sizes to pin the curve's exponents "
            "(sum over budgets of sizes - 3 >= 2); fell back to parabolas in log N"
        )

    fitter = ShapeFitter(r, groups) if used == "shape" else ParabolaFitter(r, groups)
    state = fitter.fit(r.loss)
    opts = fitter.optima(state)  # (n_budgets,) log N_opt or nan
    fitted = fitter.fitted(state)  # per run in groups order

    ok = np.isfinite(opts)
    inside = np.array([_bracketed(np.log(r.params[idx]), o) for (_, idx), o in zip(groups, opts)])
    for j, ((c, idx), good) in enumerate(zip(groups, ok)):
        reason = None
        if not good:
            reason = "the fitted curve has no minimum (loss keeps falling toward one edge of the sizes tried)"
        elif not inside[j] and not allow_extrapolated:
            reason = (
                f"its fitted minimum (N ~ {np.exp(opts[j]):.3g}) lies outside the sizes tried "
                f"({r.params[idx].min():.3g} to {r.params[idx].max():.3g})"
            )
            ok[j] = False
        if reason:
            skipped.append({"flops": c, "n_runs": len(idx), "n_sizes": _n_sizes(r, idx), "reason": reason})
    if ok.sum() < MIN_BUDGETS:
        raise FitError(
            f"isoflop fit: only {int(ok.sum())} compute budget(s) have a loss minimum within the sizes tried; "
            f"needs >= {MIN_BUDGETS}; widen the size grid so each budget brackets its optimum"
        )

    cs = np.array([c for c, _ in groups])
    # Tokens at the optimum from each budget's own tokens-vs-params line (log D = c + s log N): exactly
    # C / 6N when FLOPs are 6ND, and still right when the flops column counts FLOPs another way.
    tok_lines = [_line(np.log(r.params[idx]), np.log(r.tokens[idx])) for _, idx in groups]
    log_d_at = lambda o: np.array([c0 + s * oj for (c0, s), oj in zip(tok_lines, o)])  # noqa: E731
    n_opt = np.exp(opts)
    d_opt = np.exp(log_d_at(opts))

    all_idx = np.concatenate([idx for _, idx in groups])
    log_resid = np.log(r.loss[all_idx] / fitted)
    dof = len(all_idx) - fitter.n_params(state)
    boot_opts = boot_loss = None
    if n_boot > 0 and dof > 0 and np.any(np.abs(log_resid) > 1e-12):
        scatter = log_resid * np.sqrt(len(all_idx) / dof)
        rng = np.random.default_rng(seed)
        per_budget, per_loss = [], []
        for _ in range(n_boot):
            y = np.empty(r.n)
            y[all_idx] = fitted * np.exp(rng.choice(scatter, len(all_idx)))
            st = fitter.fit(y, warm=state)
            o = fitter.optima(st)
            per_budget.append(o)
            per_loss.append([fitter.loss_at(st, j, oj) if np.isfinite(oj) else np.nan for j, oj in enumerate(o)])
        boot_opts, boot_loss = np.array(per_budget), np.array(per_loss)
    elif n_boot > 0:
        note.append(
            "no residual degrees of freedom (each budget fitted exactly): no per-budget intervals; the "
            "exponents' intervals come from the engine's bootstrap over budgets"
        )
    n_law = fit_allocation(cs[ok], n_opt[ok], n_boot=n_boot, seed=seed)
    d_law = fit_allocation(cs[ok], d_opt[ok], n_boot=n_boot, seed=seed)
    loss_opt = np.array([fitter.loss_at(state, j, o) if good else np.nan for j, (o, good) in enumerate(zip(opts, ok))])
    loss_law, loss_why = _minimum_loss_law(r, used, groups, ok, cs, loss_opt, boot_loss, n_boot, seed)

    budgets = []
    for j, ((c, idx), good) in enumerate(zip(groups, ok)):
        if not good:
            continue
        row = {
            "flops": c,
            "n_runs": len(idx),
            "n_sizes": _n_sizes(r, idx),
            "params_opt": float(n_opt[j]),
            "tokens_opt": float(d_opt[j]),
            "loss_opt": float(loss_opt[j]),
            "interior": bool(inside[j]),
            "ci90": {},
        }
        if boot_opts is not None:
            col = boot_opts[:, j]
            col = col[np.isfinite(col)]
            if len(col) > 1:
                lo, hi = interval(col)
                c0, sl = tok_lines[j]
                d_lo, d_hi = sorted(np.exp([c0 + sl * lo, c0 + sl * hi]))
                row["ci90"] = {
                    "params_opt": [float(np.exp(lo)), float(np.exp(hi))],
                    "tokens_opt": [float(d_lo), float(d_hi)],
                }
        budgets.append(row)
    if not all(b["interior"] for b in budgets):
        out = ", ".join(format_flops(b["flops"]) for b in budgets if not b["interior"])
        note.append(f"the optimum of budget(s) {out} FLOPs lies outside the sizes tried (extrapolated, kept)")

    note += _close_budgets_note(r, budget_flops, budget_rtol)
    sub = r.subset(all_idx)
    rows = residual_rows(sub.labels, sub.params, sub.tokens, sub.flops, sub.loss, fitted)
    return IsoFlopFit(
        method=used,
        budgets=budgets,
        n_opt=n_law,
        d_opt=d_law,
        n_runs=len(all_idx),
        n_boot=0 if n_law.boot is None else len(n_law.boot),
        residuals=rows,
        shape=fitter.shape(state),
        skipped_budgets=skipped,
        note="; ".join(note) or None,
        loss_law=loss_law,
        loss_law_reason=loss_why,
    )


# ---------------------------------------------------------------------------------------- helpers
def _n_sizes(r: Runs, idx) -> int:
    return len(np.unique(r.params[idx]))


def _bracketed(log_sizes: np.ndarray, opt: float) -> bool:
    """Is ``opt`` within the sizes tried, give or take half the budget's mean step in log N?"""
    if not np.isfinite(opt):
        return False
    u = np.unique(log_sizes)
    margin = 0.5 * (u[-1] - u[0]) / max(1, len(u) - 1)
    return bool(u[0] - margin <= opt <= u[-1] + margin)


def _pair(v):
    return None if v is None else [float(v[0]), float(v[1])]


def _line(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    slope, intercept = np.polyfit(x, y, 1)
    return float(intercept), float(slope)


def _minimum_loss_law(r: Runs, method: str, groups, ok, cs, loss_opt, boot_loss, n_boot: int, seed: int):
    """``L*(C)`` through the usable budgets' minima, with a rollout that refits the profiles of the smallest
    budgets alone; ``(law, None)`` or ``(None, why not)``."""
    keep = np.flatnonzero(ok)
    why = unfit_reason(len(keep))
    if why:
        return None, why
    floor = 0.0
    if boot_loss is not None:
        sd = np.nanstd(np.log(boot_loss[:, keep]), axis=0)
        floor = float(np.nanmedian(sd)) if np.isfinite(sd).any() else 0.0
    used = [groups[j] for j in keep]
    fitter_of = ShapeFitter if method == "shape" else ParabolaFitter
    # the grid's start of every prefix's shape fit at once: a grid pass per prefix made the rollout cost
    # budgets x runs x 900 grid points (minutes and GBs on 10^4 runs)
    starts = ShapeFitter(r, used).prefix_starts(r.loss, range(MIN_PREFIX, len(used))) if method == "shape" else {}

    def prefix_minima(k: int):
        f = fitter_of(r, used[:k])
        st = f.fit(r.loss, start=starts[k]) if method == "shape" else f.fit(r.loss)
        o = f.optima(st)
        return np.array([f.loss_at(st, j, oj) if np.isfinite(oj) else np.nan for j, oj in enumerate(o)])

    law = fit_minimum_loss(
        cs[keep], loss_opt[keep], n_boot=n_boot, seed=seed, sigma_floor=floor, prefix_minima=prefix_minima
    )
    return law, None
