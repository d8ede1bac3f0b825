"""The loss forecast's track record on published ladders: median |error| against the compute distance, one line
per ladder (:mod:`ladder.reports.fits.loss.track_record`), with the hero's distance marked."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from matplotlib.figure import FigureBase

from ladder.reports.render.figures.axes import legend
from ladder.reports.render.figures.style import MUTED, PALETTE, tx


def draw_track_record(
    fig: FigureBase, by_ladder: Mapping[str, Sequence[tuple[str, float]]], bands: Sequence[str], hero_band: str | None
) -> None:
    ax = fig.subplots()
    pos = {b: i for i, b in enumerate(bands)}
    for i, (name, points) in enumerate(sorted(by_ladder.items())):
        pts = [(pos[b], v) for b, v in points if b in pos]
        if not pts:
            continue
        xs, ys = zip(*pts)
        ax.plot(xs, ys, marker="o", markersize=4, color=PALETTE[i % len(PALETTE)], label=tx(name))
    if hero_band in pos:
        ax.axvline(pos[hero_band], color=MUTED, linestyle="--", linewidth=1.0)
        ax.annotate("the hero", (pos[hero_band], ax.get_ylim()[1]), ha="center", va="bottom", fontsize=8, color=MUTED)
    ax.set_xticks(range(len(bands)), list(bands))
    ax.set_xlabel("distance: target compute / largest fitted compute")
    ax.set_ylabel("median |forecast − observed| / observed (%)")
    ax.set_title("this engine's forecasts on published ladders")
    legend(ax)
