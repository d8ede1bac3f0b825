"""Branches in the orchestration: ``status`` shows a branch whose trunk has not reached its step as waiting;
``submit`` skips a branch whose trunk is not going to run and puts trunks before branches; the local queue takes
a trunk before its branches, polls while a trunk is training elsewhere, and does not wait forever for a trunk that
stopped; SLURM branches start after their trunk's job. End-to-end tests (they train) are marked slow."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import pytest

from ladder import layout
from ladder.books.run_lock import run_lock
from ladder.jobs.on_node import WorkerJob
from ladder.model.config import RunSpec
from ladder.plan.planner import read_plan
from tests.cli_helpers import run_cli
from tests.micro import require_slurm, result, write_study

WSD = {"kind": "wsd", "warmup_fraction": 0.1, "cooldown_fraction": 0.3}


@pytest.fixture()
def branched(tmp_path, tiny_jsonl_corpus, capsys):
    """A planned micro study with a wsd trunk (1x) and a branch (0.5x) per size."""

    def make(name="branched", sizes=("4K",), executor="debug", **kw):
        spec = write_study(tmp_path / f"{name}.yaml", tiny_jsonl_corpus, name=name, sizes=sizes, executor=executor,
                           budgets=[0.5, 1], schedule=WSD, **kw)  # fmt: skip
        out = tmp_path / name
        r = run_cli(capsys, "plan", spec, "--out", out, "--no-fit-check", "--json")  # 1 or 2 sizes: no fit
        assert r.code == 0, r.stderr
        _, specs = read_plan(out)
        trunks = [s for s in specs if s.branch_steps]
        branches = [s for s in specs if s.trunk is not None]
        assert len(trunks) == len(branches) == len(sizes)
        return out, trunks, branches

    return make


def _status(capsys, study_dir) -> dict[str, dict]:
    r = run_cli(capsys, "status", study_dir, "--json")
    assert r.code == 0, r.stderr
    return {row["run_id"]: row for row in r.json()["runs"]}


def _snapshot(study_dir: Path, branch: RunSpec) -> Path:
    return layout.StudyDir(study_dir).run(branch.trunk.run_id).snapshot_dir(branch.trunk.step)


def test_status_shows_a_branch_waiting_for_its_trunk(branched, capsys):
    study_dir, (trunk,), (branch,) = branched()
    rows = _status(capsys, study_dir)
    assert rows[trunk.run_id]["state"] == "planned"
    row = rows[branch.run_id]
    assert row["state"] == "waiting" and row["trunk_run_id"] == trunk.run_id
    assert row["error"] == f"waits for trunk {trunk.run_id} at step {branch.trunk.step}"
    human = run_cli(capsys, "status", study_dir)
    assert "waiting" in human.stdout and "1 waiting" in human.stdout
    _snapshot(study_dir, branch).mkdir()  # the trunk passed the branch step
    assert _status(capsys, study_dir)[branch.run_id]["state"] == "planned"
    _snapshot(study_dir, branch).rmdir()
    layout.atomic_write_json(layout.StudyDir(study_dir).run(trunk.run_id).result, {"status": "done"})
    assert _status(capsys, study_dir)[branch.run_id]["state"] == "planned"  # it can go: from step 0


def test_status_and_collect_agree_on_a_branch_and_count_only_its_own_flops(branched, capsys):
    """The books of a branch: waiting (collect: no error, the wait as its reason), then partial (its FLOPs spent
    leave out the trunk's prefix that its metrics and checkpoint step include), then done (its result's
    flops_spent); the FLOPs planned, like the plan's totals, count each trunk once and a branch's own steps."""
    from ladder.books.collect import collect
    from tests.fake_runs import done_result, partial

    study_dir, (trunk,), (branch,) = branched()
    sd = layout.StudyDir(study_dir)

    def both() -> tuple[dict, dict]:
        rows = _status(capsys, study_dir)
        table = collect(study_dir).runs.set_index("run_id")
        assert {rid: table.loc[rid, "status"] for rid in rows} == {rid: r["state"] for rid, r in rows.items()}
        for rid, r in rows.items():
            assert table.loc[rid, "flops_spent"] == pytest.approx(r["flops_spent"])
        return rows[branch.run_id], table.loc[branch.run_id].to_dict()

    row, rec = both()
    assert row["state"] == rec["status"] == "waiting"
    waits = f"waits for trunk {trunk.run_id} at step {branch.trunk.step}"
    assert rec["reason"] == row["error"] == waits and rec["error"] is None
    assert rec["trunk_run_id"] == trunk.run_id and rec["branch_step"] == branch.trunk.step and rec["seed"] == 0
    assert rec["flops_spent"] == 0 and rec["flops_planned"] == pytest.approx(branch.own_flops)
    assert branch.own_flops < branch.flops and branch.run_id in collect(study_dir).pending
    plan = run_cli(capsys, "plan", study_dir / "study.yaml", "--out", study_dir, "--no-fit-check", "--json").json()
    total = run_cli(capsys, "status", study_dir, "--json").json()["totals"]
    assert (
        total["flops_planned"]
        == pytest.approx(plan["totals"]["flops"])
        == pytest.approx(trunk.flops + branch.own_flops)
    )

    _snapshot(study_dir, branch).mkdir(parents=True)  # the trunk passed the branch step; the branch trained 2 more
    per_step = branch.sequences_per_batch * branch.data.seq_len
    partial(sd, branch, branch.trunk.step + 2)
    row, rec = both()
    assert row["state"] == rec["status"] == "interrupted"
    assert rec["tokens_done"] == (branch.trunk.step + 2) * per_step  # its position, the trunk's prefix included
    assert rec["flops_spent"] == pytest.approx(2 * per_step * branch.flops_per_token)

    own = float(branch.own_steps * per_step * branch.flops_per_token)
    layout.atomic_write_json(sd.run(branch.run_id).result, {**done_result(branch, 3.0), "flops_spent": own})
    row, rec = both()
    assert rec["status"] == "done" and rec["flops_spent"] == pytest.approx(own) == pytest.approx(rec["flops_planned"])
    assert rec["flops"] == pytest.approx(branch.flops)  # the point's compute: all its tokens


def test_submit_skips_a_branch_whose_trunk_will_not_run_and_says_why(branched, capsys):
    study_dir, (trunk,), (branch,) = branched()
    r = run_cli(capsys, "submit", study_dir, "--executor", "debug", "--run", branch.run_id, "--json")
    assert r.code == 0, r.stderr
    data = r.json()
    assert data["submitted"] == [] and "submit the trunk too" in data["reasons"][branch.run_id]
    assert trunk.run_id in data["reasons"][branch.run_id] and "planned" in data["reasons"][branch.run_id]


def test_submit_puts_trunks_before_branches(branched, capsys, monkeypatch):
    import ladder.jobs.submit as submit

    study_dir, trunks, branches = branched(sizes=("4K", "8K"))
    seen: list[str] = []
    monkeypatch.setattr(submit, "_run_debug", lambda sd, runs: seen.extend(r.run_id for r in runs) or {})
    assert run_cli(capsys, "submit", study_dir, "--executor", "debug").code == 0
    assert set(seen[:2]) == {t.run_id for t in trunks} and set(seen[2:]) == {b.run_id for b in branches}


def test_a_job_that_finds_its_branch_waiting_records_no_failure(branched, capsys):
    from ladder.jobs.on_node import run_one
    from ladder.model.training.branching import Waiting

    study_dir, (trunk,), (branch,) = branched()
    rd = layout.StudyDir(study_dir).run(branch.run_id)
    with pytest.raises(Waiting):
        run_one(rd.path, threads=1)
    assert not rd.error.exists() and not rd.result.exists()
    assert _status(capsys, study_dir)[branch.run_id]["state"] == "waiting"


# ------------------------------------------------------------------------------------------- the local queue


class FakeTrainer:
    """Stands in for ``run_one``: a trunk writes its snapshots and a done result; a branch needs its snapshot."""

    def __init__(self, study_dir: Path):
        self.sd = layout.StudyDir(study_dir)
        self.order: list[str] = []

    def __call__(self, run_dir, threads=None):
        from ladder.model.training.branching import Waiting

        rd = layout.RunDir(Path(run_dir))
        spec = RunSpec.model_validate_json(rd.spec.read_text())
        self.order.append(spec.run_id)
        if spec.trunk is not None and not self.sd.run(spec.trunk.run_id).snapshot_dir(spec.trunk.step).is_dir():
            raise Waiting(f"branch {spec.run_id} waits for trunk {spec.trunk.run_id} at step {spec.trunk.step}")
        for step in spec.branch_steps:
            rd.snapshot_dir(step).mkdir()
        layout.atomic_write_json(rd.result, {"status": "done"})
        return {"status": "done"}


def test_the_local_queue_trains_a_trunk_before_its_branch_whatever_the_order(branched, monkeypatch):
    import ladder.jobs.on_node as node_jobs

    study_dir, (trunk,), (branch,) = branched()
    fake = FakeTrainer(study_dir)
    monkeypatch.setattr(node_jobs, "run_one", fake)
    outcomes = WorkerJob(str(study_dir), [branch.run_id, trunk.run_id], poll_s=0.01)()
    assert fake.order == [trunk.run_id, branch.run_id]
    assert outcomes == {trunk.run_id: "done", branch.run_id: "done"}


def test_the_local_queue_waits_while_the_trunk_trains_elsewhere(branched, monkeypatch):
    import ladder.jobs.on_node as node_jobs

    study_dir, (trunk,), (branch,) = branched()
    fake = FakeTrainer(study_dir)
    monkeypatch.setattr(node_jobs, "run_one", fake)
    trunk_dir = layout.StudyDir(study_dir).run(trunk.run_id)
    out: dict = {}
    with run_lock(trunk_dir) as held:  # another worker trains the trunk
        assert held
        worker = threading.Thread(target=lambda: out.update(WorkerJob(str(study_dir), [branch.run_id], poll_s=0.01)()))
        worker.start()
        time.sleep(0.5)
        assert worker.is_alive() and fake.order == []  # polling, not training the branch from scratch
        _snapshot(study_dir, branch).mkdir()
        worker.join(timeout=10)
    assert not worker.is_alive() and fake.order == [branch.run_id] and out == {branch.run_id: "done"}


def test_the_local_queue_does_not_wait_for_a_trunk_that_stopped(branched, monkeypatch, capsys):
    import ladder.jobs.on_node as node_jobs
    from ladder.books import job_records

    study_dir, (trunk,), (branch,) = branched()
    fake = FakeTrainer(study_dir)
    monkeypatch.setattr(node_jobs, "run_one", fake)
    # interrupted (no lock, not in this queue): the branch is tried, waits, and is left for a later submit
    outcomes = WorkerJob(str(study_dir), [branch.run_id], poll_s=0.01)()
    assert outcomes[branch.run_id].startswith("waiting: ") and fake.order == [branch.run_id]
    assert _status(capsys, study_dir)[branch.run_id]["state"] == "waiting"  # not failed: a new submit runs it
    # cancelled: the branch is cancelled with it
    sd = layout.StudyDir(study_dir)
    with job_records.editing(sd) as book:
        for run_id in (trunk.run_id, branch.run_id):
            book[run_id] = [job_records.JobRecord(executor="local", job_ids=["1"], folder="x", submitted_at="now",
                                                  cancelled=run_id == trunk.run_id)]  # fmt: skip
    outcomes = WorkerJob(str(study_dir), [branch.run_id], poll_s=0.01)()
    assert "cancelled" in outcomes[branch.run_id] and trunk.run_id in outcomes[branch.run_id]
    assert job_records.is_cancelled(sd, branch.run_id)


# ------------------------------------------------------------------------------------------- end to end


@pytest.mark.slow
def test_local_executor_trains_trunks_then_branches_from_their_snapshots(branched, capsys):
    study_dir, trunks, branches = branched(sizes=("4K", "8K"), tokens_per_param=40)
    r = run_cli(capsys, "submit", study_dir, "--executor", "local", "--parallel", "2", "--cpus-per-run", "1",
                "--json")  # fmt: skip
    assert r.code == 0, r.stderr
    from ladder.books.run_status import wait

    rows = wait(study_dir, poll_s=1.0, timeout_s=300)
    assert {row.state for row in rows} == {"done"}, [(row.run_id, row.state, row.error) for row in rows]
    for b in branches:
        got = result(study_dir, b.run_id)
        assert got["trained_from_step"] == b.trunk.step and got["trunk_run_id"] == b.trunk.run_id
        assert got["flops_spent"] < got["flops"]
    for t in trunks:
        assert result(study_dir, t.run_id)["snapshots"] == t.branch_steps
    c = run_cli(capsys, "collect", study_dir, "--json").json()
    assert c["rows"] == 4 and c["problems"] == []
    import pandas as pd

    df = pd.read_parquet(study_dir / "results.parquet").set_index("run_id")
    for b in branches:
        assert df.loc[b.run_id, "trunk_run_id"] == b.trunk.run_id and df.loc[b.run_id, "branch_step"] == b.trunk.step
        assert df.loc[b.run_id, "flops_spent"] < df.loc[b.run_id, "flops"]


@pytest.mark.slow
@pytest.mark.slurm
def test_slurm_branches_start_after_their_trunks_job_and_match_an_undisturbed_run(branched, capsys):
    """Trunks as one array, each trunk's branches as an array with --dependency=afterany:<trunk job>; the
    branches start from the snapshots and end with the losses of the same runs trained in this process."""
    require_slurm()
    base_dir, _, _ = branched(name="base", sizes=("4K", "6K"), tokens_per_param=40)
    study_dir, trunks, branches = branched(name="slurm", sizes=("4K", "6K"), tokens_per_param=40, executor="slurm")
    sub = run_cli(capsys, "submit", study_dir, "--json")
    assert sub.code == 0, sub.stderr
    job_ids = sub.json()["job_ids"]
    trunk_job = {t.run_id: job_ids[t.run_id][0] for t in trunks}
    assert len({j.split("_")[0] for j in trunk_job.values()}) == 1  # the trunks: one array
    for b in branches:
        shown = subprocess.run(["scontrol", "show", "job", job_ids[b.run_id][0]], capture_output=True, text=True)
        deps = shown.stdout.split("Dependency=")[1].split()[0] if "Dependency=" in shown.stdout else ""
        assert deps.startswith(f"afterany:{trunk_job[b.trunk.run_id]}"), deps  # the trunks take a while to start
    assert run_cli(capsys, "submit", study_dir, "--json").json()["submitted"] == []
    # the undisturbed references, trunks first, trained meanwhile in this process with one thread
    _, base_specs = read_plan(base_dir)
    for spec in sorted(base_specs, key=lambda s: s.trunk is not None):
        assert run_cli(capsys, "train", base_dir / "runs" / spec.run_id, "--threads", "1").code == 0
    from ladder.books.run_status import wait

    rows = wait(study_dir, poll_s=2.0, timeout_s=600)
    assert {row.state for row in rows} == {"done"}, [(row.run_id, row.state, row.error) for row in rows]
    for b in branches:
        got, want = result(study_dir, b.run_id), result(base_dir, b.run_id)
        assert got["trained_from_step"] == b.trunk.step == want["trained_from_step"]
        assert got["final_train_loss"] == want["final_train_loss"] and got["final_eval_loss"] == want["final_eval_loss"]
    for b in branches:  # each branch started once its trunk's job had ended
        times = {}
        for run_id in (b.trunk.run_id, b.run_id):
            out = subprocess.run(
                ["sacct", "-j", job_ids[run_id][0], "-n", "-X", "-P", "-o", "Start,End"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.split()
            times[run_id] = out[-1].split("|")
        assert times[b.run_id][0] >= times[b.trunk.run_id][1], times
    book = json.loads((study_dir / "jobs.json").read_text())["runs"]
    assert all(len(book[s.run_id]) == 1 for s in trunks + branches)
