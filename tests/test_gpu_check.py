"""benchmarks/gpu_check.py's CPU fallback: the checks a GPU machine runs (loss falls, matches the fp32 run, resume
bit-exact, tokens/s, MFU, memory; 2-process DDP) run here on tiny models, so the script cannot rot."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "gpu_check.py"


def load_script():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_one_model_passes_every_check_on_cpu(tmp_path):
    gc = load_script()
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        r = gc.check_model("tiny", gc.CPU_SHAPES["tiny"], tmp_path, "cpu", {"precision": "fp32", "compile": False}, 5)
    finally:
        torch.set_num_threads(before)
    assert r["ok"], r
    assert r["loss_falls"] and r["matches_fp32"] and r["repeat_bit_exact"] and r["resume_bit_exact"] and r["resume_ok"]
    assert r["repeat_max_rel_diff"] == r["resume_max_rel_diff"] == 0.0
    assert r["tokens_per_s"] > 0 and 0 < r["mfu"] < 1 and r["peak_rss_bytes"] > 0
    assert r["steady_tokens_per_s"] > 0 and 0 < r["steady_mfu"] < 1
    assert r["peak_gpu_allocated_bytes"] is None and r["estimated_memory_bytes"] > 0


@pytest.mark.slow
def test_the_script_runs_end_to_end_on_cpu_with_gloo_ddp():
    # the untied model only: the tied one is the test above, in-process
    proc = subprocess.run([sys.executable, str(SCRIPT), "--device", "cpu", "--models", "tiny-untied"], cwd=REPO,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert len(lines) == 1  # one JSON line of results
    report = json.loads(lines[0])
    assert report["ok"] and report["failures"] == [] and report["device"] == "cpu"
    assert set(report["models"]) == {"tiny-untied"}
    assert report["ddp"]["ok"] and report["ddp"]["backend"] == "gloo"
