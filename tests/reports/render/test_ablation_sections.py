"""The ablation sections show fit.json's numbers: the one gap at the hero, its call, the multiplier, the per-rung
effects, the best aspect ratio at the hero; the recommendation quotes the same call."""

from __future__ import annotations

import html as htmllib
import json
from pathlib import Path

import pytest

from ladder import layout
from ladder.reports.render import render_report
from ladder.reports.render.blocks import KV, Para, Table
from ladder.reports.render.builder import Builder
from ladder.reports.render.fmt import fmt_ci, fmt_g
from ladder.reports.render.sections.ablations import fmt_gap, fmt_mult, fmt_p
from ladder.reports.render.study import load_study
from tests.reports.fixture_study import make_study


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict, str]:
    root = make_study(
        tmp_path_factory.mktemp("ablations") / "study",
        budgets=(3e11, 1e12),
        points=3,
        lr_multipliers=None,
        aspect_ratios=(8, 16, 32),
        tasks=False,
        n_failed=0,
        n_diverged=0,
        n_boot=20,
    )
    fit = json.loads(layout.StudyDir(root).fit.read_text(encoding="utf-8"))
    sections = {s.id: s for s in Builder(load_study(root)).sections()}
    html = htmllib.unescape(render_report(root, root / "out", formats=("html",))["html"].read_text(encoding="utf-8"))
    return fit, sections, html


def _kv(section) -> dict[str, str]:
    return {k: v for b in section.blocks if isinstance(b, KV) for k, v in b.items}


def _table(section, first_column: str) -> Table:
    return next(b for b in section.blocks if isinstance(b, Table) and b.columns[0] == first_column)


def test_the_tied_section_shows_fit_json_numbers(study):
    fit, sections, html = study
    tie = fit["tied_vs_untied"]
    assert tie["available"]
    h = tie["hero"]
    sec = sections["tied"]
    kv = _kv(sec)
    assert kv["Gap at the hero"] == f"{fmt_gap(h['gap'])} (90%: {fmt_ci(h['gap_ci90'], fmt_gap)})"
    assert kv["Winner"] == f"{h['winner']} ({h['call']}; P = {fmt_p(h['p_winner'])})"
    if h["compute_multiplier"] is not None:
        assert f"with {fmt_mult(h['compute_multiplier'])} (90%: " in kv["Effective compute"]
        assert fmt_ci(h["compute_multiplier_ci90"], fmt_mult) in kv["Effective compute"]
    assert kv["Crossover"].startswith(tie["crossover"]["message"])
    call = [b.text for b in sec.blocks if isinstance(b, Para) and b.text.startswith("The call:")]
    assert call == [f"The call: {h['message']}."]
    rows = _table(sec, "Rung").rows
    assert len(rows) == len(tie["scales"])
    for row, r in zip(rows, tie["scales"]):
        if r.get("skipped"):
            continue
        assert row[0] == r["scale"] and row[4].startswith(fmt_gap(r["gap"])) and row[7] == r["winner"]
        assert row[6] == fmt_mult(r["compute_multiplier"])
    # the recommendation and the variant choice say the same thing, with the same numbers
    assert fit["recommendation"]["tied"] is (h["winner"] == "tied")
    assert fit["recommendation"]["sources"]["tied"].endswith(h["message"])
    assert fit["loss"]["variant"] == h["winner"] and h["call"] in fit["loss"]["variant_choice"]
    for text in (kv["Gap at the hero"], kv["Winner"], h["message"], rows[0][4]):
        assert text in html
    assert 'id="fig-tied"' in html


def test_the_depth_section_shows_fit_json_numbers(study):
    fit, sections, html = study
    dw = fit["depth_vs_width"]
    assert dw["available"]
    h = dw["hero"]
    sec = sections["depth"]
    kv = _kv(sec)
    assert kv["Aspect ratio at the hero"] == f"{fmt_g(h['aspect_ratio'])} (90%: {fmt_ci(h['aspect_ratio_ci90'])})"
    assert fmt_g(h["reach_compute_x"]) in kv["Distance"]
    rows = _table(sec, "Rung").rows
    for row, r in zip(rows, dw["scales"]):
        assert row[0] == r["scale"] and row[3] == fmt_g((r["fit"] or {}).get("opt"))
    rec = fit["recommendation"]
    assert rec["aspect_ratio_target"] == pytest.approx(h["aspect_ratio"])
    assert rec["sources"]["aspect_ratio"].endswith(h["message"])
    assert kv["Aspect ratio at the hero"] in html
    assert 'id="fig-depth"' in html and 'id="fig-depth-law"' in html


def test_garbage_ablation_entries_still_render(tmp_path: Path):
    from ladder.reports.render.sections.ablations import depth, tied

    class Ctx:
        styles = None

        def __init__(self, fit):
            self.fit = fit

        def entry(self, key, no_fit="no fit.json"):
            return self.fit.get(key), None

        def figure(self, *args):
            return None

    for entry in (
        {"scales": [{"flops": None}], "crossover": None, "hero": {"gap": "x"}, "trend": [1]},
        {"scales": "x", "hero": None},
    ):
        assert tied(Ctx({"tied_vs_untied": entry})).blocks is not None
    assert depth(Ctx({"depth_vs_width": {"scales": [{"fit": {"opt": "x"}}], "hero": []}})).blocks is not None
