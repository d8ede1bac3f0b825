"""What a submitted job asks the scheduler for, and what each of its tasks does: a run on several GPUs is one DDP
job with a task per GPU; an lm-eval job is one task on at most one GPU, and only a job's first task evaluates."""

from __future__ import annotations

from ladder.jobs.submit import _slurm_parameters
from ladder.studies.spec import ExecutorSpec, SlurmSpec


def test_training_takes_a_task_per_gpu_and_eval_one_task():
    ex = ExecutorSpec(kind="slurm", slurm=SlurmSpec(gpus_per_task=4, cpus_per_task=8))
    train = _slurm_parameters(ex)
    assert (train["tasks_per_node"], train["gpus_per_node"], train["cpus_per_task"]) == (4, 4, 8)
    ev = _slurm_parameters(ex, one_task=True)
    assert (ev["tasks_per_node"], ev["gpus_per_node"], ev["cpus_per_task"]) == (1, 1, 8)
    cpu = _slurm_parameters(ExecutorSpec(kind="slurm"), one_task=True)
    assert (cpu["tasks_per_node"], cpu["gpus_per_node"]) == (1, 0)


def test_only_the_first_task_of_a_job_evaluates(tmp_path, monkeypatch):
    import ladder.model.evaluation.downstream as downstream
    from ladder.jobs.on_node import evaluate_runs

    calls = []
    monkeypatch.setattr(downstream, "evaluate_run", lambda run_dir, *a, **k: calls.append(run_dir) or {"results": {}})
    monkeypatch.setenv("SLURM_PROCID", "1")
    assert evaluate_runs([str(tmp_path / "r")], None, None, None) == {} and calls == []
    monkeypatch.setenv("SLURM_PROCID", "0")
    assert evaluate_runs([str(tmp_path / "r")], None, None, None) == {"r": {}} and calls == [str(tmp_path / "r")]
