"""The report's sections, in order, from a :class:`~ladder.reports.render.study.StudyData`.

:class:`Builder` holds what every section reads (the fit, validated as ``fit_json``, the runs, the finished runs, one style per variant)
and numbers the figures; each section is a function of the builder in :mod:`ladder.reports.render.sections`.
A section that raises becomes one line saying so, and the rest of the report renders; one that returns None
has nothing to say and is left out.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pandas as pd

from ladder.reports.render.blocks import Fig, Section
from ladder.reports.render.figures.spec import FigureSpec
from ladder.reports.render.figures.style import VariantStyles
from ladder.reports.render.figures.sweeps import draw_sweeps
from ladder.reports.render.sections import (
    ablations,
    forecast,
    headline,
    health,
    hparams,
    in_context,
    rollout,
    runs,
    scaling,
    tasks,
)
from ladder.reports.render.study import StudyData, status_counts, typed_fit

ORDER: tuple[Callable[[Builder], Section | None], ...] = (
    forecast.forecast_vs_actual,
    headline.headline,
    runs.ladder,
    runs.curves,
    scaling.scaling,
    rollout.rollout,
    in_context.in_context,
    scaling.isoflop,
    hparams.hparams,
    ablations.tied,
    ablations.depth,
    health.health,
    tasks.tasks,
    health.reproducibility,
)


class Builder:
    """Builds the report's sections from a :class:`StudyData`."""

    def __init__(self, data: StudyData) -> None:
        self.d = data
        self.fit = data.fit or {}
        self.fit_json = typed_fit(self.fit)  # what every section reads; None without a fit or for a damaged one
        runs = data.runs
        self.runs = runs
        hero = (
            runs["role"].astype(str).str.strip().str.lower() == "hero"
            if len(runs) and "role" in runs
            else pd.Series(False, index=runs.index, dtype=bool)
        )
        # a hero run checks the forecast: it is no rung and no variant of the ladder, and fit leaves it out
        self.ladder_runs = runs[~hero]
        self.hero_runs = runs[hero]
        ladder = self.ladder_runs
        # the ladder's finished runs; a hero run is drawn as the forecast's check, never as a rung
        self.done = (
            ladder[(ladder["status"] == "done") & pd.to_numeric(ladder["loss"], errors="coerce").notna()]
            if len(ladder)
            else ladder
        )
        self.styles = VariantStyles(runs["variant"].astype(str).tolist() if len(runs) else [])
        for name in self.fit_json.loss_by_variant if self.fit_json is not None else ():
            self.styles.add(name)
        self.styles.add("tied")
        self.styles.add("untied")
        self.variant_of = dict(zip(runs["run_id"].astype(str), runs["variant"].astype(str))) if len(runs) else {}
        self.fig_count = 0

    def figure(self, key: str, title: str, caption: str, height: float, draw: Callable) -> Fig:
        self.fig_count += 1
        return Fig(
            FigureSpec(key=key, title=f"Figure {self.fig_count}. {title}", caption=caption, height=height, draw=draw)
        )

    def small_multiples(self, key: str, title: str, caption: str, scales: list, axis: str, per: int = 9) -> list[Fig]:
        """One figure per ``per`` rungs (3 per row), so that a long ladder stays readable on a page."""
        chunks = [scales[i : i + per] for i in range(0, len(scales), per)] or [[]]
        out = []
        for i, chunk in enumerate(chunks):
            part = f" ({i + 1} of {len(chunks)})" if len(chunks) > 1 else ""
            nrows = max(1, math.ceil(len(chunk) / 3))
            out.append(
                self.figure(
                    f"{key}-{i + 1}" if len(chunks) > 1 else key,
                    title + part,
                    caption,
                    1.0 + 2.2 * nrows,
                    lambda fig, c=chunk: draw_sweeps(fig, c, axis),
                )
            )
        return out

    def status_counts(self) -> dict[str, int]:
        """The ladder's runs per status (hero runs apart: :meth:`hero_counts`), as ``ladder fit`` counts them."""
        return status_counts(self.ladder_runs)

    def hero_counts(self) -> dict[str, int]:
        return status_counts(self.hero_runs)

    def sections(self) -> list[Section]:
        out = []
        for make in ORDER:
            try:
                sec = make(self)
            except Exception as exc:  # noqa: BLE001 - one broken section must not lose the report
                name = make.__name__
                sec = Section(name, name.capitalize()).missing(
                    f"this section could not be built: {type(exc).__name__}: {exc}"
                )
            if sec is not None:  # a section with nothing to say (Forecast vs actual before a score) is left out
                out.append(sec)
        for i, sec in enumerate(out, 1):
            sec.number = i
        return out
