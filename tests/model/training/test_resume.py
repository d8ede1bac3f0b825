"""Resume is exact: a run stopped, killed (SIGKILL at a random moment) or preempted (SIGUSR2, SIGINT) and
restarted ends with bit-identical final losses (CPU, fp32, one thread), and metrics.jsonl has no duplicates."""

from __future__ import annotations

import json
import pickle
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from ladder.errors import StateError
from ladder.layout import RunDir
from ladder.model.training.checkpoint import latest_checkpoint
from ladder.model.training.loop import train
from ladder.model.training.preemption import Preempted
from tests.model.training.tiny_runs import (
    make_run,
    make_spec,
    metrics,
    start,
    tiny_data,
)

pytestmark = pytest.mark.usefixtures("one_thread")

STEPS = 60


def spec_for_resume():
    return make_spec(steps=STEPS, checkpoint_interval=7, eval_interval=9, log_interval=2)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted run: result and metrics."""
    run = make_run(tmp_path_factory.mktemp("ref"), spec_for_resume())
    result = train(run, dataset=tiny_data())
    assert result["status"] == "done"
    return result, metrics(run)


def assert_same_as_reference(run: Path, result: dict, reference) -> None:
    ref_result, ref_metrics = reference
    assert result["status"] == "done"
    assert result["final_train_loss"] == ref_result["final_train_loss"]  # bit-identical
    assert result["final_eval_loss"] == ref_result["final_eval_loss"]
    got = metrics(run)
    assert [(r["kind"], r["step"]) for r in got] == [(r["kind"], r["step"]) for r in ref_metrics]  # no duplicates
    assert [r.get("loss", r.get("eval_loss")) for r in got] == [r.get("loss", r.get("eval_loss")) for r in ref_metrics]


def wait_for_checkpoint(run: Path, proc: subprocess.Popen, after_step: int = 0, timeout: float = 120) -> int:
    deadline = time.time() + timeout
    while time.time() < deadline:
        pointer = RunDir(run).checkpoint_pointer
        if pointer.is_file():
            try:
                step = json.loads(pointer.read_text())["step"]
            except (ValueError, KeyError):
                step = 0
            if step > after_step:
                return step
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"trainer exited early ({proc.returncode}):\n{out}\n{err}")
        time.sleep(0.005)
    proc.kill()
    raise AssertionError("no checkpoint appeared")


def test_stop_and_resume_in_process_is_bit_identical(tmp_path, reference):
    run = make_run(tmp_path, spec_for_resume())
    stopped = train(run, dataset=tiny_data(), stop_after_steps=10)  # not on a checkpoint or log boundary
    assert stopped["status"] == "stopped" and stopped["steps_done"] == 10
    assert latest_checkpoint(RunDir(run))[0] == 10 and not (run / "result.json").exists()
    # records written after the checkpoint are dropped on resume: simulate a kill that left some behind
    with open(run / "metrics.jsonl", "a") as f:
        f.write(json.dumps({"kind": "train", "step": 12, "tokens": 0, "loss": 99.0}) + "\n")
        f.write('{"kind": "train", "step": 13, "lo')  # a torn last line
    result = train(run, dataset=tiny_data())
    assert result["restarts"] == 1
    assert_same_as_reference(run, result, reference)


@pytest.mark.slow
def test_sigkill_at_random_moments_then_resume_is_bit_identical(tmp_path, reference):
    run = make_run(tmp_path, spec_for_resume())
    rng = random.Random(1234)
    for _ in range(2):  # killed twice, each time at a random moment after it wrote a checkpoint of its own
        before = latest_checkpoint(RunDir(run))
        proc = start(run)
        wait_for_checkpoint(run, proc, after_step=before[0] if before else 0)
        time.sleep(rng.uniform(0.0, 0.1))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert proc.returncode == -signal.SIGKILL
        assert not (run / "result.json").exists(), "the run finished before it could be killed"
    result = train(run, dataset=tiny_data())  # finish in this process (same thread count)
    assert result["restarts"] == 2
    assert_same_as_reference(run, result, reference)


@pytest.mark.slow
def test_sigusr2_checkpoints_at_a_step_boundary_and_chains_to_submitit(tmp_path):
    """The checkpoint is written before submitit's handler runs (which requeues and exits). That a run resumes
    from such a checkpoint bit-identically is the signal test below's (in-process) and, through SLURM's USR2,
    tests/test_submit.py::test_slurm_micro_study_preemption_and_requeue's."""
    run = make_run(tmp_path, spec_for_resume())
    marker = tmp_path / "submitit_handler_called.json"
    proc = start(run, str(marker))  # the subprocess installs a submitit-like USR2 handler first
    wait_for_checkpoint(run, proc)
    proc.send_signal(signal.SIGUSR2)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 42, err  # the previous handler ran (and exited, as submitit does after requeueing)
    called = json.loads(marker.read_text())
    assert called["signum"] == signal.SIGUSR2
    step = called["pointer"]["step"]
    assert latest_checkpoint(RunDir(run))[0] == step  # checkpoint written BEFORE the handler was called
    assert max(r["step"] for r in metrics(run)) <= step
    assert not (run / "result.json").exists()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGUSR2])
def test_signal_mid_step_checkpoints_at_the_boundary_raises_preempted_and_resumes_identically(tmp_path, reference, sig):
    """In the main thread with no Python handler before (Ctrl-C in a terminal; a plain SIGUSR2): the run stops at
    the next step boundary with a checkpoint, raises Preempted (exit code 128 + signum), puts the previous handler
    back, and a second call finishes bit-identically (once: both signals take the one path to that checkpoint)."""
    run = make_run(tmp_path, spec_for_resume())
    before = signal.getsignal(sig)
    import ladder.model.training.loop as T

    original = T._Trainer._train_step
    calls = {"n": 0}

    def step_and_signal(self, step):
        calls["n"] += 1
        if calls["n"] == 4:
            signal.raise_signal(sig)  # arrives in the middle of update 4
        return original(self, step)

    T._Trainer._train_step = step_and_signal
    try:
        with pytest.raises(Preempted) as info:
            train(run, dataset=tiny_data())
    finally:
        T._Trainer._train_step = original
    assert info.value.signum == sig and info.value.step == 4 and info.value.exit_code == 128 + sig
    again = pickle.loads(pickle.dumps(info.value))  # submitit pickles job exceptions
    assert (again.signum, again.step, str(again)) == (sig, 4, str(info.value))
    assert latest_checkpoint(RunDir(run))[0] == 4 and not (run / "result.json").exists()
    assert signal.getsignal(sig) is before
    if sig == signal.SIGINT:
        result = train(run, dataset=tiny_data())
        assert_same_as_reference(run, result, reference)


def test_a_checkpoint_resumes_under_another_micro_batch_but_never_under_other_science(tmp_path):
    """The checkpoint carries the spec's hash of its science: a re-plan that changed only the micro-batch (3 does
    not divide the 8 sequences of a step) resumes from it; one that changed the LR is refused."""
    spec = make_spec(steps=12, checkpoint_interval=100, eval_interval=100, log_interval=2)
    other_micro = spec.model_copy(update={"micro_batch_size": 3})
    assert other_micro.content_hash() == spec.content_hash()
    run = make_run(tmp_path / "micro", spec)
    assert train(run, dataset=tiny_data(), stop_after_steps=5)["status"] == "stopped"
    (run / "spec.json").write_text(other_micro.model_dump_json(indent=2))
    result = train(run, dataset=tiny_data())
    assert result["status"] == "done" and result["restarts"] == 1 and result["steps"] == 12

    run = make_run(tmp_path / "lr", spec)
    assert train(run, dataset=tiny_data(), stop_after_steps=5)["status"] == "stopped"
    (run / "spec.json").write_text(spec.model_copy(update={"lr": spec.lr / 2}).model_dump_json(indent=2))
    with pytest.raises(StateError, match="different spec"):
        train(run, dataset=tiny_data())


def test_a_run_that_fails_to_resume_writes_its_failed_result_without_a_second_error(tmp_path, caplog):
    """A resume refused (a checkpoint of another spec) wrote no failed result: the trainer died of "'_Trainer'
    object has no attribute 'recent'" on the way, logged as a second traceback ("could not write the failed
    result") under the refusal."""
    spec = make_spec(steps=12, checkpoint_interval=100, eval_interval=100, log_interval=2)
    run = make_run(tmp_path / "lr", spec)
    assert train(run, dataset=tiny_data(), stop_after_steps=5)["status"] == "stopped"
    (run / "spec.json").write_text(spec.model_copy(update={"lr": spec.lr / 2}).model_dump_json(indent=2))
    with pytest.raises(StateError, match="different spec"):
        train(run, dataset=tiny_data())
    assert "could not write the failed result" not in caplog.text
    assert json.loads((run / "result.json").read_text())["status"] == "failed"


@pytest.mark.parametrize("part", ["trainer_state.json", "optimizer.pt", "rng.pt"])
def test_a_torn_checkpoint_is_refused_naming_its_repair_and_the_run_fails_cleanly(tmp_path, caplog, part):
    """A checkpoint file cut short (disk trouble, a copy that stopped): resuming died of a JSONDecodeError (or
    torch's zip-archive RuntimeError) traceback, and writing the failed result then died of "'_Trainer' object has
    no attribute 'recent'", logged as a second traceback. Now one StateError names the checkpoint and the repair,
    the run's result says failed, and once the checkpoint is deleted the run trains from its start."""
    import shutil

    spec = make_spec(steps=12, checkpoint_interval=5, eval_interval=100, log_interval=2)
    run = make_run(tmp_path / "torn", spec)
    assert train(run, dataset=tiny_data(), stop_after_steps=7)["status"] == "stopped"
    _, path = latest_checkpoint(RunDir(run))
    (path / part).write_bytes((path / part).read_bytes()[:100])
    with pytest.raises(StateError, match=rf"checkpoint .*{path.name} is damaged .*delete it \(checkpoint.json and"):
        train(run, dataset=tiny_data())
    assert "could not write the failed result" not in caplog.text
    assert json.loads((run / "result.json").read_text())["status"] == "failed"
    (run / "checkpoint.json").unlink()
    shutil.rmtree(path)
    result = train(run, dataset=tiny_data())
    assert result["status"] == "done" and result["restarts"] == 0
