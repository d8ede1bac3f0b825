"""Submit, status, collect and cancel over real executors: in-process debug, local worker processes and the
local SLURM cluster (scripts/slurm-up.sh), including preemption and requeue."""

from __future__ import annotations

import contextlib
import subprocess

import pytest

from tests.cli_helpers import run_cli
from tests.micro import last_step, require_slurm, result, wait_for, write_study

pytestmark = pytest.mark.slow


def _status(capsys, study_dir):
    r = run_cli(capsys, "status", study_dir, "--json")
    assert r.code == 0, r.stderr
    return {row["run_id"]: row for row in r.json()["runs"]}


def test_debug_executor_trains_collects_and_never_resubmits(planned_micro, capsys):
    study_dir, ids = planned_micro()
    r = run_cli(capsys, "submit", study_dir, "--executor", "debug", "--json")
    assert r.code == 0, r.stderr
    assert sorted(r.json()["submitted"]) == sorted(ids)
    assert {row["state"] for row in _status(capsys, study_dir).values()} == {"done"}
    again = run_cli(capsys, "submit", study_dir, "--executor", "debug", "--json").json()
    assert again["submitted"] == [] and sorted(again["skipped"]) == sorted(ids)

    c = run_cli(capsys, "collect", study_dir, "--json").json()
    assert c["rows"] == len(ids) and c["problems"] == []
    import pandas as pd

    df = pd.read_parquet(study_dir / "results.parquet")
    for col in (
        "run_id",
        "axis/size",
        "d_model",
        "n_layers",
        "params",
        "params_total",
        "params_non_embedding",
        "tokens",
        "flops",
        "batch_tokens",
        "lr",
        "schedule",
        "final_train_loss",
        "final_eval_loss",
        "status",
        "wall_time_s",
        "tokens_per_s",
    ):
        assert col in df.columns, col
    assert (df["status"] == "done").all() and df["final_eval_loss"].notna().all()
    curves = pd.read_parquet(study_dir / "curves.parquet")
    assert set(curves["run_id"]) == set(ids) and {"train", "eval"} <= set(curves["kind"])
    assert pd.read_csv(study_dir / "results.csv").shape[0] == len(ids)

    # a result the books cannot use (text for its loss) is corrupt: kept aside, and --retry-failed trains it again
    import json

    rd = study_dir / "runs" / ids[0]
    bad = {**json.loads((rd / "result.json").read_text()), "final_eval_loss": "abc"}
    (rd / "result.json").write_text(json.dumps(bad))
    assert _status(capsys, study_dir)[ids[0]]["state"] == "corrupt"
    skipped = run_cli(capsys, "submit", study_dir, "--executor", "debug", "--json").json()
    assert skipped["submitted"] == [] and "--retry-failed" in skipped["reasons"][ids[0]]
    retried = run_cli(capsys, "submit", study_dir, "--executor", "debug", "--retry-failed", "--json")
    assert retried.code == 0 and retried.json()["submitted"] == [ids[0]], retried.stderr
    assert _status(capsys, study_dir)[ids[0]]["state"] == "done"
    (aside,) = rd.glob("result.unusable-*.json")
    assert json.loads(aside.read_text())["final_eval_loss"] == "abc"


def _tokenizer_gone_after_plan(tmp_path, tiny_tokenizer):
    """A tokenizer.json path under a folder named 'nonexistent', there while the study is planned (a real one:
    `validate` and `plan` read it)."""
    import shutil

    tok = tmp_path / "nonexistent" / "tokenizer.json"
    tok.parent.mkdir()
    shutil.copyfile(tiny_tokenizer / "tokenizer.json", tok)
    return tok


def test_a_run_that_raises_shows_its_error(tmp_path, tiny_jsonl_corpus, tiny_tokenizer, capsys):
    spec = write_study(tmp_path / "bad.yaml", tiny_jsonl_corpus, name="bad", sizes=("4K",))
    tok = _tokenizer_gone_after_plan(tmp_path, tiny_tokenizer)
    spec.write_text(spec.read_text().replace("corpus:", f"tokenizer: {tok}\n  corpus:"))
    out = tmp_path / "bad"
    assert run_cli(capsys, "plan", spec, "--out", out, "--no-fit-check").code == 0
    tok.unlink()  # `validate` and `plan` refuse a tokenizer that is not there: it goes after planning
    r = run_cli(capsys, "submit", out, "--executor", "debug", "--json")
    assert r.code == 1  # the debug executor trained it here: its failure is this command's
    rows = list(_status(capsys, out).values())
    assert rows[0]["state"] == "failed" and "nonexistent" in rows[0]["error"]
    again = run_cli(capsys, "submit", out, "--executor", "debug", "--json").json()
    assert again["submitted"] == [] and "retry" in again["reasons"][rows[0]["run_id"]]
    retried = run_cli(capsys, "submit", out, "--executor", "debug", "--retry-failed", "--json").json()
    assert retried["submitted"] == [rows[0]["run_id"]]


def test_local_executor_runs_the_micro_study(planned_micro, capsys):
    study_dir, ids = planned_micro()
    r = run_cli(capsys, "submit", study_dir, "--executor", "local", "--parallel", "2", "--cpus-per-run", "1", "--json")
    assert r.code == 0, r.stderr
    assert sorted(r.json()["submitted"]) == sorted(ids)
    again = run_cli(capsys, "submit", study_dir, "--executor", "local", "--json").json()
    assert again["submitted"] == []  # workers alive or runs done: nothing twice
    from ladder.books.run_status import wait

    rows = wait(study_dir, poll_s=1.0, timeout_s=300)
    assert {r.state for r in rows} == {"done"}, [(r.run_id, r.state, r.error) for r in rows]


def test_submit_piped_into_another_process_returns_while_the_runs_go_on(planned_micro, capsys):
    """Issue 15: the local workers used to inherit submit's stdout, so `ladder submit ... | jq .` waited for the
    runs to finish. They now log to <study>/logs/ in a session of their own."""
    import json
    import os
    import sys
    import time

    study_dir, ids = planned_micro(sizes=("4K", "8K"), tokens_per_param=60)
    ladder = [sys.executable, "-c", "from ladder.cli import entry; entry()"]
    cmd = [*ladder, "submit", str(study_dir), "--executor", "local", "--parallel", "1", "--cpus-per-run", "1", "--json"]
    started = time.monotonic()
    try:
        # the reader is another process (a pipe to json.tool, as `| jq .`), and ours captures what it prints
        piped = subprocess.run(
            f"{subprocess.list2cmdline(cmd)} | {sys.executable} -m json.tool",
            shell=True,
            capture_output=True,
            text=True,
            timeout=120,
        )
        took = time.monotonic() - started
        assert piped.returncode == 0, piped.stderr
        submitted = json.loads(piped.stdout)
        assert sorted(submitted["submitted"]) == sorted(ids)
        states = {row["run_id"]: row["state"] for row in _status(capsys, study_dir).values()}
        assert took < 60 and set(states.values()) - {"done"}, (took, states)  # back before the runs are
        for run_id in ids:
            for job in submitted["job_ids"][run_id]:
                with contextlib.suppress(ProcessLookupError):  # a worker in its own session: no terminal's ^C
                    assert os.getsid(int(job)) != os.getsid(0)
        logs = sorted(p.name for p in (study_dir / "logs").iterdir())
        assert logs and all(n.startswith("worker-") and n.endswith(".log") for n in logs), logs
        from ladder.books.run_status import wait

        rows = wait(study_dir, poll_s=1.0, timeout_s=300)
        assert {r.state for r in rows} == {"done"}, [(r.run_id, r.state, r.error) for r in rows]
    finally:
        run_cli(capsys, "cancel", study_dir)


def test_slurm_micro_study_preemption_and_requeue(tmp_path, tiny_jsonl_corpus, capsys):
    """Three runs as one SLURM job array. One is preempted with USR2, one requeued with scontrol; all end with
    the bit-identical losses of undisturbed runs trained in this process."""
    require_slurm()
    sizes = ("4K", "6K", "8K")
    kw = dict(sizes=sizes, tokens_per_param=40, checkpoints_per_run=40)
    base_spec = write_study(tmp_path / "base.yaml", tiny_jsonl_corpus, name="micro", **kw)
    base = tmp_path / "base"
    assert run_cli(capsys, "plan", base_spec, "--out", base, "--no-fit-check").code == 0  # 3 runs: no fit
    slurm_spec = write_study(tmp_path / "slurm.yaml", tiny_jsonl_corpus, name="micro", executor="slurm", **kw)
    study = tmp_path / "slurm"
    slurm_plan = run_cli(capsys, "plan", slurm_spec, "--out", study, "--no-fit-check", "--json").json()
    ids = [r["run_id"] for r in slurm_plan["runs"]]

    sub = run_cli(capsys, "submit", study, "--json")
    assert sub.code == 0, sub.stderr
    job_ids = sub.json()["job_ids"]
    assert sorted(sub.json()["submitted"]) == sorted(ids)
    assert len({j[0].split("_")[0] for j in job_ids.values()}) == 1  # one array
    assert run_cli(capsys, "submit", study, "--json").json()["submitted"] == []

    preempted, requeued = ids[2], ids[1]
    run_dirs = {i: study / "runs" / i for i in ids}
    wait_for(lambda: last_step(run_dirs[preempted]) >= 20, 240, "the run to be preempted to train a while")
    assert not (run_dirs[preempted] / "result.json").exists()
    subprocess.run(["scancel", "--signal=USR2", job_ids[preempted][0]], check=True)
    wait_for(lambda: (run_dirs[requeued] / "checkpoint.json").is_file(), 240, "a periodic checkpoint to requeue from")
    assert not (run_dirs[requeued] / "result.json").exists()
    requeue_at = last_step(run_dirs[requeued])
    subprocess.run(["scontrol", "requeue", job_ids[requeued][0]], check=True)
    # the undisturbed references, trained meanwhile in this process with the same thread count
    for run_id in ids:
        assert run_cli(capsys, "train", base / "runs" / run_id, "--threads", "1").code == 0

    from ladder.books.run_status import wait

    rows = wait(study, poll_s=2.0, timeout_s=600)
    assert {r.state for r in rows} == {"done"}, [(r.run_id, r.state, r.error) for r in rows]
    for run_id in ids:
        got, want = result(study, run_id), result(base, run_id)
        assert got["final_train_loss"] == want["final_train_loss"], run_id
        assert got["final_eval_loss"] == want["final_eval_loss"], run_id
    assert result(study, preempted)["restarts"] >= 1
    assert result(study, requeued)["restarts"] >= 1 and requeue_at > 0
    c = run_cli(capsys, "collect", study, "--json").json()
    assert c["rows"] == 3 and c["problems"] == []


def test_slurm_a_run_that_raises_shows_its_error(tmp_path, tiny_jsonl_corpus, tiny_tokenizer, capsys):
    require_slurm()
    spec = write_study(tmp_path / "bad.yaml", tiny_jsonl_corpus, name="bad", sizes=("4K",), executor="slurm")
    tok = _tokenizer_gone_after_plan(tmp_path, tiny_tokenizer)
    spec.write_text(spec.read_text().replace("corpus:", f"tokenizer: {tok}\n  corpus:"))
    out = tmp_path / "bad"
    assert run_cli(capsys, "plan", spec, "--out", out, "--no-fit-check").code == 0
    tok.unlink()
    assert run_cli(capsys, "submit", out, "--json").json()["submitted"]
    from ladder.books.run_status import wait

    rows = wait(out, poll_s=1.0, timeout_s=180)
    assert rows[0].state == "failed" and "nonexistent" in (rows[0].error or "")
    status = _status(capsys, out)
    assert "nonexistent" in next(iter(status.values()))["error"]


def test_a_debug_submit_whose_run_fails_says_so_and_exits_1(tmp_path, capsys, monkeypatch):
    """`submit S --executor debug` of a run that failed at once (its checkpoint folder deleted) printed "1
    submitted" and exited 0: the run trained in this process, so its failure is named, and the exit is 1."""
    import ladder.model.training.loop
    from ladder.errors import StateError
    from tests.cli_helpers import run_cli
    from tests.fake_runs import plan_micro

    def train(*args, **kwargs):
        raise StateError("checkpoint.json names ckpt-000000008, which is missing")

    monkeypatch.setattr(ladder.model.training.loop, "train", train)
    root = tmp_path / "study"
    run_id = plan_micro(root)[0].run_id
    r = run_cli(capsys, "submit", root, "--executor", "debug", "--run", run_id)
    assert r.code == 1 and f"{run_id}: failed: checkpoint.json names" in r.stderr, (r.code, r.stderr)
    assert "Traceback" not in r.stdout + r.stderr
    r = run_cli(capsys, "submit", root, "--executor", "debug", "--run", run_id, "--retry-failed", "--json")
    assert r.code == 1 and r.json()["results"][run_id].startswith("failed: ")
