"""Lines of `ladder fit`'s terminal summary (reports/summary.py) that must say what fit.json says (retrial7)."""

from __future__ import annotations

import numpy as np

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


def test_a_slope_of_float_noise_is_printed_as_zero():
    """retrial7: 'slope +0.000 [-4.27e-17, 6.44e-17]'."""
    from ladder.reports.summary import _slope

    assert _slope(-1e-18, [-4.27e-17, 6.44e-17]) == "0 [0, 0]"
    assert _slope(0.012, [0.01, 0.014]) == "+0.012 [0.01, 0.014]"
    assert _slope(None, None) == "-"


def test_a_ladder_dearer_than_the_hero_is_a_multiple_of_its_compute():
    """retrial7: 'ladder cost 8.21e14 FLOPs = 3.86e+03% of the hero'."""
    from ladder.reports.summary import _share_of_hero

    assert _share_of_hero(3861.5) == "38.6x the hero's compute"
    assert _share_of_hero(27.5) == "27.5% of the hero's compute"


def test_the_track_record_band_below_1x_is_said_in_words():
    """retrial7: '19 forecasts at 0-1x compute'."""
    from ladder.reports.fits.loss import track_record

    record = track_record.at(0.199)
    assert record is not None
    text = track_record.sentence(record)
    assert "0-1x" not in text and "below 1x compute" in text
    assert track_record.band_words("64x+") == "64x or more" and track_record.band_words("4-16x") == "4-16x"


def test_the_reports_copy_ratio_slope_shows_float_noise_as_zero():
    """retrial7: the same noise slope ('-4.27e-17') in the report's in-context section."""
    from ladder.reports.render.fmt import fmt_ci, fmt_g
    from ladder.reports.render.sections.in_context import _noise_as_zero

    assert fmt_g(_noise_as_zero(-4.27e-17), 3) == fmt_g(0.0, 3)
    assert "e-17" not in fmt_ci([_noise_as_zero(x) for x in (-4.27e-17, 6.44e-17)])
    assert _noise_as_zero(0.012) == 0.012 and _noise_as_zero(None) is None


def test_the_terminal_says_the_fits_notes_as_the_report_does(tmp_path, capsys):
    """Re-trial 16b: fit.json's notes (a sweep run at another LR left out of the laws, FLOPs taken as 6ND) were
    printed by the report's headline but never by `ladder fit`: 45 rows fitted as 44 runs, with no word why."""
    from tests.cli_helpers import run_cli
    from tests.test_own_ladder_retrial13 import rows, write

    table = [{**row, "lr": 0.003} for row in rows()]
    table.append({**table[-1], "lr": 0.03, "loss": table[-1]["loss"] * 1.05})  # a sweep run at another LR
    path = write(tmp_path / "runs.csv", table)
    said = run_cli(capsys, "fit", "--runs", path, "--bootstrap", "3").stdout
    notes = run_cli(capsys, "fit", "--runs", path, "--bootstrap", "3", "--json").json()["notes"]
    assert any("sweep run(s) at other values are left out of the laws" in n for n in notes), notes
    for n in notes:  # a long line wraps at a space
        assert f"note: {n}" in said.replace("\n", " "), (n, said)


def test_the_terminal_says_the_isoflop_fits_note(tmp_path, capsys):
    """Beck et al.'s 4 isoFLOP groups, cut by 6ND into 14 budgets: fit.json's isoflop note said so and how to join
    them (a flops column), the terminal printed "over 14 budgets" alone."""
    from tests.cli_helpers import run_cli
    from tests.reports.fits.test_isoflop import law, n_opt

    lines = ["params,tokens,loss"]
    for c in (1e18, 4e18, 1.6e19):
        for k, off in enumerate(np.linspace(-1.5, 1.5, 9)):
            n = n_opt(c) * np.exp(off)
            d = c * (1.2 if k % 2 else 1.0) / (6 * n)
            lines.append(f"{float(n)!r},{float(d)!r},{float(law(n, d))!r}")
    path = tmp_path / "runs.csv"
    path.write_text("\n".join(lines) + "\n")
    note = run_cli(capsys, "fit", "--runs", str(path), "--bootstrap", "3", "--json").json()["isoflop"]["note"]
    assert "flops column" in note, note
    said = " ".join(run_cli(capsys, "fit", "--runs", str(path), "--bootstrap", "3").stdout.split())
    assert " ".join(note.split()) in said, said


def test_a_constant_outside_its_own_interval_says_so_in_the_terminal_and_the_report():
    """Re-trial 17b: a 4-run, one-ratio ladder's ratio form (one degree of freedom; the Huber fit set one run aside,
    every bootstrap refit without it flattened) printed "E = 1.547 [5.055, 5.07]" in fit and the report alike."""
    from ladder.reports.fits.study.fit_json import OUTSIDE
    from ladder.reports.render.sections.scaling import _params_text
    from ladder.reports.summary import _ci

    assert _ci([5.055, 5.07], point=1.547) == f" [5.055, 5.07] ({OUTSIDE})"
    assert _ci([1.5, 2.5], point=2.0) == " [1.5, 2.5]" and _ci([1.5, 2.5]) == " [1.5, 2.5]"
    said = _params_text({"E": 1.547, "alpha": 1.454}, {"E": [5.055, 5.07], "alpha": [0.0, 5.0]})
    assert said.count(OUTSIDE) == 1 and said.index(OUTSIDE) < said.index("1.454"), said
