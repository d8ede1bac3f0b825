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
def study_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_study(
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


@pytest.fixture(scope="module")
def study(study_root: Path) -> tuple[dict, dict, str]:
    root = study_root
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


def test_garbage_ablation_entries_are_refused_and_the_sections_say_so(study, study_root: Path, tmp_path: Path):
    """fit.json is read through its contract: a damaged ablation entry is one problem naming the entry and the way
    out, and the ablation sections say that the fit is missing instead of rendering garbage or raising."""
    import shutil

    fit, _, _ = study
    for key, damage in (
        ("tied_vs_untied", {"hero": {"gap": "x"}}),
        ("tied_vs_untied", {"scales": "x"}),
        ("depth_vs_width", {"hero": []}),
    ):
        root = tmp_path / f"{key}-{len(list(tmp_path.iterdir()))}"
        shutil.copytree(study_root, root)
        bad = json.loads(json.dumps(fit))
        bad[key] = {**(bad.get(key) or {}), **damage}
        layout.atomic_write_json(layout.StudyDir(root).fit, bad)
        data = load_study(root)
        problem = next(p for p in data.problems if key in p)
        assert "refit with `ladder fit`" in problem
        sections = {s.id: s for s in Builder(data).sections()}
        for sid in ("tied", "depth"):
            paras = [b for b in sections[sid].blocks if isinstance(b, Para)]
            assert paras and "no fit.json" in paras[0].text, (sid, [p.text for p in paras])
