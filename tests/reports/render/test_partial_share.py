"""The report's partial score says how far the hero is as the terminal does: never 100% before the end."""

from __future__ import annotations

from ladder.reports.fits.study.forecast_json import Partial, Score
from ladder.reports.render.sections.forecast import _score_text


def test_a_hero_just_short_of_its_tokens_is_not_shown_at_100_percent():
    """Issue 28: a curve at 99.96% of the hero's tokens read "hero at 100% of its tokens" in the report (the
    terminal's score line already said 99.96%)."""
    score = Score(final=False, partial=Partial(available=True, fraction=0.9996, final_forecast=3.0))
    text = _score_text(score)
    assert "hero at 99.96% of its tokens" in text, text
    half = Score(final=False, partial=Partial(available=True, fraction=0.5, final_forecast=3.0))
    assert "hero at 50% of its tokens" in _score_text(half)
