"""Axes for the report's figures: tick formatters and locators for log axes, the axis set-ups every figure
shares (loss, counts, compute), the hero's marker, legends, the "nothing to show" axis and the array helpers.

Axes carry units (tokens, FLOPs, nats/token); counts, compute and loss are on log axes. Every helper tolerates
missing pieces (``None``, NaN) and draws what it has.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
from matplotlib import ticker
from matplotlib.figure import FigureBase

from ladder.reports.render.figures.style import FIT_COLOR, HERO, WIDTH_IN, tx
from ladder.reports.render.fmt import fmt_count, num, ok, pos


def fmt_num(x: float) -> str:
    """A tick label: 0.02, 3.5, 1e-05 -> 1e-5."""
    if x != 0 and (abs(x) < 1e-3 or abs(x) >= 1e5):
        m, e = f"{x:.2e}".split("e")
        return f"{float(m):g}e{int(e)}"
    return f"{x:.3g}"


class _LogLabels(ticker.Formatter):
    """Log-axis tick labels through ``fmt``; minor ticks are labelled only when the axis spans little, and then
    only at 2 and 5 (or 2, 3, 5) times a power of ten, so labels never collide."""

    def __init__(self, fmt: Callable[[float], str] = fmt_num, minor: bool = False) -> None:
        self.fmt = fmt
        self.minor = minor

    def __call__(self, x: float, pos: int | None = None) -> str:
        if not (x > 0 and math.isfinite(x)):
            return ""
        if not self.minor:
            return self.fmt(x)
        vmin, vmax = sorted(self.axis.get_view_interval())
        decades = math.log10(vmax / vmin) if vmin > 0 else 99.0
        if decades > 2.0:
            return ""
        coeff = round(x / 10 ** math.floor(math.log10(x) + 1e-9))
        allowed = {2, 5} if decades > 0.8 else ({2, 3, 5} if decades > 0.4 else set(range(2, 10)))
        return self.fmt(x) if coeff in allowed else ""


_SUP = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def fmt_pow(x: float) -> str:
    """Compute ticks: 10¹², 2·10¹² (unicode superscripts, no mathtext)."""
    e = math.floor(math.log10(x) + 1e-9)
    m = x / 10**e
    power = "10" + str(e).translate(_SUP)
    return power if abs(m - 1) < 1e-6 else f"{m:.2g}·{power}"


def plain_formatter() -> ticker.ScalarFormatter:
    """Decimal tick labels with as many digits as the ticks need (no offset, no scientific notation)."""
    f = ticker.ScalarFormatter(useOffset=False)
    f.set_scientific(False)
    return f


class _ViewLocator(ticker.Locator):
    """A locator whose ticks depend only on the axis' view interval (``tick_values``)."""

    def __call__(self) -> Sequence[float]:
        vmin, vmax = sorted(self.axis.get_view_interval())
        return self.tick_values(vmin, vmax)


class _MinorLog(_ViewLocator):
    """Minor ticks of a log axis: every integer multiple on short ranges, only 2x and 5x on long ones (fewer
    ticks to lay out: a tick is two artists, and matplotlib lays each out)."""

    def tick_values(self, vmin: float, vmax: float) -> Sequence[float]:
        decades = math.log10(vmax / vmin) if vmin > 0 and vmax > 0 else 99.0
        subs = tuple(range(2, 10)) if decades <= 1.0 else ((2.0, 3.0, 5.0) if decades <= 2.5 else (2.0, 5.0))
        return ticker.LogLocator(base=10, subs=subs, numticks=12).tick_values(vmin, vmax)


def log_labels(axis: Any, fmt: Callable[[float], str] = fmt_num) -> None:
    axis.set_major_formatter(_LogLabels(fmt))
    axis.set_minor_formatter(_LogLabels(fmt, minor=True))
    axis.set_minor_locator(_MinorLog())


class _NiceLocator(_ViewLocator):
    """Log-axis ticks at round linear values (2.5, 3, 3.5) when the range is short, decades otherwise."""

    def __init__(self) -> None:
        self._lin = ticker.MaxNLocator(nbins=6, steps=[1, 2, 2.5, 5, 10])
        self._log = ticker.LogLocator(base=10, numticks=8)

    def set_axis(self, axis: Any) -> None:
        super().set_axis(axis)
        self._lin.set_axis(axis)
        self._log.set_axis(axis)

    def tick_values(self, vmin: float, vmax: float) -> Sequence[float]:
        if vmin > 0 and vmax / vmin < 12:
            vals = [v for v in self._lin.tick_values(vmin, vmax) if v > 0]
            if len(vals) >= 2:
                return vals
        return self._log.tick_values(vmin, vmax)


def loss_axis(ax: Any, label: str = "loss (nats/token)", which: str = "y") -> None:
    """Loss on a log axis with readable decimal ticks."""
    axis = ax.yaxis if which == "y" else ax.xaxis
    (ax.set_yscale if which == "y" else ax.set_xscale)("log")
    axis.set_major_locator(_NiceLocator())
    axis.set_major_formatter(plain_formatter())
    axis.set_minor_locator(ticker.NullLocator())
    (ax.set_ylabel if which == "y" else ax.set_xlabel)(label)


def count_axis(ax: Any, label: str, which: str = "x") -> None:
    axis = ax.xaxis if which == "x" else ax.yaxis
    (ax.set_xscale if which == "x" else ax.set_yscale)("log")
    log_labels(axis, fmt_count)
    (ax.set_xlabel if which == "x" else ax.set_ylabel)(label)


def flops_axis(ax: Any, label: str = "compute (FLOPs)", which: str = "x") -> None:
    (ax.set_xscale if which == "x" else ax.set_yscale)("log")
    log_labels(ax.xaxis if which == "x" else ax.yaxis, fmt_pow)
    (ax.set_xlabel if which == "x" else ax.set_ylabel)(label)


def interval_err(y: float, lo: Any, hi: Any) -> list[list[float]] | None:
    if not (ok(lo) and ok(hi)):
        return None
    return [[max(0.0, y - num(lo))], [max(0.0, num(hi) - y)]]


def hero_point(ax: Any, x: Any, y: Any, lo: Any = None, hi: Any = None, label: str = "hero forecast (90%)") -> bool:
    if not (pos(x) and ok(y)):
        return False
    yerr = interval_err(num(y), lo, hi)
    if yerr is not None:
        ax.errorbar(
            [num(x)], [num(y)], yerr=yerr, fmt="none", ecolor=HERO["color"], elinewidth=1.3, capsize=4, zorder=5
        )
    ax.plot([num(x)], [num(y)], linestyle="none", label=label, **HERO)
    return True


def empty(ax: Any, message: str) -> None:
    """An axis that says why it has nothing to show."""
    ax.set_axis_off()
    ax.text(
        0.5,
        0.5,
        wrap(tx(message, 400), 48),
        ha="center",
        va="center",
        fontsize=8,
        color="#666666",
        transform=ax.transAxes,
    )


def wrap(s: str, width: int) -> str:
    return "\n".join(textwrap.wrap(s, width)) or s


def legend(ax: Any, **kw: Any) -> None:
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(**{"loc": "best", **kw})


def fig_legend(fig: FigureBase, handles: list, labels: list[str], width_in: float = WIDTH_IN) -> None:
    """A legend across the bottom of the figure, as many columns as fit."""
    if not handles:
        return
    longest = max(len(lbl) for lbl in labels)
    per = longest * 0.075 + 0.55  # inches per entry at 7.5 pt
    ncols = max(1, min(len(handles), int(width_in / per)))
    fig.legend(
        handles, labels, loc="outside lower center", ncols=ncols, fontsize=7.5, handlelength=2.6, columnspacing=1.4
    )


def merged_legend(fig: FigureBase, axes: Iterable[Any]) -> None:
    """One legend across the bottom of ``fig`` with the labels of all ``axes``, each once, in order of appearance."""
    handles, labels = [], []
    for ax in axes:
        for h, lbl in zip(*ax.get_legend_handles_labels()):
            if lbl not in labels:
                handles.append(h)
                labels.append(lbl)
    fig_legend(fig, handles, labels)


def finite_arrays(*cols: Sequence[Any]) -> tuple[np.ndarray, ...]:
    arrs = [np.array([num(v) for v in c], dtype=float) for c in cols]
    if not arrs:
        return ()
    good = np.ones(len(arrs[0]), dtype=bool)
    for a in arrs:
        good &= np.isfinite(a)
    return tuple(a[good] for a in arrs)


def fit_window_points(ax: Any, points: Sequence[Any], x_of: Callable[[Any], Any], y_of: Callable[[Any], Any]) -> None:
    """A rung's sweep points: filled where the fit used them, hollow outside its window (``point.used``)."""
    for used, face in ((True, FIT_COLOR), (False, "white")):
        group = [p for p in points if bool(p.used) == used]
        xs, ys = finite_arrays([x_of(p) for p in group], [y_of(p) for p in group])
        if len(xs):
            ax.plot(xs, ys, linestyle="none", marker="o", markersize=4.5, markerfacecolor=face,
                    markeredgecolor=FIT_COLOR, markeredgewidth=0.8, zorder=4,
                    label="in the fit window" if used else "outside the fit window")  # fmt: skip


def geom_grid(lo: float, hi: float, n: int = 120) -> np.ndarray:
    return np.geomspace(lo, hi, n)
