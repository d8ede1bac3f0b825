import json
from pathlib import Path

import pytest
import yaml
from ladder.studies import builtin_names, load_study

from ladder import layout
from ladder.plan import expand
from tests.cli_helpers import run_cli

PLAN_RUN_KEYS = {"run_id", "run_dir", "axes", "shape", "params", "params_total", "params_non_embedding", "tokens",
                 "flops", "batch_tokens", "lr", "steps"}
SHAPE_KEYS = {"d_model", "n_layers", "n_heads", "n_kv_heads", "head_dim", "ffn_dim", "vocab_size", "tied"}


@pytest.mark.parametrize("name", builtin_names())
def test_every_builtin_study_plans(name, tmp_path, capsys):
    r = run_cli(capsys, "plan", name, "--out", tmp_path / name, "--json")
    assert r.code == 0, r.stderr
    data = r.json()
    assert data["runs"] and data["totals"]["runs"] == len(data["runs"])
    for run in data["runs"]:
        assert PLAN_RUN_KEYS <= run.keys()
        assert set(run["shape"]) == SHAPE_KEYS
        spec = json.loads((Path(run["run_dir"]) / "spec.json").read_text())
        assert spec["run_id"] == run["run_id"] == Path(run["run_dir"]).name
    assert 0 < data["totals"]["ladder_pct_of_hero"]


def test_default_study_meets_its_contract():
    plan = expand(load_study("default"))
    sizes = sorted({r.params for r in plan.runs})
    assert len({r.axes["size"] for r in plan.runs}) >= 4
    assert sizes[-1] / sizes[0] >= 8
    assert {r.shape.tied for r in plan.runs} == {True, False}
    for r in plan.runs:
        assert r.tokens / r.params == pytest.approx(20, rel=0.02)


def test_plan_is_idempotent_and_additive(tmp_path, capsys):
    study = tmp_path / "s.yaml"
    spec = {
        "name": "grow",
        "data": {"seq_len": 64},
        "model": {"vocab_size": 256, "head_dim": 16, "ffn_multiple": 8},
        "ladder": {"sizes": ["20K", "40K"]},
        "ablations": {"tie_embeddings": [True]},
        "hero": {"params": "1M"},
    }
    study.write_text(yaml.safe_dump(spec))
    out = tmp_path / "study"
    first = run_cli(capsys, "plan", study, "--out", out, "--json").json()
    assert len(first["new"]) == 2 and first["existing"] == []
    mtimes = {p: p.stat().st_mtime_ns for p in out.rglob("spec.json")}
    again = run_cli(capsys, "plan", study, "--out", out, "--json").json()
    assert again["new"] == [] and sorted(again["existing"]) == sorted(first["new"])
    assert {p: p.stat().st_mtime_ns for p in out.rglob("spec.json")} == mtimes  # nothing rewritten

    spec["ablations"]["tie_embeddings"] = [True, False]
    study.write_text(yaml.safe_dump(spec))
    grown = run_cli(capsys, "plan", study, "--out", out, "--json").json()
    assert len(grown["new"]) == 2 and sorted(grown["existing"]) == sorted(first["new"])

    spec["ladder"]["sizes"] = ["40K"]  # shrinking the study deletes nothing
    study.write_text(yaml.safe_dump(spec))
    shrunk = run_cli(capsys, "plan", study, "--out", out, "--json").json()
    assert len(shrunk["orphans"]) == 2
    assert len(layout.StudyDir(out).all_run_dirs()) == 4


def test_dry_run_writes_nothing(tmp_path, capsys):
    r = run_cli(capsys, "plan", "default", "--out", tmp_path / "x", "--dry-run", "--json")
    assert r.code == 0 and r.json()["dry_run"] is True
    assert not (tmp_path / "x").exists()


def test_run_ids_hash_content_not_labels():
    study = load_study("batch-lr")
    plan = expand(study)
    ids = [r.run_id for r in plan.runs]
    assert len(ids) == len(set(ids))
    assert all(len(i) == 12 for i in ids)
    # same study planned twice gives the same ids
    assert [r.run_id for r in expand(study).runs] == ids


def test_isoflop_mode_holds_compute_per_budget():
    from ladder.studies.spec import parse_study

    study = parse_study({
        "name": "iso", "data": {"seq_len": 64}, "model": {"vocab_size": 256, "head_dim": 16, "ffn_multiple": 8},
        "ladder": {"mode": "isoflop", "compute_budgets": [1e12, 4e12], "isoflop_points": 5}, "hero": {"compute": 1e16},
    })
    plan = expand(study)
    assert len(plan.runs) == 10
    for budget in ("1e+12", "4e+12"):
        runs = [r for r in plan.runs if r.axes["budget"] == budget]
        six_nd = [6 * r.params * r.tokens for r in runs]
        assert len(runs) == 5
        assert max(six_nd) / min(six_nd) < 1.15  # equal compute up to whole steps
        assert len({r.params for r in runs}) == 5


def test_refuses_other_studys_directory(tmp_path, capsys):
    assert run_cli(capsys, "plan", "tied-vs-untied", "--out", tmp_path / "d").code == 0
    r = run_cli(capsys, "plan", "depth-vs-width", "--out", tmp_path / "d")
    assert r.code == 2 and "holds study" in r.stderr
