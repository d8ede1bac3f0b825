"""The compute-optimal allocation a fitted loss law implies: at ``C = 6 N D`` in the law's parameter
convention, the N and D that minimize ``E + A/N^alpha + B/D^beta``:

    N_opt = G (C/6)^a,  D_opt = (C/6)^b / G,  a = beta/(alpha+beta),  b = alpha/(alpha+beta),
    G = (alpha A / (beta B))^(1/(alpha+beta))

(Hoffmann et al. 2022, eq. 4; the over-training law is the case alpha = beta, so a = b = 1/2). Intervals are
the 5th/95th percentiles over the law's bootstrap refits. Laws fitted at one tokens/param ratio (``ratio``,
``frontier``) say nothing about the split and give no allocation.
"""

from __future__ import annotations

import numpy as np

from ladder.model.config import format_count, format_flops, format_multiple
from ladder.reports.fits.engine import LawFit

ALLOCATING = ("chinchilla", "overtrain")
MIN_TERM = 1e-3  # a term below this share of the loss at the median run is not measured
MIN_EXPONENT = 0.02  # an exponent at its bound: the loss does not move with that quantity on these runs
# A split is advice only when its 90% interval for N_opt spans at most this factor (2x either way): beyond it the
# ladder has not measured where the optimum lies, and a hero sized by it could be off by an order of magnitude.
MAX_SPAN = 4.0


def degenerate(law: LawFit) -> str | None:
    """Why ``law`` cannot split compute (an exponent at zero makes the optimum a corner), or None."""
    alpha, beta = (float(v) for v in _exponents(law.params))
    for name, v, moves, fixed in (("alpha", alpha, "N", "D"), ("beta", beta, "D", "N")):
        if name not in law.params and "eta" in law.params:
            name = "eta"
        if v < MIN_EXPONENT:
            return (
                f"the {law.form.name} law's {name} = {v:.3g}: on these runs the loss does not fall with {moves} "
                f"at fixed {fixed}, so the law puts all compute in one of them"
            )
    p = law.params
    if law.raw is not None and len(law.raw):
        n, d = np.median(law.raw[:, 0]), np.median(law.raw[:, 1])
        loss = p["E"] + p["A"] * n**-alpha + p["B"] * d**-beta
        an, bn = ("alpha", "beta") if "alpha" in p else ("eta", "eta")
        for term, v, moves in ((f"A/N^{an}", p["A"] * n**-alpha, "N"), (f"B/D^{bn}", p["B"] * d**-beta, "D")):
            if v < MIN_TERM * loss:
                return (
                    f"the {law.form.name} law's {term} is {v:.2g} at the ladder's median run (of a loss of "
                    f"{loss:.3g}): on these runs the loss does not fall with {moves}, so the law cannot split "
                    "compute"
                )
    return None


def undetermined(split: dict) -> str | None:
    """Why a split (of :func:`allocation`) is too uncertain to size a run by, or None. Without bootstrap refits
    there is nothing to judge it by, and it stands. A 90% interval for N_opt that reaches zero spans without bound
    (read once as "no bootstrap", it sized a 7.49e11-FLOP hero at 3.566 parameters x 35B tokens)."""
    ci = (split.get("ci90") or {}).get("params")
    if not ci:
        return None
    lo, hi = ci
    if not lo > 0:
        if not hi > 0:  # no interval drawn (NaN): nothing to judge by
            return None
        return (
            f"the {split['form']} law's 90% interval for N_opt at 6ND = {format_flops(split['compute_6nd'])}, "
            f"[0, {format_count(hi)}], reaches zero: this ladder does not determine the split"
        )
    if hi / lo <= MAX_SPAN:
        return None
    return (
        # compute and counts as fit and the report write them elsewhere (2.13e13, 397.7K), never g's 1.92e+13
        f"the {split['form']} law's 90% interval for N_opt at 6ND = {format_flops(split['compute_6nd'])}, "
        f"[{format_count(lo)}, {format_count(hi)}], spans "
        f"{format_multiple(hi / lo)} (more than {MAX_SPAN:g}x): this ladder does not determine the split"
    )


def _exponents(p: dict) -> tuple:
    alpha = p["alpha"] if "alpha" in p else p["eta"]
    beta = p["beta"] if "beta" in p else p["eta"]
    return np.asarray(alpha, dtype=float), np.asarray(beta, dtype=float)


def _split(p: dict, c: float):
    alpha, beta = _exponents(p)
    a, b = beta / (alpha + beta), alpha / (alpha + beta)
    g = (alpha * np.asarray(p["A"]) / (beta * np.asarray(p["B"]))) ** (1.0 / (alpha + beta))
    n = g * (c / 6.0) ** a
    return n, (c / 6.0) / n, a, b


def allocation(law: LawFit, compute: float) -> dict:
    """``{params, tokens, tokens_per_param, a, b, ci90: {...}}`` at ``compute`` (6ND)."""
    with np.errstate(all="ignore"):  # bootstrap refits at an exponent's bound give inf/nan, dropped below
        return _allocation(law, compute)


def _allocation(law: LawFit, compute: float) -> dict:
    n, d, a, b = _split(law.params, compute)
    out = {
        "form": law.form.name,
        "compute_6nd": float(compute),
        "params": float(n),
        "tokens": float(d),
        "tokens_per_param": float(d / n),
        "a": float(a),
        "b": float(b),
        "ci90": {},
    }
    if law.boot is not None:
        nb, db, ab, bb = _split(law.form.public(law.boot, law.center), compute)
        for key, v in (("params", nb), ("tokens", db), ("tokens_per_param", db / nb), ("a", ab), ("b", bb)):
            v = np.asarray(v, dtype=float)
            v = v[np.isfinite(v)]
            out["ci90"][key] = [float(np.quantile(v, 0.05)), float(np.quantile(v, 0.95))] if len(v) else None
    return out
