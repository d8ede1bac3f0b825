"""The loss-law forms, what each is fitted on, and when the data identify it.

=============  =======================================================  =======================================
form           law                                                      fitted on
=============  =======================================================  =======================================
chinchilla     ``L(N, D) = E + A/N^alpha + B/D^beta`` (Approach 3)        every run; needs >= 2 tokens/param ratios
overtrain      ``L(N, D) = E + A/N^eta + B/D^eta``: Chinchilla with one   every run; needs >= 2 ratios
               exponent, i.e. Gadre et al. (2024)'s over-training law
               ``L(C, M) = E + (a M^eta' + b M^-eta') C^-eta'`` at
               ``M = D/N``, ``C = 6ND``, ``eta' = eta/2``
ratio          ``L(C) = E + A C^-alpha`` at the target's tokens/param     the runs at that ratio (within 10%)
               ratio: Gadre's law with the ratio fixed
frontier       ``L(C) = E + A C^-alpha`` on the compute-optimal frontier  the runs no cheaper run beats
bounded        ``L(N, D) = E + 1/(1/R + 1/(U - E))``,                     every run; needs >= 2 ratios
               ``R = A/N^alpha + B/D^beta``: Chinchilla's reducible
               loss capped by a plateau U (the loss of a model that
               has learned little more than token frequencies); far
               below U it is Chinchilla, near U it levels off
=============  =======================================================  =======================================

N is the ``params`` column (the study's parameter convention) and ``C = 6 N D`` in that convention: the law's
compute, not the counted FLOPs of the ladder's cost. Every form needs >= 3 model sizes and a residual degree of freedom
(``n >= p + 1``; the intervals' Student-t factor pays for few); an unidentifiable form is skipped with its reason.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ladder.reports.fits.engine import Bounded, PowerSum
from ladder.reports.fits.runs import Runs
from ladder.reports.fits.runs import group_labels as groups  # the fits' one grouping

RATIO_TOL = 0.10  # runs within 10% of a tokens/param ratio share it
MIN_SIZES = 3
BOUNDED_MIN_SIZES = 5
MIN_DOF = 1
MIN_SPREAD = 1.5  # N and D must each span at least this factor for a two-term law
LEVEL_TOL = 0.10  # runs within 10% of each other's compute share a compute level
NEAR_OPT_TOL = 0.05  # at an isoFLOP budget, the runs within 5% of its lowest loss are fitted
FIT_SPAN = 10.0  # an isoFLOP ladder's law is fitted on its budgets within this factor of its largest ...
FIT_SPAN_MIN_LEVELS = 4  # ... or on its largest few budgets, when fewer lie within it


def frontier_mask(compute: np.ndarray, loss: np.ndarray) -> np.ndarray:
    """Runs on the compute-optimal frontier: no run with at most their compute reached a lower loss."""
    mask = np.zeros(len(loss), dtype=bool)
    best = np.inf
    for i in np.lexsort((loss, compute)):
        if loss[i] < best:
            mask[i] = True
            best = loss[i]
    return mask


def compute_levels(data: Runs) -> np.ndarray:
    """A label per run for its compute level: its FLOPs within ``LEVEL_TOL`` (``6ND``, unless the runs table gave a
    flops column: Beck et al.'s isoFLOP budgets count attention, and their runs' 6ND spreads 19-37% within one, so
    6ND cut each budget in two or three levels of too few sizes to locate its optimum)."""
    return groups(data.flops, LEVEL_TOL)


def near_optimum(data: Runs, tol: float = NEAR_OPT_TOL) -> np.ndarray:
    """The runs a loss law is fitted on: at a compute level (:func:`compute_levels`) that holds >= 3 model
    sizes (an isoFLOP budget), the runs within ``tol`` of the level's lowest loss; every run elsewhere. A budget's
    runs far from its optimum (a model much too small or too large for it) sit where every form is least right
    (Hoffmann et al. fit Approach 2's parabolas near each minimum for the same reason) and pull the law toward its
    ends instead of the compute-optimal valley the hero lies in: on published isoFLOP ladders, leaving them out
    halved the median error of forecasts 4-16x out (benchmarks/README.md)."""
    levels = compute_levels(data)
    sizes = data.sizes
    keep = np.ones(len(data), dtype=bool)
    for k in np.unique(levels):
        m = levels == k
        if len(np.unique(sizes[m])) >= MIN_SIZES:
            keep[m] = data.loss[m] <= data.loss[m].min() * (1 + tol)
    return keep


def far_from_optimum_why(isoflop: bool) -> str:
    """Why :func:`near_optimum` left runs out, in the words of the ladder's design: a grid of sizes and tokens/param
    ratios has no isoFLOP budgets (the report says so), yet lines up 3 or more sizes at one compute by coincidence."""
    where = (
        "their isoFLOP budget's lowest loss"
        if isoflop
        else f"the lowest loss at their compute (3 or more sizes within {100 * LEVEL_TOL:g}% of one compute, as a "
        "grid of sizes and tokens/param ratios lines some up)"
    )
    return f"more than {100 * NEAR_OPT_TOL:g}% above {where}: far from its optimum, where every form is least right"


def sizes_per_group(data: Runs, labels: np.ndarray) -> float:
    """The median number of model sizes among the runs of each label (a compute level, a tokens/param ratio)."""
    sizes = data.sizes  # a property that groups every run: once, not once per label
    return float(np.median([len(np.unique(sizes[labels == k])) for k in np.unique(labels)]))


def isoflop_design(data: Runs) -> bool:
    """Whether the sizes share compute budgets rather than tokens/param ratios: most compute levels hold >=
    MIN_SIZES sizes, more than most ratios do. A grid of sizes x ratios (each size at 5, 10, 20... tokens/param)
    also lines some runs up at one compute by coincidence, but its sizes share its ratios far more."""
    if not len(data):
        return False
    per_level = sizes_per_group(data, compute_levels(data))
    return per_level >= MIN_SIZES and per_level > sizes_per_group(data, groups(data.ratio, RATIO_TOL))


def top_budgets(data: Runs, span: float = FIT_SPAN, min_levels: int = FIT_SPAN_MIN_LEVELS) -> np.ndarray:
    """The runs a loss law is fitted on by compute: on an isoFLOP ladder, its budgets within ``span`` of the
    largest (at least its ``min_levels`` largest); every run of any other design.

    Why: the smallest budgets of a long isoFLOP ladder sit in a pre-asymptotic regime (optimal models of a few
    million parameters, where embeddings and the loss's fast early drop dominate), and a law whose curvature they
    set saturates too early: forecasts far above the ladder came out several percent high. Fitting the decade
    nearest the hero trades a little leverage for a law of the regime the hero lives in (Hoffmann et al. and
    Porian et al. fit their frontiers on the larger budgets for the same reason). On the published ladders of
    benchmarks/public_ladders.py it cut the pooled median error at 16x and beyond by a third and raised no band's
    (benchmarks/README.md); every rollout prefix is fitted the same way, so the backtest judges this choice too."""
    keep = np.ones(len(data), dtype=bool)
    if not len(data) or not isoflop_design(data):
        return keep
    levels = compute_levels(data)
    budget = {k: float(np.median(data.flops[levels == k])) for k in np.unique(levels)}
    largest = sorted(budget, key=budget.get, reverse=True)
    top = budget[largest[0]]
    inside = [k for k in largest if budget[k] >= top / span * (1 - LEVEL_TOL)]
    return np.isin(levels, largest[: max(len(inside), min_levels)])


def at_ratio(data: Runs, ratio: float) -> np.ndarray:
    return np.abs(np.log(data.ratio / ratio)) <= np.log1p(RATIO_TOL)


@dataclass(frozen=True)
class LossForm:
    key: str
    title: str
    formula: str
    engine: PowerSum
    on_compute: bool  # the law's input is C = 6ND (else (N, D))

    def raw(self, params, tokens) -> np.ndarray:
        params, tokens = np.atleast_1d(params).astype(float), np.atleast_1d(tokens).astype(float)
        return (6.0 * params * tokens)[:, None] if self.on_compute else np.c_[params, tokens]

    def fitted_on(self, data: Runs, target_ratio: float) -> np.ndarray:
        """The runs this form is fitted on."""
        if self.key == "ratio":
            return at_ratio(data, target_ratio)
        if self.key == "frontier":
            return frontier_mask(data.compute, data.loss)
        return np.ones(len(data), dtype=bool)

    def unidentifiable(self, data: Runs) -> str | None:
        """Why the (already selected) runs cannot identify this form, or None. Too few sizes is said first (of one
        run, "every run has the same tokens/param ratio" was all a user read), with the two-term laws' own reason."""
        n_sizes = len(np.unique(data.sizes)) if len(data) else 0
        few = f"needs runs at >= {MIN_SIZES} model sizes (has {n_sizes})" if n_sizes < MIN_SIZES else None
        if not self.on_compute and len(data):
            n_ratios = len(np.unique(groups(data.ratio, RATIO_TOL)))
            why = None
            if n_ratios < 2:
                why = (
                    "every run has the same tokens/param ratio, so N and D move together and the law's two "
                    "terms cannot be told apart (give the ladder several budgets per size)"
                )
            for name, v in (("tokens", data.tokens), ("parameter count", data.params)):
                if why is None and v.max() < v.min() * MIN_SPREAD:
                    why = (
                        f"every run has nearly the same {name} (within {MIN_SPREAD:g}x), so that term cannot be "
                        "told apart from E"
                    )
            if why is not None:
                return why if few is None else f"{few}, and {why}"
        if few is not None:
            return few
        if self.key == "bounded" and n_sizes < BOUNDED_MIN_SIZES:
            # six constants, two of them (E, U) set by the ends of the ladder: on 3-4 sizes the plateau trades
            # against the exponents and its forecasts scatter (and its refits are the slowest of the forms)
            return f"needs runs at >= {BOUNDED_MIN_SIZES} model sizes for its plateau (has {n_sizes})"
        if len(data) < self.engine.n_params + MIN_DOF:
            return f"needs >= {self.engine.n_params + MIN_DOF} runs for {self.engine.n_params} parameters (has {len(data)})"
        return None

    def applies(self, params: float, tokens: float, fitted: Runs | None, target_ratio: float) -> bool:
        """Whether a forecast of this run is within what the form claims: the ratio form only at its ratio; the
        frontier form only at the tokens/param ratios of the frontier it was fitted on (elsewhere a run is not
        compute-optimal and lies above the frontier)."""
        ratio = tokens / params
        if self.key == "ratio":
            return abs(np.log(ratio / target_ratio)) <= np.log1p(RATIO_TOL)
        if self.key == "frontier" and fitted is not None:
            on = fitted.ratio[frontier_mask(fitted.compute, fitted.loss)]
            return bool(len(on)) and on.min() / (1 + RATIO_TOL) <= ratio <= on.max() * (1 + RATIO_TOL)
        return True

    def runs_words(self, target_ratio: float) -> str:
        """Which runs the form is fitted on, in words."""
        if self.key == "ratio":
            return (
                f"those within {100 * RATIO_TOL:g}% of the target's {target_ratio:.3g} tokens/param: the hero's, "
                "else the first prediction's, else the largest run's"
            )
        if self.key == "frontier":
            return "those on the compute-optimal frontier, where no cheaper run reached a lower loss"
        return "every run"

    def scope(self, fitted: Runs, target_ratio: float) -> str:
        """Where the form forecasts, in words (for a point none can forecast)."""
        if self.key == "ratio":
            return f"ratio: only at {target_ratio:.3g} tokens/param"
        if self.key == "frontier":
            on = fitted.ratio[frontier_mask(fitted.compute, fitted.loss)]
            span = f"{on.min():.3g}" if on.max() <= on.min() * (1 + RATIO_TOL) else f"{on.min():.3g}-{on.max():.3g}"
            return f"frontier: only at {span} tokens/param (its runs' ratios)"
        return f"{self.key}: anywhere"


LOSS_FORMS: dict[str, LossForm] = {
    f.key: f
    for f in (
        LossForm(
            "chinchilla",
            "Chinchilla L(N, D)",
            "E + A/N^alpha + B/D^beta",
            PowerSum("chinchilla", ("E", "A", "B", "alpha", "beta"), (0, 1)),
            False,
        ),
        LossForm(
            "overtrain",
            "Over-training law (Gadre et al.)",
            "E + A/N^eta + B/D^eta",
            PowerSum("overtrain", ("E", "A", "B", "eta"), (0, 0)),
            False,
        ),
        LossForm(
            "ratio",
            "L(C) at the hero's tokens/param",
            "E + A C^-alpha",
            PowerSum("ratio", ("E", "A", "alpha"), (0,)),
            True,
        ),
        LossForm(
            "frontier",
            "L(C) on the compute-optimal frontier",
            "E + A C^-alpha",
            PowerSum("frontier", ("E", "A", "alpha"), (0,)),
            True,
        ),
        LossForm(
            "bounded",
            "Chinchilla below a plateau",
            "E + 1/(1/(A/N^alpha + B/D^beta) + 1/(U - E))",
            Bounded(
                "bounded",
                PowerSum("bounded", ("E", "A", "B", "alpha", "beta"), (0, 1), exp_grid=np.geomspace(0.02, 3.0, 18)),
            ),
            False,
        ),
    )
}


def seed_sigma(params, tokens, loss, seeds, variant=None) -> tuple[float, list[dict]]:
    """Seed-to-seed scatter of log loss: replicates are runs of one configuration (params, tokens, variant)
    that differ in seed. Returns (pooled sd, per-size rows with n and sd)."""
    params = np.asarray(params, dtype=float)
    keys = {}
    for i, (p, t) in enumerate(zip(params, tokens)):
        keys.setdefault((round(float(p)), round(float(t)), None if variant is None else variant[i]), []).append(i)
    ss, dof, per_size = 0.0, 0, {}
    logl = np.log(np.asarray(loss, dtype=float))
    for (p, _t, _v), idx in keys.items():
        if len(idx) < 2 or len({seeds[i] for i in idx}) < 2:
            continue
        v = logl[idx]
        ss += float(((v - v.mean()) ** 2).sum())
        dof += len(idx) - 1
        row = per_size.setdefault(p, {"params": p, "groups": 0, "runs": 0, "ss": 0.0, "dof": 0})
        row["groups"] += 1
        row["runs"] += len(idx)
        row["ss"] += float(((v - v.mean()) ** 2).sum())
        row["dof"] += len(idx) - 1
    rows = [
        {
            "params": r["params"],
            "groups": r["groups"],
            "runs": r["runs"],
            "sd_log_loss": float(np.sqrt(r["ss"] / r["dof"])),
        }
        for r in sorted(per_size.values(), key=lambda r: r["params"])
    ]
    return (float(np.sqrt(ss / dof)) if dof else 0.0), rows
