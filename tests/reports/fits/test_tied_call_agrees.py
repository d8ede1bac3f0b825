"""Tied vs untied (issue 28): the main job printed "variant untied: at the hero 1.725 [1.49, 2.05]" (16% below
tied's 2.056) next to "tied wins ... untied +3.3%", and recommended tied at P = 0.54 with no caveat. The untied
law alone put all its weight on the 'bounded' form, which gets no weight for tied. Now the other variant's number
from the paired comparison (the call's basis) comes first, the separate law says it is one and that it disagrees,
and an uncertain call (P < 0.9) says so in the recommendation, the fit's summary and the report's table."""

from __future__ import annotations

import math
from types import SimpleNamespace

from rich.console import Console

from ladder.reports.fits.ablations.tied import paired_forecast
from ladder.reports.fits.recommend import SURE_P, choose_tied, tied_uncertainty
from tests.reports.fits.synthetic import fit_dict_of, fit_json_of

CALL = {
    "flops": 1e14,
    "gap": 0.0325,
    "gap_ci90": [-0.08, 0.15],
    "gap_pct": 3.25,
    "winner": "tied",
    "p_winner": 0.54,
    "call": "undetermined",
    "interval_excludes_zero": False,
    "compute_x": 8.0,
    "reach_compute_x": 4.0,
    "within_reach": False,
    "message": "tied wins at the hero (undetermined): ln L_untied - ln L_tied = +0.0325 (90% [-0.0800, +0.1500]; "
    "P = 0.54); the 90% interval includes 0",
}


def _fit() -> dict:
    return {
        "loss": {"variant": "tied"},
        "hero": {
            "params": 8e5,
            "tokens": 1.6e7,
            "allocation": "rule",
            "compute": 9.58e13,
            "loss": 2.056,
            "lo": 1.9,
            "hi": 2.2,
            "half_width_pct": 7.0,
            "ladder_flops": 2.63e13,
            "ladder_pct_of_hero": 27.5,
        },
        "loss_by_variant": {
            "tied": {
                "available": True,
                "primary": True,
                "target": {"loss": 2.056, "lo": 1.9, "hi": 2.2},
                "weights": {"chinchilla": 0.7, "bounded": 0.0, "data": 0.3},
            },
            "untied": {
                "available": True,
                "target": {"loss": 1.725, "lo": 1.49, "hi": 2.05},
                "weights": {"chinchilla": 0.0, "bounded": 1.0},
            },
        },
        "tied_vs_untied": {"available": True, "hero": CALL},
    }


def test_the_paired_forecast_is_the_hero_moved_by_the_gap():
    p = paired_forecast("tied", {"loss": 2.056}, CALL, "untied")
    assert p["loss"] == 2.056 * math.exp(0.0325) and p["loss"] > 2.056  # tied wins: untied is higher
    assert p["lo"] == 2.056 * math.exp(-0.08) and p["hi"] == 2.056 * math.exp(0.15)
    back = paired_forecast("untied", {"loss": p["loss"]}, CALL, "tied")
    assert back["loss"] == __import__("pytest").approx(2.056)
    assert paired_forecast("base", {"loss": 2.0}, CALL, "wide") is None  # not a tie ablation's variants
    assert paired_forecast("tied", {"loss": 2.0}, None, "untied") is None


def test_the_summary_shows_the_calls_number_first_and_says_the_law_disagrees():
    from ladder.reports.summary import _print_variants

    console = Console(record=True, width=300, file=open("/dev/null", "w"))
    _print_variants(fit_json_of(_fit()), console)
    lines = console.export_text().splitlines()
    assert "variant untied at the hero: 2.124" in lines[0] and "paired tied-vs-untied comparison" in lines[0]
    assert "the call's basis" in lines[0]
    assert "own loss law alone" in lines[1] and "1.725" in lines[1] and "bounded 1.00" in lines[1]
    # retrial7: the two 90% intervals ([1.49, 2.05] and the gap's [1.90, 2.39]) overlap: it leans the other way,
    # which is said, but it is no disagreement
    assert "leans the other way from the paired comparison" in lines[1] and "intervals overlap" in lines[1]
    assert "disagrees" not in lines[1]


def test_the_summary_s_factor_gives_its_number_when_the_other_variant_is_tied():
    """User retrial (issue 28): with untied the main variant, fit printed "variant tied at the hero: 1.223e+04 ...
    (untied's 1.578 x e^-8.9553 ...)": 1.578 x e^-8.9553 is 2.0e-4, not 1.223e+04; the gap (untied minus tied)
    was printed with tied's sign unturned. The factor now gives the number it stands beside."""
    import re

    from ladder.reports.summary import _print_variants

    fit = _fit()
    fit["loss"]["variant"] = "untied"
    fit["hero"]["loss"] = 2.124
    fit["loss_by_variant"]["tied"]["primary"] = False
    fit["loss_by_variant"]["untied"]["primary"] = True
    console = Console(record=True, width=300, file=open("/dev/null", "w"))
    _print_variants(fit_json_of(fit), console)
    line = next(ln for ln in console.export_text().splitlines() if "variant tied at the hero" in ln)
    loss, base, exponent = re.search(r"at the hero: ([\d.]+) .*untied's ([\d.]+) x e\^([-+][\d.]+);", line).groups()
    assert float(loss) == __import__("pytest").approx(2.124 * math.exp(-0.0325), abs=1e-3), line
    assert float(base) * math.exp(float(exponent)) == __import__("pytest").approx(float(loss), abs=1e-3), line
    assert exponent == "-0.0325", line


def test_the_summary_says_disagrees_only_when_the_intervals_do_not_overlap():
    from ladder.reports.summary import _print_variants

    fit = _fit()
    fit["loss_by_variant"]["untied"]["target"] = {"loss": 1.725, "lo": 1.6, "hi": 1.8}
    console = Console(record=True, width=300, file=open("/dev/null", "w"))
    _print_variants(fit_json_of(fit), console)
    lines = console.export_text().splitlines()
    assert "disagrees with the paired comparison (their 90% intervals do not overlap)" in lines[1]


def test_an_uncertain_call_says_so_in_the_recommendation():
    assert SURE_P == 0.9
    doubt = tied_uncertainty(CALL)
    assert doubt.startswith("uncertain: P = 0.54 that tied beats untied") and "coin flip" in doubt
    assert tied_uncertainty({**CALL, "p_winner": 0.95}) is None
    tie = SimpleNamespace(hero=CALL, scales=[SimpleNamespace(gap=0.01)] * 5)
    tied, why = choose_tied(None, tie)
    assert tied is True and why.startswith("fit: tied-vs-untied ablation over 5 rungs: UNCERTAIN: P = 0.54")
    sure, why = choose_tied(None, SimpleNamespace(hero={**CALL, "p_winner": 0.97}, scales=[]))
    assert "UNCERTAIN" not in why


def test_the_fit_summary_and_the_report_table_show_the_doubt_where_the_choice_is(tmp_path):
    from ladder.reports.render.builder import Builder
    from ladder.reports.render.sections.headline import headline
    from ladder.reports.render.study import StudyData
    from ladder.reports.summary import print_fit

    fit = _fit()
    fit["recommendation"] = {
        "available": True,
        "tied": True,
        "d_model": 64,
        "n_layers": 4,
        "n_heads": 4,
        "n_kv_heads": 4,
        "head_dim": 16,
        "ffn_dim": 176,
        "vocab_size": 512,
        "aspect_ratio": 16.0,
        "params": 8e5,
        "param_convention": "non_embedding",
        "params_total": 9e5,
        "tokens": 1.6e7,
        "tokens_per_param": 20.0,
        "batch_tokens": 4096,
        "lr": 0.01,
        "schedule": {"kind": "wsd"},
        "warmup_steps": 10,
        "steps": 100,
        "loss": 2.056,
        "loss_interval": [1.9, 2.2],
        "sources": {"tied": "fit: ..."},
    }
    console = Console(record=True, width=300, file=open("/dev/null", "w"))
    print_fit(fit_json_of(fit), console)
    tied_row = next(line for line in console.export_text().splitlines() if line.split()[:2] == ["tied", "true"])
    assert "uncertain: P = 0.54" in tied_row

    data = StudyData(path=tmp_path, name="s")
    data.fit = fit_dict_of(fit)
    sec = headline(Builder(data))
    config = next(b for b in sec.blocks if getattr(b, "kind", "") == "headline").config
    row = next(r for r in config if r[0] == "Tied embeddings")
    assert row[1].startswith("yes") and "uncertain: P = 0.54" in row[1]
