"""How the plan packs runs on devices, and its refusal of a run that cannot fit the hardware it names."""

from __future__ import annotations

import yaml

from ladder.plan.packing import packing
from ladder.plan.planner import expand
from ladder.studies import load_study
from ladder.studies.spec import ExecutorSpec, LocalSpec
from tests.cli_helpers import run_cli


def test_cpu_packing_is_one_run_per_core_with_one_thread():
    runs = expand(load_study("default")).runs
    for cores in (1, 2, 8):
        p = packing(ExecutorSpec(kind="local"), runs, cores=cores)
        assert (p.runs_per_device, p.threads_per_run) == (cores, 1)
    assert packing(ExecutorSpec(kind="local"), runs[:3], cores=8).runs_per_device == 3  # no idle workers
    explicit = packing(ExecutorSpec(kind="local", local=LocalSpec(parallel=1)), runs, cores=8)
    assert (explicit.runs_per_device, explicit.threads_per_run) == (1, 8)


def test_gpu_packing_is_one_run_per_gpu_unless_the_study_says_more():
    runs = expand(load_study("default")).runs
    p = packing(ExecutorSpec(kind="local", hardware="h100", local=LocalSpec(gpus=[0, 1])), runs, cores=16)
    assert (p.runs_per_device, p.devices, p.threads_per_run) == (1, 2, 8)
    p = packing(ExecutorSpec(kind="local", hardware="h100", local=LocalSpec(gpus=[0], runs_per_gpu=4)), runs, cores=16)
    assert (p.runs_per_device, p.threads_per_run) == (4, 4)


def test_plan_shows_memory_and_packing(tmp_path, capsys):
    r = run_cli(capsys, "plan", "default", "--dry-run", "--json")
    assert r.code == 0, r.stderr
    data = r.json()
    assert all(run["est_memory_bytes"] > 0 for run in data["runs"])
    assert data["totals"]["packing"]["runs_per_device"] == 2  # the default study sets parallel: 2
    assert data["totals"]["est_memory_max_bytes"] == max(run["est_memory_bytes"] for run in data["runs"])


def test_plan_refuses_a_micro_batch_that_cannot_fit_and_writes_nothing(tmp_path, capsys):
    study = yaml.safe_load(load_study("chinchilla").to_yaml())
    study["name"] = "too-big"
    study["executor"]["hardware"] = "a10g"
    study["training"]["micro_batch_tokens"] = 2**20  # a million tokens per forward pass of a 100M-class model
    path = tmp_path / "too-big.yaml"
    path.write_text(yaml.safe_dump(study))
    out = tmp_path / "out"
    r = run_cli(capsys, "plan", path, "--out", out)
    assert r.code == 2
    lines = [line for line in r.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and "GiB" in lines[0] and "a10g" in lines[0] and "micro_batch_tokens" in lines[0]
    assert not out.exists()
