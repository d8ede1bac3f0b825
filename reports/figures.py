"""The report's figures: matplotlib (no pyplot, no GUI), drawn into a ``Figure`` or a ``SubFigure``.

Every figure is a :class:`FigureSpec` whose ``draw`` callable fills whatever figure it is given, so one drawing
function makes both the HTML's inline SVG (:func:`to_svg`) and a slot on a PDF page (:mod:`ladder.reports.pdf`).

Conventions: axes carry units (tokens, FLOPs, nats/token); counts, compute and loss are on log axes; one colour,
marker and line style per variant (:class:`VariantStyles`: a stable mapping kept across all figures, readable in
greyscale because marker and line style vary with the colour); the hero forecast is a black star with its 90%
interval. Every function tolerates missing pieces (``None``, NaN, absent keys) and draws what it has.

User strings (study names, variants, labels) go through :func:`tx`: matplotlib would read ``$...$`` in them as
mathtext, and a legend label starting with ``_`` would be hidden.
"""

from __future__ import annotations

import html
import io
import math
import re
import textwrap
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
from matplotlib import rc_context, ticker
from matplotlib.figure import Figure, FigureBase
from matplotlib.lines import Line2D

WIDTH_IN = 7.5  # natural width of every figure; the PDF scales heights to its text width

PALETTE = (  # Okabe-Ito first (colour-blind safe), then Paul Tol's muted
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9",
    "#332288", "#882255", "#117733", "#999933", "#AA4499", "#44AA99",
)
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", "h", ">", "p", "*")
LINESTYLES = ("-", "--", "-.", ":", (0, (6, 1.5, 1, 1.5, 1, 1.5)), (0, (9, 2.5)))
HERO = {"color": "#111111", "marker": "*", "ms": 13, "mec": "white", "mew": 0.8, "zorder": 6}
FIT_COLOR = "#222222"
MUTED = "#8a8a8a"

RC = {
    "font.family": "DejaVu Sans",
    "font.size": 8.5,
    "axes.titlesize": 9.5,
    "axes.titleweight": "bold",
    "axes.titlelocation": "left",
    "axes.titlepad": 5,
    "axes.labelsize": 8.5,
    "axes.labelcolor": "#222222",
    "axes.edgecolor": "#555555",
    "axes.linewidth": 0.7,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.grid.which": "major",
    "axes.axisbelow": True,
    "grid.color": "#e6e6e6",
    "grid.linewidth": 0.6,
    "xtick.labelsize": 7.5,
    "ytick.labelsize": 7.5,
    "xtick.color": "#444444",
    "ytick.color": "#444444",
    "legend.fontsize": 7.5,
    "legend.frameon": False,
    "legend.handlelength": 2.6,
    "lines.linewidth": 1.4,
    "lines.markersize": 5,
    "figure.facecolor": "white",
    "savefig.facecolor": "white",
    "svg.fonttype": "path",  # glyphs as paths: identical everywhere, no font files needed
    "svg.hashsalt": "ladder-report",  # deterministic ids
    "pdf.fonttype": 42,  # TrueType: text in the PDF stays selectable and searchable
    "pdf.compression": 6,
    "figure.constrained_layout.h_pad": 0.06,
    "figure.constrained_layout.w_pad": 0.06,
}


# ---------------------------------------------------------------------------------------------- styles


class VariantStyles:
    """A stable colour / marker / line style per variant: the order of first appearance (the plan's order)."""

    def __init__(self, names: Iterable[str] = ()) -> None:
        self._index: dict[str, int] = {}
        for n in names:
            self.add(n)

    def add(self, name: Any) -> int:
        key = str(name)
        if key not in self._index:
            self._index[key] = len(self._index)
        return self._index[key]

    @property
    def names(self) -> list[str]:
        return list(self._index)

    def __getitem__(self, name: Any) -> dict[str, Any]:
        i = self.add(name)
        return {
            "color": PALETTE[i % len(PALETTE)],
            "marker": MARKERS[i % len(MARKERS)],
            "linestyle": LINESTYLES[i % len(LINESTYLES)],
        }

    def handle(self, name: Any, *, line: bool = True, marker: bool = True) -> Line2D:
        st = self[name]
        return Line2D(
            [], [], color=st["color"], marker=st["marker"] if marker else None,
            linestyle=st["linestyle"] if line else "none", markersize=5, linewidth=1.4,
        )


def tx(value: Any, limit: int = 60) -> str:
    """A user string made safe as matplotlib text: ``$`` escaped (no mathtext), not hidden as ``_label``."""
    s = str(value)
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    s = s.replace("$", r"\$")
    return " " + s if s.startswith("_") else s


# ---------------------------------------------------------------------------------------------- helpers


def num(v: Any) -> float:
    """A float, NaN for anything missing or not a number."""
    if v is None or isinstance(v, bool):
        return math.nan
    try:
        f = float(v)
    except (TypeError, ValueError):
        return math.nan
    return f if math.isfinite(f) else math.nan


def ok(*vals: Any) -> bool:
    return all(math.isfinite(num(v)) for v in vals)


def pos(*vals: Any) -> bool:
    return all(math.isfinite(num(v)) and num(v) > 0 for v in vals)


def fmt_count(n: Any) -> str:
    x = num(n)
    if not math.isfinite(x):
        return "—"
    for suffix, scale in (("P", 1e15), ("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{suffix}"
    return f"{x:.3g}"


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


class _MinorLog(ticker.Locator):
    """Minor ticks of a log axis: every integer multiple on short ranges, only 2x and 5x on long ones (fewer
    ticks to lay out: a tick is two artists, and matplotlib lays each out)."""

    def __call__(self) -> Sequence[float]:
        vmin, vmax = sorted(self.axis.get_view_interval())
        return self.tick_values(vmin, vmax)

    def tick_values(self, vmin: float, vmax: float) -> Sequence[float]:
        decades = math.log10(vmax / vmin) if vmin > 0 and vmax > 0 else 99.0
        subs = tuple(range(2, 10)) if decades <= 1.0 else ((2.0, 3.0, 5.0) if decades <= 2.5 else (2.0, 5.0))
        return ticker.LogLocator(base=10, subs=subs, numticks=12).tick_values(vmin, vmax)


def log_labels(axis: Any, fmt: Callable[[float], str] = fmt_num) -> None:
    axis.set_major_formatter(_LogLabels(fmt))
    axis.set_minor_formatter(_LogLabels(fmt, minor=True))
    axis.set_minor_locator(_MinorLog())


class _NiceLocator(ticker.Locator):
    """Log-axis ticks at round linear values (2.5, 3, 3.5) when the range is short, decades otherwise."""

    def __init__(self) -> None:
        self._lin = ticker.MaxNLocator(nbins=6, steps=[1, 2, 2.5, 5, 10])
        self._log = ticker.LogLocator(base=10, numticks=8)

    def set_axis(self, axis: Any) -> None:
        super().set_axis(axis)
        self._lin.set_axis(axis)
        self._log.set_axis(axis)

    def __call__(self) -> Sequence[float]:
        vmin, vmax = sorted(self.axis.get_view_interval())
        return self.tick_values(vmin, vmax)

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


def _yerr(y: float, lo: Any, hi: Any) -> list[list[float]] | None:
    if not (ok(lo) and ok(hi)):
        return None
    return [[max(0.0, y - num(lo))], [max(0.0, num(hi) - y)]]


def hero_point(ax: Any, x: Any, y: Any, lo: Any = None, hi: Any = None, label: str = "hero forecast (90%)") -> bool:
    if not (pos(x) and ok(y)):
        return False
    yerr = _yerr(num(y), lo, hi)
    if yerr is not None:
        ax.errorbar([num(x)], [num(y)], yerr=yerr, fmt="none", ecolor=HERO["color"], elinewidth=1.3, capsize=4,
                    zorder=5)
    ax.plot([num(x)], [num(y)], linestyle="none", label=label, **HERO)
    return True


def empty(ax: Any, message: str) -> None:
    """An axis that says why it has nothing to show."""
    ax.set_axis_off()
    ax.text(0.5, 0.5, _wrap(tx(message, 400), 48), ha="center", va="center", fontsize=8, color="#666666",
            transform=ax.transAxes)


def _wrap(s: str, width: int) -> str:
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
    per = (longest * 0.075 + 0.55)  # inches per entry at 7.5 pt
    ncols = max(1, min(len(handles), int(width_in / per)))
    fig.legend(handles, labels, loc="outside lower center", ncols=ncols, fontsize=7.5, handlelength=2.6,
               columnspacing=1.4)


def _finite_arrays(*cols: Sequence[Any]) -> tuple[np.ndarray, ...]:
    arrs = [np.array([num(v) for v in c], dtype=float) for c in cols]
    if not arrs:
        return ()
    good = np.ones(len(arrs[0]), dtype=bool)
    for a in arrs:
        good &= np.isfinite(a)
    return tuple(a[good] for a in arrs)


def _grid(lo: float, hi: float, n: int = 120) -> np.ndarray:
    return np.geomspace(lo, hi, n)


# ---------------------------------------------------------------------------------------------- specs


@dataclass
class FigureSpec:
    """One figure: ``key`` (HTML id), ``title`` and ``caption`` (plain text, escaped by the template), the height
    in inches at :data:`WIDTH_IN` and the drawing function."""

    key: str
    title: str
    caption: str
    height: float
    draw: Callable[[FigureBase], None]


_ID_REF = re.compile(r'(\bid="|href="#|url\(#)([^")]+)')


def to_svg(spec: FigureSpec, prefix: str | None = None, context: str = "") -> str:
    """The figure as an inline ``<svg>`` element: no XML prolog, no metadata (no URLs at all), ids prefixed so
    that several figures can share one HTML document, scaled by CSS (``viewBox`` kept)."""
    buf = io.StringIO()
    with rc_context(RC):
        fig = Figure(figsize=(WIDTH_IN, spec.height), layout="constrained")
        try:
            spec.draw(fig)
        except Exception as exc:  # noqa: BLE001 - a broken figure must not take the report down
            fig.clear()
            empty(fig.add_subplot(), f"this figure could not be drawn: {type(exc).__name__}: {exc}")
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, flags=re.S)
    p = (prefix or spec.key) + "-"
    svg = _ID_REF.sub(lambda m: m.group(1) + p + m.group(2), svg)
    head_end = svg.index(">")
    head = svg[:head_end]
    head = re.sub(r'\s(width|height)="[^"]*"', "", head)
    head = re.sub(r'\sxmlns:xlink="[^"]*"', "", head)
    label = f"{context}: {spec.title}" if context else spec.title
    head += f' class="figure" role="img" aria-label="{html.escape(label, quote=True)}"'
    return head + ">\n<title>" + html.escape(label, quote=False) + "</title>" + svg[head_end + 1:]


def draw_safely(spec: FigureSpec, target: FigureBase) -> None:
    try:
        spec.draw(target)
    except Exception as exc:  # noqa: BLE001
        for ax in list(target.axes):
            ax.remove()
        empty(target.add_subplot(), f"this figure could not be drawn: {type(exc).__name__}: {exc}")


# ---------------------------------------------------------------------------------------------- loss curves


def _joined(frames: Iterable[Any], x: str, y: str) -> tuple[np.ndarray, np.ndarray]:
    """Several runs' (x, y) as one NaN-separated polyline: one artist per variant, not per run."""
    xs, ys = [], []
    for f in frames:
        a, b = _finite_arrays(f[x], f[y])
        keep = (a > 0) & (b > 0)
        if keep.any():
            xs.extend([a[keep], [np.nan]])
            ys.extend([b[keep], [np.nan]])
    if not xs:
        return np.array([]), np.array([])
    return np.concatenate(xs), np.concatenate(ys)


def draw_curves(fig: FigureBase, curves: Any, variant_of: Mapping[str, str], styles: VariantStyles) -> None:
    """Every run's training loss (lines) and evaluation loss (markers) against tokens and against FLOPs."""
    axes = fig.subplots(1, 2, sharey=True)
    by_variant: dict[str, list[tuple[Any, Any]]] = {}
    for run_id, g in curves.groupby("run_id", sort=False):
        tr = g[g["kind"] == "train"].sort_values("step")
        ev = g[g["kind"] == "eval"].sort_values("step")
        by_variant.setdefault(variant_of.get(str(run_id), "?"), []).append((tr, ev))
    names = [n for n in styles.names if n in by_variant] + [n for n in by_variant if n not in styles.names]
    for variant in names:
        st = styles[variant]
        runs = by_variant[variant]
        for ax, x in zip(axes, ("tokens", "flops")):
            xs, ys = _joined((tr for tr, _ in runs), x, "loss")
            if len(xs):
                ax.plot(xs, ys, color=st["color"], linestyle=st["linestyle"], linewidth=0.8, alpha=0.55)
            xe, ye = _joined((ev for _, ev in runs), x, "eval_loss")
            if len(xe):
                ax.plot(xe, ye, linestyle="none", marker=st["marker"], markersize=2.8, color=st["color"], alpha=0.85)
    count_axis(axes[0], "tokens seen")
    flops_axis(axes[1], "compute (FLOPs)")
    loss_axis(axes[0])
    axes[1].tick_params(labelleft=True)
    axes[0].set_title("loss vs tokens")
    axes[1].set_title("loss vs compute")
    handles = [styles.handle(n) for n in names] + [
        Line2D([], [], color=MUTED, linewidth=0.9), Line2D([], [], color=MUTED, marker="o", linestyle="none", ms=3)]
    fig_legend(fig, handles, [tx(n) for n in names] + ["train loss", "eval loss"])


# ---------------------------------------------------------------------------------------------- scaling law


def chinchilla_loss(p: Mapping[str, Any], n: np.ndarray, d: np.ndarray) -> np.ndarray:
    E, A, alpha = num(p.get("E")), num(p.get("A")), num(p.get("alpha"))
    out = E + A / n**alpha
    if ok(p.get("B"), p.get("beta")):
        out = out + num(p["B"]) / d ** num(p["beta"])
    return out


def draw_scaling(
    fig: FigureBase,
    runs: Any,
    law: Mapping[str, Any] | None,
    hero: Mapping[str, Any] | None,
    styles: VariantStyles,
    *,
    lvc: Mapping[str, Any] | None = None,
    by_variant: Mapping[str, Any] | None = None,
    band: Sequence[Mapping[str, Any]] | None = None,
) -> None:
    """Final loss against compute and against parameters, the fitted law along the hero's tokens per parameter
    (extrapolated to the hero, with the forecast's 90% interval) and the compute-optimal frontier."""
    ax_c, ax_n = fig.subplots(1, 2, sharey=True)
    done = runs[(runs["status"] == "done")] if "status" in runs else runs
    in_law = {str(r.get("run")) for r in (law or {}).get("residuals") or []}
    for variant, g in done.groupby("variant", sort=False):
        st = styles[variant]
        used = g["run_id"].astype(str).isin(in_law) if "run_id" in g else np.zeros(len(g), dtype=bool)
        for ax, x in ((ax_c, "flops"), (ax_n, "params")):
            if in_law:  # the runs the law was fitted to stand out; the others (untuned, other variants) recede
                xs, ys = _finite_arrays(g.loc[~used, x], g.loc[~used, "loss"])
                ax.plot(xs, ys, linestyle="none", marker=st["marker"], color=st["color"], markersize=3.5, alpha=0.35,
                        markeredgewidth=0)
                xs, ys = _finite_arrays(g.loc[used, x], g.loc[used, "loss"])
                ax.plot(xs, ys, linestyle="none", marker=st["marker"], color=st["color"], markersize=5.5,
                        markeredgecolor="black", markeredgewidth=0.7, zorder=5)
                ax.plot([], [], linestyle="none", marker=st["marker"], color=st["color"], markersize=5, label=tx(variant))
            else:
                xs, ys = _finite_arrays(g[x], g["loss"])
                ax.plot(xs, ys, linestyle="none", marker=st["marker"], color=st["color"], markersize=4.5, alpha=0.85,
                        markeredgecolor="white", markeredgewidth=0.4, label=tx(variant))
    if in_law:
        ax_c.plot([], [], linestyle="none", marker="o", markerfacecolor="white", markeredgecolor="black",
                  markeredgewidth=0.7, label="runs in the fit (outlined)")
    hero = hero or {}
    p = (law or {}).get("params") or {}
    k_ladder = _flops_ratio(done)
    hn, hd = num(hero.get("params")), num(hero.get("tokens"))
    hc = num(hero.get("flops")) if ok(hero.get("flops")) else (6 * hn * hd * k_ladder if pos(hn, hd) else math.nan)
    nmin = float(np.nanmin(done["params"])) if len(done) and "params" in done else math.nan
    if ok(p.get("E"), p.get("A"), p.get("alpha")) and pos(nmin):
        line = (law or {}).get("line") if (law or {}).get("degenerate") else None
        nmax = hn if pos(hn) else float(np.nanmax(done["params"]))
        ns = _grid(nmin / 1.3, max(nmax, nmin * 2))
        if line and ok(line.get("coef"), line.get("slope")):
            ds = num(line["coef"]) * ns ** num(line["slope"])
            label = "fitted law (reduced: tokens tied to params)"
        elif pos(hn, hd):
            ds = ns * (hd / hn)
            label = f"fitted law at {hd / hn:.3g} tokens/param"
        else:
            ds = ns * 20.0
            label = "fitted law at 20 tokens/param"
        ls = chinchilla_loss(p, ns, ds)
        cs = 6 * ns * ds * _k_interp(ns, done, k_ladder, hn, hc, hd)
        ax_c.plot(cs, ls, color=FIT_COLOR, linewidth=1.6, label=label, zorder=4)
        ax_n.plot(ns, ls, color=FIT_COLOR, linewidth=1.6, label=label, zorder=4)
        if ok(p.get("B"), p.get("beta")) and not (law or {}).get("degenerate"):
            co = (law or {}).get("compute_optimal") or {}
            if co.get("identifiable", True):
                c6 = _grid(float(np.nanmin(done["flops"])) / k_ladder / 1.5, (hc / k_ladder if pos(hc) else
                           float(np.nanmax(done["flops"])) / k_ladder * 3))
                a_, b_ = num(p["alpha"]), num(p["beta"])
                G = (a_ * num(p["A"]) / (b_ * num(p["B"]))) ** (1 / (a_ + b_))
                n_opt = G * (c6 / 6) ** (b_ / (a_ + b_))
                d_opt = (c6 / 6) / n_opt
                ax_c.plot(c6 * k_ladder, chinchilla_loss(p, n_opt, d_opt), color=MUTED, linestyle=":",
                          linewidth=1.4, label="compute-optimal frontier of the law", zorder=3)
    if by_variant and len(by_variant) <= 8 and pos(hn, hd):
        for variant, vlaw in by_variant.items():
            vp = (vlaw or {}).get("params") or {}
            if not ok(vp.get("E"), vp.get("A"), vp.get("alpha")) or (vlaw or {}).get("degenerate") or not pos(nmin):
                continue
            ns = _grid(nmin / 1.3, hn)
            ds = ns * (hd / hn)
            st = styles[variant]
            cs = 6 * ns * ds * _k_interp(ns, done, k_ladder, hn, hc, hd)
            ax_c.plot(cs, chinchilla_loss(vp, ns, ds), color=st["color"], linestyle=st["linestyle"],
                      linewidth=0.9, alpha=0.7)
    if band:
        bn, bd, lo, hi = _finite_arrays([b.get("params") for b in band], [b.get("tokens") for b in band],
                                        [b.get("lo") for b in band], [b.get("hi") for b in band])
        if len(bn) >= 2:
            bc = 6 * bn * bd * _k_interp(bn, done, k_ladder, hn, hc, hd)
            ax_c.fill_between(bc, lo, hi, color=FIT_COLOR, alpha=0.13, linewidth=0, label="90% prediction interval")
            ax_n.fill_between(bn, lo, hi, color=FIT_COLOR, alpha=0.13, linewidth=0)
    if lvc and (lvc.get("params") or {}) and lvc.get("source") == "frontier" and pos(hc):
        q = lvc["params"]
        pts = lvc.get("points") or []
        if ok(q.get("E"), q.get("C0"), q.get("gamma")) and pts:
            kp = _points_ratio(pts, k_ladder)
            xs = _grid(min(num(pt.get("flops")) for pt in pts) / kp * k_ladder, hc)
            ax_c.plot(xs, num(q["E"]) + (num(q["C0"]) / (xs / k_ladder * kp)) ** num(q["gamma"]), color="#666666",
                      linestyle="--", linewidth=1.0, label="L(C) fit to the frontier runs", zorder=3)
    hero_point(ax_c, hc, hero.get("loss"), hero.get("lo"), hero.get("hi"))
    hero_point(ax_n, hn, hero.get("loss"), hero.get("lo"), hero.get("hi"))
    flops_axis(ax_c)
    count_axis(ax_n, "parameters (N)")
    loss_axis(ax_c, "final eval loss (nats/token)")
    ax_n.tick_params(labelleft=True)
    ax_c.set_title("loss vs compute")
    ax_n.set_title("loss vs parameters")
    handles, labels = ax_c.get_legend_handles_labels()
    h2, l2 = ax_n.get_legend_handles_labels()
    for h, lbl in zip(h2, l2):
        if lbl not in labels:
            handles.append(h)
            labels.append(lbl)
    fig_legend(fig, handles, labels)


def _flops_ratio(runs: Any) -> float:
    """The ladder's FLOPs over 6 N D (attention and embeddings make it > 1 for small models)."""
    try:
        r = np.asarray(runs["flops"], float) / (6 * np.asarray(runs["params"], float) * np.asarray(runs["tokens"], float))
        r = r[np.isfinite(r) & (r > 0)]
        return float(np.median(r)) if len(r) else 1.0
    except (KeyError, TypeError, ValueError):
        return 1.0


def _points_ratio(points: Sequence[Mapping[str, Any]], default: float) -> float:
    r = [num(p.get("flops")) / (6 * num(p.get("params")) * num(p.get("tokens"))) for p in points
         if pos(p.get("flops"), p.get("params"), p.get("tokens"))]
    return float(np.median(r)) if r else default


def _k_interp(ns: np.ndarray, runs: Any, k_ladder: float, hn: float, hc: float, hd: float) -> np.ndarray:
    """FLOPs / 6ND along a curve: the ladder's ratio up to its largest model, moving (in log N) to the hero's."""
    if not pos(hn, hc, hd):
        return np.full_like(ns, k_ladder)
    k_hero = hc / (6 * hn * hd)
    n_top = float(np.nanmax(runs["params"])) if len(runs) else hn
    if not pos(n_top) or hn <= n_top:
        return np.full_like(ns, k_ladder)
    t = np.clip((np.log(ns) - math.log(n_top)) / (math.log(hn) - math.log(n_top)), 0.0, 1.0)
    return np.exp((1 - t) * math.log(k_ladder) + t * math.log(k_hero))


# ---------------------------------------------------------------------------------------------- IsoFLOP


def _budget_colors(n: int) -> list[str]:
    from matplotlib import colormaps

    cmap = colormaps["viridis"]
    return [cmap(0.12 + 0.72 * i / max(1, n - 1)) for i in range(n)]


def draw_isoflop(fig: FigureBase, iso: Mapping[str, Any], hero: Mapping[str, Any] | None) -> None:
    """Loss against model size per compute budget with the fitted IsoFLOP curves and their minima; the optimal
    parameters and tokens against compute with their power laws, extrapolated to the hero's compute."""
    ax_l, ax_r = fig.subplots(1, 2)
    budgets = [b for b in iso.get("budgets") or [] if pos(b.get("flops"))]
    colors = _budget_colors(len(budgets))
    resid = iso.get("residuals") or []
    shape = iso.get("shape") or {}
    bl = np.log([num(b["flops"]) for b in budgets]) if budgets else np.array([])
    groups: dict[int, list[dict]] = {}
    for r in resid:
        if not pos(r.get("flops"), r.get("params"), r.get("loss")) or not len(bl):
            continue
        j = int(np.argmin(np.abs(bl - math.log(num(r["flops"])))))
        if abs(bl[j] - math.log(num(r["flops"]))) < 0.25:
            groups.setdefault(j, []).append(r)
    for j, b in enumerate(budgets):
        col = colors[j]
        rows = groups.get(j, [])
        label = f"C = {num(b['flops']):.2g} FLOPs"
        if rows:
            xs, ys = _finite_arrays([r["params"] for r in rows], [r["loss"] for r in rows])
            ax_l.plot(xs, ys, linestyle="none", marker="o", markersize=3.5, color=col, alpha=0.7)
            curve = _isoflop_curve(rows, shape, iso.get("method"))
            if curve is not None:
                ax_l.plot(curve[0], curve[1], color=col, linewidth=1.4, label=label)
        ci = (b.get("ci90") or {}).get("params_opt")
        xerr = None
        if ci and ok(ci[0], ci[1]) and pos(b.get("params_opt")):
            xerr = [[max(0, num(b["params_opt"]) - num(ci[0]))], [max(0, num(ci[1]) - num(b["params_opt"]))]]
        if pos(b.get("params_opt"), b.get("loss_opt")):
            ax_l.errorbar([num(b["params_opt"])], [num(b["loss_opt"])], xerr=xerr, fmt="D", color=col,
                          markeredgecolor="black", markeredgewidth=0.7, markersize=6, capsize=3, zorder=5,
                          label=None if rows else label)
    ax_l.plot([], [], "D", color="white", markeredgecolor="black", label="fitted minimum (90%)")
    count_axis(ax_l, "parameters (N)")
    loss_axis(ax_l, "final eval loss (nats/token)")
    ax_l.set_title("IsoFLOP profiles")
    legend(ax_l, fontsize=7)

    hero = hero or {}
    hc = num(hero.get("compute"))
    xs = np.array([num(b["flops"]) for b in budgets])
    drew = False
    for key, law_key, marker, name, color in (("params_opt", "n_opt", "o", "N_opt (parameters)", PALETTE[0]),
                                              ("tokens_opt", "d_opt", "s", "D_opt (tokens)", PALETTE[1])):
        ys = np.array([num(b.get(key)) for b in budgets])
        good = np.isfinite(ys) & (ys > 0)
        if not good.any():
            continue
        lo = [num(((b.get("ci90") or {}).get(key) or [None, None])[0]) for b in budgets]
        hi = [num(((b.get("ci90") or {}).get(key) or [None, None])[1]) for b in budgets]
        yerr = np.array([[max(0, y - l) if ok(l) else 0 for y, l in zip(ys, lo)],
                         [max(0, h - y) if ok(h) else 0 for y, h in zip(ys, hi)]])
        ax_r.errorbar(xs[good], ys[good], yerr=yerr[:, good], fmt=marker, color=color, markersize=5, capsize=3,
                      label=name)
        law = iso.get(law_key) or {}
        if ok(law.get("k"), law.get("a")):
            top = max(xs[good].max(), hc) if pos(hc) else xs[good].max() * 3
            grid = _grid(xs[good].min() / 1.5, top)
            ax_r.plot(grid, num(law["k"]) * grid ** num(law["a"]), color=color, linewidth=1.2, linestyle="-",
                      label=f"{name.split()[0]} = {num(law['k']):.3g} C^{num(law['a']):.3f}")
            if pos(hc):
                v = num(law["k"]) * hc ** num(law["a"])
                ax_r.plot([hc], [v], marker=marker, color=color, markersize=9, markeredgecolor="black",
                          linestyle="none")
                drew = True
    if drew:
        ax_r.axvline(hc, color=HERO["color"], linewidth=0.8, linestyle=":", label="hero compute")
    flops_axis(ax_r)
    ax_r.set_yscale("log")
    ax_r.set_ylabel("parameters / tokens")
    log_labels(ax_r.yaxis, fmt_count)
    ax_r.set_title("compute-optimal N and D")
    legend(ax_r, fontsize=7)


def _isoflop_curve(rows: list[dict], shape: Mapping[str, Any], method: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """The fitted curve of one budget, recovered exactly from its fitted values (3 linear coefficients)."""
    x, y = _finite_arrays([r.get("params") for r in rows], [r.get("predicted") for r in rows])
    if len(np.unique(np.round(np.log(x), 9))) < 3:
        return None
    lx = np.log(x)
    grid = np.linspace(lx.min() - 0.15, lx.max() + 0.15, 100)
    m = lx.mean()
    if method == "shape" and ok(shape.get("alpha"), shape.get("beta")):
        a, b = num(shape["alpha"]), num(shape["beta"])
        basis = lambda t: np.stack([np.ones_like(t), np.exp(-a * (t - m)), np.exp(b * (t - m))], axis=1)  # noqa: E731
    else:
        basis = lambda t: np.stack([np.ones_like(t), t - m, (t - m) ** 2], axis=1)  # noqa: E731
    coef, *_ = np.linalg.lstsq(basis(lx), y, rcond=None)
    return np.exp(grid), basis(grid) @ coef


# ---------------------------------------------------------------------------------------------- sweeps


def _poly_curve(poly: Sequence[Any], lo: float, hi: float) -> tuple[np.ndarray, np.ndarray] | None:
    if not poly or len(poly) < 3 or not ok(*poly) or not pos(lo, hi):
        return None
    xs = _grid(lo, hi, 80)
    lx = np.log(xs)
    return xs, num(poly[0]) + num(poly[1]) * lx + num(poly[2]) * lx**2


def draw_sweeps(fig: FigureBase, scales: Sequence[Mapping[str, Any]], axis: str) -> None:
    """Small multiples, one per rung: loss against the swept value (``lr``, ``batch_tokens`` or
    ``aspect_ratio``), the fitted parabola in log x, the optimum and its 90% interval."""
    key = {"lr": "lr", "batch": "batch_tokens", "aspect": "aspect_ratio"}[axis]
    shown = [s for s in scales if s.get("points")]
    if not shown:
        empty(fig.add_subplot(), "no rung has points to show")
        return
    ncols = min(3, len(shown))
    nrows = math.ceil(len(shown) / ncols)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    xlabel = {"lr": "peak learning rate", "batch": "batch size (tokens)",
              "aspect": "aspect ratio (d_model / n_layers)"}[axis]
    # one colour per batch size across all panels (LR parabolas at several batch sizes)
    batches = sorted({num(c.get("batch_tokens")) for s in shown for c in (s.get("lr_curves") or [])
                      if pos(c.get("batch_tokens"))}) if axis == "lr" else []
    batch_color = dict(zip(batches, _budget_colors(len(batches))))
    for ax, s in zip(axes.flat, shown):
        pts = s.get("points") or []
        yk = "loss_compared" if axis == "aspect" else "loss"
        for used, face in ((True, FIT_COLOR), (False, "white")):
            group = [p for p in pts if bool(p.get("used")) == used]
            xs, ys = _finite_arrays([p.get(key) for p in group], [p.get(yk) for p in group])
            if len(xs):
                ax.plot(xs, ys, linestyle="none", marker="o", markersize=4.5, markerfacecolor=face,
                        markeredgecolor=FIT_COLOR, markeredgewidth=0.8, zorder=4,
                        label="in fit window" if used else "outside the fit window")
        xs_all = [num(p.get(key)) for p in pts if pos(p.get(key))]
        if not xs_all:
            empty(ax, "no finite values")
            continue
        lo, hi = min(xs_all) / 1.5, max(xs_all) * 1.5
        opt = (s.get("lr") if axis == "lr" else (s.get("batch") if axis == "batch" else s.get("fit"))) or {}
        curves = (s.get("lr_curves") or []) if axis == "lr" else []
        if len(curves) > 1:
            for c in curves:
                cv = _poly_curve(c.get("poly") or [], lo, hi)
                if cv:
                    ax.plot(*cv, color=batch_color.get(num(c.get("batch_tokens")), PALETTE[0]), linewidth=1.2,
                            label=f"fit at batch {fmt_count(c.get('batch_tokens'))} tokens")
        else:
            cv = _poly_curve(opt.get("poly") or [], lo, hi)
            if cv:
                ax.plot(*cv, color=PALETTE[0], linewidth=1.4, label="fit (parabola in log x)")
        ys_all = [num(p.get(yk)) for p in pts if ok(p.get(yk))]
        if ys_all:
            span = (max(ys_all) - min(ys_all)) or abs(max(ys_all)) * 0.01 or 0.01
            ax.set_ylim(min(ys_all) - 0.25 * span, max(ys_all) + 0.25 * span)
        ax.set_xscale("log")
        ax.set_xlim(lo, hi)
        if pos(opt.get("opt")):
            o = num(opt["opt"])
            ci = list(opt.get("ci90") or [None, None]) + [None, None]
            if ok(ci[0]) or ok(ci[1]):
                a = max(num(ci[0]) if ok(ci[0]) else lo, lo)
                b = min(num(ci[1]) if ok(ci[1]) else hi, hi)
                if a < b:
                    ax.axvspan(a, b, color=PALETTE[0], alpha=0.10, linewidth=0, label="optimum, 90% interval")
            if lo <= o <= hi:
                ax.axvline(o, color=PALETTE[0], linestyle="--", linewidth=1.0, label="fitted optimum")
            else:
                ax.annotate(f"optimum {fmt_num(o)} {'→' if o > hi else '←'}", xy=(0.97 if o > hi else 0.03, 0.95),
                            xycoords="axes fraction", ha="right" if o > hi else "left", va="top", fontsize=7,
                            color=PALETTE[1])
        status = "skipped" if s.get("skipped") else opt.get("status")
        flag = {"edge": "optimum at the grid's edge", "no_minimum": "no minimum", "skipped": "not fitted"}.get(status)
        if flag:
            ax.text(0.03, 0.03, flag, transform=ax.transAxes, fontsize=7, color=PALETTE[1], va="bottom")
        ax.set_title(f"{tx(s.get('scale'), 18)} · C = {num(s.get('flops')):.2g}", fontsize=8.5)
        log_labels(ax.xaxis, fmt_count if axis == "batch" else fmt_num)
        ax.set_xlabel(xlabel)
        if ax in axes[:, 0]:
            ax.set_ylabel("loss (nats/token)")
        ax.yaxis.set_major_formatter(plain_formatter())
    for ax in list(axes.flat)[len(shown):]:
        ax.set_axis_off()
    handles, labels = [], []
    for ax in axes.flat:
        for h, lbl in zip(*ax.get_legend_handles_labels()):
            if lbl not in labels:
                handles.append(h)
                labels.append(lbl)
    fig_legend(fig, handles, labels)


def draw_trends(fig: FigureBase, panels: Sequence[tuple[Mapping[str, Any] | None, str, str]]) -> None:
    """Side-by-side power laws ``y = k x^a`` of a per-rung optimum (``trend`` dicts of ``hparams.Trend``),
    extrapolated (dashed) to the hero with the law's 90% interval there."""
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (trend, ylabel, title) in zip(axes, panels):
        trend = trend or {}
        pts = trend.get("points") or []
        law = trend.get("law") or {}
        versus = trend.get("versus") or "flops"
        xs, ys = _finite_arrays([p.get("x") for p in pts], [p.get("y") for p in pts])
        if not len(xs) and not law:
            empty(ax, trend.get("reason") or "no data")
            ax.set_title(title)
            continue
        for p in pts:
            if not pos(p.get("x"), p.get("y")):
                continue
            ci = p.get("y_ci90") or [None, None]
            yerr = _yerr(num(p["y"]), ci[0] if ci else None, ci[1] if ci and len(ci) > 1 else None)
            ax.errorbar([num(p["x"])], [num(p["y"])], yerr=yerr, fmt="o", color=PALETTE[0], markersize=5,
                        capsize=3)
        ax.plot([], [], "o", color=PALETTE[0], label="per rung (90%)")
        hx = num(trend.get("hero_x"))
        if ok(law.get("k"), law.get("a")) and len(xs):
            xmax = xs.max()
            g1 = _grid(xs.min() / 1.3, xmax * 1.05, 40)
            k, a = num(law["k"]), num(law["a"])
            var = "C" if versus == "flops" else "N"
            ax.plot(g1, k * g1**a, color=FIT_COLOR, linewidth=1.4, label=f"fit: {k:.3g} {var}^{a:.3f}")
            if pos(hx) and hx > xmax:
                g2 = _grid(xmax, hx, 40)
                ax.plot(g2, k * g2**a, color=FIT_COLOR, linewidth=1.2, linestyle="--", label="extrapolation")
        hci = trend.get("hero_ci90") or [None, None]
        hero_point(ax, hx, trend.get("hero_value"), hci[0] if hci else None, hci[1] if hci and len(hci) > 1 else None,
                   label="hero (90% interval of the law)")
        if trend.get("reason") and not law:
            ax.text(0.02, 0.02, _wrap(tx(trend["reason"], 200), 60), transform=ax.transAxes, fontsize=6.5,
                    color="#666666", va="bottom")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("compute (FLOPs)" if versus == "flops" else "parameters (N)")
        log_labels(ax.xaxis, fmt_pow if versus == "flops" else fmt_count)
        ax.set_ylabel(ylabel)
        log_labels(ax.yaxis, fmt_count if "batch" in ylabel else fmt_num)
        ax.set_title(title)
        legend(ax, fontsize=7)


# ---------------------------------------------------------------------------------------------- ablations


def _law_c(law: Mapping[str, Any] | None, cs: np.ndarray) -> np.ndarray | None:
    if not law or not ok(law.get("E"), law.get("C0"), law.get("g")):
        return None
    return num(law["E"]) + (num(law["C0"]) / cs) ** num(law["g"])


def _trend_value(trend: Mapping[str, Any], cs: np.ndarray) -> np.ndarray | None:
    if not trend or not ok(trend.get("intercept"), trend.get("slope")):
        return None
    a, b = num(trend["intercept"]), num(trend["slope"])
    if trend.get("form") == "saturating" and ok(trend.get("g"), trend.get("c_ref")):
        return a + b * (cs / num(trend["c_ref"])) ** (-num(trend["g"]))
    return a + b * np.log10(cs)


def draw_tie(fig: FigureBase, tie: Mapping[str, Any], styles: VariantStyles, tied_name: str, untied_name: str) -> None:
    """Tied vs untied embeddings per rung (losses at matched compute, each variant's law) and their difference
    along the ladder with the fitted trend extrapolated to the hero."""
    ax_l, ax_r = fig.subplots(1, 2)
    rows = [r for r in tie.get("scales") or [] if pos(r.get("flops"))]
    hero_c = num(tie.get("hero_flops"))
    for name, key, vname in (("tied", "loss_tied", tied_name), ("untied", "loss_untied", untied_name)):
        st = styles[vname]
        xs, ys = _finite_arrays([r.get("flops") for r in rows], [r.get(key) for r in rows])
        ax_l.plot(xs, ys, linestyle="none", marker=st["marker"], color=st["color"], markersize=6,
                  label=f"{name} (best per rung)")
        if len(xs):
            top = max(xs.max(), hero_c) if pos(hero_c) else xs.max()
            cs = _grid(xs.min() / 1.3, top)
            yl = _law_c(((tie.get("laws") or {}).get(name)), cs)
            if yl is not None:
                ax_l.plot(cs, yl, color=st["color"], linestyle=st["linestyle"], linewidth=1.2, label=f"{name}: L(C) fit")
    flops_axis(ax_l)
    loss_axis(ax_l, "loss at matched compute (nats/token)")
    ax_l.set_title("loss per variant")
    legend(ax_l, fontsize=7)

    good = [r for r in rows if ok(r.get("diff"))]
    xs = np.array([num(r["flops"]) for r in good])
    ys = np.array([num(r["diff"]) for r in good])
    if len(good):
        se = np.array([1.645 * num(r.get("diff_se")) if ok(r.get("diff_se")) else 0.0 for r in good])
        ax_r.errorbar(xs, ys, yerr=se, fmt="o", color=PALETTE[2], capsize=3, markersize=5,
                      label="untied − tied per rung (90%)")
    trend = tie.get("trend") or {}
    if len(good):
        top = max(xs.max(), hero_c) if pos(hero_c) else xs.max() * 3
        cs = _grid(xs.min() / 1.3, top)
        yv = _trend_value(trend, cs)
        if yv is not None:
            ax_r.plot(cs, yv, color=FIT_COLOR, linewidth=1.3, label="trend")
        alt = _trend_value(tie.get("trend_loglinear") or {}, cs)
        if alt is not None:
            ax_r.plot(cs, alt, color=MUTED, linewidth=1.0, linestyle="--", label="trend, linear in log C")
    h = tie.get("hero") or {}
    ci = h.get("diff_ci90") or [None, None]
    hero_point(ax_r, h.get("flops", hero_c), h.get("diff"), ci[0] if ci else None, ci[1] if ci else None)
    ax_r.axhline(0, color="#444444", linewidth=0.8)
    cross = tie.get("crossover") or {}
    if cross.get("status") in ("within_range", "beyond_range") and pos(cross.get("flops")):
        ax_r.axvline(num(cross["flops"]), color=PALETTE[1], linestyle=":", linewidth=1.2, label="crossover")
    if not len(good):
        empty(ax_r, tie.get("reason") or "no rung has both variants")
    flops_axis(ax_r)
    ax_r.set_ylabel("loss(untied) − loss(tied) (nats/token)\n> 0: tied better")
    ax_r.set_title("difference along the ladder")
    legend(ax_r, fontsize=7)


# ---------------------------------------------------------------------------------------------- residuals


def draw_residuals(fig: FigureBase, residuals: Sequence[Mapping[str, Any]], backtest: Mapping[str, Any] | None,
                   variant_of: Mapping[str, str], styles: VariantStyles) -> None:
    """Residuals of the loss law (percent, per variant) against compute, and the backtest: the largest rung's
    observed loss against the forecast of a fit made without it."""
    held = [r for r in (backtest or {}).get("held_out") or [] if ok(r.get("loss"), r.get("predicted"))]
    ax_l, ax_r = fig.subplots(1, 2)
    by_var: dict[str, list[Mapping[str, Any]]] = {}
    for r in residuals:
        by_var.setdefault(variant_of.get(str(r.get("run")), "?"), []).append(r)
    for variant in [n for n in styles.names if n in by_var] + [n for n in by_var if n not in styles.names]:
        st = styles[variant]
        xs, ys = _finite_arrays([r.get("flops") for r in by_var[variant]], [r.get("pct") for r in by_var[variant]])
        ax_l.plot(xs, ys, linestyle="none", marker=st["marker"], color=st["color"], markersize=4, alpha=0.85,
                  label=tx(variant))
    ax_l.axhline(0, color="#444444", linewidth=0.8)
    flops_axis(ax_l)
    ax_l.set_ylabel("residual: (observed − fitted) / fitted (%)")
    ax_l.set_title("residuals of the loss law")
    if residuals:
        legend(ax_l, fontsize=6.5, ncols=2)
    else:
        empty(ax_l, "no residuals")
    if held:
        allv = [num(r["loss"]) for r in held] + [num(r["predicted"]) for r in held]
        lo, hi = min(allv), max(allv)
        mid, half = (lo + hi) / 2, max((hi - lo) / 2, 0.012 * (lo + hi) / 2)
        line = np.array([mid - 1.25 * half, mid + 1.25 * half])
        ax_r.fill_between(line, line * 0.99, line * 1.01, color=MUTED, alpha=0.15, linewidth=0, label="±1%")
        ax_r.plot(line, line, color="#444444", linewidth=0.8, label="forecast = observed")
        for r in held:
            st = styles[variant_of.get(str(r.get("run")), "?")]
            ax_r.plot([num(r["predicted"])], [num(r["loss"])], linestyle="none", marker=st["marker"],
                      color=st["color"], markersize=7, markeredgecolor="black", markeredgewidth=0.6, zorder=5)
        ax_r.set_xlim(line)
        ax_r.set_ylim(line)
        ax_r.set_xlabel("forecast without the held-out rung (nats/token)")
        ax_r.set_ylabel("observed loss (nats/token)")
        ax_r.set_title(f"backtest: held-out {tx((backtest or {}).get('holdout') or 'size')} rung")
        legend(ax_r, fontsize=7, loc="lower right")
    else:
        empty(ax_r, (backtest or {}).get("skipped") or "no backtest")
        ax_r.set_title("backtest")


# ---------------------------------------------------------------------------------------------- health


def draw_health(fig: FigureBase, runs: Any, styles: VariantStyles) -> None:
    """Throughput and model FLOPs utilisation against model size, per variant; runs that did not finish marked."""
    ax_l, ax_r = fig.subplots(1, 2)
    for variant, g in runs.groupby("variant", sort=False):
        st = styles[variant]
        for ax, col, scale in ((ax_l, "tokens_per_s", 1.0), (ax_r, "mfu", 100.0)):
            if col not in g:
                continue
            xs, ys = _finite_arrays(g["params"], g[col])
            ax.plot(xs, ys * scale, linestyle="none", marker=st["marker"], color=st["color"], markersize=4.5,
                    alpha=0.85, label=tx(variant))
    if "status" in runs:
        bad = runs[runs["status"] != "done"]
        for ax, col, scale in ((ax_l, "tokens_per_s", 1.0), (ax_r, "mfu", 100.0)):
            if col in bad and len(bad):
                xs, ys = _finite_arrays(bad["params"], bad[col])
                if len(xs):
                    ax.plot(xs, ys * scale, linestyle="none", marker="x", color="#C00000", markersize=8,
                            markeredgewidth=1.6, label="diverged / failed")
    count_axis(ax_l, "parameters (N)")
    count_axis(ax_r, "parameters (N)")
    ax_l.set_yscale("log")
    log_labels(ax_l.yaxis, fmt_count)
    ax_l.set_ylabel("throughput (tokens/s)")
    ax_r.set_ylabel("MFU (%)")
    ax_r.set_ylim(bottom=0)
    ax_l.set_title("throughput")
    ax_r.set_title("model FLOPs utilisation")
    handles, labels = ax_l.get_legend_handles_labels()
    fig_legend(fig, handles, labels)


# ---------------------------------------------------------------------------------------------- tasks


def draw_task(fig: FigureBase, task: Mapping[str, Any]) -> None:
    """Two-step task forecast: task loss against compute (step 1) and accuracy against task loss (step 2), with
    the hero's forecast and intervals."""
    ax_l, ax_r = fig.subplots(1, 2)
    pts = task.get("points") or []
    hero = task.get("hero") or {}
    xs, ys = _finite_arrays([p.get("flops") for p in pts], [p.get("loss") for p in pts])
    ax_l.plot(xs, ys, linestyle="none", marker="o", color=PALETTE[0], markersize=4, alpha=0.8, label="ladder runs")
    curves = (task.get("curves") or {}).get("step1") or []
    colors = _budget_colors(len(curves)) if len(curves) > 1 else [FIT_COLOR]
    for c, col in zip(curves, colors):
        cx, cy = _finite_arrays(c.get("flops") or [], c.get("loss") or [])
        if len(cx):
            ax_l.plot(cx, cy, color=col, linewidth=1.3, label=tx(c.get("label") or "fit"))
        bx, blo, bhi = _finite_arrays(c.get("flops") or [], c.get("loss_lo") or [], c.get("loss_hi") or [])
        if len(bx) > 1:
            ax_l.fill_between(bx, blo, bhi, color=col, alpha=0.12, linewidth=0)
    li = hero.get("loss_interval") or [None, None]
    hero_point(ax_l, hero.get("flops"), hero.get("loss"), li[0], li[1] if len(li) > 1 else None)
    flops_axis(ax_l)
    ax_l.set_yscale("log")
    ax_l.yaxis.set_major_locator(_NiceLocator())
    ax_l.yaxis.set_major_formatter(plain_formatter())
    ax_l.yaxis.set_minor_locator(ticker.NullLocator())
    ax_l.set_ylabel(f"task loss ({tx(task.get('loss_metric') or 'bpb', 20)}, bits/byte)")
    ax_l.set_title("step 1: task loss vs compute")
    legend(ax_l, fontsize=7)

    ax_, ay_ = _finite_arrays([p.get("loss") for p in pts], [p.get("acc") for p in pts])
    s2 = (task.get("curves") or {}).get("step2") or {}
    if len(ax_) or s2:
        ax_r.plot(ax_, ay_, linestyle="none", marker="o", color=PALETTE[0], markersize=4, alpha=0.8,
                  label="ladder runs")
        cx, cy = _finite_arrays(s2.get("loss") or [], s2.get("acc") or [])
        if len(cx):
            ax_r.plot(cx, cy, color=FIT_COLOR, linewidth=1.3, label="sigmoid fit")
        bx, blo, bhi = _finite_arrays(s2.get("loss") or [], s2.get("acc_lo") or [], s2.get("acc_hi") or [])
        if len(bx) > 1:
            ax_r.fill_between(bx, blo, bhi, color=FIT_COLOR, alpha=0.12, linewidth=0, label="90% interval")
        ai = hero.get("acc_interval") or [None, None]
        if ok(hero.get("loss"), hero.get("acc")):
            xerr = _yerr(num(hero["loss"]), li[0], li[1] if len(li) > 1 else None)
            yerr = _yerr(num(hero["acc"]), ai[0], ai[1] if len(ai) > 1 else None)
            ax_r.errorbar([num(hero["loss"])], [num(hero["acc"])], xerr=xerr, yerr=yerr, fmt="none",
                          ecolor=HERO["color"], capsize=3, elinewidth=1.2, zorder=5)
            ax_r.plot([num(hero["loss"])], [num(hero["acc"])], linestyle="none", label="hero forecast (90%)",
                      **HERO)
        ax_r.set_xlabel("task loss (bits/byte)")
        ax_r.set_ylabel(f"accuracy ({tx(task.get('acc_metric') or 'acc', 20)})")
        ax_r.set_title("step 2: accuracy vs task loss")
        legend(ax_r, fontsize=7)
    else:
        empty(ax_r, "no accuracy metric: loss forecast only")
