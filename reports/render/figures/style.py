"""The figures' look: the matplotlib rc (no pyplot, no GUI), the palette, one stable style per variant, and
:func:`tx`, which makes a user string safe as matplotlib text.

Conventions: one colour, marker and line style per variant (:class:`VariantStyles`: a stable mapping kept across
all figures, readable in greyscale because marker and line style vary with the colour); the hero forecast is a
black star (:data:`HERO`). User strings (study names, variants, labels) go through :func:`tx`: matplotlib would
read ``$...$`` in them as mathtext, and a legend label starting with ``_`` would be hidden.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from matplotlib.lines import Line2D

WIDTH_IN = 7.5  # natural width of every figure; the PDF scales heights to its text width

PALETTE = (  # Okabe-Ito first (colour-blind safe), then Paul Tol's muted
    "#0072B2",
    "#D55E00",
    "#009E73",
    "#CC79A7",
    "#E69F00",
    "#56B4E9",
    "#332288",
    "#882255",
    "#117733",
    "#999933",
    "#AA4499",
    "#44AA99",
)
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", "h", ">", "p", "*")
LINESTYLES = ("-", "--", "-.", ":", (0, (6, 1.5, 1, 1.5, 1, 1.5)), (0, (9, 2.5)))
HERO = {"color": "#111111", "marker": "*", "ms": 13, "mec": "white", "mew": 0.8, "zorder": 6}
ACTUAL = {
    "color": "#d6604d",
    "marker": "D",
    "ms": 10,
    "mfc": "none",
    "mec": "#d6604d",
    "mew": 1.8,
    "zorder": 7,
}  # hollow: the star shows through
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
            [],
            [],
            color=st["color"],
            marker=st["marker"] if marker else None,
            linestyle=st["linestyle"] if line else "none",
            markersize=5,
            linewidth=1.4,
        )


def tx(value: Any, limit: int = 60) -> str:
    """A user string made safe as matplotlib text: ``$`` escaped (no mathtext), not hidden as ``_label``."""
    s = str(value)
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    s = s.replace("$", r"\$")
    return " " + s if s.startswith("_") else s


def budget_colors(n: int) -> list[str]:
    """``n`` colours along viridis: compute budgets, batch sizes, task-loss curves (ordered, not categorical)."""
    from matplotlib import colormaps

    cmap = colormaps["viridis"]
    return [cmap(0.12 + 0.72 * i / max(1, n - 1)) for i in range(n)]
