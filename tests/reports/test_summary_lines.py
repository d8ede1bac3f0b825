"""Lines of `ladder fit`'s terminal summary (reports/summary.py) that must say what fit.json says (retrial7)."""

from __future__ import annotations

from ladder.reports.fits.study.fit_json_trends import HparamLaw
from ladder.reports.summary import _left_out


def _lr_law(excluded: dict, fitted: bool = True) -> HparamLaw:
    law = {"form": "compute", "formula": "lr* = k C^a", "params": {"k": 0.73, "a": -0.17}} if fitted else None
    return HparamLaw.model_validate(
        {"quantity": "lr", "formula": "lr* = k C^a", "law": law, "excluded": excluded, "hero_value": 0.00428}
    )


def test_the_terminal_names_the_rungs_an_lr_law_left_out_and_the_advice():
    """retrial7 `ladder fit lr`: fit.json dropped the two largest rungs (optimum at the grid's edge, 'widen the
    sweep') but the terminal showed only lr*."""
    law = _lr_law(
        {
            "100K": "100K: lr optimum at grid edge (low end; fitted 0.00628, grid 0.005..0.08): widen the sweep",
            "141K": "141K: lr optimum at grid edge (low end; fitted 0.0053, grid 0.005..0.08): widen the sweep",
        }
    )
    line = _left_out("lr*", law)
    assert line is not None and "\n" not in line
    assert "100K (lr optimum at grid edge" in line and "141K (" in line
    assert line.count("widen the sweep") == 1 and line.rstrip().endswith("widen the sweep")


def test_no_left_out_line_without_a_law_or_without_left_out_rungs():
    assert _left_out("lr*", _lr_law({})) is None
    assert _left_out("batch*", _lr_law({"25K": "25K: no batch optimum"}, fitted=False)) is None
    assert _left_out("batch*", None) is None
