"""The hero of a study fit: the hero as the study states it, its allocation, shape, compute and cost, its loss
forecast (from :mod:`ladder.reports.fits.loss`), the compute-optimal section, and the warnings about how far
the hero lies beyond what the rollout demonstrated."""

from __future__ import annotations

import math
from collections.abc import Iterable

from ladder.errors import FitError
from ladder.layout import jsonable
from ladder.model.config import format_count, format_flops, format_multiple, parse_count
from ladder.model.recipe import params_for_compute
from ladder.reports.fits import recommend as rec
from ladder.reports.fits.loss import Forecast, track_record
from ladder.reports.fits.loss.allocation import ALLOCATING, allocation, degenerate, undetermined
from ladder.reports.fits.loss.loss_forecast import SAME_X
from ladder.reports.fits.study.table import of_variant, spent
from ladder.studies.spec import StudySpec

FAR_EXTRAPOLATION = 30.0  # warn when the hero is this many times the largest ladder model


def parse_predict(items: Iterable) -> list[tuple[float, float, str]]:
    """The ``predict=`` items as (params, tokens, label); ``FitError`` on one that does not read."""
    out = []
    for item in items or ():
        label = None
        if isinstance(item, str):
            parts = item.split(":")
            if len(parts) != 2:
                raise FitError(f"predict {item!r}: expected PARAMS:TOKENS, e.g. 3.2M:64M")
            vals = [parse_count(p.strip()) for p in parts]
            label = item.strip()
        else:
            try:
                vals = list(item)
            except TypeError:
                raise FitError(f"predict {item!r}: expected (params, tokens) or 'PARAMS:TOKENS'") from None
            if len(vals) == 3:
                label = str(vals[2])
                vals = vals[:2]
            if len(vals) != 2:
                raise FitError(f"predict {item!r}: expected (params, tokens) or 'PARAMS:TOKENS'")
            vals = [parse_count(v) if isinstance(v, str) else v for v in vals]
        try:
            n, d = float(vals[0]), float(vals[1])
        except (TypeError, ValueError):
            raise FitError(f"predict {item!r}: params and tokens must be numbers like 3.2M or 6.4e7") from None
        if not (math.isfinite(n) and math.isfinite(d) and n > 0 and d > 0):
            raise FitError(f"predict {item!r}: params and tokens must be positive")
        out.append((n, d, label or f"{format_count(n)}:{format_count(d)}"))
    return out


def _rule_params(study: StudySpec, compute: float, tied: bool, aspect: float) -> float:
    """The size whose shape at the tokens-per-param rule costs ``compute`` exact FLOPs."""
    seq_len = study.hero.seq_len or study.data.seq_len
    return float(
        params_for_compute(
            compute,
            study.ladder.tokens_per_param,
            lambda n: rec.hero_shape(study, n, tied=tied, aspect_ratio=aspect),
            study.ladder.param_count,
            seq_len,
        )
    )


def hero_start(study: StudySpec) -> dict:
    """The hero as ``ladder plan`` sizes it (default tying and aspect ratio, tokens by rule when not given):
    the FLOPs the ablation and hyperparameter trends are extrapolated to while the fit decides the rest."""
    h, lad = study.hero, study.ladder
    tied = study.model.tie_embeddings if h.tied is None else h.tied
    aspect = h.aspect_ratio or study.model.aspect_ratio
    seq_len = h.seq_len or study.data.seq_len
    # the same numbers as ladder.plan.hero_size.plan_hero (a test holds them equal), which reports may not import:
    # a hero's compute is exact counted FLOPs, spent by the built shape nearest the rule's size
    if h.params is not None:
        shape = rec.hero_shape(study, h.params, tied=tied, aspect_ratio=aspect)
        n = float(h.params)
        d = float(h.tokens or int(round(lad.tokens_per_param * h.params)))
        return {"params": n, "tokens": d, "flops": float(shape.flops_per_token(seq_len)) * d}
    shape = rec.hero_shape(study, _rule_params(study, h.compute, tied, aspect), tied=tied, aspect_ratio=aspect)
    tokens = float(int(round(h.compute / shape.flops_per_token(seq_len))))
    return {"params": float(shape.params(lad.param_count)), "tokens": tokens, "flops": float(h.compute)}


def point_flops(study: StudySpec | None, params: float, tokens: float) -> float | None:
    """The exact FLOPs of a --predict point (N, D) as `ladder hero --params N --tokens D` sizes it (the study's
    shape at N, default tying and aspect ratio), which the hyperparameter laws in compute read; None without a
    study or for a size the family cannot build. (fit scaled 6ND by the largest rung's FLOPs per 6ND instead, and
    gave another B* than the hero planned at the same point.)"""
    if study is None:
        return None
    moved = study.hero.model_copy(update={"params": float(params), "tokens": float(tokens), "compute": None})
    try:
        return float(hero_start(study.model_copy(update={"hero": moved}))["flops"])
    except (ValueError, FitError, ZeroDivisionError, OverflowError):
        return None


def allocating_law(fc: Forecast | None):
    """The L(N, D) law that splits a compute budget, or None: Chinchilla's, which fits alpha and beta apart and
    so measures the split; the over-training law only when Chinchilla's is degenerate, since its alpha = beta
    makes the split an assumption (a = b = 1/2), however it is weighted for the loss."""
    if fc is None:
        return None
    cands = [k for k in ALLOCATING if k in fc.laws and degenerate(fc.laws[k]) is None]
    return fc.laws[cands[0]] if cands else None


def no_allocation_reason(fc: Forecast | None, same_ratio: str) -> str:
    """Why no fitted law splits compute: no law, only degenerate ones, or ``same_ratio`` (one tokens/param)."""
    if fc is None:
        return "no loss law"
    bad = [degenerate(fc.laws[k]) for k in ALLOCATING if k in fc.laws]
    return "; ".join(b for b in bad if b) or same_ratio


def size_hero(study, fc, iso, tied, aspect, conv, df, raw, warnings):
    """The hero: its allocation (given, by rule, or compute-optimal), shape and compute; ``(hero, shape, source)``."""
    h, lad = study.hero, study.ladder
    seq_len = h.seq_len or study.data.seq_len
    reason = alloc_law = None
    if study.hero_context_warning:
        warnings.append(study.hero_context_warning)
    if h.params is not None:
        n = float(h.params)
        if h.tokens is not None:
            d, alloc = float(h.tokens), "given"
            src = "study: hero.tokens"
        else:
            d, alloc = lad.tokens_per_param * n, "rule"
            src = f"study rule: ladder.tokens_per_param {lad.tokens_per_param:g} x hero.params"
        budget = None
    else:
        budget = float(h.compute)
        law = allocating_law(fc)
        why = (
            "not identifiable: " + no_allocation_reason(fc, "every run has the same tokens/param ratio")
            if fc is not None
            else "not available: no loss law"
        )
        split = allocation(law, budget) if law is not None else None
        loose = undetermined(split) if split is not None else None
        if loose is not None:
            why = f"not determined: {loose}"
        if split is not None and loose is None:
            n, d, alloc = split["params"], split["tokens"], "compute_optimal"
            alloc_law = law.form.name
            src = f"fit: compute-optimal allocation of the {law.form.name} law at 6ND = {format_flops(budget)} (D/N = {d / n:.3g})"
        elif iso is not None:
            n, d, alloc = float(iso.params_opt(budget)), float(iso.tokens_opt(budget)), "compute_optimal"
            src = f"fit: IsoFLOP N_opt(C), D_opt(C) at C = {format_flops(budget)} (D/N = {d / n:.3g})"
            reason = f"the L(N, D) laws' allocation is {why}"
        else:
            n = _rule_params(study, budget, tied, aspect)
            d, alloc = lad.tokens_per_param * n, "rule"
            reason = f"the fit's compute-optimal allocation is {why}"
            src = f"study rule: ladder.tokens_per_param {lad.tokens_per_param:g} ({reason})"
            warnings.append(
                f"hero compute {format_flops(budget)} FLOPs split by the study's tokens_per_param rule, not by the fit: {reason}"
            )
    shape = rec.hero_shape(study, n, tied=tied, aspect_ratio=aspect)
    flops = float(shape.flops_per_token(seq_len)) * d
    compute = budget if budget is not None else flops
    ladder_flops = float(spent(raw).sum())
    hero = {
        "params": n,
        "tokens": d,
        "tokens_per_param": d / n,
        "param_convention": conv,
        "compute": compute,
        "compute_6nd": 6 * n * d,
        "flops": flops,
        "allocation": alloc,
        "allocation_source": src,
        "allocation_reason": reason,
        "allocation_law": alloc_law,
        "tied": tied,
        "aspect_ratio": shape.aspect_ratio,
        "shape": shape.public_dict(),
        "seq_len": seq_len,
        "ladder_flops": ladder_flops,
        "ladder_flops_used": float(df["flops"].sum()),
        "ladder_pct_of_hero": 100.0 * ladder_flops / compute,
        "flops_convention": "exact counted FLOPs (FLOPs per token of the shape x tokens); ladder_flops: every "
        "FLOP the ladder's runs spent, failed and cancelled ones included",
        "note": (
            f"N is the study's param_count convention ({conv}); compute is "
            + (
                "the study's budget, read as exact FLOPs (split at 6ND = budget)"
                if budget is not None
                else "the hero shape's exact FLOPs (FLOPs per token x tokens)"
            )
        ),
    }
    return hero, shape, src


def hero_loss(point, fc: Forecast, variant: str) -> dict:
    """The hero's forecast fields: loss, calibrated interval, half-width, distance and reach."""
    weighted = ", ".join(f"{k} {w:.2f}" for k, w in sorted(fc.weights.items(), key=lambda kv: -kv[1]))
    if fc.weighted_by_rollout:
        how = f"weighted by rollout ({weighted})"
    else:  # never claim a backtest that did not run (issue 28)
        how = f"weighted equally ({weighted}): no rollout forecasts to weight them by (too few sizes or budgets to backtest)"
    return {
        "loss": point.loss,
        "lo": point.lo,
        "hi": point.hi,
        "level": 0.90,
        "half_width_pct": point.half_width_pct,
        "kind": "projection",
        "loss_source": f"fit: {len(fc.laws)} law form(s){of_variant(variant)} {how}",
        "by_form": point.by_form,
        "extrapolation": {"params": point.params_x, "compute_6nd": point.compute_x, "tokens": point.tokens_x},
        "beyond_reach": point.beyond_reach,
        "beyond_tested": point.beyond_tested,
        "distance": point.distance,
        "track_record": track_record.at(point.compute_x),
        "reach": fc.reach,
        "calibration": {"coverage": fc.coverage, "factor": fc.factor},
    }


BEYOND_TESTED = "beyond what the rollout tested"
BEYOND_REACH = "beyond the ladder's demonstrated reach"


def beyond_words(beyond_tested: bool | None, beyond_reach: bool | None) -> str | None:
    """The stronger of the two that holds (:data:`BEYOND_TESTED`, :data:`BEYOND_REACH`), or None: every place that
    says how far a forecast lies beyond the ladder says the same one."""
    return BEYOND_TESTED if beyond_tested else BEYOND_REACH if beyond_reach else None


def beyond_mark(beyond_tested: bool | None, beyond_reach: bool | None) -> str:
    """A forecast table's mark after a distance, the stronger that holds: a point beyond what the rollout tested
    was marked "(beyond reach)" beside the line below the table saying "beyond what the rollout tested"."""
    return " (beyond tested)" if beyond_tested else " (beyond reach)" if beyond_reach else ""


NOT_TESTED = "no rollout forecast tested any distance (too few sizes or budgets to backtest)"
# a 2% reach of 1x in every axis: read as "stayed within 2% up to 1x", it sounded like a reach the rollout showed
NO_REACH = "the rollout's nearest forecasts already erred by more than 2%: it shows no reach beyond the ladder"


def reaches_nowhere(*multiples: float | None) -> bool:
    """Whether a 2% reach is 1x in every axis given (None counts as 1x): the nearest forecast in each missed."""
    return all(x is None or x <= SAME_X for x in multiples)


def where_words(params_x: float, tokens_x: float, compute_x: float) -> str:
    """A forecast's distance in words, in every axis (the hero's warnings and the predictions' say it alike). Its
    compute is the law's, 6ND: exact FLOPs (LM head and attention counted) put the ladder's small runs higher, so
    their ratio differs, and a bare "compute" read beside the hero's exact FLOPs said a multiple they do not give.
    The multiples are over the runs the laws were fitted on: "the ladder's largest model" put the default study's
    tied hero at 7.96x, beside a ladder whose largest model (untied, not fitted) it is 3.97x."""
    return (
        f"{format_multiple(params_x)} the largest model fitted, {format_multiple(tokens_x)} its most tokens and "
        f"{format_multiple(compute_x)} its largest compute (6ND)"
    )


def farthest_axis(params_x: float | None, tokens_x: float | None, compute_x: float | None) -> tuple[float | None, str]:
    """A forecast's distance as its reach is judged, in every axis: its multiple in the farthest of parameters,
    tokens and compute (6ND), and that axis (``fit --predict``'s table and the report's said the parameters' alone,
    "1x (beyond reach)" of a point 6.4x beyond the ladder's compute)."""
    axes = ((params_x, "params"), (tokens_x, "tokens"), (compute_x, "compute"))
    if any(v is None or not math.isfinite(float(v)) for v, _ in axes):
        return params_x, "params"
    return max(((float(v), name) for v, name in axes), key=lambda a: a[0])  # a tie: the first, params


def tested_words(dist: dict, who: str = "the hero") -> str:
    """How far the rollout tested, one axis per number: each axis the hero (or a prediction, ``who``) passes with
    its own and the rollout's multiple in that axis, then the error of the rollout's farthest forecasts, said to be
    at their distance (in their farthest axis), which is not the hero's."""
    tested = dist.get("tested") or {}
    said: dict[str, list[str]] = {}  # the words -> the axes they hold for (params and tokens often move together)
    for ax in dist.get("beyond_tested_axes") or []:
        hero_x, test_x = dist.get(f"{ax}_x"), tested.get(f"{ax}_x")
        if hero_x is not None and test_x is not None:
            said.setdefault(f"{who} at {_apart(hero_x, test_x)}", []).append(ax)
    parts = [f"{' and '.join(axes)}: {words}" for words, axes in said.items()]
    if not parts:
        far_x, test_d = dist.get("distance_x", 1.0), dist.get("tested_distance_x", 1.0)
        parts.append(f"distance in the farthest axis: {who} at {_apart(far_x, test_d)}")
    far = dist.get("rollout_error") or {}
    if far.get("median_abs_err_pct") is not None:
        span = farthest_span(far)
        where = f"not measured at {who}'s distance"
        at, lo, hi = dist.get("distance_x"), far.get("min_distance_x"), far.get("max_distance_x")
        if said and None not in (at, lo, hi) and lo / SAME_X <= at <= hi * SAME_X:
            # Porian's top budget fitted below 1e18: at 31.2x, inside the farthest forecasts' 16-32x, only its
            # tokens (7.23x) lay beyond the rollout's; "not measured at the forecast's distance" was untrue
            axes = " and ".join(ax for axes in said.values() for ax in axes)
            where = f"at {who}'s distance in the farthest axis, but not as far in {axes}"
        parts.append(
            f"its farthest forecasts{span and span + ' in their farthest axis'} erred by a median of "
            f"{far['median_abs_err_pct']:.1f}% ({where})"
        )
    return "; ".join(parts)


def _apart(x: float, tested_x: float) -> str:
    """A multiple and the rollout's ("3.982x, the rollout tested up to 3.975x"), in as many digits as tell them apart
    ("the hero at 3.98x, the rollout tested up to 3.98x" named no excess)."""
    digits = 3
    while digits < 6 and format_multiple(x, digits=digits) == format_multiple(tested_x, digits=digits):
        digits += 1
    return f"{format_multiple(x, digits=digits)}, the rollout tested up to {format_multiple(tested_x, digits=digits)}"


def farthest_span(far: dict) -> str:
    """Where the rollout's farthest forecasts lie (``rollout_error``'s distances): `` at 12.5x``, or a range
    `` at 8.5-12.5x`` when the two read apart; empty without them. `ladder fit`'s reach lines and warnings say it
    alike, never a Python exponent (4,058, not 4.06e+03)."""
    lo, hi = far.get("min_distance_x"), far.get("max_distance_x")
    if lo is None or hi is None:
        return ""
    if format_multiple(lo) == format_multiple(hi):
        return f" at {format_multiple(hi)}"
    return f" at {format_multiple(lo, sign='')}-{format_multiple(hi)}"


def floor_words(public_pct: float, far_pct: float | None, far_median_pct: float | None = None) -> str:
    """The least half-width a far forecast got, in the hero interval's ± digits: the published-ladder floor, or the
    rollout's median error at its farthest forecasts where that is wider (a distance no nearer than theirs). That
    median is a factor either side in log loss, so its ± is smaller than the median itself: the words give both
    ("a median of 5.2%" and "the median error ..., ±5.06%" stood in one warning)."""
    public = f"the published-ladder floor of ±{public_pct:.2f}%"
    if far_pct is None or far_pct <= public_pct:
        return f"at least {public}"
    if far_median_pct is None:
        return (
            f"at least ±{far_pct:.2f}%, from the median error of the rollout's farthest forecasts (wider than {public})"
        )
    return (
        f"at least ±{far_pct:.2f}%: the rollout's farthest forecasts' median error of {far_median_pct:.1f}% taken as a "
        f"factor {1 + far_median_pct / 100:.3f} either side of the forecast (wider than {public})"
    )


def far_median(dist: dict) -> float | None:
    """The median |error| (%) of the rollout's farthest forecasts, as a distance's ``rollout_error`` holds it."""
    return (dist.get("rollout_error") or {}).get("median_abs_err_pct")


def reach_words(fc: Forecast) -> str:
    """How far the rollout's forecasts stayed within 2%, in fit's digits (the hero's and the predictions' warnings)."""
    reach = fc.reach.get("2%", {})
    # the tokens too: reach is judged in every axis, and a point 0.25x params, 1.52x tokens, 2.4x compute was called
    # beyond a reach of "1x params, 3.33x compute" with the axis it passed (tokens, 1x) unsaid
    tokens = reach.get("tokens_x")
    if reaches_nowhere(reach.get("params_x"), reach.get("compute_x"), tokens):
        return NO_REACH
    return (
        f"forecasts stayed within 2% up to {format_multiple(reach.get('params_x', 1.0))} params, "
        f"{format_multiple(reach.get('compute_x', 1.0))} compute"
        + (f", {format_multiple(tokens)} tokens" if tokens is not None else "")
    )


def reach_warnings(hero: dict, fc: Forecast, warnings: list[str]) -> None:
    """Say plainly how far beyond the ladder the hero lies, whether the rollout ever tested that far, and which
    way the rollout's forecasts erred when they leaned."""
    px = hero["extrapolation"]["params"]
    dist = hero.get("distance") or {}
    where = where_words(px, dist.get("tokens_x", 1.0), dist.get("compute_x", 1.0))
    if not fc.mixture_rows:
        warnings.append(
            f"the hero is {where}; {NOT_TESTED}, so its interval is the fit's own and the published-ladder floor, unchecked"
        )
    elif hero.get("beyond_tested"):
        warnings.append(
            f"the hero is {where}: {BEYOND_TESTED} ({tested_words(dist)}); its interval was widened for the "
            f"distance (error growth {dist.get('drift_widening_pct', 0):+.1f}%, "
            f"{floor_words(dist.get('public_floor_pct', 0), dist.get('far_floor_pct'), far_median(dist))}): a "
            "projection, not a checked prediction"
        )
    elif hero["beyond_reach"]:
        warnings.append(f"the hero is {where}: {BEYOND_REACH} ({reach_words(fc)})")
    record = track_record.sentence(hero.get("track_record"))
    if record and (hero.get("beyond_tested") or hero["beyond_reach"]):
        warnings.append(f"track record: {record}")
    if px > FAR_EXTRAPOLATION:
        warnings.append(
            # the multiple in the digits of the reach warning just above (31.9x there, never 32x here)
            f"the hero is {format_multiple(px)} the largest ladder model: a forecast this far out is fragile; "
            "add a larger rung"
        )
    lean = lean_text(fc.lean)
    if lean:
        warnings.append(lean)


def left_out_words(left_out: dict | None, n_runs: int | None) -> list[str]:
    """The runs the loss laws left out, and why, as ``ladder fit`` and the report say it (fit.json's
    ``loss.left_out``): the header counts only the runs kept, and every distance is measured from those."""
    left_out = left_out or {}
    far, below = left_out.get("runs") or [], (left_out.get("below_span") or {}).get("runs") or []
    words = []
    if far:
        words.append(
            f"left out of the loss laws: {len(far)} of the {len(far) + (n_runs or 0)} runs, {left_out.get('why')} "
            "(every distance is measured from the rest)"
        )
    if below:
        words.append(
            f"left out of the loss laws, kept for the rollout: {len(below)} of the {n_runs} runs, "
            f"{(left_out.get('below_span') or {}).get('why')}"
        )
    return words


def prediction_beyond(row: dict, fc: Forecast) -> str:
    """A --predict point's warning, in the hero's words: how far out it lies, and how far the rollout tested and
    its error there (beyond what was tested) or how far it stayed within 2% (beyond reach)."""
    dist = row.get("distance") or {}
    where = where_words(row["params_x"], row["tokens_x"], row["compute_x"])
    if not fc.mixture_rows:
        return f"{where}: {NOT_TESTED}"
    if row["beyond_tested"]:
        return f"{where}: {BEYOND_TESTED} ({tested_words(dist, 'the forecast')})"
    return f"{where}: {BEYOND_REACH} ({reach_words(fc)})"


def lean_text(lean: dict, forecast: str = "the hero's forecast probably runs") -> str | None:
    """The warning for a rollout whose forecasts at the target's distance erred to one side (``Forecast.lean``, or a
    prediction's ``distance.lean``), or None; ``forecast`` names what probably leans the same way."""
    if not lean or not lean.get("direction"):
        return None
    n, high = lean["n"], lean["n_high"]
    # older fit.json files judged every row, at whatever distance
    span = farthest_span(lean)  # the rows' distances, as the far error's are said
    where = (
        f"{span} beyond their runs (judged near the forecast's {format_multiple(lean['distance_x'])})"
        if span and lean.get("distance_x")
        else ""
    )
    if lean["direction"] == "high":
        return (
            f"the rollout's forecasts{where} ran high ({high} of {n} above the actual loss, mean error "
            f"{lean['mean_err_pct']:+.1f}%): the larger rungs beat what the smaller ones forecast (the loss "
            f"curve steepens with scale), so {forecast} high too"
        )
    return (
        f"the rollout's forecasts{where} ran low ({n - high} of {n} below the actual loss, mean error "
        f"{lean['mean_err_pct']:+.1f}%): the larger rungs fell short of what the smaller ones forecast (the "
        f"loss curve flattens with scale), so {forecast} low too"
    )


def compute_optimal(fc: Forecast | None, iso, hero: dict | None, no_law: str | None = None) -> dict:
    """The ``compute_optimal`` section: the allocating law's exponents and its split at the hero's 6ND, and
    the IsoFLOP fit's exponents."""
    # the law that sized the hero, if one did: the forecast at the hero's own ratio may weight the forms anew
    sized_by = (hero or {}).get("allocation_law")
    law = fc.laws[sized_by] if fc is not None and sized_by in fc.laws else allocating_law(fc)
    if law is None:
        why = (
            no_allocation_reason(
                fc,
                "every run has the same tokens/param ratio, so N and D move together: "
                "give the ladder several budgets per size",
            )
            if fc is not None
            else f"no loss law ({no_law})"
        )
        out: dict = {"identifiable": False, "reason": f"not identifiable: {why}", "source": None}
    else:
        c = (
            6 * hero["params"] * hero["tokens"]
            if hero
            else 6 * float(fc.data.params.max()) * float(fc.data.tokens.max())
        )
        a = allocation(law, c)
        loose = undetermined(a)
        out = {
            "identifiable": True,
            "source": law.form.name,
            "a": a["a"],
            "b": a["b"],
            "ci90": {"a": a["ci90"].get("a"), "b": a["ci90"].get("b")},
            "at_hero": a if hero else None,
            "determined": loose is None,
            "reason": loose,
            "assumption": (
                "alpha = beta (the over-training form): a = b = 1/2 by assumption, not measured"
                if law.form.name == "overtrain"
                else None
            ),
        }
    out["isoflop"] = None
    if iso is not None:
        out["isoflop"] = {"a": iso.a, "b": iso.b, "ci90": iso.to_dict()["ci90"]}
        if not out.get("identifiable"):
            out["source"] = "isoflop"
    return jsonable(out)
