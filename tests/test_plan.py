import json
from pathlib import Path

import pytest
import yaml

from ladder import layout
from ladder.plan.planner import expand, read_plan
from ladder.studies import builtin_names, load_study
from tests.cli_helpers import run_cli

PLAN_RUN_KEYS = {
    "run_id",
    "run_dir",
    "axes",
    "shape",
    "params",
    "params_total",
    "params_non_embedding",
    "tokens",
    "flops",
    "batch_tokens",
    "lr",
    "steps",
}
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
    trunks = [r for r in plan.runs if r.trunk is None]
    branches = [r for r in plan.runs if r.trunk is not None]
    # every size trains at the 20 tokens/param rule and the others at two more ratios, so N and D separate; the
    # cheap budgets are cooldown branches off a trunk that trains to the largest budget of its size
    by_size: dict[int, set[int]] = {}
    for r in plan.runs:
        by_size.setdefault(r.params, set()).add(round(r.tokens / r.params))
    assert all(20 in ratios for ratios in by_size.values()), by_size
    assert all(len(by_size[n]) >= 3 for n in sizes[:-1]), by_size  # the top rung may stop at 20
    assert {round(r.tokens / r.params) for r in plan.runs} == {10, 20, 40}
    assert {r.trunk.run_id for r in branches} <= {r.run_id for r in trunks}
    assert len(branches) >= len(plan.runs) / 2
    assert all(r.schedule.kind == "wsd" for r in plan.runs)
    # a seed replicate of the smallest size (its noise floor)
    smallest = min(sizes)
    assert len({r.seed for r in plan.runs if r.params == smallest}) >= 2


def test_plan_is_idempotent_and_additive(tmp_path, capsys):
    study = tmp_path / "s.yaml"
    spec = {
        "name": "grow",
        "data": {"seq_len": 64},
        "model": {"vocab_size": 320, "head_dim": 16, "ffn_multiple": 8},
        "ladder": {"sizes": ["20K", "40K"]},
        "ablations": {"tie_embeddings": [True]},
        "hero": {"params": "1M"},
    }
    study.write_text(yaml.safe_dump(spec))
    out = tmp_path / "study"
    first = run_cli(capsys, "plan", study, "--out", out, "--no-fit-check", "--json").json()  # 2 sizes: no fit
    assert len(first["new"]) == 2 and first["existing"] == []
    mtimes = {p: p.stat().st_mtime_ns for p in out.rglob("spec.json")}
    again = run_cli(capsys, "plan", study, "--out", out, "--no-fit-check", "--json").json()
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

    study = parse_study(
        {
            "name": "iso",
            "data": {"seq_len": 64},
            "model": {"vocab_size": 256, "head_dim": 16, "ffn_multiple": 8},
            "ladder": {"mode": "isoflop", "compute_budgets": [1e12, 4e12], "isoflop_points": 5},
            "hero": {"compute": 1e16},
        }
    )
    plan = expand(study)
    assert len(plan.runs) == 10
    for budget in ("1e+12", "4e+12"):
        runs = [r for r in plan.runs if r.axes["budget"] == budget]
        exact = [r.flops for r in runs]  # budgets are exact counted FLOPs, as every run's flops
        assert len(runs) == 5
        assert max(exact) / min(exact) < 1.15  # equal compute up to whole steps
        assert all(abs(f / float(budget) - 1) < 0.01 for f in exact)  # each run costs its budget
        assert len({r.params for r in runs}) == 5
        six_nd = [6 * r.params * r.tokens for r in runs]
        assert max(six_nd) / min(six_nd) > 1.15  # 6ND is not the convention: it would not hold the budget here


def test_refuses_other_studys_directory(tmp_path, capsys):
    assert run_cli(capsys, "plan", "tied-vs-untied", "--out", tmp_path / "d").code == 0
    r = run_cli(capsys, "plan", "depth-vs-width", "--out", tmp_path / "d")
    assert r.code == 2 and "holds study" in r.stderr


@pytest.mark.parametrize("inside", ["runs", "run dir", "deeper"])
def test_refuses_an_out_inside_another_study(tmp_path, capsys, monkeypatch, inside):
    """`plan --out OTHER/runs` (or a run's folder of OTHER) once wrote a second study into OTHER's runs/."""
    from tests.cli_helpers import one_line

    monkeypatch.chdir(tmp_path)
    assert run_cli(capsys, "plan", "tied-vs-untied", "--out", "other").code == 0
    run_id = json.loads((tmp_path / "other" / layout.PLAN).read_text())["runs"][0]
    target = {"runs": "other/runs", "run dir": f"other/runs/{run_id}", "deeper": "other/a/b"}[inside]
    before = sorted(str(p) for p in (tmp_path / "other").rglob("*"))
    one_line(run_cli(capsys, "plan", "depth-vs-width", "--out", target), f"{target} is inside study other")
    assert sorted(str(p) for p in (tmp_path / "other").rglob("*")) == before
    # a path that only passes through a study on its way out of it is not inside it
    assert run_cli(capsys, "plan", "depth-vs-width", "--out", "other/runs/../../elsewhere").code == 0


@pytest.mark.parametrize("name", ["", "   ", "\t \n"])
def test_a_blank_study_name_is_refused_by_validate_and_plan(tmp_path, capsys, monkeypatch, name):
    """`name: "   "` once passed validate and plan (as ./ladder-runs/study) while `name: ""` was refused."""
    from tests.cli_helpers import one_line

    monkeypatch.chdir(tmp_path)
    data = yaml.safe_load(load_study("tied-vs-untied").to_yaml())
    data["name"] = name
    path = tmp_path / "blank.yaml"
    path.write_text(yaml.safe_dump(data))
    for args in (["studies", "validate", path], ["plan", path]):
        one_line(run_cli(capsys, *args), f"{path}: name = ")
    assert not (tmp_path / "ladder-runs").exists()


def test_a_study_argument_that_is_no_regular_file_is_named_so(tmp_path, capsys):
    """`ladder studies validate /dev/null` once said "no such study file"."""
    from tests.cli_helpers import one_line

    for args in (["studies", "validate", "/dev/null"], ["plan", "/dev/null", "--dry-run"]):
        one_line(run_cli(capsys, *args), "/dev/null: not a regular file")
    one_line(run_cli(capsys, "studies", "validate", tmp_path / "none.yaml"), "no such study file")
    (tmp_path / "d.yaml").mkdir()
    from ladder.studies import read_study_file

    with pytest.raises(Exception, match="not a regular file \\(a directory\\)"):
        read_study_file(tmp_path / "d.yaml")


def test_replanning_with_another_micro_batch_compile_or_intervals_keeps_every_finished_run(tmp_path, capsys):
    from ladder.jobs.submit import _select
    from tests.fake_runs import finish

    spec = {
        "name": "science",
        "data": {"seq_len": 32},
        "model": {"vocab_size": 320, "head_dim": 16, "ffn_multiple": 8, "aspect_ratio": 16},
        "ladder": {"sizes": ["4K", "8K", "16K"], "tokens_per_param": 10},
        "training": {"batch_min_sequences": 12, "micro_batch_tokens": 256},
        "hero": {"params": "1M"},
    }
    study, out = tmp_path / "s.yaml", tmp_path / "study"
    study.write_text(yaml.safe_dump(spec))
    first = run_cli(capsys, "plan", study, "--out", out, "--no-fit-check", "--json").json()  # 3 runs: no fit
    sd = layout.StudyDir(out)
    _, specs = read_plan(out)
    assert {s.micro_batch_size for s in specs} == {8}  # 256 tokens of seq 32; it need not divide 12 sequences
    finished = [s.run_id for s in specs[:2]]
    for s in specs[:2]:
        finish(sd, s)
    finished_specs = {rid: sd.run(rid).spec.read_bytes() for rid in finished}

    spec["training"].update(
        micro_batch_tokens=160,
        compile=True,
        evals_per_run=3,
        logs_per_run=7,
        checkpoints_per_run=2,
        checkpoint_minutes=1,
    )
    study.write_text(yaml.safe_dump(spec))
    again = run_cli(capsys, "plan", study, "--out", out, "--no-fit-check", "--json").json()
    assert [r["run_id"] for r in again["runs"]] == [r["run_id"] for r in first["runs"]]
    assert again["new"] == [] and again["orphans"] == []
    assert again["refreshed"] == [specs[2].run_id]  # the unfinished run takes the new settings...
    _, replanned = read_plan(out)
    assert replanned[2].micro_batch_size == 5 and replanned[2].compile
    assert {rid: sd.run(rid).spec.read_bytes() for rid in finished} == finished_specs  # ...finished ones keep theirs
    chosen, skipped = _select(sd, replanned, None, retry_failed=False)
    assert [s.run_id for s in chosen] == [specs[2].run_id] and set(skipped) == set(finished)  # nothing new to train


@pytest.mark.parametrize("hardware, precision", [("cpu", "fp32"), ("h100", "bf16"), ("a10g", "bf16")])
def test_precision_auto_is_resolved_for_the_target_hardware(hardware, precision):
    from ladder.studies.spec import parse_study

    base = {
        "name": "p",
        "data": {"seq_len": 32},
        "model": {"vocab_size": 320, "head_dim": 16, "ffn_multiple": 8},
        "ladder": {"sizes": ["4K"]},
        "hero": {"params": "1M"},
        "executor": {"hardware": hardware},
    }
    (run,) = expand(parse_study(base)).runs
    assert run.precision == precision
    explicit = expand(parse_study({**base, "training": {"precision": precision}})).runs[0]
    assert explicit.run_id == run.run_id  # 'auto' and what it resolves to are the same science
    other = "bf16" if precision == "fp32" else "fp32"
    assert expand(parse_study({**base, "training": {"precision": other}})).runs[0].run_id != run.run_id


def test_the_plan_states_one_flop_convention_per_number(tmp_path, capsys):
    from ladder.model.recipe import params_for_compute
    from ladder.model.sizing import shape_for_params
    from ladder.studies.spec import parse_study

    r = run_cli(capsys, "plan", "default", "--out", tmp_path / "d", "--json")
    data = r.json()
    conv = data["conventions"]
    for key in ("flops", "hero_flops", "ladder_pct_of_hero", "params"):
        assert key in conv, key
    assert "exact" in conv["flops"] and "exact" in conv["ladder_pct_of_hero"]
    assert data["totals"]["flops_convention"] == "exact" and "exact" in data["hero"]["compute_convention"]
    # each trunk counted once, each branch only for the updates after its trunk's snapshot
    assert data["totals"]["flops"] == pytest.approx(sum(run["flops_own"] for run in data["runs"]))
    assert data["totals"]["flops"] < sum(run["flops"] for run in data["runs"])
    assert data["totals"]["ladder_pct_of_hero"] == pytest.approx(
        100 * data["totals"]["flops"] / data["hero"]["compute"]
    )
    on_disk = json.loads((tmp_path / "d" / "plan.json").read_text())
    assert on_disk["conventions"] == conv and on_disk["notes"] == data["notes"]
    human = run_cli(capsys, "plan", "default", "--dry-run")
    assert "FLOPs (exact" in human.stdout and "exact FLOPs / exact FLOPs" in human.stdout
    # one cost in the totals line (the one fit and the report give), the independent-runs sum said as a what-if
    totals = " ".join(next(line for line in human.stdout.splitlines() if line.startswith("totals:")).split())
    assert f"{data['totals']['flops']:.2e} FLOPs (exact; each trunk counted once".replace("e+", "e") in totals, totals
    assert "if they were independent runs" in totals and "FLOPs as independent runs" not in totals
    trunks, branches = data["totals"]["trunks"], data["totals"]["branches"]
    alone = data["totals"]["runs"] - trunks - branches
    assert f"({trunks} trunks, {branches} branches, {alone} run(s) without branches)" in totals, totals

    # a hero given by compute spends exactly that compute, read as exact FLOPs, at tokens_per_param
    study = parse_study(
        {
            "name": "c",
            "data": {"seq_len": 64},
            "model": {"vocab_size": 256, "head_dim": 16, "ffn_multiple": 8},
            "ladder": {"sizes": ["20K", "40K"]},
            "hero": {"compute": 1e12},
        }
    )
    hero = expand(study).hero
    assert hero.compute == 1e12
    assert hero.shape.flops_per_token(64) * hero.tokens == pytest.approx(1e12, rel=1e-6)
    assert hero.tokens_per_param == pytest.approx(20, rel=0.1)
    assert 6 * hero.params * hero.tokens < 0.8e12  # 6ND undercounts it by over 20% at this size
    rules = study.model.rules(64)
    n = params_for_compute(
        1e12, 20, lambda k: shape_for_params(k, "non_embedding", 32, rules, True), "non_embedding", 64
    )
    assert shape_for_params(n, "non_embedding", 32, rules, True).params_non_embedding == hero.params
    assert "hero.compute" in expand(study).conventions()["hero_flops"]


def test_the_plan_says_what_a_size_holds_fixed_and_how_embedding_and_head_decay(capsys):
    from ladder.studies.spec import parse_study

    base = {
        "name": "t",
        "data": {"seq_len": 64},
        "model": {"vocab_size": 256, "head_dim": 16, "ffn_multiple": 8},
        "ladder": {"sizes": ["20K", "40K"]},
        "ablations": {"tie_embeddings": [True, False]},
        "hero": {"params": "1M"},
    }
    plan = expand(parse_study(base))
    assert plan.warnings == []
    assert any(
        "non_embedding parameters fixed" in n and "share the body" in n and "256 x d_model" in n for n in plan.notes
    )
    assert any("same treatment (no decay)" in n for n in plan.notes)
    for size in {r.axes["size"] for r in plan.runs}:  # the body really is shared
        tied, untied = (
            next(r for r in plan.runs if r.axes["size"] == size and r.shape.tied is t) for t in (True, False)
        )
        assert tied.shape.params_non_embedding == untied.shape.params_non_embedding
        assert untied.shape.params_total - tied.shape.params_total == 256 * tied.shape.d_model

    total = expand(parse_study({**base, "ladder": {**base["ladder"], "param_count": "total"}}))
    assert any("total parameters fixed" in n and "smaller" in n for n in total.notes)

    differ = {**base, "training": {"optimizer": {"no_decay": ["embeddings", "norms", "biases"]}}}
    warned = expand(parse_study(differ))
    assert len(warned.warnings) == 1 and "tied matrix follows the embedding" in warned.warnings[0]
    untied_only = {**differ, "ablations": {"tie_embeddings": [False]}}
    assert expand(parse_study(untied_only)).warnings == []  # no tied matrix: nothing ambiguous


def test_a_branchs_time_estimate_counts_only_its_own_updates():
    from ladder.model.hardware import planning_seconds
    from ladder.plan.planner import estimate_wall_s

    plan = expand(load_study("default"))
    branch = next(r for r in plan.runs if r.trunk is not None)
    trunk = next(r for r in plan.runs if r.run_id == branch.trunk.run_id)
    assert branch.own_tokens == branch.tokens - branch.trunk.step * branch.batch_tokens > 0
    assert estimate_wall_s(branch, "cpu") == planning_seconds(branch.own_flops, branch.own_tokens, "cpu")
    assert estimate_wall_s(branch, "cpu") < estimate_wall_s(trunk, "cpu")


def test_a_dry_run_refuses_the_target_that_writing_would_refuse(tmp_path, capsys):
    """`ladder plan default --out DIR --dry-run` passed on a folder of another study, where the same command
    without --dry-run refuses: a dry run that passes is one that can be written."""
    from tests.cli_helpers import one_line

    other = tmp_path / "other"
    assert run_cli(capsys, "plan", "tied-vs-untied", "--out", other).code == 0
    before = sorted(p.name for p in other.rglob("*"))
    one_line(run_cli(capsys, "plan", "default", "--out", other, "--dry-run"), "holds study", "choose another --out")
    one_line(run_cli(capsys, "plan", "default", "--out", other / "runs", "--dry-run"), "is inside study")
    assert sorted(p.name for p in other.rglob("*")) == before
    assert run_cli(capsys, "plan", "tied-vs-untied", "--out", other, "--dry-run").code == 0


def test_grid_points_planned_once_are_said_so_the_run_count_adds_up(tmp_path, capsys):
    """User retrial (issue 28): `ladder studies list` and `ladder plan` gave depth-vs-width 11 runs where its
    description says three aspect ratios at four rungs (12), and batch-lr 40 where its grid is 3 x 5 x 3 (45),
    without a word: grid points that train the very model of another (ar32 at 50K is ar16's shape; at 25K both
    batch multipliers round to the same whole sequences) were dropped silently. The plan now says which."""
    for name, grid, said in (
        ("depth-vs-width", 12, "ar32 at 50K as ar16"),
        ("batch-lr", 45, "bs x1 lr x4 at 25K as bs x0.5 lr x4"),
    ):
        plan = expand(load_study(name))
        [note] = [n for n in plan.notes if "planned once" in n]
        assert note.startswith(f"{grid - len(plan.runs)} point(s) of the ablation grid"), note
        assert said in note, note
        out = run_cli(capsys, "plan", name, "--dry-run", "--out", tmp_path / name).stdout
        assert f"totals: {len(plan.runs)} runs" in out and f"note: {note}" in " ".join(out.split()), out
    assert not [n for n in expand(load_study("tied-vs-untied")).notes if "planned once" in n]
