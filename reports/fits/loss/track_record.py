"""The loss forecast's track record on published ladders, by distance: what ``ladder fit`` tells a user about
forecasts as far out as theirs, and what the report draws (error against distance, one line per ladder).

Measured by ``python benchmarks/public_ladders.py`` (n_boot 100; benchmarks/README.md has the tables and the
protocol) on the open tuning set in ../shared/ladders: Porian et al. 2024's three decay-chinchilla isoFLOP
configurations (MIT), Beck et al. 2025's Llama ctx8192 isoFLOPs, Li et al. 2025's best-LR runs, and Epoch AI's
extraction of Chinchilla's runs. These are summary statistics of this engine's own forecasts; none of the
ladders' data is shipped (most carry no licence).
"""

from __future__ import annotations

import math

SOURCE = "benchmarks/public_ladders.py on 6 published ladders (2026-12-06)"

# band of the compute multiple (target 6ND over the largest fitted 6ND) ->
# (forecasts, ladders, median |error| %, worst |error| %, coverage of the 90% interval, median half-width %)
BANDS: dict[str, tuple[int, int, float, float, float, float]] = {
    "0-1x": (19, 1, 0.28, 6.31, 0.95, 5.53),
    "1-4x": (67, 4, 0.49, 3.87, 0.91, 1.16),
    "4-16x": (58, 6, 0.58, 5.85, 0.98, 2.51),
    "16-64x": (27, 4, 1.25, 8.03, 1.00, 3.82),
    "64x+": (1, 1, 2.93, 2.93, 1.00, 5.35),
}

# ladder -> [(band, median |error| %)] for the report's figure
BY_LADDER: dict[str, list[tuple[str, float]]] = {
    "Porian OWT2 (val)": [("1-4x", 1.29), ("4-16x", 3.9), ("16-64x", 3.91)],
    "Porian RefinedWeb (attention, train)": [("4-16x", 0.85), ("16-64x", 3.35)],
    "Porian RefinedWeb (val)": [("1-4x", 1.38), ("4-16x", 5.53), ("16-64x", 7.83)],
    "Beck Llama ctx8192": [("4-16x", 3.02)],
    "Li et al. open_lm C4": [("0-1x", 0.28), ("1-4x", 0.43), ("4-16x", 0.83)],
    "Chinchilla (Epoch)": [("1-4x", 0.44), ("4-16x", 0.39), ("16-64x", 0.79), ("64x+", 2.93)],
}

# the farthest published forecast (Epoch's Chinchilla split, 6.8B x 318B tokens): the open band 64x+ holds it alone,
# so its record says nothing of a forecast at 2,000x or 680,000x, which it was quoted for
FARTHEST_X = 129.6

# the compute bands (target 6ND over the largest fitted 6ND), here and in benchmarks/public_ladders.py
EDGES = ((0.0, 1.0), (1.0, 4.0), (4.0, 16.0), (16.0, 64.0), (64.0, math.inf))


def band_label(lo: float, hi: float) -> str:
    """``1-4x``, or ``64x+`` for the open band: lower bound first."""
    return f"{lo:g}x+" if math.isinf(hi) else f"{lo:g}-{hi:g}x"


BAND_ORDER = tuple(band_label(lo, hi) for lo, hi in EDGES)


def band_of(compute_x: float) -> str:
    for lo, hi in EDGES:
        if lo <= compute_x < hi:
            return band_label(lo, hi)
    return BAND_ORDER[0]


def at(compute_x: float | None) -> dict | None:
    """The track record at a forecast's compute multiple, or None when no published forecast was that far."""
    if compute_x is None or not BANDS:
        return None
    band = band_of(compute_x)
    if band not in BANDS:  # farther than any published forecast: the farthest band there is, said as such
        far = [b for b in BANDS if b.endswith("x+")] or list(BANDS)
        band = far[-1]
    n, ladders, med, worst, cover, half = BANDS[band]
    return {
        "band": band,
        "n": n,
        "ladders": ladders,
        "median_abs_err_pct": med,
        "worst_abs_err_pct": worst,
        "coverage": cover,
        "median_half_width_pct": half,
        "source": SOURCE,
        # past every published forecast: the record is of nearer ones (said by :func:`sentence`)
        **({"beyond_farthest_x": FARTHEST_X} if compute_x > FARTHEST_X * 1.0001 else {}),
    }


def band_words(band: str) -> str:
    """A band's label in words: ``0-1x`` is below 1x (not a range from 0), ``64x+`` is 64x or more."""
    lo, sep, hi = band.partition("-")
    if sep and lo == "0":
        return f"below {hi}"
    if band.endswith("x+"):
        return f"{band[:-1]} or more"
    return band


def sentence(record: dict | None) -> str | None:
    if not record:
        return None
    farthest = record.get("beyond_farthest_x")
    beyond = f"; none was as far out as this forecast (the farthest at {farthest:g}x)" if farthest is not None else ""
    said = _record_words(record)
    return said + beyond


def _record_words(record: dict) -> str:
    ladders = f"on {record['ladders']} published ladder{'s' if record['ladders'] != 1 else ''}"
    if (
        record["n"] == 1
    ):  # one forecast has no median, worst or coverage: "1 forecasts ... covered 100%" read as a record
        inside = "inside" if record["coverage"] >= 1 else "outside"
        return (
            f"{ladders}, 1 forecast at {band_words(record['band'])} compute erred by "
            f"{record['median_abs_err_pct']:.1f}%, {inside} its 90% interval"
        )
    return (
        f"{ladders}, {record['n']} forecasts at {band_words(record['band'])} compute erred by a "
        f"median of {record['median_abs_err_pct']:.1f}% (worst {record['worst_abs_err_pct']:.1f}%), and their 90% "
        f"intervals covered {100 * record['coverage']:.0f}%"
    )
