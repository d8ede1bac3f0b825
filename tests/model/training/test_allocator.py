"""On CPU the trainer keeps freed activations in the process (glibc mallopt), so a step no longer page-faults
its activations in again; ``LADDER_MALLOC_TUNING=0`` leaves malloc as it was."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.model.training.tiny_runs import REPO, subprocess_env

# one process measures malloc as it was, then tuned: the tuning acts on the allocations after it
CODE = """
import resource, sys, torch
from ladder.model.shape import ModelShape
from ladder.model.hardware import tune_cpu_allocator
from ladder.model.training.llama import build_model
from ladder.model.training.loss import CausalLMLoss
torch.set_num_threads(1)
s = ModelShape(d_model=64, n_layers=2, n_heads=4, n_kv_heads=4, head_dim=16, ffn_dim=176, vocab_size=512, tied=True,
               max_seq_len=256)
model = build_model(s, seed=0); loss = CausalLMLoss(model)
opt = torch.optim.AdamW(model.parameters(), fused=True)
x = torch.randint(0, 512, (16, 257))
def step():
    (loss(x) / x.numel()).backward(); opt.step(); opt.zero_grad(set_to_none=True)
def median_faults():
    for _ in range(3):
        step()
    per_step = []
    for _ in range(10):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        step()
        per_step.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    # the median step: the kernel's own occasional faults (NUMA hinting, compaction) hit single steps at random,
    # an untuned malloc faults in every step's activations
    return sorted(per_step)[len(per_step) // 2]
untuned = median_faults()
tuned = tune_cpu_allocator()
print(tuned, untuned, median_faults())
"""


def faults_per_step() -> tuple[bool, float, float]:
    """(tuned, median faults per step before the tuning, after it), in a fresh process."""
    env = dict(subprocess_env(), LADDER_MALLOC_TUNING="1")
    out = subprocess.run([sys.executable, "-c", CODE], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    tuned, before, after = out.stdout.split()
    return tuned == "True", float(before), float(after)


def glibc() -> bool:
    try:
        return sys.platform.startswith("linux") and "glibc" in os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError):
        return False


@pytest.mark.skipif(not glibc(), reason="glibc only")
def test_tuned_malloc_stops_the_page_faults_of_every_step():
    tuned, untuned_faults, faults = faults_per_step()
    assert tuned
    assert untuned_faults > 300  # every step maps its multi-MB activations afresh
    assert faults < untuned_faults / 10


def test_the_switch_leaves_malloc_alone(monkeypatch):
    from ladder.model import hardware

    monkeypatch.setattr(hardware, "_MALLOC_TUNED", False)
    monkeypatch.setenv(hardware.MALLOC_ENV, "0")
    assert hardware.tune_cpu_allocator() is False
