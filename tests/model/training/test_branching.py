"""Cooldown branches: a branch started from its trunk's snapshot ends bit-identical (losses and weights) to the
independent WSD run planned with its budget alone (CPU, fp32, one thread), also after kills of the trunk or the
branch at random moments; it waits for its trunk, refuses a trunk of other science, and trains from step 0 when
its trunk finished without a snapshot. Runs are planned by ``ladder.plan.planner`` and trained on injected windows."""

from __future__ import annotations

import random
import signal
import time
from pathlib import Path

import pytest
from safetensors.torch import load_file

from ladder.errors import StateError
from ladder.layout import RunDir, read_jsonl
from ladder.model.config import RunSpec
from ladder.model.training.branching import Waiting
from ladder.model.training.checkpoint import latest_checkpoint
from ladder.model.training.faults import nan_at_step
from ladder.model.training.loop import train
from ladder.plan.planner import expand, write_plan
from ladder.studies.spec import parse_study
from tests.model.training.tiny_runs import start, tiny_data

pytestmark = pytest.mark.usefixtures("one_thread")

VOCAB = 128


def study(budgets, *, tokens_per_param=5.0, batch_tokens=256, **schedule):
    return parse_study({
        "name": "branches", "data": {"seq_len": 32, "validation_tokens": 256},
        "model": {"vocab_size": VOCAB, "head_dim": 16, "ffn_multiple": 8, "aspect_ratio": 16},
        "ladder": {"sizes": ["4K"], "tokens_per_param": tokens_per_param, "budgets": budgets},
        "training": {"batch_tokens": batch_tokens, "eval_tokens": 256, "lr_max": 0.02,
                     "schedule": {"kind": "wsd", "cooldown_fraction": 0.2, **schedule}},
        "hero": {"params": "1M"}, "sanity_check": False,
    })  # fmt: skip


def planned(root: Path, spec) -> tuple[Path, list[RunSpec]]:
    plan = expand(spec)
    write_plan(plan, root)
    return root / "runs", plan.runs


def go(runs: Path, run: RunSpec, **kw) -> dict:
    return train(runs / run.run_id, dataset=tiny_data(VOCAB), **kw)


def weights(run_dir: Path) -> dict:
    return load_file(str(run_dir / "model" / "model.safetensors"))


def records(run_dir: Path) -> list[dict]:
    return list(read_jsonl(RunDir(run_dir).metrics))


def assert_bit_identical(branch_dir: Path, branch: dict, alone_dir: Path, alone: dict, at: int, log_every: int):
    assert branch["status"] == alone["status"] == "done"
    assert branch["final_train_loss"] == alone["final_train_loss"]  # bit-identical, not approximately
    assert branch["final_eval_loss"] == alone["final_eval_loss"]
    a, b = weights(branch_dir), weights(alone_dir)
    assert a.keys() == b.keys() and all(bool((a[k] == b[k]).all()) for k in a)
    # after the first log boundary past the branch step the records are the independent run's, value for value
    first = (at // log_every + 1) * log_every
    mine = [r for r in records(branch_dir) if r["step"] > first or (r["kind"] == "eval" and r["step"] > at)]
    theirs = [r for r in records(alone_dir) if r["step"] > first or (r["kind"] == "eval" and r["step"] > at)]
    key = ("kind", "step", "tokens", "loss", "eval_loss", "lr", "grad_norm")
    assert [[r.get(k) for k in key] for r in mine] == [[r.get(k) for k in key] for r in theirs]


@pytest.mark.parametrize("warmup", ["tokens", "fraction", "short cooldown"])
def test_a_branch_is_bit_identical_to_the_independent_run_of_its_budget(tmp_path, warmup):
    """THE defining test: every branch (warmup_tokens, or warmup_fraction of the 1x budget's steps: the same
    warmup whatever the budgets planned beside it) has the id of the run planned with its budget alone, and trains to the same bits. With a cooldown
    shorter than the final-loss window (the last 10% of steps) that window reaches back into the trunk's steps."""
    sched = {"warmup_tokens": 2048} if warmup != "fraction" else {"warmup_fraction": 0.1}
    if warmup == "short cooldown":
        sched["cooldown_fraction"] = 0.05
    runs, (trunk, *branches) = planned(tmp_path / "ladder", study([0.5, 1, 2], **sched))
    assert trunk.branch_steps and all(b.trunk.run_id == trunk.run_id for b in branches)
    assert go(runs, trunk)["snapshots"] == trunk.branch_steps
    compared = 0
    for branch in branches:
        alone_runs, (alone,) = planned(
            tmp_path / f"alone-{branch.axes['multiplier']}", study([branch.axes["multiplier"]], **sched)
        )
        assert alone.warmup_steps == branch.warmup_steps  # alone or beside others: the 1x budget's share
        assert alone.run_id == branch.run_id and alone.trunk is None  # same science, same id
        got, want = go(runs, branch), go(alone_runs, alone)
        assert got["trained_from_step"] == branch.trunk.step and got["trunk_run_id"] == trunk.run_id
        assert got["flops"] == want["flops"] and want["flops_spent"] == want["flops"]
        assert got["flops_spent"] == pytest.approx(got["flops"] * branch.own_steps / branch.steps)
        assert_bit_identical(
            runs / branch.run_id, got, alone_runs / alone.run_id, want, branch.trunk.step, branch.log_interval
        )
        compared += 1
    assert compared == 2


def test_a_branch_starts_with_its_trunks_curve_and_keeps_only_the_snapshots(tmp_path):
    runs, (trunk, branch, _) = planned(tmp_path, study([0.5, 1, 2], warmup_tokens=2048))
    go(runs, trunk)
    left = sorted(p.name for p in (runs / trunk.run_id).iterdir())
    assert [n for n in left if n.startswith("branch-")] == [f"branch-{s:09d}" for s in trunk.branch_steps]
    assert not [n for n in left if n.startswith(("ckpt-", ".")) or n == "checkpoint.json"]
    go(runs, branch)
    at = branch.trunk.step
    head = [r for r in records(runs / branch.run_id) if r["step"] <= at]
    assert head == [r for r in records(runs / trunk.run_id) if r["step"] <= at]
    steps = [(r["kind"], r["step"]) for r in records(runs / branch.run_id)]
    assert len(steps) == len(set(steps)) and max(s for _, s in steps) == branch.steps


def test_a_branch_waits_for_its_trunk_and_writes_nothing(tmp_path):
    runs, (trunk, branch, _) = planned(tmp_path, study([0.5, 1, 2], warmup_tokens=2048))
    with pytest.raises(Waiting, match=f"waits for trunk {trunk.run_id} at step {branch.trunk.step}"):
        go(runs, branch)
    go(runs, trunk, stop_after_steps=branch.trunk.step - 1)  # the trunk stopped just short of the branch step
    with pytest.raises(Waiting):
        go(runs, branch)
    assert sorted(p.name for p in (runs / branch.run_id).iterdir()) == ["spec.json"]
    go(runs, trunk, stop_after_steps=branch.trunk.step)  # there: the branch can go while the trunk is unfinished
    assert go(runs, branch)["trained_from_step"] == branch.trunk.step


def test_a_branch_resumes_from_its_own_checkpoint_identically(tmp_path):
    runs, (trunk, branch, _) = planned(tmp_path / "a", study([0.5, 1, 2], warmup_tokens=2048))
    go(runs, trunk)
    stopped = go(runs, branch, stop_after_steps=branch.trunk.step + 3)
    assert stopped["status"] == "stopped"
    resumed = go(runs, branch)
    assert resumed["restarts"] == 1 and resumed["trained_from_step"] == branch.trunk.step
    alone_runs, (alone,) = planned(tmp_path / "b", study([0.5], warmup_tokens=2048))
    want = go(alone_runs, alone)
    assert resumed["flops_spent"] == pytest.approx(want["flops"] * branch.own_steps / branch.steps)
    assert_bit_identical(
        runs / branch.run_id, resumed, alone_runs / alone.run_id, want, branch.trunk.step, branch.log_interval
    )


def test_a_branch_of_a_trunk_done_without_its_snapshot_trains_from_step_0(tmp_path):
    """A budget added after the trunk finished: the branch is the independent run (correct, just slower)."""
    runs, (trunk, branch, _) = planned(tmp_path / "a", study([0.5, 1, 2], warmup_tokens=2048))
    spec_file = runs / trunk.run_id / "spec.json"
    spec_file.write_text(trunk.model_copy(update={"branch_steps": []}).model_dump_json())  # planned before it
    go(runs, trunk)
    got = go(runs, branch)
    assert got["trained_from_step"] == 0 and got["flops_spent"] == got["flops"]
    assert "without a snapshot" in got["branch_note"] and trunk.run_id in got["branch_note"]
    alone_runs, (alone,) = planned(tmp_path / "b", study([0.5], warmup_tokens=2048))
    want = go(alone_runs, alone)
    assert got["final_train_loss"] == want["final_train_loss"] and got["final_eval_loss"] == want["final_eval_loss"]


def test_a_branch_refuses_a_trunk_of_other_science(tmp_path):
    runs, (trunk, branch, _) = planned(tmp_path, study([0.5, 1, 2], warmup_tokens=2048))
    go(runs, trunk)
    spec_file = runs / trunk.run_id / "spec.json"
    spec_file.write_text(trunk.model_copy(update={"lr": trunk.lr * 2}).model_dump_json())
    with pytest.raises(StateError, match="lr differs"):
        go(runs, branch)
    spec_file.write_text(trunk.model_copy(update={"seed": 7}).model_dump_json())
    with pytest.raises(StateError, match="seed differs"):
        go(runs, branch)


def test_a_trunk_with_another_decay_treatment_is_other_science():
    """The optimizer (its no_decay list, lm_head in it by default) is science: a trunk planned with another decay
    treatment has another id and no branch starts from it; the check covers every science field but the length."""
    from ladder.model.config import SCIENCE_FIELDS, OptimizerConfig
    from ladder.model.training.branching import SCIENCE, check_science

    trunk, branch = expand(study([0.5, 1], warmup_tokens=2048)).runs
    assert "lm_head" in trunk.optimizer.no_decay and branch.optimizer == trunk.optimizer
    check_science(branch, trunk)
    older = trunk.model_copy(update={"optimizer": OptimizerConfig(no_decay=["embeddings", "norms", "biases"])})
    assert older.content_hash() != trunk.content_hash()
    with pytest.raises(StateError, match="optimizer differs"):
        check_science(branch, older)
    with pytest.raises(StateError, match="eval_tokens differs"):
        check_science(branch, trunk.model_copy(update={"eval_tokens": 64}))
    assert set(SCIENCE) == set(SCIENCE_FIELDS) - {"tokens", "steps"}
    other_warmup = trunk.schedule.model_copy(update={"warmup_tokens": 4096})  # resolved into warmup_steps
    check_science(branch, trunk.model_copy(update={"schedule": other_warmup}))


def test_a_branch_of_a_diverged_trunk_fails_with_its_reason(tmp_path):
    runs, (trunk, branch, _) = planned(tmp_path, study([0.5, 1, 2], warmup_tokens=2048))
    assert go(runs, trunk, nan_at=nan_at_step(branch.trunk.step - 2))["status"] == "diverged"
    with pytest.raises(StateError, match="diverged before step") as info:
        go(runs, branch)
    assert not isinstance(info.value, Waiting)  # a failure (recorded in error.json by the job), not a wait
    assert sorted(p.name for p in (runs / branch.run_id).iterdir()) == ["spec.json"]


# ------------------------------------------------------------------------------------- kill -9 at random moments

KILL_STUDY = dict(budgets=[0.5, 1], tokens_per_param=20.0, batch_tokens=512, warmup_tokens=4096, cooldown_fraction=0.5)


def _kill_when(run: Path, ready, rng: random.Random, what: str, timeout: float = 120) -> None:
    proc = start(run)
    deadline = time.time() + timeout
    while not ready():
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"the trainer exited before {what} ({proc.returncode}):\n{out}\n{err}")
        if time.time() > deadline:
            proc.kill()
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)
    time.sleep(rng.uniform(0.0, 0.05))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (run / "result.json").exists(), f"the run finished before it could be killed ({what})"


@pytest.mark.slow
def test_kill_9_of_trunk_and_branch_before_and_after_the_branch_step_is_bit_identical(tmp_path):
    rng = random.Random(11)
    runs, (trunk, branch) = planned(tmp_path / "ladder", study(**KILL_STUDY))
    at = branch.trunk.step
    trunk_dir, branch_dir = runs / trunk.run_id, runs / branch.run_id
    snapshot = RunDir(trunk_dir).snapshot_dir(at)
    assert RunSpec.model_validate_json((trunk_dir / "spec.json").read_text()).checkpoint_interval < at

    def checkpoint_before_the_branch_step():
        latest = latest_checkpoint(RunDir(trunk_dir)) if (trunk_dir / "checkpoint.json").is_file() else None
        return latest is not None and latest[0] < at

    _kill_when(trunk_dir, checkpoint_before_the_branch_step, rng, "a trunk checkpoint before the branch step")
    assert not snapshot.exists()
    _kill_when(trunk_dir, snapshot.is_dir, rng, "the snapshot")  # the trunk, killed after its branch step
    # the trunk is unfinished, but its snapshot is there: the branch starts, and is killed before and after its
    # first checkpoint of its own
    _kill_when(branch_dir, (branch_dir / "metrics.jsonl").is_file, rng, "the branch to start")
    assert not (branch_dir / "checkpoint.json").is_file()
    _kill_when(branch_dir, (branch_dir / "checkpoint.json").is_file, rng, "the branch's own checkpoint")
    got = go(runs, branch)
    assert got["restarts"] == 1 and got["trained_from_step"] == at
    steps = [(r["kind"], r["step"]) for r in records(branch_dir)]
    assert len(steps) == len(set(steps)), "metrics.jsonl holds a record twice"
    assert [r for r in records(branch_dir) if r["step"] <= at] == [r for r in records(trunk_dir) if r["step"] <= at]
    # the trunk, killed twice, finishes (that a killed run resumes bit-identically is tests/model/training/
    # test_resume.py::test_sigkill_at_random_moments_then_resume_is_bit_identical's)
    finished_trunk = go(runs, trunk)
    assert finished_trunk["status"] == "done" and finished_trunk["restarts"] >= 1
    alone_runs, (alone,) = planned(tmp_path / "alone", study(**{**KILL_STUDY, "budgets": [0.5]}))
    assert alone.run_id == branch.run_id
    want = go(alone_runs, alone)
    assert_bit_identical(branch_dir, got, alone_runs / alone.run_id, want, at, branch.log_interval)


def test_a_trunk_killed_between_its_checkpoint_and_its_snapshot_writes_the_snapshot_when_it_resumes(tmp_path):
    import shutil

    runs, (trunk, branch, _) = planned(tmp_path, study([0.5, 1, 2], warmup_tokens=2048))
    at = branch.trunk.step
    go(runs, trunk, stop_after_steps=at)
    snapshot = RunDir(runs / trunk.run_id).snapshot_dir(at)
    assert snapshot.is_dir() and latest_checkpoint(RunDir(runs / trunk.run_id))[0] == at
    shutil.rmtree(snapshot)  # the kill came after the checkpoint of the branch step, before the snapshot's rename
    (runs / trunk.run_id / f".{snapshot.name}.tmp-1").mkdir()  # and left a half-written copy
    go(runs, trunk, stop_after_steps=at + 1)
    assert snapshot.is_dir() and not list((runs / trunk.run_id).glob(".branch-*"))
    assert go(runs, branch)["trained_from_step"] == at
