"""The report: one self-contained HTML file and a paginated PDF, from a synthetic study through the real fit code.

The main fixture is a hostile study (HTML in its name, description, notes, variant names, an axis value and
error messages) planned with ``ladder.plan.planner``, fake-trained, collected and fitted (``fixture_study``); it is
rendered once per module. Chromium and poppler are needed for the browser and PDF checks: without them the
checks skip, except in CI (``CI`` or ``LADDER_TEST_SLURM`` set), where they fail.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ladder import layout
from ladder.reports.render import render_report
from ladder.reports.render.builder import Builder
from ladder.reports.render.study import load_study
from tests.reports.fixture_study import HOSTILE, make_study, study_dict

SECTIONS = [
    "headline",
    "ladder",
    "curves",
    "scaling",
    "rollout",
    "in-context",
    "isoflop",
    "hparams",
    "tied",
    "depth",
    "health",
    "tasks",
    "reproducibility",
]
TITLES = [
    "Forecast for the hero run",
    "The ladder",
    "Loss curves",
    "Scaling laws",
    "Rollout backtests: how far the ladder sees",
    "In-context repeats and novel tokens",
    "IsoFLOP profiles",
    "Learning rate and batch size",
    "Tied vs untied embeddings",
    "Depth vs width",
    "Run health",
    "Task accuracy forecasts",
    "Reproducibility",
]
CHROMIUM = ("chromium", "chromium-browser", "/usr/bin/chromium")


def need(*names: str) -> str:
    """The path of the first binary found; skip without it, but fail in CI (scripts/test-deps.sh installs it)."""
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    if os.environ.get("CI") or os.environ.get("LADDER_TEST_SLURM"):
        pytest.fail(f"{names[0]} is required in CI (scripts/test-deps.sh installs it)")
    pytest.skip(f"{names[0]} is not installed")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path]]:
    root = make_study(tmp_path_factory.mktemp("hostile") / "study", hostile=True, hostile_variant=True, points=3)
    return root, render_report(root)


@pytest.fixture(scope="module")
def html(hostile) -> str:
    return hostile[1]["html"].read_text(encoding="utf-8")


def test_writes_both_formats_into_the_study_report_folder(hostile):
    root, out = hostile
    assert set(out) == {"html", "pdf"}
    assert out["html"] == layout.StudyDir(root).report / "report.html"
    assert out["pdf"].parent == layout.StudyDir(root).report
    assert out["html"].stat().st_size > 50_000 and out["pdf"].stat().st_size > 20_000


def test_html_is_one_self_contained_file(html):
    assert "<script" not in html.lower()  # no JavaScript at all (the hostile name is escaped)
    assert not re.search(r"<(link|iframe|object|embed|img|base)\b", html, re.I)
    assert not re.search(r"""(src|href|xlink:href)\s*=\s*["']?\s*(https?:|//|file:|ftp:)""", html, re.I)
    assert not re.search(r"""url\(\s*["']?\s*(https?:|//)""", html, re.I)
    assert "@import" not in html
    for target in re.findall(r"""\bhref\s*=\s*["']([^"']*)["']""", html):
        assert target.startswith("#"), target  # in-page anchors only
    assert html.count("<svg") >= 9  # the figures are inline vector graphics
    assert "default-src 'none'" in html  # and a CSP forbids loading anything, should anything slip through


def test_every_section_is_present_in_order(hostile, html):
    positions = [html.index(f'<section id="{s}"') for s in SECTIONS]
    assert positions == sorted(positions)
    for title in TITLES:
        assert f"{title}" in html
    # the forecast loss of the fit is the headline's first tile, with its 90% interval
    hero = json.loads(layout.StudyDir(hostile[0]).fit.read_text(encoding="utf-8"))["hero"]
    headline = html[html.index('<section id="headline"') : html.index('<section id="ladder"')]
    tile = re.search(
        r'<div class="tile-label">Forecast loss \(projection\)</div>\s*<div class="tile-value">([^<]*)</div>\s*'
        r'<div class="tile-detail">([^<]*)</div>',
        headline,
    )
    assert tile, "no forecast tile in the headline"
    assert tile.group(1) == f"{hero['loss']:.3f}"
    assert tile.group(2).startswith(
        f"nats/token; 90% interval {hero['lo']:.3f} – {hero['hi']:.3f} (±{hero['half_width_pct']:.2f}%)"
    )
    for fig in (
        "fig-curves",
        "fig-scaling",
        "fig-isoflop",
        "fig-lr-sweeps",
        "fig-hparam-laws",
        "fig-tied",
        "fig-rollout",
        "fig-in-context",
        "fig-health",
        "fig-task-",
    ):
        assert f'id="{fig}' in html, fig
    assert "this study has no depth-vs-width sweep" in html  # a missing section says so in one line
    assert "DataLoader worker (pid 4242)" in html and "OutOfMemoryError" in html  # failed runs with reasons


def test_hostile_strings_are_shown_as_text_everywhere(html):
    assert HOSTILE not in html
    assert "<i>tied</i>" not in html and "<b>bold</b>" not in html and "evil.example'>" not in html
    escaped = HOSTILE.replace("<", "&lt;").replace(">", "&gt;")
    title = re.search(r"<title>(.*?)</title>", html, re.S).group(1)
    assert escaped in title
    assert escaped in re.search(r"<h1>(.*?)</h1>", html, re.S).group(1)
    assert html.count(escaped) >= 5  # title, heading, figure labels, error messages, the study YAML...
    assert "&lt;i&gt;tied&lt;/i&gt; lr x1" in html  # a variant name in the ladder table
    svg_labels = re.findall(r'<svg[^>]*aria-label="([^"]*)"', html)
    assert svg_labels and all(escaped in label for label in svg_labels)


def test_pdf_has_the_sections_on_pages_and_renders(hostile, tmp_path):
    pdf = hostile[1]["pdf"]
    pdfinfo = need("pdfinfo")
    info = subprocess.run([pdfinfo, str(pdf)], capture_output=True, text=True, timeout=60, check=True).stdout
    pages = int(re.search(r"^Pages:\s+(\d+)", info, re.M).group(1))
    assert 12 <= pages <= 40
    assert re.search(r"^Page size:\s+595\.\d* x 841\.\d* pts \(A4\)", info, re.M)
    text = subprocess.run(
        [need("pdftotext"), "-layout", str(pdf), "-"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    at = [text.find(t) for t in TITLES]
    assert all(i >= 0 for i in at), [t for t, i in zip(TITLES, at) if i < 0]
    assert at == sorted(at)
    assert HOSTILE in text  # the PDF shows the name as text
    per_page = text.split("\f")
    assert "Forecast for the hero run" in per_page[0] and "Scaling ladder report".upper() in per_page[0]
    first = tmp_path / "page"
    subprocess.run(
        [need("pdftoppm"), "-png", "-r", "50", "-f", "1", "-l", "1", str(pdf), str(first)],
        check=True,
        timeout=60,
        capture_output=True,
    )
    png = next(tmp_path.glob("page*.png"))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5_000


def test_chromium_opens_the_html_without_errors_and_screenshots_it(hostile, tmp_path):
    chromium = need(*CHROMIUM)
    shot = tmp_path / "shot.png"
    cmd = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-default-apps",
        "--disable-extensions",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--enable-logging=stderr",
        "--v=0",
        "--hide-scrollbars",
        f"--screenshot={shot}",
        "--window-size=1280,2000",
        hostile[1]["html"].resolve().as_uri(),
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    console = [ln for ln in r.stderr.splitlines() if re.search(r"CONSOLE|Uncaught|Refused to|net::ERR", ln)]
    assert not console, console
    assert shot.is_file() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 50_000  # a rendered page, not a blank one


def _planned_only(root: Path) -> Path:
    from ladder.plan.planner import expand, write_plan
    from ladder.studies.spec import parse_study

    write_plan(expand(parse_study(study_dict(name="planned only", budgets=(1e12, 3e12), points=3))), root)
    return root


def test_a_study_without_results_or_fit_renders_every_section_saying_what_is_missing(tmp_path):
    root = _planned_only(tmp_path / "study")
    out = render_report(root, tmp_path / "out")
    html = out["html"].read_text()
    for s in SECTIONS:
        assert f'<section id="{s}"' in html
    for missing in (
        "this study has no fit yet",
        "this study has no collected results",
        "this study has no loss curves",
        "this study has no scaling-law fit",
        "this study has no IsoFLOP profiles",
        "this study has no LR sweep",
        "this study has no tied-vs-untied ablation",
        "this study has no depth-vs-width sweep",
        "this study has no rollout backtest",
        "this study has no throughput data",
        "this study has no task accuracy forecasts",
    ):
        assert missing in html, missing
    assert "<svg" not in html  # nothing to draw
    assert "pending" in html  # the planned runs are listed
    assert out["pdf"].stat().st_size > 5_000


def test_broken_and_unavailable_inputs_never_crash(tmp_path):
    root = _planned_only(tmp_path / "study")
    sd = layout.StudyDir(root)
    sd.fit.write_text("{not json")
    data = load_study(root)
    assert any("fit.json is unreadable" in p for p in data.problems)
    garbage = {
        "loss_law": {"params": {"E": "x"}, "residuals": [1, None, {"run": None}]},
        "hero": [],
        "isoflop": "nonsense",
        "hparams": {"has_lr_sweep": True, "scales": [{"points": [{"lr": -1}]}, 3]},
        "tied_vs_untied": {"scales": [{"flops": None}], "crossover": None},
        "depth_vs_width": {"scales": 7},
        "tasks": {"tasks": {"t": {"points": None, "hero": {"loss": "nan"}}}},
        "recommendation": "x",
        "predictions": [None, {"label": 1}],
        "warnings": ["a <b>warning</b>"],
        "backtest": {"held_out": [{}]},
        "in_context": {
            "available": True,
            "runs": [None, {"params": "x"}],
            "forecasts": 3,
            "trend": None,
            "warnings": [None],
        },
    }
    sd.fit.write_text(json.dumps(garbage))
    data = load_study(root)  # not fit.json's contract: refused as a whole, with the way out
    assert data.fit == {} and any("refit with `ladder fit`" in p for p in data.problems)
    data.fit = garbage  # and the sections never crash on whatever reaches them
    sections = Builder(data).sections()
    assert [s.id for s in sections] == SECTIONS
    assert not [s.id for s in sections for b in s.blocks if "could not be built" in getattr(b, "text", "")]
    unavailable = {k: {"available": False, "reason": f"no {k} <here>"} for k in garbage}
    data.fit = unavailable  # handed over untyped: its reasons are not trusted, the way out is given instead
    html = Builder(data).sections()
    text = " ".join(getattr(b, "text", "") or "" for sec in html for b in sec.blocks)
    assert "fit.json is not the contract (refit with `ladder fit`)" in text and "<here>" not in text
    sd.fit.write_text(json.dumps(unavailable))
    out = render_report(root, tmp_path / "out", formats=("html",))
    page = out["html"].read_text()
    assert "refit with `ladder fit`" in page or "refit with <code>ladder fit</code>" in page
    assert "<here>" not in page and set(out) == {"html"}


def test_render_report_checks_its_arguments(tmp_path):
    from ladder.errors import StateError

    root = _planned_only(tmp_path / "study")
    with pytest.raises(ValueError, match="unknown report format"):
        render_report(root, tmp_path / "out", formats=("html", "docx"))
    with pytest.raises(StateError):
        render_report(tmp_path / "nope")
    assert set(render_report(root, tmp_path / "o", formats="pdf")) == {"pdf"}


def test_variant_styles_are_stable_distinct_and_greyscale_safe():
    from ladder.reports.render.figures.style import VariantStyles

    names = [f"v{i}" for i in range(12)]
    a, b = VariantStyles(names), VariantStyles(names)
    assert [a[n] for n in names] == [b[n] for n in names]
    assert a["v3"] == a["v3"] and a["new"]["color"] == VariantStyles(names + ["new"])["new"]["color"]
    assert len({a[n]["color"] for n in names}) == 12 and len({a[n]["marker"] for n in names}) == 12
    # colour pairs that differ little in grey differ in marker and line style
    assert len({(a[n]["marker"], str(a[n]["linestyle"])) for n in names}) == 12


def test_a_depth_vs_width_study_gets_its_section(tmp_path):
    root = make_study(
        tmp_path / "study",
        budgets=(1e12, 3e12, 1e13),
        points=3,
        tie=False,
        lr_multipliers=None,
        aspect_ratios=(8, 16, 32),
        tasks=False,
        n_failed=0,
        n_diverged=0,
        n_boot=20,
    )
    html = render_report(root, tmp_path / "out", formats=("html",))["html"].read_text()
    depth = html[html.index('<section id="depth"') : html.index('<section id="health"')]
    assert 'id="fig-depth"' in depth and 'id="fig-depth-law"' in depth
    assert "Best aspect ratio per rung" in depth and "this study has no" not in depth
    assert "this study has no tied-vs-untied ablation" in html and "No run diverged or failed." in html


def test_a_figure_that_fails_to_draw_says_so_instead_of_breaking_the_report():
    from ladder.reports.render.figures.spec import FigureSpec, to_svg

    def broken(fig):
        raise KeyError("flops")

    svg = to_svg(FigureSpec("fig-x", "Figure 1. Broken <b>", "", 2.0, broken), context="s <script>")
    assert svg.startswith("<svg") and "could not be drawn: KeyError" in svg
    assert "<b>" not in svg and "<script>" not in svg and "&lt;script&gt;" in svg


def test_the_rollout_section_says_when_the_forecasts_lean(hostile, tmp_path):
    root = Path(shutil.copytree(hostile[0], tmp_path / "study"))
    sd = layout.StudyDir(root)
    fit = json.loads(sd.fit.read_text())
    lean = fit["loss"]["lean"]  # what the fit wrote: the rows near the hero's distance, of all the rollout's
    assert 0 < lean["n"] <= lean["of"] == len(fit["loss"]["rollout"]["mixture"]), lean
    fit["loss"]["lean"] = {"n": 9, "n_high": 9, "mean_err_pct": 3.2, "p": 0.004, "direction": "high"}
    sd.fit.write_text(json.dumps(fit))
    rollout = next(s for s in Builder(load_study(root)).sections() if s.id == "rollout")
    text = repr(rollout.blocks)
    assert "+3.2%" in text and "9 of 9 forecasts too high (leans high)" in text and "in all" not in text
    assert "The rollout's forecasts near the hero's distance lean high" in text
    fit["loss"]["lean"].update(distance_x=8.0, min_distance_x=4.0, max_distance_x=16.0, of=40)
    sd.fit.write_text(json.dumps(fit))
    rollout = next(s for s in Builder(load_study(root)).sections() if s.id == "rollout")
    assert (
        "forecasts too high (leans high), the forecasts at 4–16× beyond their runs (near the hero's 8×; 40 in all)"
        in (" ".join(repr(rollout.blocks).split()))
    )
    fit["loss"]["lean"]["direction"] = None
    sd.fit.write_text(json.dumps(fit))
    rollout = next(s for s in Builder(load_study(root)).sections() if s.id == "rollout")
    assert "forecasts too high" in repr(rollout.blocks) and "lean high" not in repr(rollout.blocks)
