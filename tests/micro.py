"""A micro-study for orchestration tests: tiny Llamas on a tiny jsonl corpus, trained in seconds."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
import yaml


def write_study(
    path: Path,
    corpus: Path,
    *,
    name: str = "micro",
    sizes=("4K", "8K"),
    tokens_per_param: float = 10,
    executor: str = "debug",
    budgets=None,
    **training,
) -> Path:
    """A micro study; ``budgets`` (several) with ``schedule={"kind": "wsd"}`` makes trunks and branches."""
    spec = {
        "name": name,
        "data": {"corpus": str(corpus), "seq_len": 32, "validation_fraction": 0.1, "validation_tokens": 1024},
        "model": {"vocab_size": 320, "head_dim": 16, "ffn_multiple": 8, "aspect_ratio": 16},
        "ladder": {
            "sizes": list(sizes),
            "tokens_per_param": tokens_per_param,
            **({"budgets": list(budgets)} if budgets else {}),
        },
        "training": {
            "lr_max": 0.02,
            "batch_min_sequences": 8,
            "eval_tokens": 1024,
            "checkpoints_per_run": 10,
            **training,
        },
        "hero": {"params": "1M"},
        "executor": {"kind": executor, "slurm": {"time_min": 30, "cpus_per_task": 1}},
        "sanity_check": False,
    }
    path.write_text(yaml.safe_dump(spec))
    return path


def result(study_dir: Path, run_id: str) -> dict:
    return json.loads((Path(study_dir) / "runs" / run_id / "result.json").read_text())


def wait_for(predicate, timeout: float, what: str, poll: float = 0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def last_step(run_dir: Path) -> int:
    from ladder.layout import read_jsonl

    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        return 0
    steps = [r["step"] for r in read_jsonl(path) if r.get("kind") == "train"]
    return max(steps, default=0)


def slurm_available() -> bool:
    if not os.environ.get("SLURM_CONF"):
        return False
    try:
        return subprocess.run(["scontrol", "ping"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def require_slurm() -> None:
    """In CI the cluster must be there (scripts/test.sh starts it): a missing cluster fails, never skips."""
    if slurm_available():
        return
    if os.environ.get("CI") or os.environ.get("LADDER_TEST_SLURM"):
        pytest.fail("the local SLURM cluster is not reachable (scripts/slurm-up.sh; SLURM_CONF)")
    pytest.skip("no SLURM cluster (run as root: bash scripts/slurm-up.sh && source scripts/slurm-env.sh)")
