"""Token budgets per size: under wsd one trunk per (size, variant, seed) and cooldown branches off it, with the
batch, LR and warmup of the trunk; other schedules plan independent runs; seeds and replicates; the renamed
fields fail loudly; the plan's totals count each trunk once; re-planning with a new budget relinks the runs."""

from __future__ import annotations

import json

import pytest
import yaml

from ladder.model.config import RunSpec
from ladder.model.recipe import rule_lr
from ladder.model.schedule import cooldown_start
from ladder.plan.planner import expand, write_plan
from ladder.studies.spec import parse_study
from tests.cli_helpers import run_cli


def study_dict(budgets=(0.5, 1, 2), kind="wsd", *, sizes=("50K", "100K"), **over):
    d = {
        "name": "budgets", "data": {"seq_len": 64},
        "model": {"vocab_size": 320, "head_dim": 16, "ffn_multiple": 8},
        "ladder": {"sizes": list(sizes), "tokens_per_param": 20, "budgets": list(budgets)},
        "ablations": {"tie_embeddings": [True, False]},
        "training": {"lr_max": 0.02, "schedule": {"kind": kind, "warmup_fraction": 0.1, "cooldown_fraction": 0.2}},
        "hero": {"params": "10M"},
    }  # fmt: skip
    for key, value in over.items():
        section, _, field = key.partition("__")
        if field:
            d.setdefault(section, {})[field] = value
        else:
            d[section] = value
    return d


def groups(runs: list[RunSpec]) -> dict[str, list[RunSpec]]:
    """Runs by their trunk (a trunk is in its own group, first)."""
    out: dict[str, list[RunSpec]] = {}
    for r in runs:
        out.setdefault(r.trunk.run_id if r.trunk else r.run_id, []).append(r)
    return out


def test_wsd_budgets_are_one_trunk_and_branches_with_the_trunks_batch_lr_and_warmup():
    plan = expand(parse_study(study_dict()))
    assert len(plan.runs) == 2 * 2 * 3  # sizes x variants x budgets
    by_trunk = groups(plan.runs)
    assert len(by_trunk) == 4  # one trunk per size and variant
    for trunk_id, (trunk, *branches) in by_trunk.items():
        assert trunk.run_id == trunk_id and trunk.trunk is None and trunk.axes["multiplier"] == 2
        assert [b.axes["multiplier"] for b in branches] == [0.5, 1]  # a trunk before its branches
        steps = []
        for b in branches:
            assert (b.batch_tokens, b.lr, b.warmup_steps, b.seed, b.shape) == (
                trunk.batch_tokens,
                trunk.lr,
                trunk.warmup_steps,
                trunk.seed,
                trunk.shape,
            )
            assert b.variant == trunk.variant and b.steps < trunk.steps
            assert b.trunk.step == cooldown_start(b.steps, b.schedule) == b.steps - round(0.2 * b.steps)
            steps.append(b.trunk.step)
        assert trunk.branch_steps == sorted(steps)
        assert cooldown_start(trunk.steps, trunk.schedule) >= max(steps)  # the trunk cools down after every branch
        # warmup: warmup_fraction of the 1x budget's steps (what the hero gets), whatever the run's own length
        one_x = next(b for b in branches if b.axes["multiplier"] == 1)
        assert trunk.warmup_steps == round(0.1 * one_x.steps) and trunk.warmup_steps > round(0.1 * branches[0].steps)
    # neither the trunk link nor the branch steps are in the id: a branch has the id of its independent twin
    b = next(r for r in plan.runs if r.trunk)
    assert b.model_copy(update={"trunk": None}).content_hash() == b.run_id


def test_warmup_tokens_sets_one_warmup_for_every_budget_and_kind():
    for kind in ("wsd", "cosine", "constant"):
        plan = expand(parse_study(study_dict(kind=kind, training__schedule={"kind": kind, "warmup_tokens": "16K"})))
        for r in plan.runs:
            assert r.warmup_steps == round(16384 / r.batch_tokens)
    with pytest.raises(Exception, match="warmup_tokens"):
        expand(parse_study(study_dict(training__schedule={"kind": "wsd", "warmup_tokens": "100M"})))


def test_a_warmup_past_the_smallest_branchs_cooldown_is_refused_naming_the_field():
    # 10% of 1x is 40% of a 0.25x budget, whose cooldown (20%) starts at 80%: fine; 22% of 1x (88%) is not
    expand(parse_study(study_dict(budgets=(0.25, 1))))
    with pytest.raises(Exception, match=r"warmup_fraction = 0.22 .*cooldown starts"):
        expand(
            parse_study(
                study_dict(
                    budgets=(0.25, 1),
                    training__schedule={"kind": "wsd", "warmup_fraction": 0.22, "cooldown_fraction": 0.2},
                )
            )
        )


def test_isoflop_wsd_runs_warm_up_for_their_own_share():
    # an IsoFLOP point has no 1x budget of its size: its warmup is warmup_fraction of its own steps
    plan = expand(parse_study(study_dict(ladder={"mode": "isoflop", "compute_budgets": [1e12, 4e12]})))
    assert plan.runs and all(r.schedule.kind == "wsd" for r in plan.runs)
    for r in plan.runs:
        assert r.warmup_steps == round(0.1 * r.steps)


def test_the_plan_counts_each_trunk_once():
    plan = expand(parse_study(study_dict()))
    totals = plan.totals()
    own = sum(r.flops if r.trunk is None else r.flops * (r.steps - r.trunk.step) / r.steps for r in plan.runs)
    assert totals["flops"] == pytest.approx(own)
    assert totals["flops_if_independent"] == pytest.approx(sum(r.flops for r in plan.runs))
    assert totals["flops"] < 0.75 * totals["flops_if_independent"]
    assert totals["ladder_pct_of_hero"] == pytest.approx(100 * own / plan.hero.compute)
    assert (totals["trunks"], totals["branches"]) == (4, 8)
    branch = next(r for r in plan.runs if r.trunk)
    assert plan.estimates_s[branch.run_id] < plan.estimates_s[branch.trunk.run_id]


def test_cosine_budgets_are_independent_runs_each_with_its_own_warmup():
    plan = expand(parse_study(study_dict(kind="cosine")))
    assert len(plan.runs) == 12
    assert all(r.trunk is None and not r.branch_steps for r in plan.runs)
    totals = plan.totals()
    assert totals["flops"] == pytest.approx(totals["flops_if_independent"]) and totals["branches"] == 0
    for r in plan.runs:
        assert r.warmup_steps == round(0.1 * r.steps)


def test_a_single_budget_or_a_whole_run_cooldown_plans_no_branch():
    assert not any(r.trunk or r.branch_steps for r in expand(parse_study(study_dict(budgets=[1]))).runs)
    whole = study_dict(training__schedule={"kind": "wsd", "warmup_fraction": 0.0, "cooldown_fraction": 1.0})
    assert not any(r.trunk for r in expand(parse_study(whole)).runs)  # branch step 0: nothing to share


def test_deepseek_rules_read_the_trunks_compute_for_every_budget():
    d = study_dict(training__lr_rule="deepseek", training__batch_rule="deepseek", training__lr_max=None)
    study = parse_study(d)
    by_trunk = groups(expand(study).runs)
    for trunk, *branches in by_trunk.values():
        assert {(b.lr, b.batch_tokens) for b in branches} == {(trunk.lr, trunk.batch_tokens)}
        largest = trunk.flops_per_token * 2 * 20 * trunk.params  # the compute the rules read: the 2x budget's
        assert trunk.lr == rule_lr(study.training, trunk.shape.params_non_embedding, largest)[0]
    cosine = expand(parse_study({**d, "training": {**d["training"], "schedule": {"kind": "cosine"}}})).runs
    assert len({r.lr for r in cosine if r.axes["size"] == "50K" and r.shape.tied}) == 3  # each its own compute


def test_seed_axis_and_replicates_are_repeats_not_variants():
    plan = expand(parse_study(study_dict(ablations={"tie_embeddings": [True, False], "seed": [0, 1]})))
    assert len(plan.runs) == 2 * 2 * 2 * 3 and {r.variant for r in plan.runs} == {"tied", "untied"}
    assert {r.axes["seed"] for r in plan.runs} == {0, 1} and all(r.axes["seed"] == r.seed for r in plan.runs)
    assert len(groups(plan.runs)) == 8  # one trunk per size, variant and seed

    rep = expand(
        parse_study(
            study_dict(
                ladder={
                    "sizes": ["50K", "100K"],
                    "tokens_per_param": 20,
                    "budgets": [0.5, 1, 2],
                    "replicates": {"sizes": ["50K"], "seeds": [1, 2]},
                }
            )
        )
    )
    by_size = {s: [r for r in rep.runs if r.axes["size"] == s] for s in ("50K", "100K")}
    assert len(by_size["100K"]) == 6 and {r.seed for r in by_size["100K"]} == {0}
    assert len(by_size["50K"]) == 18 and {r.seed for r in by_size["50K"]} == {0, 1, 2}  # every variant and budget
    assert all("seed" in r.axes for r in rep.runs) and {r.variant for r in rep.runs} == {"tied", "untied"}
    same_but_seed = {r.model_copy(update={"seed": 0}).content_hash() for r in by_size["50K"]}
    assert len(same_but_seed) == 6  # the replicates differ from their configuration by the seed alone
    plain = expand(parse_study(study_dict()))
    assert all("seed" not in r.axes for r in plain.runs)


@pytest.mark.parametrize("ladder, message", [
    ({"sizes": ["50K"], "multipliers": [0.5, 1]}, "ladder.multipliers was renamed to ladder.budgets"),
    ({"mode": "isoflop", "budgets": [1e12, 4e12]}, "renamed to ladder.compute_budgets"),
    ({"sizes": ["50K"], "replicates": {"sizes": ["70K"], "seeds": [1]}}, "not in sizes"),
    ({"mode": "isoflop", "compute_budgets": [1e12, 4e12], "replicates": {"sizes": ["50K"], "seeds": [1]}},
     "replicates"),
])  # fmt: skip
def test_renamed_and_misplaced_fields_fail_on_one_line_and_write_nothing(tmp_path, capsys, ladder, message):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(study_dict(ladder=ladder)))
    r = run_cli(capsys, "plan", path, "--out", tmp_path / "out")
    assert r.code == 2 and message in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_the_plan_shows_branches_under_their_trunk_and_what_budgets_cost(tmp_path, capsys):
    path = tmp_path / "s.yaml"  # one size: the fit would refuse it, and the plan is what is looked at
    path.write_text(yaml.safe_dump(study_dict(sizes=["50K"], ablations={})))
    r = run_cli(capsys, "plan", path, "--dry-run", "--no-fit-check")
    assert r.code == 0
    text = " ".join(r.stdout.split())
    plan = expand(parse_study(study_dict(sizes=["50K"], ablations={})))
    trunk, b05, b1 = plan.runs
    assert f"└ {b05.run_id}" in r.stdout and f"└ {b1.run_id}" in r.stdout
    r = run_cli(capsys, "plan", path, "--dry-run", "--no-fit-check", "--json")
    rows = {row["run_id"]: row for row in r.json()["runs"]}
    assert rows[b05.run_id]["trunk_run_id"] == trunk.run_id and rows[b05.run_id]["branch_step"] == b05.trunk.step
    assert rows[b05.run_id]["flops_own"] < rows[b05.run_id]["flops"] == b05.flops
    assert rows[trunk.run_id]["branch_steps"] == trunk.branch_steps
    assert "each trunk counted once" in text
    path.write_text(yaml.safe_dump(study_dict(kind="cosine", sizes=["50K"], ablations={})))
    text = " ".join(run_cli(capsys, "plan", path, "--dry-run", "--no-fit-check").stdout.split())
    assert "independent runs" in text and "0.5x" in text and "FLOPs" in text
    path.write_text(yaml.safe_dump(study_dict(sizes=["50K"], ablations={"seed": [0, 1]})))
    text = " ".join(run_cli(capsys, "plan", path, "--dry-run", "--no-fit-check").stdout.split())
    assert "drives both its initialisation and its data order" in text


def _on_disk(out, run_id):
    return RunSpec.model_validate_json((out / "runs" / run_id / "spec.json").read_text())


def test_replanning_with_a_larger_budget_relinks_runs_that_have_not_started(tmp_path):
    out = tmp_path / "study"
    first = expand(parse_study(study_dict(budgets=[0.5, 1], sizes=["50K"], ablations={})))
    write_plan(first, out)
    old_trunk, old_branch = first.runs
    (out / "runs" / old_trunk.run_id / "metrics.jsonl").write_text("")  # the 1x trunk has started
    grown = expand(parse_study(study_dict(budgets=[0.5, 1, 2], sizes=["50K"], ablations={})))
    new_trunk, b05, b1 = grown.runs
    assert (b05.run_id, b1.run_id) == (old_branch.run_id, old_trunk.run_id)  # the ids are the science
    written = write_plan(grown, out)
    assert written.new == [new_trunk.run_id] and written.relinked == [b05.run_id]
    assert _on_disk(out, b05.run_id).trunk.run_id == new_trunk.run_id  # not started: it branches off the 2x trunk
    started = _on_disk(out, b1.run_id)
    assert started.trunk is None and started.branch_steps == old_trunk.branch_steps  # started as a trunk: stays one
    assert json.loads((out / "plan.json").read_text())["runs"] == [r.run_id for r in grown.runs]
    again = write_plan(grown, out)
    assert again.relinked == [] and again.new == []


def test_replanning_with_a_budget_in_between_gives_an_unfinished_trunk_the_new_branch_step(tmp_path):
    out = tmp_path / "study"
    sched = {"kind": "wsd", "warmup_tokens": "16K"}  # so that a smaller budget keeps the runs' warmup and ids
    first = expand(parse_study(study_dict(budgets=[0.5, 2], sizes=["50K"], ablations={}, training__schedule=sched)))
    write_plan(first, out)
    trunk = first.runs[0]
    (out / "runs" / trunk.run_id / "metrics.jsonl").write_text("")  # started, not finished
    grown = expand(parse_study(study_dict(budgets=[0.5, 1, 2], sizes=["50K"], ablations={}, training__schedule=sched)))
    assert grown.runs[0].run_id == trunk.run_id and len(grown.runs[0].branch_steps) == 2
    assert write_plan(grown, out).relinked == [trunk.run_id]
    assert _on_disk(out, trunk.run_id).branch_steps == grown.runs[0].branch_steps
    (out / "runs" / trunk.run_id / "result.json").write_text('{"status": "done"}')  # a finished trunk stays as it ran
    grown_more = expand(
        parse_study(study_dict(budgets=[0.25, 0.5, 1, 2], sizes=["50K"], ablations={}, training__schedule=sched))
    )
    assert grown_more.runs[0].run_id == trunk.run_id and len(grown_more.runs[0].branch_steps) == 3
    assert trunk.run_id not in write_plan(grown_more, out).relinked
    assert _on_disk(out, trunk.run_id).branch_steps == grown.runs[0].branch_steps


def test_replanning_with_new_budgets_and_a_new_micro_batch_relinks_and_refreshes_together(tmp_path):
    """Both re-planning rules at once: an unfinished run takes the new micro-batch; one that has not started also
    takes its new role, one that has started keeps its trunk (a trunk gains the new branch steps); a finished run
    keeps its spec.json as it trained."""
    out = tmp_path / "study"
    sched = {"kind": "wsd", "warmup_tokens": "16K"}

    def planned(budgets, micro):
        return expand(parse_study(study_dict(budgets=budgets, sizes=["50K"], ablations={}, training__schedule=sched,
                                             training__micro_batch_tokens=micro)))  # fmt: skip

    first = planned([0.25, 0.5, 2], 1024)
    write_plan(first, out)
    trunk, b025, b05 = first.runs
    (out / "runs" / trunk.run_id / "metrics.jsonl").write_text("")  # the trunk has started
    (out / "runs" / b025.run_id / "result.json").write_text('{"status": "done"}')  # a branch has finished
    done_bytes = (out / "runs" / b025.run_id / "spec.json").read_bytes()
    grown = planned([0.25, 0.5, 1, 2], 512)
    assert [r.run_id for r in grown.runs[:3]] == [trunk.run_id, b025.run_id, b05.run_id]
    assert grown.runs[0].micro_batch_size != trunk.micro_batch_size
    written = write_plan(grown, out)
    assert written.new == [grown.runs[3].run_id]
    assert written.relinked == [trunk.run_id] and set(written.refreshed) == {trunk.run_id, b05.run_id}
    on_trunk = _on_disk(out, trunk.run_id)
    assert on_trunk.branch_steps == grown.runs[0].branch_steps and len(on_trunk.branch_steps) == 3
    assert on_trunk.micro_batch_size == grown.runs[0].micro_batch_size
    assert _on_disk(out, b05.run_id).micro_batch_size == grown.runs[2].micro_batch_size
    assert (out / "runs" / b025.run_id / "spec.json").read_bytes() == done_bytes
    again = write_plan(grown, out)
    assert again.relinked == again.refreshed == again.new == []


def test_builtin_chinchilla_branches_off_wsd_trunks():
    from ladder.studies import load_study

    plan = expand(load_study("chinchilla"))
    assert plan.study.training.schedule.kind == "wsd" and sorted(plan.study.ladder.budgets) == [0.5, 1, 2]
    by_trunk = groups(plan.runs)
    assert len(by_trunk) == 4 and all(len(g) == 3 for g in by_trunk.values())
    for trunk, *branches in by_trunk.values():
        assert trunk.tokens / trunk.params == pytest.approx(40, rel=0.02)
        assert sorted(b.tokens / b.params for b in branches) == pytest.approx([10, 20], rel=0.02)
