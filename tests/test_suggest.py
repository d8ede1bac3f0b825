"""`ladder plan STUDY_DIR --suggest`: on a synthetic ladder whose next large size is missing, the runs that would
shrink the hero's interval most per FLOP include that size; `--add` adds them to the study and plans them; the
study's `ladder.extra_runs` expand like rungs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from ladder import layout
from ladder.reports.fits.study import run_value as value
from tests.cli_helpers import run_cli
from tests.hero_fixture import SIZES, make_ladder, study_dict


@pytest.fixture(scope="module")
def short(tmp_path_factory) -> Path:
    """The ladder without its largest size (141K), its hero far beyond it."""
    return make_ladder(tmp_path_factory.mktemp("ladder") / "study", sizes=SIZES[:-1])


@pytest.fixture
def study(short, tmp_path, monkeypatch) -> Path:
    monkeypatch.setattr(value, "K", 4)  # fewer simulated outcomes and refits: the test's time, not its logic
    monkeypatch.setattr(value, "N_BOOT", 30)
    return Path(shutil.copytree(short, tmp_path / "study"))


def test_suggest_names_the_missing_large_size_in_human_units_with_progress(study, capsys):
    before = {p: p.read_bytes() for p in study.rglob("*") if p.is_file()}
    r = run_cli(capsys, "plan", study, "--suggest", "--json")
    assert r.code == 0, r.stderr
    got = r.json()
    assert {p: p.read_bytes() for p in study.rglob("*") if p.is_file()} == before  # --suggest alone writes nothing
    kinds = {c["kind"] for c in got["candidates"]}
    assert kinds == {"larger size", "another budget", "seed replicate"}
    larger = next(c for c in got["candidates"] if c["kind"] == "larger size")
    assert larger["entry"] == {"size": 141_000}  # the next rung up in the ladder's own spacing (x1.41)
    assert {"size": 141_000} in got["extra_runs"]
    valued = [c for c in got["candidates"] if c["gain_pct"] is not None]
    assert larger["gain_pct"] == max(c["gain_pct"] for c in valued) > 0  # it narrows the hero's interval most
    assert larger["expected_half_width_pct"] < got["baseline_half_width_pct"]
    assert larger["flops"] > 0 and larger["pct_of_hero"] == pytest.approx(100 * larger["flops"] / got["hero_flops"])
    assert larger["gain_per_flop"] == pytest.approx(larger["gain_pct"] / larger["flops"])
    other = next(c for c in got["candidates"] if c["kind"] == "another budget")
    assert other["expected_half_width_pct"] is None and "separates N from D" in other["reason"]

    # Issue 28: the changes are on the fit's interval, the one the output calls "now"; progress on stderr (which
    # refit of how many); no "gain per FLOP ... pp"; the suggested runs as readable rows, not dicts
    now, base = got["current_half_width_pct"], got["baseline_half_width_pct"]
    for c in got["candidates"]:
        if c["expected_half_width_pct"] is None:
            assert c["half_width_after_pct"] is None and c["gain_pct"] is None
            continue
        assert c["half_width_after_pct"] == pytest.approx(now * c["expected_half_width_pct"] / base)
        assert c["gain_pct"] == pytest.approx(now - c["half_width_after_pct"])

    r = run_cli(capsys, "plan", study, "--suggest")
    assert r.code == 0 and "141K (the next rung up" in r.stdout and "--suggest --add" in r.stdout
    n = len(got["candidates"]) + 1
    for i in range(1, n + 1):
        assert f"--suggest {i}/{n}: refitting" in r.stderr
    assert "refitting the current runs, as each candidate will be refitted" in r.stderr  # not "runs refitted as"
    text = " ".join(r.stdout.split())
    from ladder.console import sci

    assert "gain per FLOP" not in text and "{'" not in text and "e-1" not in text
    assert f"hero interval now: ±{now:.2f}%" in text
    assert f"{now:.2f}% -> {larger['half_width_after_pct']:.2f}%" in text
    assert f"({larger['half_width_after_pct'] - now:+.2f} pp) for {sci(larger['flops'])} FLOPs" in text
    assert "e+" not in text  # compute as the report writes it: 5.74e12, not 5.74e+12
    assert "- size 141K: " in text


def test_budget_caps_and_add_plans_the_suggestion(study, capsys):
    got = run_cli(capsys, "plan", study, "--suggest", "--json").json()
    larger = next(c for c in got["candidates"] if c["kind"] == "larger size")
    r = run_cli(capsys, "plan", study, "--suggest", "--budget", f"{larger['flops'] * 0.99:.6g}", "--json")
    assert {"size": 141_000} not in r.json()["extra_runs"]  # too dear for the budget
    assert sum(c["flops"] for c in r.json()["suggested"]) <= larger["flops"] * 0.99

    fit = (study / layout.FIT).read_bytes()
    specs = {p: p.read_bytes() for p in study.glob("runs/*/spec.json")}
    r = run_cli(capsys, "plan", study, "--suggest", "--budget", f"{larger['flops'] * 1.01:.6g}", "--add", "--json")
    assert r.code == 0, r.stderr
    added = r.json()
    assert added["extra_runs"] == [{"size": 141_000}] and len(added["added"]) == 1
    [extra] = yaml.safe_load((study / layout.STUDY).read_text())["ladder"]["extra_runs"]
    assert {k: v for k, v in extra.items() if v is not None} == {"size": 141_000}
    [run_id] = added["added"]
    assert run_id in json.loads((study / layout.PLAN).read_text())["runs"]
    new = json.loads((study / "runs" / run_id / "spec.json").read_text())
    assert new["axes"] == {"size": "141K"} and new["role"] == "rung" and abs(new["params"] / 141_000 - 1) < 0.05
    assert (study / layout.FIT).read_bytes() == fit  # nothing else changes
    assert {p: p.read_bytes() for p in specs} == specs


def test_suggest_errors_exit_2_and_write_nothing(study, capsys):
    before = {p: p.read_bytes() for p in study.rglob("*") if p.is_file()}
    for args, words in [
        (("plan", study, "--add"), "--add goes with --suggest"),
        (("plan", study, "--budget", "1e12"), "--budget goes with --suggest"),
        (("plan", "default", "--suggest"), "study directory"),
        (("plan", study, "--suggest", "--budget", "lots"), "--budget 'lots'"),
        (("plan", study, "--suggest", "--out", study / "x"), "--out"),
    ]:
        r = run_cli(capsys, *args)
        assert r.code == 2 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)
    assert {p: p.read_bytes() for p in study.rglob("*") if p.is_file()} == before


def test_extra_runs_expand_like_rungs():
    from ladder.plan.planner import expand
    from ladder.studies.spec import parse_study

    base = study_dict(sizes=SIZES[:3], ablations={"tie_embeddings": [True, False]})
    plain = expand(parse_study(base)).runs
    base["ladder"]["extra_runs"] = [
        {"size": "71K"},
        {"size": "50K", "budget": 2, "variant": "untied"},
        {"size": "50K", "seed": 7, "variant": "tied"},
    ]
    runs = expand(parse_study(base)).runs
    assert runs[: len(plain)] == plain  # the grid is as it was; the extra runs follow it
    extra = runs[len(plain) :]
    assert [(r.axes, r.variant, r.seed) for r in extra] == [
        ({"size": "71K", "tie_embeddings": True}, "tied", 0),
        ({"size": "71K", "tie_embeddings": False}, "untied", 0),
        ({"size": "50K", "multiplier": 2.0, "tie_embeddings": False}, "untied", 0),
        ({"size": "50K", "seed": 7, "tie_embeddings": True}, "tied", 7),
    ]
    same = next(r for r in plain if r.axes == {"size": "50K", "tie_embeddings": False})
    assert extra[2].tokens == pytest.approx(2 * same.tokens, rel=0.02) and extra[2].lr == same.lr
    for bad, words in [({"depth": 3}, "by 'size', not 'depth'"), ({"size": "10K", "colour": 1}, "colour")]:
        base["ladder"]["extra_runs"] = [bad]
        from ladder.errors import SpecError

        with pytest.raises(SpecError, match=words):
            parse_study(base)


def test_a_candidate_with_no_real_gain_is_not_suggested_nor_added(study, capsys, monkeypatch):
    """retrial7: a seed replicate whose own row read '1.56% -> 1.56% (-0.00 pp)' was starred and added by --add.
    Every candidate here narrows the interval by 1e-5 of its width (noise): none is suggested, and it says so."""
    monkeypatch.setattr(value, "baseline", lambda *a, **k: 1.0)
    monkeypatch.setattr(
        value, "value", lambda *a, **k: value.Value(half_width_pct=1.0 - 1e-5, outcomes=[3.5], half_widths=[0.99999])
    )
    before = {p: p.read_bytes() for p in study.rglob("*") if p.is_file()}
    r = run_cli(capsys, "plan", study, "--suggest", "--add")
    assert r.code == 0, r.stderr
    assert not any(line.lstrip("│ ").startswith("* ") for line in r.stdout.splitlines()), r.stdout
    assert "suggested (*)" not in r.stdout
    assert "nothing is suggested" in r.stdout
    assert {p: p.read_bytes() for p in study.rglob("*") if p.is_file()} == before


def test_a_budget_beyond_a_float_echoes_what_was_typed(study, capsys):
    """retrial7: `--budget 1e400` said '--budget inf'."""
    r = run_cli(capsys, "plan", study, "--suggest", "--budget", "1e400")
    assert r.code == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "--budget '1e400'" in r.stderr and "inf" not in r.stderr


def test_no_change_reads_0_pp_and_the_add_command_keeps_the_budget_inside_it(study, capsys, monkeypatch):
    """Issue 28 (user trial): a candidate's row read '1.56% -> 1.56%  -0.00 pp', and the last line read
    "add them with `ladder plan S --suggest --add` --budget 1e30": the budget outside the command to copy."""
    outcomes = iter([1.0 - 1e-5, 0.5, 0.5, 0.5, 0.5])  # the first candidate changes nothing, the others narrow it
    monkeypatch.setattr(value, "baseline", lambda *a, **k: 1.0)
    monkeypatch.setattr(
        value, "value", lambda *a, **k: value.Value(half_width_pct=next(outcomes), outcomes=[3.5], half_widths=[0.5])
    )
    r = run_cli(capsys, "plan", study, "--suggest", "--budget", "1e30")
    assert r.code == 0, r.stderr
    assert "-0.00 pp" not in r.stdout and " 0.00 pp" in r.stdout
    text = " ".join(r.stdout.split())
    assert f"add them with `ladder plan {study} --suggest --budget 1e30 --add`" in text
    assert "% of the hero)" in text and "e+" not in text


def test_a_candidate_of_one_variant_says_which():
    """Of a tied-vs-untied study the candidates are the primary variant's runs alone, but each read "141K at ...":
    a reader took "141K" for both variants."""
    from ladder.forecast.next_runs import candidates
    from ladder.studies.spec import parse_study

    study = parse_study(study_dict(sizes=SIZES[:4], ablations={"tie_embeddings": [True, False]}))
    got = candidates(study, "untied", 20.0)
    assert got and all(c.entry["variant"] == "untied" for c in got)
    assert all("untied" in c.what for c in got), [c.what for c in got]
    assert not any("tied" in c.what for c in candidates(study, None, 20.0))
